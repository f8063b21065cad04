"""The project against vLLM's own benchmark tools, on the real vLLM CPU build (issue 13).

- `test_samplers_pick_vllms_prompts`: `llmperf bench`'s sampler and the plugin's pick
  the prompts vLLM's ShareGPT sampler picks for the same dataset, seed, count and output
  length, prompt for prompt (no server: vLLM's sampler and tokenizer run in the venv).
- `test_llmperf_bench_measures_what_vllm_bench_serve_measures`: one real vLLM server,
  `vllm bench serve` and `llmperf bench` against it with the same settings; the same
  prompts, the same successes, and the same figures within stated tolerances.

vLLM's loader is `json.load` and cannot read the packaged ShareGPT copy (cut off
mid-record), so both tools read one file of its complete records (vllm_bench.py).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
from real_vllm_helpers import BASE, NGRAM, REPORT_LINES, serve
from vllm_bench import (
    VllmTokenCounter,
    complete_sharegpt_copy,
    llmperf_bench,
    vllm_bench_serve,
    vllm_metrics,
    vllm_samples,
)

from pytest_llmperf.metrics.prometheus import PROMPT_TOKENS, parse_snapshot
from pytest_llmperf.stats.quantiles import t_quantile
from pytest_llmperf.workload.result import RunResult

pytestmark = [pytest.mark.slow, pytest.mark.real_vllm]

NUM_PROMPTS = 64  # the samplers' check
# The tools' comparison: 32 prompts a run. 64 (the issue's setup) took 3 min a run, 45 min
# for both servers' 16 runs, on a 2-core AVX2-only CPU, and CI has 90 min for everything;
# the noise bound widens with the runs' spread, the exact checks stay exact.
BENCH_PROMPTS = 32
CONCURRENCY = 4
OUTPUT_LEN = 64
SEED = 0


@pytest.fixture(scope="module")
def complete_sharegpt(tmp_path_factory):
    path, records = complete_sharegpt_copy(tmp_path_factory.mktemp("sharegpt") / "sharegpt_complete.json")
    assert records > 10_000, f"only {records} complete records in the project's ShareGPT file"
    return path


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _ours(requests) -> list[dict]:
    return [
        {"sha256": _sha(r.prompt), "prompt_len": r.prompt_len, "output_len": r.expected_output_len} for r in requests
    ]


def _first_difference(vllm: list[dict], ours: list[dict]) -> str:
    for i, (v, o) in enumerate(zip(vllm, ours)):
        if v != o:
            return f"first difference at prompt {i}: vLLM {v}, ours {o}"
    return f"vLLM picked {len(vllm)}, ours {len(ours)}"


def _bench_args(dataset, *extra: str) -> list[str]:
    return ["--dataset-name", "sharegpt", "--dataset-path", str(dataset), "--num-prompts", str(NUM_PROMPTS), *extra]


# -------------------------------------------------------------------- sampling


def test_samplers_pick_vllms_prompts(prepared_vllm, complete_sharegpt, tmp_path, monkeypatch):
    """Same dataset, seed, count and output length: the same prompts, in the same order,
    with the same token counts, as vLLM's `get_samples` (what `vllm bench serve` runs):

    - `llmperf bench --max-tokens 64` (its sampler's output length defaults to
      --max-tokens) against `vllm bench serve --sharegpt-output-len 64`, at two seeds;
    - the plugin (reference completion lengths, PerfSession's own sampling path) against
      `vllm bench serve` without --sharegpt-output-len.

    Tokens are counted by vLLM's tokenizer in the venv for both (the server's /tokenize
    gives the same counts; the comparison test below checks that end to end). The warm-up
    prompts both of ours sample beyond the measured ones are not vLLM's concern: the
    measured ones are compared.
    """
    from pytest_llmperf.commands import cli
    from pytest_llmperf.measuring.prompt_book import PromptBook
    from pytest_llmperf.options import resolve_options
    from pytest_llmperf.servers.endpoint import Endpoint
    from pytest_llmperf.workload import dataset as ds
    from pytest_llmperf.workload import token_counts
    from pytest_llmperf.workload.workload import resolve_workload

    model_dir = prepared_vllm.model
    common = ["--model", "smollm2", "--tokenizer", str(model_dir)]
    t0 = time.monotonic()
    bench0, bench7, plugin0 = vllm_samples(
        prepared_vllm,
        tmp_path / "vllm_samples.json",
        [*common, *_bench_args(complete_sharegpt, "--seed", "0", "--sharegpt-output-len", str(OUTPUT_LEN))],
        [*common, *_bench_args(complete_sharegpt, "--seed", "7", "--sharegpt-output-len", str(OUTPUT_LEN))],
        [*common, *_bench_args(complete_sharegpt, "--seed", "0")],
    )
    vllm_s = time.monotonic() - t0
    counter = VllmTokenCounter(prepared_vllm, model_dir)
    try:
        # llmperf bench: its own argument parsing and sampling, the server's counter
        # swapped for vLLM's tokenizer (no server runs here).
        monkeypatch.setattr(ds, "ServerTokenCounter", lambda *args, **kwargs: counter)
        for seed, expected in ((0, bench0), (7, bench7)):
            args = cli.build_parser().parse_args(
                ["bench", "--base-url", "http://127.0.0.1:9", "--model", "smollm2", "--dataset", str(complete_sharegpt)]
                + ["--num-prompts", str(NUM_PROMPTS), "--concurrency", str(CONCURRENCY)]
                + ["--max-tokens", str(OUTPUT_LEN), "--seed", str(seed)]
            )
            requests, _info = cli.sample_requests(args)
            ours = _ours(requests[:NUM_PROMPTS])
            assert ours == expected, f"llmperf bench, seed {seed}: " + _first_difference(expected, ours)
            assert len(requests) == NUM_PROMPTS + CONCURRENCY  # + the warm-up wave, beyond the measured ones

        # The plugin: the session's prompts (its PromptBook), with reference completion lengths.
        monkeypatch.setattr(token_counts, "token_counter_for", lambda *args, **kwargs: (counter, "server"))
        options = resolve_options({"llmperf_sim": True, "llmperf_dataset": str(complete_sharegpt)}.get, lambda name: "")
        endpoint = Endpoint(base_url="http://127.0.0.1:9", model="smollm2", target="none")
        workload = resolve_workload({"num_prompts": NUM_PROMPTS, "max_tokens": OUTPUT_LEN}, CONCURRENCY)
        ours = _ours(PromptBook(options, tmp_path).requests_for(endpoint, workload)[:NUM_PROMPTS])
        assert ours == plugin0, "the plugin, reference lengths: " + _first_difference(plugin0, ours)
    finally:
        counter.close()
    # The two output-length modes really pick different prompts (else this proves less).
    assert [r["sha256"] for r in bench0] != [r["sha256"] for r in plugin0]
    print(
        f"\nsamplers agree with vLLM's ({vllm_s:.0f} s in vLLM's): 64 prompts at seeds 0 and 7 with output length "
        f"{OUTPUT_LEN} ({sum(r['prompt_len'] for r in bench0)} and {sum(r['prompt_len'] for r in bench7)} prompt "
        f"tokens), 64 at seed 0 with reference lengths ({sum(r['prompt_len'] for r in plugin0)} prompt tokens)"
    )


# -------------------------------------------------------------------- measuring

# The servers for the comparison: the real-engine tests' base and ngram servers without
# prefix caching, so whichever tool runs second does not find the other's prompts cached
# (their TTFT would drop by the whole prefill).
NO_CACHE = "--no-enable-prefix-caching"
FIDELITY = dataclasses.replace(BASE, name="smollm2-fidelity", args=(*BASE.args, NO_CACHE))
FIDELITY_NGRAM = dataclasses.replace(NGRAM, name="smollm2-ngram-fidelity", args=(*NGRAM.args, NO_CACHE))

# The figures compared, and the difference allowed before noise: the issue's 3 %.
FIGURES = ("output tok/s", "mean TTFT (ms)", "median TPOT (ms)", "median ITL (ms)", "median E2EL (ms)")
# Printed, not held to a bound. TTFT's median: over 32 requests in a closed loop of 4 the
# TTFTs cluster (4 requests in lockstep), the median falls in a gap between clusters, and
# the tools send the window's first 4 requests a little differently (vLLM's first request
# is prefilled with the other three in some runs, ours alone), which moves it 20-35 %
# while every other request's TTFT agrees to a few ms; the mean carries that, the median
# does not. The other means: a short reply stalled behind another's prefill makes a TPOT
# outlier that moves the mean TPOT by 20 % between runs of one tool.
SHOWN = ("median TTFT (ms)", "mean TPOT (ms)", "mean ITL (ms)", "mean E2EL (ms)")
BASE_TOLERANCE = 0.03
# ABBA: a drift in the machine's load cancels. With speculation twice: each tool has 4
# runs, so the spread between runs (6 degrees of freedom pooled) is an estimate, not a
# guess, and the figures are judged within it, where chunks of several tokens make the
# tools' definitions differ most. Without speculation once (CI's time): the exact checks
# hold run by run, and the figures are shown beside them.
ABBA = ("vllm", "llmperf", "llmperf", "vllm")
JUDGED_RUNS = 4  # runs a tool needs before its figures are judged within the noise
SPEC_COUNTERS = ("drafts", "draft_tokens", "accepted")  # SpecDecodeStats' names
COUNTER_FIGURES = ("drafts", "draft tokens", "accepted tokens")  # with speculation, compared as FIGURES too
# The verdict rule's split 99 %: the figures (with the counters) share 1 % of false reds, two-sided.
CONFIDENCE = 1 - 0.01 / (len(FIGURES) + len(COUNTER_FIGURES)) / 2
VLLM_COUNTERS = ("spec_decode_num_drafts", "spec_decode_draft_tokens", "spec_decode_accepted_tokens")  # its result's


def _pct(ours: float, theirs: float) -> float:
    if ours == theirs:
        return 0.0
    return (ours - theirs) / theirs * 100 if theirs else float("inf")


def _fmt(value) -> str:
    if value is None:
        return f"{'-':>12}"
    return f"{value:>12.2f}" if isinstance(value, float) else f"{value:>12}"


def mean(runs: list[dict], key: str) -> float:
    return statistics.fmean(r["figures"][key] for r in runs)


def noise_bound(v: list[dict], o: list[dict], key: str) -> tuple[float, float]:
    """(relative bound on |mean(ours) - mean(vLLM)| that noise alone reaches, the pooled
    relative spread of one run): Student's t at the split 99 % over the runs' pooled
    standard deviation, the verdict rule's treatment of the spread between starts."""
    sd_v, sd_o = statistics.stdev([r["figures"][key] for r in v]), statistics.stdev([r["figures"][key] for r in o])
    df = len(v) + len(o) - 2
    pooled = (((len(v) - 1) * sd_v**2 + (len(o) - 1) * sd_o**2) / df) ** 0.5
    se = pooled * (1 / len(v) + 1 / len(o)) ** 0.5
    scale = mean(v, key)
    return t_quantile(CONFIDENCE, df) * se / scale, pooled / scale


def _vllm_args(url, model, prepared, dataset, out_dir, name) -> list[str]:
    return (
        ["--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions"]
        + ["--model", model, "--tokenizer", str(prepared.model)]
        + ["--dataset-name", "sharegpt", "--dataset-path", str(dataset)]
        + ["--num-prompts", str(BENCH_PROMPTS), "--sharegpt-output-len", str(OUTPUT_LEN), "--seed", str(SEED)]
        + ["--max-concurrency", str(CONCURRENCY), "--num-warmups", str(CONCURRENCY), "--temperature", "0"]
        + ["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99"]
        + ["--save-result", "--save-detailed", "--result-dir", str(out_dir), "--result-filename", name]
        + ["--disable-tqdm"]
    )


def _llmperf_args(url, model, dataset, out, cache) -> list[str]:
    return (
        ["--base-url", url, "--model", model, "--dataset", str(dataset)]
        + ["--num-prompts", str(BENCH_PROMPTS), "--max-tokens", str(OUTPUT_LEN), "--seed", str(SEED)]
        + ["--concurrency", str(CONCURRENCY), "--warmup", str(CONCURRENCY), "--output", str(out)]
        + ["--token-cache", str(cache)]
    )


def _vllm_figures(theirs: dict) -> dict:
    return {
        "output tok/s": theirs["output_throughput"],
        **{f"mean {name} (ms)": theirs[f"mean_{name.lower()}_ms"] for name in ("TTFT", "TPOT", "ITL", "E2EL")},
        "median TPOT (ms)": theirs["median_tpot_ms"],
        "median ITL (ms)": theirs["median_itl_ms"],
        "median E2EL (ms)": theirs["median_e2el_ms"],
        "median TTFT (ms)": theirs["median_ttft_ms"],
    }


def _our_figures(summary) -> dict:
    return {
        "output tok/s": summary.decode_tok_s,
        **{
            f"mean {name} (ms)": getattr(summary, f"{name.lower()}_ms_mean") for name in ("TTFT", "TPOT", "ITL", "E2EL")
        },
        "median TPOT (ms)": summary.tpot_ms_median,
        "median ITL (ms)": summary.itl_ms_median,
        "median E2EL (ms)": summary.e2el_ms_median,
        "median TTFT (ms)": summary.ttft_ms_median,
    }


# vLLM's BenchmarkMetrics field -> our Summary field, for the definitions check.
SAME_DEFINITION = {
    "completed": "completed",
    "failed": "failed",
    "total_input": "total_prompt_tokens",
    "total_output": "total_output_tokens",
    "request_throughput": "request_throughput",
    "output_throughput": "decode_tok_s",
    "total_token_throughput": "total_tok_s",
    **{f"{stat}_{m}_ms": f"{m}_ms_{stat}" for m in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median")},
}


def _definition_mismatches(vllm_metrics: dict, summary) -> list[str]:
    ours = summary.to_dict()
    pairs = [(v, o) for v, o in SAME_DEFINITION.items()]
    for m in ("ttft", "tpot", "itl", "e2el"):
        for p, value in vllm_metrics[f"percentiles_{m}_ms"]:
            pairs.append((f"p{p:g} {m}", f"{m}_ms_p{p:g}"))
            vllm_metrics[f"p{p:g} {m}"] = value
    return [
        f"{v}: vLLM {vllm_metrics[v]!r}, ours ({o}) {ours.get(o)!r}"
        for v, o in pairs
        if ours.get(o) is None or abs(vllm_metrics[v] - ours[o]) > 1e-9 * max(1.0, abs(vllm_metrics[v]))
    ]


# -------------------------------------------------- the random dataset and the chat endpoint

RANDOM_INPUT, RANDOM_OUTPUT = 256, 16  # the issue's 256-token prompts; 16 output tokens keep each run to seconds


def _prompt_tokens_served(url: str) -> float:
    """The server's own count of prompt tokens so far (vllm:prompt_tokens_total)."""
    page = httpx.get(f"{url}/metrics", timeout=30).text
    value = parse_snapshot(page).get(PROMPT_TOKENS)
    assert value is not None, "the server has no vllm:prompt_tokens_total"
    return value


def _random_args(ratio: float, prompts: int) -> list[str]:
    """The random dataset's flags, spelled the same by both tools."""
    lengths = ["--random-input-len", str(RANDOM_INPUT), "--random-output-len", str(RANDOM_OUTPUT)]
    rest = ["--random-range-ratio", str(ratio), "--num-prompts", str(prompts), "--seed", str(SEED)]
    return ["--dataset-name", "random", *lengths, *rest]


def _vllm_common(url: str, model: str, prepared, out_dir, endpoint: str = "/v1/completions") -> list[str]:
    backend = "openai-chat" if endpoint.endswith("chat/completions") else "openai"
    return (
        ["--backend", backend, "--base-url", url, "--endpoint", endpoint, "--model", model]
        + ["--tokenizer", str(prepared.model), "--max-concurrency", str(CONCURRENCY), "--num-warmups", "0"]
        + ["--temperature", "0", "--save-result", "--save-detailed", "--result-dir", str(out_dir)]
        + ["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99"]
        + ["--result-filename", "vllm.json", "--disable-tqdm"]
    )


def _llmperf_common(url: str, model: str, out, cache) -> list[str]:
    return ["--base-url", url, "--model", model, "--concurrency", str(CONCURRENCY), "--warmup", "0"] + [
        "--output",
        str(out),
        "--token-cache",
        str(cache),
    ]


def _served(url: str, run) -> tuple[float, Any]:
    """What `run()` returned, and the prompt tokens the server counted while it ran."""
    before = _prompt_tokens_served(url)
    value = run()
    return _prompt_tokens_served(url) - before, value


def test_random_prompts_reach_the_server_at_the_lengths_vllm_bench_serve_sends(
    request, prepared_vllm, real_pool, real_target, tmp_path
):
    """The random dataset on the real server, counted by the server itself (its usage per
    request, and vllm:prompt_tokens_total over each run):

    - without --tokenizer, `llmperf bench --random-input-len 256` sends 32 prompts the
      server counts at 256 tokens each, as `vllm bench serve` does (its prompts come from
      the model's tokenizer; ours are fitted through /tokenize);
    - with --tokenizer (the model's folder, the [hf] extra) and a range ratio, the very
      lengths of vLLM's prompts, request by request, and the same server-counted total;
    - with --approx-tokens (nothing asks the server), the built-in prompts the server
      counts at about twice their length: the run is said to be invalid, exit 1.
    """
    server = serve(real_pool, real_target, FIDELITY)
    url, model = server.url, server.endpoint.model
    cache = tmp_path / "token-cache"
    figures = {}
    for name, ratio, prompts, extra in (("default", 0.0, 32, []), ("tokenizer", 0.25, 16, ["--tokenizer"])):
        out_dir = tmp_path / f"vllm-{name}"
        out_dir.mkdir()
        vllm_args = [*_vllm_common(url, model, prepared_vllm, out_dir), *_random_args(ratio, prompts), "--ignore-eos"]
        vllm_run = functools.partial(vllm_bench_serve, prepared_vllm, vllm_args, tmp_path / f"v-{name}.log")
        vllm_served, _ = _served(url, vllm_run)
        theirs = json.loads((out_dir / "vllm.json").read_text())
        ours_path = tmp_path / f"llmperf-{name}.json"
        args = [*_llmperf_common(url, model, ours_path, cache), *_random_args(ratio, prompts)]
        if extra:
            args += [*extra, str(prepared_vllm.model)]
        our_served, _ = _served(url, functools.partial(llmperf_bench, args, tmp_path / f"l-{name}.log"))
        ours = RunResult.from_json(ours_path.read_text())
        counted = [r.prompt_tokens for r in sorted(ours.records, key=lambda r: r.index)]
        figures[name] = (theirs["input_lens"], counted, vllm_served, our_served, ours.config["dataset"])
    lines = [
        f"{name}: vllm bench serve {len(v)} prompts, {sum(v)} tokens meant, {vs:.0f} counted by the server; "
        f"llmperf bench {len(o)} prompts, {sum(o)} counted by the server in usage ({os_:.0f} in its counter), "
        f"{min(o)}-{max(o)} each ({made})"
        for name, (v, o, vs, os_, made) in figures.items()
    ]
    print("\n" + "\n".join(lines))
    REPORT_LINES.extend(f"{request.node.name}: {line}" for line in lines)
    v, o, vs, os_, made = figures["default"]
    assert made == "random tokenizer:server" and o == [RANDOM_INPUT] * 32, lines[0]
    assert vs == os_ == sum(v) == 32 * RANDOM_INPUT, lines[0]
    v, o, vs, os_, made = figures["tokenizer"]
    assert made == f"random tokenizer:{prepared_vllm.model}" and o == v and len(set(v)) > 1, lines[1]
    assert vs == os_ == sum(v), lines[1]

    unfitted = [*_llmperf_common(url, model, tmp_path / "unfitted.json", cache), *_random_args(0.0, 4)]
    unfitted[unfitted.index("--random-input-len") + 1] = "64"
    argv = [sys.executable, "-m", "pytest_llmperf.commands.cli", "bench", *unfitted, "--approx-tokens"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    said = [line for line in done.stderr.splitlines() if line.startswith("invalid run: ")]
    REPORT_LINES.append(f"{request.node.name}: unfitted: exit {done.returncode}; {said}")
    assert done.returncode == 1 and said, done.stderr[-2000:]
    assert "(intended 64 tokens, the server counted" in said[0]


def test_the_chat_endpoint_sends_what_vllm_bench_serve_sends_and_measures_it_the_same_way(
    request, prepared_vllm, real_pool, real_target, complete_sharegpt, tmp_path
):
    """ShareGPT on the chat endpoint (vLLM's openai-chat backend, our --endpoint chat), one
    run each on the same server: the same prompt tokens counted by the server, every
    request completed by both, the same output tokens where the replies are the same text,
    and vLLM's calculate_metrics over our records gives our figures (one definition); the
    figures of the two runs side by side."""
    server = serve(real_pool, real_target, FIDELITY)
    url, model = server.url, server.endpoint.model
    prompts, output_len = 16, 32
    out_dir = tmp_path / "vllm-chat"
    out_dir.mkdir()
    vllm_args = [*_vllm_common(url, model, prepared_vllm, out_dir, "/v1/chat/completions")]
    vllm_args += ["--dataset-name", "sharegpt", "--dataset-path", str(complete_sharegpt)]
    vllm_args += ["--num-prompts", str(prompts), "--sharegpt-output-len", str(output_len), "--seed", str(SEED)]
    vllm_served, _ = _served(
        url, functools.partial(vllm_bench_serve, prepared_vllm, vllm_args, tmp_path / "v-chat.log")
    )
    theirs = json.loads((out_dir / "vllm.json").read_text())
    ours_path = tmp_path / "llmperf-chat.json"
    args = [*_llmperf_common(url, model, ours_path, tmp_path / "token-cache"), "--endpoint", "chat"]
    args += ["--dataset", str(complete_sharegpt), "--num-prompts", str(prompts), "--max-tokens", str(output_len)]
    args += ["--seed", str(SEED)]
    our_served, _ = _served(url, functools.partial(llmperf_bench, args, tmp_path / "l-chat.log"))
    result = RunResult.from_json(ours_path.read_text())
    summary = result.summary()
    records = sorted(result.records, key=lambda r: r.index)
    same = [
        (theirs["output_lens"][i], r.completion_tokens)
        for i, r in enumerate(records)
        if theirs["generated_texts"][i] == r.output_text
    ]
    mismatches = _definition_mismatches(vllm_metrics(prepared_vllm, result, tmp_path / "defs-chat"), summary)
    ours_fig, theirs_fig = _our_figures(summary), _vllm_figures(theirs)
    lines = [
        f"chat: prompt tokens counted by the server: vLLM {vllm_served:.0f}, llmperf {our_served:.0f} "
        f"(its usage: {sum(r.prompt_tokens or 0 for r in records)}); completed {theirs['completed']} and "
        f"{summary.completed} of {prompts}; {len(same)} of {prompts} replies the same text",
        *(f"  {key}: vLLM {theirs_fig[key]:.2f}, llmperf {ours_fig[key]:.2f}" for key in FIGURES),
        "  vLLM's calculate_metrics over llmperf's records: "
        + ("equal to llmperf's figures (1e-9)" if not mismatches else f"{len(mismatches)} differ"),
    ]
    print("\n" + "\n".join(lines))
    REPORT_LINES.extend(f"{request.node.name}: {line}" for line in lines)
    assert vllm_served == our_served == sum(r.prompt_tokens or 0 for r in records), lines[0]
    assert theirs["completed"] == summary.completed == prompts, lines[0]
    assert len(same) >= prompts // 2 and all(t == u for t, u in same), lines[0]
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.parametrize("spec", [FIDELITY, FIDELITY_NGRAM], ids=["base", "ngram"])
def test_llmperf_bench_measures_what_vllm_bench_serve_measures(
    request, spec, prepared_vllm, real_pool, real_target, complete_sharegpt, tmp_path
):
    """`vllm bench serve` (the venv's own) and `llmperf bench` against one real vLLM server
    (prefix caching off, so no run finds another's prompts cached), without and with
    ngram speculation, in ABBA order (with speculation twice: 4 runs each, else 2): ShareGPT, seed 0, 32 prompts,
    output length 64 (vLLM's --sharegpt-output-len, our --max-tokens), concurrency 4,
    greedy (vLLM's bench sends no temperature unless told: --temperature 0), a warm-up
    of 4 requests in each run.

    Exact, in every run: the prompts (per-request prompt tokens from the server's usage,
    in request order, hence their total), the successful and failed request counts, the
    EOS-only replies (successes with 1 output token in both tools); with speculation,
    the acceptance counters (drafts, draft tokens, accepted tokens over the measured
    window) of every vLLM and llmperf run with the very same output texts, where there
    are such runs (with ngram drafting, near-ties flip some replies in most runs: 5 sets
    of outputs over 8 runs, none shared by both tools, in one run here).

    Exact, without noise: vLLM's own `calculate_metrics` over each llmperf run's raw
    records gives that run's llmperf figures (throughputs, mean/median/P90/P99 TTFT,
    TPOT, ITL, E2EL) to 1e-9: one definition of every figure.

    Within 3 %, or within the noise where the runs show more (with speculation, 4 runs a
    tool; without, 2 a tool estimate no spread and the figures are shown): output tok/s, mean TTFT and
    median TPOT, ITL and E2EL, each tool's mean over its 4 runs, and with speculation the
    three counters (a tool that counted its warm-up's 4 requests would be ~6 % over). The
    noise bound is the verdict rule's for a change between starts: Student's t at the
    split 99 % (the 8 figures share 1 %) over the runs' pooled standard deviation. It
    matters on 2 shared CPU cores: the medians of a closed loop of 4 streams are order
    statistics of a clustered distribution (4 requests in lockstep finish within
    milliseconds of each other, and the median falls at the edge between two such
    clusters, where one request changing rank moves it 20-35 %), so one run's median E2EL
    can read 3023 ms and the next 4115 ms on the same server. TTFT is held by its mean:
    the tools send the window's first 4 requests a little differently, which moves the
    median TTFT between clusters in one tool's runs and not the other's (one CI run read
    vLLM's 259 ms against ours 179 ms with every request's TTFT but the first within a few
    ms between the tools). The other statistics are printed beside them.
    Output tokens, exact per request: greedy on identical prompts, but batching differs
    between runs and a float near-tie can flip a reply, so the tools' counts are compared on
    every request whose reply text is the same in a vLLM run and an llmperf run (every pair
    of runs), and at least half of request pairs must have the same text (80 % and 99 % here, with and
    without ngram; a tool sending other sampling parameters would share almost none).
    """
    server = serve(real_pool, real_target, spec)
    url, model = server.url, server.endpoint.model
    runs: dict[str, list[dict]] = {"vllm": [], "llmperf": []}
    rounds = ABBA * 2 if spec is FIDELITY_NGRAM else ABBA
    for i, tool in enumerate(rounds):
        t0 = time.monotonic()
        if tool == "vllm":
            out = tmp_path / f"vllm-{i}"
            out.mkdir()
            args = _vllm_args(url, model, prepared_vllm, complete_sharegpt, out, "vllm.json")
            cpu = vllm_bench_serve(prepared_vllm, args, tmp_path / f"vllm_bench-{i}.log")
            runs[tool].append(_vllm_run(out / "vllm.json", cpu, time.monotonic() - t0))
        else:
            out = tmp_path / f"llmperf-{i}.json"
            cpu = llmperf_bench(
                _llmperf_args(url, model, complete_sharegpt, out, tmp_path / "token-cache"),
                tmp_path / f"llmperf_bench-{i}.log",
            )
            runs[tool].append(_llmperf_run(out, cpu, time.monotonic() - t0))
        assert server.process.exit_status() is None, f"the server died: {server.process.death()}"
    _compare(request, spec, prepared_vllm, runs, tmp_path)


def _vllm_run(path, cpu: float, wall: float) -> dict:
    theirs = json.loads(path.read_text())
    counters = tuple(theirs[k] for k in VLLM_COUNTERS) if VLLM_COUNTERS[0] in theirs else None
    return {
        "figures": {**_vllm_figures(theirs), **dict(zip(COUNTER_FIGURES, counters or ()))},
        "completed": theirs["completed"],
        "failed": theirs["failed"],
        "input_lens": theirs["input_lens"],
        "output_lens": theirs["output_lens"],
        "texts": theirs["generated_texts"],
        # vLLM's counter deltas over its measured window (serve.py's spec_decode_* result keys)
        "counters": counters,
        "cpu": cpu,
        "wall": wall,
    }


def _llmperf_run(path, cpu: float, wall: float) -> dict:
    result = RunResult.from_json(path.read_text())
    summary = result.summary()
    records = sorted(result.records, key=lambda r: r.index)
    stats = result.spec_decode()
    counters = tuple(int(getattr(stats, name)) for name in SPEC_COUNTERS) if stats.drafts else None
    return {
        "result": result,
        "summary": summary,
        "figures": {**_our_figures(summary), **dict(zip(COUNTER_FIGURES, counters or ()))},
        "completed": summary.completed,
        "failed": summary.failed,
        "input_lens": [r.prompt_tokens for r in records],
        "output_lens": [r.completion_tokens if r.ok else 0 for r in records],
        "texts": [r.output_text for r in records],
        "counters": counters,
        "cpu": cpu,
        "wall": wall,
    }


def _compare(request, spec, prepared_vllm, runs: dict[str, list[dict]], tmp_path) -> None:
    v, o = runs["vllm"], runs["llmperf"]
    all_runs = [*v, *o]
    speculative = spec is FIDELITY_NGRAM

    head = f"{'metric':<30} {'vLLM':>12} {'llmperf':>12} {'diff %':>8} {'allowed':>8} {'run sd %':>8}"
    lines = [head, "-" * len(head)]

    def exact_row(name, theirs, ours):
        diff = "-" if None in (theirs, ours) else f"{_pct(ours, theirs):+.1f}"
        lines.append(f"{name:<30} {_fmt(theirs)} {_fmt(ours)} {diff:>8} {'equal':>8} {'':>8}")

    exact_row("completed", v[0]["completed"], o[0]["completed"])
    exact_row("failed", v[0]["failed"], o[0]["failed"])
    exact_row("total input tokens", sum(v[0]["input_lens"]), sum(o[0]["input_lens"]))
    exact_row("EOS-only replies", v[0]["output_lens"].count(1), o[0]["output_lens"].count(1))
    # Runs grouped by their output texts: within a group both tools had the same tokens
    # drafted against (greedy, but batching differs between runs and a float near-tie can
    # flip a token, more often under speculation), so the counters must be the same.
    groups: dict[tuple, dict[str, list[dict]]] = {}
    for tool, tool_runs in (("vllm", v), ("llmperf", o)):
        for run in tool_runs:
            groups.setdefault(tuple(run["texts"]), {"vllm": [], "llmperf": []})[tool].append(run)
    shared = [g for g in groups.values() if g["vllm"] and g["llmperf"]]
    if speculative and shared:  # the same outputs: the same counters, exactly
        pair = (shared[0]["vllm"][0]["counters"], shared[0]["llmperf"][0]["counters"])
        for k, name in enumerate(COUNTER_FIGURES):
            exact_row(f"{name}, same outputs", *(c[k] if c else None for c in pair))
    allowed: dict[str, float] = {}
    with_counters = speculative and all(r["counters"] is not None for r in all_runs)
    compared = (*FIGURES, *COUNTER_FIGURES) if with_counters else FIGURES
    for key in compared:
        bound, run_sd = noise_bound(v, o, key)
        allowed[key] = max(BASE_TOLERANCE, bound)
        theirs, ours = mean(v, key), mean(o, key)
        lines.append(
            f"{key:<30} {_fmt(theirs)} {_fmt(ours)} {_pct(ours, theirs):>+8.1f} {allowed[key] * 100:>7.0f}% "
            f"{run_sd * 100:>8.1f}"
        )
    for key in SHOWN:
        theirs, ours = mean(v, key), mean(o, key)
        lines.append(f"{key:<30} {_fmt(theirs)} {_fmt(ours)} {_pct(ours, theirs):>+8.1f} {'-':>8}")
    # Output tokens, to the token: every request whose reply text is the same in a vLLM run
    # and an llmperf run must have the same count in both. Totals across runs are not
    # compared: greedy on a shared CPU still flips a near-tie now and then (batching moves
    # the floats), and one flipped reply that runs on to its 64 tokens instead of stopping
    # moves the total by up to 2.7 % (it read 2310 against 2263 in one CI run).
    same_text = [
        (i, theirs["output_lens"][i], ours["output_lens"][i])
        for theirs in v
        for ours in o
        for i in range(BENCH_PROMPTS)
        if theirs["texts"][i] == ours["texts"][i]
    ]
    count_diffs = [(i, t, u) for i, t, u in same_text if t != u]
    pairs = len(v) * len(o) * BENCH_PROMPTS
    t_same, o_same = sum(t for _, t, _ in same_text), sum(u for _, _, u in same_text)
    lines.append(
        f"{'output tokens, same text':<30} {_fmt(t_same)} {_fmt(o_same)} {_pct(o_same, t_same):>+8.1f} {'equal':>8} "
        f"({len(same_text)} of {pairs} request pairs had the same text)"
    )
    t_out, o_out = sum(v[0]["output_lens"]), sum(o[0]["output_lens"])
    lines.append(f"{'total output tokens':<30} {_fmt(t_out)} {_fmt(o_out)} {_pct(o_out, t_out):>+8.1f} {'-':>8}")
    lines.append(
        f"{'client CPU (s)':<30} {_fmt(sum(r['cpu'] for r in v) / len(v))} {_fmt(sum(r['cpu'] for r in o) / len(o))} "
        f"{_pct(sum(r['cpu'] for r in o), sum(r['cpu'] for r in v)):>+8.1f} {'-':>8}"
    )
    lines.append(
        f"vLLM and llmperf: means of {len(v)} runs each (ABBA x{len(v) // 2}); allowed: the larger of 3 % and "
        f"Student's t at the split 99 % over the pooled spread between runs (run sd)"
        + ("" if len(v) >= JUDGED_RUNS else ", shown, not judged on 2 runs a tool")
        + f"; output texts: {len(groups)} distinct "
        f"set(s) over the {len(all_runs)} runs, {len(shared)} shared by both tools (counters compared within "
        f"them: {sum(len(g['vllm']) + len(g['llmperf']) for g in shared)} runs); wall s per run: "
        + ", ".join(f"{r['wall']:.0f}" for r in all_runs)
    )

    # The definitions, without noise: vLLM's calculate_metrics over our raw records.
    mismatches = []
    for i, run in enumerate(o):
        mismatches += [
            f"llmperf run {i + 1}: {m}"
            for m in _definition_mismatches(
                vllm_metrics(prepared_vllm, run["result"], tmp_path / f"defs-{i}"), run["summary"]
            )
        ]
    lines.append(
        "vLLM's calculate_metrics over llmperf's records: "
        + ("equal to llmperf's figures (1e-9) in every run" if not mismatches else f"{len(mismatches)} differ")
    )
    text = "\n".join(lines)
    title = f"vllm bench serve vs llmperf bench ({spec.name}, {BENCH_PROMPTS} ShareGPT prompts, c={CONCURRENCY}):"
    print(f"\n{title}\n{text}")
    REPORT_LINES.extend([f"{request.node.name}: {title}", *text.splitlines()])  # the summary, even without -s

    for run in all_runs:
        assert run["input_lens"] == v[0]["input_lens"], "the tools sent different prompts (prompt tokens per request)"
        assert (run["completed"], run["failed"]) == (BENCH_PROMPTS, 0), f"not every request succeeded\n{text}"
        assert run["output_lens"].count(1) == v[0]["output_lens"].count(1), f"EOS-only replies differ\n{text}"
    assert not mismatches, "\n".join(mismatches)
    if speculative:
        assert all(r["counters"] is not None for r in all_runs), f"a run read no acceptance counters\n{text}"
        for g in shared:
            counted = {r["counters"] for r in g["vllm"] + g["llmperf"]}
            assert None not in counted, f"a run read no acceptance counters\n{text}"
            assert len(counted) == 1, f"acceptance counters differ between runs with equal outputs: {counted}\n{text}"
    else:
        assert all(r["counters"] is None for r in all_runs), f"speculative counters moved without speculation\n{text}"
    if len(v) >= JUDGED_RUNS:  # 2 runs a side estimate no spread: their figures are shown, not judged
        for key in compared:
            theirs, ours = mean(v, key), mean(o, key)
            assert abs(ours - theirs) <= allowed[key] * theirs, f"{key}: beyond tolerance\n{text}"
    assert not count_diffs, (
        "output token counts differ for the same reply text (request, vLLM, llmperf): " + f"{count_diffs[:5]}\n{text}"
    )
    # Most replies are the same text in both tools (a tool that sent other sampling
    # parameters would share few); counts are compared on them.
    assert len(same_text) >= 0.5 * pairs, f"too few replies with the same text to compare counts on\n{text}"
