"""The protocol every `specviz bench` study follows: its flags, a plan, a run, a saved section
and the Markdown that section renders to.

A study is chosen by its subcommand (`specviz bench trees ...`) or by the flag that asked for it
before the subcommands (`--tree-sweep`, kept as an alias). Its plan checks the flags before any
model is loaded; its run measures; what it saves is a section of the result JSON under its key
(specviz.results.schema); its render turns that section, read back, into Markdown.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from specviz.results.records import Record
from specviz.workloads import Request

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, kw_only=True)
class Context:
    """What a study's run is given.

    args: the parsed flags; requests: the workloads' requests; progress: the CLI's progress
    callback; pair: the loaded target, draft and tokenizer for the studies run once per --draft
    (None for those that load their own models or none); draft: that --draft's spec.
    """

    args: argparse.Namespace
    requests: Sequence[Request]
    progress: Progress
    pair: Any = None
    draft: str = ""


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What a run measured: the speedup records (saved as the result's records and summary),
    the study's own section (None for a study that has none), and how the prompts reached the
    models where the study loaded them itself (chat or raw; empty otherwise)."""

    records: tuple[Record, ...] = ()
    section: dict[str, Any] | None = None
    prompt_format: str = ""


class Sweep(Protocol):
    """One benchmark study: plan → run → section → render."""

    @property
    def name(self) -> str:
        """Its `specviz bench` subcommand."""

    @property
    def key(self) -> str | None:
        """Where its section is saved in a result (None: it saves records only)."""

    @property
    def per_draft(self) -> bool:
        """True when it runs once per --draft on a loaded pair (Context.pair)."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Register its own flags on `specviz bench`'s parser."""

    def asked(self, args: argparse.Namespace) -> bool:
        """True when the flags ask for it without its subcommand (its alias flag is given)."""

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        """The flags as its subcommand means them (its alias flag set where it is not)."""

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> Any:
        """What it will run (None where the flags do not ask for it); ValueError, saying what
        to change, for what it cannot run. No model is loaded."""

    def run(self, plan: Any, context: Context) -> Outcome:
        """Measure the plan."""

    def render(self, section: dict[str, Any], price_per_hour: float) -> str:
        """Its saved section as Markdown."""


def with_flags(args: argparse.Namespace, **flags: Any) -> argparse.Namespace:
    """A copy of args with these flags replaced."""
    return argparse.Namespace(**(vars(args) | flags))


def by_temperature(
    args: argparse.Namespace, requests: Sequence[Request]
) -> list[tuple[float, list[Request]]]:
    """Each temperature of --temperatures with every request (without it: each prompt's own
    temperature with the requests that carry it), in order."""
    if args.temperatures is not None:
        return [(t, list(requests)) for t in args.temperatures]
    temps = sorted({r.temperature for r in requests})
    return [(t, [r for r in requests if r.temperature == t]) for t in temps]
