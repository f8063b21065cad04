import re

import pytest

from pytest_llmperf.workload.workload import check_concurrency, check_workload, resolve_workload

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


def test_nightly_caps_runs_below_8_streams_at_60_s_from_8_at_100_and_from_16_at_150():
    caps = {c: resolve_workload(dict(num_prompts=1000), c, "nightly").max_seconds for c in (1, 7, 8, 15, 16, 32, 64)}
    assert caps == {1: 60.0, 7: 60.0, 8: 100.0, 15: 100.0, 16: 150.0, 32: 150.0, 64: 150.0}
    assert [resolve_workload(SEED, c, "nightly").num_prompts for c in (1, 8, 32)] == [64, 128, 512]
    # a declared cap below the profile's stands
    assert resolve_workload(dict(max_seconds=30), 32, "nightly").max_seconds == 30.0


def test_the_warmup_is_a_full_wave_at_the_runs_concurrency_by_default():
    assert [resolve_workload(SEED, c).warmup for c in (1, 8, 32)] == [1, 8, 32]
    assert resolve_workload(SEED, 32, "smoke").prompts_needed == 128 + 32
    assert resolve_workload(dict(warmup="wave"), 4).warmup == 4
    assert resolve_workload(dict(warmup={8: "wave", "default": 2}), 8).warmup == 8
    assert resolve_workload(dict(warmup={8: "wave", "default": 2}), 1).warmup == 2
    # --llmperf-warmup sets the default; the marker's warmup= wins over it
    assert resolve_workload(SEED, 8, warmup=2).warmup == 2
    assert resolve_workload(dict(SEED, warmup=0), 8, warmup=5).warmup == 0
    assert resolve_workload(SEED, 8, warmup="wave").to_dict()["warmup"] == 8  # the identity holds the count


def test_missing_concurrency_in_a_mapping_is_named():
    with pytest.raises(ValueError, match="no entry for concurrency 4"):
        resolve_workload(SEED, 4)


@pytest.mark.parametrize(
    "declared, message",
    [
        (dict(num_prompt=5), "unknown workload key"),
        (dict(num_prompts=0), "num_prompts=0: num_prompts (measured requests) takes a whole number >= 1"),
        (dict(endpoint="embeddings"), "'completions' or 'chat'"),
    ],
)
def test_bad_declarations(declared, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        resolve_workload(declared, 1)


@pytest.mark.parametrize(
    "declared, message",
    [
        (dict(warmup=-1), "warmup=-1: warmup (warm-up requests before the measured window) takes a whole number >= 0"),
        (dict(warmup="2"), "warmup='2': warmup (warm-up requests before the measured window) takes a whole number"),
        (dict(warmup="waves"), "takes a whole number >= 0, or 'wave' (one per stream)"),
        (dict(num_prompts=12.5), "num_prompts=12.5: num_prompts (measured requests) takes a whole number >= 1"),
        (dict(num_prompts=True), "num_prompts=True: num_prompts (measured requests) takes a whole number >= 1"),
        (dict(max_tokens=-256), "max_tokens=-256: max_tokens (output tokens per request) takes a whole number >= 1"),
        (dict(max_seconds=0), "max_seconds=0: max_seconds (the time cap) takes a number of seconds > 0, or None"),
        (dict(max_seconds="60"), "max_seconds='60': max_seconds (the time cap) takes a number of seconds > 0"),
        (dict(max_seconds=float("inf")), "max_seconds=inf: max_seconds (the time cap) takes a number of seconds > 0"),
        (dict(seed=1.5), "seed=1.5: seed (the sampling seed) takes a whole number"),
        (dict(ignore_eos="yes"), "ignore_eos='yes': ignore_eos (whether to generate past the end of sequence) takes"),
        (dict(endpoint="embeddings"), "endpoint='embeddings': endpoint (the OpenAI endpoint) takes 'completions'"),
        (
            dict(warmup={1: 2, 8: -1}),
            "warmup={1: 2, 8: -1}: the value for concurrency 8: warmup (warm-up requests before the measured window) "
            "takes a whole number >= 0",
        ),
        (dict(num_prompts={"default": 0}), "the value for default: num_prompts (measured requests) takes"),
        (dict(num_prompts={0: 10}), "num_prompts={0: 10}: key 0 is no concurrency; use whole numbers >= 1"),
        (dict(num_prompts={"8": 10}), "num_prompts={'8': 10}: key '8' is no concurrency"),
        (dict(num_prompts={}), "num_prompts={} has no entries"),
    ],
)
def test_every_workload_value_is_checked_without_coercion_naming_key_value_and_fix(declared, message):
    """Each value, per-concurrency entries included, at whatever concurrency is asked for:
    the plugin checks markers at collection, before any server starts."""
    with pytest.raises(ValueError) as exc:
        check_workload(declared)
    assert message in str(exc.value)
    assert str(exc.value).startswith("llmperf marker: ")
    with pytest.raises(ValueError, match=re.escape(message)):
        resolve_workload(declared, 1)


@pytest.mark.parametrize("concurrency", [0, -4, 2.0, "8", True, None])
def test_concurrency_is_a_whole_number_of_at_least_one(concurrency):
    with pytest.raises(ValueError, match=re.escape(f"concurrency must be a whole number >= 1, got {concurrency!r}")):
        check_concurrency(concurrency)
    with pytest.raises(ValueError, match="concurrency must be a whole number >= 1"):
        resolve_workload({}, concurrency)


def test_good_values_pass_as_they_are():
    check_workload(dict(SEED, warmup=0, seed=-3, ignore_eos=True, endpoint="chat", max_seconds={1: 30.5, "default": 9}))
    w = resolve_workload(dict(warmup=0, max_seconds=30), 1)
    assert (w.warmup, w.max_seconds) == (0, 30.0)


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


def test_slos_come_from_the_marker_else_the_session_and_spell_one_way():
    assert resolve_workload(SEED, 8).slos == ""
    assert resolve_workload(dict(SEED, slos="tpot:50 ttft:500.0"), 8).slos == "ttft:500 tpot:50"
    # --llmperf-slos is the default; the marker's slos= wins, and its None means none
    assert resolve_workload(SEED, 8, slos="e2el:3000").slos == "e2el:3000"
    assert resolve_workload(dict(SEED, slos="ttft:200"), 8, slos="e2el:3000").slos == "ttft:200"
    assert resolve_workload(dict(SEED, slos=None), 8, slos="e2el:3000").slos == ""
    per_concurrency = dict(SEED, slos={1: "ttft:200", "default": "ttft:900"})
    assert [resolve_workload(per_concurrency, c).slos for c in (1, 8)] == ["ttft:200", "ttft:900"]


def test_slos_are_in_the_workload_identity_only_when_given():
    assert "slos" not in resolve_workload(SEED, 8).to_dict()  # baselines recorded before SLOs keep their key
    given = resolve_workload(dict(SEED, slos="ttft:500"), 8)
    assert given.to_dict()["slos"] == "ttft:500"
    assert given != resolve_workload(SEED, 8)
    assert given.run_config().slos == "ttft:500"
    assert "slos" not in resolve_workload(SEED, 8).run_config().as_dict()


@pytest.mark.parametrize(
    "slos, message",
    [
        ("ttfb:500", "slos='ttfb:500': slos (the SLOs goodput is judged at) takes KEY:VALUE pairs in ms"),
        ("ttfb:500", "unknown SLO 'ttfb' in 'ttfb:500'; did you mean ttft?"),
        ("ttft:-5", "'ttft:-5': the SLO must be a finite number of milliseconds >= 0"),
        ("ttft 500", "'ttft' is not a KEY:VALUE pair"),
        (500, "slos=500: slos (the SLOs goodput is judged at) takes KEY:VALUE pairs in ms as vLLM's --goodput"),
        ({"ttft": 500, "tpot": 50}, "SLOs are vLLM's --goodput text, not a dict; write slos='ttft:500 tpot:50'"),
        ({8: "ttft:5", "default": "e2el:x"}, "the value for default: slos (the SLOs goodput is judged at)"),
    ],
)
def test_bad_slos_in_a_marker_say_what_and_how(slos, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_workload(dict(slos=slos))


def test_run_config_slos_are_checked_and_spelled_one_way():
    from pytest_llmperf.workload.config import RunConfig

    assert RunConfig(slos="e2el:3000 ttft:500").slos == "ttft:500 e2el:3000"
    assert RunConfig(slos="e2el:3000").as_dict()["slos"] == "e2el:3000"
    with pytest.raises(ValueError, match=re.escape("RunConfig.slos='ttft:abc' is invalid: 'ttft:abc': 'abc' is not")):
        RunConfig(slos="ttft:abc")
