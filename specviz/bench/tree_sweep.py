"""The node-budget sweep: the chain and trees of N nodes at one depth, each against plain decoding.

At a fixed depth D every setting makes the same draft calls a round: the chain (N = 1) is the
chain drafter at gamma = D (the draft model for tree-model and tree-sampled, n-gram lookup for
tree-ngram, the head's chain for the head trees), and each tree (N > 1) grows D levels of at
most N nodes. Every draft model runs through the same forward (specviz.fast.lean's where it
applies, as the registry builds them), so a round's draft work differs only by the tree. The
target runs on transformers' forward throughout, the head drafters' own forward of it too.
Per request and repetition, one plain decode and, where transformers has the chain's
counterpart, one transformers' assisted generation at gamma = D are shared by every setting,
whose speculative runs follow in an order that rotates each repetition.

What one target pass over a token tree costs, against a plain 1-token step: r(N).

A tree round's target pass scores the fresh token and the tree's N nodes at once, through
transformers' forward with a 4D attention mask; a chain round's scores the fresh token and
its D drafts causally. Both are timed here over the same cached prefix, interleaved with the
plain 1-token step they are divided by, medians after a warm-up.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from specviz.api import autoregressive_generate
from specviz.bench.assisted import has_hf_counterpart, hf_generate
from specviz.bench.runner import record, speculative_run
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig
from specviz.core.decoding import clock
from specviz.drafters.registry import MODEL_DRAFTERS, TREE_DRAFTERS
from specviz.gamma.policies import CostModel
from specviz.models.chat import prompt_ids as chat_prompt_ids
from specviz.results.records import Record
from specviz.results.setting import CHAIN_OF, TREE_RULES, BenchSetting, top_k_capacity
from specviz.tree.decoding import tree_inputs
from specviz.tree.proposal import TokenTree
from specviz.workloads import Request

DEFAULT_NODES = (1, 4, 8, 16, 32)
NODES_HINT = "e.g. 1,4,8,16,32: 1 (the chain) first, then tree node budgets, increasing"


def parse_nodes(text: str) -> tuple[int, ...]:
    """'1,4,8' → (1, 4, 8); ValueError, saying what to give, for anything else."""
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--tree-sweep takes node budgets ({NODES_HINT}; got {text!r})") from None


@dataclass(frozen=True, kw_only=True)
class SweepPlan:
    """What a sweep runs: its tree drafters, node budgets (1: the chain), depth, width, rule."""

    drafters: tuple[str, ...]
    nodes: tuple[int, ...]
    depth: int
    width: int
    rule: str = "exact"

    def __post_init__(self) -> None:
        check_plan(self.drafters, self.nodes, self.depth, self.width, self.rule)

    @property
    def exact(self) -> bool:
        """False for a lossy tree rule: the trees' output does not follow the target's law."""
        return TREE_RULES[self.rule].exact

    def chain(self, drafter: str, temperature: float, draft_name: str) -> BenchSetting:
        """The chain a tree drafter is compared with: its chain drafter at gamma = depth."""
        name = CHAIN_OF[drafter]
        return BenchSetting(
            drafter=name,
            gamma=self.depth,
            temperature=temperature,
            draft_name=draft_name if name in MODEL_DRAFTERS else name,
        )

    def tree(self, drafter: str, nodes: int, temperature: float, draft_name: str) -> BenchSetting:
        """A tree drafter's setting at node budget `nodes`."""
        return BenchSetting(
            drafter=drafter,
            gamma=self.depth,
            temperature=temperature,
            draft_name=draft_name if drafter in MODEL_DRAFTERS else drafter,
            tree_nodes=nodes,
            tree_width=self.width,
            tree_rule=self.rule,
        )

    def settings(self, temperature: float, draft_name: str) -> list[BenchSetting]:
        """The chains (one per chain drafter), then every tree drafter at every N > 1."""
        chains = [self.chain(d, temperature, draft_name) for d in self.drafters]
        trees = [
            self.tree(d, n, temperature, draft_name) for d in self.drafters for n in self.nodes[1:]
        ]
        return list(dict.fromkeys(chains)) + trees

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (exact says whether the trees follow the target's law)."""
        return {
            "drafters": list(self.drafters),
            "nodes": list(self.nodes),
            "depth": self.depth,
            "width": self.width,
            "rule": self.rule,
            "exact": self.exact,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepPlan:
        """Inverse of to_dict."""
        return cls(
            drafters=tuple(data["drafters"]),
            nodes=tuple(data["nodes"]),
            depth=data["depth"],
            width=data["width"],
            rule=data["rule"],
        )


def check_plan(
    drafters: Sequence[str], nodes: Sequence[int], depth: int, width: int, rule: str
) -> None:
    """ValueError, saying what to change, unless the sweep can run as planned."""
    if not drafters or any(d not in TREE_DRAFTERS for d in drafters):
        raise ValueError(
            "--tree-sweep compares tree drafters with their chain: --drafters must list some of "
            f"{', '.join(TREE_DRAFTERS)} (got {', '.join(drafters) or 'none'})"
        )
    if len(set(drafters)) != len(drafters):
        raise ValueError(f"--drafters names a drafter twice (got {', '.join(drafters)})")
    increasing = all(a < b for a, b in itertools.pairwise(nodes))
    if len(nodes) < 2 or nodes[0] != 1 or not increasing:
        raise ValueError(f"--tree-sweep takes node budgets ({NODES_HINT}; got {list(nodes)})")
    for flag, value in (("--tree-depth", depth), ("--tree-width", width)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{flag} must be an integer >= 1 (got {value!r})")
    most = top_k_capacity(depth, width)
    if nodes[-1] > most:
        raise ValueError(
            f"a tree of depth {depth} and width {width} holds at most {most} nodes, so a node "
            f"budget of {nodes[-1]} is never reached: lower the largest N in --tree-sweep, or "
            "raise --tree-width or --tree-depth"
        )
    if rule not in TREE_RULES:
        raise ValueError(f"--tree-rule must be one of {', '.join(TREE_RULES)} (got {rule!r})")


def _rotated(settings: Sequence[BenchSetting], rep: int) -> list[BenchSetting]:
    """settings starting at a different one each repetition (no setting always runs first)."""
    k = rep % len(settings)
    return [*settings[k:], *settings[:k]]


def run_sweep_request(
    target: Any,
    draft: Any,
    tokenizer: Any,
    request: Request,
    plan: SweepPlan,
    *,
    temperature: float,
    draft_name: str,
    repetitions: int,
    with_hf: bool,
    seed: int = 0,
    raw: bool = False,
    heads: str | None = None,
) -> Iterator[Record]:
    """Warm up, then per repetition: plain, transformers' assisted generation of each chain,
    and every setting's speculative run, each paired with that plain run (heads: the head
    drafters' weights folder, None: the shipped ones)."""
    prompt_ids = chat_prompt_ids(tokenizer, request.prompt, raw=raw)
    settings = plan.settings(temperature, draft_name)
    n = request.max_new_tokens
    for rep in range(-1, repetitions):  # rep -1 is the untimed warm-up
        sampling = SamplingConfig(temperature=temperature, seed=seed + max(rep, 0))
        plain = autoregressive_generate(
            target, tokenizer, prompt_ids, sampling=sampling, max_new_tokens=n, make_cache=KVCache
        )
        hf = {
            s: hf_generate(target, draft, prompt_ids, s, n)
            for s in settings
            if with_hf and has_hf_counterpart(s)
        }
        for setting in _rotated(settings, max(rep, 0)):
            spec = speculative_run(
                target, draft, tokenizer, prompt_ids, setting, sampling=sampling,
                max_new_tokens=n, costs=CostModel(), lean=True, heads=heads,
            )  # fmt: skip
            if rep < 0:
                continue
            hf_seconds, hf_tokens = hf.get(setting, (None, None))
            yield record(request, setting, rep, spec, plain, hf_seconds, hf_tokens)


def run_sweep(
    target: Any,
    draft: Any,
    tokenizer: Any,
    requests: Sequence[Request],
    plan: SweepPlan,
    *,
    temperature: float,
    draft_name: str,
    repetitions: int,
    with_hf: bool,
    progress: Callable[[int, int, str], None] = lambda _i, _n, _s: None,
    raw: bool = False,
    heads: str | None = None,
) -> list[Record]:
    """Every request through the sweep; progress(done, total, label) after each."""
    records: list[Record] = []
    t0 = time.perf_counter()
    for i, request in enumerate(requests):
        progress(i, len(requests), f"{request.id} tree sweep N={plan.nodes} T={temperature}")
        records += run_sweep_request(
            target, draft, tokenizer, request, plan, temperature=temperature,
            draft_name=draft_name, repetitions=repetitions, with_hf=with_hf, raw=raw, heads=heads,
        )  # fmt: skip
    progress(len(requests), len(requests), f"done in {time.perf_counter() - t0:.0f} s")
    return records


PASS_REPEATS = 15  # timed passes of each shape, after WARMUP untimed ones
WARMUP = 3


@dataclass(frozen=True, kw_only=True)
class PassTiming:
    """One pass shape's median seconds and its ratio to the plain 1-token step."""

    nodes: int  # the sweep's N: 1 the chain (depth drafts, causal), else N tree nodes; 0 plain
    tokens: int  # tokens in the pass: the fresh token and the drafts
    mask: str  # "causal" (plain step, chain) or "tree" (4D mask)
    seconds: float
    ratio: float  # r(N): seconds / the plain 1-token step's seconds


def timing_tree(nodes: int, depth: int, width: int) -> TokenTree:
    """A top-k shaped tree of `nodes` nodes, filled level by level: `width` children of the
    root, then `width` children for each of a level's first `width` nodes, down to `depth`.

    Only its shape is used (the tokens do not change a pass's cost). ValueError when the
    shape cannot hold that many nodes.
    """
    most = top_k_capacity(depth, width)
    if nodes > most:
        raise ValueError(
            f"a tree of depth {depth} and width {width} holds at most {most} nodes "
            f"(got {nodes}): raise --tree-width or --tree-depth, or lower the node budget"
        )
    parents: list[int] = []
    level = [-1]
    while len(parents) < nodes:
        grown: list[int] = []
        for parent in level[:width]:
            for _ in range(width):
                if len(parents) < nodes:
                    parents.append(parent)
                    grown.append(len(parents) - 1)
        level = grown
    return TokenTree(
        tokens=torch.zeros(nodes, dtype=torch.long),
        parents=tuple(parents),
        q_draft=torch.zeros(nodes + 1, 1),
        sampled=(False,) * nodes,
        forward_calls=0,
    )


def _shapes(
    prompt_ids: list[int], nodes: Sequence[int], depth: int, width: int, held: int
) -> list[tuple[int, str, list[int], Tensor | None, Tensor | None]]:
    """(N, mask, tokens, positions, visible) of each pass: the plain step, then each N."""
    root = prompt_ids[-1]
    most = max([*nodes, depth])
    drafts = (prompt_ids * (most // len(prompt_ids) + 1))[:most]
    shapes: list[tuple[int, str, list[int], Tensor | None, Tensor | None]] = [
        (0, "causal", [root], None, None)
    ]
    for n in nodes:
        if n == 1:  # the chain: the fresh token and depth drafts, causal as in the chain loop
            shapes.append((1, "causal", [root, *drafts[:depth]], None, None))
            continue
        positions, visible = tree_inputs(timing_tree(n, depth, width), 1, held, held)
        shapes.append((n, "tree", [root, *drafts[:n]], positions, visible))
    return shapes


@torch.no_grad()
def tree_pass_timings(
    target: Any,
    prompt_ids: list[int],
    nodes: Sequence[int],
    *,
    depth: int,
    width: int,
    repeats: int = PASS_REPEATS,
    make_cache: Callable[[Any], KVCache] = KVCache,
) -> list[PassTiming]:
    """r(N) for each N in nodes (1: the chain of `depth` drafts), over prompt_ids cached.

    Each repeat times the plain 1-token step and every shape once, in that order, cutting the
    cache back to the prompt after each pass; the first WARMUP repeats are not counted.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1 (got {repeats})")
    if len(prompt_ids) < 2:
        raise ValueError("timing a pass needs a prompt of at least 2 tokens")
    cache = make_cache(target)
    device = target.device
    cache.forward(torch.tensor(prompt_ids[:-1], device=device), keep=1)
    held = len(cache)
    shapes = _shapes(prompt_ids, nodes, depth, width, held)
    times: list[list[float]] = [[] for _ in shapes]
    for _ in range(WARMUP + repeats):
        for seconds, (_n, _mask, tokens, positions, visible) in zip(times, shapes, strict=True):
            ids = torch.tensor(tokens, device=device)  # (1 + drafts,)
            start = clock(device)
            cache.forward(
                ids,
                keep=len(tokens),
                positions=None if positions is None else positions.to(device),
                visible=None if visible is None else visible.to(device),
            )
            seconds.append(clock(device) - start)
            cache.crop(held)
    medians = [statistics.median(t[WARMUP:]) for t in times]
    return [
        PassTiming(nodes=n, tokens=len(tokens), mask=mask, seconds=s, ratio=s / medians[0])
        for (n, mask, tokens, _p, _v), s in zip(shapes, medians, strict=True)
    ]
