"""A reasoning model end to end (pytester, simulated server): a chat run of a server with
`--reasoning-parser qwen3` records and shows its time to first answer token and token
split beside vLLM's TTFT; a server without shows and records none of them."""

from __future__ import annotations

import json

import pytest

from pytest_llmperf.metrics.registry import REASONING_METRICS
from tests.plugin_project import make_project, run

CONFTEST = """
from pytest_llmperf import ServerSpec

PLAIN = ServerSpec(name="tiny", model="org/tiny", args=("--max-num-seqs", "8"))
THINK = ServerSpec(
    name="tiny-think",
    model="org/tiny",
    args=("--max-num-seqs", "8", "--reasoning-parser", "qwen3"),
    sim_args=("--sim-reasoning-share", "0.2"),
)
"""

SUITE = """
import pytest
from conftest import PLAIN, THINK

W = dict(num_prompts=12, max_tokens=64, warmup=1, endpoint="chat")

@pytest.mark.parametrize("concurrency", [4])
@pytest.mark.llmperf(server=THINK, **W)
def test_think(llmperf, concurrency):
    run = llmperf.run(concurrency=concurrency)
    assert run.value("ttfa_ms_median") > run.value("ttft_ms_median")
    assert 0 < run.value("answered") <= run.value("completed")
    assert run.value("total_reasoning_tokens") + run.value("total_answer_tokens") == run.value("total_output_tokens")
    run.assert_no_regression("decode_tok_s")

@pytest.mark.parametrize("concurrency", [4])
@pytest.mark.llmperf(server=PLAIN, **W)
def test_plain(llmperf, concurrency):
    run = llmperf.run(concurrency=concurrency)
    assert run.value("ttfa_ms_median") is None and run.value("reasoning_share") is None
    run.assert_no_regression("decode_tok_s")
"""


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):
    make_project(pytester, monkeypatch, tmp_path_factory)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def _metrics(project, server):
    data = json.loads((project.path / "baselines" / "sim" / f"{server}.json").read_text())
    (entry,) = data["concurrency"]["4"].values()
    return entry["metrics"]


def test_a_reasoning_run_records_and_shows_ttfa_and_a_plain_one_neither(project):
    result = run(project, "--update-baselines")
    result.assert_outcomes(passed=2)
    think, plain = _metrics(project, "tiny-think"), _metrics(project, "tiny")
    assert set(REASONING_METRICS) <= set(think)  # recorded with the run's other figures
    assert think["ttfa_ms_median"]["value"] > think["ttft_ms_median"]["value"]
    assert think["ttfa_ms_median"]["direction"] == "lower"
    assert not set(REASONING_METRICS) & set(plain)
    at = next(i for i, line in enumerate(result.outlines) if line.startswith("server ") and "decode tok/s" in line)
    header, _, *rows = result.outlines[at : at + 4]
    assert header.rstrip().endswith("TTFA p50 ms  reasoning share")
    cells = {row.split()[0]: row.split() for row in rows}
    assert cells["tiny"][-2:] == ["-", "-"]
    assert cells["tiny-think"][-1] == format(think["reasoning_share"]["value"], ".3f")
