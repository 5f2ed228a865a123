"""Every command of both command lines (specviz and python -m specviz.train) prints its help:
argparse formats a help string with %, so a bare % in one fails only when --help is asked."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from specviz.cli import build_parser as cli_parser
from specviz.train.__main__ import build_parser as train_parser


def _commands(
    parser: argparse.ArgumentParser, path: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(its name, parser) for parser and each of its subcommands, at every level."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, f"{path} {name}")


COMMANDS = [*_commands(cli_parser(), "specviz"), *_commands(train_parser(), "specviz.train")]


def test_both_command_lines_have_subcommands() -> None:
    names = [name for name, _ in COMMANDS]
    assert "specviz generate" in names and "specviz.train data regen" in names
    assert len(names) > 10


@pytest.mark.parametrize(("name", "parser"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_help_renders(name: str, parser: argparse.ArgumentParser) -> None:
    text = parser.format_help()
    assert text.startswith("usage:"), name
