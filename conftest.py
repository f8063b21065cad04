"""The servers of the seed suite (tests/perf/): the two published Qwen3.6 runs
(../shared/seeds), base and MTP, declared once and named in markers:
@pytest.mark.llmperf(server="qwen3.6-27b-fp8-mtp", base="qwen3.6-27b-fp8").

Flags are the seeds' `docker run` flags. Both models declare --max-num-seqs 32 so one
server serves concurrency 1, 8 and 32 (the 27B conc-8 seed ran with 8, which is the
same batch at concurrency 8). Baselines (baselines/<target>/<name>.json) are filed
under these names.

This file is the project's root conftest.py, so the project's own test run loads it
too: it only declares, and the unit tests' pytester projects have rootdirs of their own.
"""

from pytest_llmperf import ServerSpec

IMAGE = "vllm/vllm-openai:cu130-nightly"
COMMON_ARGS = ("--max-model-len", "65536", "--gpu-memory-utilization", "0.85", "--max-num-seqs", "32")
MTP = {"method": "mtp", "num_speculative_tokens": 3}
HF_TOKEN = {"HF_TOKEN": None}  # passed through from the caller's environment, never shown

QWEN36_A3B = ServerSpec(
    name="qwen3.6-35b-a3b-fp8",
    model="Qwen/Qwen3.6-35B-A3B-FP8",
    image=IMAGE,
    args=COMMON_ARGS,
    env=HF_TOKEN,
)
QWEN36_A3B_MTP = QWEN36_A3B.with_speculative(MTP, name="qwen3.6-35b-a3b-fp8-mtp")

QWEN36_27B = ServerSpec(
    name="qwen3.6-27b-fp8",
    model="Qwen/Qwen3.6-27B-FP8",
    image=IMAGE,
    args=COMMON_ARGS,
    env=HF_TOKEN,
)
QWEN36_27B_MTP = QWEN36_27B.with_speculative(MTP, name="qwen3.6-27b-fp8-mtp")


def pytest_llmperf_servers():
    return [QWEN36_A3B, QWEN36_A3B_MTP, QWEN36_27B, QWEN36_27B_MTP]
