"""`specviz generate` pinned: the tokens and events of fixed seeds on tiny models never change.

The expected values in golden/generate.json were recorded once; a refactor that changes one
token, one event or one event's order fails here. Timing fields are left out (they vary).
Regenerate only for an intended change in behaviour: SPECVIZ_WRITE_GOLDEN=1 pytest this file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from specviz.cli import main

from .conftest import VOCAB, PairFactory

GOLDEN = Path(__file__).parent / "golden" / "generate.json"

CASES: dict[str, list[str]] = {
    "model-T0": ["--temperature", "0"],
    "model-T1-seed0": ["--seed", "0"],
    "model-T1-seed7": ["--seed", "7", "--top-k", "12", "--top-p", "0.9"],
    "model-trimmed-T1": ["--drafter", "model-trimmed", "--seed", "3"],
    "ngram-T1": ["--drafter", "ngram", "--seed", "1"],
    "ngram+model-T1": ["--drafter", "ngram+model", "--seed", "2", "--model-gamma", "2"],
    "ngram+model-trimmed-T0": ["--drafter", "ngram+model-trimmed", "--temperature", "0"],
    "early-exit-T1": ["--drafter", "early-exit", "--exit-layer", "1", "--seed", "5"],
    "early-exit-shared-T1": ["--drafter", "early-exit-shared", "--exit-layer", "1", "--seed", "5"],
    "heuristic-T1": ["--gamma-policy", "heuristic", "--seed", "4"],
    "theory-T1": ["--gamma-policy", "theory", "--seed", "4", "--gamma", "6"],
    "lean-target-T1": ["--lean-target", "--seed", "6"],
    "plain-T1": ["--plain", "--seed", "6"],
}


@pytest.fixture(scope="module")
def folders(pair: PairFactory, tokenizer: Any, tmp_path_factory: Any) -> tuple[Path, Path]:
    from safetensors.torch import save_file

    root = tmp_path_factory.mktemp("golden-models")
    target, draft = pair("llama")
    for name, model in (("target", target), ("draft", draft)):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    ranking = (
        torch.arange(VOCAB).flip(0).to(torch.int32).contiguous()
    )  # the trimmed head's token ranking
    save_file({"ranking": ranking}, str(root / "draft" / "token_ranking.safetensors"))
    return root / "target", root / "draft"


def run_case(folders: tuple[Path, Path], extra: list[str], tmp_path: Path) -> dict[str, Any]:
    """Tokens and timing-free events of one `specviz generate` run."""
    events = tmp_path / "events.jsonl"
    argv = ["generate", "--target", str(folders[0]), "--draft", str(folders[1])]
    argv += ["--prompt", "zzz qqq", "--max-new-tokens", "20"]
    argv += ["--dtype", "float64", "--gamma", "3", "--json", "--events", str(events), *extra]
    assert main(argv) == 0
    logged = [json.loads(line) for line in events.read_text().splitlines()]
    timeless = [{k: v for k, v in e.items() if not k.endswith("seconds")} for e in logged]
    return {"events": timeless}


@pytest.mark.parametrize("case", sorted(CASES))
def test_generate_matches_the_pinned_run(
    folders: tuple[Path, Path], tmp_path: Path, capsys: Any, case: str
) -> None:
    got = run_case(folders, CASES[case], tmp_path)
    tokens = json.loads(capsys.readouterr().out)["tokens"]
    got["tokens"] = tokens
    if os.environ.get("SPECVIZ_WRITE_GOLDEN"):
        pinned = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
        GOLDEN.write_text(json.dumps(pinned | {case: got}, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(GOLDEN.read_text())[case]
    assert got["tokens"] == pinned["tokens"]
    assert got["events"] == pinned["events"]
