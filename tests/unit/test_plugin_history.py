"""End to end with pytester: gated runs append history, and the summary flags a drift."""

import json

import numpy as np
import pytest

from pytest_llmperf.baselines import drift, history
from tests.plugin_project import make_project, run


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):
    return make_project(pytester, monkeypatch, tmp_path_factory)


needs_otava = pytest.mark.skipif(
    not drift.detector_available(), reason="apache-otava is not installed: pip install -e '.[dev]'"
)


@needs_otava
def test_runs_append_history_and_the_summary_flags_a_drift_each_night_passed(project):
    path = project.path / "baselines" / "sim" / "history.jsonl"
    run(project, "-k", "test_base", "--update-baselines").assert_outcomes(passed=1)
    (recorded,) = history.read([path]).records
    assert (recorded["server"], recorded["concurrency"], recorded["metric"]) == ("tiny", 4, "decode_tok_s")
    assert recorded["outcome"] == "recorded" and recorded["target"] == "sim"

    # 17 earlier nights: flat, then -1.5 % a night, each passing its gate.
    rng = np.random.default_rng(0)
    levels = [1.0] * 11 + [0.985**k for k in range(1, 7)]
    nights = [
        {
            **recorded,
            "date": f"2026-11-{i + 1:02d}T02:00:00+00:00",
            "value": recorded["value"] / 0.985**6 * v * (1 + rng.normal(0, 0.01)),  # tonight's level is the last
        }
        for i, v in enumerate(levels)
    ]
    for night in nights:
        night.update(outcome="pass", vllm=f"0.32.0.dev{night['date'][8:10]}")
    path.write_text("".join(json.dumps(n) + "\n" for n in nights))

    result = run(project, "-k", "test_base")  # its own verdict (pass, or invalid on a loaded host) aside
    out = result.stdout.str()
    assert "drift: sustained shifts that passed every gate" in out
    assert out.index("drift: sustained") > out.index("llmperf verdicts:")  # after the verdict table
    result.stdout.fnmatch_lines(["*tiny @ 4: decode_tok_s has fallen *% in * runs since vLLM 0.32.0.dev1*"])
    assert len(history.read([path]).records) == 18  # tonight's line appended

    quiet = run(project, "-k", "test_base", "--llmperf-history", "off")
    assert "drift:" not in quiet.stdout.str()
    assert len(history.read([path]).records) == 18
