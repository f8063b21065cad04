"""What a performance test asks for, resolved per concurrency and workload profile.

A marker declares the workload the way the seeds ran it (num_prompts, max_tokens,
max_seconds, possibly different per concurrency). The profile scales it: `full` is
the declaration, `nightly` and `smoke` shrink the number of prompts and the time cap
but keep max_tokens, so per-request behaviour (TPOT, acceptance) stays comparable.

A `Workload` is what both the plugin and `llmperf bench` run: `run_config()` turns it
into the runner's `RunConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pytest_llmperf.workload.config import RunConfig

# Keys a `@pytest.mark.llmperf(...)` may carry besides servers and tolerances.
WORKLOAD_KEYS = ("num_prompts", "max_tokens", "max_seconds", "warmup", "endpoint", "seed", "ignore_eos")

# Warm-up requests before the measured window, unless the marker or --warmup says otherwise.
DEFAULT_WARMUP = 2

# profile -> (prompts per concurrent stream, minimum prompts, time cap in seconds)
PROFILE_SCALE = {
    "smoke": (4, 16, 60.0),
    "nightly": (16, 64, 150.0),
}


@dataclass(frozen=True)
class Workload:
    concurrency: int
    num_prompts: int
    max_tokens: int
    max_seconds: float | None
    warmup: int = DEFAULT_WARMUP
    endpoint: str = "completions"
    seed: int = 0
    ignore_eos: bool = False
    profile: str = "full"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def prompts_needed(self) -> int:
        """Prompts to sample: the measured ones, then distinct ones for the warm-up (the
        runner takes warm-up prompts from beyond the measured ones, so a prefix cache
        does not speed up measured prompts)."""
        return self.num_prompts + self.warmup

    def run_config(self, clock_speed: float = 1.0, progress: bool = True) -> RunConfig:
        """The runner's config for this workload on a server whose clock runs `clock_speed`
        times faster than real time (the simulator's): the time cap shrinks with it.

        The sampling seed also seeds the arrival pacing, so the result's config["seed"]
        is the seed that chose the prompts.
        """
        from pytest_llmperf.workload.config import RunConfig

        return RunConfig(
            concurrency=self.concurrency,
            num_prompts=self.num_prompts,
            max_seconds=self.max_seconds / clock_speed if self.max_seconds else None,
            max_tokens=self.max_tokens,
            warmup_requests=self.warmup,
            endpoint=self.endpoint,
            seed=self.seed,
            ignore_eos=self.ignore_eos,
            progress=progress,
        )


def _per_concurrency(value: Any, concurrency: int, key: str) -> Any:
    if isinstance(value, Mapping):
        if concurrency in value:
            return value[concurrency]
        if "default" in value:
            return value["default"]
        raise ValueError(
            f"llmperf marker: {key}={dict(value)!r} has no entry for concurrency {concurrency} "
            f"(add {concurrency}: ... or 'default': ...)"
        )
    return value


def resolve_workload(declared: Mapping[str, Any], concurrency: int, profile: str = "full") -> Workload:
    """The concrete workload for one concurrency; ValueError names any bad key."""
    unknown = set(declared) - set(WORKLOAD_KEYS)
    if unknown:
        raise ValueError(f"llmperf marker: unknown workload key(s) {sorted(unknown)}; known: {list(WORKLOAD_KEYS)}")
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a whole number >= 1, got {concurrency!r}")
    values = {k: _per_concurrency(v, concurrency, k) for k, v in declared.items()}
    num_prompts = int(values.get("num_prompts", 200))
    max_tokens = int(values.get("max_tokens", 256))
    max_seconds = values.get("max_seconds")
    max_seconds = float(max_seconds) if max_seconds is not None else None
    if num_prompts < 1 or max_tokens < 1 or (max_seconds is not None and max_seconds <= 0):
        raise ValueError(
            f"llmperf marker: num_prompts and max_tokens must be >= 1 and max_seconds > 0 "
            f"(got {num_prompts}, {max_tokens}, {max_seconds})"
        )
    if profile in PROFILE_SCALE:
        per_stream, minimum, cap = PROFILE_SCALE[profile]
        num_prompts = min(num_prompts, max(per_stream * concurrency, minimum))
        max_seconds = min(max_seconds, cap) if max_seconds is not None else cap
    elif profile != "full":
        raise ValueError(f"unknown workload profile {profile!r}; use smoke, nightly or full")
    endpoint = str(values.get("endpoint", "completions"))
    if endpoint not in ("completions", "chat"):
        raise ValueError(f"llmperf marker: endpoint must be 'completions' or 'chat', got {endpoint!r}")
    return Workload(
        concurrency=concurrency,
        num_prompts=num_prompts,
        max_tokens=max_tokens,
        max_seconds=max_seconds,
        warmup=int(values.get("warmup", DEFAULT_WARMUP)),
        endpoint=endpoint,
        seed=int(values.get("seed", 0)),
        ignore_eos=bool(values.get("ignore_eos", False)),
        profile=profile,
    )
