"""util.secrets: one rule for secret names and values, and the redactions built on it."""

import pytest

from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.util.secrets import (
    REDACTED,
    RedactedEnv,
    Secrets,
    is_secret_name,
    looks_like_secret,
    redact,
    redact_args,
    redact_env,
    redact_text,
    secret_arg_values,
)

TOKEN = "hf_unit_SECRET_value_42"


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "hf_token",
        "HFTOKEN",
        "api_key",
        "VLLM_API_KEY",
        "api-key",
        "apiKey",
        "AWS_SECRET_ACCESS_KEY",
        "SECRETKEY",
        "DB_PASSWORD",
        "PASSWD",
        "Authorization",
        "cookie",
        "GH_CREDENTIALS",
    ],
)
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "max_tokens",
        "prompt_tokens",
        "tokenizer",
        "TOKENIZERS_PARALLELISM",
        "VLLM_LOGGING_LEVEL",
        "max_model_len",
        "keys",
    ],
)
def test_names_that_only_mention_tokens_are_not_secret(name):
    assert not is_secret_name(name)


def test_secret_looking_values():
    assert looks_like_secret("hf_" + "a" * 30) and looks_like_secret("Bearer abcdefghijk")
    assert looks_like_secret("run HF_TOKEN=abc") and not looks_like_secret("run HF_TOKEN=***")
    assert not looks_like_secret("Qwen/Qwen3.6-35B-A3B-FP8")


def test_redact_args_hides_secret_flag_values_and_credentials():
    args = ["--api-key", "k1", "--port", "8000", "--hf-token=abc", "sk-" + "b" * 20, "--max-num-batched-tokens", "8192"]
    assert redact_args(args) == [
        "--api-key",
        REDACTED,
        "--port",
        "8000",
        f"--hf-token={REDACTED}",
        REDACTED,
        "--max-num-batched-tokens",
        "8192",
    ]
    assert redact_args(["--api-key", "--port", "1"]) == ["--api-key", "--port", "1"]  # no value to hide


def test_redact_env_keeps_pass_through_names_visible():
    env = {"HF_TOKEN": None, "MY_PASSWORD": "p", "LISTED": "v", "PLAIN": "1"}
    assert redact_env(env, {"LISTED"}) == {"HF_TOKEN": None, "LISTED": REDACTED, "MY_PASSWORD": REDACTED, "PLAIN": "1"}


def test_spec_describe_redacts_env_and_args():
    spec = ServerSpec(
        name="s",
        model="m",
        args=("--api-key", "k-123", "--max-model-len", "4096"),
        env={"HF_TOKEN": None, "EXTRA": "x", "VLLM_LOGGING_LEVEL": "DEBUG", "MY_API_KEY": "k"},
        secret_env=("EXTRA",),
    )
    info = spec.describe()
    assert info["args"] == ["--api-key", REDACTED, "--max-model-len", "4096"]
    assert info["env"] == {"EXTRA": REDACTED, "HF_TOKEN": None, "MY_API_KEY": REDACTED, "VLLM_LOGGING_LEVEL": "DEBUG"}
    assert "k-123" not in spec.vllm_args()  # not on the command line (ps, docker inspect) ...
    assert spec.vllm_args()[-2:] == ["--max-model-len", "4096"]
    assert spec.launch_env() == {"VLLM_API_KEY": "k-123"}  # ... but in the server's environment


@pytest.mark.parametrize("args", [("--api-key", "k-123"), ("--api-key=k-123",)])
def test_the_api_key_reaches_the_server_as_vllm_api_key_in_either_spelling(args):
    spec = ServerSpec(name="s", model="m", args=(*args, "--max-num-seqs", "4"))
    assert spec.vllm_args(port=1) == ["m", "--host", "0.0.0.0", "--port", "1", "--max-num-seqs", "4"]
    assert spec.launch_env() == {"VLLM_API_KEY": "k-123"}
    assert "k-123" in set(spec.secret_values({}))


def test_redact_replaces_every_occurrence_and_longest_first():
    secrets = Secrets(["abc", "abcdef", None, ""])
    assert redact("x abcdef y abc z abcdef", secrets) == "x *** y *** z ***"
    assert list(secrets) == ["abcdef", "abc"]


def test_secret_holders_never_show_values_in_repr():
    env = RedactedEnv({"HF_TOKEN": TOKEN, "VLLM_LOGGING_LEVEL": "DEBUG"}, {"HF_TOKEN"})
    assert TOKEN not in repr(env) and TOKEN not in str(env)
    assert "'VLLM_LOGGING_LEVEL': 'DEBUG'" in repr(env)
    assert env["HF_TOKEN"] == TOKEN  # the engine still gets the real value
    assert TOKEN not in repr(Secrets([TOKEN]))


def test_the_values_a_command_line_hides_are_the_ones_to_scrub_from_its_log():
    args = ["--api-key", "k-1", "--max-num-seqs", "8", "--hf-token=t-2", "hf_" + "a" * 24, "--api-key", "--x"]
    assert secret_arg_values(args) == ["k-1", "t-2", "hf_" + "a" * 24]


def test_free_text_loses_known_values_and_credential_shaped_words():
    text = "serving with k-1; auth: Bearer abcdefgh12345678, HF hf_" + "b" * 24 + " max_tokens=5 tokenizer ok"
    assert redact_text(text, ["k-1"]) == "serving with ***; auth: ***, HF *** max_tokens=5 tokenizer ok"
