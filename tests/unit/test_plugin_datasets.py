"""The plugin on each dataset, end to end against the simulated server: ShareGPT, vLLM's
random prompts and a JSONL file, three tests of one server at one concurrency, each
recorded under its own workload and judged against it; a bad file stops the session at
collection, before any server starts."""

from __future__ import annotations

import json

import pytest

from tests.plugin_project import make_project, run

SUITE = """
import pytest
from conftest import BASE

W = dict(num_prompts=8, max_tokens=16, warmup=1)

@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.llmperf(server=BASE, **W)
def test_sharegpt(llmperf, concurrency):
    llmperf.run(concurrency=concurrency).assert_no_regression("decode_tok_s")

@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.llmperf(server=BASE, dataset_name="random", random_input_len=24, **W)
def test_random(llmperf, concurrency):
    run = llmperf.run(concurrency=concurrency)
    records = [r for result in run.results for r in result.records]
    assert {r.prompt_tokens for r in records} == {24}  # the server's usage: the asked length
    assert {r.completion_tokens for r in records} == {16}  # ignore_eos: every reply runs to max_tokens
    run.assert_no_regression("decode_tok_s")

@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.llmperf(server=BASE, dataset_name="custom", dataset_path="prompts.jsonl", **W)
def test_custom(llmperf, concurrency):
    run = llmperf.run(concurrency=concurrency)
    records = [r for result in run.results for r in result.records]
    assert max(r.completion_tokens for r in records) <= 16 and min(r.completion_tokens for r in records) <= 2
    run.assert_no_regression("decode_tok_s")
"""


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):
    make_project(pytester, monkeypatch, tmp_path_factory)
    lines = [{"prompt": f"Say something short about item {i}.", "max_tokens": 2} for i in range(5)]
    lines += [{"prompt": f"Tell me a longer story about the number {i}."} for i in range(5)]
    pytester.path.joinpath("prompts.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_each_dataset_records_its_own_entry_and_is_judged_against_it(project):
    recorded = run(project, "--update-baselines")
    recorded.assert_outcomes(passed=3)
    out = recorded.stdout.str()
    assert "[llmperf] dataset random: prompts generated from token ids, made to the server's token counts" in out
    assert "[llmperf] dataset prompts.jsonl: 10 prompts" in out
    assert "[llmperf] dataset sharegpt.json: 60 conversations" in out
    doc = json.loads((project.path / "baselines" / "sim" / "tiny.json").read_text())
    entries = doc["concurrency"]["2"]
    by_dataset = {entry["workload"].get("dataset_name", "sharegpt"): entry for entry in entries.values()}
    assert sorted(by_dataset) == ["custom", "random", "sharegpt"] and len(entries) == 3
    random, custom = by_dataset["random"], by_dataset["custom"]
    assert random["workload"]["dataset"] == "random tokenizer:server"
    assert random["workload"]["random_input_len"] == 24 and random["workload"]["ignore_eos"] is True
    assert random["provenance"]["dataset"] == {
        "name": "random",
        "tokenizer": "server",
        "input_len": 24,
        "output_len": 16,
        "range_ratio": 0.0,
        "prefix_len": 0,
    }
    assert custom["workload"]["dataset_file"] == "prompts.jsonl"
    assert custom["workload"]["dataset"].startswith("prompts.jsonl sha256:")
    assert str(project.path) not in json.dumps(doc)  # no machine paths in a committed file

    judged = run(project)
    judged.assert_outcomes(passed=3)
    assert "MISSING BASELINE" not in judged.stdout.str() and "refusing" not in judged.stdout.str()


def test_an_edited_prompt_file_is_refused_not_compared(project):
    run(project, "--update-baselines", "-k", "custom").assert_outcomes(passed=1, deselected=2)
    path = project.path / "prompts.jsonl"
    path.write_text(path.read_text() + json.dumps({"prompt": "One more line."}) + "\n")
    result = run(project, "-k", "custom")
    result.assert_outcomes(failed=1, deselected=2)
    out = result.stdout.str()
    assert "was recorded under a different workload or hardware;" in out
    assert "  - dataset: baseline prompts.jsonl sha256:" in out


def test_a_bad_prompt_file_stops_the_session_before_any_server_starts(project):
    project.path.joinpath("prompts.jsonl").write_text('{"prompt": "fine"}\n{"prompt": "", "max_tokens": 4}\n')
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "ERROR: dataset_path='prompts.jsonl': " in err and "1 bad line(s) of 2;" in err
    assert "  line 2: 'prompt' is empty; give the prompt text, or delete the line" in err
    assert "starting server" not in result.stdout.str() and "Traceback" not in err


def test_random_prompts_are_made_to_the_lengths_the_server_counts(project):
    # A tokenizer that counts every word of a prompt as two tokens, as a real model's
    # counts the built-in pieces: the prompts are fitted through /tokenize to 24 tokens.
    result = run(project, "-k", "random", "--update-baselines", "--llmperf-sim-args", "--sim-prompt-word-tokens 2")
    result.assert_outcomes(passed=1, deselected=2)


def test_random_prompts_a_server_counts_otherwise_make_the_run_invalid_and_are_not_recorded(project):
    # No /tokenize to fit them to: the built-in prompts, counted at 48 tokens, not 24.
    project.makepyfile(
        test_random_only="""
import pytest
from conftest import BASE

@pytest.mark.llmperf(server=BASE, dataset_name="random", random_input_len=24, num_prompts=8, max_tokens=16, warmup=1)
def test_random(llmperf):
    llmperf.run(concurrency=2).assert_no_regression("decode_tok_s")
"""
    )
    args = ("--llmperf-sim-args", "--sim-prompt-word-tokens 2 --sim-no-tokenize")
    result = run(project, "test_random_only.py", "--update-baselines", *args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*not recorded: invalid run: the server counted other prompt lengths than the sampler meant: 8 of 8 "
            "prompts (intended 24 tokens, the server counted 48; 384 tokens in all for 192 intended)*"
        ]
    )
    assert not (project.path / "baselines" / "sim" / "tiny.json").exists()
