"""A tiny pytester project against the simulated server, shared by the plugin's
end-to-end tests (tests/unit/test_plugin.py) and the fault suite (tests/reliability/).

Timing metrics get loose project tolerances (this machine is shared and noisy); the
injected faults and regressions are far larger than those tolerances, so one repetition
per run decides them (`llmperf_repetitions = 1`; recording would otherwise make five),
and a server's warm-up is one wave of its --max-num-seqs 8 (`llmperf_server_warmup = 8`).
"""

import importlib
import json
import pkgutil
import random

# numpy refuses to be imported twice in one process
import numpy  # noqa: F401

import pytest_llmperf

# Every module of the plugin, and those its libraries import lazily, is imported here,
# before any pytester run: an in-process run drops the modules first loaded inside it,
# and a later test importing them again holds classes other than those already held
# (httpx maps the httpcore errors it met first: a second httpcore's pass unmapped).
for _module in pkgutil.walk_packages(pytest_llmperf.__path__, "pytest_llmperf."):
    if not _module.name.endswith("__main__"):
        importlib.import_module(_module.name)
for _module in ("httpcore", "docker"):
    importlib.import_module(_module)
try:  # the report's plots (the [report] extra): a second copy of matplotlib breaks its own isinstance checks
    importlib.import_module("matplotlib.figure")
except ImportError:
    pass

CONFTEST = """
import os
from pytest_llmperf import ServerSpec

BASE = ServerSpec(name="tiny", model="org/tiny", args=("--max-num-seqs", "8"))
MTP = BASE.with_speculative({"method": "mtp", "num_speculative_tokens": 3}, name="tiny-mtp")
MTP = ServerSpec(**{**MTP.__dict__, "sim_args": tuple(os.environ.get("TINY_MTP_SIM_ARGS", "").split())})
"""

SUITE = """
import pytest
from conftest import BASE, MTP

W = dict(num_prompts=12, max_tokens=48, warmup=1)

# Deliberately out of order: the plugin runs base, then MTP, then the speedup test.
@pytest.mark.parametrize("concurrency", [4])
@pytest.mark.llmperf(server=MTP, base=BASE, **W)
def test_speedup(llmperf, concurrency):
    mtp = llmperf.run(concurrency=concurrency)
    base = llmperf.run(concurrency=concurrency, server=llmperf.base)
    mtp.assert_speedup_over(base)

@pytest.mark.parametrize("concurrency", [4])
@pytest.mark.llmperf(server=MTP, **W)
def test_mtp(llmperf, concurrency):
    llmperf.run(concurrency=concurrency).assert_no_regression("decode_tok_s", "acceptance_rate")

@pytest.mark.parametrize("concurrency", [4])
@pytest.mark.llmperf(server=BASE, **W)
def test_base(llmperf, concurrency):
    llmperf.run(concurrency=concurrency).assert_no_regression("decode_tok_s")
"""

INI = """
[pytest]
llmperf_dataset = sharegpt.json
llmperf_sim_speed = 4
llmperf_repetitions = 1
llmperf_server_warmup = 8
llmperf_tolerances =
    decode_tok_s = 40%
    mtp_speedup = 25%
"""

WORDS = (
    "the model answers questions about cooking travel code history music and science while "
    "users ask for help with essays plans bugs recipes poems and summaries of long documents"
).split()


def _sentence(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def make_project(pytester, monkeypatch, tmp_path_factory):
    """Write the tiny project into pytester's folder: dataset, conftest, suite, ini."""
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("TINY_MTP_SIM_ARGS", raising=False)
    rng = random.Random(7)
    data = [
        {
            "id": f"c{i}",
            "conversations": [
                {"from": "human", "value": _sentence(rng, rng.randint(12, 40))},
                {"from": "gpt", "value": _sentence(rng, rng.randint(30, 90))},
            ],
        }
        for i in range(60)
    ]
    pytester.path.joinpath("sharegpt.json").write_text(json.dumps(data))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini(INI)
    return pytester


def run(pytester, *args):
    """The project's session in this process. hypothesis's plugin is left out: without
    bytecode caches (PYTHONDONTWRITEBYTECODE) it is imported again in every run, 1.5 s each."""
    return pytester.runpytest(
        "-p", "no:benchmark", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--llmperf-sim", *args
    )


def record(pytester):
    result = run(pytester, "--update-baselines")
    result.assert_outcomes(passed=3)
    return result
