"""What a session writes, and when: baseline records and history lines at its end (an
interrupted one writes what completed), and the entries no collected test asks for."""

import json

import pytest

from tests.plugin_project import CONFTEST, SUITE, make_project, record, run


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):
    return make_project(pytester, monkeypatch, tmp_path_factory)


STOP_AFTER_BASE = """
import pathlib
import pytest

def pytest_runtest_logfinish(nodeid, location):
    if nodeid.endswith("test_base[4]"):
        pathlib.Path("seen.txt").write_text(str(pathlib.Path("baselines/sim/tiny.json").exists()))
        pytest.exit("stopped by the user")  # as Ctrl-C does: the session ends interrupted
"""


def test_an_interrupted_recording_writes_what_completed_at_its_end_and_says_so(project):
    project.makeconftest(CONFTEST + STOP_AFTER_BASE)
    result = run(project, "--update-baselines")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (project.path / "seen.txt").read_text() == "False"  # not written while the session ran
    result.stdout.fnmatch_lines(
        ["*interrupted: wrote what completed: 1 baseline record(s) in 1 file(s), *history line(s)"]
    )
    sim = project.path / "baselines" / "sim"
    assert list(json.loads((sim / "tiny.json").read_text())["concurrency"]) == ["4"]
    assert not (sim / "tiny-mtp.json").exists()
    assert {json.loads(line)["outcome"] for line in (sim / "history.jsonl").read_text().splitlines()} == {"recorded"}


def test_entries_no_collected_test_asks_for_are_listed_and_pruned_when_asked(project):
    record(project).stdout.fnmatch_lines(["*baselines written: 3 record(s) in 2 file(s)"])
    project.makepyfile(test_suite=SUITE.replace("[4]", "[2]"))  # the suite moves to concurrency 2
    selected = ("-k", "test_base or test_mtp")  # the speedup test, deselected, still asks for its entries

    moved = run(project, "--update-baselines", *selected)
    moved.assert_outcomes(passed=2, deselected=1)
    moved.stdout.fnmatch_lines(
        [
            "2 baseline entries no collected test asks for (--llmperf-prune removes them):",
            "  baselines/sim/tiny.json: concurrency 4, *num_prompts=12*",
            "  baselines/sim/tiny-mtp.json: concurrency 4, *num_prompts=12*",
        ]
    )
    assert sorted(json.loads((project.path / "baselines/sim/tiny.json").read_text())["concurrency"]) == ["2", "4"]

    pruned = run(project, "--llmperf-prune", *selected)
    pruned.assert_outcomes(passed=2, deselected=1)
    pruned.stdout.fnmatch_lines(["pruned 2 baseline entries no collected test asks for:"])
    for name in ("tiny", "tiny-mtp"):
        assert list(json.loads((project.path / f"baselines/sim/{name}.json").read_text())["concurrency"]) == ["2"]
    assert "no collected test asks for" not in str(run(project, *selected).stdout)


def test_prune_with_a_paired_run_is_a_usage_error_before_any_server_starts(project):
    result = run(project, "--llmperf-prune", "--llmperf-against-sim-args", "defaults")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llmperf-prune with a paired A/B run*"])
