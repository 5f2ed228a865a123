"""specviz.drafters.names owns every drafter fact: the name lists are derived from the
DrafterSpec each name gets, and `in` a list asks the fact of any name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import specviz
from specviz.drafters import names as registry
from specviz.drafters.names import DRAFTER_NAMES, REGISTRY, drafter_spec

PACKAGE = Path(specviz.__file__).parent


def test_facts_hang_together() -> None:
    for spec in REGISTRY.values():
        if spec.head is not None:  # a head reads the target's features: it shares its cache
            assert spec.shares_target_cache and not spec.uses_draft_model, spec.name
            assert not spec.reads_confidence, spec.name  # heads never stop on their q
        if spec.reads_width or spec.tree:
            assert spec.tree and not spec.batchable, spec.name
        if spec.trims_head:
            assert spec.uses_draft_model, spec.name
        if spec.batchable:  # a chain of the draft model or lookup, or lookup first, else model
            assert not (spec.tree or spec.shares_target_cache), spec.name
            assert not spec.hybrid or spec.name.startswith("ngram+model"), spec.name


def test_lists_are_the_facts() -> None:
    assert tuple(n for n in DRAFTER_NAMES if REGISTRY[n].head) == registry.HEAD_DRAFTERS
    assert dict(registry.HEAD_KIND) == {n: REGISTRY[n].head for n in registry.HEAD_DRAFTERS}
    assert set(registry.TREE_DRAFTERS) | set(registry.CHAIN_DRAFTERS) == set(DRAFTER_NAMES)
    assert not set(registry.TREE_DRAFTERS) & set(registry.CHAIN_DRAFTERS)
    assert set(registry.HEAD_DRAFTERS) <= set(registry.SHARED_CACHE_DRAFTERS)
    assert set(registry.BATCH_DRAFTERS) <= set(registry.CHAIN_DRAFTERS)
    assert tuple(sorted(set(registry.HEAD_KIND.values()))) == registry.HEAD_KINDS
    assert set(registry.CHAIN_OF) <= set(registry.TREE_DRAFTERS)
    assert set(registry.CHAIN_OF.values()) <= set(registry.CHAIN_DRAFTERS)


def test_a_name_off_the_list_is_asked_its_facts() -> None:
    """ngram+medusa is no menu's name, yet a drafter's: the lists answer for it by its facts."""
    assert "ngram+medusa" not in DRAFTER_NAMES
    assert "ngram+medusa" in registry.HEAD_DRAFTERS and "ngram+medusa" in registry.HYBRID_DRAFTERS
    assert "ngram+medusa" not in registry.TREE_DRAFTERS and "nonsense" not in registry.ALL_DRAFTERS
    assert (
        drafter_spec("ngram+medusa").label
        == "n-gram lookup, else Medusa heads on the target's features"
    )


def _name_lists(path: Path) -> list[int]:
    """Lines of path holding a literal tuple, list, set or dict (its keys) of two or more
    registered names."""
    names = set(DRAFTER_NAMES)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        elements = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and elements is not None:
            strings = [e.value for e in elements if isinstance(e, ast.Constant)]
            if sum(isinstance(s, str) and s in names for s in strings) >= 2:
                found.append(node.lineno)
    return found


def test_no_list_of_drafter_names_outside_the_registry() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name not in ("names.py", "families.py", "builders.py")
        and (lines := _name_lists(path))
    }
    assert offenders == {}


def test_scan_catches_a_literal_list(tmp_path: Path) -> None:
    """The negative control: the scan finds a list of names where one is written."""
    path = tmp_path / "bad.py"
    path.write_text(
        'LOOKUP = ("ngram", "tree-ngram")\nOK = ("ngram",)\n'
        'OF = {"tree-ngram": "ngram", "tree-model": 1}\n',
        encoding="utf-8",
    )
    assert _name_lists(path) == [1, 3]


def test_a_plus_without_its_lookup_is_refused() -> None:
    for name in ("+model", "ngram+", "ngram+ngram", "model+eagle"):
        with pytest.raises(ValueError, match="unknown drafter"):
            drafter_spec(name)
    assert drafter_spec("ngram+model").hybrid and not drafter_spec("model").hybrid
