"""The protocol every `specviz bench` study follows: its flags, a plan, a run, a saved section
and the Markdown that section renders to; and what the studies share.

A study is chosen by its subcommand (`specviz bench trees ...`; none: speedup), which parses the
flags every local study reads and the study's own. Its plan checks the flags before any model
is loaded; its run measures; what it saves is a section of the result JSON under its key
(specviz.results.schema); its render turns that section, read back, into Markdown. A study with
flags of its own (replay) parses them apart from `specviz bench`'s, and prints its section.

Shared here: the flags every local study reads and their check (check), the requests by
temperature, a rotation of the settings that run one after another, and pass timings taken
interleaved (a *pass* is one forward of a model over some tokens, timed alone).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, TypeVar

from specviz.drafters.names import HEAD_DRAFTERS, HYBRID_DRAFTERS, TREE_DRAFTERS, drafter_spec
from specviz.drafters.options import DrafterOptions
from specviz.heads.lookup import check_heads
from specviz.models.loading import check_device
from specviz.results.records import Record
from specviz.results.setting import POLICIES, TREE_RULES
from specviz.workloads import Request

Progress = Callable[[int, int, str], None]  # (done, total, label)
T = TypeVar("T")


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
        """Where its section is saved in a result (None: it saves records only, or prints its
        section: a study with own_flags)."""

    @property
    def per_draft(self) -> bool:
        """True when it runs once per --draft on a loaded pair (Context.pair)."""

    @property
    def own_flags(self) -> bool:
        """True when its subcommand parses flags of its own, not `specviz bench`'s."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Register its own flags (on its subcommand's parser, or on its own)."""

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        """The flags with its own defaults where the shared ones were not given (the drafters
        and workloads a study runs when --drafters or --workloads is not given)."""

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> Any:
        """What it will run; ValueError, saying what to change, for what it cannot run. No
        model is loaded."""

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


def ints(text: str) -> list[int]:
    """'1,2,4' → [1, 2, 4]."""
    return [int(x) for x in text.split(",") if x.strip()]


def floats(text: str) -> list[float]:
    """'0,1' → [0.0, 1.0]."""
    return [float(x) for x in text.split(",") if x.strip()]


def rotated(items: Sequence[T], k: int) -> list[T]:
    """items starting at index k (mod its length): the settings that run one after another
    start at a different one each repetition, so no setting always runs first."""
    k %= max(len(items), 1)
    return [*items[k:], *items[:k]]


def plain(plan: Any, **extra: Any) -> dict[str, Any]:
    """A plan (a frozen dataclass) as JSON data, its tuples as lists, with extra keys."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(plan).items()} | extra


def unplain(cls: Callable[..., T], data: dict[str, Any], *extra: str) -> T:
    """Inverse of plain: the plan from its JSON data (lists as tuples), extra keys left out."""
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return cls(**{k: v for k, v in fields.items() if k not in extra})


def refuse(why: str, clashes: Iterable[tuple[str, bool]]) -> None:
    """ValueError '{why}: drop FLAG' for the first of the (flag, given) clashes given."""
    given = [flag for flag, clash in clashes if clash]
    if given:
        raise ValueError(f"{why}: drop {given[0]}")


def drafter_names(args: argparse.Namespace) -> list[str]:
    """--drafters as a list (default: model, or tree-model for `specviz bench trees`)."""
    given = args.drafters or ("tree-model" if args.study == "trees" else "model")
    return [d.strip() for d in given.split(",") if d.strip()]


def check(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """Check the flags every local study reads, before any model work; the drafter and policy
    names. ValueError, saying what to change, for a value the run cannot take."""
    drafters = drafter_names(args)
    if not drafters:
        raise ValueError("--drafters must list some drafters (`specviz drafters` lists them)")
    for name in drafters:
        drafter_spec(name)  # a one-line ValueError naming the close ones
    for flag, values in (("--gammas", args.gammas), ("--exit-layer", args.exit_layer)):
        if not values or min(values) < 1:
            raise ValueError(f"{flag} must be integers >= 1 (got {values})")
    for flag, value in (("--reps", args.reps), ("--start-gamma", args.start_gamma)):
        if value < 1:
            raise ValueError(f"{flag} must be >= 1 (got {value})")
    if args.temperatures is not None and min(args.temperatures, default=0) < 0:
        raise ValueError(f"--temperatures must be >= 0 (got {args.temperatures})")
    check_device(args.device)
    if not args.price_per_hour > 0:
        raise ValueError(f"--price-per-hour must be > 0 USD (got {args.price_per_hour})")
    if not args.model_gamma or min((k for k in args.model_gamma if k is not None), default=1) < 1:
        raise ValueError(f"--model-gamma must be integers >= 1 or 'none' (got {args.model_gamma})")
    if args.model_gamma != [None] and not any(d in HYBRID_DRAFTERS for d in drafters):
        raise ValueError(
            "--model-gamma caps the draft model after lookup: add one of "
            f"{', '.join(HYBRID_DRAFTERS)} to --drafters, or drop --model-gamma"
        )
    twice = sorted({d for d in args.draft or [] if args.draft.count(d) > 1})
    if twice:
        raise ValueError(f"--draft names {', '.join(twice)} more than once: give each draft once")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies or any(p not in POLICIES for p in policies):
        raise ValueError(f"--policies must list some of {POLICIES} (got {args.policies!r})")
    check_tree_flags(args, drafters, policies)
    check_heads(drafters, args.heads, flag="--drafters")
    return drafters, policies


def check_tree_flags(args: argparse.Namespace, drafters: list[str], policies: list[str]) -> None:
    """ValueError, saying what to change, for tree options the run cannot honour."""
    for flag, value in (
        ("--tree-nodes", args.tree_nodes),
        ("--tree-depth", args.tree_depth),
        ("--tree-width", args.tree_width),
    ):
        if value < 1:
            raise ValueError(f"{flag} must be an integer >= 1 (got {value})")
    trees = [d for d in drafters if d in TREE_DRAFTERS]
    masked = [d for d in trees if d not in HEAD_DRAFTERS]  # the head trees verify on their own
    if masked and args.lean_target:
        raise ValueError(
            f"{', '.join(masked)} verify their trees through transformers' forward with a 4D "
            "attention mask, which --lean-target's forward does not take: drop --lean-target, "
            "or bench the tree drafters in a run of their own"
        )
    if trees and "fixed" not in policies and args.study != "trees":
        raise ValueError(
            f"{', '.join(trees)} draft to a fixed depth (--tree-depth): add fixed to --policies"
        )


def caps(text: str) -> list[int | None]:
    """'none,2' → [None, 2]: draft-model caps of the hybrid drafters (none: no cap)."""
    return [None if x.strip() == "none" else int(x) for x in text.split(",") if x.strip()]


def add_policy_arguments(b: argparse.ArgumentParser) -> None:
    """Register the drafting settings every local study reads beside the tree options: the γ
    policies (--policies, --start-gamma), the hybrids' draft-model cap (--model-gamma) and the
    early-exit drafter's layers (--exit-layer)."""
    b.add_argument(
        "--exit-layer",
        type=ints,
        default="8",
        help="layers the early-exit drafter uses (comma list to compare draft sizes)",
    )
    b.add_argument(
        "--model-gamma",
        type=caps,
        default="none",
        help="hybrid drafters (ngram+...): at most this many draft-model tokens a round "
        "while lookup copies run to gamma; comma list to compare, 'none' for no cap (default)",
    )
    b.add_argument(
        "--policies",
        default="fixed",
        help=f"comma list of gamma policies {POLICIES}; fixed sweeps --gammas",
    )
    b.add_argument(
        "--start-gamma", type=int, default=4, help="where the dynamic gamma policies start"
    )


def add_tree_arguments(b: argparse.ArgumentParser) -> None:
    """Register the tree options every local study reads (--tree-nodes, --tree-depth,
    --tree-width, --tree-rule)."""
    defaults = DrafterOptions()
    b.add_argument(
        "--tree-nodes",
        type=int,
        default=defaults.tree_nodes,
        help="tree drafters: at most this many nodes a round",
    )
    b.add_argument(
        "--tree-depth",
        type=int,
        default=defaults.tree_depth,
        help="tree drafters: levels a round drafts (their gamma; --gammas is the chains'), and "
        "the depth D of `specviz bench trees`",
    )
    b.add_argument(
        "--tree-width",
        type=int,
        default=defaults.tree_width,
        help="tree drafters: at most this many children a node",
    )
    b.add_argument(
        "--tree-rule",
        default="exact",
        choices=sorted(TREE_RULES),
        help="how tree drafters' trees are verified: exact (the output follows the target's "
        "law) or typical (Medusa's typical acceptance: LOSSY, its output does not follow the "
        "target's law; every table row and record that ran it says so)",
    )
