"""The levers sweep: every lever (below) on the same requests, timed and measured for its
distance from the fp32 target.

Per request, untimed first: each lever decodes greedily (T = 0; this is also its warm-up), and
its tokens are compared with the reference's greedy tokens (greedy agreement, first
divergence). The reference then samples one continuation at T = 1 (seed 0), and every model a
lever's law follows scores it: the mean total variation of its next-token laws from the
reference's along that continuation (specviz.quant.distance). A speculative lever's law is its
verifying target's, so its TV is that target's (the run records where each TV came from), and
hf@P's is its target's too (the same model through transformers' generate()). Then
`repetitions` timed rounds: each lever decodes at the request's temperature, seeded by the
round, the levers in an order that rotates each round. Latency is wall time around the whole
call (drafter construction included); the target runs on transformers' forward in every lever.

The levers: speculation beside the other speed-ups, each a runnable configuration.

A lever names how tokens are produced and at which precision each model runs:
- target@P: the target alone (plain decoding) at precision P (specviz.quant.precision);
  target@fp32 is the reference every distance is measured from.
- draft@P: the draft model alone at P: "the small model", a different model.
- spec@P or spec@P/Q: speculative decoding, the target at P verifying, the draft at Q drafting
  (Q defaults to fp32). Its law is its verifying target's, whatever Q.
- hf@P: transformers' own generate() of the target at P, the plain baseline a user has already.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from specviz.api import GenerationResult, autoregressive_generate, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import Rejected
from specviz.drafters.registry import CHAIN_MODEL_DRAFTERS, build_drafter
from specviz.quant.distance import greedy_agreement, mean_total_variation
from specviz.quant.precision import INT8, PRECISIONS, weight_bytes
from specviz.workloads import Request

LEVER_DRAFTERS = CHAIN_MODEL_DRAFTERS
Models = dict[tuple[str, str], Any]  # (role, precision) → loaded model
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, kw_only=True)
class LeverPlan:
    """What a levers sweep runs: the levers (reference first), the drafter and its gamma."""

    levers: tuple[Lever, ...]
    drafter: str
    gamma: int

    def __post_init__(self) -> None:
        check_lever_plan(self.levers, self.drafter, self.gamma)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "levers": [lever.name for lever in self.levers],
            "drafter": self.drafter,
            "gamma": self.gamma,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LeverPlan:
        """Inverse of to_dict."""
        levers = tuple(parse_lever(n) for n in data["levers"])
        return cls(levers=levers, drafter=data["drafter"], gamma=data["gamma"])

    def models(self) -> list[tuple[str, str]]:
        """Every (role, precision) some lever runs, each once, in order."""
        out: list[tuple[str, str]] = []
        for lever in self.levers:
            out += [m for m in lever.models() if m not in out]
        return out


def check_lever_plan(levers: Sequence[Lever], drafter: str, gamma: int) -> None:
    """ValueError, saying what to change, for a plan the sweep cannot run (no model loaded)."""
    if not levers or levers[0].name != "target@fp32":
        raise ValueError("a levers sweep measures from target@fp32: list it first")
    if drafter not in LEVER_DRAFTERS:
        raise ValueError(
            f"the levers sweep drafts with one of {', '.join(LEVER_DRAFTERS)} (got {drafter!r}): "
            "give one of them as --drafters"
        )
    if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
        raise ValueError(f"gamma must be an integer >= 1 (got {gamma!r})")
    quantized_draft = [lv.name for lv in levers if lv.speculative and lv.draft in INT8]
    if drafter == "model-trimmed" and quantized_draft:
        raise ValueError(
            f"{', '.join(quantized_draft)}: model-trimmed slices the draft's output head, which "
            "torchao's int8 weights do not support; give --drafters model, or drop those levers"
        )


def memory_bytes(lever: Lever, models: Models) -> int:
    """Bytes of the weights the lever holds (each model once; packed copies not counted)."""
    return sum(weight_bytes(models[m]) for m in lever.models())


def decode(
    lever: Lever,
    models: Models,
    plan: LeverPlan,
    tokenizer: Any,
    prompt_ids: list[int],
    *,
    sampling: SamplingConfig,
    max_new_tokens: int,
    stop: frozenset[int],
) -> GenerationResult:
    """One decode of prompt_ids by the lever (a fresh drafter for a speculative one)."""
    if lever.kind == "hf":
        model = models[lever.law_model]
        return hf_plain(model, tokenizer, prompt_ids, sampling, max_new_tokens)
    if not lever.speculative:
        model = models[lever.law_model]
        return autoregressive_generate(
            model, tokenizer, prompt_ids, sampling=sampling, max_new_tokens=max_new_tokens,
            stop=stop,
        )  # fmt: skip
    target, draft = models[("target", lever.target)], models[("draft", lever.draft)]
    drafter = build_drafter(plan.drafter, target=target, draft=draft, sampling=sampling)
    return speculative_generate(
        target, drafter, tokenizer, prompt_ids, sampling=sampling,
        speculation=SpeculationConfig(gamma=plan.gamma, max_new_tokens=max_new_tokens), stop=stop,
    )  # fmt: skip


@torch.no_grad()
def hf_plain(
    model: Any, tokenizer: Any, prompt_ids: list[int], sampling: SamplingConfig, max_new: int
) -> GenerationResult:
    """transformers' generate() of model alone, as a GenerationResult without events.

    Sampling follows `sampling`'s temperature with no top-k or top-p (transformers' own defaults
    would filter); transformers draws from torch's global generator, so at T > 0 its tokens are
    timed, never compared.
    """
    ids = torch.tensor([prompt_ids], device=next(model.parameters()).device)
    kwargs: dict[str, Any] = {"max_new_tokens": max_new, "do_sample": sampling.temperature > 0}
    if sampling.temperature > 0:
        kwargs.update(temperature=sampling.temperature, top_k=0, top_p=1.0)
    start = time.perf_counter()
    out = model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
    tokens = tuple(int(t) for t in out[0, len(prompt_ids) :])
    return GenerationResult(
        prompt_ids=tuple(prompt_ids),
        tokens=tokens,
        text=tokenizer.decode(list(tokens)),
        events=(),
        finish_reason="transformers",
        seconds=time.perf_counter() - start,
    )


def distances(
    plan: LeverPlan,
    models: Models,
    tokenizer: Any,
    request: Request,
    prompt_ids: list[int],
    stop: frozenset[int],
) -> list[dict[str, Any]]:
    """Each lever's greedy agreement and mean TV from the reference on this request."""
    new = request.max_new_tokens
    greedy = {
        lever.name: decode(
            lever,
            models,
            plan,
            tokenizer,
            prompt_ids,
            sampling=SamplingConfig(temperature=0.0),
            max_new_tokens=new,
            stop=stop,
        ).tokens
        for lever in plan.levers
    }
    reference = models[("target", "fp32")]
    sampled = autoregressive_generate(
        reference,
        tokenizer,
        prompt_ids,
        sampling=SamplingConfig(temperature=1.0, seed=0),
        max_new_tokens=new,
        stop=stop,
    ).tokens
    ids = [*prompt_ids, *sampled]
    tv: dict[tuple[str, str], float] = {}
    for lever in plan.levers:
        if lever.law_model not in tv:
            model = models[lever.law_model]
            tv[lever.law_model] = mean_total_variation(reference, model, ids, len(prompt_ids))
    out = []
    for lever in plan.levers:
        agree = greedy_agreement(greedy[plan.levers[0].name], greedy[lever.name])
        role, precision = lever.law_model
        out.append(
            {
                "request": request.id,
                "category": request.category,
                "lever": lever.name,
                "matched": agree.matched,
                "compared": agree.compared,
                "first_divergence": agree.first_divergence,
                "tv": tv[lever.law_model],
                "tv_of": f"{role}@{precision}",  # a speculative lever: its verifying target's
                "tv_positions": len(sampled),
            }
        )
    return out


def timed_runs(
    plan: LeverPlan,
    models: Models,
    tokenizer: Any,
    request: Request,
    prompt_ids: list[int],
    *,
    temperature: float,
    repetitions: int,
    stop: frozenset[int],
) -> list[dict[str, Any]]:
    """`repetitions` rounds of every lever at `temperature`, the order rotating each round."""
    runs = []
    n = len(plan.levers)
    for rep in range(repetitions):
        order = [plan.levers[(i + rep) % n] for i in range(n)]
        for lever in order:
            sampling = SamplingConfig(temperature=temperature, seed=rep)
            start = time.perf_counter()
            result = decode(
                lever, models, plan, tokenizer, prompt_ids, sampling=sampling,
                max_new_tokens=request.max_new_tokens, stop=stop,
            )  # fmt: skip
            seconds = time.perf_counter() - start
            runs.append(
                {
                    "request": request.id,
                    "category": request.category,
                    "temperature": temperature,
                    "lever": lever.name,
                    "rep": rep,
                    "seconds": seconds,
                    "tokens": len(result.tokens),
                    "proposed": result.proposed,
                    "accepted": result.accepted,
                    "rejected": sum(isinstance(e, Rejected) for e in result.events),
                }
            )
    return runs


def run_lever_sweep(
    plan: LeverPlan,
    models: Models,
    tokenizer: Any,
    requests: Sequence[tuple[Request, list[int], float]],
    *,
    repetitions: int,
    stop: frozenset[int],
    progress: Progress,
) -> dict[str, Any]:
    """The sweep's raw section: distances and timed runs of every (request, prompt ids, T)."""
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    measured: set[str] = set()  # a request run at two temperatures is measured once
    for i, (request, ids, temperature) in enumerate(requests):
        progress(i, len(requests), f"levers: {request.id} (T={temperature})")
        if request.id not in measured:
            rows += distances(plan, models, tokenizer, request, ids, stop)
            measured.add(request.id)
        runs += timed_runs(
            plan, models, tokenizer, request, ids, temperature=temperature,
            repetitions=repetitions, stop=stop,
        )  # fmt: skip
    progress(len(requests), len(requests), "levers: done")
    return {
        "plan": plan.to_dict(),
        "memory_bytes": {lv.name: memory_bytes(lv, models) for lv in plan.levers},
        "distances": rows,
        "runs": runs,
    }


KINDS = ("target", "draft", "spec", "hf")
REFERENCE = "target@fp32"
DEFAULT_LEVERS = (
    "target@fp32,hf@fp32,target@bf16,target@int8-weight,target@int8-dynamic,draft@fp32,"
    "spec@fp32,spec@bf16/bf16,spec@int8-weight,spec@int8-dynamic,spec@fp32/int8-weight"
)
GRAMMAR = (
    "target@P (the target alone), hf@P (the target through transformers' generate()), draft@P "
    "(the draft alone) or spec@P[/Q] (speculative: target at P, draft at Q, default fp32), P and "
    f"Q among {', '.join(PRECISIONS)}"
)


@dataclass(frozen=True, kw_only=True)
class Lever:
    """One configuration: kind (target, draft or spec) and each model's precision ('' unused)."""

    kind: str
    target: str  # the target's precision ('' for draft@P)
    draft: str  # the draft's precision ('' for target@P and hf@P)

    @property
    def name(self) -> str:
        """The lever as it is written: target@bf16, draft@fp32, spec@int8-weight/fp32."""
        if self.kind == "spec":
            return f"spec@{self.target}/{self.draft}"
        return f"{self.kind}@{self.target or self.draft}"

    @property
    def label(self) -> str:
        """For tables and plots."""
        if self.kind == "spec":
            return f"speculative: target {self.target}, draft {self.draft}"
        if self.kind == "draft":
            return f"draft alone, {self.draft}"
        if self.kind == "hf":
            return f"target {self.target}, transformers generate()"
        return f"target {self.target}"

    @property
    def speculative(self) -> bool:
        """True for speculative decoding."""
        return self.kind == "spec"

    @property
    def law_model(self) -> tuple[str, str]:
        """(role, precision) of the model whose law the lever's output follows."""
        return ("draft", self.draft) if self.kind == "draft" else ("target", self.target)

    def models(self) -> list[tuple[str, str]]:
        """Every (role, precision) the lever runs."""
        return [m for m in (("target", self.target), ("draft", self.draft)) if m[1]]


def parse_lever(text: str) -> Lever:
    """'spec@int8-weight/fp32' → Lever; ValueError naming the grammar for anything else."""
    kind, at, rest = text.strip().partition("@")
    precisions = rest.split("/") if rest else []
    bad = [p for p in precisions if p not in PRECISIONS]
    if kind not in KINDS or not at or not precisions or bad or len(precisions) > 2:
        raise ValueError(f"--levers: {text.strip()!r} is not a lever; write {GRAMMAR}")
    if kind != "spec" and len(precisions) == 2:
        raise ValueError(f"--levers: {text.strip()!r}: only spec@P/Q runs two models")
    if kind == "spec":
        return Lever(kind=kind, target=precisions[0], draft=[*precisions, "fp32"][1])
    if kind in ("target", "hf"):
        return Lever(kind=kind, target=precisions[0], draft="")
    return Lever(kind=kind, target="", draft=precisions[0])


def parse_levers(text: str) -> tuple[Lever, ...]:
    """A comma list of levers, the reference (target@fp32) first, each once."""
    levers = [parse_lever(t) for t in text.split(",") if t.strip()]
    if not levers:
        raise ValueError(f"--levers lists no lever; write {GRAMMAR}")
    names = [lever.name for lever in levers]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"--levers names {', '.join(twice)} more than once: give each once")
    reference = parse_lever(REFERENCE)
    rest = [lever for lever in levers if lever != reference]
    return (reference, *rest)  # every distance is measured from the reference: always run
