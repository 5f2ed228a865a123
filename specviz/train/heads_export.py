"""Step ``heads-export``: ship a trained head into specviz/assets/heads with its summary.

Copies ``head-{kind}/{kind}.safetensors`` (written when training stops) and writes
``{kind}.json`` beside it: parameters, bytes, data digest, training positions and time, the
config, and the held-out measurements of step ``heads-eval`` when they exist.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from typing import Any

from safetensors.torch import load_file

from specviz.heads.lookup import ASSETS
from specviz.train.common import write_json_atomic
from specviz.train.features import feature_dir
from specviz.train.heads import head_dir
from specviz.train.heads_eval import eval_path


def shards_sha256() -> str:
    """sha256 over the feature shards' bytes, in name order (what the heads trained on)."""
    digest = hashlib.sha256()
    for path in sorted(feature_dir().glob("features_*.pt")):
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def run_heads_export(kind: str) -> dict[str, Any]:
    """Copy the trained weights of `kind` into the package; return the summary written."""
    folder = head_dir(kind)
    weights = folder / f"{kind}.safetensors"
    if not weights.is_file():
        raise SystemExit(f"no {weights}: run `python -m specviz.train heads {kind}` first")
    ASSETS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(weights, ASSETS / weights.name)
    tensors = load_file(str(weights))
    metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    summary: dict[str, Any] = {
        "parameters": sum(t.numel() for n, t in tensors.items() if n != "head_tokens"),
        "weights_bytes": weights.stat().st_size,
        "data": metrics["data"],
        "shards": metrics["shards"],
        "shards_sha256": shards_sha256(),
        "train_sequences": metrics["train_sequences"],
        "train_positions": metrics["train_positions"],
        "steps": metrics["step"],
        "trained_positions": metrics["positions"],
        "hours": round(metrics["elapsed"] / 3600, 3),
        "config": metrics["config"],
        "last_validation": metrics["history"][-1] if metrics["history"] else {},
    }
    evaluation = eval_path(kind)
    if evaluation.is_file():
        summary["held_out"] = json.loads(evaluation.read_text(encoding="utf-8"))
    write_json_atomic(ASSETS / f"{kind}.json", summary)
    return summary
