"""`specviz bench trees`: the chain and trees of N nodes at one depth D,
each against plain decoding (the tree options every study reads: specviz.bench.sweep).

Every setting makes the same draft calls a round: the chain (N = 1) is the chain drafter at
gamma = D (CHAIN_OF: the draft model for tree-model and tree-model:sampled, n-gram lookup for
tree-ngram, the head's chain for the head trees), each tree (N > 1) grows D levels of at most N
nodes, and every draft model runs through the same forward, so a round's draft work differs
only by the tree. The target runs on transformers' forward (the head trees' own forward of it
too). Per request and repetition, one plain decode and, where transformers has the chain's
counterpart, one assisted generation at gamma = D are shared by every setting, whose runs
follow in an order that rotates each repetition. r(N): a target pass over the fresh token and N
tree nodes (the chain: its D drafts, causal) against a plain 1-token step (specviz.tune.timing).

Each row (workload, T, tree drafter, N): tokens a target pass emits (the mean a round), r(N),
the speedup over plain decoding paired run by run, over the chain in the same repetitions (vs
chain) and the same comparison priced from its parts (tokens a pass over draft plus pass cost,
in plain steps: free of timing noise), and over transformers' assisted generation of the chain.
A tree "pays" where it is faster than the chain. Every number is recomputed from the records
and timings a result saves (resweep).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from specviz.api import autoregressive_generate
from specviz.bench.runner import has_hf_counterpart, hf_generate, record, speculative_run
from specviz.bench.sweep import (
    Context,
    Outcome,
    by_temperature,
    plain,
    rotated,
    unplain,
)
from specviz.console import say
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig
from specviz.drafters.names import CHAIN_OF, MODEL_DRAFTERS, TREE_DRAFTERS
from specviz.gamma.policies import CostModel
from specviz.models.chat import prompt_ids as chat_prompt_ids
from specviz.results.records import Record, RequestMetrics, spread
from specviz.results.setting import TREE_RULES, BenchSetting, tree_label
from specviz.results.tree_tables import sweep_table, verdicts
from specviz.tree.proposal import top_k_capacity
from specviz.tune.timing import tree_pass_timings
from specviz.workloads import Request

DEFAULT_NODES = (1, 4, 8, 16, 32)  # the node budgets N compared when --nodes is not given
NODES_HINT = "e.g. 1,4,8,16,32: 1 (the chain) first, then tree node budgets, increasing"
PASS_REPEATS = 15  # timed passes of each tree shape, after a warm-up (specviz.tune.timing)
Pair = tuple[str, int]  # (request id, repetition)
Runs = dict[Pair, RequestMetrics]


def parse_nodes(text: str) -> tuple[int, ...]:
    """'1,4,8' → (1, 4, 8); ValueError, saying what to give, for anything else."""
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--nodes takes node budgets ({NODES_HINT}; got {text!r})") from None


@dataclass(frozen=True, kw_only=True)
class SweepPlan:
    """What a sweep runs: its tree drafters, node budgets (1: the chain), depth, width, rule."""

    drafters: tuple[str, ...]
    nodes: tuple[int, ...]
    depth: int
    width: int
    rule: str = "exact"

    def __post_init__(self) -> None:
        """ValueError, saying what to change, unless the sweep can run as planned."""
        drafters, nodes, depth, width, rule = (
            self.drafters,
            self.nodes,
            self.depth,
            self.width,
            self.rule,
        )
        if not drafters or any(d not in TREE_DRAFTERS for d in drafters):
            raise ValueError(
                "specviz bench trees compares tree drafters with their chain: --drafters must list "
                "some "
                f"of {', '.join(TREE_DRAFTERS)} (got {', '.join(drafters) or 'none'})"
            )
        if len(set(drafters)) != len(drafters):
            raise ValueError(f"--drafters names a drafter twice (got {', '.join(drafters)})")
        increasing = all(a < b for a, b in itertools.pairwise(nodes))
        if len(nodes) < 2 or nodes[0] != 1 or not increasing:
            raise ValueError(f"--nodes takes node budgets ({NODES_HINT}; got {list(nodes)})")
        for flag, value in (("--tree-depth", depth), ("--tree-width", width)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{flag} must be an integer >= 1 (got {value!r})")
        if nodes[-1] > (most := top_k_capacity(depth, width)):
            raise ValueError(
                f"a tree of depth {depth} and width {width} holds at most {most} nodes, so a "
                f"node budget of {nodes[-1]} is never reached: lower the largest N in "
                "--nodes, or raise --tree-width or --tree-depth"
            )
        if rule not in TREE_RULES:
            raise ValueError(f"--tree-rule must be one of {', '.join(TREE_RULES)} (got {rule!r})")

    def setting(self, drafter: str, nodes: int, temperature: float, draft: str) -> BenchSetting:
        """A tree drafter's setting at node budget `nodes` (1: its chain drafter at gamma =
        depth, the chain it is compared with)."""
        tree = nodes > 1
        name = drafter if tree else CHAIN_OF[drafter]
        return BenchSetting(
            drafter=name,
            gamma=self.depth,
            temperature=temperature,
            draft_name=draft if name in MODEL_DRAFTERS else name,
            tree_nodes=nodes if tree else None,
            tree_width=self.width if tree else None,
            tree_rule=self.rule if tree else None,
        )

    def settings(self, temperature: float, draft_name: str) -> list[BenchSetting]:
        """The chains (one per chain drafter), then every tree drafter at every N > 1."""
        chains = [self.setting(d, 1, temperature, draft_name) for d in self.drafters]
        trees = [
            self.setting(d, n, temperature, draft_name)
            for d in self.drafters
            for n in self.nodes[1:]
        ]
        return list(dict.fromkeys(chains)) + trees

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (exact says whether the trees follow the target's law)."""
        return plain(self, exact=TREE_RULES[self.rule].exact)


def run_sweep_request(
    pair: Any,
    request: Request,
    plan: SweepPlan,
    args: argparse.Namespace,
    *,
    temperature: float,
    draft_name: str,
) -> Iterator[Record]:
    """Warm up, then per repetition (--reps, seeded by it): plain, transformers' assisted
    generation of each chain (unless --no-hf), and every setting's speculative run (their order
    rotating), each paired with that plain run."""
    target, draft, tokenizer = pair.target, pair.draft, pair.tokenizer
    ids = chat_prompt_ids(tokenizer, request.prompt, raw=args.raw)
    settings = plan.settings(temperature, draft_name)
    n = request.max_new_tokens
    for rep in range(-1, args.reps):  # rep -1 is the untimed warm-up
        sampling = SamplingConfig(temperature=temperature, seed=max(rep, 0))
        base = autoregressive_generate(
            target, tokenizer, ids, sampling=sampling, max_new_tokens=n, make_cache=KVCache
        )
        hf = {
            s: hf_generate(target, draft, ids, s, n)
            for s in settings
            if not args.no_hf and has_hf_counterpart(s)
        }
        for setting in rotated(settings, max(rep, 0)):
            spec = speculative_run(
                target,
                draft,
                tokenizer,
                ids,
                setting,
                sampling=sampling,
                max_new_tokens=n,
                costs=CostModel(),
                lean=True,
                heads=args.heads,
            )
            if rep >= 0:
                yield record(request, setting, rep, spec, base, *hf.get(setting, (None, None)))


def resweep(section: dict[str, Any], records: Sequence[Record]) -> dict[str, Any]:
    """A saved section (its plan and pass timings) with its rows and verdicts recomputed from
    the records and timings."""
    plan = unplain(SweepPlan, section["plan"], "exact")
    ratios = {int(t["nodes"]): float(t["ratio"]) for t in section["passes"]["timings"]}
    rows = sweep_rows(plan, ratios, records)
    return {k: section[k] for k in ("plan", "passes")} | {"rows": rows, "verdicts": verdicts(rows)}


def _runs(records: Sequence[Record], workload: str, match: dict[str, Any]) -> tuple[Any, Runs]:
    """The setting of workload's records whose setting has the `match` fields, and its metrics
    by (request, repetition) (None, {} where none ran)."""
    chosen = [
        r
        for r in records
        if r.category == workload and all(getattr(r.setting, k) == v for k, v in match.items())
    ]
    setting = chosen[0].setting if chosen else None
    return setting, {(r.request_id, r.repetition): r.metrics for r in chosen}


def _per_token(m: RequestMetrics) -> float:
    return m.latency / m.tokens


def _draft_steps(m: RequestMetrics) -> float:
    """Draft seconds a round, in plain decode steps."""
    return m.draft_seconds / m.rounds / m.step_seconds


def sweep_rows(
    plan: SweepPlan, ratios: dict[int, float], records: Sequence[Record]
) -> list[dict[str, Any]]:
    """One row per (workload, T, tree drafter, N) that has records, N ascending (1: chain)."""
    hf = {  # transformers' seconds per token, by workload, chain setting, (request, repetition)
        (r.category, r.setting, (r.request_id, r.repetition)): r.hf_latency / r.hf_tokens
        for r in records
        if r.hf_latency is not None and r.hf_tokens
    }
    rows = []
    for workload, t in dict.fromkeys((r.category, r.setting.temperature) for r in records):
        for drafter in plan.drafters:
            common = {"temperature": t, "gamma": plan.depth}
            chain_match = common | {"drafter": CHAIN_OF[drafter], "tree_nodes": None}
            chain, chain_runs = _runs(records, workload, chain_match)
            if chain is None:
                continue
            base = _summary(chain_runs, ratios[1])
            for n in plan.nodes:
                tree = {"drafter": drafter, "tree_nodes": n, "tree_width": plan.width}
                match = chain_match if n == 1 else common | tree | {"tree_rule": plan.rule}
                setting, runs = _runs(records, workload, match)
                if setting is None:
                    continue
                versus = [
                    hf[workload, chain, k] / _per_token(m)
                    for k, m in runs.items()
                    if (workload, chain, k) in hf
                ]
                rows.append(
                    {"workload": workload, "drafter": drafter}
                    | _row(setting, n, runs, chain_runs, ratios[n], base)
                    | {"vs_transformers": asdict(spread(versus)) if versus else None}
                )
    return rows


def _summary(ms: Runs, ratio: float) -> dict[str, float]:
    """Median tokens a pass and a round's cost in plain steps (draft + r), priced at r."""
    tokens = statistics.median(m.tokens_per_round for m in ms.values())
    draft = statistics.median(_draft_steps(m) for m in ms.values())
    return {"tokens_per_pass": tokens, "round_cost": draft + ratio}


def _row(
    setting: BenchSetting, n: int, ms: Runs, chain: Runs, ratio: float, base: dict[str, float]
) -> dict[str, Any]:
    """A row's own numbers and its comparison with the chain, pair by pair."""
    values, own = list(ms.values()), _summary(ms, ratio)
    versus = [_per_token(chain[k]) / _per_token(m) for k, m in ms.items() if k in chain]
    priced = (own["tokens_per_pass"] / base["tokens_per_pass"]) * (
        base["round_cost"] / own["round_cost"]
    )
    vs_chain = None if n == 1 or not versus else asdict(spread(versus))
    label = f"chain ({setting.drafter} γ={setting.gamma})" if n == 1 else None
    return {
        "temperature": setting.temperature,
        "nodes": n,
        "label": label or tree_label(asdict(setting)),
        "setting": setting.saved(),
        "exact": setting.exact,  # False: a lossy tree rule, not the target's law
        "runs": len(values),
        "nodes_per_round": statistics.median(m.mean_gamma for m in values),
        "draft_calls_per_round": statistics.median(m.draft_calls / m.rounds for m in values),
        "tokens_per_pass": asdict(spread([m.tokens_per_round for m in values])),
        "pass_ratio": ratio,
        "run_pass_ratio": asdict(spread([m.verify_ratio for m in values])),
        "draft_steps_per_round": statistics.median(_draft_steps(m) for m in values),
        "speedup": asdict(spread([m.speedup for m in values])),
        "vs_chain": vs_chain,
        "priced_vs_chain": None if n == 1 else priced,
        "pays": None if vs_chain is None else vs_chain["median"] > 1.0,
    }


@dataclass(frozen=True, kw_only=True)
class Trees:
    """The node-budget sweep: at depth --tree-depth, the chain and each tree drafter at each
    node budget N; its section is saved under tree_sweep."""

    name: str = "trees"
    key: str | None = "tree_sweep"
    per_draft: bool = True
    own_flags: bool = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Register --nodes (the tree options are every study's: specviz.bench.sweep)."""
        parser.add_argument(
            "--nodes",
            default=",".join(map(str, DEFAULT_NODES)),
            metavar="N,...",
            help="the node budgets N to compare at depth --tree-depth: the chain (N = 1: the "
            "chain drafter at gamma = depth, as many draft calls a round) and each tree drafter "
            "of --drafters (default: tree-model) at each N; reports tokens a target pass, r(N) "
            "(a pass over N tree tokens against a 1-token step), the speedup over plain "
            "decoding, the chain and transformers' assisted generation, and where the tree pays "
            f"(default: {','.join(map(str, DEFAULT_NODES))}; --gammas, --policies and "
            "--tree-nodes are for the other studies)",
        )

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        return args

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> SweepPlan:
        plan = SweepPlan(
            drafters=tuple(drafters),
            nodes=parse_nodes(args.nodes),
            depth=args.tree_depth,
            width=args.tree_width,
            rule=args.tree_rule,
        )
        for wrong, message in (
            (len(args.draft or []) > 1, "compares node budgets on one draft: give one --draft"),
            (args.policies.strip() != "fixed", "drafts to a fixed depth: drop --policies"),
            (args.lean_target, "runs the target on transformers' forward: drop --lean-target"),
        ):
            if wrong:
                raise ValueError(f"specviz bench trees {message}")
        return plan

    def run(self, plan: SweepPlan, context: Context) -> Outcome:
        """Every temperature's records, then r(N) timed over the first request's prompt."""
        args, pair = context.args, context.pair
        records: list[Record] = []
        picked = [(t, r) for t, subset in by_temperature(args, context.requests) for r in subset]
        t0 = time.perf_counter()
        for i, (t, request) in enumerate(picked):
            context.progress(i, len(picked), f"{request.id} tree sweep N={plan.nodes} T={t}")
            records += run_sweep_request(
                pair, request, plan, args, temperature=t, draft_name=context.draft
            )
        context.progress(len(picked), len(picked), f"done in {time.perf_counter() - t0:.0f} s")
        say("timing the target's passes over each tree size")
        ids = chat_prompt_ids(pair.tokenizer, context.requests[0].prompt, raw=args.raw)
        timings = tree_pass_timings(
            pair.target, ids, plan.nodes, depth=plan.depth, width=plan.width, repeats=PASS_REPEATS
        )
        passes = {
            "prompt_tokens": len(ids) - 1,
            "repeats": PASS_REPEATS,
            "timings": [asdict(t) for t in timings],
        }
        section = resweep({"plan": plan.to_dict(), "passes": passes}, records)
        return Outcome(records=tuple(records), section=section)

    def render(self, section: dict[str, Any], price_per_hour: float) -> str:
        return "\n".join(sweep_table(section))
