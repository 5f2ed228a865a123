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
# The defaults are the fastest exact setting the benchmark measured for code at T = 0 (the
# headline table of README.md, rendered from benchmarks/results/ by specviz.bench.headline);
# the classic preset is the textbook picture: a draft model alone, sampling at T = 0.7.
FASTEST = {"drafter": "ngram+model-trimmed", "policy": "fixed", "gamma": 3, "temperature": 0.0}
FASTEST |= {"top_k": 0, "top_p": 1.0}
CLASSIC = {"drafter": "model", "policy": "fixed", "gamma": 4, "temperature": 0.7}
CLASSIC |= {"top_k": 0, "top_p": 1.0}
PRESETS = {"fastest exact (the benchmark's best for code)": FASTEST}
PRESETS |= {"classic draft model (T = 0.7, γ = 4)": CLASSIC}
PRESET_FIELDS = tuple(FASTEST)  # the fields a preset sets, in this order
DEFAULTS: dict[str, Any] = {**FASTEST, "max_new": 64, "seed": 0, "exit_layer": 8}
DEFAULTS |= {"confidence": 0.0, "raw": False}
FIELDS = (  # the form's controls, by the names the handlers read their values under
    *("target", "draft", "dtype", "drafter", "policy", "prompt", "raw"),
    *("gamma", "temperature", "top_k", "top_p", "max_new", "seed", "exit_layer", "confidence"),
)


@dataclass(frozen=True)
class Range:
    """The values a number field takes: lo to hi (None: unbounded); lo itself excluded if open."""

    label: str
    lo: float
    hi: float | None = None
    whole: bool = False  # a whole number
    open_lo: bool = False

    def text(self) -> str:
        """'1–16', '> 0 and ≤ 1' or '≥ 0': the range as the field's label shows it."""
        lo, hi = _num(self.lo), None if self.hi is None else _num(self.hi)
        if self.open_lo:
            return f"> {lo} and ≤ {hi}" if hi is not None else f"> {lo}"
        return f"{lo}–{hi}" if hi is not None else f"≥ {lo}"

    def check(self, value: Any) -> float:
        """The field's value, or a ValueError that names the field and its allowed range."""
        number = as_int(self.label, value) if self.whole else as_float(self.label, value)
        below = number <= self.lo if self.open_lo else number < self.lo
        if below or (self.hi is not None and number > self.hi) or number != number:
            if self.hi is None:
                allowed = f"{'greater than' if self.open_lo else 'at least'} {_num(self.lo)}"
            elif self.open_lo:
                allowed = f"greater than {_num(self.lo)} and at most {_num(self.hi)}"
            else:
                allowed = f"between {_num(self.lo)} and {_num(self.hi)}"
            raise ValueError(f"{self.label} must be {allowed} (got {_num(number)})")
        return number


def _num(x: float) -> str:
    return f"{x:g}"


# Every number field's allowed values: the form refuses anything else with the range, so no
# value is ever clamped or rounded silently (the widgets do not clamp: they are plain numbers).
RANGES = {
    "gamma": Range("γ (draft tokens per round)", 1, 16, whole=True),
    "temperature": Range("temperature", 0, 2),
    "top_k": Range("top-k", 0, whole=True),
    "top_p": Range("top-p", 0, 1, open_lo=True),
    "max_new": Range("max new tokens", 1, 512, whole=True),
    "seed": Range("seed", 0, whole=True),
    "exit_layer": Range("exit layer", 1, whole=True),
    "confidence": Range("confidence threshold", 0, 1),
}


def shown_fields(drafter: Any) -> dict[str, bool]:
    """Which drafter-specific fields the form shows for a drafter: the early exit's layer (and
    its note) for the early exits only, the confidence threshold where there is a q."""
    exits = drafter in EXIT_DRAFTERS
    return {
        "exit_layer": exits,
        "exit_note": exits,
        "confidence": drafter not in UNCONFIDENT_DRAFTERS,
    }


def drafter_note(name: Any) -> str:
    """Markdown under the drafter menu: the chosen drafter's whole label and what it does (the
    menu may cut a long label short)."""
    if name not in REGISTRY:
        return ""
    spec = REGISTRY[name]
    return f"**{spec.label}**: {spec.description}."


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
    raw: bool  # True: the prompt as raw text; False: through the chat template where there is one
    sampling: SamplingConfig
    speculation: SpeculationConfig

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> Settings:
        """From every field in FIELDS by name; ValueError with a readable message if bad (a
        number outside its RANGES is refused with the range, never clamped)."""
        v = fields_of(values, FIELDS)
        if not (v["prompt"] or "").strip():
            raise ValueError("the prompt is empty: type some text or pick an example")
        if v["drafter"] not in REGISTRY:
            names = ", ".join(DRAFTER_NAMES)
            raise ValueError(f"drafter must be one of {names} (got {v['drafter']!r})")
        if v["policy"] not in POLICIES:
            raise ValueError(f"gamma policy must be one of {POLICIES} (got {v['policy']!r})")
        n = {name: r.check(v[name]) for name, r in RANGES.items()}
        uses_draft = REGISTRY[v["drafter"]].uses_draft_model
        return cls(
            target=(v["target"] or "").strip() or BUNDLED,
            draft=(v["draft"] or "").strip() or BUNDLED if uses_draft else None,
            dtype=str(v["dtype"]),
            drafter=v["drafter"],
            exit_layer=int(n["exit_layer"]),
            min_confidence=n["confidence"],
            policy=v["policy"],
            prompt=v["prompt"],
            raw=bool(v["raw"]),
            sampling=SamplingConfig(
                temperature=n["temperature"], top_k=int(n["top_k"]), top_p=n["top_p"],
                seed=int(n["seed"]),
            ),
            speculation=SpeculationConfig(
                gamma=int(n["gamma"]), max_new_tokens=int(n["max_new"])
            ),
        )  # fmt: skip

    def options(self) -> DrafterOptions:
        """The registry's drafter options these settings give (the rest at their defaults)."""
        return DrafterOptions(exit_layer=self.exit_layer, min_confidence=self.min_confidence)

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings for the summary and export."""
        pair: dict[str, Any] = {"target": self.target, "draft": self.draft, "dtype": self.dtype}
        pair |= {"drafter": self.drafter, "gamma_policy": self.policy, "raw_completion": self.raw}
        if self.drafter in EXIT_DRAFTERS:
            pair["exit_layer"] = self.exit_layer
        if self.drafter not in UNCONFIDENT_DRAFTERS:
            pair["min_confidence"] = self.min_confidence
        return {**pair, **asdict(self.sampling), **asdict(self.speculation), "prompt": self.prompt}
