"""docs/examples/: the CI workflows and the Kubernetes Job a user copies run the plugin
with flags it has; the one-box workflow runs the README's nightly commands, the eight-box
one a shard per job with the store from a secret; both install the plugin from the
checkout (it is on no package index), and .ci/run checks both against GitHub's workflow
schema with check-jsonschema."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from pytest_llmperf.options import OPTIONS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
FLAGS = {flag for option in OPTIONS for flag in option.flags}
WORKFLOWS = ("github-actions-one-box.yml", "github-actions-nightly.yml")


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


def _readme_recipe() -> list[str]:
    """The commands of the README's "Gate a vLLM image nightly" block, one a line (a
    backslash continuation joined, comments left out)."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("\n## Gate a vLLM image nightly")
    section = readme[start : readme.index("\n## ", start + 1)]
    (block,) = re.findall(r"```bash\n(.*?)```", section, re.S)
    lines = block.replace("\\\n", " ").splitlines()
    return [" ".join(shlex.split(line, comments=True)) for line in lines if line.strip() and not line.startswith("#")]


def _commands(workflow: dict) -> list[str]:
    """Every command a workflow's steps run, one a line (a folded `run: >` joined)."""
    commands = []
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            for line in step.get("run", "").splitlines():
                if line.strip():
                    commands.append(" ".join(shlex.split(line, comments=True)))
    return commands


def test_the_one_box_workflow_runs_the_readmes_nightly_commands() -> None:
    workflow = yaml.safe_load((EXAMPLES / "github-actions-one-box.yml").read_text())
    (job,) = workflow["jobs"].values()
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"] and "strategy" not in job
    recipe = _readme_recipe()
    gate = [c for c in _commands(workflow) if c.split()[0] in ("pytest", "llmperf", "docker")]
    assert [c.split()[0] for c in gate] == ["docker", "llmperf", "pytest"]  # pull, check the box, the night
    for command in gate:
        assert command in recipe, f"the one-box workflow runs `{command}`, which README's recipe does not show"
        assert flags_in(command) <= FLAGS
    assert "--llmperf-image" in gate[-1] and "--llmperf-history" in gate[-1] and "--llmperf-report" in gate[-1]
    assert any("--llmperf-against-image" in c for c in recipe) and any("--update-baselines" in c for c in recipe)
    assert workflow["jobs"]["gate"]["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
    upload = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload and upload[0]["with"]["path"] == "llmperf-report" and upload[0]["if"] == "always()"


def test_the_workflows_install_the_plugin_from_the_checkout_and_ci_checks_their_schema() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for name in WORKFLOWS:
        workflow = yaml.safe_load((EXAMPLES / name).read_text())
        for job in workflow["jobs"].values():
            steps = job["steps"]
            assert steps[0].get("uses", "").startswith("actions/checkout"), f"{name}: the job checks out first"
            installs = [c for c in _commands({"jobs": {"j": job}}) if " pip install " in f" {c} "]
            assert installs and all(re.search(r"pip install '?\.\[", c) for c in installs), (name, installs)
        assert f"check-jsonschema --builtin-schema vendor.github-workflows docs/examples/{name}" in ci, name
