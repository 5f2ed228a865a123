"""Step ``heads score``: exported EAGLE-3 heads scored again on the held-out set.

``score_exported`` scores heads exported with their summary (``heads export eagle3``) on the
held-out set (``specviz.train.data.heldout``): a curve row each, at the step it was exported
from, so the snapshots of a run can be scored again on a corrected set, each at the positions
and hours it had trained.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specviz.train.data.heldout import Batch, held_out_batches
from specviz.train.data.stream import StreamConfig
from specviz.train.heads.eagle import EagleConfig, EagleTrainer, active_loss, curve_row
from specviz.train.heads.export import warm_start


def score_exported(folders: list[Path], target: Any, stream: StreamConfig) -> list[dict[str, Any]]:
    """The curve row of each head exported in folders, scored on the held-out set (built once
    per size and length the heads' configs ask for): its step, positions, answer positions and
    hours as exported, its loss at that step, its draft vocabulary's size (``vocab``: a head
    cut by ``heads export eagle3 --vocab`` scores below its training size), the set's size and
    α_1 … α_depth
    (``specviz.train.heads.eagle.EagleTrainer.evaluate``)."""
    held: dict[tuple[int, int], list[Batch]] = {}
    rows = []
    for folder in folders:
        head, state, _ = warm_start(folder, target)
        saved = json.loads((folder / "eagle3.json").read_text(encoding="utf-8"))["config"]
        fields = EagleConfig.__dataclass_fields__
        kept = {k: v for k, v in saved.items() if k in fields}
        cfg = EagleConfig(**kept | {"device": str(target.device)})  # where it scores, not trained
        trainer = EagleTrainer(cfg, target, head.vocab.cpu())
        trainer.head.load_state_dict(head.state_dict())
        key = (cfg.eval_sequences, cfg.max_len)
        if key not in held:
            held[key] = held_out_batches(stream, *key)
        alphas, positions = trainer.evaluate(held[key])
        kind = active_loss(cfg, state["step"] - 1)
        extra = {"scored_from": "export", "vocab": head.size}
        rows.append(curve_row(state, kind, positions, alphas, extra))
    return rows
