"""Calibration check of the simulated vLLM against the published seed runs.

Prints, for every seed configuration, the published figure, the simulated one and
their ratio (the issue's bar: decode tok/s within +-10 %, per-position acceptance
within +-0.02).

    python benchmarks/calibrate_sim.py                 # virtual clock only (seconds)
    python benchmarks/calibrate_sim.py --http          # also over real HTTP (minutes)
    python benchmarks/calibrate_sim.py --http --speed 20 --num-prompts 300 --only 27B
    python benchmarks/calibrate_sim.py --fit           # refit the profiles (needs scipy for speed)

Virtual clock: the engine scheduler on a virtual clock with the seeds' workload
(ShareGPT-like prompt lengths, max_tokens 256, temperature 0, the seeds' caps).
--http: a `python -m pytest_llmperf.sim` process per configuration, driven by the
project's own runner (pytest_llmperf.workload.runner) with ShareGPT prompts when the
dataset is found (else synthetic prompts of ShareGPT's lengths, with a notice). Times
run `speed` times faster than real; reported figures are converted back (tok/s / speed,
ms x speed), so they compare with the published ones. On a busy machine the simulator
can fall behind real time at high speed: its /sim/state max_lag_s is printed.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace

from pytest_llmperf.sim.calibration import (
    A3B,
    D27,
    SEED_ACCEPTANCE,
    SEED_TARGETS,
    SeedTarget,
    fit_profile,
    metric_value,
    seed_config,
    simulate_target,
    synthetic_prompt_lens,
)
from pytest_llmperf.sim.profiles import PROFILES
from pytest_llmperf.sim.tokenizer import TextGenerator

PUBLISHED_SPEEDUP = {A3B: 407.9 / 286.0, D27: 241.0 / 155.0}


def row(label: str, metric: str, published: float, simulated: float | None) -> str:
    if simulated is None or (isinstance(simulated, float) and math.isnan(simulated)):
        return f"  {label:<38} {metric:<22} {published:>10.3f} {'n/a':>10}"
    return f"  {label:<38} {metric:<22} {published:>10.3f} {simulated:>10.3f} {simulated / published:>7.3f}"


def header(title: str) -> None:
    print(f"\n{title}")
    print(f"  {'configuration':<38} {'metric':<22} {'published':>10} {'simulated':>10} {'ratio':>7}")


def selected(only: str | None) -> list[SeedTarget]:
    return [t for t in SEED_TARGETS if not only or only.lower() in t.model.lower()]


def virtual_check(targets: list[SeedTarget]) -> None:
    lens = synthetic_prompt_lens(1000)
    header("Virtual clock (engine scheduler, synthetic ShareGPT-length prompts)")
    runs: dict[tuple, object] = {}
    for t in targets:
        key = (t.model, t.speculative, t.concurrency)
        if key not in runs:
            runs[key] = simulate_target(t, lens)
        r = runs[key]
        print(row(t.label, t.metric, t.published, metric_value(r, t.metric)))
    for (model, spec, conc), r in runs.items():
        if spec:
            for i, (pub, sim) in enumerate(zip(SEED_ACCEPTANCE[model], r.per_position)):
                print(row(f"{model.split('/')[-1]} MTP conc {conc}", f"acceptance pos {i}", pub, sim))
            base = runs.get((model, False, conc))
            if base is not None:
                print(
                    row(
                        f"{model.split('/')[-1]} conc {conc}",
                        "MTP speedup",
                        PUBLISHED_SPEEDUP[model],
                        r.decode_tok_s / base.decode_tok_s,
                    )
                )


def http_prompts(n: int):
    """(prompts, source): ShareGPT through the project's sampler, else synthetic text."""
    from pytest_llmperf.workload.requests import SampledRequest

    try:
        from pytest_llmperf.workload.dataset import (
            find_dataset,
            load_sharegpt,
            sample_requests,
        )

        path = find_dataset(None)
        return sample_requests(load_sharegpt(path), n, seed=0, oversample=True), f"ShareGPT ({path})"
    except Exception as exc:  # noqa: BLE001 - any failure means: fall back, and say why
        print(
            f"NOTICE: ShareGPT not usable ({type(exc).__name__}: {str(exc).splitlines()[0]}); "
            "using synthetic prompts with ShareGPT's length distribution",
            file=sys.stderr,
        )
    out = []
    for i, plen in enumerate(synthetic_prompt_lens(n)):
        gen = TextGenerator(i)
        out.append(SampledRequest(i, "".join(gen.next_piece() for _ in range(plen)), plen, 256))
    return out, "synthetic"


def http_check(targets: list[SeedTarget], speed: float, num_prompts: int | None) -> None:
    import httpx

    from pytest_llmperf.sim import simulated_server
    from pytest_llmperf.sim.tokenizer import count_tokens
    from pytest_llmperf.workload.runner import RunConfig, run_benchmark

    prompts, source = http_prompts(max(t.num_prompts for t in targets))
    lens = [count_tokens(p.prompt) for p in prompts]  # what the server will count
    print(f"\nOver HTTP (process mode, speed x{speed:g}, prompts: {source})")
    print(
        "  'virtual' is the engine on a virtual clock with the same prompts (texts and lengths) and caps:"
        " http/virtual isolates the server's timing fidelity from the workload"
    )
    print(
        f"  {'configuration':<38} {'metric':<22} {'published':>10} {'http':>10} {'ratio':>7}"
        f" {'virtual':>10} {'http/virt':>9}"
    )
    groups: dict[tuple, list[SeedTarget]] = {}
    for t in targets:
        groups.setdefault((t.model, t.speculative, t.concurrency, t.num_prompts, t.max_seconds), []).append(t)
    decode: dict[tuple, float] = {}
    for (model, spec, conc, n, cap), ts in groups.items():
        config = seed_config(ts[0], speed=speed)
        n = min(n, num_prompts or n)
        run_cfg = RunConfig(
            concurrency=conc, num_prompts=n, max_tokens=256, max_seconds=cap / speed if cap else None, progress=False
        )
        t0 = time.monotonic()
        with simulated_server(config, mode="process") as url:
            result = run_benchmark(url, config.model_id, prompts[:n], run_cfg)
            lag = httpx.get(f"{url}/sim/state").json()["max_lag_s"]
        s = result.summary()
        values = {
            "decode_tok_s": (s.decode_tok_s or math.nan) / speed,
            "tpot_median_ms": (s.tpot_ms_median or math.nan) * speed,
            "ttft_median_ms": (s.ttft_ms_median or math.nan) * speed,
        }
        virtual = simulate_target(ts[0], lens, num_prompts=n, prompts=[p.prompt for p in prompts])
        for t in ts:
            v = metric_value(virtual, t.metric)
            print(row(t.label, t.metric, t.published, values[t.metric]) + f" {v:>10.3f} {values[t.metric] / v:>9.3f}")
        decode[(model, spec, conc)] = values["decode_tok_s"]
        if spec and s.acceptance_per_position:
            for i, (pub, sim) in enumerate(zip(SEED_ACCEPTANCE[model], s.acceptance_per_position)):
                print(row(ts[0].label, f"acceptance pos {i}", pub, sim))
        print(
            f"    ({result.completed}/{result.attempted} completed, {result.failed} failed, "
            f"{time.monotonic() - t0:.0f} s wall, sim max lag {lag * 1000:.0f} ms"
            f"{' = ' + format(lag * speed, '.2f') + ' s simulated' if lag > 0.05 else ''})"
        )
    for (model, spec, conc), tok_s in decode.items():
        base = decode.get((model, False, conc))
        if spec and base:
            print(row(f"{model.split('/')[-1]} conc {conc}", "MTP speedup", PUBLISHED_SPEEDUP[model], tok_s / base))


def refit() -> None:
    """Refit both profiles the way docs/sim.md describes; prints the new parameters."""
    lens = synthetic_prompt_lens(1000)
    d27 = [t for t in SEED_TARGETS if t.model == D27]
    p27 = fit_profile(PROFILES["qwen3.6-27b-fp8"], d27, lens, log=print)
    print("27B:", p27)

    # 35B-A3B: two published figures, so two free parameters; the others keep the 27B's
    # proportions (draft cost and prefill cost relative to the fixed step cost) and spread.
    def tie(p):
        return replace(
            p,
            draft_step_s=p.step_base_s * p27.draft_step_s / p27.step_base_s,
            prefill_per_token_s=p.step_base_s * p27.prefill_per_token_s / p27.step_base_s,
            acceptance_spread=p27.acceptance_spread,
        )

    a3b = [t for t in SEED_TARGETS if t.model == A3B]
    p35 = fit_profile(
        PROFILES["qwen3.6-35b-a3b-fp8"], a3b, lens, free=("step_base_s", "per_token_s"), tied=tie, log=print
    )
    print("35B-A3B:", p35)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--http", action="store_true", help="also validate over real HTTP (takes minutes)")
    ap.add_argument("--speed", type=float, default=20.0, help="speed factor for --http (default 20)")
    ap.add_argument("--num-prompts", type=int, default=None, help="cap prompts per --http run (default: the seed's)")
    ap.add_argument("--only", default=None, help="only models whose name contains this (e.g. 27B)")
    ap.add_argument("--fit", action="store_true", help="refit the profiles instead of checking them")
    args = ap.parse_args()
    if args.speed <= 0:
        ap.error("--speed must be > 0")
    if args.fit:
        refit()
        return 0
    targets = selected(args.only)
    if not targets:
        ap.error(f"--only {args.only!r} matches no seed model")
    virtual_check(targets)
    if args.http:
        http_check(targets, args.speed, args.num_prompts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
