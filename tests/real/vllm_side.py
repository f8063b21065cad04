"""Run by the prepared vLLM venv's python, never imported by the project: vLLM's own
ShareGPT sampler and tokenizer, for tests/real/test_vllm_bench_fidelity.py.

    PYTHON vllm_side.py sample OUT.json -- BENCH-SERVE-ARGS... [-- BENCH-SERVE-ARGS...]
        parses each BENCH-SERVE-ARGS with `vllm bench serve`'s own parser and samples with
        its own `get_samples(args, tokenizer)` (the tokenizer as serve.py builds it);
        writes one list per argument set, [{"sha256", "prompt_len", "output_len"}, ...]
        in request order, to OUT.json (one import of vllm for all of them).
    PYTHON vllm_side.py metrics IN.json OUT.json
        IN.json: {"duration": s, "percentiles": [...], "outputs": [{success, prompt_len,
        output_tokens, ttft, itl, latency, start_time}, ...], "goodput": {"ttft": ms, ...}},
        one run's raw requests in vLLM's RequestFuncOutput terms (goodput: the SLOs, as
        `--goodput` parses them; optional); OUT.json: vLLM's own `calculate_metrics` over
        them (its BenchmarkMetrics as a dict), so a definition can be compared without noise.
    PYTHON vllm_side.py count TOKENIZER
        reads one JSON list of texts per stdin line, answers `COUNTS [n, ...]` per line:
        len(tokenizer(text).input_ids), the count vLLM's sampler filters on (and what the
        server's POST /tokenize returns with its default add_special_tokens).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sample(out: str, arg_sets: list[list[str]]) -> None:
    results = [_sample(args) for args in arg_sets]
    with open(out, "w", encoding="utf-8") as f:
        json.dump(results, f)


def _sample(bench_args: list[str]) -> list[dict[str, object]]:
    import numpy as np
    from vllm.benchmarks.serve import add_cli_args, get_samples
    from vllm.tokenizers import get_tokenizer
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args(bench_args)
    tokenizer = get_tokenizer(
        args.tokenizer or args.model, tokenizer_mode=args.tokenizer_mode, trust_remote_code=args.trust_remote_code
    )
    random.seed(args.seed)  # as serve.py's main_async does before sampling
    np.random.seed(args.seed)
    samples = get_samples(args, tokenizer)
    return [
        {"sha256": _sha(s.prompt), "prompt_len": s.prompt_len, "output_len": s.expected_output_len} for s in samples
    ]


def metrics(src: str, out: str) -> None:
    import dataclasses
    import io
    from contextlib import redirect_stdout

    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput
    from vllm.benchmarks.serve import calculate_metrics

    with open(src, encoding="utf-8") as f:
        data = json.load(f)
    outputs = [RequestFuncOutput(**o) for o in data["outputs"]]
    with redirect_stdout(io.StringIO()):  # its termplot tip and failure lines
        result, _lens = calculate_metrics(
            input_requests=[],
            outputs=outputs,
            dur_s=data["duration"],
            tokenizer=None,
            selected_percentiles=data["percentiles"],
            goodput_config_dict=data.get("goodput") or {},
        )
    with open(out, "w", encoding="utf-8") as f:
        json.dump(dataclasses.asdict(result), f, default=float)


def count(tokenizer_path: str) -> None:
    from vllm.tokenizers import get_tokenizer

    tokenizer = get_tokenizer(tokenizer_path)
    print("READY", flush=True)
    for line in sys.stdin:
        texts = json.loads(line)
        print("COUNTS " + json.dumps([len(tokenizer(t).input_ids) for t in texts]), flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "sample":
        sets: list[list[str]] = []
        for arg in sys.argv[3:]:
            if arg == "--":
                sets.append([])
            else:
                sets[-1].append(arg)
        sample(sys.argv[2], sets)
    elif mode == "metrics":
        metrics(sys.argv[2], sys.argv[3])
    elif mode == "count":
        count(sys.argv[2])
    else:
        raise SystemExit(f"unknown mode {mode!r}: sample, metrics or count")
