"""Step ``draft export``: the trained draft as a bf16 HF folder with the target's tokenizer."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, GenerationConfig

from specviz.drafters.trimmed import save_ranking
from specviz.models.bundled import bundled_draft_dir, ensure_bundled_target
from specviz.train.common import work_dir, write_json_atomic
from specviz.train.data.teacher import shard_dir
from specviz.train.draft.evaluate import load_draft
from specviz.train.draft.student import student_dir

VOCAB = 49_152  # SmolLM2's vocabulary

LOG = logging.getLogger("specviz.train.draft.export")


def teacher_stats() -> dict[str, Any]:
    """Shard count and teacher positions by kind (reads every shard; a few seconds)."""
    kinds: dict[str, int] = {}
    shards = sorted(shard_dir().glob("shard_*.pt"))
    for path in shards:
        shard = torch.load(path, weights_only=False)
        n = sum(int(r["ids"].shape[0]) for r in shard["records"])
        kinds[shard["kind"]] = kinds.get(shard["kind"], 0) + n
    return {"shards": len(shards), "positions_by_kind": kinds}


def token_ranking() -> torch.Tensor:
    """Every token id (V,), by the target's total probability over the training shards' top-32.

    Held-out shards (index % 20 == 1) are left out; ties (tokens never in any top-32) keep id
    order. This is the ranking the trimmed-head drafter keeps the start of
    (specviz.drafters.trimmed).
    """
    mass = torch.zeros(VOCAB, dtype=torch.float64)
    for path in sorted(shard_dir().glob("shard_*.pt")):
        if int(path.stem.split("_")[1]) % 20 == 1:
            continue
        for record in torch.load(path, weights_only=False)["records"]:
            probs = record["logp"].double().exp().flatten()
            mass.index_add_(0, record["ids"].long().flatten(), probs)
    return torch.sort(-mass, stable=True).indices


def run_export(out: str | None) -> dict[str, Any]:
    """Save the checkpoint's draft (bf16 safetensors + tokenizer) into ``out``; return a summary."""
    folder = Path(out) if out else bundled_draft_dir()
    folder.mkdir(parents=True, exist_ok=True)
    draft = load_draft(None).to(torch.bfloat16)
    draft.config._name_or_path = "specviz/assets/draft"
    draft.save_pretrained(folder, safe_serialization=True)
    target = ensure_bundled_target(lambda m: LOG.info("%s", m))
    AutoTokenizer.from_pretrained(target).save_pretrained(folder)
    GenerationConfig.from_pretrained(target).save_pretrained(folder)
    save_ranking(token_ranking(), folder)
    state = json.loads((student_dir() / "metrics.json").read_text(encoding="utf-8"))
    corpus = json.loads((work_dir() / "corpus" / "manifest.json").read_text(encoding="utf-8"))
    summary = {
        "parameters": sum(p.numel() for p in draft.parameters()),
        "weights_bytes": (folder / "model.safetensors").stat().st_size,
        "student": {k: state[k] for k in ("step", "elapsed", "positions", "cfg")},
        "last_history": state["history"][-3:],
        "corpus": corpus,
        "teacher": teacher_stats(),
    }
    write_json_atomic(folder / "training_summary.json", summary)
    LOG.info("exported to %s: %s", folder, summary)
    return summary
