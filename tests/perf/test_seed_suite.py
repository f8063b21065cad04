"""The seed suite: the published Qwen3.6 runs as regression tests.

Servers are declared in the root conftest.py and named here. Workload as the seeds
ran it: ShareGPT, max_tokens 256, 500 prompts with a 300 s cap at low concurrency,
1000 prompts at 32. `--llmperf-profile smoke|nightly` shrinks prompts and caps for
quick runs (baselines are per workload).
"""

import pytest

MODELS = ["qwen3.6-35b-a3b-fp8", "qwen3.6-27b-fp8"]  # each with its MTP variant, "<name>-mtp"
CONCURRENCIES = [1, 8, 32]
SEED_WORKLOAD = dict(
    num_prompts={1: 500, 8: 500, 32: 1000},
    max_seconds={1: 300, 8: 300, 32: None},
    max_tokens=256,
)


def on(server, base=None):
    return pytest.param(server, marks=pytest.mark.llmperf(server=server, base=base, **SEED_WORKLOAD), id=server)


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
