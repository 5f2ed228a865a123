"""No decoder is subclassed outside its own module: a variant of a decoder (a mutant of the
statistical suite, say) swaps a field of the frozen rule the decoder takes (AcceptanceRule,
TreeRule, BatchRule), so every variant runs the decoder's own round loop.

A decoder here is a class that runs rounds (it defines prefill, round and finish, the
specviz.core.decoding.Rounds protocol). Its subclasses are found with ast over specviz/, tests/
and tutorials/, whether the base is named directly, through an import alias or as an attribute.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEARCHED = ("specviz", "tests", "tutorials")
DECODERS = {  # each decoder and the module that defines it
    "SpeculativeDecoder": "specviz/core/decoding.py",
    "TreeDecoder": "specviz/tree/decoding.py",
    "BatchSpeculativeDecoder": "specviz/batch/decoding.py",
}
ROUNDS = {"prefill", "round", "finish"}  # the methods of a decoder that runs rounds


def sources() -> dict[str, str]:
    """Every Python file searched, by its path relative to the repository."""
    files = (p for root in SEARCHED for p in sorted((ROOT / root).rglob("*.py")))
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in files}


def decoder_classes(files: dict[str, str]) -> dict[str, str]:
    """Each class (not a protocol) that defines prefill, round and finish, and its file."""
    found: dict[str, str] = {}
    for path, source in files.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and not is_protocol(node):
                methods = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
                if methods >= ROUNDS:
                    found[node.name] = path
    return found


def is_protocol(node: ast.ClassDef) -> bool:
    """The class is a typing Protocol (it declares methods, it runs nothing)."""
    return any(isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases)


def base_name(base: ast.expr, aliases: dict[str, str]) -> str | None:
    """The class a base expression names (through `import ... as` aliases), if a plain one."""
    if isinstance(base, ast.Name):
        return aliases.get(base.id, base.id)
    if isinstance(base, ast.Attribute):
        return base.attr
    return None


def decoder_subclasses(path: str, source: str) -> list[str]:
    """`Class(Decoder)` for each class in source that subclasses a decoder defined elsewhere."""
    tree = ast.parse(source)
    aliases = {
        alias.asname: alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname
    }
    return [
        f"{node.name}({name})"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for name in (base_name(b, aliases) for b in node.bases)
        if name in DECODERS and DECODERS[name] != path
    ]


def test_the_decoders_are_the_classes_that_run_rounds() -> None:
    """The list checked below is complete: a new decoder must be added to DECODERS."""
    assert decoder_classes(sources()) == DECODERS


def test_no_decoder_is_subclassed_outside_its_own_module() -> None:
    found = {
        path: hits for path, src in sources().items() if (hits := decoder_subclasses(path, src))
    }
    assert found == {}, f"decoders subclassed (swap a rule field instead): {found}"


def test_the_check_finds_a_subclass_however_the_base_is_named() -> None:
    """Negative control: subclasses written three ways are each reported; the same class in the
    decoder's own module, and a class with an unrelated base, are not."""
    chain, tree, batch = DECODERS
    source = "\n".join(
        [
            f"from specviz.core.decoding import {chain}",
            f"from specviz.tree.decoding import {tree} as Base",
            "from specviz.batch import decoding",
            f"class Direct({chain}):\n    pass",
            "class Aliased(Base):\n    pass",
            f"class Dotted(decoding.{batch}):\n    pass",
            "class Unrelated(dict):\n    pass",
        ]
    )
    direct, aliased, dotted = f"Direct({chain})", f"Aliased({tree})", f"Dotted({batch})"
    assert decoder_subclasses("specviz/stats/broken.py", source) == [direct, aliased, dotted]
    assert decoder_subclasses(DECODERS[chain], source) == [aliased, dotted]
    assert decoder_subclasses("specviz/stats/fine.py", "class Unrelated(dict):\n    pass\n") == []
