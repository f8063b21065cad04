"""Paired A/B through Docker: OLD and NEW are the local simulator image built twice with
different knobs (the step-time scale in the entrypoint, NEW's 1.3x OLD's); `--llmperf-docker --llmperf-image
NEW --llmperf-against-image OLD` starts the containers in the order and number it promised
up front (A B, B A per run), finds NEW slower on decode, and leaves no container behind."""

import io
import json
import re
import uuid

import pytest

from tests.docker.images import write_tiny_sharegpt

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SUITE = """
import pytest
from pytest_llmperf import ServerSpec

BASE = ServerSpec(name="tiny", model="org/tiny", image="unused:never-started",
                  args=("--max-num-seqs", "8"))
MTP = BASE.with_speculative({"method": "mtp", "num_speculative_tokens": 3}, name="tiny-mtp")
W = dict(num_prompts=8, max_tokens=32, warmup=1)

@pytest.mark.parametrize("concurrency", [4])
@pytest.mark.llmperf(server=BASE, **W)
def test_base(llmperf, concurrency):
    llmperf.run(concurrency=concurrency).assert_no_regression("decode_tok_s")

@pytest.mark.parametrize("concurrency", [4])
@pytest.mark.llmperf(server=MTP, base=BASE, **W)
def test_speedup(llmperf, concurrency):
    mtp = llmperf.run(concurrency=concurrency)
    base = llmperf.run(concurrency=concurrency, server=llmperf.base)
    mtp.assert_speedup_over(base)
"""


@pytest.fixture
def knob_images(docker_client, sim_image):
    """OLD and NEW: the sim image with the step-time scale 4.0 and 5.2 (1.3x) in its
    entrypoint: steps long enough that a busy shared host does not make the runs invalid
    (engine lag is counted in steps)."""
    tags = {}
    suffix = uuid.uuid4().hex[:8]
    for role, scale in (("old", "4.0"), ("new", "5.2")):
        tag = f"pytest-llmperf/test-paired:{role}-{suffix}"
        dockerfile = (
            f"FROM {sim_image}\n"
            f'ENTRYPOINT ["python3", "-m", "pytest_llmperf.sim", "--sim-step-time-scale", "{scale}"]\n'
        )
        docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, pull=False)
        tags[role] = tag
    yield tags
    for tag in tags.values():
        docker_client.images.remove(tag, force=True)


def test_paired_images_run_in_the_promised_order_and_count_and_leave_no_container(
    pytester, knob_images, containers_of, monkeypatch, tmp_path_factory
):
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    write_tiny_sharegpt(pytester.path / "sharegpt.json")
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini(
        "[pytest]\nllmperf_dataset = sharegpt.json\nllmperf_server_warmup = 8\n"
        "llmperf_tolerances =\n    decode_tok_s = 10%\n    mtp_speedup = 30%\n"
    )
    before = {c.id for c in containers_of("")}
    old, new = knob_images["old"], knob_images["new"]
    result = pytester.runpytest_subprocess(
        "-p",
        "no:benchmark",
        "-p",
        "no:cacheprovider",
        "--llmperf-docker",
        "--llmperf-image",
        new,
        "--llmperf-against-image",
        old,
        "--llmperf-repetitions",
        "2",
        "--llmperf-report",
        "report.json",
        "-rA",
    )
    out = result.stdout.str()
    # Promised before any container started: 2 servers x 2 images x 2 blocks, 8 starts.
    promised = re.search(r"2 servers x 2 images x 2 blocks: about (\d+) container starts", out)
    assert promised and out.index(promised[0]) < out.index("starting server"), out
    invalid = [line for line in result.stdout.lines if "invalid run" in line]
    assert not invalid, "\n".join(invalid)
    result.assert_outcomes(failed=1, passed=1)  # decode 1.3x slower; the speedup unchanged
    result.stdout.fnmatch_lines(
        [f"tiny @ concurrency 4: image {new} vs image {old} (paired, 2 blocks) [docker]", "decode_tok_s *REGRESSED"]
    )
    result.stdout.fnmatch_lines(["PASSED test_suite.py::test_speedup[[]4[]]*"])

    report = json.loads((pytester.path / "report.json").read_text())
    order = report["paired"]["order"]
    assert [(s["server"], s["role"]) for s in order] == [
        ("tiny", "A"),
        ("tiny", "B"),
        ("tiny", "B"),
        ("tiny", "A"),
        ("tiny-mtp", "A"),
        ("tiny-mtp", "B"),
        ("tiny-mtp", "B"),
        ("tiny-mtp", "A"),
    ]
    assert len(report["servers_started"]) == len(order) == int(promised[1]) == 8
    assert {r["provenance"]["image"] for r in report["runs"]} == {new}
    assert {r["provenance"]["image"] for r in report["paired"]["runs"]} == {old}
    assert not (pytester.path / "baselines").exists()
    assert {c.id for c in containers_of("")} == before  # nothing of ours left
