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
SESSION_TIMEOUT_S = 900
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
        # A hang guard, not a budget: auto may start the server up to five times in one
        # session, each about 100 s on a 2-core AVX2-only machine (60 s to ready).
        return pytester.runpytest_subprocess(
            "-p", "no:benchmark", "-p", "no:cacheprovider", local, *args, timeout=SESSION_TIMEOUT_S
        )
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
    # as REGRESSED on an unchanged server against a baseline of 3 close starts. Under auto a
    # CI run still read 14.1 -> 10.9 tok/s (-22.5 %, noise +/-10.5 %) at the first look, the
    # whole session slow (its warm-ups 13 % below the recording's); another read 33.5 ->
    # 31.8 tok/s (-5.3 %, noise +/-4.4 %) over two starts after an inconclusive first look,
    # the second start's warm-up 17 % below the first's: a regression the look before did
    # not read is now read again on a fresh start before it is reported.
    verdicts = []
    read_again = 0
    for _ in range(3):
        unchanged = run(project)
        unchanged.assert_outcomes(passed=1)
        assert not [line for line in unchanged.outlines if "REGRESSED" in line]
        verdicts += [line.strip() for line in unchanged.outlines if "steady_decode_tok_s" in line][:1]
        read_again += sum("regressed, read again" in line for line in unchanged.outlines)

    regressed = run(project, spec_tokens=1)
    regressed.assert_outcomes(failed=1)
    regressed.stdout.fnmatch_lines(["*acceptance_length*REGRESSED*"])
    verdict = next(line for line in regressed.outlines if "acceptance_length" in line and "REGRESSED" in line)
    report(
        request,
        f"baseline round trip: {path.relative_to(project.path)} recorded acceptance_length "
        f"{recorded_len['value']:.2f}; three unchanged sessions never regressed ({' | '.join(verdicts)}; "
        f"regressions read again: {read_again}); "
        f"k=1 failed: {verdict.lstrip('E ').strip()}",
    )


FIRST_AND_SECOND = """
import pytest
from conftest import NGRAM

@pytest.mark.llmperf(server=NGRAM, num_prompts=12, max_tokens=32, endpoint="chat")  # + a wave of 4: the 16 prompts
def test_two_runs_of_a_fresh_server(llmperf):
    llmperf.run(concurrency=4)
"""


def fresh_server_runs(project, attempt: int):
    """One session of four repetitions on one fresh server start: the decode tok/s of each
    run, and the noise the verdict rule gives the change from the first run to the later
    ones (stats.error.change_error)."""
    from pytest_llmperf.metrics.registry import flatten
    from pytest_llmperf.metrics.uncertainty import independent_blocks, paired_errors, request_rows
    from pytest_llmperf.stats.error import change_error
    from pytest_llmperf.workload.result import RunResult

    report_name = f"report-{attempt}.json"
    # every repetition on one server start: the first is that server's first workload
    out = run(project, "--llmperf-repetitions", "4", "--llmperf-same-server", "--llmperf-report", report_name)
    out.assert_outcomes(passed=1)
    (measured,) = json.loads((project.path / report_name).read_text())["runs"]
    # the default server warm-up: two waves of the spec's --max-num-seqs 8
    assert measured["server_warmup"] and measured["server_warmup"]["requests"] == 16
    results = [RunResult.from_dict(r) for r in measured["results"]]
    assert len(results) == 4
    assert results[0].warmup and results[0].warmup["requests"] == 4  # a full wave at concurrency 4
    rows = [request_rows(r.records) for r in results]
    decode = [flatten(r.summary().to_dict())["decode_tok_s"] for r in results]
    paired = paired_errors(
        rows[0], rows[1], {"decode_tok_s": decode[0]}, {"decode_tok_s": decode[1]}, ["decode_tok_s"], concurrency=4
    )
    noise = change_error(
        paired.get("decode_tok_s"), [decode[0]], decode[1:], paired_dof=independent_blocks(rows[0], rows[1], 4) - 1
    )
    assert noise is not None
    return decode, noise


def test_first_run_of_a_fresh_server_is_within_noise_of_the_second(project, request):
    """Issue 10: a fresh server's first workload ran ~30 % slower than the next. With the
    server-level warm-up and a full-wave run warm-up (the defaults), the verdict rule does
    not call the first measured repetition of a just-started vLLM a regression against the
    ones after it.

    The first run is judged by the rule itself (baselines.compare) against the median of
    the next three on the same server start: decode tok/s's tolerance (5 %), and the noise
    the rule gives a change (stats.error.change_error): the spread between the later runs,
    which holds their request-level noise. A claim at 97.5 %, one-sided: a cold server
    makes the first run slower. The tolerance is what a user's gate allows; three later
    runs on 2 degrees of freedom can agree to 0.1 % by chance (CI once read 100.2, 100.4,
    100.2 after a first of 97.5), so the noise alone would call a 3 % dip a cold start.

    A cold start is systematic: every fresh server has it. A shared 2-core machine also
    slows single runs of a few seconds by more than the spread of three others, at
    random: CI read a first run of 82.8 tok/s against a second of 107.4, and once 31.0
    against later runs of 39.8, 39.8 and 40.0, with each run's warm-up at the same
    25-28 tok/s, while other CI runs and this machine read the first run 2-3 % faster than
    the later ones. So a first run the rule calls regressed is checked on a second fresh
    server start, and the test fails only when that one's is regressed too: a cold start
    fails both, one run slowed by the machine fails one."""
    from real_vllm_helpers import report

    from pytest_llmperf.baselines.compare import Status, compare
    from pytest_llmperf.metrics.registry import metric
    from pytest_llmperf.stats.median import median_of

    decode_metric = metric("decode_tok_s")
    assert decode_metric.tolerance is not None
    project.makepyfile(test_suite=FIRST_AND_SECOND)
    seen = []
    for attempt in (1, 2):
        decode, noise = fresh_server_runs(project, attempt)
        first, later = decode[0], median_of(decode[1:])
        tolerance, direction = decode_metric.tolerance, decode_metric.direction
        verdict = compare("decode_tok_s", later, first, tolerance, direction, error=noise, confidence=0.975)
        seen.append(
            f"start {attempt}: decode tok/s of its runs {', '.join(f'{v:.1f}' for v in decode)}; first {first:.1f} "
            f"vs median of the later {later:.1f} ({(first / later - 1) * 100:+.1f} %): {verdict.status.value} "
            f"(tolerance {decode_metric.tolerance}, noise sd {noise.sigma:.2f} tok/s on "
            f"{'many' if noise.dof is None else f'{noise.dof:.1f}'} dof, "
            "97.5 %, one-sided)"
        )
        if verdict.status is not Status.REGRESSED:
            break
    report(request, "fresh server: " + "; ".join(seen))
    assert verdict.status is not Status.REGRESSED, (
        "the rule called the first run regressed on two fresh starts: " + "; ".join(seen)
    )
