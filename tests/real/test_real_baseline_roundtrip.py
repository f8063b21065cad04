"""The plugin's baseline round trip on the real engine, as a user runs it:
`pytest --llmperf-local <the prepared venv's python> --update-baselines` (what
`--llmperf-real-cpu` runs) records (three repetitions, each on its
own server start, so the spread between starts is known), three unchanged sessions
never read `regressed`, and an injected regression (ngram with 1 speculative token
instead of 3, same server name) fails the default gate with the verdict table; both
with the default repetitions (auto). Each pytest run starts its own vLLM.
"""

from __future__ import annotations

import json
import os
import random

import pytest

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.slow, pytest.mark.real_vllm]

CONFTEST = """
import os
from pytest_llmperf import ServerSpec

K = int(os.environ.get("RT_NUM_SPEC_TOKENS", "3"))
NGRAM = ServerSpec(
    name="smollm2-ngram",
    model="HuggingFaceTB/SmolLM2-135M-Instruct",
    served_model_name="smollm2",
    args=("--max-model-len", "2048", "--max-num-seqs", "8", "--enforce-eager"),
    speculative_config={"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": 4},
)
"""

SUITE = """
import pytest
from conftest import NGRAM

@pytest.mark.llmperf(server=NGRAM, num_prompts=8, max_tokens=32, warmup=1, endpoint="chat")
def test_ngram(llmperf):
    llmperf.run(concurrency=1).assert_no_regression()  # the default gate
"""

INI = """
[pytest]
llmperf_dataset = sharegpt.json
"""

# Prompts that invite repetition, so the ngram proposer finds matches.
PROMPTS = [
    "Repeat this list three times: red, green, blue, yellow.",
    "Write the numbers from one to twenty in words, separated by commas.",
    "Say 'hello world' five times.",
    "List the days of the week twice.",
    "Spell the word banana letter by letter, twice.",
    "Count from 1 to 30.",
    "Write the alphabet in capital letters, then in small letters.",
    "Repeat: the cat sat on the mat. the cat sat on the mat.",
]


@pytest.fixture
def project(pytester, prepared_vllm, real_pool):
    real_pool.stop()  # one engine at a time
    rng = random.Random(3)
    data = [
        {
            "id": f"c{i}",
            "conversations": [
                {"from": "human", "value": p},
                {"from": "gpt", "value": " ".join(rng.choice(p.split()) for _ in range(40))},
            ],
        }
        for i, p in enumerate(PROMPTS * 2)
    ]
    pytester.path.joinpath("sharegpt.json").write_text(json.dumps(data))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini(INI)
    pytester.llmperf_cache_dir = str(prepared_vllm.root.parent)
    pytester.llmperf_python = str(prepared_vllm.python)  # found by find_prepared_vllm, never spelled out
    return pytester


def run(pytester, *args, spec_tokens: int = 3):
    # pytester points HOME at its own folder: name the prepared cache explicitly.
    env = {"RT_NUM_SPEC_TOKENS": str(spec_tokens), "LLMPERF_CACHE_DIR": pytester.llmperf_cache_dir}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        local = f"--llmperf-local={pytester.llmperf_python}"  # the target --llmperf-real-cpu names
        return pytester.runpytest_subprocess("-p", "no:benchmark", "-p", "no:cacheprovider", local, *args, timeout=420)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_record_then_pass_then_catch_fewer_speculative_tokens(project, request):
    from real_vllm_helpers import report

    recorded = run(project, "--update-baselines", "--llmperf-repetitions", "3")
    recorded.assert_outcomes(passed=1)
    assert len([line for line in recorded.outlines if "restarting server smollm2-ngram" in line]) == 2
    # The folder is the plugin's choice of target name; the file is the server's.
    paths = list((project.path / "baselines").glob("*/smollm2-ngram.json"))
    assert len(paths) == 1, paths
    path = paths[0]
    doc = json.loads(path.read_text())
    (entry,) = doc["concurrency"]["1"].values()  # one workload's entry
    recorded_len = entry["metrics"]["acceptance_length"]
    assert recorded_len["value"] > 1.5, recorded_len  # ngram on repetitive prompts accepts plenty
    assert "0.32.0" in json.dumps(doc), "vLLM's /version should be in the baseline's provenance"

    # Unchanged sessions, with the default repetitions (auto: a change is claimed at the
    # split 99 % and another start is added while undecided): pass, or inconclusive where
    # the noise between starts is wide (a warning, the test passes), never regressed. With
    # one fixed repetition a change is claimed at the nominal 95 %, one-sided: a CI run
    # read steady decode 30.2 -> 25.6 tok/s (-15.3 %, noise +/-14.6 %, step 94.8 -> 112.8 ms)
    # as REGRESSED on an unchanged server against a baseline of 3 close starts.
    verdicts = []
    for _ in range(3):
        unchanged = run(project)
        unchanged.assert_outcomes(passed=1)
        assert not [line for line in unchanged.outlines if "REGRESSED" in line]
        verdicts += [line.strip() for line in unchanged.outlines if "steady_decode_tok_s" in line][:1]

    regressed = run(project, spec_tokens=1)
    regressed.assert_outcomes(failed=1)
    regressed.stdout.fnmatch_lines(["*acceptance_length*REGRESSED*"])
    verdict = next(line for line in regressed.outlines if "acceptance_length" in line and "REGRESSED" in line)
    report(
        request,
        f"baseline round trip: {path.relative_to(project.path)} recorded acceptance_length "
        f"{recorded_len['value']:.2f}; three unchanged sessions never regressed ({' | '.join(verdicts)}); "
        f"k=1 failed: {verdict.lstrip('E ').strip()}",
    )


FIRST_AND_SECOND = """
import pytest
from conftest import NGRAM

@pytest.mark.llmperf(server=NGRAM, num_prompts=12, max_tokens=32, endpoint="chat")  # + a wave of 4: the 16 prompts
def test_two_runs_of_a_fresh_server(llmperf):
    llmperf.run(concurrency=4)
"""


def test_first_run_of_a_fresh_server_is_within_noise_of_the_second(project, request):
    """Issue 10: a fresh server's first workload ran ~30 % slower than the next. With the
    server-level warm-up and a full-wave run warm-up (the defaults), the first measured
    repetition of a just-started vLLM is not slower than the second beyond the noise.

    One-sided: a cold server makes the first run slower. The noise is the request-level
    part only (one server start holds no spread between starts), so a first run faster
    than the second by what two runs on a shared CPU differ anyway is no cold start: CI
    read 72.3 tok/s then 70.3, 2.8 % apart against +/-1.3 of request-level noise."""
    from real_vllm_helpers import report

    from pytest_llmperf.baselines.compare import z_value
    from pytest_llmperf.metrics.registry import flatten
    from pytest_llmperf.metrics.uncertainty import independent_blocks, paired_errors, request_rows
    from pytest_llmperf.workload.result import RunResult

    project.makepyfile(test_suite=FIRST_AND_SECOND)
    # both repetitions on one server start: the second is that server's second workload
    out = run(project, "--llmperf-repetitions", "2", "--llmperf-same-server", "--llmperf-report", "report.json")
    out.assert_outcomes(passed=1)
    (measured,) = json.loads((project.path / "report.json").read_text())["runs"]
    assert measured["server_warmup"] and measured["server_warmup"]["requests"] == 64
    first, second = (RunResult.from_dict(r) for r in measured["results"])
    assert first.warmup and first.warmup["requests"] == 4  # a full wave at concurrency 4
    rows = [request_rows(r.records) for r in (first, second)]
    figures = [flatten(r.summary().to_dict()) for r in (first, second)]
    sigma = paired_errors(rows[0], rows[1], figures[0], figures[1], ["decode_tok_s"], concurrency=4)["decode_tok_s"]
    q = z_value(0.975, independent_blocks(rows[0], rows[1], 4) - 1)  # the bound two-sided 95 % had
    a, b = figures[0]["decode_tok_s"], figures[1]["decode_tok_s"]
    report(
        request,
        f"fresh server: server warm-up {measured['server_warmup']}; first run {a:.1f} tok/s, second {b:.1f} tok/s, "
        f"noise {q * sigma:.1f} (97.5%, one-sided: a cold first run is slower)",
    )
    assert a >= b - q * sigma, f"first run {a:.1f} tok/s vs second {b:.1f}: slower beyond the noise {q * sigma:.1f}"
