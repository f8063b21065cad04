from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.gpu_info import (
    GpuInfo,
    PeakMemorySampler,
    combine_peaks,
    gpu_provenance,
    parse_nvidia_smi_csv,
    sampling_peak_memory,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_parses_single_idle_h200():
    gpus = parse_nvidia_smi_csv(fixture("nvidia-smi-h200-idle.csv"))
    assert gpus == [GpuInfo("NVIDIA H200", "570.133.20", 0, 143771)]


def test_parses_several_gpus_and_summarizes_provenance():
    gpus = parse_nvidia_smi_csv(fixture("nvidia-smi-h200-4gpu-loaded.csv"))
    assert [g.memory_used_mib for g in gpus] == [124115, 124099, 4, 4]
    assert gpu_provenance(gpus) == {
        "gpu_name": "NVIDIA H200",
        "gpu_driver": "570.133.20",
        "gpu_count": 4,
        "gpu_memory_total_mib": 143771,
    }


def test_unknown_memory_is_none_not_zero():
    (gpu,) = parse_nvidia_smi_csv(fixture("nvidia-smi-mig-na.csv"))
    assert gpu.name == "NVIDIA A100-SXM4-40GB MIG 3g.20gb"
    assert gpu.memory_used_mib is None and gpu.memory_total_mib is None


def test_name_with_comma_keeps_the_numeric_fields_right():
    (gpu,) = parse_nvidia_smi_csv("Odd, Name GPU, 535.1, 10, 20\n")
    assert gpu == GpuInfo("Odd, Name GPU", "535.1", 10, 20)


def test_blank_text_is_no_gpu():
    assert parse_nvidia_smi_csv("\n  \n") == []
    assert gpu_provenance([]) == {"gpu_count": 0}


@pytest.mark.parametrize(
    "name, needle",
    [
        ("nvidia-smi-no-driver.txt", "expected 4 comma-separated fields"),
        ("nvidia-smi-with-header-and-units.csv", "is not a number"),
    ],
)
def test_wrong_format_names_the_line(name, needle):
    with pytest.raises(ValueError, match=needle) as info:
        parse_nvidia_smi_csv(fixture(name))
    assert fixture(name).splitlines()[0][:20] in str(info.value)


def test_mixed_gpus_show_every_name():
    gpus = [GpuInfo("NVIDIA H200", "570", 1, 2), GpuInfo("NVIDIA H100", "570", 1, 2)]
    assert gpu_provenance(gpus)["gpu_name"] == "NVIDIA H100 + NVIDIA H200"


def test_sampler_keeps_peak_of_summed_memory_and_counts_errors():
    readings = iter(
        [
            "GPU, 1, 100, 1000\nGPU, 1, 50, 1000\n",  # total 150
            "GPU, 1, 300, 1000\nGPU, 1, 10, 1000\n",  # total 310: the peak
            "garbage",
            "GPU, 1, 200, 1000\nGPU, 1, 90, 1000\n",  # per-GPU peak of GPU 1 is 90
        ]
    )
    sampler = PeakMemorySampler(lambda: next(readings), interval=1.0)
    for _ in range(4):
        sampler.sample_once()
    assert sampler.result() == {
        "peak_gpu_memory_mib": 310,
        "peak_gpu_memory_per_gpu_mib": [300, 90],
        "gpu_memory_samples": 3,
    }
    assert sampler.errors == 1 and "expected 4" in sampler.last_error


def test_sampler_thread_samples_until_stopped():
    calls = threading.Semaphore(0)
    values = iter(range(10, 10_000, 10))

    def read() -> str:
        calls.release()
        return f"GPU, 1, {next(values)}, 99999\n"

    sampler = PeakMemorySampler(read, interval=0.01).start()
    for _ in range(3):
        assert calls.acquire(timeout=5)
    result = sampler.stop()
    assert result["gpu_memory_samples"] >= 4  # three in the loop, one final
    assert result["peak_gpu_memory_mib"] == 10 * result["gpu_memory_samples"]


def test_sampler_rejects_bad_interval():
    with pytest.raises(ValueError, match="interval"):
        PeakMemorySampler(lambda: "", interval=0)


def test_sampling_window_fills_its_dict_when_the_block_exits_even_on_error():
    reading = ["GPU, 1, 100, 1000\n"]
    with pytest.raises(KeyboardInterrupt):
        with sampling_peak_memory(lambda: reading[0], interval=3600) as peak:
            assert peak == {}  # nothing until the window closes
            reading[0] = "GPU, 1, 700, 1000\n"  # the run's load; the closing sample sees it
            raise KeyboardInterrupt
    assert peak["peak_gpu_memory_mib"] == 700 and peak["gpu_memory_samples"] >= 1


def test_combine_peaks_keeps_the_highest_and_counts_every_sample():
    first = {"peak_gpu_memory_mib": 310, "peak_gpu_memory_per_gpu_mib": [300, 10], "gpu_memory_samples": 2}
    second = {"peak_gpu_memory_mib": 290, "peak_gpu_memory_per_gpu_mib": [200, 90], "gpu_memory_samples": 3}
    provenance = {"gpu_name": "NVIDIA H200"}  # before the first run: nothing sampled yet
    assert combine_peaks(provenance, first) == first
    assert combine_peaks(first, second) == {
        "peak_gpu_memory_mib": 310,
        "peak_gpu_memory_per_gpu_mib": [300, 90],
        "gpu_memory_samples": 5,
    }
    unreadable = {"peak_gpu_memory_mib": None, "peak_gpu_memory_per_gpu_mib": [], "gpu_memory_samples": 0}
    assert combine_peaks(provenance, unreadable) == {"peak_gpu_memory_per_gpu_mib": [], "gpu_memory_samples": 0}
    assert combine_peaks(provenance, {}) == {}  # no GPUs: nothing to add


def test_an_endpoint_without_gpus_samples_nothing():
    with Endpoint("http://127.0.0.1:1", "m", "sim").sample_peak_memory() as peak:
        pass
    assert peak == {}
