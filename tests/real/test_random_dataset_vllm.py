"""Our random dataset against vLLM's own (`vllm bench serve --dataset-name random`), in the
prepared vLLM venv: with the model's tokenizer the very same prompts, lengths and order;
with the built-in tokenizer the same lengths (docs: what the random dataset matches)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from vllm_bench import venv_env, vllm_samples

from pytest_llmperf.workload.random_dataset import RandomSettings, sample_random

pytestmark = [pytest.mark.slow, pytest.mark.real_vllm]

ROOT = Path(__file__).resolve().parents[2]
CASES = [  # (input len, output len, range ratio, prefix len, prompts, seed)
    (64, 16, 0.0, 0, 12, 0),
    (48, 20, 0.5, 8, 20, 3),
]

# Our sampler with the model's Hugging Face tokenizer, in the venv (which has transformers):
# the venv's packages first, then the project's package from this checkout.
OURS = """
import hashlib, json, sys
from transformers import AutoTokenizer
sys.path.append(sys.argv[1])
from pytest_llmperf.workload.random_dataset import RandomSettings, sample_random
tok = AutoTokenizer.from_pretrained(sys.argv[2])
out = []
for i, o, r, p, n, seed in json.loads(sys.argv[3]):
    settings = RandomSettings(input_len=i, output_len=o, range_ratio=r, prefix_len=p)
    reqs = sample_random(n, settings, seed=seed, tokenizer=tok)
    out.append([{"sha256": hashlib.sha256(q.prompt.encode()).hexdigest(), "prompt_len": q.prompt_len,
                 "output_len": q.expected_output_len} for q in reqs])
print(json.dumps({"special": tok.num_special_tokens_to_add(), "samples": out}))
"""


def test_the_same_tokenizer_gives_vllms_very_prompts_and_the_builtin_one_its_lengths(prepared_vllm, tmp_path):
    arg_sets = [
        ["--model", str(prepared_vllm.model), "--tokenizer", str(prepared_vllm.model), "--dataset-name", "random"]
        + ["--random-input-len", str(i), "--random-output-len", str(o), "--random-range-ratio", str(r)]
        + ["--random-prefix-len", str(p), "--num-prompts", str(n), "--seed", str(seed)]
        for i, o, r, p, n, seed in CASES
    ]
    theirs = vllm_samples(prepared_vllm, tmp_path / "vllm.json", *arg_sets)
    done = subprocess.run(
        [str(prepared_vllm.python), "-c", OURS, str(ROOT), str(prepared_vllm.model), json.dumps(CASES)],
        capture_output=True,
        text=True,
        env=venv_env(),
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ours = json.loads(done.stdout.strip().splitlines()[-1])
    for case, mine, vllms in zip(CASES, ours["samples"], theirs):
        assert mine == vllms, f"case {case}: our prompts differ from vLLM's"
        assert len({s["sha256"] for s in vllms}) == len(vllms)  # distinct prompts: a real comparison
    # The built-in tokenizer has no special tokens: its lengths are vLLM's when the
    # model's tokenizer adds none either (SmolLM2's and Qwen's add none).
    assert ours["special"] == 0
    for (i, o, r, p, n, seed), vllms in zip(CASES, theirs):
        builtin = sample_random(n, RandomSettings(input_len=i, output_len=o, range_ratio=r, prefix_len=p), seed=seed)
        assert [q.expected_output_len for q in builtin] == [s["output_len"] for s in vllms]
        # The drawn lengths are the same; vLLM's prompt_len is its re-encoded length, which
        # the decode/re-encode rounds bring to the drawn one.
        assert [q.prompt_len for q in builtin] == [s["prompt_len"] for s in vllms]
