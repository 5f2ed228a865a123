"""`specviz bench replay`: γ policies replayed on what the drafter would keep, comparisons free
of timing noise; and `specviz bench passes`, what a target pass over k tokens costs.

A lookahead (specviz.bench.sweeps.heads) turns one plain target decode, and the drafter run
along it once, into what a round starting at each position would keep (at T = 0 exactly; at
T > 0 in law, from one uniform draw per position shared by every policy). Any policy that picks
gamma before drafting can then be replayed on it, making the rounds a real run would make, and
priced with pass costs measured once (seconds per draft step and per target pass by width).
What it leaves out: the loop's own overhead and the machine's timing noise and drift, which is
the point; the confidence threshold, which decides while drafting on tokens that may leave the
target's path; and stop tokens (a draft model that would stop after proposing one is replayed
as drafting on). A draft model, n-gram lookup and their hybrid are read off one step per
position of the path; a drafting head (eagle, medusa) off rounds drafted at each start
position, its target passes timed on the forward it verifies through (transformers', or
specviz.fast.lean's with --lean-target, its plain steps priced on the same).

    specviz bench replay --workloads code,json --drafters model,model:trimmed
    specviz bench replay --workloads code,prose --temperature 1 --samples 2 --draws 4
    specviz bench replay --workloads code --drafters eagle,medusa --heads DIR

Its section, printed: per workload and drafter, each fixed γ's and each policy's mean speedup
(min–max) and its ratio to the best fixed γ's mean, and the oracle (the best γ per run).
`specviz bench passes` prints r (a pass of γ + 1 tokens over a 1-token step, what the
Leviathan bound assumes to be 1) on both forwards of the same target (specviz.tune.timing).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specviz.bench.sweep import Context, Outcome
from specviz.bench.sweeps.heads import Lookahead, lookaheads, target_paths
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig
from specviz.core.drafter import Drafter
from specviz.core.events import RoundSummary
from specviz.core.policy import FixedGamma, GammaPolicy
from specviz.drafters.hybrid import LookupThenModelDrafter
from specviz.drafters.names import (
    CROSS_TOKENIZER_DRAFTERS,
    DRAFTER_NAMES,
    HEAD_DRAFTERS,
    MEMORY_DRAFTERS,
    TREE_DRAFTERS,
)
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.fast.lean import lean_target_cache
from specviz.gamma.policies import CostModel, make_policy
from specviz.heads.build import head_forward
from specviz.heads.lookup import check_heads
from specviz.models.loading import load_pair
from specviz.tune.timing import PassCosts, measure_costs
from specviz.workloads import Request, load_requests

GREEDY = SamplingConfig(temperature=0.0)


@dataclass(frozen=True, kw_only=True)
class Replayed:
    """One request decoded by one policy: its rounds and what they cost."""

    rounds: tuple[RoundSummary, ...]
    seconds: float  # speculative decode phase (prompt left out)
    plain_seconds: float  # the same tokens by plain decoding, one 1-token pass each

    @property
    def speedup(self) -> float:
        """plain / speculative seconds."""
        return self.plain_seconds / self.seconds


def replay(look: Lookahead, policy: GammaPolicy, costs: PassCosts) -> Replayed:
    """Decode len(look.kept) tokens with policy's gammas, making the real loop's rounds on look.

    The first round's pass also scores the prompt (prompt_tokens > 0, so a CostModel does not
    take it as a cost sample); its price, like every pass's, leaves the prompt out.
    """
    rounds: list[RoundSummary] = []
    position, n = 0, len(look.kept)
    while position < n:
        gamma = min(policy.next_gamma(), n - position - 1)  # the loop's cap at max_new_tokens
        proposed = gamma if look.offered is None else min(gamma, look.offered[position])
        kept = min(look.kept[position], proposed)
        calls = proposed if look.model_drafts(position) else 0
        summary = RoundSummary(
            round=len(rounds),
            gamma=gamma,
            proposed=proposed,
            accepted=kept,
            emitted=kept + 1,
            draft_seconds=calls * costs.draft_step,
            target_seconds=costs.target(proposed + 1),
            draft_forward_calls=calls,
            prompt_tokens=0 if rounds else 1,
        )
        policy.update(summary)
        rounds.append(summary)
        position += kept + 1
    seconds = sum(r.draft_seconds + r.target_seconds for r in rounds)
    return Replayed(rounds=tuple(rounds), seconds=seconds, plain_seconds=n * costs.target(1))


def compare(
    looks: Sequence[Lookahead],
    costs: PassCosts,
    gammas: Sequence[int],
    policies: Sequence[str],
    start: int,
) -> dict[str, list[float]]:
    """Per-request speedups of each fixed gamma and each policy (costs shared per policy)."""
    out = {f"γ={g}": [replay(look, FixedGamma(g), costs).speedup for look in looks] for g in gammas}
    for name in policies:
        shared = CostModel()  # as in the bench: one setting's requests share measured costs
        out[name] = [
            replay(look, make_policy(name, start, shared), costs).speedup for look in looks
        ]
    return out


def report(label: str, speedups: dict[str, list[float]], gammas: Sequence[int]) -> list[str]:
    """Markdown rows: mean speedup (min–max) and ratio to the best fixed gamma's mean."""
    fixed = {f"γ={g}": statistics.mean(speedups[f"γ={g}"]) for g in gammas}
    best_name = max(fixed, key=fixed.__getitem__)
    oracle = [max(col) for col in zip(*(speedups[f"γ={g}"] for g in gammas), strict=True)]
    rows = []
    for name, values in [*speedups.items(), ("best fixed γ per run (oracle)", oracle)]:
        mean = statistics.mean(values)
        rows.append(
            f"| {label} | {name} | {mean:.3f} ({min(values):.2f}–{max(values):.2f}) | "
            f"{mean / fixed[best_name]:.3f} |"
        )
    return rows


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the replay's flags (on a parser of its own)."""
    parser.add_argument("--workloads", default="code,json")  # repeat: with --drafters ngram
    parser.add_argument("--drafters", default="model,model:trimmed")
    parser.add_argument("--gammas", default="1,2,3,4,5,6")
    parser.add_argument("--policies", default="heuristic,theory")
    parser.add_argument("--start-gamma", type=int, default=4)
    parser.add_argument("--limit", type=int, default=0, help="requests per workload (0: all)")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--samples", type=int, default=2, help="target decodes a request (T > 0)")
    parser.add_argument("--draws", type=int, default=4, help="verdict draws a decode (T > 0)")
    parser.add_argument(
        "--lean-target",
        action="store_true",
        help="price the target's passes on specviz.fast.lean's (the heads' forward too)",
    )
    parser.add_argument(
        "--model-gamma", type=int, help="cap on the draft model's tokens a round (ngram+...)"
    )
    parser.add_argument(
        "--heads",
        metavar="DIR",
        help="eagle, medusa: the folder of their weights, trained for the bundled target "
        "(default: the shipped ones)",
    )


@dataclass(frozen=True, kw_only=True)
class ReplayPlan:
    """The flags checked: each workload's requests, the drafters, fixed γs, policies, sampling."""

    workloads: tuple[tuple[str, tuple[Request, ...]], ...]
    drafters: tuple[str, ...]
    gammas: tuple[int, ...]
    policies: tuple[str, ...]
    sampling: SamplingConfig


def replay_plan(args: argparse.Namespace) -> ReplayPlan:
    """ValueError, saying what to change, for every bad value, before any model loads."""
    try:
        gammas = tuple(int(g) for g in args.gammas.split(","))
    except ValueError:
        raise ValueError(f"--gammas: comma-separated integers >= 1 (got {args.gammas!r})") from None
    try:
        work = [
            (w, tuple(load_requests(w)[: args.limit or None])) for w in args.workloads.split(",")
        ]
    except ValueError as error:
        raise ValueError(f"--workloads: {error}") from None
    try:
        sampling = SamplingConfig(temperature=args.temperature)
    except ValueError as error:
        raise ValueError(f"--temperature: {error}") from None
    drafters, policies = args.drafters.split(","), args.policies.split(",")
    for wrong, message in (
        (
            min(gammas) < 1 or args.start_gamma < 1 or args.limit < 0,
            "--gammas and --start-gamma must be >= 1, --limit >= 0",
        ),
        (args.samples < 1 or args.draws < 1, "--samples and --draws must be >= 1"),
        (
            args.model_gamma is not None and args.model_gamma < 1,
            f"--model-gamma must be >= 1 (got {args.model_gamma})",
        ),
        (
            bool(bad := sorted(set(drafters) - set(DRAFTERS))),
            f"--drafters: replay supports {', '.join(DRAFTERS)} (got {bad})",
        ),
        (
            bool(odd := sorted(set(policies) - {"heuristic", "theory"})),
            f"--policies: heuristic and/or theory (fixed gammas: --gammas; got {odd})",
        ),
    ):
        if wrong:
            raise ValueError(message)
    check_heads(drafters, args.heads, flag="--drafters")
    return ReplayPlan(
        workloads=tuple(work),
        drafters=tuple(drafters),
        gammas=gammas,
        policies=tuple(policies),
        sampling=sampling,
    )


def replay_rows(plan: ReplayPlan, args: argparse.Namespace, pair: Any) -> list[dict[str, Any]]:
    """Per workload and drafter: its lookaheads, its pass costs, and each γ's and policy's
    speedups (compare), as rows (report)."""
    forward = lean_target_cache if args.lean_target else KVCache
    rows = []
    for workload, requests in plan.workloads:
        paths = target_paths(pair, requests, plan.sampling, args.samples)
        for name in plan.drafters:
            make = drafter_factory(
                name,
                pair,
                plan.sampling,
                args.model_gamma,
                heads=args.heads,
                lean_target=args.lean_target,
            )
            looks = [
                look
                for seed, path in enumerate(paths)
                for look in lookaheads(make(), path, args.draws, seed, pair.target)
            ]
            timed = make()  # a hybrid's draft steps are its model's
            timed = timed.model if isinstance(timed, LookupThenModelDrafter) else timed
            costs = measure_costs(
                pair.target,
                timed,
                list(paths[0].prompt_ids),
                widths=max(plan.gammas) + 2,
                make_cache=forward,
            )
            c = costs.draft_step / costs.target(1) if name != "ngram" else 0.0
            capped = name.startswith("ngram+") and args.model_gamma is not None
            kind = f"{name} (model ≤ {args.model_gamma})" if capped else name
            label = f"{workload}, {kind}, T = {args.temperature:g} (c = {c:.3f}, {len(looks)} runs)"
            speedups = compare(looks, costs, plan.gammas, plan.policies, args.start_gamma)
            rows += [{"row": row} for row in report(label, speedups, plan.gammas)]
    return rows


@dataclass(frozen=True, kw_only=True)
class Replay:
    """The γ policies replayed on the bundled pair: flags of its own, its section printed."""

    name: str = "replay"
    key: str | None = None
    per_draft: bool = False
    own_flags: bool = True

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_replay_arguments(parser)

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        return args

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> ReplayPlan:
        return replay_plan(args)

    def run(self, plan: ReplayPlan, context: Context) -> Outcome:
        pair = load_pair()  # the bundled pair, packed as in the bench
        rows = replay_rows(plan, context.args, pair)
        return Outcome(section={"plan": {"temperature": plan.sampling.temperature}, "rows": rows})

    def render(self, section: dict[str, Any], price_per_hour: float) -> str:
        head = ["| workload, drafter | setting | mean speedup (min–max) | / best fixed γ |"]
        return "\n".join([*head, "|---|---|---|---|", *(r["row"] for r in section["rows"])])


# the chain drafters but the shared early exit, whose draft runs inside the target's forward (a
# tree's rounds are not a lookahead's prefixes), the suffix drafters, which draft from a memory
# of earlier requests that one replayed path does not hold, and the cross-tokenizer drafters,
# which the replay does not hand tokenizers; the heads read the target's features
UNREPLAYED = {"early-exit:shared", *TREE_DRAFTERS, *MEMORY_DRAFTERS, *CROSS_TOKENIZER_DRAFTERS}
DRAFTERS = tuple(n for n in DRAFTER_NAMES if n not in UNREPLAYED)


def drafter_factory(
    name: str,
    pair: Any,
    sampling: SamplingConfig,
    model_gamma: int | None = None,
    *,
    heads: str | None = None,
    lean_target: bool = False,
) -> Callable[[], Drafter]:
    """Fresh drafters of one registered chain kind, as the bench builds them (model_gamma: the
    draft model's share of a round ahead of lookup; heads: the drafting heads' weights folder,
    their target forward lean with lean_target); ValueError for a tree drafter."""
    if name not in DRAFTERS:
        raise ValueError(f"replay supports the chain drafters {', '.join(DRAFTERS)} (got {name!r})")
    head = name in HEAD_DRAFTERS
    options = DrafterOptions(
        model_gamma=model_gamma if name.startswith("ngram+") else None,
        make_cache=head_forward(lean_target) if head else None,
        heads=heads if head else None,
    )

    def make() -> Drafter:
        drafter = build_drafter(
            name, target=pair.target, draft=pair.draft, sampling=sampling, options=options
        )
        assert isinstance(drafter, Drafter)  # DRAFTERS holds chain drafters only
        return drafter

    return make
