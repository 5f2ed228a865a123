"""The app's form: example prompts, defaults, and widget values → validated settings (no torch)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from specviz.bench.workloads import WORKLOADS, load_requests
from specviz.core.config import SamplingConfig, SpeculationConfig

BUNDLED = "bundled"  # the same word specviz.models.loading uses for the bundled pair
LABELS = {"code": "code", "json": "structured JSON", "repeat": "repeat / rewrite the prompt"}
LABELS |= {"prose": "open-ended story"}
MODEL, NGRAM = "draft model", "n-gram lookup (no model)"
TRIMMED = "draft model, head trimmed to 8k tokens"  # specviz.drafters.trimmed: q = 0 off the head
EARLY_EXIT = "early exit (self-speculation)"  # the target's first exit_layer layers draft
EARLY_EXIT_SHARED = "early exit, sharing the target's KV cache"  # specviz.drafters.shared_exit
EXITS = (EARLY_EXIT, EARLY_EXIT_SHARED)
HYBRID = "n-gram lookup, else draft model (trimmed head)"  # specviz.drafters.hybrid
DRAFTERS = [MODEL, TRIMMED, NGRAM, HYBRID, *EXITS]
POLICIES = ["fixed", "heuristic", "theory"]  # the names specviz.gamma.policies.make_policy takes
DEFAULTS = {"gamma": 4, "temperature": 0.7, "top_k": 0, "top_p": 1.0, "max_new": 48, "seed": 0}
DEFAULTS |= {"exit_layer": 8, "confidence": 0.0}
FIELDS = (  # the order the handlers receive widget values in
    *("target", "draft", "dtype", "drafter", "policy", "prompt"),
    *("gamma", "temperature", "top_k", "top_p", "max_new", "seed", "exit_layer", "confidence"),
)


def examples() -> dict[str, str]:
    """An example prompt per benchmark workload (its first request), by display label."""
    return {LABELS.get(name, name): load_requests(name)[0].prompt for name in WORKLOADS}


def as_float(name: str, value: Any) -> float:
    """A number from a UI field, or a ValueError naming the field."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number (got {value!r})") from None


def as_int(name: str, value: Any) -> int:
    """A whole number from a UI field, or a ValueError naming the field."""
    number = as_float(name, value)
    if isinstance(value, bool) or not number.is_integer():
        raise ValueError(f"{name} must be a whole number (got {value!r})")
    return int(number)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Validated UI inputs for one decode (dtype is checked when the models load)."""

    target: str
    draft: str | None  # None: n-gram and early-exit drafters need no draft model
    dtype: str
    drafter: str  # one of DRAFTERS
    exit_layer: int  # early exit: the target's layers that draft
    min_confidence: float  # model drafters stop drafting after a token with top q below it
    policy: str
    prompt: str
    sampling: SamplingConfig
    speculation: SpeculationConfig

    @classmethod
    def parse(cls, *values: Any) -> Settings:
        """From widget values in FIELDS order; ValueError with a readable message if bad."""
        v = dict(zip(FIELDS, values, strict=True))
        if not (v["prompt"] or "").strip():
            raise ValueError("the prompt is empty: type some text or pick an example")
        if v["drafter"] not in DRAFTERS:
            raise ValueError(f"drafter must be one of {DRAFTERS} (got {v['drafter']!r})")
        if v["policy"] not in POLICIES:
            raise ValueError(f"gamma policy must be one of {POLICIES} (got {v['policy']!r})")
        if (exit_layer := as_int("exit layer", v["exit_layer"])) < 1:
            raise ValueError(f"exit layer must be at least 1 (got {exit_layer})")
        if not 0 <= (confidence := as_float("confidence threshold", v["confidence"])) <= 1:
            raise ValueError(f"confidence threshold must be in [0, 1] (got {confidence})")
        return cls(
            target=(v["target"] or "").strip() or BUNDLED,
            draft=(v["draft"] or "").strip() or BUNDLED
            if v["drafter"] in (MODEL, TRIMMED, HYBRID)
            else None,
            dtype=str(v["dtype"]),
            drafter=v["drafter"],
            exit_layer=exit_layer,
            min_confidence=confidence,
            policy=v["policy"],
            prompt=v["prompt"],
            sampling=SamplingConfig(
                temperature=as_float("temperature", v["temperature"]),
                top_k=as_int("top-k", v["top_k"]),
                top_p=as_float("top-p", v["top_p"]),
                seed=as_int("seed", v["seed"]),
            ),
            speculation=SpeculationConfig(
                gamma=as_int("γ", v["gamma"]),
                max_new_tokens=as_int("max new tokens", v["max_new"]),
            ),
        )

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings for the summary and export."""
        pair: dict[str, Any] = {"target": self.target, "draft": self.draft, "dtype": self.dtype}
        pair |= {"drafter": self.drafter, "gamma_policy": self.policy}
        if self.drafter in EXITS:
            pair["exit_layer"] = self.exit_layer
        if self.drafter != NGRAM:
            pair["min_confidence"] = self.min_confidence
        return {**pair, **asdict(self.sampling), **asdict(self.speculation), "prompt": self.prompt}
