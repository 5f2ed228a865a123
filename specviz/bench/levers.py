"""The levers: speculation beside the other speed-ups, each a runnable configuration.

A lever names how tokens are produced and at which precision each model runs:
- target@P: the target alone (plain decoding) at precision P (specviz.quant.precision);
  target@fp32 is the reference every distance is measured from.
- draft@P: the draft model alone at P: "the small model", a different model.
- spec@P or spec@P/Q: speculative decoding, the target at P verifying, the draft at Q drafting
  (Q defaults to fp32). Its law is its verifying target's, whatever Q.
- hf@P: transformers' own generate() of the target at P, the plain baseline a user has already.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.quant.precision import PRECISIONS

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
