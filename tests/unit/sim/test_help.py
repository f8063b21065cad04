"""`python -m pytest_llmperf.sim --help` explains every --sim-* flag the parser accepts."""

from __future__ import annotations

import dataclasses
import re

from pytest_llmperf.sim import SimConfig
from pytest_llmperf.sim.__main__ import main


def accepted_sim_flags() -> list[str]:
    """The --sim-<field> flags from_vllm_argv takes, found by asking it about every field of
    SimConfig: a flag it does not know is refused as unknown, whatever its value."""
    accepted = []
    for field in dataclasses.fields(SimConfig):
        flag = "--sim-" + field.name.replace("_", "-")
        try:
            SimConfig.from_vllm_argv(["m", flag, "1"])
        except Exception as exc:  # noqa: BLE001 - a bad value or a refused combination still means "accepted"
            if "unknown simulator flag" in str(exc):
                continue
        accepted.append(flag)
    return accepted


def test_help_lists_every_sim_flag_with_its_meaning(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    flags = accepted_sim_flags()
    assert len(flags) >= 20 and "--sim-speed" in flags and "--sim-crash-exit" in flags
    for flag in flags:
        line = re.search(rf"^  {re.escape(flag)}(?: [A-Z]+)? +(\S.*)$", out, re.MULTILINE)
        assert line is not None, f"{flag} is accepted but --help does not list it"
        assert len(line.group(1).strip()) > 10, f"{flag} has no meaning in --help"
    listed = re.findall(r"^  (--sim-[a-z-]+)", out, re.MULTILINE)
    assert sorted(listed) == sorted(flags)  # and nothing listed that the parser refuses


def test_help_opens_with_a_usage_line_in_plain_text_and_says_why_the_plugin_runs_the_clock_faster(capsys):
    from pytest_llmperf.options import OPTIONS

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m pytest_llmperf.sim MODEL ")
    assert "`" not in out  # a terminal shows no Markdown
    plugin_speed = next(o.default for o in OPTIONS if o.ini == "llmperf_sim_speed")
    assert SimConfig().speed == 1.0 and "--sim-speed is 1 unless given, real time" in out
    assert f"--llmperf-sim-speed (default {plugin_speed:g})" in " ".join(out.split())
