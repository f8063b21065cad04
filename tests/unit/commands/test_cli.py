"""`llmperf` CLI: argument checks, the seeds' report shape, show, bench glue (runner faked)."""

from __future__ import annotations

import json

import pytest

from pytest_llmperf.commands import cli
from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.workload.result import RunResult
from pytest_llmperf.workload.workload import resolve_workload

SPEC_BEFORE = """\
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0"} 0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0"} 0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0"} 0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="2"} 0
"""
# 100 drafts, 300 draft tokens, 201 accepted (84 + 66 + 51)
SPEC_AFTER = (
    SPEC_BEFORE.replace('drafts_total{engine="0"} 0', 'drafts_total{engine="0"} 100')
    .replace('draft_tokens_total{engine="0"} 0', 'draft_tokens_total{engine="0"} 300')
    .replace('accepted_tokens_total{engine="0"} 0', 'accepted_tokens_total{engine="0"} 201')
    .replace('position="0"} 0', 'position="0"} 84')
    .replace('position="1"} 0', 'position="1"} 66')
    .replace('position="2"} 0', 'position="2"} 51')
)


def seed_like_result(stop_reason="max_seconds", failed=0):
    # Two requests of 256 tokens, 260 and 240 prompt tokens, over 20 s.
    recs = [
        # ttft 0.6 s, 255 gaps of 0.066 s of decode -> tpot 66 ms
        RequestRecord(
            index=0,
            send_time=0.0,
            chunk_times=[0.6, 0.6 + 0.066 * 255],
            prompt_tokens=260,
            completion_tokens=256,
            status=200,
        ),
        # ttft 0.7 s, tpot 68 ms
        RequestRecord(
            index=1,
            send_time=1.0,
            chunk_times=[1.7, 1.7 + 0.068 * 255],
            prompt_tokens=240,
            completion_tokens=256,
            status=200,
        ),
    ]
    recs += [RequestRecord(index=2 + i, send_time=0.0, error="HTTP 500: boom", status=500) for i in range(failed)]
    return RunResult(
        config={"num_prompts": 500, "max_seconds": 300.0, "concurrency": 8, "max_tokens": 256},
        records=recs,
        duration=20.0,
        attempted=2 + failed,
        stop_reason=stop_reason,
        metrics_before=SPEC_BEFORE,
        metrics_after=SPEC_AFTER,
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench", "--base-url", "localhost:8000", "--model", "m"], "http"),
        (["bench", "--base-url", "http://x", "--model", "m", "--concurrency", "0"], "whole number >= 1, got '0'"),
        (["bench", "--base-url", "http://x", "--model", "m", "--num-prompts", "ten"], "whole number"),
        (["bench", "--base-url", "http://x", "--model", "m", "--max-seconds", "-5"], "number of seconds > 0, or None"),
        (["bench", "--base-url", "http://x"], "--model"),
        (["bench", "--base-url", "http://x", "--model", "m", "--sharegpt-output-len", "0"], "or 'reference'"),
        ([], "COMMAND"),
    ],
)
def test_bad_arguments_exit_2_with_the_reason(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_arguments_are_normalised():
    args = cli.build_parser().parse_args(
        ["bench", "--base-url", "http://h:8000/v1/", "--model", "m", "--max-seconds", "0"]
    )
    assert args.base_url == "http://h:8000" and args.max_seconds is None
    assert (args.num_prompts, args.concurrency, args.max_tokens, args.seed) == (500, 8, 256, 0)


def test_default_output_name_is_timestamped():
    import datetime as dt

    when = dt.datetime(2026, 11, 30, 4, 5, 6, tzinfo=dt.timezone.utc)
    assert cli.default_output_name(when) == "llmperf-bench-20261130T040506Z.json"


def test_show_recomputes_a_saved_result(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(seed_like_result().to_json())
    assert cli.main(["show", str(path)]) == 0
    assert "Output token throughput (tok/s):         25.60" in capsys.readouterr().out


def test_show_bad_files_exit_1(tmp_path, capsys):
    assert cli.main(["show", str(tmp_path / "missing.json")]) == 1
    assert "cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "other"}')
    assert cli.main(["show", str(bad)]) == 1
    assert "not a pytest-llmperf run result" in capsys.readouterr().err


def write_sharegpt(path, n=12):
    convs = [
        {
            "id": f"c{i}",
            "conversations": [
                {"from": "human", "value": f"Question number {i}: please explain the topic in a few words."},
                {"from": "gpt", "value": f"Answer {i}: here is a short explanation of the topic you asked about."},
            ],
        }
        for i in range(n)
    ]
    path.write_text(json.dumps(convs))
    return path


def bench(argv, run):
    """`llmperf bench ARGV` with `run` in place of the runner (the sampling is bench's own)."""
    return cli.cmd_bench(cli.build_parser().parse_args(argv), run=run)


def test_bench_glues_dataset_runner_and_writes_json(tmp_path, capsys):
    dataset = write_sharegpt(tmp_path / "sharegpt.json")
    seen = {}

    def fake_run(args, requests):
        seen["requests"] = requests
        seen["args"] = args
        return seed_like_result()

    out = tmp_path / "out" / "result.json"
    rc = bench(
        [
            "bench",
            "--base-url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--dataset",
            str(dataset),
            "--num-prompts",
            "5",
            "--concurrency",
            "2",
            "--max-tokens",
            "16",
            "--seed",
            "3",
            "--approx-tokens",
            "--output",
            str(out),
        ],
        fake_run,
    )
    assert rc == 0
    assert len(seen["requests"]) == 5 + 2 and seen["args"].concurrency == 2  # 2 warm-up prompts of their own
    printed = capsys.readouterr().out
    assert "Completed 2/500, 0 errors (hit the 300 s cap)" in printed
    assert f"Result written to {out}" in printed
    saved = RunResult.from_json(out.read_text())
    assert saved.config["dataset"] == "sharegpt.json"  # beside the runner's own config (seed, caps, ...)
    assert len(saved.config["dataset_sha256"]) == 64
    assert saved.summary().decode_tok_s == pytest.approx(25.6)


# A one-word reference answer fails vLLM's minimum output length (4) unless an output
# length is given; a 700-word prompt fits 2048 tokens with its short reference answer,
# not with max_tokens 1500.
LENGTHS_CONVERSATIONS = {
    "short answer": ("Is the sky blue on a clear day?", "Yes."),
    "long prompt": ("Explain this: " + "word " * 700, "It is a long text about words, repeated."),
    "plain": ("Name three colours, please.", "Red, green and blue are three colours."),
}


def _bench_sample(tmp_path, *flags):
    """Which of LENGTHS_CONVERSATIONS `llmperf bench FLAGS` samples (with their output
    lengths), and the result's config."""
    path = tmp_path / "lengths_sharegpt.json"
    path.write_text(
        json.dumps(
            [
                {"id": name, "conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": a}]}
                for name, (q, a) in LENGTHS_CONVERSATIONS.items()
            ]
        )
    )
    names = {q: name for name, (q, _) in LENGTHS_CONVERSATIONS.items()}
    seen = {}

    def fake_run(args, requests):
        seen["requests"] = requests
        return seed_like_result()

    out = tmp_path / "r.json"
    argv = ["bench", "--base-url", "http://127.0.0.1:9", "--model", "m", "--num-prompts", "2", "--warmup", "0"]
    assert bench([*argv, "--dataset", str(path), "--approx-tokens", "-o", str(out), *flags], fake_run) == 0
    picked = {names[r.prompt]: r.expected_output_len for r in seen["requests"]}
    return picked, RunResult.from_json(out.read_text()).config


def test_bench_samples_with_output_len_max_tokens_like_vllms_sharegpt_output_len(tmp_path, capsys):
    picked, config = _bench_sample(tmp_path, "--max-tokens", "1500")
    assert picked == {"short answer": 1500, "plain": 1500}
    assert config["sharegpt_output_len"] == 1500
    assert "(seed 0, output length 1500)" in capsys.readouterr().out
    picked, config = _bench_sample(tmp_path, "--max-tokens", "1500", "--sharegpt-output-len", "reference")
    assert set(picked) == {"long prompt", "plain"} and config["sharegpt_output_len"] == "reference"
    assert "(seed 0, reference output lengths)" in capsys.readouterr().out
    picked, _ = _bench_sample(tmp_path, "--sharegpt-output-len", "64")
    assert set(picked.values()) == {64}


def test_bench_missing_dataset_is_a_clear_error(tmp_path, capsys):
    rc = cli.main(
        [
            "bench",
            "--base-url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--dataset",
            str(tmp_path / "nope.json"),
            "--approx-tokens",
        ]
    )
    assert rc == 1
    assert "dataset not found" in capsys.readouterr().err


def test_bench_with_too_few_prompts_names_its_own_flags(tmp_path, capsys):
    dataset = write_sharegpt(tmp_path / "sharegpt.json", n=6)
    argv = ["bench", "--base-url", "http://127.0.0.1:9", "--model", "m", "--dataset", str(dataset)]
    assert cli.main([*argv, "--num-prompts", "5", "--approx-tokens"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "llmperf: error: 13 prompts needed (5 measured + 8 warm-up) but only 6 of 6 conversations in sharegpt.json "
        "pass the length filters (min_len=4, max_prompt_len=1024, max_total_len=2048, output_len=256); lower "
        "--num-prompts "
        "(or --warmup), or point --dataset-path at a larger file"
    )
    assert "oversample" not in err  # no such flag


def test_bench_with_no_successful_request_exits_3_but_keeps_the_result(tmp_path, capsys):
    dataset = write_sharegpt(tmp_path / "sharegpt.json")
    failed = seed_like_result()
    for r in failed.records:
        r.error, r.chunk_times = "HTTP 503: overloaded", []
    out = tmp_path / "r.json"
    rc = bench(
        [
            "bench",
            "--base-url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--dataset",
            str(dataset),
            "--num-prompts",
            "2",
            "--approx-tokens",
            "-o",
            str(out),
        ],
        lambda args, requests: failed,
    )
    assert rc == cli.EXIT_NO_COMPLETIONS == 3
    printed = capsys.readouterr().out
    assert "Completed 0/500, 2 errors" in printed and "Output token throughput (tok/s):         n/a" in printed
    assert "Error: HTTP 503: overloaded" in printed
    assert len(RunResult.from_json(out.read_text()).records) == 2


def test_bench_runs_the_plugins_workload_with_the_same_defaults():
    args = cli.build_parser().parse_args(
        ["bench", "--base-url", "http://h", "--model", "m", "--max-seconds", "300", "--concurrency", "8"]
    )
    marker = resolve_workload(dict(num_prompts=500, max_seconds=300, max_tokens=256), 8)
    assert cli.bench_workload(args) == marker
    assert cli.bench_workload(args).run_config() == marker.run_config()
    assert marker.run_config().warmup_requests == 8  # a full wave at --concurrency 8


@pytest.mark.parametrize(
    "given, warmup", [([], 8), (["--warmup", "wave"], 8), (["--warmup", "0"], 0), (["--num-warmups", "3"], 3)]
)
def test_bench_warmup_is_a_wave_or_a_count_under_either_name(given, warmup):
    args = cli.build_parser().parse_args(["bench", "--base-url", "http://h", "--model", "m", *given])
    assert cli.bench_workload(args).warmup == warmup


def test_bench_refuses_a_bad_warmup(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["bench", "--base-url", "http://h", "--model", "m", "--warmup", "-1"])
    assert "expected a whole number >= 0, or 'wave' (one per stream), got '-1'" in capsys.readouterr().err


def test_bench_goodput_takes_vllms_pairs_into_the_runs_config():
    args = cli.build_parser().parse_args(
        ["bench", "--base-url", "http://h", "--model", "m", "--goodput", "e2el:3000", "ttft:500.0", "--seed", "1"]
    )
    assert args.goodput == "ttft:500 e2el:3000"
    assert cli.bench_workload(args).run_config().slos == "ttft:500 e2el:3000"
    plain = cli.build_parser().parse_args(["bench", "--base-url", "http://h", "--model", "m"])
    assert cli.bench_workload(plain) == resolve_workload(dict(num_prompts=500, max_tokens=256), 8)


@pytest.mark.parametrize(
    "pairs, message",
    [
        (["ttfb:500"], "--goodput: unknown SLO 'ttfb' in 'ttfb:500'; did you mean ttft?"),
        (["ttft=500"], "--goodput: 'ttft=500' is not a KEY:VALUE pair; write KEY:VALUE pairs in milliseconds"),
        (["ttft:500", "ttft:200"], "--goodput: ttft is given twice"),
    ],
)
def test_bench_refuses_bad_goodput_before_anything_is_sent(pairs, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "--base-url", "http://127.0.0.1:9", "--model", "m", "--goodput", *pairs])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
