"""The plugin end to end with pytester: a tiny suite against the simulated server
(tests/plugin_project.py). Every verdict here is decided by an injection far larger
than the project's loose timing tolerances, not by noise.
"""

import json
import re

import pytest

from tests.plugin_project import CONFTEST, INI, SUITE, make_project, record, run


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):
    return make_project(pytester, monkeypatch, tmp_path_factory)


def test_no_target_skips_with_a_reason_naming_the_options(project):
    result = project.runpytest("-p", "no:benchmark", "-rs")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*no llmperf target chosen: pass --llmperf-sim*--llmperf-gpu*--llmperf-base-url*"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--llmperf-sim", "--llmperf-gpu"], "*--llmperf-sim and --llmperf-gpu choose different targets*"),
        (["--llmperf-profile", "huge"], "*--llmperf-profile: expected one of smoke, nightly, full, got 'huge'*"),
        (["--llmperf-sim", "--llmperf-image", "vllm/vllm-openai:nightly"], "*only applies to container targets*"),
    ],
)
def test_option_errors_are_usage_errors_with_the_fix(project, args, message):
    result = project.runpytest("-p", "no:benchmark", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


TYPO_IN_MARKER = """
import pytest
from conftest import BASE

@pytest.mark.llmperf(server=BASE, num_prompts=4, tolerances={"decode_toks": "5%"})
def test_typo(llmperf):
    llmperf.run(concurrency=1).assert_no_regression()
"""


def test_an_unknown_metric_in_a_marker_or_the_ini_stops_collection_naming_the_nearest(project):
    project.makepyfile(test_suite=TYPO_IN_MARKER)
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*test_typo: llmperf tolerances: unknown metric 'decode_toks'; did you mean decode_tok_s, steady_decode_*"]
    )
    assert "servers started" not in result.stdout.str()

    project.makeini(INI.replace("mtp_speedup = 25%", "mtp_speedup = 25%\n    ttft_median = 20%"))
    project.makepyfile(test_suite=SUITE)
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*ini llmperf_tolerances: tolerance override: unknown metric 'ttft_median'; did you mean ttft_ms_median*"]
    )


def test_an_unknown_metric_built_at_run_time_fails_that_test_naming_the_nearest(project):
    # A literal name is checked at collection (tests/reliability/test_bad_input.py); one
    # the test builds is checked when the assertion runs.
    project.makepyfile(
        test_suite=SUITE.replace('assert_no_regression("decode_tok_s")', 'assert_no_regression("decode_" + "toks")')
    )
    result = run(project, "-k", "test_base")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        ["*assert_no_regression: unknown metric 'decode_toks'; did you mean decode_tok_s, steady_decode_tok_s?*"]
    )


def test_one_clock_report_baseline_terminal_and_show_agree_at_simulator_speed_10(project, capsys):
    """The simulator runs 10 times faster than real: records are on its clock, every
    figure anywhere is in real time, the same number everywhere."""
    from pytest_llmperf.commands import cli
    from pytest_llmperf.metrics.registry import format_value

    report = project.path / "report.json"
    args = ["-k", "test_base", "-o", "llmperf_sim_speed=10", "--update-baselines", "--llmperf-repetitions=1"]
    result = run(project, *args, "--llmperf-report", str(report))
    result.assert_outcomes(passed=1, deselected=2)
    (entry,) = json.loads(report.read_text())["runs"]
    (raw,) = entry["results"]
    assert raw["clock_speed"] == 10.0 and entry["provenance"]["clock_speed"] == 10.0
    decode, tpot = entry["summary"]["decode_tok_s"], entry["summary"]["tpot_ms_median"]
    assert raw["summary"]["decode_tok_s"] == decode and raw["summary"]["tpot_ms_median"] == tpot
    # Real time: ten times the TPOT the records show on the simulator's own clock.
    per_request = [
        (r["chunk_times"][-1] - r["chunk_times"][0]) / (r["completion_tokens"] - 1) * 1000
        for r in raw["records"]
        if r["error"] is None and r["completion_tokens"] > 1
    ]
    assert tpot == pytest.approx(10 * sorted(per_request)[len(per_request) // 2], rel=0.2)
    (baseline,) = (project.path / "baselines" / "sim").glob("tiny.json")
    (entry,) = json.loads(baseline.read_text())["concurrency"]["4"].values()
    recorded = entry["metrics"]
    assert recorded["decode_tok_s"]["value"] == pytest.approx(decode, rel=1e-5)
    assert recorded["tpot_ms_median"]["value"] == pytest.approx(tpot, rel=1e-5)
    row = next(line for line in result.stdout.lines if line.startswith("tiny ") and " 4 " in line)
    assert format_value("decode_tok_s", decode) in row.split()
    saved = project.path / "result.json"
    saved.write_text(json.dumps(raw))
    capsys.readouterr()
    assert cli.main(["show", str(saved)]) == 0
    assert re.search(rf"^Output token throughput \(tok/s\): +{decode:.2f}$", capsys.readouterr().out, re.M)


def test_a_bad_simulator_flag_is_a_usage_error_before_any_server_starts(project):
    result = run(project, "--llmperf-sim-args", "--sim-seed 3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llmperf-sim-args: unknown simulator flag --sim-seed; known: --sim-speed*"])
    assert "starting server" not in result.stdout.str()


def test_prompts_the_servers_tokenizer_filters_out_fail_the_test_in_one_line_naming_the_knobs(project):
    """Enough conversations for the check before start, too few pass the length filters by
    the server's own token counts: known only once it runs, a one-line failure."""
    records = [{"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello there"}]}] * 60
    (project.path / "sharegpt.json").write_text(json.dumps(records))
    result = run(project, "-k", "test_base")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "test_suite.py::test_base[[]4[]]: org/tiny @ concurrency 4: 13 prompts needed (12 measured + 1 warm-up) "
            "but only 0 of 60 conversations in sharegpt.json pass the length filters (min_len=4, *; tokens counted "
            "by server); lower num_prompts= (or warmup=) in the llmperf marker, run a smaller --llmperf-profile, "
            "or point --llmperf-dataset at a larger file"
        ]
    )
    assert "session.py:" not in result.stdout.str() and "oversample" not in result.stdout.str()


def test_missing_baselines_then_update_then_pass_with_cached_runs_and_ordered_servers(project):
    missing = run(project)
    missing.assert_outcomes(failed=3)
    missing.stdout.fnmatch_lines(
        [
            "*MISSING BASELINE*",
            "*record it with: pytest 'test_suite.py::test_base[[]4[]]' --llmperf-sim --update-baselines*",
        ]
    )

    recorded = record(project)
    recorded.stdout.fnmatch_lines(["*baselines recorded (review and commit them)*"])
    files = sorted(p.name for p in (project.path / "baselines" / "sim").glob("*.json"))  # beside history.jsonl
    assert files == ["tiny-mtp.json", "tiny.json"]
    text = (project.path / "baselines" / "sim" / "tiny-mtp.json").read_text()
    doc = json.loads(text)
    assert text == json.dumps(doc, indent=2, sort_keys=True) + "\n"  # deterministic layout
    (entry,) = doc["concurrency"]["4"].values()  # the suite's one workload
    assert {"decode_tok_s", "acceptance_rate", "mtp_speedup"} <= set(entry["metrics"])
    assert entry["workload"]["max_tokens"] == 48

    report = project.path / "report.json"
    passed = run(project, "--llmperf-report", str(report))
    passed.assert_outcomes(passed=3)
    data = json.loads(report.read_text())
    assert data["servers_started"] == ["tiny", "tiny-mtp"]  # each once, base first
    assert len(data["runs"]) == 2  # speedup reused both runs
    assert all(len(run["results"][0]["records"]) == 12 for run in data["runs"])
    passed.stdout.fnmatch_lines(["*servers started (one at a time): tiny, tiny-mtp*"])


def test_injected_acceptance_drop_fails_the_acceptance_test_naming_the_metric(project):
    record(project)
    result = run(project, "--llmperf-sim-args", "--sim-acceptance-scale 0.6", "-rf")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1
    result.stdout.fnmatch_lines(["*acceptance_rate*REGRESSED*"])
    result.stdout.fnmatch_lines(["FAILED test_suite.py::test_mtp[[]4[]]*"])
    assert "session.py:" not in result.stdout.str()  # the table, not a traceback through the plugin
    assert "FAILED test_suite.py::test_base" not in result.stdout.str()

    quiet = run(project, "--llmperf-sim-args", "--sim-acceptance-scale 0.6", "-q", "-rf").stdout.str()
    assert "acceptance_rate" in quiet and "REGRESSED" in quiet  # the failing test's table
    assert "FAILED test_suite.py::test_mtp[4] - " in quiet
    assert "[llmperf]" not in quiet and "= llmperf summary =" not in quiet and "warm-up" not in quiet


def test_slower_mtp_step_fails_the_speedup_test_while_base_passes(project, monkeypatch):
    record(project)
    monkeypatch.setenv("TINY_MTP_SIM_ARGS", "--sim-step-time-scale 2.5")
    result = run(project, "-rA")
    result.stdout.fnmatch_lines(["*mtp_speedup*REGRESSED*"])
    # Under the table: the one thing that moved, and decode's fall put on the steps.
    result.stdout.fnmatch_lines(
        [
            "what changed since the baseline (recorded *): nothing but the simulator args: (none) -> "
            "--sim-step-time-scale 2.5",
            "why decode moved: -*% decode: *% from acceptance length, -*% from step time*",
        ]
    )
    why = re.search(
        r"why decode moved: -([0-9.]+)% decode: ([-+][0-9.]+)% from acceptance length, -([0-9.]+)% from step",
        result.stdout.str(),
    )
    assert abs(float(why[2])) < 5 and abs(float(why[3]) - 60) < 8  # 1 / 2.5: steps 60 % fewer per second
    result.stdout.fnmatch_lines(["PASSED test_suite.py::test_base[[]4[]]*"])
    result.stdout.fnmatch_lines(["FAILED test_suite.py::test_speedup[[]4[]]*"])


def test_improvement_beyond_tolerance_passes_with_a_hint_to_update(project, monkeypatch):
    record(project)
    monkeypatch.setenv("TINY_MTP_SIM_ARGS", "--sim-step-time-scale 0.7")
    result = run(project)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*mtp_speedup*improved*", "*if this is the new normal, record it with*"])


def test_baseline_from_another_workload_is_refused_saying_what_differs(project):
    record(project)
    result = run(project, "--llmperf-profile", "smoke")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*has no entry for this workload at concurrency 4: its entry there was recorded under a "
            "different workload; nothing to compare with. Differences:",
            "*max_seconds: baseline null, measured 60.0*",
            "*profile: baseline full, measured smoke*",
            "*Record this workload beside it with: pytest 'test_suite.py::test_*[[]4[]]' --llmperf-sim "
            "--llmperf-profile smoke --update-baselines*",
        ]
    )


def test_xdist_never_runs_gpu_servers_side_by_side(project):
    pytest.importorskip("xdist")
    result = project.runpytest("-p", "no:benchmark", "--llmperf-gpu", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*would start several vLLM servers at once on one GPU*"])


def test_xdist_on_the_simulator_needs_loadgroup(project):
    pytest.importorskip("xdist")
    result = project.runpytest("-p", "no:benchmark", "--llmperf-sim", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*add --dist loadgroup*"])


def test_xdist_loadgroup_keeps_a_models_servers_on_one_worker(project):
    pytest.importorskip("xdist")
    result = run(project, "-n", "2", "--dist", "loadgroup", "--update-baselines", "-v")
    result.assert_outcomes(passed=3)
    # "[gw1] [ 33%] PASSED test_suite.py::test_base[4]": the model's three tests, on one worker.
    ran = re.findall(r"\[(gw\d+)\].*PASSED (test_suite\.py::[^\s@]+)", result.stdout.str())
    assert sorted(test for _, test in ran) == [
        "test_suite.py::test_base[4]",
        "test_suite.py::test_mtp[4]",
        "test_suite.py::test_speedup[4]",
    ]
    assert len({worker for worker, _ in ran}) == 1
    summary = result.stdout.str()[result.stdout.str().index("llmperf summary") :]
    assert re.search(r"servers started \(one at a time[^)]*\): tiny, tiny-mtp$", summary, re.MULTILINE)
    doc = json.loads((project.path / "baselines" / "sim" / "tiny-mtp.json").read_text())
    (entry,) = doc["concurrency"]["4"].values()
    assert "mtp_speedup" in entry["metrics"]  # speedup found both runs cached


OTHER_MODEL_SUITE = """
import pytest
from pytest_llmperf import ServerSpec

OTHER = ServerSpec(name="other", model="org/other", args=("--max-num-seqs", "8"))

@pytest.mark.parametrize("concurrency", [2, 4])
@pytest.mark.llmperf(server=OTHER, num_prompts=8, max_tokens=32, warmup=1)
def test_other(llmperf, concurrency):
    llmperf.run(concurrency=concurrency).assert_no_regression("decode_tok_s")
"""


def test_xdist_workers_send_their_runs_to_the_controller_for_one_summary_and_one_report(project, monkeypatch):
    pytest.importorskip("xdist")
    project.makepyfile(test_other=OTHER_MODEL_SUITE)  # a second model: a second group, so a second worker
    step_summary = project.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))  # the workers inherit it
    report = project.path / "report.json"
    result = run(project, "-n", "2", "--dist", "loadgroup", "--update-baselines", "--llmperf-report", str(report))
    result.assert_outcomes(passed=5)

    data = json.loads(report.read_text())
    runs = {(r["server"]["name"], r["workload"]["concurrency"]): r for r in data["runs"]}
    assert sorted(runs) == [("other", 2), ("other", 4), ("tiny", 4), ("tiny-mtp", 4)]  # every worker's runs
    assert sorted(data["servers_started"]) == ["other", "tiny", "tiny-mtp"]
    assert data["workers"] == ["gw0", "gw1"] and data["lost_workers"] == []
    assert {r["worker"] for r in data["runs"]} == {"gw0", "gw1"}
    assert runs["tiny", 4]["worker"] == runs["tiny-mtp", 4]["worker"] != runs["other", 2]["worker"]
    assert all(len(r["results"][0]["records"]) == r["workload"]["num_prompts"] for r in data["runs"])
    # Node ids as a command line takes them: without the "@<group>" loadgroup appends.
    assert sorted(v["test"] for v in data["verdicts"]) == [
        "test_other.py::test_other[2]",
        "test_other.py::test_other[4]",
        "test_suite.py::test_base[4]",
        "test_suite.py::test_mtp[4]",
        "test_suite.py::test_speedup[4]",
    ]
    assert {v["outcome"] for v in data["verdicts"]} == {"recorded"}

    out = result.stdout.str()
    assert "no workload ran" not in out
    summary = out[out.index("llmperf summary") :]
    (started,) = re.findall(r"servers started \(one at a time on each of 2 xdist workers\): (.*)", summary)
    assert sorted(started.split(", ")) == ["other", "tiny", "tiny-mtp"]  # each model's servers on one worker, once
    for name, concurrency in runs:
        assert re.search(rf"^{re.escape(name)}\s+{concurrency}\s+\d+/\d+", summary, re.M), (name, concurrency)
    result.stdout.fnmatch_lines(["*baselines recorded (review and commit them)*", "*other @ 2: recorded*"])
    assert step_summary.read_text().count("# pytest-llmperf report") == 1  # the controller's, once


def test_the_controller_keeps_each_workers_document_and_remembers_a_worker_lost_without_one():
    import types

    from pytest_llmperf.collecting import xdist_support

    config = types.SimpleNamespace(stash=pytest.Stash())
    hooks = xdist_support.XdistHooks(options=None)

    def node(worker, output=None):
        return types.SimpleNamespace(config=config, workerinput={"workerid": worker}, workeroutput=output or {})

    doc = {"runs": [{"server": {"name": "a"}}]}
    hooks.pytest_testnodedown(node("gw0", {xdist_support.WORKEROUTPUT_KEY: json.dumps(doc)}), None)
    hooks.pytest_testnodedown(node("gw0"), "keyboard-interrupt")  # xdist reports a Ctrl-C'd worker twice
    hooks.pytest_testnodedown(node("gw1"), "worker crashed")
    hooks.pytest_testnodedown(node("gw2"), None)  # ran no performance test: nothing to report
    assert config.stash[xdist_support.WORKER_REPORTS_KEY] == {"gw0": doc, "gw1": None}


HANDLER_PROBE = """
import signal
from pytest_llmperf.util.signals import TERMINATE

def test_probe():
    installed = signal.getsignal(signal.SIGTERM) == TERMINATE._on_sigterm
    print(f"SIGTERM handler installed: {installed}")
"""


@pytest.mark.parametrize("args, installed", [(["--llmperf-sim"], True), ([], False)], ids=["sim", "no-target"])
def test_sigterm_acts_as_ctrl_c_during_a_session_with_a_target_and_is_restored_after(project, args, installed):
    import signal

    before = signal.getsignal(signal.SIGTERM)
    project.makepyfile(test_suite=HANDLER_PROBE)
    result = project.runpytest("-p", "no:benchmark", "-s", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*SIGTERM handler installed: {installed}"])
    assert signal.getsignal(signal.SIGTERM) is before


SIGTERM_AT_STOP = """
import signal
from contextlib import contextmanager

import pytest


class StopsWithSigterm:
    \"\"\"The kind's own target, whose servers get a SIGTERM as they stop.\"\"\"

    def __init__(self, target):
        self.target = target

    def __getattr__(self, name):
        return getattr(self.target, name)

    @contextmanager
    def start(self, spec):
        with self.target.start(spec) as endpoint:
            try:
                yield endpoint
            finally:
                signal.raise_signal(signal.SIGTERM)  # while the session stops its servers


@pytest.hookimpl(tryfirst=True)
def pytest_llmperf_make_target(options, kind, context):
    return StopsWithSigterm(kind.factory(options, context))
"""


def test_a_sigterm_while_the_session_finishes_lets_it_write_the_report_then_exits_interrupted(project):
    project.makeconftest(CONFTEST + SIGTERM_AT_STOP)
    report = project.path / "report.json"
    result = run(project, "-k", "test_base", "--llmperf-report", str(report))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*llmperf summary*", f"full report: {report} (JSON only*"])
    assert [r["server"]["name"] for r in json.loads(report.read_text())["runs"]] == ["tiny"]


def test_a_report_folder_holds_the_page_the_summary_the_json_and_the_plots(project):
    record(project)
    folder = project.path / "reports"
    result = run(project, "-k", "test_base", "--llmperf-report", str(folder))
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines([f"report: {folder / 'report.html'} (with summary.md, report.json, * plots in plots/)"])
    assert [r["server"]["name"] for r in json.loads((folder / "report.json").read_text())["runs"]] == ["tiny"]
    assert "| tiny | 4 |" in (folder / "summary.md").read_text()
    page = (folder / "report.html").read_text()
    assert page.count("<svg") == len(list((folder / "plots").glob("*.svg"))) >= 2  # decode/TPOT, latency, timeline


def test_help_lists_every_option(project):
    from pytest_llmperf.options import OPTIONS

    result = project.runpytest("-p", "no:benchmark", "--help")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    text = result.stdout.str()
    assert all(opt.flag in text for opt in OPTIONS)
    assert "a share ('5%')" in text  # argparse %-formats help: the percent sign escaped
