"""Paired A/B mode (pytest_llmperf/judging/paired.py) end to end with pytester: the tiny simulator
project (tests/plugin_project.py), its two "images" two sets of simulator flags."""

import json

import pytest

from pytest_llmperf.judging.paired import cost_line, count_starts
from pytest_llmperf.measuring.preflight import PlannedTest
from pytest_llmperf.options import OptionError
from pytest_llmperf.workload.workload import resolve_workload
from tests.plugin_project import INI, make_project, run
from tests.unit.test_options import resolve

# The simulator in real time (the project runs it at x4): steps four times as long, so a
# shared host's load (the client's and the engine's lag are counted per chunk gap and per
# step) leaves the runs valid; at x4 and x2 a load of 5-8 on 2 cores made some invalid.
SLOWER = ("-o", "llmperf_sim_speed=1")


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):
    return make_project(pytester, monkeypatch, tmp_path_factory)


def roles(order, server):
    return [start["role"] for start in order if start["server"] == server]


def test_old_equal_new_passes_in_blocks_a_b_b_a_and_touches_no_baseline(project):
    report = project.path / "report.json"
    result = run(
        project,
        *SLOWER,
        "--llmperf-against-sim-args",
        "",
        "--llmperf-repetitions",
        "2",
        "--llmperf-report",
        str(report),
    )
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    # The cost, before any server starts; then every run of a server A B, B A on fresh starts.
    cost = (
        "paired A/B: sim args (defaults) (B) against sim args (defaults) (A), blocks A B, B A, ...; "
        "2 servers x 2 images x 2 blocks: about 8 server starts"
    )
    assert cost in out and out.index(cost) < out.index("starting server")
    doc = json.loads(report.read_text())
    order = doc["paired"]["order"]
    assert roles(order, "tiny") == roles(order, "tiny-mtp") == ["A", "B", "B", "A"]
    assert [start["server"] for start in order] == ["tiny"] * 4 + ["tiny-mtp"] * 4  # one server at a time
    assert len(doc["servers_started"]) == len(order) == 8
    assert len(doc["runs"]) == len(doc["paired"]["runs"]) == 2  # NEW's, and OLD's beside them
    assert all(len(r["results"]) == 2 for r in doc["runs"] + doc["paired"]["runs"])  # a repetition per block
    assert {v["outcome"] for v in doc["verdicts"]} == {"pass"}
    assert {v["baseline"] for v in doc["verdicts"]} == {"sim args (defaults) (paired)"}
    # NEW's outputs against OLD's, prompt by prompt: the same (report/crosscheck.py)
    assert {tuple(v["checks"]) for v in doc["verdicts"]} == {
        ("outputs: unchanged for all 12 prompts (temperature 0; canary, not gated)",)
    }
    assert "servers started (one at a time, 8 starts): tiny A, tiny B, tiny B, tiny A, tiny-mtp A" in out
    assert not (project.path / "baselines").exists()  # neither read nor written
    # The speedup is NEW's over NEW's base against OLD's over OLD's base.
    speedup = next(v for v in doc["verdicts"] if v["test"].endswith("test_speedup[4]"))
    (verdict,) = speedup["verdicts"]
    assert verdict["metric"] == "mtp_speedup" and verdict["status"] == "pass"
    assert verdict["baseline"] == pytest.approx(verdict["measured"], rel=0.05)


def test_a_new_image_that_stops_early_is_invalid_against_old(project):
    args = ("--llmperf-against-sim-args", "", "--llmperf-sim-args", "--sim-early-stop-rate 0.5")
    result = run(project, *SLOWER, *args, "--llmperf-repetitions", "1", "-k", "test_base")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        ["*invalid run: outputs changed length on the 12 prompts both runs completed: *the server stops early*"]
    )


def test_new_with_slower_steps_regresses_on_decode_and_keeps_the_speedup(project):
    project.makeini(INI.replace("decode_tok_s = 40%", "decode_tok_s = 10%"))
    args = ("--llmperf-against-sim-args", "", "--llmperf-sim-args", "--sim-step-time-scale 1.3", "-rA")
    result = run(project, *SLOWER, *args)
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines(
        [
            "tiny @ concurrency 4: sim args '--sim-step-time-scale 1.3' vs sim args (defaults) (paired, 1 block) [sim]",
            "decode_tok_s *!! REGRESSED",
        ]
    )
    result.stdout.fnmatch_lines(["FAILED test_suite.py::test_base[[]4[]]*", "FAILED test_suite.py::test_mtp[[]4[]]*"])
    # Both servers' steps slowed alike: NEW's speedup is OLD's.
    result.stdout.fnmatch_lines(["PASSED test_suite.py::test_speedup[[]4[]]*"])
    assert "servers started (one at a time, 4 starts): tiny A, tiny B, tiny-mtp A, tiny-mtp B" in result.stdout.str()
    assert "recording night" not in result.stdout.str()  # OLD's runs are the reference, not recorded nights


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--llmperf-sim", "--llmperf-against-image", "vllm/vllm-openai:v0.32"],
            "*--llmperf-against-image runs two images side by side, so it needs a container target*",
        ),
        (
            ["--llmperf-docker", "--llmperf-against-image", "vllm/vllm-openai:v0.32"],
            "*name the image to judge against it with --llmperf-image NEW*",
        ),
        (
            ["--llmperf-docker", "--llmperf-image", "new:1", "--llmperf-against-sim-args", ""],
            "*--llmperf-against-sim-args gives the simulator's OLD flags, so it needs --llmperf-sim*",
        ),
        (
            ["--llmperf-sim", "--llmperf-against-sim-args", "", "--update-baselines"],
            "*a paired run judges NEW against OLD and leaves the stored baselines untouched*",
        ),
        (
            ["--llmperf-sim", "--llmperf-against-sim-args", "--sim-seed 3"],
            "*--llmperf-against-sim-args: unknown simulator flag --sim-seed*",
        ),
    ],
    ids=["image-on-sim", "no-new-image", "sim-args-on-docker", "update-baselines", "bad-sim-flag"],
)
def test_bad_combinations_are_usage_errors_before_any_server_starts(project, args, message):
    result = project.runpytest("-p", "no:benchmark", "-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "starting server" not in result.stdout.str()


def test_the_ini_twins_and_defaults_for_the_simulators_own_flags():
    opts = resolve(ini={"llmperf_sim": "true", "llmperf_against_sim_args": "defaults"})
    assert opts.paired and opts.against_sim_args == ()
    opts = resolve(ini={"llmperf_docker": "true", "llmperf_image": "b:2", "llmperf_against_image": "a:1"})
    assert opts.paired and (opts.against_image, opts.image) == ("a:1", "b:2")
    assert not resolve(cli={"llmperf_sim": True}).paired
    with pytest.raises(OptionError, match="ini option 'llmperf_against_image'.*needs a container target"):
        resolve(ini={"llmperf_sim": "true", "llmperf_against_image": "a:1"})


def test_starts_count_each_run_of_each_image_and_same_server_reuses_the_one_running():
    runs = [("base", 1), ("base", 8)]
    assert count_starts(runs, blocks=1, same_server=False) == 4
    assert count_starts(runs, blocks=3, same_server=False) == 12
    # A B | B A -> the two Bs share a start, and so do the As across the two runs.
    assert count_starts(runs, blocks=2, same_server=True) == 5
    assert count_starts(runs, blocks=1, same_server=True) == 4


def test_the_cost_line_names_servers_images_blocks_and_container_starts():
    w1, w8 = (resolve_workload({"num_prompts": 16}, c, "full", "wave") for c in (1, 8))
    from pytest_llmperf import ServerSpec

    base = ServerSpec(name="base", model="m")
    mtp = base.with_speculative({"method": "mtp", "num_speculative_tokens": 3}, name="mtp")
    plans = [
        PlannedTest("t::base[1]", (base,), (w1,)),
        PlannedTest("t::base[8]", (base,), (w8,)),
        PlannedTest("t::mtp[1]", (mtp,), (w1,)),
        PlannedTest("t::speedup[1]", (mtp, base), (w1,)),  # reuses both runs
    ]
    opts = resolve(cli={"llmperf_docker": True, "llmperf_image": "vllm:new", "llmperf_against_image": "vllm:old"})
    assert cost_line(opts, plans) == (
        "paired A/B: image vllm:new (B) against image vllm:old (A), blocks A B, B A, ...; 2 servers x 2 images "
        "x 2 blocks (3 runs of a server at a concurrency): about 12 container starts; auto adds blocks while a "
        "verdict is inconclusive, up to 8: at most 48"
    )


def test_a_broken_old_makes_new_invalid_naming_old_never_a_verdict(project):
    result = run(project, *SLOWER, "--llmperf-against-sim-args", "--sim-error-rate 0.5", "-k", "test_base")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        ["*invalid run: sim args '--sim-error-rate 0.5' (what NEW is judged against): * failed*error budget*"]
    )
    assert "REGRESSED" not in result.stdout.str()


def paired_session(root, speeds, rule=None, **cli):
    """A PairedSession on test_session's fake target: the n-th run (A B, B A, ...) gets the
    n-th decode speed; `rule`, when given, is its verdict rule."""
    from tests.unit.judging.test_session import fake_session, make_result

    cli = {"llmperf_sim": True, "llmperf_repetitions": "2", "llmperf_against_sim_args": "", **cli}
    runs = iter(speeds)
    seams = {} if rule is None else {"rule": rule}
    return fake_session(root, cli, measure=lambda *args: make_result(next(runs)), **seams)


def test_the_paired_gate_pools_the_spread_between_starts_of_the_targets_stored_baselines(tmp_path):
    from pytest_llmperf import ServerSpec
    from pytest_llmperf.baselines.outcome import PerfFailure
    from tests.unit.judging.test_session import BASE, make_session

    workload = resolve_workload({"num_prompts": 4}, 8)

    def judge(root):
        # OLD 100, 102.5 and NEW 99.5, 101 (A B, B A): NEW 1 % slower, against a 3 % tolerance,
        # with a spread between starts on two degrees of freedom only
        perf = paired_session(root, [100.0, 99.5, 101.0, 102.5])
        try:
            perf.bind(perf.run(BASE, workload), "t", {"decode_tok_s": "3%"}).assert_no_regression("decode_tok_s")
        except PerfFailure:
            pass
        (verdict,) = perf.gates[-1].verdicts
        return verdict

    with pytest.warns(UserWarning, match="inconclusive"):
        alone = judge(tmp_path / "none")
    assert alone.status == "inconclusive"

    def stored(root, base_speeds, other_speeds):
        # the same target's stored baselines: this server's five starts and another's
        for spec, speeds in [(BASE, base_speeds), (ServerSpec(name="o", model="org/o"), other_speeds)]:
            recorder, _, _ = make_session(root, speeds, llmperf_update_baselines=True, llmperf_repetitions="5")
            recorder.bind(recorder.run(spec, workload), "t").assert_no_regression("decode_tok_s")
            recorder.close()
            recorder.finish()
        return root

    # stored starts about 1 % apart, tonight's 1.2 %: no noisier than chance allows
    folder = stored(tmp_path / "stored", [100.0, 101.5, 98.5, 100.8, 99.2], [50.0, 50.4, 49.6, 50.25, 49.75])
    before = {p.name: p.read_text() for p in (folder / "baselines" / "sim").iterdir()}
    pooled = judge(folder)
    assert pooled.status == "pass"
    assert pooled.noise < alone.noise / 2
    assert pooled.baseline == alone.baseline == pytest.approx(101.25)  # still OLD's median, not the stored one
    assert {p.name: p.read_text() for p in (folder / "baselines" / "sim").iterdir()} == before  # untouched

    # stored starts 0.3 % apart: tonight is a noisier night, and the quiet spread is scaled up to it
    with pytest.warns(UserWarning, match="inconclusive"):
        noisy = judge(stored(tmp_path / "quiet", [100.0, 100.4, 99.6, 100.2, 99.8], [50.0, 50.2, 49.8, 50.1, 49.9]))
    assert noisy.status == "inconclusive" and noisy.noise > pooled.noise


def test_auto_adds_blocks_while_an_unchanged_value_could_pass_within_eight_wherever_the_change_was_read(tmp_path):
    from dataclasses import replace

    from pytest_llmperf.baselines.compare import compare
    from pytest_llmperf.baselines.tolerances import Tolerance
    from tests.unit.judging.test_session import BASE, INCONCLUSIVE

    workload = resolve_workload({"num_prompts": 4}, 8)

    def blocks(verdict, **cli):
        perf = paired_session(
            tmp_path / str(len(cli)),
            [100.0] * 40,
            rule=lambda *args, **kwargs: [verdict],
            llmperf_repetitions="auto",
            **cli,
        )
        with pytest.warns(UserWarning, match="inconclusive"):
            perf.bind(perf.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
        return perf, len(perf.runs[(BASE, workload)].results)

    # A change read far from passing (50x the data would decide it as read), with a noise an
    # unchanged value would pass under within 2.7x the data: the baseline gate stops after
    # its second run (test_session); a paired run adds blocks while runs x 2.7 <= 8.
    far = replace(INCONCLUSIVE, more_data=50.0)
    assert far.resolution == pytest.approx(1.645**2, rel=1e-3)
    perf, used = blocks(far)
    assert perf.options.max_repetitions == 8 and used == 2 + 1
    assert [start["role"] for start in perf.paired.order] == ["A", "B", "B", "A", "A", "B"]
    # the budget given is the budget used
    assert blocks(replace(far, more_data=None), llmperf_max_repetitions="2")[1] == 2

    # Noise an unchanged value could not pass under within 8 blocks: none added after two.
    wide = compare("ttft_ms_median", 100.0, 100.0, Tolerance("relative", 0.1), "lower", error=20.0)
    assert wide.status == "inconclusive" and 2 * wide.resolution > 8
    assert blocks(wide)[1] == 2


def paired_read_again(root, first, again):
    """A paired session under auto repetitions judging decode_tok_s (tolerance 5 %): OLD's
    runs at 100 tok/s, NEW's at `first` until the gate reads a flagged cell again on fresh
    blocks, then at `again`; the gate's record, whether the test failed, NEW's run and the log."""
    from tests.unit.judging.test_session import BASE, fake_session, make_result
    from tests.unit.judging.test_session_confirm import fails

    said: list[str] = []
    session = {}

    def measure(endpoint, requests, workload, speed):
        if session["perf"].paired.order[-1]["role"] == "A":
            return make_result(100.0)
        return make_result(again if any("read again on a fresh paired block" in line for line in said) else first)

    cli = {"llmperf_sim": True, "llmperf_repetitions": "auto", "llmperf_against_sim_args": ""}
    perf = session["perf"] = fake_session(root, cli, measure=measure, log=said.append)
    run = perf.bind(perf.run(BASE, resolve_workload({"num_prompts": 4}, 8)), "t", {"decode_tok_s": "5%"})
    failed, _ = fails(lambda: run.assert_no_regression("decode_tok_s"))
    perf.finish()
    return perf.gates[-1], failed, perf.runs[(run.server, run.workload)], said


def test_a_paired_regression_is_read_again_on_fresh_blocks_and_fails_where_they_read_it_too(tmp_path):
    gate, failed, new, said = paired_read_again(tmp_path, 93.0, 93.0)  # 7 % slower: beyond 5 %, within 10 %
    assert failed and gate.verdicts[0].status == "regressed"
    assert "read again at once on 3 fresh paired block(s): decode_tok_s -7.0% (reads it)" in gate.message
    fresh = [line for line in said if "read again on a fresh paired block" in line]
    assert len(fresh) == 3 and len(new.results) >= 2 + 3


def test_a_paired_regression_the_fresh_blocks_do_not_read_is_suspect_not_red(tmp_path):
    gate, failed, _, _ = paired_read_again(tmp_path, 93.0, 100.0)
    assert not failed and gate.outcome == "warn" and gate.verdicts[0].status == "suspect"
    assert "read again at once on 3 fresh paired block(s): decode_tok_s +0.0% (pass)" in gate.message
