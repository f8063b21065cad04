"""docs/cli.md against the `llmperf` parser: the page's table names every command the
parser has and no other, and every flag the page gives a command is one that command
takes (its sub-commands' included)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pytest_llmperf.commands.cli import build_parser
from pytest_llmperf.options import OPTIONS

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
# Flags the page may name in any section: --help, and the pytest options (--llmperf-doctor).
EVERYWHERE = {"--help", *(flag for option in OPTIONS for flag in option.flags)}


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of `parser` and of its sub-commands, all the way down."""
    flags = {flag for action in parser._actions for flag in action.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                flags |= _flags(child)
    return flags


def _table_commands() -> list[str]:
    """The first word after `llmperf` in each row of the page's command table."""
    table = PAGE[PAGE.index("| command |") : PAGE.index("\n\n", PAGE.index("| command |"))]
    return [m.group(1) for m in re.finditer(r"^\| `llmperf (\w+)", table, re.M)]


def test_the_pages_table_names_every_command_of_the_parser_and_no_other():
    assert sorted(set(_table_commands())) == sorted(_commands(build_parser()))


def test_every_flag_the_page_gives_a_command_is_one_that_command_takes():
    commands = {name: _flags(parser) for name, parser in _commands(build_parser()).items()}
    checked = 0
    # Each command's own section, and each backticked command line anywhere on the page.
    sections = re.split(r"^## `llmperf (\w+)`.*$", PAGE, flags=re.M)
    for name, text in zip(sections[1::2], sections[2::2]):
        unknown = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text)) - commands[name] - EVERYWHERE
        assert not unknown, f"docs/cli.md, section llmperf {name}: no such flag {sorted(unknown)}"
        checked += 1
    for name, rest in re.findall(r"`llmperf (\w+)([^`]*)`", PAGE):
        unknown = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest)) - commands[name] - EVERYWHERE
        assert not unknown, f"docs/cli.md: `llmperf {name}{rest}`: no such flag {sorted(unknown)}"
        checked += 1
    assert checked >= 10
