"""The app's form: example prompts, defaults, and widget values → validated settings (no torch)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from specviz.bench.workloads import WORKLOADS, load_requests
from specviz.config import SamplingConfig, SpeculationConfig

BUNDLED = "bundled"  # the same word specviz.models uses for the bundled pair
LABELS = {"code": "code", "json": "structured JSON", "repeat": "repeat / rewrite the prompt"}
LABELS |= {"prose": "open-ended story"}
MODEL, NGRAM = "draft model", "n-gram lookup (no model)"
DRAFTERS = [MODEL, NGRAM]
POLICIES = ["fixed", "heuristic", "theory"]  # the names specviz.policies.make_policy takes
DEFAULTS = {"gamma": 4, "temperature": 0.7, "top_k": 0, "top_p": 1.0, "max_new": 48, "seed": 0}
FIELDS = (  # the order the handlers receive widget values in
    *("target", "draft", "dtype", "drafter", "policy", "prompt"),
    *("gamma", "temperature", "top_k", "top_p", "max_new", "seed"),
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
    draft: str | None  # None: the n-gram drafter needs no draft model
    dtype: str
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
        return cls(
            target=(v["target"] or "").strip() or BUNDLED,
            draft=(v["draft"] or "").strip() or BUNDLED if v["drafter"] == MODEL else None,
            dtype=str(v["dtype"]),
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
        pair = {"target": self.target, "draft": self.draft, "dtype": self.dtype}
        pair |= {"drafter": MODEL if self.draft else NGRAM, "gamma_policy": self.policy}
        return {**pair, **asdict(self.sampling), **asdict(self.speculation), "prompt": self.prompt}
