"""A known result set for the report tests: a base and an MTP server of one model at
concurrency 1 and 8, raw records included, one regressed MTP cell that explains itself,
published figures and a speedup verdict. Plain dicts, as build_report writes them."""

from __future__ import annotations

import random
from typing import Any

from pytest_llmperf.baselines.compare import compare
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.report.document import plain

REL5 = Tolerance("relative", 0.05)
ABS3 = Tolerance("absolute", 0.03)
MTP = {"method": "mtp", "num_speculative_tokens": 3}
PROVENANCE = {
    "target": "sim",
    "vllm_version": "0.32.0",
    "plugin_version": "0.1.0",
    "git_commit": "5545e68",
    "image": "vllm/vllm-openai:cu130-nightly",
    "image_digest": "sha256:1111",
    "gpu_name": "NVIDIA H200",
    "gpu_driver": "570.86",
    "dataset": {"sha256": "99af0276a84059eca22886be", "path": "ShareGPT.json"},
    "clock_speed": 10.0,
    "date": "2026-12-01T09:11:44+00:00",
}


def records(n: int, concurrency: int, tokens: int, tpot_s: float, seed: int) -> list[dict[str, Any]]:
    """`n` requests, `concurrency` at a time, on a clock 10x faster than real."""
    rng = random.Random(seed)
    out, free = [], [0.0] * concurrency
    for i in range(n):
        slot = min(range(concurrency), key=free.__getitem__)
        send = free[slot]
        first = send + rng.uniform(0.02, 0.06)
        chunks = [first + k * tpot_s * 2 for k in range(tokens // 2)]
        out.append(
            {
                "index": i,
                "send_time": send,
                "chunk_times": chunks,
                "end_time": chunks[-1] + 0.001,
                "prompt_tokens": 200,
                "completion_tokens": tokens,
                "finish_reason": "length",
                "status": 200,
                "error": None,
                "output_text": "",
                "expected_prompt_len": 200,
                "cut_at_cap": False,
            }
        )
        free[slot] = chunks[-1] + 0.001
    return out


def run(name: str, concurrency: int, decode: float, tpot_ms: float, speculative: bool, seed: int) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "decode_tok_s": decode,
        "prefill_tok_s": decode * 1.05,
        "ttft_ms_median": 400.0,
        "tpot_ms_median": tpot_ms,
        "tpot_ms_mean": tpot_ms,
    }
    published: dict[str, float] = {}
    if speculative:
        summary.update(acceptance_rate=0.66, acceptance_length=2.98, acceptance_pos1=0.84)
        summary.update(acceptance_pos2=0.65, acceptance_pos3=0.49)
        if concurrency == 8:
            published = {"decode_tok_s": 97.96, "tpot_ms_median": 66.3, "acceptance_pos1": 0.86}
    return {
        "server": {"name": name, "model": "Qwen/Qwen3.6-27B-FP8", "speculative_config": MTP if speculative else None},
        "workload": {"concurrency": concurrency, "num_prompts": 16, "max_tokens": 64},
        "provenance": {**PROVENANCE, "vllm_version": "0.33.0", "date": "2026-12-02T01:00:00+00:00"},
        "summary": summary,
        "samples": {k: [v] for k, v in summary.items()},
        "notes": [],
        "published_reference": published,
        "results": [
            {
                "records": records(16, concurrency, 64, tpot_ms / 1000 / 10, seed),
                "clock_speed": 10.0,
                "duration": 1.0,
            }
        ],
        "completed": 16,
        "attempted": 16,
        "failed": 0,
        "stop_reasons": ["completed"],
        "server_death": None,
        "server_log": [],
    }


def gate(test: str, server: str, concurrency: int, verdicts: list[Any], baseline: dict[str, float], **extra: Any):
    return {
        "test": test,
        "server": server,
        "concurrency": concurrency,
        "baseline": f"baselines/sim/{server}.json",
        "outcome": extra.pop("outcome", "pass"),
        "message": extra.pop("message", ""),
        "verdicts": plain(verdicts),
        "baseline_figures": baseline,
        "baseline_provenance": PROVENANCE,
        "changes": extra.pop("changes", []),
        "attribution": extra.pop("attribution", None),
        "explanation": extra.pop("explanation", []),
        **extra,
    }


REGRESSION_EXPLAINED = [
    "what changed since the baseline (recorded 2026-12-01T09:11:44+00:00): nothing but the vLLM version: "
    "0.32.0 -> 0.33.0",
    "why decode moved: -13.1% decode: -14.0% from acceptance length, +1.1% from step time",
]


def sample_document() -> dict[str, Any]:
    runs = [
        run("qwen3.6-27b-fp8", 1, 21.0, 45.0, False, 1),
        run("qwen3.6-27b-fp8", 8, 60.0, 120.0, False, 2),
        run("qwen3.6-27b-fp8-mtp", 1, 38.0, 24.0, True, 3),
        run("qwen3.6-27b-fp8-mtp", 8, 86.0, 75.0, True, 4),
    ]
    decode_base = compare("decode_tok_s", 21.5, 21.0, REL5, "higher", error=0.5)
    regressed = compare("decode_tok_s", 99.0, 86.0, REL5, "higher", error=1.5, update_command="pytest 'x' --u")
    acceptance = compare("acceptance_rate", 0.67, 0.66, ABS3, "higher", error=0.005)
    speedup = compare("mtp_speedup", 1.6, 1.43, REL5, "higher", error=0.04, update_command="pytest 'y' --u")
    mtp_base = {"decode_tok_s": 99.0, "tpot_ms_median": 66.0, "acceptance_pos1": 0.85, "acceptance_pos2": 0.69}
    mtp_base["acceptance_pos3"] = 0.53
    verdicts = [
        gate("tests/perf/test_seed.py::test_base[1]", "qwen3.6-27b-fp8", 1, [decode_base], {"decode_tok_s": 21.5}),
        gate(
            "tests/perf/test_seed.py::test_mtp[8]",
            "qwen3.6-27b-fp8-mtp",
            8,
            [regressed, acceptance],
            mtp_base,
            outcome="fail",
            message="(the table)",
            changes=["vLLM version: 0.32.0 -> 0.33.0"],
            attribution={"decode": -0.131, "acceptance_length": -0.14, "step_time": 0.011, "occupancy": 0.0},
            explanation=REGRESSION_EXPLAINED,
        ),
        gate(
            "tests/perf/test_seed.py::test_speedup[8]",
            "qwen3.6-27b-fp8-mtp",
            8,
            [speedup],
            {**mtp_base, "mtp_speedup": 1.6},
            outcome="fail",
        ),
    ]
    return {
        "plugin_version": "0.1.0",
        "target": "sim",
        "profile": "smoke",
        "inconclusive": "warn",
        "servers_started": ["qwen3.6-27b-fp8", "qwen3.6-27b-fp8-mtp"],
        "runs": runs,
        "verdicts": verdicts,
    }
