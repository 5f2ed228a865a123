"""The held-out set a head's curve reads: no prompt that a training shard holds, and exported
heads scored on it again (specviz.train.data.heldout)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from specviz.train.data.heldout import held_out_batches, held_out_sequences
from specviz.train.data.shards import _write_ids, read_ids
from specviz.train.data.stream import RegenStream, collate
from specviz.train.heads.eagle import EagleTrainer
from specviz.train.heads.score import score_exported
from tests.train.test_eagle_training import CFG, _model, trained_and_exported, write_shards


def test_the_held_out_set_leaves_out_prompts_a_training_shard_holds(tmp_path: Path) -> None:
    stream = write_shards(_model(), tmp_path, range(8))
    every = held_out_sequences(stream, 100)
    assert len(every) == 4  # the control: random shards share no prompt, all of shard 7 is kept
    shared = every[1]
    start = int(shared["start"])
    ids = read_ids(tmp_path / "ids_00003.json.gz")
    ids["tokens"][2] = [*shared["tokens"][:start].tolist(), 7, 7, 7]  # its prompt, another answer
    ids["start"][2] = start
    _write_ids(tmp_path / "ids_00003.json.gz", ids)
    kept = held_out_sequences(stream, 100)
    assert [s["tokens"].tolist() for s in kept] == [
        s["tokens"].tolist() for s in every if s is not shared
    ]
    ids["start"][2] = start + 1  # a longer prompt that starts the same way is another prompt
    _write_ids(tmp_path / "ids_00003.json.gz", ids)
    assert len(held_out_sequences(stream, 100)) == 4
    assert len(held_out_sequences(stream, 2)) == 2
    batches = held_out_batches(stream, 100, 16)
    assert sum(int(b["tokens"].shape[0]) for b in batches) == 4


def test_an_exported_head_is_scored_on_the_held_out_set_as_training_scored_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specviz.train.__main__ import main

    model, stream, summary = trained_and_exported(tmp_path, monkeypatch)
    trained = [json.loads(line) for line in (tmp_path / "first" / "curve.jsonl").open()][-1]
    exported = tmp_path / "exported"
    (row,) = score_exported([exported], model, stream)
    assert (row["step"], row["positions"], row["eval_positions"], row["loss"]) == (
        10, summary["trained_positions"], trained["eval_positions"], "tv"
    )  # fmt: skip
    assert row["vocab"] == summary["draft_vocab"]["size"]
    about = json.loads((exported / "eagle3.json").read_text())
    about["config"]["device"] = "cuda:7"  # trained on a GPU: scored where the target is
    (exported / "eagle3.json").write_text(json.dumps(about))
    assert score_exported([exported], model, stream) == [row]
    for d in range(1, 6):  # the exported weights are bf16: close to the run's own reading
        assert row[f"alpha_{d}"] == pytest.approx(trained[f"alpha_{d}"], abs=0.02)
    monkeypatch.setattr("specviz.train.heads.cli.load_target", lambda threads: (model, None))
    monkeypatch.setenv("SPECVIZ_TRAIN_DIR", str(tmp_path / "work"))  # the command's logs
    curve = tmp_path / "curve.jsonl"
    data = ["--ids", str(tmp_path / "data"), "--feats", str(tmp_path / "data")]
    main(["heads", "score", str(exported), "--append", str(curve), *data])
    assert [json.loads(line) for line in curve.open()] == [row]
    with pytest.raises(SystemExit, match=r"no eagle3.json in .*heads export eagle3 --out"):
        main(["heads", "score", str(tmp_path / "none"), *data])


def test_held_out_alpha_is_measured_in_float32_when_training_autocasts_to_bf16(
    tmp_path: Path,
) -> None:
    model = _model()
    stream = write_shards(model, tmp_path, range(8))
    held = held_out_batches(stream, 4, 16)
    plain = EagleTrainer(CFG, model, torch.arange(20))
    mixed = EagleTrainer(replace(CFG, bf16=True), model, torch.arange(20))
    mixed.head.load_state_dict(plain.head.state_dict())
    assert mixed.evaluate(held) == plain.evaluate(held)  # float32 both: rows compare
    batch = collate(RegenStream(stream).next_batch(), 16, 0.1)
    a, b = float(plain.loss(batch, "tv")[0]), float(mixed.loss(batch, "tv")[0])
    assert a != b and b == pytest.approx(a, abs=0.05)  # the control: training autocasts
