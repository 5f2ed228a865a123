"""Step ``heads export``: ship a trained head into specviz/assets/heads, with its summary.

``heads export medusa`` copies ``head-medusa/medusa.safetensors`` (written when training stops)
and writes ``medusa.json`` beside it: parameters, bytes, data digest, training positions and
time, the config, and the held-out measurements of step ``heads eval`` when they exist.

``heads export eagle3`` ships the EAGLE-3 head of a ``heads train`` checkpoint.

Reads ``ckpt.pt`` and ``curve.jsonl`` from a heads train output folder
(``specviz.train.heads.eagle``; by default the work dir's head-eagle3). A run still training
rewrites its checkpoint every few minutes: point ``--from-checkpoint`` at a copy of the folder;
nothing is written into it. Writes into the package (specviz/assets/heads):

* ``eagle3.safetensors``: the head in bf16 with the target's fingerprint
  (``specviz.heads.weights.save_eagle``);
* ``eagle3.json``: parameters, bytes, the training step, positions trained (every weighted
  position, and the answer positions among them), hours, the training config, the held-out
  curve rows up to that step (α_d: the chance that the d-th drafted token is kept at T = 1,
  on the held-out shards), and the draft vocabulary: its size and its *coverage*, the share of
  the target's answer tokens inside it, counted over the ids shards' training and held-out
  answers (``specviz.train.heads.vocab``), and the size it trained at (``--vocab`` cuts it to the
  tokens the target writes most often); and, as ``heads_eval``, the measurements of step
  ``heads eval eagle3`` (α and greedy agreement per draft position on its code and chat prompts,
  c) where they were taken on this step's weights.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from specviz.heads.eagle import Eagle3Head, EagleShape
from specviz.heads.lookup import ASSETS
from specviz.heads.weights import EAGLE_FILE, load_eagle, model_label, save_eagle
from specviz.train.common import load_target, write_json_atomic
from specviz.train.data.features import feature_dir
from specviz.train.heads.evaluate import eval_path
from specviz.train.heads.medusa import head_dir
from specviz.train.heads.vocab import answer_counts, coverage, training_ids, trim_head


def head_of_checkpoint(path: Path, target: Any) -> tuple[Eagle3Head, dict[str, Any]]:
    """The head saved in the heads train checkpoint at path (float32, eval) and the checkpoint."""
    if not path.is_file():
        raise ValueError(
            f"no heads train checkpoint at {path}: give --from-checkpoint the folder of a "
            "`python -m specviz.train heads train` run (a copy, if it still trains)"
        )
    ckpt: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=False)
    state = ckpt["head"]
    head = Eagle3Head(EagleShape.of(target.config), state["vocab"].long())
    head.load_state_dict(state)
    return head.float().eval(), ckpt


def curve_rows(path: Path, step: int) -> list[dict[str, Any]]:
    """The held-out rows of curve.jsonl at path up to step (none without the file)."""
    if not path.is_file():
        return []
    rows = [json.loads(r) for r in path.read_text(encoding="utf-8").splitlines() if r.strip()]
    return [r for r in rows if int(r["step"]) <= step]


def training_counts(ids_dir: Path, vocab_size: int) -> torch.Tensor:
    """How often each token (V,) is an answer token in ids_dir's training shards."""
    train = training_ids(ids_dir)
    if not train:
        raise ValueError(f"no ids shards in {ids_dir}: give --ids the folder of regen's ids")
    return answer_counts(train, vocab_size)


def vocab_coverage(
    vocab: torch.Tensor, ids_dir: Path, vocab_size: int, counts: torch.Tensor
) -> dict[str, Any]:
    """The draft vocabulary's size and coverage of the answers in ids_dir's shards (counts:
    training_counts(ids_dir, vocab_size))."""
    train, held = training_ids(ids_dir), training_ids(ids_dir, held_out=True)
    out: dict[str, Any] = {
        "size": int(vocab.shape[0]),
        "ids": str(ids_dir),
        "shards": len(train),
        "answer_tokens": int(counts.sum()),
        "coverage": round(coverage(counts, vocab), 5),
    }
    if held:
        held_counts = answer_counts(held, vocab_size)
        out |= {
            "held_out_shards": len(held),
            "held_out_answer_tokens": int(held_counts.sum()),
            "held_out_coverage": round(coverage(held_counts, vocab), 5),
        }
    return out


def run_eagle_export(
    folder: Path, ids_dir: Path, threads: int, out: Path = ASSETS, vocab: int | None = None
) -> dict[str, Any]:
    """Write out/eagle3.safetensors and out/eagle3.json from the checkpoint in folder; vocab:
    cut the draft vocabulary to that many tokens first (``specviz.train.heads.vocab.trim_head``, by
    the answers' counts in ids_dir; None: as trained)."""
    target, _ = load_target(threads)
    head, ckpt = head_of_checkpoint(folder / "ckpt.pt", target)
    trained, size = head.size, int(target.config.vocab_size)
    if vocab is not None and not 0 < vocab <= trained:
        raise ValueError(f"--vocab {vocab}: give at most the {trained} tokens it trained on")
    counts = training_counts(ids_dir, size)  # read once: the cut and the coverage
    if vocab is not None:
        head = trim_head(head, counts, vocab)
    state = ckpt["state"]
    step = int(state["step"])
    weights = save_eagle(head, target, step, out)
    summary: dict[str, Any] = {
        "parameters": sum(p.numel() for p in head.parameters()),
        "weights_bytes": weights.stat().st_size,
        "target": model_label(target),
        "steps": step,
        "trained_positions": int(state["positions"]),
        "trained_answer_positions": int(state["answer_positions"]),
        "hours": round(float(state["elapsed"]) / 3600, 3),
        "config": ckpt.get("config", {}),
        "draft_vocab": vocab_coverage(head.vocab, ids_dir, size, counts)
        | {"trained_size": trained},
        "held_out": curve_rows(folder / "curve.jsonl", step),
    }
    evaluation = eval_path("eagle3")  # heads eval eagle3, attached if taken on this step
    if evaluation.is_file():
        measured = json.loads(evaluation.read_text(encoding="utf-8"))
        if measured.get("steps") == step:
            summary["heads_eval"] = measured
    write_json_atomic(out / "eagle3.json", summary)
    return summary


Rows = list[dict[str, Any]]


def warm_start(folder: Path, target: Any) -> tuple[Eagle3Head, dict[str, Any], Rows]:
    """The head exported into folder (eagle3.safetensors and eagle3.json, as this step writes
    them), its training progress (step, positions, hours) and its held-out rows: what a heads train
    run without a checkpoint starts from when given --init. The optimizer's moments are not
    exported: the run warms its learning rate up again over the config's warm-up steps."""
    summary_path = folder / "eagle3.json"
    if not summary_path.is_file() or not (folder / EAGLE_FILE).is_file():
        raise ValueError(
            f"no exported EAGLE-3 head in {folder}: give --init a folder holding {EAGLE_FILE} and "
            "eagle3.json (python -m specviz.train heads export eagle3 --out FOLDER writes them)"
        )
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    head = load_eagle(target, folder / EAGLE_FILE).float().train()
    step = int(summary["steps"])
    state: dict[str, Any] = {
        "step": step,
        "positions": int(summary["trained_positions"]),
        "answer_positions": int(summary["trained_answer_positions"]),
        "elapsed": float(summary["hours"]) * 3600,
        "warm_start": step,
    }
    state["last_eval"] = state["elapsed"]
    rows = [r for r in summary.get("held_out", []) if int(r["step"]) <= step]
    return head, state, rows


def shards_sha256() -> str:
    """sha256 over the feature shards' bytes, in name order (what the heads trained on)."""
    digest = hashlib.sha256()
    for path in sorted(feature_dir().glob("features_*.pt")):
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def run_medusa_export(kind: str) -> dict[str, Any]:
    """Copy the trained weights of `kind` into the package; return the summary written."""
    folder = head_dir(kind)
    weights = folder / f"{kind}.safetensors"
    if not weights.is_file():
        raise SystemExit(f"no {weights}: run `python -m specviz.train heads medusa` first")
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
