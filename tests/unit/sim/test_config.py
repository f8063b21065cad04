"""SimConfig: vLLM's argv shape in and out, and clear errors for bad values."""

from __future__ import annotations

import json
import logging

import pytest

from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.sim import SimConfig
from pytest_llmperf.sim.profiles import GENERIC


def test_parses_the_seed_command_line():
    argv = [
        "Qwen/Qwen3.6-35B-A3B-FP8",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--max-model-len",
        "65536",
        "--gpu-memory-utilization",
        "0.85",
        "--max-num-seqs",
        "32",
        "--speculative-config",
        '{"method":"mtp","num_speculative_tokens":3}',
    ]
    c = SimConfig.from_vllm_argv(argv)
    assert (c.model, c.host, c.port, c.max_model_len, c.max_num_seqs) == (
        "Qwen/Qwen3.6-35B-A3B-FP8",
        "0.0.0.0",
        8000,
        65536,
        32,
    )
    assert c.speculative_config == {"method": "mtp", "num_speculative_tokens": 3}
    assert c.num_speculative_tokens == 3
    assert c.profile.name == "qwen3.6-35b-a3b-fp8"
    assert c.ignored_args == ["--gpu-memory-utilization"]


def test_accepts_a_server_spec_vllm_args():
    spec = ServerSpec(
        name="x", model="Qwen/Qwen3.6-27B-FP8", args=["--max-num-seqs", "8", "--enforce-eager"], served_model_name="q27"
    ).with_speculative({"method": "mtp", "num_speculative_tokens": 3})
    c = SimConfig.from_vllm_argv(spec.vllm_args(host="127.0.0.1", port=0))
    assert (c.model_id, c.max_num_seqs, c.num_speculative_tokens) == ("q27", 8, 3)


def test_unknown_flags_are_logged_and_ignored(caplog):
    with caplog.at_level(logging.INFO, logger="pytest_llmperf.sim"):
        c = SimConfig.from_vllm_argv(
            [
                "serve",
                "m",
                "--trust-remote-code",
                "--tensor-parallel-size",
                "2",
                "--kv-cache-dtype=fp8",
                "--max-num-seqs",
                "4",
            ]
        )
    assert c.max_num_seqs == 4
    assert c.ignored_args == ["--trust-remote-code", "--tensor-parallel-size", "--kv-cache-dtype"]
    assert "ignoring vLLM argument --tensor-parallel-size (no effect" in caplog.text


def test_an_ignored_flag_is_logged_without_its_value_which_may_be_a_secret(caplog):
    with caplog.at_level(logging.DEBUG, logger="pytest_llmperf.sim"):
        c = SimConfig.from_vllm_argv(["m", "--api-key", "sk-canary-0123456789abcdef", "--hf-token=hf_secret"])
    assert c.ignored_args == ["--api-key", "--hf-token"]
    assert "sk-canary" not in caplog.text and "hf_secret" not in caplog.text
    assert "ignoring vLLM argument --api-key (no effect" in caplog.text


def test_sim_flags_and_round_trip():
    argv = [
        "m",
        "--served-model-name",
        "alias",
        "--disable-log-stats",
        "--seed",
        "9",
        "--max-model-len",
        "4k",
        "--sim-speed",
        "20",
        "--sim-acceptance-scale",
        "0.8",
        "--sim-step-time-scale",
        "1.25",
        "--sim-crash-after-requests",
        "5",
        "--sim-error-rate",
        "0.1",
        "--sim-stall-seconds",
        "2",
        "--sim-stall-after-chunks",
        "3",
        "--sim-malformed-chunk-after",
        "4",
        "--sim-reset-after-chunks",
        "6",
        "--sim-slow-start-seconds",
        "1.5",
        "--sim-eos-only-rate",
        "0.25",
        "--sim-early-stop-rate",
        "0.5",
        "--sim-changed-output-rate",
        "0.2",
        "--sim-usage-offset",
        "-2",
        "--sim-counter-scale",
        "1.25",
        "--sim-crash-exit",
        "--sim-profile",
        "qwen3.6-27b-fp8",
        "--speculative-config",
        json.dumps({"method": "mtp", "num_speculative_tokens": 2}),
    ]
    c = SimConfig.from_vllm_argv(argv)
    assert (c.speed, c.acceptance_scale, c.step_time_scale, c.crash_after_requests) == (20, 0.8, 1.25, 5)
    assert (c.error_rate, c.stall_seconds, c.stall_after_chunks) == (0.1, 2.0, 3)
    assert (c.malformed_chunk_after, c.reset_after_chunks, c.slow_start_seconds) == (4, 6, 1.5)
    assert c.eos_only_rate == 0.25
    assert (c.early_stop_rate, c.changed_output_rate, c.usage_offset, c.counter_scale) == (0.5, 0.2, -2, 1.25)
    assert c.crash_exit and c.disable_log_stats and c.seed == 9 and c.max_model_len == 4000
    assert c.profile.name == "qwen3.6-27b-fp8" and c.served_model_name == "alias"
    again = SimConfig.from_vllm_argv(c.to_vllm_argv())
    assert again == c


def test_defaults_round_trip():
    c = SimConfig(model="x")
    assert SimConfig.from_vllm_argv(c.to_vllm_argv()) == c
    assert c.profile == GENERIC


@pytest.mark.parametrize(
    "argv, fragment",
    [
        ([], "no model given"),
        (["m", "--max-num-seqs", "lots"], "--max-num-seqs expects an integer"),
        (["m", "--speculative-config", "[1]"], "must be a JSON object"),
        (["m", "--speculative-config", '{"method":"mtp"}'], "num_speculative_tokens"),
        (["m", "--sim-speed", "0"], "speed must be > 0"),
        (["m", "--sim-speed", "fast"], "--sim-speed expects a float"),
        (["m", "--sim-error-rate", "1.5"], "error_rate must be a fraction"),
        (["m", "--sim-eos-only-rate", "-0.1"], "eos_only_rate must be a fraction"),
        (["m", "--sim-early-stop-rate", "2"], "early_stop_rate must be a fraction"),
        (["m", "--sim-changed-output-rate", "-1"], "changed_output_rate must be a fraction"),
        (["m", "--sim-counter-scale", "-1"], "counter_scale must be in"),
        (["m", "--sim-usage-offset", "1.5"], "--sim-usage-offset expects a int"),
        (["m", "--sim-profile", "gpt5"], "unknown sim profile"),
        (["m", "other"], "unexpected argument"),
        (["m", "--port"], "--port needs a value"),
        (["m", "--max-model-len", "big"], "--max-model-len expects a length"),
        (["m", "--reasoning-parser", "deepseek_r1"], "'deepseek_r1' is not simulated.*give --reasoning-parser qwen3"),
        (["m", "--reasoning-parser"], "--reasoning-parser needs a value"),
        (["m", "--sim-reasoning-share", "0.5"], "--sim-reasoning-share needs --reasoning-parser qwen3"),
        (["m", "--reasoning-parser", "qwen3", "--sim-reasoning-share", "1.5"], "reasoning_share must be a fraction"),
        (
            ["m", "--reasoning-parser", "qwen3", "--sim-reasoning-share", "most"],
            "--sim-reasoning-share expects a float",
        ),
    ],
)
def test_bad_arguments_say_what_is_wrong(argv, fragment):
    with pytest.raises(ValueError, match=fragment):
        SimConfig.from_vllm_argv(argv)


def test_python_construction_validates():
    with pytest.raises(ValueError, match="max_num_seqs"):
        SimConfig(model="m", max_num_seqs=0)
    with pytest.raises(ValueError, match="stall_seconds"):
        SimConfig(model="m", stall_seconds=-1)
    assert SimConfig(model="m", profile="qwen3.6-27b-fp8").profile.name == "qwen3.6-27b-fp8"


def test_reasoning_parser_as_vllm_takes_it_and_round_trips():
    c = SimConfig.from_vllm_argv(["Qwen/Qwen3.6-27B-FP8", "--reasoning-parser", "qwen3"])
    assert c.reasoning_parser == "qwen3" and c.reasoning_share is None
    assert c.resolved_reasoning_share == 0.9  # the Qwen3.6 profile's
    assert "--reasoning-parser" not in " ".join(c.ignored_args)
    assert SimConfig.from_vllm_argv(c.to_vllm_argv()) == c
    tuned = SimConfig.from_vllm_argv(["m", "--reasoning-parser=qwen3", "--sim-reasoning-share", "0.25"])
    assert tuned.resolved_reasoning_share == 0.25 and SimConfig.from_vllm_argv(tuned.to_vllm_argv()) == tuned
    assert SimConfig(model="m", reasoning_parser="qwen3").resolved_reasoning_share == GENERIC.reasoning_share
    assert SimConfig(model="m").resolved_reasoning_share is None  # no parser: no reasoning phase
