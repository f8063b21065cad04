"""`llmperf bench` on the random dataset and on a JSONL file, end to end against the
simulated vLLM server (real runner, real HTTP), and their bad inputs before any request."""

from __future__ import annotations

import json

import pytest

from pytest_llmperf.commands import cli
from pytest_llmperf.sim import SimConfig, simulated_server
from pytest_llmperf.workload.custom_dataset import read_custom, sample_custom
from pytest_llmperf.workload.result import RunResult

MODEL = "Qwen/Qwen3.6-27B-FP8"


def bench(url, tmp_path, *extra, out="result.json"):
    path = tmp_path / out
    argv = ["bench", "--base-url", url, "--model", MODEL, "--concurrency", "4", "--warmup", "1"]
    argv += ["--token-cache", str(tmp_path / "tokens"), "--output", str(path), *extra]
    return cli.main(argv), path


def test_random_prompts_have_the_asked_lengths_on_the_server_and_run_to_max_tokens(tmp_path, capsys):
    random = ["--dataset-name", "random", "--random-input-len", "40", "--random-output-len", "12"]
    with simulated_server(SimConfig(model=MODEL, speed=200)) as url:
        rc, out = bench(url, tmp_path, *random, "--num-prompts", "8")
        rc2, out2 = bench(url, tmp_path, *random, "--num-prompts", "8", "--random-input-len", "20", out="r2.json")
    printed = capsys.readouterr().out
    assert rc == rc2 == 0, printed
    assert (
        "Sampled 8 prompts (+1 for the warm-up) (seed 0, input 40, output 12, range ratio 0, prefix 0, ignore_eos) "
        "from the random dataset (server tokenizer)"
    ) in printed
    result = RunResult.from_json(out.read_text())
    ok = [r for r in result.records if r.ok]
    assert len(ok) == 8
    # The server's own usage: 40 prompt tokens each, and every reply ran to its 12 (ignore_eos).
    assert {r.prompt_tokens for r in ok} == {40} and {r.expected_prompt_len for r in ok} == {40}
    assert {r.completion_tokens for r in ok} == {12} and {r.finish_reason for r in ok} == {"length"}
    config = result.config
    assert config["ignore_eos"] is True and config["max_tokens"] == 12
    assert (config["dataset_name"], config["dataset"]) == ("random", "random tokenizer:server")
    assert (config["random_input_len"], config["random_range_ratio"], config["random_prefix_len"]) == (40, 0.0, 0)
    # Two random runs of other lengths are not compared: their identities differ.
    code = cli.main(["compare", str(out), str(out2)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_CANNOT_COMPARE and "random_input_len" in err, err


def test_a_jsonl_file_sends_each_lines_max_tokens_else_the_workloads(tmp_path, capsys):
    lines = [{"prompt": f"Tell me about topic {i} in a few words.", "max_tokens": 3} for i in range(6)]
    lines += [{"prompt": f"Explain idea number {i} at some length please."} for i in range(6)]
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with simulated_server(SimConfig(model=MODEL, speed=200)) as url:
        rc, out = bench(url, tmp_path, "--dataset-name", "custom", "--dataset-path", str(path), "--num-prompts", "10")
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert f"Sampled 10 prompts (+1 for the warm-up) (seed 0, each line's max_tokens, else 256) from {path}" in printed
    result = RunResult.from_json(out.read_text())
    sent = sample_custom(read_custom(path), 11, seed=0, max_tokens=256)  # what bench sampled: vLLM's shuffle
    limits = {r.index: r.expected_output_len for r in sent}
    ok = [r for r in result.records if r.ok]
    assert len(ok) == 10 and {limits[r.index] for r in ok} == {3, 256}
    assert all(r.completion_tokens <= limits[r.index] for r in ok)
    assert max(r.completion_tokens for r in ok if limits[r.index] == 3) == 3
    assert max(r.completion_tokens for r in ok if limits[r.index] == 256) > 3
    config = result.config
    assert (config["dataset_name"], config["dataset"], config["max_tokens"]) == ("custom", "prompts.jsonl", 256)
    assert config["dataset_sha256"] == read_custom(path).sha256


@pytest.mark.parametrize("prefix", [0, 6])
def test_random_prompts_are_made_to_the_lengths_a_real_tokenizer_would_count(tmp_path, capsys, prefix):
    # Every word of a prompt two tokens, as a real model's tokenizer counts the built-in
    # pieces: made through /tokenize, the server counts exactly the lengths asked for.
    random = ["--dataset-name", "random", "--random-input-len", "40", "--random-output-len", "4"]
    random += ["--random-range-ratio", "0.5", "--random-prefix-len", str(prefix), "--num-prompts", "8"]
    with simulated_server(SimConfig(model=MODEL, speed=200, prompt_word_tokens=2)) as url:
        rc, out = bench(url, tmp_path, *random)
    assert rc == 0, capsys.readouterr()
    ok = [r for r in RunResult.from_json(out.read_text()).records if r.ok]
    assert len(ok) == 8 and len({r.expected_prompt_len for r in ok}) > 1  # drawn lengths, 20 to 60 (+ prefix)
    assert [r.prompt_tokens for r in ok] == [r.expected_prompt_len for r in ok]


def test_random_prompts_a_server_counts_otherwise_make_llmperf_bench_say_the_run_is_invalid(tmp_path, capsys):
    random = ["--dataset-name", "random", "--random-input-len", "40", "--random-output-len", "4", "--num-prompts", "8"]
    with simulated_server(SimConfig(model=MODEL, speed=200, prompt_word_tokens=2, no_tokenize=True)) as url:
        rc, out = bench(url, tmp_path, *random)
    err = capsys.readouterr().err
    assert rc == cli.EXIT_ERROR and out.exists()  # the result is kept, and said to be invalid
    assert (
        "invalid run: the server counted other prompt lengths than the sampler meant: 8 of 8 prompts (intended 40 "
        "tokens, the server counted 80; 640 tokens in all for 320 intended)"
    ) in err


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--random-input-len", "10"],
            "--random-input-len apply to --dataset-name random only; add it, or remove them",
        ),
        (["--tokenizer", "x"], "--tokenizer apply to --dataset-name random only"),
        (["--dataset-name", "random", "--sharegpt-output-len", "5"], "--sharegpt-output-len applies to --dataset-name"),
        (["--dataset-name", "random", "--dataset-path", "x.json"], "--dataset-path does not apply to --dataset-name"),
        (["--dataset-name", "custom"], "--dataset-name custom needs --dataset-path FILE.jsonl"),
        (["--dataset-name", "random", "--random-input-len", "0"], "random_input_len=0 is too small"),
    ],
)
def test_flags_of_another_dataset_are_refused_before_any_request(tmp_path, capsys, args, message):
    rc, out = bench("http://127.0.0.1:9", tmp_path, *args)  # nothing listens there: no request is made
    assert rc == cli.EXIT_ERROR and not out.exists()
    assert message in capsys.readouterr().err


def test_a_bad_jsonl_file_is_named_with_its_lines_before_any_request(tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "ok"}\nnot json\n{"prompt": "x", "max_tokens": 0}\n')
    rc, out = bench("http://127.0.0.1:9", tmp_path, "--dataset-name", "custom", "--dataset-path", str(path))
    err = capsys.readouterr().err
    assert rc == cli.EXIT_ERROR and not out.exists()
    assert err.startswith(f"llmperf: error: {path}: 2 bad line(s) of 3;")
    assert "  line 2: not JSON (Expecting value at column 1)" in err
    assert "  line 3: 'max_tokens' must be a whole number >= 1, found 0" in err


def test_too_few_lines_name_the_counts_and_the_flags(tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    rc, _ = bench(
        "http://127.0.0.1:9", tmp_path, "--dataset-name", "custom", "--dataset-path", str(path), "--approx-tokens"
    )
    assert rc == cli.EXIT_ERROR
    assert capsys.readouterr().err.strip() == (
        "llmperf: error: p.jsonl has 2 prompts but 501 are needed; add lines to the file or ask for fewer prompts "
        "(prompts are never repeated) (500 measured + 1 warm-up: lower --num-prompts or --warmup)"
    )
