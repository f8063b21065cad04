"""`llmperf bench` end to end against the simulated vLLM server (real runner, real HTTP)."""

from __future__ import annotations

import json
import re

import pytest

from pytest_llmperf.commands import cli
from pytest_llmperf.sim import SimConfig, simulated_server
from pytest_llmperf.workload.result import RunResult

MODEL = "Qwen/Qwen3.6-27B-FP8"
MTP = {"method": "mtp", "num_speculative_tokens": 3}


def write_sharegpt(path, n=40):
    convs = [
        {
            "id": f"c{i}",
            "conversations": [
                {"from": "human", "value": f"Question {i}: tell me something about topic number {i} in a sentence."},
                {"from": "gpt", "value": f"Answer {i}: " + "here is a sentence about that topic. " * (1 + i % 4)},
            ],
        }
        for i in range(n)
    ]
    path.write_text(json.dumps(convs))
    return path


def bench(url, tmp_path, *extra):
    out = tmp_path / "result.json"
    argv = [
        "bench",
        "--base-url",
        url,
        "--model",
        MODEL,
        "--dataset",
        str(tmp_path / "sharegpt.json"),
        "--concurrency",
        "4",
        "--max-tokens",
        "24",
        "--warmup",
        "1",
        "--token-cache",
        str(tmp_path / "tokens"),
        "--output",
        str(out),
        *extra,
    ]
    return cli.main(argv), out


@pytest.fixture
def dataset(tmp_path):
    return write_sharegpt(tmp_path / "sharegpt.json")


def test_bench_against_mtp_sim_prints_and_saves_recomputable_figures(tmp_path, dataset, capsys):
    with simulated_server(SimConfig(model=MODEL, speculative_config=MTP, speed=200)) as url:
        rc, out = bench(url, tmp_path, "--num-prompts", "12")
    printed = capsys.readouterr().out
    assert rc == 0, printed

    saved = RunResult.from_json(out.read_text())
    ok = [r for r in saved.records if r.ok]
    assert len(ok) == 12 and saved.stop_reason == "completed"
    # Recompute the headline figures by hand from the raw records in the file.
    decode = sum(r.completion_tokens for r in ok) / saved.duration
    prefill = sum(r.prompt_tokens for r in ok) / saved.duration
    assert all(r.completion_tokens == 24 for r in ok)  # usage, ignore of chunk counts
    assert any(len(r.chunk_times) < r.completion_tokens for r in ok)  # MTP: multi-token chunks
    assert re.search(rf"^Output token throughput \(tok/s\): +{decode:.2f}$", printed, re.M), printed
    assert re.search(rf"^Input token throughput \(tok/s\): +{prefill:.2f}$", printed, re.M)
    assert printed.count("Completed 12/12, 0 errors in ") == 1
    # Acceptance from the sim's /metrics counters, printed with a per-position breakdown.
    rate = re.search(r"^Acceptance rate \(%\): +([\d.]+)$", printed, re.M)
    positions = re.findall(r"^  Position (\d): +([\d.]+)$", printed, re.M)
    assert rate and [p for p, _ in positions] == ["0", "1", "2"], printed
    spec = saved.spec_decode()
    assert spec.ok and float(rate[1]) == pytest.approx(spec.acceptance_rate * 100, abs=0.005)
    assert spec.acceptance_length == pytest.approx(1 + spec.accepted / spec.drafts)
    # what identifies the workload, for comparing two saved results
    assert saved.config["seed"] == 0 and saved.config["dataset"] == "sharegpt.json"
    assert saved.config["concurrency"] == 4 and saved.config["max_tokens"] == 24


def test_bench_against_stats_disabled_sim_says_so(tmp_path, dataset, capsys):
    cfg = SimConfig(model=MODEL, speculative_config=MTP, speed=200, disable_log_stats=True)
    with simulated_server(cfg) as url:
        rc, out = bench(url, tmp_path, "--num-prompts", "4", "--approx-tokens")
    printed = capsys.readouterr().out
    assert rc == 0
    assert re.search(r"^Acceptance rate \(%\): +n/a", printed, re.M) and "--disable-log-stats" in printed
    assert RunResult.from_json(out.read_text()).summary().acceptance_rate is None


def test_bench_unreachable_server_is_a_clear_error(tmp_path, dataset, capsys):
    with simulated_server(SimConfig(model=MODEL, speed=200)) as url:
        pass  # the port is closed again
    rc, out = bench(url, tmp_path, "--num-prompts", "2", "--approx-tokens")
    assert rc == 1 and not out.exists()
    assert "llmperf: error:" in capsys.readouterr().err


def test_two_cli_runs_with_one_seed_send_the_same_prompts_and_record_it(tmp_path, dataset, capsys):
    results = {}
    for name, spec_cfg, seed in (("base", None, "0"), ("mtp", MTP, "0"), ("mtp_seed1", MTP, "1")):
        with simulated_server(SimConfig(model=MODEL, speculative_config=spec_cfg, speed=200)) as url:
            rc, out = bench(url, tmp_path, "--num-prompts", "8", "--approx-tokens", "--seed", seed)
        assert rc == 0
        results[name] = RunResult.from_json(out.read_text())
    capsys.readouterr()

    base, mtp, other = results["base"], results["mtp"], results["mtp_seed1"]

    def prompts(result):
        return [r.expected_prompt_len for r in result.records]

    assert prompts(base) == prompts(mtp) != prompts(other)
    assert base.spec_decode().status == "not_speculative"
    identity = ("dataset", "dataset_sha256", "seed", "num_prompts", "max_tokens", "concurrency", "endpoint")
    assert {k: base.config[k] for k in identity} == {k: mtp.config[k] for k in identity}
    assert other.config["seed"] == 1
