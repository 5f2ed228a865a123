"""The app's form: example prompts, defaults, and widget values → validated settings (no torch).

FIELDS is the form's one list of controls: the app's Gradio callbacks take their values by
these names (its inputs and API list them in this order), and every handler gets the Settings
that Settings.parse makes of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from specviz.bench.workloads import WORKLOADS, load_requests
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.registry import DRAFTER_NAMES, REGISTRY, DrafterOptions

BUNDLED = "bundled"  # the same word specviz.models.loading uses for the bundled pair
LABELS = {"code": "code", "json": "structured JSON", "repeat": "repeat / rewrite the prompt"}
LABELS |= {"prose": "open-ended story"}
# Which registered drafters read exit_layer, and which have no q to be confident about (the
# registry builds each one; these say which settings the summary shows for it).
EXIT_DRAFTERS = frozenset({"early-exit", "early-exit-shared"})
UNCONFIDENT_DRAFTERS = frozenset({"ngram"})
POLICIES = ["fixed", "heuristic", "theory"]  # the names specviz.gamma.policies.make_policy takes
DEFAULTS: dict[str, Any] = {"drafter": "model", "policy": "fixed"}
DEFAULTS |= {"gamma": 4, "temperature": 0.7, "top_k": 0, "top_p": 1.0, "max_new": 48, "seed": 0}
DEFAULTS |= {"exit_layer": 8, "confidence": 0.0}
FIELDS = (  # the form's controls, by the names the handlers read their values under
    *("target", "draft", "dtype", "drafter", "policy", "prompt"),
    *("gamma", "temperature", "top_k", "top_p", "max_new", "seed", "exit_layer", "confidence"),
)


def drafter_choices() -> list[tuple[str, str]]:
    """The drafter menu: (label, registry name) for every registered drafter, in its order."""
    return [(REGISTRY[name].label, name) for name in DRAFTER_NAMES]


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


def fields_of(values: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The values of exactly the fields called names (TypeError naming any missing or extra)."""
    missing, extra = [n for n in names if n not in values], sorted(set(values) - set(names))
    if missing or extra:
        raise TypeError(f"form fields missing: {missing}, unknown: {extra}")
    return {name: values[name] for name in names}


def settings_from(values: Mapping[str, Any]) -> Settings:
    """Settings from a mapping holding (at least) every field in FIELDS, by name."""
    return Settings.parse({name: values[name] for name in FIELDS if name in values})


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Validated UI inputs for one decode (dtype is checked when the models load)."""

    target: str
    draft: str | None  # None: the drafter needs no draft model (n-gram lookup, early exit)
    dtype: str
    drafter: str  # a name in specviz.drafters.registry.REGISTRY
    exit_layer: int  # early exit: the target's layers that draft
    min_confidence: float  # model drafters stop drafting after a token with top q below it
    policy: str
    prompt: str
    sampling: SamplingConfig
    speculation: SpeculationConfig

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> Settings:
        """From every field in FIELDS by name; ValueError with a readable message if bad."""
        v = fields_of(values, FIELDS)
        if not (v["prompt"] or "").strip():
            raise ValueError("the prompt is empty: type some text or pick an example")
        if v["drafter"] not in REGISTRY:
            names = ", ".join(DRAFTER_NAMES)
            raise ValueError(f"drafter must be one of {names} (got {v['drafter']!r})")
        if v["policy"] not in POLICIES:
            raise ValueError(f"gamma policy must be one of {POLICIES} (got {v['policy']!r})")
        if (exit_layer := as_int("exit layer", v["exit_layer"])) < 1:
            raise ValueError(f"exit layer must be at least 1 (got {exit_layer})")
        if not 0 <= (confidence := as_float("confidence threshold", v["confidence"])) <= 1:
            raise ValueError(f"confidence threshold must be in [0, 1] (got {confidence})")
        uses_draft = REGISTRY[v["drafter"]].uses_draft_model
        return cls(
            target=(v["target"] or "").strip() or BUNDLED,
            draft=(v["draft"] or "").strip() or BUNDLED if uses_draft else None,
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

    def options(self) -> DrafterOptions:
        """The registry's drafter options these settings give (the rest at their defaults)."""
        return DrafterOptions(exit_layer=self.exit_layer, min_confidence=self.min_confidence)

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings for the summary and export."""
        pair: dict[str, Any] = {"target": self.target, "draft": self.draft, "dtype": self.dtype}
        pair |= {"drafter": self.drafter, "gamma_policy": self.policy}
        if self.drafter in EXIT_DRAFTERS:
            pair["exit_layer"] = self.exit_layer
        if self.drafter not in UNCONFIDENT_DRAFTERS:
            pair["min_confidence"] = self.min_confidence
        return {**pair, **asdict(self.sampling), **asdict(self.speculation), "prompt": self.prompt}
