"""`specviz bench heads`: the drafting heads (eagle, medusa and their trees, trained on the
target's own features) against the other drafters, and what a drafter would keep along one
target decode: the input of a replay (specviz.bench.sweeps.replay).

The study runs the speedup study's settings (specviz.bench.sweeps.speedup) with the head
drafters beside the draft model and lookup by default; heads_table renders the saved `heads`
parts in one table: per workload and temperature, each drafter's fastest fixed setting, its
speedup over plain decoding (pair by pair, on the same requests and target forward), α, tokens
a round, the draft cost c, the verification pass's cost r, and its time per token over
transformers' assisted generation with the bundled draft model on the same requests (the best
of transformers' settings in the part, request by request).

Lookaheads. Speculative sampling's rounds are decided by the target's output path and one
verdict per drafted position. At a position where the target writes y, a draft token drawn
from q is kept with probability min(p(y), q(y)) / p(y) = min(1, q(y)/p(y)) given y, whatever
came before (P(kept, y) = min(p(y), q(y)) and P(y) = p(y): the output follows the target).
While drafts are kept, the draft's context is the target's path; after a rejection the round
ends. So one plain target decode (y and p(y) at each position), q(y) from the draft run along
it, and a uniform draw per position give the rounds of any gamma policy that decides before
drafting, in law, and the same draws serve every policy (common random numbers). At T = 0 the
verdicts are certain: the draft's greedy token equals the target's or it does not.

A drafting head's q depends on more than the tokens before it: the first token of a round
reads the target's real feature, and each later one the head's own hidden state (EAGLE-3) or the
same last real feature through a head further ahead (Medusa). So a round starting at output
position i is drafted as the real loop drafts it, with the target's features of every
committed token but the last and the head fed the target's own tokens after that: q_j^(i)(y)
for each depth j. A round's verdicts are independent given the target's path, so one uniform
per (start, depth) gives rounds with the law of real ones at T > 0; at T = 0 they are certain.
The first round drafts nothing: the target has not yet scored the prompt (specviz.heads).
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from specviz.api import GenerationResult, autoregressive_generate, encode
from specviz.bench.sweep import Context, Outcome, with_flags
from specviz.bench.sweeps.speedup import Speedup, SpeedupPlan
from specviz.core.config import SamplingConfig
from specviz.core.drafter import Drafter
from specviz.core.events import Sampled
from specviz.drafters.hybrid import LookupThenModelDrafter
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.heads.cache import MedusaCache
from specviz.heads.drafters import HeadDrafter
from specviz.results.setting import drafter_label, setting_label
from specviz.results.table import markdown_table
from specviz.workloads import Request


@dataclass(frozen=True, kw_only=True)
class Lookahead:
    """What a drafter proposes at each output position of a target decode."""

    kept: tuple[int, ...]  # [i]: how many leading proposals at position i would be kept
    offered: tuple[int, ...] | None  # [i]: most tokens it has to propose at i (None: no limit)
    forwards: bool | tuple[bool, ...]  # a draft forward per proposed token (a model), or not
    # (a lookup); a tuple says it per position (lookup where it matches, a model elsewhere)

    def model_drafts(self, position: int) -> bool:
        """Whether the proposal at position costs one draft forward per token."""
        return self.forwards if isinstance(self.forwards, bool) else self.forwards[position]


@dataclass(frozen=True, kw_only=True)
class TargetPath:
    """A prompt and one plain target decode of it: each token y and its probability p(y)."""

    prompt_ids: tuple[int, ...]
    tokens: tuple[int, ...]
    p_tokens: tuple[float, ...]  # 1.0 everywhere at T = 0


def target_path(result: GenerationResult) -> TargetPath:
    """The path of a plain decode (autoregressive_generate's result)."""
    p_tokens = tuple(e.p_x for e in result.events if isinstance(e, Sampled))
    return TargetPath(prompt_ids=result.prompt_ids, tokens=result.tokens, p_tokens=p_tokens)


def target_paths(
    pair: Any, requests: Sequence[Request], sampling: SamplingConfig, samples: int = 1
) -> list[TargetPath]:
    """samples plain decodes of each request (seeds 0, 1, ...; a greedy decode only once)."""
    paths = []
    for req in requests:
        prompt_ids = encode(pair.tokenizer, req.prompt)
        for seed in range(1 if sampling.greedy else samples):
            result = autoregressive_generate(
                pair.target,
                pair.tokenizer,
                prompt_ids,
                sampling=replace(sampling, seed=seed),
                max_new_tokens=req.max_new_tokens,
            )
            paths.append(target_path(result))
    return paths


def draft_probabilities(drafter: ModelDrafter, path: TargetPath) -> tuple[float, ...]:
    """q(y) at each position y of path, from one cached draft step each, as in a round (n,)."""
    drafter.prefill(list(path.prompt_ids[:-1]))
    generator = torch.Generator(device=drafter.device)
    ids, q_tokens = list(path.prompt_ids), []
    for token in path.tokens:
        q = drafter.propose(ids, 1, generator, ()).q_draft[0]  # (V,)
        q_tokens.append(float(q[token]))
        ids.append(token)
    return tuple(q_tokens)


def keep_probabilities(q_tokens: Sequence[float], p_tokens: Sequence[float]) -> list[float]:
    """min(1, q(y)/p(y)): the chance a draft is kept where the target wrote y (n,)."""
    return [min(1.0, q / p) for q, p in zip(q_tokens, p_tokens, strict=True)]


def model_lookahead(keeps: Sequence[float], generator: torch.Generator) -> Lookahead:
    """Draw each position's verdict (u < keep) and count the kept run from each position."""
    u = torch.rand(len(keeps), generator=generator, dtype=torch.float64).tolist()
    kept = [0] * (len(keeps) + 1)
    for i in reversed(range(len(keeps))):
        kept[i] = kept[i + 1] + 1 if u[i] < keeps[i] else 0
    return Lookahead(kept=tuple(kept[:-1]), offered=None, forwards=True)


def lookup_then_model(lookup: Lookahead, model: Lookahead, limit: int) -> Lookahead:
    """The lookup's proposal wherever it has one, the model's elsewhere (specviz.drafters.hybrid).

    limit: the model's share of a round, and no more than it offers there (a drafting head
    offers none in the first round). Leaves out the model's catch-up over tokens copied while
    it idled (one forward of a few tokens at its next round, about one draft step).
    """
    assert lookup.offered is not None
    copies = [offered > 0 for offered in lookup.offered]
    limits = (
        [limit] * len(copies) if model.offered is None else [min(limit, o) for o in model.offered]
    )
    pick = list(zip(copies, lookup.kept, model.kept, lookup.offered, limits, strict=True))
    return Lookahead(
        kept=tuple(by_lookup if copy else by_model for copy, by_lookup, by_model, _, _ in pick),
        offered=tuple(offered if copy else most for copy, _, _, offered, most in pick),
        forwards=tuple(not copy for copy in copies),
    )


def ngram_lookahead(drafter: NgramDrafter, path: TargetPath, max_gamma: int) -> Lookahead:
    """N-gram lookup's continuation at each position and how much of it the target wrote.

    Its q is one-hot, so a proposal x is kept exactly when the target wrote x (keep 1 or 0).
    """
    ids, kept, offered = list(path.prompt_ids), [], []
    output = path.tokens
    generator = torch.Generator()
    for i, token in enumerate(output):
        proposal = drafter.propose(ids, max_gamma, generator, ()).tokens.tolist()
        right = 0
        while right < len(proposal) and i + right < len(output):
            if proposal[right] != output[i + right]:
                break
            right += 1
        kept.append(right)
        offered.append(len(proposal))
        ids.append(token)
    return Lookahead(kept=tuple(kept), offered=tuple(offered), forwards=False)


def most_drafted(drafter: HeadDrafter, limit: int) -> int:
    """The most tokens the head drafts a round: limit, and no more than Medusa's heads."""
    head = drafter.head
    return min(limit, head.heads.k) if isinstance(head, MedusaCache) else limit


@torch.no_grad()
def head_keeps(
    drafter: HeadDrafter, target: Any, path: TargetPath, most: int
) -> list[tuple[float, ...]]:
    """[i][j]: min(1, q(y)/p(y)) of the (j+1)-th draft of a round starting at output position
    i, where the target wrote y; a row ends where a draft is never kept (q(y) = 0), at `most`
    drafts or at the path's end. Row 0 is empty (the first round drafts nothing)."""
    forward = drafter.target_cache(target)  # a fresh forward of the target, recording features
    device = drafter.device
    ids, tokens = list(path.prompt_ids), path.tokens
    rows: list[tuple[float, ...]] = [()]
    for i in range(1, len(tokens)):
        ids.append(tokens[i - 1])
        forward.forward(torch.tensor(ids[len(forward) : -1], device=device), keep=1)
        drafter.rollback(len(ids))  # as after a round: the head keeps what fits the committed
        pending, row = ids[len(drafter.head) :], []
        for j in range(min(most, len(tokens) - i)):
            logits = drafter.head.forward(torch.tensor(pending, device=device), keep=1)[-1]
            q = drafter.law(logits)  # (V,)
            y = tokens[i + j]
            row.append(min(1.0, float(q[y]) / path.p_tokens[i + j]))
            if row[-1] == 0.0:
                break
            pending = [y]
        rows.append(tuple(row))
    return rows


def head_lookahead(
    keeps: Sequence[Sequence[float]], most: int, generator: torch.Generator
) -> Lookahead:
    """Draw each (start, depth) verdict (u < keep) and count the kept run of each start; the
    head offers `most` drafts a round, none in the first."""
    u = torch.rand(len(keeps), max(most, 1), generator=generator, dtype=torch.float64).tolist()
    kept = []
    for row, draws in zip(keeps, u, strict=True):
        run = 0
        while run < len(row) and draws[run] < row[run]:
            run += 1
        kept.append(run)
    offered = tuple(0 if i == 0 else most for i in range(len(keeps)))
    return Lookahead(kept=tuple(kept), offered=offered, forwards=True)


def head_lookaheads(
    drafter: HeadDrafter, target: Any, path: TargetPath, draws: int, seed: int, limit: int
) -> list[Lookahead]:
    """draws lookaheads of one path with the head (one where every verdict is certain), each
    round drafting at most `limit` tokens (and no more than the head can)."""
    most = most_drafted(drafter, limit)
    keeps = head_keeps(drafter, target, path, most)
    generator = torch.Generator().manual_seed(seed)
    certain = all(k in (0.0, 1.0) for row in keeps for k in row)
    return [head_lookahead(keeps, most, generator) for _ in range(1 if certain else draws)]


LOOKAHEAD = 16  # the most tokens a policy drafts (specviz.gamma.policies' max_gamma)


def lookaheads(
    drafter: Drafter, path: TargetPath, draws: int, seed: int, target: Any = None
) -> list[Lookahead]:
    """draws lookaheads of one path (a lookup's or a greedy draft's verdicts are certain: 1);
    a drafting head drafts from target's features (target: the model that decoded path)."""
    if isinstance(drafter, HeadDrafter):
        if target is None:
            raise ValueError("a drafting head drafts from the target's features: pass target")
        return head_lookaheads(drafter, target, path, draws, seed, LOOKAHEAD)
    if isinstance(drafter, NgramDrafter):
        return [ngram_lookahead(drafter, path, LOOKAHEAD)]
    if isinstance(drafter, LookupThenModelDrafter):
        lookup = ngram_lookahead(drafter.lookup, path, LOOKAHEAD)
        models = lookaheads(drafter.model, path, draws, seed, target)
        limit = min(LOOKAHEAD, drafter.model_gamma or LOOKAHEAD)  # the model's share of a round
        return [lookup_then_model(lookup, model, limit) for model in models]
    assert isinstance(drafter, ModelDrafter)
    keeps = keep_probabilities(draft_probabilities(drafter, path), path.p_tokens)
    generator = torch.Generator().manual_seed(seed)
    certain = all(k in (0.0, 1.0) for k in keeps)
    return [model_lookahead(keeps, generator) for _ in range(1 if certain else draws)]


HEAD_PARTS: tuple[tuple[str, str, float], ...] = (
    ("heads-code", "code", 0.0),
    ("heads-t1", "code", 1.0),
    ("heads-json-prose", "json", 0.0),
    ("heads-json-prose", "prose", 1.0),
)
Loader = Callable[[str], dict[str, Any]]


def _per_token(records: Sequence[dict[str, Any]], hf: bool) -> dict[str, float]:
    """Seconds per generated token of each request (mean over its repetitions)."""
    runs: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if hf and r.get("hf_latency") is not None and r.get("hf_tokens"):
            runs[r["request_id"]].append(r["hf_latency"] / r["hf_tokens"])
        elif not hf and r["metrics"]["tokens"]:
            runs[r["request_id"]].append(r["metrics"]["latency"] / r["metrics"]["tokens"])
    return {k: statistics.fmean(v) for k, v in runs.items()}


def _hf_best(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """transformers' fastest setting's seconds per token on each request."""
    by_setting: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_setting[repr(sorted(r["setting"].items()))].append(r)
    best: dict[str, float] = {}
    for group in by_setting.values():
        for request, value in _per_token(group, hf=True).items():
            best[request] = min(best.get(request, value), value)
    return best


def _versus_hf(ours: Sequence[dict[str, Any]], hf: dict[str, float]) -> str:
    """'median (min–max), faster on k of n' of our time per token over transformers'."""
    mine = _per_token(ours, hf=False)
    ratios = sorted(mine[k] / hf[k] for k in mine if k in hf)
    if not ratios:
        return "–"
    faster = sum(x < 1 for x in ratios)
    middle = statistics.median(ratios)
    return f"{middle:.2f} ({ratios[0]:.2f}–{ratios[-1]:.2f}), {faster} of {len(ratios)}"


def _fastest(result: dict[str, Any], workload: str, temperature: float) -> dict[str, Any]:
    """Each drafter's fastest fixed-setting summary row for one workload and temperature."""
    best: dict[str, dict[str, Any]] = {}
    for row in result["summary"]:
        if row["workload"] != workload or row["setting"]["temperature"] != temperature:
            continue
        if row["setting"]["policy"] != "fixed":
            continue
        label = drafter_label(row["setting"])
        if label not in best or row["speedup"]["median"] > best[label]["speedup"]["median"]:
            best[label] = row
    return best


def heads_table(load: Loader) -> list[str]:
    """One row per drafter: its best speedup (α, tokens a round) per workload and temperature,
    c and r on code at T = 0, and its time per token over transformers' there."""
    columns = [f"{w} T={t:g}: speedup (α, tokens a round)" for _, w, t in HEAD_PARTS]
    header = ["drafter", *columns, "c", "r", "time/token over transformers assisted (faster on)"]
    cells: dict[str, dict[int, str]] = defaultdict(dict)
    extra: dict[str, list[str]] = {}
    for index, (part, workload, temperature) in enumerate(HEAD_PARTS):
        result = load(part)
        records = [
            r
            for r in result["records"]
            if r["category"] == workload and r["setting"]["temperature"] == temperature
        ]
        hf = _hf_best(records)
        for label, row in _fastest(result, workload, temperature).items():
            cells[label][index] = (
                f"{setting_label(row['setting']).removeprefix(label).strip() or '–'}: "
                f"{row['speedup']['median']:.2f}× ({row['alpha']['median']:.2f}, "
                f"{row['tokens_per_round']['median']:.2f})"
            )
            if index == 0:
                ours = [r for r in records if r["setting"] == row["setting"]]
                extra[label] = [
                    f"{row['cost_ratio']['median']:.3f}",
                    f"{row['verify_ratio']['median']:.2f}",
                    _versus_hf(ours, hf),
                ]
    body = [
        [label, *(row.get(i, "–") for i in range(len(HEAD_PARTS))), *extra.get(label, ["–"] * 3)]
        for label, row in cells.items()
    ]
    return markdown_table(header, body)


HEADS_DRAFTERS = "model,ngram+model:trimmed,eagle,ngram+eagle,tree-eagle,medusa"


@dataclass(frozen=True, kw_only=True)
class Heads:
    """The speedup study's settings with the drafting heads among the drafters (--drafters,
    default HEADS_DRAFTERS): it saves records only, rendered as the speedup study's tables."""

    name: str = "heads"
    key: str | None = None
    per_draft: bool = True
    own_flags: bool = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """None of its own: --heads and the tree options are every study's."""

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        return with_flags(args, drafters=args.drafters or HEADS_DRAFTERS)

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> SpeedupPlan:
        return Speedup().plan(args, drafters, policies, requests)

    def run(self, plan: SpeedupPlan, context: Context) -> Outcome:
        return Speedup().run(plan, context)

    def render(self, section: dict[str, Any], price_per_hour: float) -> str:
        return Speedup().render(section, price_per_hour)
