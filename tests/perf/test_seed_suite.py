"""The seed suite: the published Qwen3.6 runs as regression tests.

Servers are declared in the root conftest.py and named here. Workload as the seeds
ran it: ShareGPT, max_tokens 256, 500 prompts with a 300 s cap at low concurrency,
1000 prompts at 32. `--llmperf-profile smoke|nightly` shrinks prompts and caps for
quick runs (baselines are per workload). The capacity tests (docs/capacity.md) search the
most users each server holds within a chat service's latency targets; they run in the
full profile only (each search costs several fixed runs: docs/capacity.md).
"""

import pytest

MODELS = ["qwen3.6-35b-a3b-fp8", "qwen3.6-27b-fp8"]  # each with its MTP variant, "<name>-mtp"
CONCURRENCIES = [1, 8, 32]
SEED_WORKLOAD = dict(
    num_prompts={1: 500, 8: 500, 32: 1000},
    max_seconds={1: 300, 8: 300, 32: None},
    max_tokens=256,
)


# p90 TTFT and TPOT targets per model; the MTP server is held to its base's.
CAPACITY_SLOS = {
    "qwen3.6-35b-a3b-fp8": {"ttft_ms_p90": 3000, "tpot_ms_p90": 120},
    "qwen3.6-27b-fp8": {"ttft_ms_p90": 4000, "tpot_ms_p90": 220},
}
CAPACITY_WORKLOAD = dict(num_prompts=500, max_seconds=300, max_tokens=256)  # each probe's, capped as the seeds


def on(server, base=None, workload=SEED_WORKLOAD):
    return pytest.param(server, marks=pytest.mark.llmperf(server=server, base=base, **workload), id=server)


@pytest.mark.parametrize("concurrency", CONCURRENCIES)
@pytest.mark.parametrize("server", [on(m) for m in MODELS])
def test_base_decode(llmperf, server, concurrency):
    run = llmperf.run(concurrency=concurrency)
    run.assert_no_regression("steady_decode_tok_s", "tpot_ms_median", "ttft_ms_median")


@pytest.mark.parametrize("concurrency", CONCURRENCIES)
@pytest.mark.parametrize("server", [on(f"{m}-mtp") for m in MODELS])
def test_mtp_decode_and_acceptance(llmperf, server, concurrency):
    run = llmperf.run(concurrency=concurrency)
    run.assert_no_regression("steady_decode_tok_s", "acceptance_rate", "acceptance_length", "tpot_ms_median")


@pytest.mark.parametrize("concurrency", CONCURRENCIES)
@pytest.mark.parametrize("server", [on(f"{m}-mtp", base=m) for m in MODELS])
def test_mtp_speedup(llmperf, server, concurrency):
    mtp = llmperf.run(concurrency=concurrency)
    base = llmperf.run(concurrency=concurrency, server=llmperf.base)
    mtp.assert_speedup_over(base)


@pytest.mark.parametrize("server", [on(name, workload=CAPACITY_WORKLOAD) for m in MODELS for name in (m, f"{m}-mtp")])
def test_capacity(llmperf, server):
    if llmperf.profile != "full":
        pytest.skip("capacity is searched in the full profile: shorter probes do not reach a steady load")
    slos = CAPACITY_SLOS[server.removesuffix("-mtp")]
    llmperf.capacity(slos=slos, within=(8, 32), resolution=1, runs_per_probe=3).assert_no_regression()
