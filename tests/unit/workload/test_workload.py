import pytest

from pytest_llmperf.workload.workload import resolve_workload

SEED = dict(num_prompts={1: 500, 8: 500, 32: 1000}, max_seconds={1: 300, 8: 300, 32: None}, max_tokens=256)


def test_full_profile_is_the_declaration_per_concurrency():
    w8 = resolve_workload(SEED, 8)
    w32 = resolve_workload(SEED, 32)
    assert (w8.num_prompts, w8.max_seconds, w8.max_tokens) == (500, 300.0, 256)
    assert (w32.num_prompts, w32.max_seconds) == (1000, None)


def test_smoke_shrinks_prompts_and_cap_but_keeps_max_tokens():
    w = resolve_workload(SEED, 32, "smoke")
    assert w.num_prompts == 128 and w.max_seconds == 60.0 and w.max_tokens == 256
    assert resolve_workload(SEED, 1, "smoke").num_prompts == 16
    assert resolve_workload(dict(num_prompts=10), 32, "smoke").num_prompts == 10  # never grows


def test_missing_concurrency_in_a_mapping_is_named():
    with pytest.raises(ValueError, match="no entry for concurrency 4"):
        resolve_workload(SEED, 4)


@pytest.mark.parametrize(
    "declared, message",
    [
        (dict(num_prompt=5), "unknown workload key"),
        (dict(num_prompts=0), "must be >= 1"),
        (dict(endpoint="embeddings"), "'completions' or 'chat'"),
    ],
)
def test_bad_declarations(declared, message):
    with pytest.raises(ValueError, match=message):
        resolve_workload(declared, 1)


def test_workloads_are_hashable_cache_keys():
    assert resolve_workload(SEED, 8) == resolve_workload(dict(SEED), 8)
    assert len({resolve_workload(SEED, 8), resolve_workload(SEED, 8, "smoke")}) == 2


def test_run_config_is_the_workload_with_the_cap_on_the_servers_clock():
    w = resolve_workload(dict(SEED, warmup=3, endpoint="chat", seed=7, ignore_eos=True), 8)
    real = w.run_config()
    assert (real.concurrency, real.num_prompts, real.max_seconds, real.max_tokens) == (8, 500, 300.0, 256)
    assert (real.warmup_requests, real.endpoint, real.seed, real.ignore_eos, real.progress) == (
        3,
        "chat",
        7,
        True,
        True,
    )
    sim = w.run_config(clock_speed=10.0, progress=False)
    assert sim.max_seconds == pytest.approx(30.0) and sim.progress is False
    assert resolve_workload(SEED, 32).run_config(clock_speed=10.0).max_seconds is None  # no cap stays no cap
    assert w.prompts_needed == 503  # distinct warm-up prompts after the measured ones
