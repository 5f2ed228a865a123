"""The app's form: example prompts, defaults, and widget values → validated settings (no torch).

FIELDS is the form's one list of controls: the app's Gradio callbacks take their values by
these names (its inputs and API list them in this order), and every handler gets the Settings
that Settings.parse makes of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.names import (
    DEFAULT_CONFIG,
    DRAFTER_NAMES,
    EXIT_DRAFTERS,
    HEAD_KIND,
    RAW_WORKLOADS,
    REGISTRY,
    TREE_DRAFTERS,
    UNCONFIDENT_DRAFTERS,
    WIDE_DRAFTERS,
    WORKLOAD_CONFIGS,
)
from specviz.drafters.options import DefaultConfig, DrafterOptions
from specviz.gamma.policies import POLICY_NAMES
from specviz.heads.lookup import heads_problem, weights_path
from specviz.workloads import WORKLOADS, load_requests

BUNDLED = "bundled"  # the same word specviz.models.loading uses for the bundled pair
LABELS = {"code": "code", "json": "structured JSON", "repeat": "repeat / rewrite the prompt"}
LABELS |= {"prose": "open-ended story"}
# Which settings the summary shows for a drafter comes from the registry's facts about it
# (EXIT_DRAFTERS read exit_layer, UNCONFIDENT_DRAFTERS no confidence threshold, ...).
POLICIES = list(POLICY_NAMES)  # the names specviz.gamma.policies.make_policy takes
# How a tree round is verified: the names of specviz.tree.verify's rules, with the menu's labels.
# Only the exact rule follows the target's law; it is the default.
TREE_RULE_CHOICES = {
    "exact": "exact (default)",
    "typical": "typical acceptance — lossy, does not follow the target's law",
}


# How a prompt reaches the model (specviz.models.chat): the form's "raw" field, True for raw.
PROMPT_FORMATS = {
    False: "chat template: the prompt is a request, answered by the instruct model",
    True: "raw completion: the model continues the text as written (code)",
}
# The example prompts continued as written: through the chat template the instruct model
# answers a code prompt in prose, and runs out of tokens before any code.


def example_is_raw(label: str) -> bool:
    """True when the example prompt shown as label is sent as raw completion."""
    return label in {LABELS.get(name, name) for name in RAW_WORKLOADS}


def preset(config: DefaultConfig, raw: bool | None = None) -> dict[str, Any]:
    """The form's values for a registry configuration (PRESET_FIELDS; no top-k, no top-p);
    raw: the prompt format it sets (None: it leaves the form's as it is)."""
    values = {"drafter": config.drafter, "policy": config.policy, "gamma": config.gamma}
    values |= {"temperature": config.temperature, "top_k": 0, "top_p": 1.0}
    return values if raw is None else values | {"raw": raw}


# The first preset is the registry's DEFAULT_CONFIG (what `specviz generate` runs with no
# flags); the classic preset is the textbook picture: a draft model alone, sampling at T = 0.7;
# then the fastest exact setting of each other kind of request (the registry's WORKLOAD_CONFIGS).
FASTEST = preset(DEFAULT_CONFIG, raw=True)  # for code: raw completion
CLASSIC = preset(replace(DEFAULT_CONFIG, drafter="model", gamma=4, temperature=0.7))
PRESETS = {"fastest exact (the benchmark's best for code)": FASTEST}
PRESETS |= {"classic draft model (T = 0.7, γ = 4)": CLASSIC}
PRESETS |= {
    f"fastest exact for {LABELS[kind]}": preset(config, raw=kind in RAW_WORKLOADS)
    for kind, config in WORKLOAD_CONFIGS.items()
    if config != DEFAULT_CONFIG
}
PRESET_FIELDS = tuple(FASTEST)  # the fields a preset may set, in this order
DEFAULTS: dict[str, Any] = {**FASTEST, "max_new": 64, "seed": 0, "exit_layer": 8}
DEFAULTS |= {"confidence": 0.0, "tree_rule": "exact"}  # raw: the code example's, True
_TREE = DrafterOptions()
DEFAULTS |= {"tree_nodes": _TREE.tree_nodes, "tree_depth": _TREE.tree_depth}
DEFAULTS |= {"tree_width": _TREE.tree_width}
FIELDS = (  # the form's controls, by the names the handlers read their values under
    *("target", "draft", "dtype", "drafter", "policy", "prompt", "raw"),
    *("gamma", "temperature", "top_k", "top_p", "max_new", "seed", "exit_layer", "confidence"),
    *("tree_nodes", "tree_depth", "tree_width", "tree_rule"),
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
    "tree_nodes": Range("tree nodes", 1, 64, whole=True),
    "tree_depth": Range("tree depth", 1, 16, whole=True),
    "tree_width": Range("tree width", 1, 16, whole=True),
}
DRAFTER_FIELDS = (  # the fields that apply to some drafters only, in the form's order
    *("exit_layer", "exit_note", "confidence", "gamma", "policy"),
    *("tree_nodes", "tree_depth", "tree_width", "tree_rule"),
)


def shown_fields(drafter: Any) -> dict[str, bool]:
    """Which drafter-specific fields (DRAFTER_FIELDS) apply to a drafter, so the form shows
    them: the early exit's layer (and its note) for the early exits only, the confidence
    threshold for the chain drafters with a q; γ and its policy for the chain drafters, the
    tree's budget, depth, width (where read) and verification rule for the tree drafters.
    Settings.parse reads only these and leaves the others at their defaults."""
    exits, tree = drafter in EXIT_DRAFTERS, drafter in TREE_DRAFTERS
    return {
        "exit_layer": exits,
        "exit_note": exits,
        "confidence": not tree and drafter not in UNCONFIDENT_DRAFTERS,
        "gamma": not tree,
        "policy": not tree,
        "tree_nodes": tree,
        "tree_depth": tree,
        "tree_width": drafter in WIDE_DRAFTERS,
        "tree_rule": tree,
    }


TREE_NOTE = (
    " A tree drafts up to *tree depth* levels a round, so γ and the γ policy do not apply "
    "(hidden); each round's tree is drawn in the **Tree rounds** tab."
)


def drafter_note(name: Any, heads: str | None = None) -> str:
    """Markdown under the drafter menu: the chosen drafter's whole label and what it does (the
    menu may cut a long label short); for a tree drafter, why γ is gone and where its trees are;
    for a drafting head, the weights it reads from (heads: their folder, None: the shipped
    ones), or why it cannot draft."""
    if name not in REGISTRY:
        return ""
    spec = REGISTRY[name]
    note = f"**{spec.label}**: {spec.description}." + (TREE_NOTE if spec.tree else "")
    if name in HEAD_KIND:
        problem = heads_problem(name, heads)
        path = weights_path(HEAD_KIND[name], heads)
        note += f" **No weights**: {problem}." if problem else f" Weights: `{path}`."
    return note


def drafter_choices() -> list[tuple[str, str]]:
    """The drafter menu: (label, registry name) for every registered drafter, in its order."""
    return [(REGISTRY[name].label, name) for name in DRAFTER_NAMES]


def examples() -> dict[str, str]:
    """An example prompt per benchmark workload (its first request), by display label."""
    return {LABELS.get(name, name): load_requests(name)[0].prompt for name in WORKLOADS}


def parse_raw(value: Any) -> bool:
    """The prompt format field: True (or 'raw') for raw completion, False (or 'chat') for the
    chat template; a ValueError for anything else."""
    formats = {True: True, "raw": True, False: False, "chat": False}
    if isinstance(value, bool | str) and value in formats:
        return formats[value]
    raise ValueError(f"prompt format must be raw completion (True) or chat (False), got {value!r}")


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
    """Validated UI inputs for one decode (dtype is checked when the models load).

    Fields that do not apply to the drafter (shown_fields) keep their defaults whatever the
    form holds: a tree drafter's γ is its depth and its policy fixed; a chain drafter's tree
    fields are the defaults (unused).
    """

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
    tree_nodes: int = DEFAULTS["tree_nodes"]
    tree_depth: int = DEFAULTS["tree_depth"]
    tree_width: int = DEFAULTS["tree_width"]
    tree_rule: str = "exact"  # a name in TREE_RULE_CHOICES

    @property
    def tree(self) -> bool:
        """True for a tree drafter (its rounds are verified as trees)."""
        return self.drafter in TREE_DRAFTERS

    @property
    def exact(self) -> bool:
        """False when a lossy tree rule verifies: the output then is not the target's law."""
        return not self.tree or self.tree_rule == "exact"

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> Settings:
        """From every field in FIELDS by name; ValueError with a readable message if bad (a
        number outside its RANGES is refused with the range, never clamped). Only the fields
        that apply to the drafter are read."""
        v = fields_of(values, FIELDS)
        if not (v["prompt"] or "").strip():
            raise ValueError("the prompt is empty: type some text or pick an example")
        if v["drafter"] not in REGISTRY:
            names = ", ".join(DRAFTER_NAMES)
            raise ValueError(f"drafter must be one of {names} (got {v['drafter']!r})")
        applies = shown_fields(v["drafter"])
        if applies["policy"] and v["policy"] not in POLICIES:
            raise ValueError(f"gamma policy must be one of {POLICIES} (got {v['policy']!r})")
        if applies["tree_rule"] and v["tree_rule"] not in TREE_RULE_CHOICES:
            rules = list(TREE_RULE_CHOICES)
            raise ValueError(f"tree rule must be one of {rules} (got {v['tree_rule']!r})")
        n = {
            name: r.check(v[name]) if applies.get(name, True) else DEFAULTS[name]
            for name, r in RANGES.items()
        }
        tree = applies["tree_depth"]
        uses_draft = REGISTRY[v["drafter"]].uses_draft_model
        return cls(
            target=(v["target"] or "").strip() or BUNDLED,
            draft=(v["draft"] or "").strip() or BUNDLED if uses_draft else None,
            dtype=str(v["dtype"]),
            drafter=v["drafter"],
            exit_layer=int(n["exit_layer"]),
            min_confidence=n["confidence"],
            policy=v["policy"] if applies["policy"] else "fixed",
            prompt=v["prompt"],
            raw=parse_raw(v["raw"]),
            sampling=SamplingConfig(
                temperature=n["temperature"],
                top_k=int(n["top_k"]),
                top_p=n["top_p"],
                seed=int(n["seed"]),
            ),
            speculation=SpeculationConfig(
                gamma=int(n["tree_depth"] if tree else n["gamma"]),
                max_new_tokens=int(n["max_new"]),
            ),
            tree_nodes=int(n["tree_nodes"]),
            tree_depth=int(n["tree_depth"]),
            tree_width=int(n["tree_width"]),
            tree_rule=v["tree_rule"] if applies["tree_rule"] else "exact",
        )

    def options(self, heads: str | None = None) -> DrafterOptions:
        """The registry's drafter options these settings give (the rest at their defaults);
        heads: the drafting heads' weights folder (None: the shipped ones)."""
        return DrafterOptions(
            exit_layer=self.exit_layer,
            min_confidence=self.min_confidence,
            tree_nodes=self.tree_nodes,
            tree_depth=self.tree_depth,
            tree_width=self.tree_width,
            heads=heads,
        )

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings for the summary and export: the fields the drafter reads (a
        tree's budget and rule, whether its output follows the target's law; or γ's policy)."""
        applies = shown_fields(self.drafter)
        pair: dict[str, Any] = {"target": self.target, "draft": self.draft, "dtype": self.dtype}
        pair |= {"drafter": self.drafter}
        if applies["policy"]:
            pair["gamma_policy"] = self.policy
        pair["raw_completion"] = self.raw
        if applies["exit_layer"]:
            pair["exit_layer"] = self.exit_layer
        if applies["confidence"]:
            pair["min_confidence"] = self.min_confidence
        speculation = asdict(self.speculation)
        if self.tree:
            del speculation["gamma"]  # the tree's depth
            pair |= {"tree_nodes": self.tree_nodes, "tree_depth": self.tree_depth}
            if applies["tree_width"]:
                pair["tree_width"] = self.tree_width
            pair |= {"tree_rule": self.tree_rule, "follows_target_law": self.exact}
        return {**pair, **asdict(self.sampling), **speculation, "prompt": self.prompt}
