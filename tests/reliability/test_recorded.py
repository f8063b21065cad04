"""Point 6: --update-baselines never says it recorded what it did not."""

import json

import pytest

from tests.plugin_project import SUITE, run


def test_acceptance_without_data_is_not_recorded_and_the_failure_says_why(project, monkeypatch):
    monkeypatch.setenv("TINY_MTP_SIM_ARGS", "--disable-log-stats")
    result = run(project, "-k", "test_mtp", "--update-baselines")
    result.assert_outcomes(failed=1, deselected=2)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*recorded decode_tok_s in *; not recorded, no data: acceptance_rate: *disable-log-stats*"]
    )
    assert "recorded decode_tok_s, acceptance_rate" not in out
    (path,) = (project.path / "baselines").rglob("tiny-mtp.json")
    (entry,) = json.loads(path.read_text())["concurrency"]["4"].values()
    metrics = entry["metrics"]
    assert "decode_tok_s" in metrics and "acceptance_rate" not in metrics


def test_a_misspelled_metric_is_refused_not_recorded(project):
    project.makepyfile(
        test_suite=SUITE.replace('assert_no_regression("decode_tok_s")', 'assert_no_regression("decode_toks")')
    )
    result = run(project, "-k", "test_base", "--update-baselines")
    # Found in the test's source at collection: a usage error, before any server starts.
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown metric 'decode_toks'; did you mean decode_tok_s, steady_decode_tok_s?*"])
    out = result.stdout.str() + result.stderr.str()
    assert "registry.py" not in out  # the fix, not a traceback through the plugin
    assert "starting server" not in out
    assert not (project.path / "baselines").exists() or not list((project.path / "baselines").rglob("*.json"))
