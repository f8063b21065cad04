"""ServerSpec: secrets never shown, wherever a spec is printed; its own vLLM arguments read."""

import pytest

from pytest_llmperf import ServerSpec
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.workload.workload import resolve_workload

CANARY = "hf_canaryCANARYcanaryCANARY0123"
SPEC = ServerSpec(
    name="m",
    model="org/m",
    args=("--api-key", "sk-canary-0123456789abcdef"),
    env={"HF_TOKEN": CANARY, "MY_SERVICE_PASSWORD": "canary-password"},
)


def test_repr_redacts_secret_env_values_and_secret_args():
    text = repr(SPEC)
    assert text.startswith("ServerSpec(name='m', model='org/m'")
    for secret in (CANARY, "sk-canary-0123456789abcdef", "canary-password"):
        assert secret not in text
    assert "'HF_TOKEN': '***'" in text and "'--api-key', '***'" in text


def test_a_measured_run_repr_carries_the_redacted_spec():
    run = MeasuredRun(SPEC, resolve_workload({"num_prompts": 4}, 1), [], {}, {})
    assert CANARY not in repr(run) and "ServerSpec(name='m'" in repr(run)


# The secrets come from the environment, as they would on a CI box: a literal in the
# test's own source would be shown by the traceback whatever the plugin does.
FAILING = """
import os
from pytest_llmperf import ServerSpec

def test_fails():
    spec = ServerSpec(name="m", model="org/m", args=("--api-key", os.environ["CANARY_KEY"]),
                      env={"HF_TOKEN": os.environ["CANARY_TOKEN"]})
    assert spec is None, spec
"""


def test_a_failing_test_shows_no_secret_with_locals_verbose_diffs_or_junit(pytester, monkeypatch):
    monkeypatch.setenv("CANARY_TOKEN", CANARY)
    monkeypatch.setenv("CANARY_KEY", "sk-canary-0123456789abcdef")
    pytester.makepyfile(test_leak=FAILING)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-l", "-vv", "--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    output = result.stdout.str() + result.stderr.str() + (pytester.path / "junit.xml").read_text()
    assert "ServerSpec(name='m'" in output  # the spec is shown...
    assert CANARY not in output and "sk-canary-0123456789abcdef" not in output  # ...its secrets are not


@pytest.mark.parametrize(
    "args, expected",
    [
        (("--max-num-seqs", "8"), "8"),
        (("--enforce-eager", "--max-num-seqs=16"), "16"),
        (("--max-num-seqs", "8", "--max-num-seqs", "4"), "4"),  # the last one wins, as in argparse
        (("--max-num-seqs-extra", "3"), None),
        (("--max-num-seqs",), None),  # no value follows
        ((), None),
    ],
)
def test_arg_reads_a_flags_value_in_either_form(args, expected):
    assert ServerSpec(name="s", model="m", args=args).arg("--max-num-seqs") == expected
