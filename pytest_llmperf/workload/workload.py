"""What a performance test asks for, resolved per concurrency and workload profile.

A marker declares the workload the way the seeds ran it (num_prompts, max_tokens,
max_seconds, possibly different per concurrency). The profile scales it: `full` is
the declaration, `nightly` and `smoke` shrink the number of prompts and the time cap
but keep max_tokens, so per-request behaviour (TPOT, acceptance) stays comparable.

A `Workload` is what both the plugin and `llmperf bench` run: `run_config()` turns it
into the runner's `RunConfig`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from pytest_llmperf.metrics.goodput import EXAMPLE, SLO_NAMES, SLOError, canonical_slos

if TYPE_CHECKING:  # pragma: no cover
    from pytest_llmperf.workload.config import RunConfig

# Keys a `@pytest.mark.llmperf(...)` may carry besides servers and tolerances.
WORKLOAD_KEYS = ("num_prompts", "max_tokens", "max_seconds", "warmup", "endpoint", "seed", "ignore_eos", "slos")

ENDPOINTS = ("completions", "chat")

# Warm-up requests before the measured window, unless the marker, --llmperf-warmup or
# `llmperf bench --warmup` says otherwise: "wave", a full wave of `concurrency` requests at
# the run's own concurrency, so the measured window starts at its steady batch size.
WAVE = "wave"
DEFAULT_WARMUP: int | str = WAVE

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
    warmup: int  # requests; warmup_count() turns "wave" into one
    endpoint: str = "completions"
    seed: int = 0
    ignore_eos: bool = False
    profile: str = "full"
    # SLOs for goodput, canonical ('ttft:500 tpot:50', ms); '' for none. Part of the
    # workload: a baseline's goodput was judged at its SLOs.
    slos: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The workload's values; `slos` only when given, so a workload without SLOs keys
        its baselines as it did before SLOs existed."""
        d = asdict(self)
        if not d["slos"]:
            del d["slos"]
        return d

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
            slos=self.slos,
        )


def warmup_count(value: int | str, concurrency: int) -> int:
    """Warm-up requests for `value` at `concurrency`: "wave" is `concurrency` of them."""
    return concurrency if value == WAVE else int(value)


def _whole(minimum: int | None) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return "a whole number" + (f" >= {minimum}" if minimum is not None else "")
        if minimum is not None and value < minimum:
            return f"a whole number >= {minimum}"
        return None

    return check


def _seconds(value: Any) -> str | None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return None if value is None or (number and 0 < value < math.inf) else "a number of seconds > 0, or None for no cap"


def _warmup(value: Any) -> str | None:
    return None if value == WAVE or _whole(0)(value) is None else f"a whole number >= 0, or {WAVE!r} (one per stream)"


def _endpoint(value: Any) -> str | None:
    return None if value in ENDPOINTS else "'completions' or 'chat'"


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "True or False"


def _slos(value: Any) -> str | None:
    if value is None:
        return None
    use = f"KEY:VALUE pairs in ms as vLLM's --goodput takes them (e.g. '{EXAMPLE}'), or None for none"
    if not isinstance(value, str):
        return use
    try:
        canonical_slos(value)
    except SLOError as exc:
        return f"{use}; {exc}"
    return None


# What each workload key takes (None: fine; else what to use instead), and what it is.
_CHECKS: dict[str, tuple[Callable[[Any], str | None], str]] = {
    "num_prompts": (_whole(1), "measured requests"),
    "max_tokens": (_whole(1), "output tokens per request"),
    "max_seconds": (_seconds, "the time cap"),
    "warmup": (_warmup, "warm-up requests before the measured window"),
    "endpoint": (_endpoint, "the OpenAI endpoint"),
    "seed": (_whole(None), "the sampling seed"),
    "ignore_eos": (_flag, "whether to generate past the end of sequence"),
    "slos": (_slos, "the SLOs goodput is judged at"),
}


def check_concurrency(concurrency: Any) -> None:
    """ValueError unless `concurrency` is a whole number >= 1."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a whole number >= 1, got {concurrency!r}")


def check_workload(declared: Mapping[str, Any]) -> None:
    """Every key known and every value of the right kind, per-concurrency entries included:
    ValueError naming the key, the value and what to use. Nothing is coerced: 12.5
    prompts or "-1" warm-up requests are mistakes, not numbers to round."""
    unknown = set(declared) - set(WORKLOAD_KEYS)
    if unknown:
        raise ValueError(f"llmperf marker: unknown workload key(s) {sorted(unknown)}; known: {list(WORKLOAD_KEYS)}")
    for key, value in declared.items():
        if not isinstance(value, Mapping):
            _check_value(key, value, f"{key}={value!r}")
            continue
        if not value:
            raise ValueError(
                f"llmperf marker: {key}={{}} has no entries; give a value, or one per concurrency ({{8: ...}})"
            )
        if key == "slos" and set(value) & set(SLO_NAMES):
            pairs = " ".join(f"{name}:{ms}" for name, ms in value.items())
            raise ValueError(
                f"llmperf marker: slos={dict(value)!r}: SLOs are vLLM's --goodput text, not a dict; write "
                f"slos={pairs!r} (a dict here gives the SLOs per concurrency: {{8: 'ttft:500', 'default': ...}})"
            )
        for level, entry in value.items():
            if level != "default":
                try:
                    check_concurrency(level)
                except ValueError:
                    raise ValueError(
                        f"llmperf marker: {key}={dict(value)!r}: key {level!r} is no concurrency; "
                        "use whole numbers >= 1 (and 'default' for the others)"
                    ) from None
            _check_value(
                key,
                entry,
                f"{key}={dict(value)!r}: the value for {'concurrency ' if level != 'default' else ''}{level}",
            )


def _check_value(key: str, value: Any, where: str) -> None:
    check, meaning = _CHECKS[key]
    use = check(value)
    if use is not None:
        raise ValueError(f"llmperf marker: {where}: {key} ({meaning}) takes {use}")


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


def resolve_workload(
    declared: Mapping[str, Any],
    concurrency: int,
    profile: str = "full",
    warmup: int | str = DEFAULT_WARMUP,
    slos: str = "",
) -> Workload:
    """The concrete workload for one concurrency; ValueError names any bad key or value.
    `warmup`, `slos`: what the marker gives none of takes (--llmperf-warmup, --llmperf-slos);
    the marker's `slos=None` means none."""
    check_workload(declared)
    check_concurrency(concurrency)
    if profile not in PROFILE_SCALE and profile != "full":
        raise ValueError(f"unknown workload profile {profile!r}; use smoke, nightly or full")
    values = {k: _per_concurrency(v, concurrency, k) for k, v in declared.items()}
    num_prompts: int = values.get("num_prompts", 200)
    max_seconds: float | None = values.get("max_seconds")
    max_seconds = float(max_seconds) if max_seconds is not None else None
    if profile in PROFILE_SCALE:
        per_stream, minimum, cap = PROFILE_SCALE[profile]
        num_prompts = min(num_prompts, max(per_stream * concurrency, minimum))
        max_seconds = min(max_seconds, cap) if max_seconds is not None else cap
    return Workload(
        concurrency=concurrency,
        num_prompts=num_prompts,
        max_tokens=values.get("max_tokens", 256),
        max_seconds=max_seconds,
        warmup=warmup_count(values.get("warmup", warmup), concurrency),
        endpoint=values.get("endpoint", "completions"),
        seed=values.get("seed", 0),
        ignore_eos=values.get("ignore_eos", False),
        profile=profile,
        slos=canonical_slos(values["slos"] if "slos" in values else slos),
    )
