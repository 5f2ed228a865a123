"""A lever: one way of producing tokens, at the precision each of its models runs at.

- target@P: the target alone (plain decoding) at precision P (specviz.quant.precision);
  target@fp32 is the reference every distance is measured from.
- draft@P: the draft model alone at P: "the small model", a different model.
- spec@P or spec@P/Q: speculative decoding, the target at P verifying, the draft at Q drafting
  (Q defaults to fp32). Its law is its verifying target's, whatever Q.
- hf@P: transformers' own generate() of the target at P, the plain baseline a user has.

decode runs a lever on loaded models (Models: the model of each (role, precision));
distances measures each lever's distance from the reference on one request: greedy agreement
and first divergence at T = 0, and the mean total variation of the next-token law of the model
whose law the lever follows along the reference's own sample at T = 1 (seed 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specviz.api import GenerationResult, autoregressive_generate, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.registry import build_drafter
from specviz.models.generate import generate
from specviz.quant.distance import greedy_agreement, mean_total_variation
from specviz.quant.precision import PRECISIONS, weight_bytes

Models = dict[tuple[str, str], Any]  # (role, precision) → loaded model


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


def memory_bytes(lever: Lever, models: Models) -> int:
    """Bytes of the weights the lever holds (each model once; packed copies not counted)."""
    return sum(weight_bytes(models[m]) for m in lever.models())


def decode(
    lever: Lever,
    models: Models,
    tokenizer: Any,
    prompt_ids: list[int],
    *,
    drafter: str,
    gamma: int,
    sampling: SamplingConfig,
    max_new_tokens: int,
    stop: frozenset[int],
) -> GenerationResult:
    """One decode of prompt_ids by the lever: a speculative one with a fresh `drafter` at
    `gamma`; hf@P's as a GenerationResult without events (transformers draws from torch's
    global generator, so at T > 0 its tokens are timed, never compared)."""
    model = models[lever.law_model]
    if lever.kind == "hf":
        seconds, tokens = generate(model, prompt_ids, max_new_tokens, sampling.temperature)
        return GenerationResult(
            prompt_ids=tuple(prompt_ids),
            tokens=tuple(tokens),
            text=tokenizer.decode(tokens),
            events=(),
            finish_reason="transformers",
            seconds=seconds,
        )
    if not lever.speculative:
        return autoregressive_generate(
            model,
            tokenizer,
            prompt_ids,
            sampling=sampling,
            max_new_tokens=max_new_tokens,
            stop=stop,
        )
    target, draft = models[("target", lever.target)], models[("draft", lever.draft)]
    built = build_drafter(drafter, target=target, draft=draft, sampling=sampling)
    speculation = SpeculationConfig(gamma=gamma, max_new_tokens=max_new_tokens)
    return speculative_generate(
        target, built, tokenizer, prompt_ids, sampling=sampling, speculation=speculation, stop=stop
    )


def distances(
    levers: Sequence[Lever],
    models: Models,
    tokenizer: Any,
    prompt_ids: list[int],
    max_new_tokens: int,
    stop: frozenset[int],
    **speculation: Any,
) -> list[dict[str, Any]]:
    """Each lever's greedy agreement with the first (the reference, target@fp32) and mean TV
    from it on one prompt (speculation: decode's drafter and gamma)."""
    greedy = {
        lever.name: decode(
            lever,
            models,
            tokenizer,
            prompt_ids,
            sampling=SamplingConfig(temperature=0.0),
            max_new_tokens=max_new_tokens,
            stop=stop,
            **speculation,
        ).tokens
        for lever in levers
    }
    reference = models[("target", "fp32")]
    sampled = autoregressive_generate(
        reference,
        tokenizer,
        prompt_ids,
        sampling=SamplingConfig(temperature=1.0, seed=0),
        max_new_tokens=max_new_tokens,
        stop=stop,
    ).tokens
    ids = [*prompt_ids, *sampled]
    tv: dict[tuple[str, str], float] = {}
    for lever in levers:
        if lever.law_model not in tv:
            model = models[lever.law_model]
            tv[lever.law_model] = mean_total_variation(reference, model, ids, len(prompt_ids))
    out = []
    for lever in levers:
        agree = greedy_agreement(greedy[levers[0].name], greedy[lever.name])
        role, precision = lever.law_model
        out.append(
            {
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
