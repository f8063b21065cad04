"""GPU facts for provenance: parse `nvidia-smi` CSV, sample peak memory during a run.
The caller runs the query (inside the server's container); this only parses text."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

# One line per GPU: "NVIDIA H200, 570.124.06, 97012, 143771" (memory in MiB).
NVIDIA_SMI_QUERY: tuple[str, ...] = (
    "nvidia-smi",
    "--query-gpu=name,driver_version,memory.used,memory.total",
    "--format=csv,noheader,nounits",
)

# What nvidia-smi prints where a value is unknown (MIG slices, some SKUs).
_UNKNOWN = {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", ""}


@dataclass(frozen=True)
class GpuInfo:
    name: str
    driver_version: str
    memory_used_mib: int | None
    memory_total_mib: int | None


def _mib(field: str, line: str) -> int | None:
    value = field.strip()
    if value in _UNKNOWN:
        return None
    try:
        return int(float(value))
    except ValueError:
        raise ValueError(f"nvidia-smi memory value {value!r} is not a number in line {line!r}") from None


def parse_nvidia_smi_csv(text: str) -> list[GpuInfo]:
    """Parse the output of NVIDIA_SMI_QUERY; ValueError names a line not of that format."""
    gpus: list[GpuInfo] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        # The name comes first and may itself contain commas; the last three never do.
        parts = line.rsplit(",", 3)
        if len(parts) != 4:
            raise ValueError(f"expected 4 comma-separated fields (name, driver, used, total), got {line!r}")
        name, driver, used, total = (p.strip() for p in parts)
        if not name or name in _UNKNOWN:
            raise ValueError(f"nvidia-smi line has no GPU name: {line!r}")
        gpus.append(GpuInfo(name, driver, _mib(used, line), _mib(total, line)))
    return gpus


def gpu_provenance(gpus: Sequence[GpuInfo]) -> dict[str, Any]:
    """The provenance fields baselines key on: name, driver, count, memory per GPU."""
    if not gpus:
        return {"gpu_count": 0}
    names = sorted({g.name for g in gpus})
    drivers = sorted({g.driver_version for g in gpus})
    return {
        # A mixed box is unusual enough to show every name rather than pick one.
        "gpu_name": names[0] if len(names) == 1 else " + ".join(names),
        "gpu_driver": drivers[0] if len(drivers) == 1 else " + ".join(drivers),
        "gpu_count": len(gpus),
        "gpu_memory_total_mib": gpus[0].memory_total_mib,
    }


class PeakMemorySampler:
    """Calls `read()` (nvidia-smi CSV) every `interval` seconds in a thread and keeps the
    peak of the summed used memory; a failing read is counted, never raised."""

    def __init__(self, read: Callable[[], str], interval: float = 2.0) -> None:
        if interval <= 0:
            raise ValueError(f"sampling interval must be > 0 seconds, got {interval}")
        self._read = read
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.peak_total_mib: int | None = None
        self.peak_per_gpu_mib: list[int] = []
        self.samples = 0
        self.errors = 0
        self.last_error: str | None = None

    def sample_once(self) -> None:
        try:
            gpus = parse_nvidia_smi_csv(self._read())
        except Exception as exc:  # noqa: BLE001 - any failure only costs a sample
            with self._lock:
                self.errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
            return
        used = [g.memory_used_mib for g in gpus]
        with self._lock:
            self.samples += 1
            known = [u for u in used if u is not None]
            if known:
                total = sum(known)
                if self.peak_total_mib is None or total > self.peak_total_mib:
                    self.peak_total_mib = total
            if len(self.peak_per_gpu_mib) < len(used):
                self.peak_per_gpu_mib += [0] * (len(used) - len(self.peak_per_gpu_mib))
            for i, u in enumerate(used):
                if u is not None and u > self.peak_per_gpu_mib[i]:
                    self.peak_per_gpu_mib[i] = u

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample_once()
            self._stop.wait(self._interval)

    def start(self) -> PeakMemorySampler:
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        self._thread = threading.Thread(target=self._loop, name="llmperf-gpu-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        """Stop sampling (one last sample first) and return the provenance fields."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=self._interval + 30)
            self._thread = None
            self.sample_once()
        return self.result()

    def result(self) -> dict[str, Any]:
        with self._lock:
            return {
                "peak_gpu_memory_mib": self.peak_total_mib,
                "peak_gpu_memory_per_gpu_mib": list(self.peak_per_gpu_mib),
                "gpu_memory_samples": self.samples,
            }


@contextmanager
def sampling_peak_memory(read: Callable[[], str], interval: float = 2.0) -> Iterator[dict[str, Any]]:
    """Sample while the block runs; the yielded dict receives the peak figures when it exits."""
    figures: dict[str, Any] = {}
    sampler = PeakMemorySampler(read, interval=interval).start()
    try:
        yield figures
    finally:
        figures.update(sampler.stop())


def combine_peaks(*windows: Mapping[str, Any]) -> dict[str, Any]:
    """The peak figures of several sampling windows as one (highest peaks, all samples); a
    mapping that never sampled counts for nothing, so nothing sampled gives {}."""
    sampled = [w for w in windows if "gpu_memory_samples" in w]
    if not sampled:
        return {}
    per_gpu: list[int] = []
    for window in sampled:
        for i, used in enumerate(window.get("peak_gpu_memory_per_gpu_mib") or []):
            if i < len(per_gpu):
                per_gpu[i] = max(per_gpu[i], used)
            else:
                per_gpu.append(used)
    combined: dict[str, Any] = {
        "peak_gpu_memory_per_gpu_mib": per_gpu,
        "gpu_memory_samples": sum(int(w["gpu_memory_samples"]) for w in sampled),
    }
    peaks = [w["peak_gpu_memory_mib"] for w in sampled if w.get("peak_gpu_memory_mib") is not None]
    if peaks:
        combined["peak_gpu_memory_mib"] = max(peaks)
    return combined
