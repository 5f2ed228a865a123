"""Where a drafting-head drafter finds its weights, and which target forward it verifies with.

Each head drafter reads one weights file, {kind}.safetensors, trained on one target's features:
by default the file shipped for the bundled target (specviz/assets/heads/), else the one in the
folder `--heads DIR` names. `check_heads` refuses, before any model loads, a folder or a file
that is not there; whether the weights fit the target (its fingerprint) is checked when the
drafter is built, once the target has loaded.

A head drafter verifies through its own cached forward of the target (it shares the target's
cache, SharesTargetCache), which records the features the head reads. `head_forward` picks that
forward so that it is the one plain decoding runs on in the same comparison: specviz.fast.lean's
(where it applies) with --lean-target, transformers' without. A head's speedup is then never the
lean forward's own.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from specviz.drafters.names import HEAD_DRAFTERS, drafter_spec

ASSETS = Path(__file__).resolve().parent.parent / "assets" / "heads"  # {kind}.safetensors


def head_path(kind: str) -> Path:
    """The shipped weights of one head kind."""
    return ASSETS / f"{kind}.safetensors"


def train_command(kind: str) -> str:
    """How the weights of a head kind are trained and shipped (python -m specviz.train)."""
    if kind == "medusa":
        return "python -m specviz.train data features, then heads medusa, then heads export medusa"
    return "python -m specviz.train heads all (the EAGLE-3 head's whole pipeline)"


def weights_path(kind: str, heads: str | Path | None) -> Path:
    """Where the weights of a head kind lie: heads/{kind}.safetensors, or the shipped file."""
    if heads is None:
        return head_path(kind)
    return Path(heads) / f"{kind}.safetensors"


def heads_problem(drafter: str, heads: str | Path | None) -> str | None:
    """Why a head drafter finds no weights file (None: it does, or drafter is not a head one).

    heads: the folder given (None: the shipped weights).
    """
    kind = drafter_spec(drafter).head
    if kind is None:
        return None
    path = weights_path(kind, heads)
    if path.is_file():
        return None
    if heads is None:
        return (
            f"the {drafter} drafter reads the {kind} head shipped for the bundled target, and "
            f"{path} is not there: train it ({train_command(kind)}), pass --heads with "
            "a folder of weights trained for your target, or pick another drafter"
        )
    if not Path(heads).is_dir():
        return f"--heads {heads}: no such folder (give the folder that holds {kind}.safetensors)"
    return (
        f"--heads {heads} holds no {kind}.safetensors, which the {drafter} drafter reads: train "
        f"one for your target ({train_command(kind)}), or give the folder that holds it"
    )


def check_heads(drafters: Iterable[str], heads: str | None, flag: str = "--drafter") -> None:
    """ValueError, saying what to change, unless every head drafter among drafters finds its
    weights; --heads (heads not None) with no head drafter at all is refused too.

    flag: how the command line names its drafter choice (--drafter, --drafters).
    """
    used = [d for d in drafters if d in HEAD_DRAFTERS]
    if heads is not None and not used:
        raise ValueError(
            f"--heads gives the drafting heads' weights: it applies to {flag} eagle, medusa "
            "and the drafters made of them"
        )
    for drafter in used:
        problem = heads_problem(drafter, heads)
        if problem is not None:
            raise ValueError(problem)
