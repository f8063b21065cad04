"""What a performance test asks for, resolved per concurrency and workload profile
(`nightly` and `smoke` shrink the prompts and time cap, never max_tokens). A `Workload`
is what both the plugin and `llmperf bench` run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from pytest_llmperf.metrics.goodput import EXAMPLE, SLO_NAMES, canonical_slos
from pytest_llmperf.util.values import SWITCH, TIME_CAP, BadValue, Value, one_of, or_word, whole
from pytest_llmperf.workload.random_dataset import RANGE_RATIO

if TYPE_CHECKING:  # pragma: no cover
    from pytest_llmperf.workload.config import RunConfig

SHAREGPT, RANDOM, CUSTOM = "sharegpt", "random", "custom"  # as `vllm bench serve --dataset-name`
DATASET_NAMES = (SHAREGPT, RANDOM, CUSTOM)
# vLLM's --random-* settings; random_output_len is max_tokens by another name.
RANDOM_KEYS = ("random_input_len", "random_output_len", "random_range_ratio", "random_prefix_len")

# Keys a `@pytest.mark.llmperf(...)` may carry besides servers and tolerances.
WORKLOAD_KEYS = (
    "num_prompts",
    "max_tokens",
    "max_seconds",
    "warmup",
    "endpoint",
    "seed",
    "ignore_eos",
    "dataset_name",
    "dataset_path",
    *RANDOM_KEYS,
    "slos",
)

ENDPOINTS = ("completions", "chat")

# Default warm-up: one wave of `concurrency` requests, so measuring starts at the steady batch.
WAVE = "wave"
DEFAULT_WARMUP: int | str = WAVE

# profile -> (prompts per stream, minimum prompts, time cap from each concurrency up);
# docs/verdicts.md says where the nightly caps come from.
PROFILE_SCALE: dict[str, tuple[int, int, dict[int, float]]] = {
    "smoke": (4, 16, {1: 60.0}),
    "nightly": (16, 64, {1: 60.0, 8: 100.0, 16: 150.0}),
}


def profile_scale(profile: str, concurrency: int) -> tuple[int, int, float]:
    """Profile `profile`'s prompts per stream, minimum prompts and time cap at `concurrency`."""
    per_stream, minimum, caps = PROFILE_SCALE[profile]
    return per_stream, minimum, caps[max(c for c in caps if c <= concurrency)]


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
    dataset_name: str = SHAREGPT
    # The file as given (None: ShareGPT's default places); never in to_dict(): committed
    # baselines must not carry this machine's paths.
    dataset_path: str | None = None
    random_input_len: int | None = None  # the random dataset's settings (None for the others)
    random_range_ratio: float | None = None
    random_prefix_len: int | None = None
    slos: str = ""  # canonical SLOs for goodput ('ttft:500 tpot:50'); '' for none

    def to_dict(self) -> dict[str, Any]:
        """What the test asked for, as baselines key it; keys added later (dataset name,
        random settings, slos) only where they apply, so older baselines still match."""
        d = asdict(self)
        path = d.pop("dataset_path")
        if self.dataset_name != RANDOM:
            for key in ("random_input_len", "random_range_ratio", "random_prefix_len"):
                d.pop(key)
        if self.dataset_name == SHAREGPT:
            d.pop("dataset_name")
        elif self.dataset_name == CUSTOM:
            d["dataset_file"] = PurePath(str(path)).name
        if not d["slos"]:
            del d["slos"]
        return d

    @property
    def per_request_max_tokens(self) -> bool:
        """Whether each prompt carries its own max_tokens instead of one for all."""
        return self.dataset_name != SHAREGPT

    @property
    def prompts_needed(self) -> int:
        """Prompts to sample: the measured ones, then distinct ones for the warm-up (so a
        prefix cache does not speed up measured prompts)."""
        return self.num_prompts + self.warmup

    def run_config(self, clock_speed: float = 1.0, progress: bool = True) -> RunConfig:
        """The runner's config on a server whose clock runs `clock_speed` times faster than
        real time (the simulator's): the time cap shrinks with it."""
        from pytest_llmperf.workload.config import RunConfig

        return RunConfig(
            concurrency=self.concurrency,
            num_prompts=self.num_prompts,
            max_seconds=self.max_seconds / clock_speed if self.max_seconds else None,
            max_tokens=None if self.per_request_max_tokens else self.max_tokens,
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


# Values the marker, the plugin's options and `llmperf bench` take alike.
WARMUP = or_word(whole(0), WAVE, "(one per stream)")
DATASET_NAME = one_of(DATASET_NAMES, " or ".join(repr(n) for n in DATASET_NAMES))


def _slo_text(value: Any) -> bool:
    if isinstance(value, str):
        canonical_slos(value)  # SLOError says what is wrong with it
    return value is None or isinstance(value, str)


# What each workload key takes, and what it is.
_CHECKS: dict[str, tuple[Value[Any], str]] = {
    "num_prompts": (whole(1), "measured requests"),
    "max_tokens": (whole(1), "output tokens per request"),
    "max_seconds": (TIME_CAP, "the time cap"),
    "warmup": (WARMUP, "warm-up requests before the measured window"),
    "endpoint": (one_of(ENDPOINTS, "'completions' or 'chat'"), "the OpenAI endpoint"),
    "seed": (whole(), "the sampling seed"),
    "ignore_eos": (SWITCH, "whether to generate past the end of sequence"),
    "slos": (
        Value(f"KEY:VALUE pairs in ms as vLLM's --goodput takes them (e.g. '{EXAMPLE}'), or None for none", _slo_text),
        "the SLOs goodput is judged at",
    ),
    "dataset_name": (DATASET_NAME, "the dataset, as vllm bench serve --dataset-name"),
    "dataset_path": (
        Value("a file path (a non-empty string)", lambda v: isinstance(v, str) and bool(v.strip())),
        "the dataset's file (ShareGPT JSON, or custom JSONL)",
    ),
    "random_input_len": (whole(0), "the random dataset's prompt tokens"),
    "random_output_len": (whole(1), "the random dataset's output tokens (max_tokens)"),
    "random_range_ratio": (RANGE_RATIO, "the random dataset's spread of lengths"),
    "random_prefix_len": (whole(0), "the random dataset's shared prefix tokens"),
}


# Where workload values come from, for the messages: a test's marker, or llmperf.run()'s arguments.
MARKER = "llmperf marker"


class _WorkloadError(ValueError):
    """A workload value that cannot be used; the callers prefix where it came from."""


def check_concurrency(concurrency: Any) -> None:
    """ValueError unless `concurrency` is a whole number >= 1."""
    whole(1).require(concurrency, "concurrency")


def check_workload(declared: Mapping[str, Any], where: str = MARKER) -> None:
    """Every key known and every value of the right kind, per-concurrency entries included,
    else ValueError naming `where`. Nothing is coerced: 12.5 prompts is a mistake."""
    try:
        _check_workload(declared)
    except _WorkloadError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _check_workload(declared: Mapping[str, Any]) -> None:
    unknown = set(declared) - set(WORKLOAD_KEYS)
    if unknown:
        raise _WorkloadError(f"unknown workload key(s) {sorted(unknown)}; known: {list(WORKLOAD_KEYS)}")
    for key, value in declared.items():
        if not isinstance(value, Mapping):
            _check_value(key, value, f"{key}={value!r}")
            continue
        if not value:
            raise _WorkloadError(f"{key}={{}} has no entries; give a value, or one per concurrency ({{8: ...}})")
        if key == "slos" and set(value) & set(SLO_NAMES):
            pairs = " ".join(f"{name}:{ms}" for name, ms in value.items())
            raise _WorkloadError(
                f"slos={dict(value)!r}: SLOs are vLLM's --goodput text, not a dict; write "
                f"slos={pairs!r} (a dict here gives the SLOs per concurrency: {{8: 'ttft:500', 'default': ...}})"
            )
        for level, entry in value.items():
            if level != "default":
                try:
                    check_concurrency(level)
                except ValueError:
                    raise _WorkloadError(
                        f"{key}={dict(value)!r}: key {level!r} is no concurrency; "
                        "use whole numbers >= 1 (and 'default' for the others)"
                    ) from None
            _check_value(
                key,
                entry,
                f"{key}={dict(value)!r}: the value for {'concurrency ' if level != 'default' else ''}{level}",
            )


def _check_value(key: str, value: Any, where: str) -> None:
    parse, meaning = _CHECKS[key]
    try:
        parse.check(value)
    except BadValue as exc:
        raise _WorkloadError(f"{where}: {key} ({meaning}) takes {exc.takes}{exc.more}") from None


def _per_concurrency(value: Any, concurrency: int, key: str) -> Any:
    if isinstance(value, Mapping):
        if concurrency in value:
            return value[concurrency]
        if "default" in value:
            return value["default"]
        raise _WorkloadError(
            f"{key}={dict(value)!r} has no entry for concurrency {concurrency} "
            f"(add {concurrency}: ... or 'default': ...)"
        )
    return value


def declared_datasets(declared: Mapping[str, Any], default_name: str) -> list[tuple[str, str | None]]:
    """The (dataset name, file) pairs a marker may read at any concurrency, for a test whose
    concurrency collection cannot tell (None: the file the session finds for that name)."""

    def values(key: str, fallback: Any) -> list[Any]:
        value = declared.get(key, fallback)
        return list(value.values()) if isinstance(value, Mapping) else [value]

    names = values("dataset_name", default_name)
    paths = values("dataset_path", None)
    return sorted({(n, None if n == RANDOM else p) for n in names for p in paths}, key=str)


def resolve_workload(
    declared: Mapping[str, Any],
    concurrency: int,
    profile: str = "full",
    warmup: int | str = DEFAULT_WARMUP,
    slos: str = "",
    dataset: tuple[str, str | None] = (SHAREGPT, None),
    where: str = MARKER,
) -> Workload:
    """The concrete workload for one concurrency; ValueError names `where`. `warmup`,
    `slos` and `dataset` (name, file) apply where the marker gives none; the file is
    only read for a marker of that dataset."""
    try:
        return _resolve(declared, concurrency, profile, warmup, slos, dataset)
    except _WorkloadError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _resolve(
    declared: Mapping[str, Any],
    concurrency: int,
    profile: str,
    warmup: int | str,
    slos: str,
    dataset: tuple[str, str | None],
) -> Workload:
    _check_workload(declared)
    check_concurrency(concurrency)
    if profile not in PROFILE_SCALE and profile != "full":
        raise ValueError(f"unknown workload profile {profile!r}; use smoke, nightly or full")
    values = {k: _per_concurrency(v, concurrency, k) for k, v in declared.items()}
    num_prompts: int = values.get("num_prompts", 200)
    max_seconds: float | None = values.get("max_seconds")
    max_seconds = float(max_seconds) if max_seconds is not None else None
    if profile in PROFILE_SCALE:
        per_stream, minimum, cap = profile_scale(profile, concurrency)
        num_prompts = min(num_prompts, max(per_stream * concurrency, minimum))
        max_seconds = min(max_seconds, cap) if max_seconds is not None else cap
    name, choice = _dataset_choice(values, dataset)
    return Workload(
        concurrency=concurrency,
        num_prompts=num_prompts,
        max_tokens=choice.pop("max_tokens", values.get("max_tokens", 256)),
        max_seconds=max_seconds,
        warmup=warmup_count(values.get("warmup", warmup), concurrency),
        endpoint=values.get("endpoint", "completions"),
        seed=values.get("seed", 0),
        # vLLM's bench turns --ignore-eos on for the random dataset, so replies run to length.
        ignore_eos=values.get("ignore_eos", name == RANDOM),
        profile=profile,
        slos=canonical_slos(values["slos"] if "slos" in values else slos),
        dataset_name=name,
        **choice,
    )


def _dataset_choice(values: Mapping[str, Any], default: tuple[str, str | None]) -> tuple[str, dict[str, Any]]:
    """The dataset's name and its Workload fields (ValueError when they do not fit together)."""
    default_name, default_path = default
    name = values.get("dataset_name", default_name)
    if name not in DATASET_NAMES:
        raise ValueError(f"dataset name {name!r} is unknown; use {DATASET_NAME.takes}")
    given = [key for key in RANDOM_KEYS if key in values]
    if name != RANDOM and given:
        raise _WorkloadError(
            f"{', '.join(given)} apply to dataset_name='random' only (this test's dataset is "
            f"{name!r}); add dataset_name='random', or remove them"
        )
    if name == RANDOM:
        if "dataset_path" in values:
            raise _WorkloadError(
                "dataset_path does not apply to dataset_name='random' (its prompts are generated); remove it"
            )
        output, max_tokens = values.get("random_output_len"), values.get("max_tokens")
        if output is not None and max_tokens is not None and output != max_tokens:
            raise _WorkloadError(
                f"random_output_len={output} and max_tokens={max_tokens} differ; the random "
                "dataset's output length is max_tokens: give one of them"
            )
        from pytest_llmperf.workload.random_dataset import RandomSettings

        choice: dict[str, Any] = {
            "random_input_len": values.get("random_input_len", 1024),
            "random_range_ratio": float(values.get("random_range_ratio", 0.0)),
            "random_prefix_len": values.get("random_prefix_len", 0),
        }
        settings = RandomSettings(
            input_len=choice["random_input_len"],
            range_ratio=choice["random_range_ratio"],
            prefix_len=choice["random_prefix_len"],
        )
        settings.bounds()  # a prompt of no tokens is an error now, not when a server runs
        if output is not None:
            choice["max_tokens"] = output
        return name, choice
    # Without its own, the session resolves the default file (its path stays out of the workload).
    path = values.get("dataset_path")
    if name == CUSTOM and path is None and not (name == default_name and default_path):
        raise _WorkloadError(
            "dataset_name='custom' needs its JSONL file: dataset_path='prompts.jsonl' in the "
            "marker, or --llmperf-dataset-name custom with --llmperf-dataset FILE"
        )
    return name, {"dataset_path": path}
