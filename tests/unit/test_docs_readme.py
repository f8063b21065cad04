"""The README against the code: its two commands are the ones CI runs, every option its
commands use exists, and its example project (a conftest.py and a test file) records and
then compares on the simulator, under pytester, with the README's own commands.
"""

import re
import shlex
from pathlib import Path

import pytest

import tests.plugin_project  # noqa: F401  (imports every plugin module before any in-process run)
from pytest_llmperf.options import OPTIONS, PROFILES

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()

MAIN_COMMAND = "pytest tests/perf --llmperf-sim --llmperf-profile smoke"
TEST_COMMAND = "pytest -n auto"
FLAGS = {flag for opt in OPTIONS for flag in opt.flags}


def _section(title: str) -> str:
    start = README.index(f"\n## {title}")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


def _python_block(first_line: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    found = [b for b in blocks if b.startswith(first_line)]
    assert len(found) == 1, f"README has {len(found)} python blocks starting {first_line!r}"
    return found[0]


def _first_run_commands() -> list[list[str]]:
    """The `pytest ...` lines of the first-run section's shell block, comments dropped."""
    blocks = re.findall(r"```bash\n(.*?)```", _section("Install and a first run"), re.S)
    lines = [line for block in blocks for line in block.splitlines() if line.startswith("pytest ")]
    return [shlex.split(line, comments=True) for line in lines]


def _pytest_commands() -> list[list[str]]:
    """Every `pytest ...` command the README shows: indented, fenced (a backslash
    continuation joined) or in backticks."""
    joined = README.replace("\\\n", " ")
    lines = re.findall(r"^(?: {4}|)(pytest(?: [^`\n]*)?)$", joined, re.M)
    lines += re.findall(r"`(pytest [^`]+)`", joined)
    return [shlex.split(line, comments=True) for line in lines]


def test_the_readme_keeps_the_repositorys_two_commands_verbatim():
    assert f"\n    {MAIN_COMMAND}\n" in README, "the README's main command moved or changed"
    assert f"\n    {TEST_COMMAND}\n" in README, "the README's test command moved or changed"


def test_ci_runs_the_readmes_two_commands():
    ci_lines = [line.strip() for line in CI.splitlines()]
    assert MAIN_COMMAND in ci_lines, ".ci/run no longer runs the README's main command"
    assert TEST_COMMAND in ci_lines, ".ci/run no longer runs the README's test command"
    assert ci_lines.index(TEST_COMMAND) < ci_lines.index(MAIN_COMMAND)


def test_the_main_commands_path_and_profile_exist():
    args = MAIN_COMMAND.split()
    assert (ROOT / args[1]).is_dir()
    assert args[args.index("--llmperf-profile") + 1] in PROFILES


def test_every_option_the_readmes_commands_use_exists():
    commands = _pytest_commands()
    # the first run's three, the targets table's, the nightly recipe's, the main and test commands
    assert len(commands) >= 12, commands
    for args in commands:
        for arg in args:
            flag = arg.split("=")[0]
            if flag.startswith("--llmperf-") or flag == "--update-baselines":
                assert flag in FLAGS, f"README: {' '.join(args)}: no such option {flag}"
        if "--llmperf-profile" in args:
            assert args[args.index("--llmperf-profile") + 1] in PROFILES


def test_the_llmperf_commands_in_the_readme_parse():
    from pytest_llmperf.commands.cli import build_parser

    lines = re.findall(r"`(llmperf (?:doctor|history|compare|bench|show)[^`]*)`", README)
    lines += re.findall(r"^(llmperf [^\n]*)$", README, re.M)  # in a fenced block
    assert any("--model" in line for line in lines)  # the nightly recipe's doctor
    for line in lines:
        args = shlex.split(line, comments=True)[1:]
        build_parser().parse_args(args)  # SystemExit (a usage error) fails the test


def _write_example(pytester, monkeypatch, tmp_path_factory):
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    for first_line in ("# conftest.py", "# tests/test_decode.py"):
        block = _python_block(first_line)
        path = pytester.path / first_line[2:].split(":")[0].strip()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block)
    return pytester


# The README's commands as written, with pytest-benchmark, the cache provider and
# hypothesis left out of the in-process run (tests/plugin_project.py). The simulator's
# clock stays at its default x10, as a reader runs it: a session takes about 40 s, and at
# x20 the Qwen3.6 profile's one-stream steps (under 4 ms) ran late on a loaded 2-core
# machine, so the run was invalid.
EXTRA = ("-p", "no:benchmark", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def _run(pytester, command):
    assert command[0] == "pytest"
    return pytester.runpytest(*command[1:], *EXTRA)


def test_the_readmes_example_records_then_compares_on_the_simulator(pytester, monkeypatch, tmp_path_factory):
    project = _write_example(pytester, monkeypatch, tmp_path_factory)
    record, compare, _regress = _first_run_commands()
    assert "--update-baselines" in record and "--update-baselines" not in compare

    result = _run(project, record)
    result.assert_outcomes(passed=6)
    assert sorted(p.name for p in (project.path / "baselines" / "sim").glob("*.json")) == [
        "qwen3.6-35b-a3b-mtp.json",
        "qwen3.6-35b-a3b.json",
    ]
    result.stdout.fnmatch_lines(["*qwen3.6-35b-a3b-mtp @ 8: recorded steady_decode_tok_s, acceptance_rate*"])

    result = _run(project, compare)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*steady_decode_tok_s*pass", "*mtp_speedup*pass"])


@pytest.mark.slow
def test_the_readmes_regression_command_fails_as_its_table_shows(pytester, monkeypatch, tmp_path_factory):
    project = _write_example(pytester, monkeypatch, tmp_path_factory)
    record, _compare, regress = _first_run_commands()
    _run(project, record).assert_outcomes(passed=6)

    result = _run(project, regress)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 2, outcomes  # the MTP decode tests at 1 and 8
    result.stdout.fnmatch_lines(
        [
            "*qwen3.6-35b-a3b-mtp @ concurrency 8 vs baselines/sim/qwen3.6-35b-a3b-mtp.json*",
            "steady_decode_tok_s *!! REGRESSED",
            "acceptance_rate *!! REGRESSED",
            "acceptance_length *!! REGRESSED",
            "*nothing but the simulator args: (none) -> --sim-acceptance-scale 0.85",
        ]
    )
    assert "test_base_decode" not in "\n".join(line for line in result.outlines if line.startswith("FAILED"))
