"""`specviz generate` pinned: the tokens and events of fixed seeds on tiny models never change.

The expected values in golden/generate.json were recorded once; a refactor that changes one
token, one event or one event's order fails here. Timing fields are left out (they vary).
Regenerate only for an intended change in behaviour: SPECVIZ_WRITE_GOLDEN=1 pytest this file.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from specviz.cli import main

from .conftest import VOCAB, PairFactory

GOLDEN = Path(__file__).parent / "golden" / "generate.json"
# The flags the runs were pinned under, stated: `specviz generate` with no flags now runs the
# registry's DEFAULT_CONFIG (tests/test_defaults.py), and a case's own flags come after these.
PINNED_DEFAULTS = ["--drafter", "model", "--temperature", "1", "--no-lean-target"]

CASES: dict[str, list[str]] = {
    "model-T0": ["--temperature", "0"],
    "model-T1-seed0": ["--seed", "0"],
    "model-T1-seed7": ["--seed", "7", "--top-k", "12", "--top-p", "0.9"],
    "model-trimmed-T1": ["--drafter", "model:trimmed", "--seed", "3"],
    "ngram-T1": ["--drafter", "ngram", "--seed", "1"],
    "ngram+model-T1": ["--drafter", "ngram+model", "--seed", "2", "--model-gamma", "2"],
    "ngram+model-trimmed-T0": ["--drafter", "ngram+model:trimmed", "--temperature", "0"],
    "early-exit-T1": ["--drafter", "early-exit", "--exit-layer", "1", "--seed", "5"],
    "early-exit-shared-T1": ["--drafter", "early-exit:shared", "--exit-layer", "1", "--seed", "5"],
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
    argv += ["--dtype", "float64", "--gamma", "3", "--json", "--events", str(events)]
    argv += [*PINNED_DEFAULTS, *extra]
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
    assert same_events(got["events"], pinned["events"])


def same_events(got: Any, pinned: Any) -> bool:
    """Equal, but for floats equal to 1e-9 (relative): float64 sums are reduced in another
    order on another CPU (AVX2 against AVX-512 kernels), which moves a probability's last bits;
    every token, index, count and verdict must still be exactly the pinned one."""
    if isinstance(got, float) and isinstance(pinned, float):
        return math.isclose(got, pinned, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(got, dict) and isinstance(pinned, dict):
        return got.keys() == pinned.keys() and all(same_events(got[k], pinned[k]) for k in got)
    if isinstance(got, list) and isinstance(pinned, list):
        return len(got) == len(pinned) and all(map(same_events, got, pinned))
    return type(got) is type(pinned) and bool(got == pinned)


def test_the_comparison_catches_a_changed_event() -> None:
    """Negative controls: a token, a verdict or a probability moved by 1e-6 is a change."""
    event = {"kind": "proposed", "token": 21, "q_x": 0.6934702473072665}
    assert same_events([event], [event | {"q_x": 0.6934702473072666}])  # the last bits only
    assert not same_events([event], [event | {"token": 22}])
    assert not same_events([event], [event | {"kind": "accepted"}])
    assert not same_events([event], [event | {"q_x": 0.6934712473072665}])
    assert not same_events([event], [event, event])
