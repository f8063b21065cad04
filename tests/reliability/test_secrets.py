"""Point 3: no secret reaches the terminal, JUnit XML, the report or a baseline file,
whatever fails: a verdict, a plain assert on a MeasuredRun, a server that never starts."""

import pytest

from tests.plugin_project import run

TOKEN = "hf_canaryTOKENcanaryTOKEN0123"
API_KEY = "sk-canary-KEY-0123456789abcdef"
PASSWORD = "canary-PASSWORD-42"

# The secrets come from the environment, as on a CI box: a literal in the test's own
# source would be shown by the traceback whatever the plugin does.
CONFTEST = """
import os
from pytest_llmperf import ServerSpec

SECRET = ServerSpec(
    name="secret",
    model="org/tiny",
    args=("--api-key", os.environ["CANARY_KEY"], "--max-num-seqs", "8"),
    env={"HF_TOKEN": os.environ["CANARY_TOKEN"], "MY_DB_PASSWORD": os.environ["CANARY_PASSWORD"]},
    sim_args=tuple(os.environ.get("SECRET_SIM_ARGS", "").split()),
)
"""

SUITE = """
import pytest
from conftest import SECRET

W = dict(num_prompts=8, max_tokens=24, warmup=1)

@pytest.mark.llmperf(server=SECRET, **W)
def test_verdict(llmperf):
    llmperf.run(concurrency=2).assert_no_regression("decode_tok_s", tolerances={"decode_tok_s": "1000%"})

@pytest.mark.llmperf(server=SECRET, **W)
def test_plain_assert_on_a_measured_run(llmperf):
    measured = llmperf.run(concurrency=2)
    spec = measured.server
    assert measured is None, (measured, spec)
"""


@pytest.fixture
def secret_project(project, monkeypatch):
    monkeypatch.setenv("CANARY_TOKEN", TOKEN)
    monkeypatch.setenv("CANARY_KEY", API_KEY)
    monkeypatch.setenv("CANARY_PASSWORD", PASSWORD)
    project.makeconftest(CONFTEST)
    project.makepyfile(test_suite=SUITE)
    return project


def everything_written(project, result):
    """The session's output and every file under the project's folder."""
    texts = [result.stdout.str(), result.stderr.str()]
    for path in project.path.rglob("*"):
        if path.is_file() and path.suffix != ".pyc" and path.name != "sharegpt.json":
            texts.append(path.read_text(errors="replace"))
    return "\n".join(texts)


def assert_no_secret(text):
    for secret in (TOKEN, API_KEY, PASSWORD):
        assert secret not in text, f"{secret} leaked"


def test_no_secret_in_output_junit_report_or_baselines_when_runs_pass_and_fail(secret_project):
    verbose = ["-l", "-vv", "--tb=long", "--junitxml=junit.xml", "--llmperf-report", "report.json"]
    recorded = run(secret_project, *verbose, "--update-baselines")
    recorded.assert_outcomes(passed=1, failed=1)
    assert "ServerSpec(name='secret'" in recorded.stdout.str()  # the spec is shown, with -l and -vv ...
    assert (secret_project.path / "baselines" / "sim" / "secret.json").exists()  # ... and recorded
    assert_no_secret(everything_written(secret_project, recorded))

    judged = run(secret_project, *verbose)
    judged.assert_outcomes(passed=1, failed=1)
    assert_no_secret(everything_written(secret_project, judged))


def test_no_secret_when_the_server_never_becomes_ready(secret_project, monkeypatch):
    monkeypatch.setenv("SECRET_SIM_ARGS", "--sim-slow-start-seconds 600")
    result = run(secret_project, "-l", "-vv", "--junitxml=junit.xml", "--llmperf-ready-timeout", "1", "-k", "verdict")
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["*server secret (sim) did not start: server at * not ready after 1 s (--llmperf-ready-timeout): /health*503"]
    )
    assert "readiness.py" not in result.stdout.str()  # the reason, not a traceback through the plugin
    assert_no_secret(everything_written(secret_project, result))


LOGGING = ["--log-level=INFO", "-o", "junit_logging=all", "-o", "log_cli=true", "--log-cli-level=INFO"]


@pytest.mark.parametrize(
    "sim_args, outcome",
    [
        ("", "passes"),
        ("--sim-crash-after-requests 12", "crashes"),
        ("--sim-slow-start-seconds 600", "never starts"),
    ],
)
def test_canary_no_secret_anywhere_with_info_logging_junit_and_the_report(
    secret_project, monkeypatch, sim_args, outcome
):
    monkeypatch.setenv("SECRET_SIM_ARGS", sim_args)
    args = [
        *LOGGING,
        "-l",
        "-vv",
        "--junitxml=junit.xml",
        "--llmperf-report",
        "report.json",
        "--llmperf-ready-timeout",
        "3",
    ]
    result = run(secret_project, *args, "--update-baselines", "-k", "verdict")
    assert "INFO" in result.stdout.str()  # the log reached the terminal ...
    junit = (secret_project.path / "junit.xml").read_text()
    assert "system-err" in junit or "system-out" in junit  # ... and the JUnit file
    if outcome == "passes":
        result.assert_outcomes(passed=1, deselected=1)
    else:
        assert result.ret != pytest.ExitCode.OK
    assert_no_secret(everything_written(secret_project, result))


def test_canary_a_password_in_the_base_url_stops_the_session_and_shows_nowhere(secret_project):
    # The measuring requests would not carry URL credentials, and httpx logs every URL it
    # reads at INFO: such a URL is refused before anything starts, and never repeated.
    url = f"http://llmperf:{PASSWORD}@127.0.0.1:9"
    args = [*LOGGING, "-l", "-vv", "--junitxml=junit.xml", "--llmperf-report", "report.json"]
    result = secret_project.runpytest("-p", "no:cacheprovider", "--llmperf-base-url", url, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--llmperf-base-url: credentials in a server URL are not supported (http://***@127.0.0.1:9)*"]
    )
    assert_no_secret(everything_written(secret_project, result))


def test_a_password_in_the_base_url_of_llmperf_bench_and_doctor_is_refused_without_repeating_it(capsys):
    from pytest_llmperf.commands.cli import main

    for command in (["bench", "--model", "m"], ["doctor"]):
        with pytest.raises(SystemExit) as stopped:
            main([*command, "--base-url", f"http://llmperf:{PASSWORD}@127.0.0.1:9"])
        assert stopped.value.code == 2
        err = capsys.readouterr().err
        assert "credentials in a server URL are not supported (http://***@127.0.0.1:9)" in err
        assert PASSWORD not in err
