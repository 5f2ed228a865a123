"""Step ``heads all``: the EAGLE-3 head's whole pipeline in one command, on one device.

For a machine with a GPU: ``python -m specviz.train heads all --device cuda --minutes 10``.

1. Data (``specviz.train.data.regen``): shards 0 .. shards - 1 of the target's own answers, the
   held-out ones early (so that a budget spent early still trains and evaluates). A shard
   whose token ids are already in the ids folder (``data/heads/answers`` ships many) is rescored
   in one teacher-forced pass; the others are generated, `batch` rows at once. Features and the
   manifest go to out/regen.
2. Draft vocabulary: the V_d most frequent tokens of the training shards' answers
   (``specviz.train.heads.vocab``), picked when training starts afresh.
3. Training (``specviz.train.heads.eagle``): the aligned loss after a KL warm-up, resumable from
   out/head/ckpt.pt, until `steps` or the time left.
4. Evaluation: held-out α_1..α_depth every `eval_every` steps and at the end, in
   out/head/curve.jsonl.
5. Export: out/head/eagle3.safetensors (``specviz.heads.weights``), for drafting.

The time budget covers all of it: data generation stops at `data_share` of the minutes, and
training takes what is left (evaluation and export included). The returned summary holds the
data's counts and seconds, the training's progress and the last held-out row.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import Tensor

from specviz.train.data.regen import RegenConfig, run_regen
from specviz.train.data.stream import is_held_out
from specviz.train.heads.eagle import EagleConfig, run_eagle


@dataclass(frozen=True, kw_only=True)
class PipelineConfig:
    """The pipeline's sizes: shards to make or rescore, training steps, and the time budget."""

    shards: int = 200
    steps: int = 4000
    minutes: float = 10.0
    data_share: float = 0.4  # of the minutes, at most, for the data
    regen: RegenConfig = field(default_factory=lambda: RegenConfig(batch=64))
    eagle: EagleConfig = field(default_factory=EagleConfig)

    def _held_out(self, index: int) -> bool:
        return is_held_out(index, self.regen.val_every, self.regen.val_shard)

    def order(self) -> list[int]:
        """Shards 0 .. shards - 1 in the order made: the first held-out and the first training
        shard, then the other held-out ones, then the rest, so a short budget still trains and
        evaluates."""
        held_out = [i for i in range(self.shards) if self._held_out(i)]
        training = [i for i in range(self.shards) if not self._held_out(i)]
        return held_out[:1] + training[:1] + held_out[1:] + training[1:]

    def __post_init__(self) -> None:
        if self.shards < 2 or self.steps < 1:
            raise ValueError(
                f"shards must be >= 2 and steps >= 1 (got {self.shards}, {self.steps})"
            )
        if not self.minutes > 0 or not 0 < self.data_share < 1:
            raise ValueError(
                f"minutes must be > 0 and data_share in (0, 1) (got {self.minutes}, "
                f"{self.data_share})"
            )
        if not any(self._held_out(i) for i in range(self.shards)):
            raise ValueError(
                f"shards 0..{self.shards - 1} hold no held-out shard (index % "
                f"{self.regen.val_every} == {self.regen.val_shard}): make more shards"
            )


def run_pipeline(
    cfg: PipelineConfig,
    target: Any,
    tokenizer: Any,
    ids_dir: Path,
    out_dir: Path,
    *,
    pool: list[tuple[str, str]] | None = None,
    fill: Tensor | None = None,
) -> dict[str, Any]:
    """Data, vocabulary, training, evaluation and export for target (on its device).

    ids_dir: the token ids of the shards (read where present, written where made); out_dir:
    features, checkpoint, curve and weights; pool: the prompt pool (default the regen's own);
    fill: the order unseen tokens join the draft vocabulary in. Returns the summary.
    """
    began = time.monotonic()
    budget = cfg.minutes * 60.0
    regen_out = out_dir / "regen"
    manifest = run_regen(
        cfg.regen,
        cfg.order(),
        ids_dir,
        budget * cfg.data_share,
        0,
        loaded=(target, tokenizer),
        out_dir=regen_out,
        pool=pool,
    )
    data_seconds = time.monotonic() - began
    h = cfg.eagle
    stream = h.stream(regen_out, ids_dir)
    head_dir = out_dir / "head"
    left = max(budget - data_seconds, 1.0)
    progress = run_eagle(h, target, stream, head_dir, cfg.steps, left, fill, final_eval=True)
    curve = head_dir / "curve.jsonl"
    rows = curve.read_text(encoding="utf-8").splitlines() if curve.is_file() else []
    shards = manifest["shards"].values()
    summary = {
        "data": {
            "shards": len(manifest["shards"]),
            "positions": sum(s["positions"] for s in shards),
            "answer_tokens": sum(s["answer_tokens"] for s in shards),
            "seconds": round(data_seconds, 1),
        },
        "training": progress,
        "held_out": json.loads(rows[-1]) if rows else None,
        "weights": str(head_dir / "eagle3.safetensors"),
        "seconds": round(time.monotonic() - began, 1),
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary
