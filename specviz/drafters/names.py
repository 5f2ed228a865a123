"""Every drafter's name: a family (specviz.drafters.families), maybe combined; what it is.

A name is built from the families with two combinators, each written once:

    FAMILY[:VARIANT]                 model, model:trimmed, ngram, suffix, early-exit:shared,
                                     eagle, medusa, cross, cross:text
    LOOKUP+FAMILY[:VARIANT]          lookup first (ngram or suffix), the family where it finds
                                     nothing good: ngram+model:trimmed, suffix+eagle, ...
    tree-FAMILY[:VARIANT]            the family grows a tree of tokens, verified in one pass:
                                     tree-model, tree-model:sampled, tree-ngram, tree-eagle

`drafter_spec(name)` says what a name's drafter is (DrafterSpec) and refuses a name that is
not one, naming the close matches; specviz.drafters.registry builds it. Nothing here loads
torch: the app's views read the names, labels and facts. DRAFTER_NAMES lists each family's
variants, each lookup before the model and the EAGLE head, and each family's trees: the menus'
names and the ones the tests run.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from specviz.drafters.families import FAMILIES, Family
from specviz.drafters.options import DefaultConfig, DrafterSpec

LOOKUPS = tuple(name for name, f in FAMILIES.items() if f.lookup)


@dataclass(frozen=True, kw_only=True)
class Choice:
    """A parsed drafter name: a family and its variant, maybe after a lookup or as a tree."""

    family: str
    variant: str = ""
    lookup: str | None = None
    tree: bool = False

    @property
    def name(self) -> str:
        """The canonical name (a default variant is not written)."""
        inner = f"tree-{self.family}" if self.tree else self.family
        inner = f"{inner}:{self.variant}" if self.variant else inner
        return f"{self.lookup}+{inner}" if self.lookup else inner


def parse(name: str) -> Choice:
    """The Choice a drafter name stands for, or a one-line ValueError naming the close matches."""
    lookup_name, plus, rest = name.rpartition("+")
    tree = rest.startswith("tree-")
    family, _, variant = rest.removeprefix("tree-").partition(":")
    problem = _problem(lookup_name if plus else None, family, variant, tree, rest)
    if problem:
        raise ValueError(f"unknown drafter {name!r}: {problem}{_close(name)}")
    return Choice(family=family, variant=variant, lookup=lookup_name or None, tree=tree)


def _problem(lookup_name: str | None, family: str, variant: str, tree: bool, rest: str) -> str:
    """Why the parts do not make a drafter ('' when they do)."""
    if family not in FAMILIES:
        return f"{family!r} is no family ({', '.join(FAMILIES)})"
    spec = FAMILIES[family]
    variants = spec.tree_variants if tree else spec.variants
    if tree and not spec.grows_trees:
        return "tree-FAMILY takes a family that grows trees (model, ngram, suffix, eagle, medusa)"
    if variant not in variants or (variant == "" and rest.endswith(":")):
        return f"{family} takes the variants {_listed(variants)}"
    if lookup_name is not None:
        return _lookup_problem(lookup_name, spec, tree)
    return ""


def _lookup_problem(lookup_name: str, spec: Family, tree: bool) -> str:
    """Why LOOKUP+family is not a drafter ('' when it is)."""
    if lookup_name not in LOOKUPS:
        return f"only a lookup ({', '.join(LOOKUPS)}) comes before '+'"
    if tree or spec.lookup or spec.cross_tokenizer:
        return "a lookup goes before a chain of model, early-exit, eagle or medusa"
    return ""


def _listed(variants: Mapping[str, str]) -> str:
    return ", ".join(f":{v}" if v else "(none)" for v in variants)


def _close(name: str) -> str:
    """'; did you mean ...?' with the registered names closest to name, or ''."""
    known = dict.fromkeys([*DRAFTER_NAMES, *FAMILIES])
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else "; `specviz drafters` lists them"


def drafter_spec(name: str) -> DrafterSpec:
    """What the drafter called name is: its facts, labels and factory (ValueError if none)."""
    choice = parse(name)
    family = FAMILIES[choice.family]
    return DrafterSpec(
        name=choice.name,
        label=_label(choice),
        description=_description(choice),
        uses_draft_model=family.uses_draft_model,
        tree=choice.tree,
        chain=replace(choice, tree=False, variant="").name if choice.tree else None,
        head=family.head,
        shares_target_cache=family.head is not None or choice.variant == "shared",
        reads_confidence=family.reads_confidence and not choice.tree,
        reads_exit_layer=family.reads_exit_layer,
        reads_width=family.reads_width and choice.tree,
        trims_head=choice.variant == "trimmed",
        untrimmed=replace(choice, variant="").name if choice.variant == "trimmed" else None,
        hybrid=choice.lookup is not None,
        batchable=family.batchable and not choice.tree and choice.lookup in (None, "ngram"),
        remembers=family.remembers or choice.lookup == "suffix",
        cross_tokenizer=family.cross_tokenizer,
    )


def _label(choice: Choice) -> str:
    """The app's menu label."""
    family = FAMILIES[choice.family]
    variants = family.tree_variants if choice.tree else family.variants
    label = family.label + (f", {variants[choice.variant]}" if choice.variant else "")
    if choice.tree:
        label = f"tree: {label}"
    if choice.lookup:
        first = FAMILIES[choice.lookup].label.split(" (")[0].split(":")[0]
        label = f"{first}, else {label}"
    return label


def _description(choice: Choice) -> str:
    """One line for the docs and `specviz drafters`."""
    family = FAMILIES[choice.family]
    text = family.description
    if choice.tree:
        text = f"a tree of tokens, one target pass: {text}"
    if choice.lookup:
        text = f"{choice.lookup} where it finds a good match; elsewhere {text}"
    return text


def _names() -> tuple[str, ...]:
    """Each family with each variant, each lookup before the draft model and the EAGLE head,
    and each family's trees with their variants."""
    chains = [Choice(family=f, variant=v) for f, spec in FAMILIES.items() for v in spec.variants]
    combined = [
        replace(c, lookup=lookup_name)
        for lookup_name in LOOKUPS
        for c in chains
        if c.family in ("model", "eagle")
    ]
    trees = [
        Choice(family=f, variant=v, tree=True)
        for f, spec in FAMILIES.items()
        if spec.grows_trees
        for v in spec.tree_variants
    ]
    return tuple(c.name for c in (*chains, *combined, *trees))


DRAFTER_NAMES: tuple[str, ...] = _names()
# the listed names' entries (any other valid name: drafter_spec)
REGISTRY: Mapping[str, DrafterSpec] = MappingProxyType({n: drafter_spec(n) for n in DRAFTER_NAMES})
# The fastest exact configuration the benchmark measured for code at T = 0 (the headline table
# of README.md, rendered from benchmarks/results/; tests/test_defaults.py ties the two).
DEFAULT_CONFIG = DefaultConfig(
    drafter="ngram+model:trimmed",
    batch_drafter="model:trimmed",
    gamma=3,
    policy="fixed",
    temperature=0.0,
    forward="lean",
)
# The fastest exact configuration measured for each kind of request at T = 0 (the headline's
# rows): `specviz generate --preset KIND` and the app's presets. Code's is DEFAULT_CONFIG, what
# runs where nothing names the kind; the forward stays the machine's (DEFAULT_CONFIG's or a
# tuned profile's). tests/test_defaults.py ties each to its row of the saved report.
WORKLOAD_CONFIGS: Mapping[str, DefaultConfig] = MappingProxyType(
    {
        "code": DEFAULT_CONFIG,
        "json": replace(DEFAULT_CONFIG, drafter="ngram+eagle"),
        "repeat": replace(DEFAULT_CONFIG, drafter="suffix", gamma=16),
    }
)


class Drafters(tuple[str, ...]):
    """The names of DRAFTER_NAMES for which a fact of their DrafterSpec holds, in their order;
    `name in` it asks the fact of any drafter name (False for one that is not a drafter's)."""

    fact: Callable[[DrafterSpec], bool]

    def __new__(cls, fact: Callable[[DrafterSpec], bool]) -> Drafters:
        names = super().__new__(cls, (n for n in DRAFTER_NAMES if fact(drafter_spec(n))))
        names.fact = fact
        return names

    def __contains__(self, name: object) -> bool:
        """Whether name is a drafter's, of which the fact holds."""
        if not isinstance(name, str):
            return False
        try:
            return self.fact(drafter_spec(name))
        except ValueError:
            return False


# the kinds of request whose prompt goes in as raw completion, not through the chat template:
# code continues its own text (through the template, "def fibonacci(n):" is answered in prose)
RAW_WORKLOADS = ("code",)


def drafters_where(fact: Callable[[DrafterSpec], bool]) -> Drafters:
    """The listed drafters of which fact holds; `in` answers for any name (Drafters)."""
    return Drafters(fact)


# Every list of drafter names is derived here from the facts each DrafterSpec states.
ALL_DRAFTERS = drafters_where(lambda _s: True)  # the listed ones; `in` takes any drafter's name
TREE_DRAFTERS = drafters_where(lambda s: s.tree)
CHAIN_DRAFTERS = drafters_where(lambda s: not s.tree)
MODEL_DRAFTERS = drafters_where(lambda s: s.uses_draft_model)
# a tree drafter → the chain drafter it is compared with (the same proposer, one child a node)
CHAIN_OF: Mapping[str, str] = MappingProxyType(
    {n: s.chain for n in TREE_DRAFTERS if (s := drafter_spec(n)).chain}
)
HEAD_DRAFTERS = drafters_where(lambda s: s.head is not None)  # all share the target's cache
HEAD_KIND: Mapping[str, str] = MappingProxyType(
    {n: s.head for n in HEAD_DRAFTERS if (s := drafter_spec(n)).head}
)
HEAD_KINDS = tuple(sorted({f.head for f in FAMILIES.values() if f.head}))
SHARED_CACHE_DRAFTERS = drafters_where(lambda s: s.shares_target_cache)
EXIT_DRAFTERS = drafters_where(lambda s: s.reads_exit_layer)
UNCONFIDENT_DRAFTERS = drafters_where(lambda s: not s.reads_confidence)
WIDE_DRAFTERS = drafters_where(lambda s: s.reads_width)
HYBRID_DRAFTERS = drafters_where(lambda s: s.hybrid)
BATCH_DRAFTERS = drafters_where(lambda s: s.batchable)
MEMORY_DRAFTERS = drafters_where(lambda s: s.remembers)  # they read DrafterOptions.memory
CROSS_TOKENIZER_DRAFTERS = drafters_where(lambda s: s.cross_tokenizer)  # another tokenizer
# the draft model drafting a chain alone (no lookup in front, no tree)
CHAIN_MODEL_DRAFTERS = drafters_where(lambda s: s.uses_draft_model and not (s.tree or s.hybrid))
