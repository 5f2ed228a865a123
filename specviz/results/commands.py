"""Bench commands as results written before the studies were subcommands spell them, and their
spelling now.

A study was once asked for by a flag of `specviz bench` (`--tree-sweep N,...`, `--batch-sizes
B,...`, `--levers [LEVER,...]`, `--cross [DRAFTER,...]`, `--endpoint URL`); it is now named by
its subcommand (`specviz bench trees --nodes N,...`, `specviz bench batch --batch-sizes B,...`,
`specviz bench levers`, `specviz bench cross --drafters DRAFTER,...`, `specviz bench endpoint
--endpoint URL`). Before the batch sweep, `--batch-sizes` was the plain decode step timings'
batch sizes, `--step-batch-sizes` now. Reading a result respells the commands it saved here,
and only here; a command already spelled the new way is left as it is.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

STUDIES = ("speedup", "trees", "batch", "levers", "memory", "cross", "endpoint", "heads")
# the flags that asked for a study: (its study, the option its value is now, or "" for none)
ASKED_BY: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "--tree-sweep": ("trees", "--nodes"),
        "--cross": ("cross", "--drafters"),
        "--levers": ("levers", "--levers"),
        "--batch-sizes": ("batch", "--batch-sizes"),
        "--endpoint": ("endpoint", "--endpoint"),
        "--baseline-endpoint": ("endpoint", "--baseline-endpoint"),
        "--baseline-result": ("endpoint", "--baseline-result"),
    }
)
STEP_TIMINGS: Mapping[str, tuple[str, str]] = MappingProxyType(
    dict(ASKED_BY) | {"--batch-sizes": ("", "--step-batch-sizes")}  # asked for no study
)
OPTIONAL_VALUE = frozenset({"--tree-sweep", "--cross", "--levers"})  # given alone: the default


def respelled(command: str, *, batch_sweep: bool = True) -> str:
    """command with the flags that asked for a study replaced by its subcommand (the same
    string where it has none); batch_sweep: False for a result written before the batch sweep,
    whose --batch-sizes timed the plain decode step."""
    try:
        words = shlex.split(command)
    except ValueError:  # version 1 joined argv unquoted
        words = command.split()
    if "bench" not in words:
        return command
    at = words.index("bench") + 1
    asked_by = ASKED_BY if batch_sweep else STEP_TIMINGS
    rest, studies = _respelled_flags(words[at:], asked_by)
    named = rest[:1] if rest[:1] and rest[0] in STUDIES else []
    study = ["endpoint" if "endpoint" in studies else studies[0]] if studies else []
    now = [*words[:at], *(named or study), *rest[len(named) :]]
    return command if now == words else shlex.join(now)


def _respelled_flags(
    words: list[str], asked_by: Mapping[str, tuple[str, str]]
) -> tuple[list[str], list[str]]:
    """The words with each study-asking flag respelled, and the studies they asked for."""
    out: list[str] = []
    studies: list[str] = []
    i = 0
    while i < len(words):
        flag, _, joined = words[i].partition("=")
        if flag not in asked_by:
            out.append(words[i])
            i += 1
            continue
        study, option = asked_by[flag]
        studies += [study] if study else []
        value, i = _value(words, i, joined, flag)
        out += [option, value] if value else []
    return out, studies


def _value(words: list[str], i: int, joined: str, flag: str) -> tuple[str, int]:
    """The value of the flag at words[i] ('' where an optional one has none), and the index
    after it."""
    if joined or "=" in words[i]:
        return joined, i + 1
    following = words[i + 1] if i + 1 < len(words) else ""
    takes = flag not in OPTIONAL_VALUE or (following and not following.startswith("-"))
    return (following, i + 2) if takes else ("", i + 1)


def respelled_commands(data: Any, *, batch_sweep: bool = True) -> Any:
    """data (a result's JSON) with every string under a "command" key respelled, at any depth
    (batch_sweep: as respelled's)."""
    if isinstance(data, dict):
        return {
            k: respelled(v, batch_sweep=batch_sweep)
            if k == "command" and isinstance(v, str)
            else respelled_commands(v, batch_sweep=batch_sweep)
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [respelled_commands(v, batch_sweep=batch_sweep) for v in data]
    return data
