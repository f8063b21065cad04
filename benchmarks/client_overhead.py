"""How much does the client distort what it measures? Prints, per concurrency:
sustained streamed output tok/s and the TPOT/TTFT error against the server's own
chunk send times, for pytest-llmperf's client, a plain httpx client (aiter_lines),
and `vllm bench serve` when a vLLM install is given.

The server is benchmarks/stream_server.py in its own process (one token per chunk
every 5 ms, 128 tokens); the client is pinned to one CPU and the server to another
when the machine has two. Figures are noisy on a shared machine: use --repeat.

    python benchmarks/client_overhead.py --concurrency 1 32 256 --repeat 3 \
        [--vllm /path/to/venv/bin/vllm --tokenizer /path/to/tokenizer_dir]
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.runner import RunConfig, run_benchmark

HERE = Path(__file__).resolve().parent


def start_server(tokens: int, interval: float, cpu: int | None) -> tuple[subprocess.Popen, str]:
    cmd = [
        sys.executable,
        str(HERE / "stream_server.py"),
        "--port",
        "0",
        "--tokens",
        str(tokens),
        "--interval",
        str(interval),
    ]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"stream server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


def truth(base_url: str) -> list[dict]:
    return httpx.get(f"{base_url}/truth", timeout=30).json()


def reset_truth(base_url: str) -> None:
    httpx.delete(f"{base_url}/truth", timeout=30)


def server_tpot(times: list[float]) -> float:
    return (times[-1] - times[0]) / (len(times) - 1)


# --- clients under test -------------------------------------------------------------


def run_llmperf(base_url: str, prompts: list[str], concurrency: int, tokens: int):
    reqs = [SampledRequest(i, p, 8, tokens) for i, p in enumerate(prompts)]
    res = run_benchmark(
        base_url,
        "bench",
        reqs,
        RunConfig(concurrency=concurrency, max_tokens=tokens, warmup_requests=min(concurrency, 8), progress=False),
    )
    return res.records, res.duration


async def _naive(base_url: str, prompts: list[str], concurrency: int, tokens: int):
    """What most people write first: httpx + aiter_lines + json.loads per line."""
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=300) as client:

        async def one(i: int, prompt: str) -> RequestRecord:
            async with sem:
                rec = RequestRecord(index=i, send_time=time.perf_counter())
                body = {
                    "model": "bench",
                    "prompt": prompt,
                    "max_tokens": tokens,
                    "temperature": 0,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                }
                try:
                    async with client.stream("POST", "/v1/completions", json=body) as resp:
                        async for line in resp.aiter_lines():
                            if not line.startswith("data: ") or line == "data: [DONE]":
                                continue
                            now = time.perf_counter()
                            obj = json.loads(line[6:])
                            if obj.get("choices") and obj["choices"][0].get("text"):
                                rec.chunk_times.append(now)
                            if obj.get("usage"):
                                rec.completion_tokens = obj["usage"]["completion_tokens"]
                except httpx.HTTPError as exc:
                    rec.error = f"{type(exc).__name__}: {exc}"
                rec.end_time = time.perf_counter()
                return rec

        await asyncio.gather(*(one(i, "warm") for i in range(min(concurrency, 8))))
        t0 = time.perf_counter()
        recs = await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    return list(recs), max(r.end_time for r in recs) - t0


def run_naive(base_url: str, prompts: list[str], concurrency: int, tokens: int):
    return asyncio.run(_naive(base_url, prompts, concurrency, tokens))


def run_vllm(vllm: str, tokenizer: str, base_url: str, n: int, concurrency: int, tokens: int, cpu: int | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            vllm,
            "bench",
            "serve",
            "--backend",
            "openai",
            "--base-url",
            base_url,
            "--endpoint",
            "/v1/completions",
            "--model",
            "bench",
            "--tokenizer",
            tokenizer,
            "--dataset-name",
            "random",
            "--random-input-len",
            "8",
            "--random-output-len",
            str(tokens),
            "--num-prompts",
            str(n),
            "--max-concurrency",
            str(concurrency),
            "--ignore-eos",
            "--save-result",
            "--result-dir",
            tmp,
            "--result-filename",
            "r.json",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
        ]
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu)] + cmd
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"vllm bench serve failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
        return json.loads(Path(tmp, "r.json").read_text())


# --- figures ------------------------------------------------------------------------


def figures_from_records(
    records: list[RequestRecord], duration: float, truth_by_prompt: dict[str, list[float]], prompts: list[str]
) -> dict:
    tok = sum(r.completion_tokens or 0 for r in records)
    errs, lags, c_tpots, s_tpots = [], [], [], []
    for r, p in zip(records, prompts):
        t = truth_by_prompt.get(p)
        if not t or r.tpot is None:
            continue
        c_tpots.append(r.tpot)
        s_tpots.append(server_tpot(t))
        errs.append(r.tpot / server_tpot(t) - 1)
        lags.append(r.chunk_times[0] - t[0])
    return {
        "tok_s": tok / duration,
        "ok": sum(r.ok for r in records),
        "n": len(records),
        "tpot_err_median": statistics.median(errs) if errs else float("nan"),
        "tpot_err_of_medians": statistics.median(c_tpots) / statistics.median(s_tpots) - 1 if c_tpots else float("nan"),
        "first_chunk_lag_ms_median": 1e3 * statistics.median(lags) if lags else float("nan"),
    }


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def measure(kind: str, base_url: str, concurrency: int, n: int, tokens: int, args, tag: str) -> dict:
    """One run; `cpu_us_per_chunk` is the client's CPU time (not wall) per streamed chunk,
    the figure least disturbed by other load on the machine."""
    prompts = [f"bench {tag} {i}" for i in range(n)]
    reset_truth(base_url)
    if kind == "vllm":
        res = run_vllm(args.vllm, args.tokenizer, base_url, n, concurrency, tokens, args.client_cpu)
        got = truth(base_url)[-n:]  # the earlier one is vLLM's own test request
        s_tpots = [server_tpot(g["send_times"]) for g in got if len(g["send_times"]) > 1]
        return {
            "tok_s": res["output_throughput"],
            "ok": res["completed"],
            "n": n,
            "tpot_err_median": float("nan"),
            "tpot_err_of_medians": res["median_tpot_ms"] / 1e3 / statistics.median(s_tpots) - 1,
            # its CPU time would be mostly start-up (torch import), so none is given
            "first_chunk_lag_ms_median": float("nan"),
            "cpu_us_per_chunk": float("nan"),
        }
    runner = run_llmperf if kind == "llmperf" else run_naive
    cpu0 = _cpu(resource.RUSAGE_SELF)
    records, duration = runner(base_url, prompts, concurrency, tokens)
    cpu = _cpu(resource.RUSAGE_SELF) - cpu0  # includes the warm-up: a slight upper bound
    by_prompt = {g["prompt"]: g["send_times"] for g in truth(base_url)}
    out = figures_from_records(records, duration, by_prompt, prompts)
    out["cpu_us_per_chunk"] = 1e6 * cpu / max(1, sum(len(r.chunk_times) for r in records))
    return out


def find_vllm() -> tuple[str | None, str | None]:
    """A vLLM CLI and a tokenizer from the project's cached CPU environment, if any."""
    root = Path.home() / ".cache" / "pytest-llmperf"
    vllms = sorted(glob.glob(str(root / "*" / "venv" / "bin" / "vllm")))
    toks = sorted(glob.glob(str(root / "*" / "models" / "*" / "tokenizer.json")))
    return (vllms[-1] if vllms else None), (str(Path(toks[-1]).parent) if toks else None)


def main() -> None:
    ap = argparse.ArgumentParser(description="client overhead against a bare streaming server")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 32, 256])
    ap.add_argument("--clients", nargs="+", default=["llmperf", "httpx", "vllm"], choices=["llmperf", "httpx", "vllm"])
    ap.add_argument("--waves", type=int, default=4, help="requests per stream slot")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--interval", type=float, default=0.005)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--vllm", default=None, help="the vllm CLI (default: the project's cached env)")
    ap.add_argument("--tokenizer", default=None, help="a local tokenizer dir for vllm bench")
    ap.add_argument("--json", default=None, help="also write all figures here")
    args = ap.parse_args()
    if "vllm" in args.clients:
        found_vllm, found_tok = find_vllm()
        args.vllm = args.vllm or found_vllm
        args.tokenizer = args.tokenizer or found_tok
        if not (args.vllm and args.tokenizer):
            print("vllm bench serve: not found (give --vllm and --tokenizer); skipped", file=sys.stderr)
            args.clients = [c for c in args.clients if c != "vllm"]
    two = len(os.sched_getaffinity(0)) >= 2
    server_cpu, args.client_cpu = (1, 0) if two else (None, None)
    if args.client_cpu is not None:
        os.sched_setaffinity(0, {args.client_cpu})
    proc, base_url = start_server(args.tokens, args.interval, server_cpu)
    rows = []
    try:
        print(
            f"server: 1 token/chunk every {args.interval * 1e3:g} ms, {args.tokens} tokens; "
            f"client pinned to CPU {args.client_cpu}, server to CPU {server_cpu}; "
            f"{args.repeat} repeats (median [min..max])",
            flush=True,
        )
        print(
            f"{'client':8} {'conc':>5} {'tok/s':>26} {'TPOT err (per req, median)':>30} "
            f"{'TPOT err (medians)':>28} {'1st-chunk lag ms':>18} {'CPU us/chunk':>22} ok/n",
            flush=True,
        )
        for conc in args.concurrency:
            n = max(8, conc * args.waves)
            for kind in args.clients:
                runs = [
                    measure(kind, base_url, conc, n, args.tokens, args, f"{kind}{conc}r{k}") for k in range(args.repeat)
                ]
                rows.append({"client": kind, "concurrency": conc, "runs": runs})

                def spread(key: str, fmt: str, scale: float = 1.0, runs: list = runs) -> str:
                    vals = sorted(r[key] * scale for r in runs)
                    return f"{statistics.median(vals):{fmt}} [{vals[0]:{fmt}}..{vals[-1]:{fmt}}]"

                print(
                    f"{kind:8} {conc:>5} {spread('tok_s', ',.0f'):>26} "
                    f"{spread('tpot_err_median', '+.2f', 100) + ' %':>30} "
                    f"{spread('tpot_err_of_medians', '+.2f', 100) + ' %':>28} "
                    f"{statistics.median(r['first_chunk_lag_ms_median'] for r in runs):>18.2f} "
                    f"{spread('cpu_us_per_chunk', '.1f'):>22} "
                    f"{runs[-1]['ok']}/{runs[-1]['n']}",
                    flush=True,
                )
    finally:
        proc.terminate()
        proc.wait(10)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
