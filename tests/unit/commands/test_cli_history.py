"""`llmperf history` and `llmperf compare` on known inputs, through the CLI's main()."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from pytest_llmperf import ServerSpec
from pytest_llmperf.baselines import drift, history
from pytest_llmperf.commands import cli
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.metrics.registry import flatten
from pytest_llmperf.report.document import _run, plain
from pytest_llmperf.workload.result import RunResult
from pytest_llmperf.workload.workload import resolve_workload

# -- llmperf history ------------------------------------------------------------------


def write_history(path, values, metric="steady_decode_tok_s", server="qwen", concurrency=8):
    lines = [
        history.make_record(
            server=server,
            concurrency=concurrency,
            metric=metric,
            value=v,
            outcome="pass",
            target="sim",
            provenance={
                "date": f"2026-11-{i + 1:02d}T02:00:00+00:00",
                "image": f"vllm/vllm-openai:nightly-{i + 1:02d}",
                "image_digest": f"sha256:{i:02d}" + "ab" * 20,
                "vllm_version": f"0.32.0.dev{i + 1}",
            },
            workload="0123456789ab",
        )
        for i, v in enumerate(values)
    ]
    history.append(path, lines)


def noisy(levels, seed=0):
    rng = np.random.default_rng(seed)
    return [400 * v * (1 + rng.normal(0, 0.01)) for v in levels]


needs_otava = pytest.mark.skipif(
    not drift.detector_available(), reason="apache-otava is not installed: pip install -e '.[dev]'"
)


@needs_otava
def test_history_shows_the_trend_the_change_point_its_image_and_step(tmp_path, capsys):
    path = tmp_path / "baselines" / "sim" / "history.jsonl"
    write_history(path, noisy([1.0] * 10 + [0.93] * 8))
    write_history(path, noisy([1.0] * 18, seed=1), metric="acceptance_length")
    assert cli.main(["history", "--path", str(tmp_path / "baselines")]) == 0
    out = capsys.readouterr().out
    assert f"history: {path}: 36 lines, 2 series" in out
    block = out.split("qwen @ 8  steady_decode_tok_s")[1]
    assert "18 runs 2026-11-01 .. 2026-11-18" in block
    assert "change at run 11: " in block and "(-7." in block
    assert "image vllm/vllm-openai:nightly-11 (10abababab" in block and "vLLM 0.32.0.dev11" in block
    assert "FLAGGED: qwen @ 8: steady_decode_tok_s has fallen 7." in block
    assert "in 8 runs since image vllm/vllm-openai:nightly-11" in block
    spark = block.splitlines()[1].split()[0]
    assert len(spark) == 18 and set(spark) <= set("▁▂▃▄▅▆▇█")
    assert "no change point" in out.split("qwen @ 8  acceptance_length")[1]


def test_without_otava_the_trend_is_shown_with_a_note(tmp_path, capsys, monkeypatch):
    path = tmp_path / "history.jsonl"
    write_history(path, [400.0] * 6)
    monkeypatch.setattr(drift, "detector_available", lambda: False)
    assert cli.main(["history", "--path", str(path)]) == 0
    out = capsys.readouterr().out
    assert "note: trends only, no change points: pip install 'pytest-llmperf[history]'" in out
    assert "▄▄▄▄▄▄  latest 400.0 tok/s" in out


def test_history_filters_by_server_and_metric_globs(tmp_path, capsys):
    path = tmp_path / "history.jsonl"
    write_history(path, [400.0] * 6)
    write_history(path, [400.0] * 6, server="other")
    assert cli.main(["history", "--path", str(path), "--server", "qw*", "--metric", "steady_*"]) == 0
    out = capsys.readouterr().out
    assert "1 series" in out and "other" not in out
    assert cli.main(["history", "--path", str(path), "--metric", "ttft*"]) == 0
    assert "no series matches --server/--metric" in capsys.readouterr().out


def test_history_bad_inputs_say_what_to_do(tmp_path, capsys):
    assert cli.main(["history", "--path", str(tmp_path / "missing")]) == 1
    assert "no history at" in capsys.readouterr().err
    assert cli.main(["history", "--path", str(tmp_path)]) == 1
    assert "no history.jsonl under" in capsys.readouterr().err
    bad = tmp_path / "history.jsonl"
    bad.write_text("not json\n")
    assert cli.main(["history", "--path", str(bad)]) == 0
    assert f"skipped {bad}:1: not JSON" in capsys.readouterr().out


# -- llmperf compare ------------------------------------------------------------------


def bench_result(decode_tok_s, n=24, tokens=100, concurrency=8, seed=0, **config):
    """n requests, `concurrency` at a time, each `tokens` tokens at a jittered pace."""
    rng = np.random.default_rng(seed)
    per_stream = decode_tok_s / concurrency
    records, start = [], 0.0
    for i in range(n):
        if i and i % concurrency == 0:
            start = max(r.end_time for r in records)
        gap = 1 / (per_stream * (1 + rng.normal(0, 0.01)))
        chunks = [start + 0.05 + gap * k for k in range(tokens)]
        records.append(
            RequestRecord(
                index=i,
                send_time=start,
                chunk_times=chunks,
                end_time=chunks[-1],
                prompt_tokens=50,
                completion_tokens=tokens,
                finish_reason="length",
                status=200,
            )
        )
    return RunResult(
        config={"concurrency": concurrency, "num_prompts": n, "max_tokens": tokens, "model": "org/m", **config},
        records=records,
        duration=max(r.end_time for r in records),
        attempted=n,
        stop_reason="completed",
    )


def write(path, result):
    path.write_text(result.to_json())
    return str(path)


def test_identical_bench_files_compare_as_all_pass(tmp_path, capsys):
    a = write(tmp_path / "a.json", bench_result(400.0))
    assert cli.main(["compare", a, a]) == 0
    out = capsys.readouterr().out
    assert "org/m @ concurrency 8:" in out and "steady_decode_tok_s" in out and "pass" in out
    assert out.rstrip().endswith("llmperf compare: all pass")


def test_a_slower_b_is_regressed_with_exit_1(tmp_path, capsys):
    a = write(tmp_path / "a.json", bench_result(400.0))
    b = write(tmp_path / "b.json", bench_result(360.0, seed=1))
    assert cli.main(["compare", a, b]) == 1
    out = capsys.readouterr().out
    assert "!! REGRESSED" in out and "-9.7%" in out
    assert "llmperf compare: FAIL: steady_decode_tok_s" in out
    assert cli.main(["compare", a, b, "--tolerance", "steady_decode_tok_s=15%"]) == 0


def test_differing_workloads_are_refused_with_the_differences(tmp_path, capsys):
    a = write(tmp_path / "a.json", bench_result(400.0))
    b = write(tmp_path / "b.json", bench_result(400.0, tokens=50, seed=2))
    assert cli.main(["compare", a, b]) == 2
    err = capsys.readouterr().err
    assert "cannot compare: org/m @ concurrency 8: different workloads or hardware; refusing to compare" in err
    assert "  - max_tokens: A 100, B 50" in err


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such file"),
        ("{not json", "not JSON"),
        ('{"hello": 1}', "neither a --llmperf-report JSON"),
        ('{"runs": [{"server": 1}], "verdicts": []}', "run 1 is not a report run"),
    ],
)
def test_bad_inputs_give_clear_errors(tmp_path, capsys, content, message):
    good = write(tmp_path / "good.json", bench_result(400.0))
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    assert cli.main(["compare", str(bad), good]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"llmperf compare: cannot compare: {bad}") and message in err


SERVER = ServerSpec(name="qwen", model="org/m")


def report(tmp_path, name, decodes, max_tokens=100):
    runs = []
    for concurrency, decode in decodes.items():
        result = bench_result(decode, concurrency=concurrency, tokens=max_tokens)
        result = dataclasses.replace(result, config={k: v for k, v in result.config.items() if k != "model"})
        workload = resolve_workload({"num_prompts": 24, "max_tokens": max_tokens}, concurrency)
        flat = flatten(result.summary().to_dict())
        measured = MeasuredRun(
            server=SERVER,
            workload=workload,
            results=[result],
            samples={k: [v] for k, v in flat.items()},
            provenance={"target": "sim"},
        )
        runs.append(_run(measured, {**workload.to_dict(), "model": SERVER.model}))
    path = tmp_path / name
    path.write_text(json.dumps(plain({"plugin_version": "0", "runs": runs, "verdicts": []})))
    return str(path)


def test_reports_pair_runs_by_server_and_concurrency(tmp_path, capsys):
    a = report(tmp_path, "a.json", {1: 100.0, 8: 400.0})
    b = report(tmp_path, "b.json", {8: 400.0, 32: 900.0})
    assert cli.main(["compare", a, a]) == 0
    out = capsys.readouterr().out
    assert "qwen @ concurrency 1:" in out and "qwen @ concurrency 8:" in out
    assert cli.main(["compare", a, b]) == 0
    out = capsys.readouterr().out
    assert "only in A: qwen @ 1" in out and "only in B: qwen @ 32" in out


def test_a_report_and_a_bench_result_are_not_compared(tmp_path, capsys):
    a = report(tmp_path, "a.json", {8: 400.0})
    b = write(tmp_path / "b.json", bench_result(400.0))
    assert cli.main(["compare", a, b]) == 2
    assert "compare two of a kind" in capsys.readouterr().err


def test_report_runs_of_another_workload_are_refused(tmp_path, capsys):
    a = report(tmp_path, "a.json", {8: 400.0})
    b = report(tmp_path, "b.json", {8: 400.0}, max_tokens=50)
    assert cli.main(["compare", a, b]) == 2
    assert "max_tokens: A 100, B 50" in capsys.readouterr().err


def test_a_b_whose_usage_the_generation_counter_does_not_confirm_is_invalid(tmp_path, capsys):
    def counted(result, delta):
        page = '# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine="0"} '
        result.metrics_before, result.metrics_after = page + "100\n", page + f"{100 + delta}\n"
        return result

    a = write(tmp_path / "a.json", counted(bench_result(400.0), 2400))
    assert cli.main(["compare", a, a]) == 0  # 24 requests of 100 tokens: the counter agrees
    capsys.readouterr()
    b = write(tmp_path / "b.json", counted(bench_result(400.0, seed=1), 2000))
    assert cli.main(["compare", a, b]) == 1
    out = capsys.readouterr().out
    assert "INVALID RUN" in out
    assert "output tokens disagree: usage 2,400 output tokens, vllm:generation_tokens_total +2,000" in out


def test_b_against_a_prompt_by_prompt_early_stops_are_invalid_and_the_canary_is_printed(tmp_path, capsys):
    a = bench_result(400.0)
    for record in a.records:
        record.output_text = f"reply {record.index}"
    same = write(tmp_path / "a.json", a)
    assert cli.main(["compare", same, same]) == 0
    assert "outputs: unchanged for all 24 prompts (temperature 0; canary, not gated)" in capsys.readouterr().out
    changed = bench_result(400.0, seed=1)
    for record in changed.records:
        record.output_text = f"reply {record.index}" if record.index % 6 else "other"
    assert cli.main(["compare", same, write(tmp_path / "c.json", changed)]) == 0
    assert "outputs changed for 4 of 24 prompts at temperature 0 (prompt index 0, 6, 12, 18;" in capsys.readouterr().out
    short = bench_result(400.0, seed=2, tokens=50)
    short.config = dict(a.config)  # the same workload, replies half as long
    for record in short.records:
        record.finish_reason = "stop"
    assert cli.main(["compare", same, write(tmp_path / "s.json", short)]) == 1
    out = capsys.readouterr().out
    assert "INVALID RUN" in out
    assert "outputs changed length on the 24 prompts both runs completed: 1,200 output tokens against the " in out


def test_a_b_with_failed_requests_is_invalid_not_judged(tmp_path, capsys):
    a = write(tmp_path / "a.json", bench_result(400.0))
    broken = bench_result(400.0, seed=3)
    broken.records[5] = dataclasses.replace(broken.records[5], error="HTTP 500: boom", status=500, completion_tokens=0)
    b = write(tmp_path / "b.json", broken)
    assert cli.main(["compare", a, b]) == 1
    out = capsys.readouterr().out
    assert "INVALID RUN" in out and "1 of 24 failed" in out


def test_bench_results_with_slos_are_judged_on_goodput_too_and_other_slos_are_refused(tmp_path, capsys):
    # E2EL: 0.05 s + 99 gaps of 1 / 50 s at 400 tok/s over 8 streams (2.03 s), of 1 / 47.5 s
    # at 380 (2.13 s); the SLO lies between.
    a = write(tmp_path / "a.json", bench_result(400.0, slos="e2el:2100"))
    b = write(tmp_path / "b.json", bench_result(380.0, seed=1, slos="e2el:2100"))
    assert cli.main(["compare", a, b]) == 1
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.split()}
    assert "REGRESSED" in lines["steady_decode_tok_s"]
    assert "REGRESSED" in lines["request_goodput"] and "REGRESSED" in lines["slo_attainment"]
    assert lines["slo_attainment"].split()[1] == "1.000"  # A: every request within 2.1 s
    other = write(tmp_path / "c.json", bench_result(400.0, slos="e2el:3000"))
    assert cli.main(["compare", a, other]) == 2
    assert "  - slos: A e2el:2100, B e2el:3000" in capsys.readouterr().err
