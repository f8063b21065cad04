"""The plugin through Docker: `--llmperf-docker` runs a tiny suite in containers of the
local simulator image, records baselines, compares, and leaves no container behind."""

import json

import pytest

from tests.docker.images import write_tiny_sharegpt

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SUITE = """
import pytest
from pytest_llmperf import ServerSpec

BASE = ServerSpec(name="tiny", model="org/tiny", image="{image}", args=("--max-num-seqs", "8", "--sim-speed", "4"),
                  env={{"HF_TOKEN": None}})
MTP = BASE.with_speculative({{"method": "mtp", "num_speculative_tokens": 3}}, name="tiny-mtp")

@pytest.mark.parametrize("concurrency", [4])
@pytest.mark.llmperf(server=MTP, base=BASE, num_prompts=8, max_tokens=32, warmup=1)
def test_speedup(llmperf, concurrency):
    base = llmperf.run(concurrency=concurrency, server=llmperf.base)   # base first, as on a GPU
    mtp = llmperf.run(concurrency=concurrency)
    mtp.assert_no_regression("acceptance_rate")
    mtp.assert_speedup_over(base)
"""


def test_suite_runs_in_containers_and_leaves_none(pytester, sim_image, containers_of, monkeypatch, tmp_path_factory):
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value_never_shown")
    write_tiny_sharegpt(pytester.path / "sharegpt.json")
    pytester.makepyfile(test_suite=SUITE.format(image=sim_image))
    pytester.makeini("[pytest]\nllmperf_dataset = sharegpt.json\nllmperf_tolerances = mtp_speedup = 30%\n")
    before = {c.id for c in containers_of("")}

    args = ("-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-docker", "--llmperf-report", "report.json")
    # Subprocesses: in-process runs would re-import lazily loaded httpcore modules between
    # runs, and httpx then no longer recognises their exception classes.
    recorded = pytester.runpytest_subprocess(*args, "--update-baselines")
    recorded.assert_outcomes(passed=1)
    assert (pytester.path / "baselines" / "docker" / "tiny-mtp.json").exists()
    compared = pytester.runpytest_subprocess(*args)
    compared.assert_outcomes(passed=1)

    report = json.loads((pytester.path / "report.json").read_text())
    assert report["servers_started"] == ["tiny", "tiny-mtp"]
    assert all(run["provenance"]["image"] == sim_image for run in report["runs"])
    assert all(run["provenance"]["vllm_version"] == "0.32.0" for run in report["runs"])
    everything = recorded.stdout.str() + compared.stdout.str() + json.dumps(report)
    everything += (pytester.path / "baselines" / "docker" / "tiny-mtp.json").read_text()
    assert "hf_secret_value_never_shown" not in everything
    assert {c.id for c in containers_of("")} == before  # nothing of ours left
