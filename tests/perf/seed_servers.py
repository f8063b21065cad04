"""The seed suite's servers: the two published Qwen3.6 runs (../shared/seeds), base and MTP.

A plain module, not conftest.py: test modules import it by name, and several
conftest.py files in one tree would shadow each other under that name.

Flags are the seeds' `docker run` flags. Both models declare --max-num-seqs 32 so one
server serves concurrency 1, 8 and 32 (the 27B conc-8 seed ran with 8, which is the
same batch at concurrency 8).
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

BASE_SERVERS = (QWEN36_A3B, QWEN36_27B)
MTP_SERVERS = (QWEN36_A3B_MTP, QWEN36_27B_MTP)
SPEEDUP_PAIRS = ((QWEN36_A3B_MTP, QWEN36_A3B), (QWEN36_27B_MTP, QWEN36_27B))
