"""docs/examples/: the CI workflow and the Kubernetes Job a user copies run the plugin
with flags it has, one shard per job, the store from a secret (the workflow's schema is
checked by .ci/run with check-jsonschema)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from pytest_llmperf.options import OPTIONS

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
FLAGS = {flag for option in OPTIONS for flag in option.flags}


def flags_in(command: str) -> set[str]:
    return set(re.findall(r"(--llmperf-[a-z-]+)", command))


def test_the_github_workflow_runs_eight_shards_then_one_report_that_fails_the_pipeline() -> None:
    workflow = yaml.safe_load((EXAMPLES / "github-actions-nightly.yml").read_text())
    shard, report = workflow["jobs"]["shard"], workflow["jobs"]["report"]
    assert shard["strategy"]["matrix"]["shard"] == list(range(1, 9))
    command = " ".join(step.get("run", "") for step in shard["steps"])
    assert "--llmperf-shard ${{ matrix.shard }}/8" in command
    assert flags_in(command) <= FLAGS and "--llmperf-report" in command
    assert report["needs"] == "shard" and report["if"] == "always()"
    assert any(step.get("run", "").startswith("llmperf report") for step in report["steps"])
    assert workflow["env"]["LLMPERF_STORE"] == "${{ secrets.LLMPERF_STORE }}"


def test_the_kubernetes_job_is_indexed_one_shard_per_pod_with_gpus_requested() -> None:
    job = yaml.safe_load((EXAMPLES / "kubernetes-nightly.yaml").read_text())
    spec = job["spec"]
    assert (job["kind"], spec["completionMode"], spec["completions"]) == ("Job", "Indexed", 8)
    (container,) = spec["template"]["spec"]["containers"]
    command = " ".join(container["args"])
    assert "--llmperf-shard $((JOB_COMPLETION_INDEX + 1))/8" in command
    assert flags_in(command) <= FLAGS
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    env = {e["name"]: e for e in container["env"]}
    assert env["LLMPERF_STORE"]["valueFrom"]["secretKeyRef"]["key"] == "url"
    assert "controller-uid" in env["SESSION_GROUP"]["valueFrom"]["fieldRef"]["fieldPath"]
