"""On-policy replay for the EAGLE-3 head: simulated rounds, replay batches, the side runs."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from specviz.train.heads.eagle import run_eagle
from specviz.train.heads.replay import (
    INDEX,
    ReplayConfig,
    load_index,
    replay_batches,
    run_replay,
    simulated_rejections,
)

from .test_eagle_training import CFG, _model, write_shards


def test_rounds_are_rejected_where_alpha_says() -> None:
    gen = torch.Generator().manual_seed(0)
    kept, rejected = torch.ones(3, 12), torch.zeros(3, 12)
    assert simulated_rejections(kept, 2, gen) == []  # every draft kept: bonus rounds only
    assert simulated_rejections(rejected, 2, gen) == list(range(2, 12))  # each first draft
    third = torch.tensor([[1.0] * 12, [1.0] * 12, [0.0] * 12])  # the third draft of a round
    # a round from root r keeps r and r + 1, rejects r + 2; the next root is r + 3
    assert simulated_rejections(third, 1, gen) == [3, 6, 9]
    second = torch.tensor([[1.0] * 12, [0.0] * 12, [1.0] * 12])
    assert simulated_rejections(second, 0, gen) == [1, 3, 5, 7, 9, 11]


def test_rejections_follow_alpha_in_frequency() -> None:
    """α = 0.3 at every first draft: about 70 % of 5,000 rounds are rejected (seeded; the bound
    is 6 binomial standard deviations, so a draw that ignored α, 0 % or 100 %, fails)."""
    gen = torch.Generator().manual_seed(1)
    alphas = torch.full((1, 5000), 0.3)
    count = len(simulated_rejections(alphas, 0, gen))
    # depth 1: a kept draft skips the bonus position; rounds n with count = 0.7 n
    rounds = count + (5000 - count) / 2
    assert abs(count / rounds - 0.7) < 6 * (0.21 / rounds) ** 0.5


def test_replay_batches_weigh_only_rejected_answer_positions(tmp_path: Path) -> None:
    stream = write_shards(_model(), tmp_path, range(8))
    found = [[0, 1, 3, 5], [2, 0, 4], [3, 2, 1, 2, 6]]
    make = replay_batches(found, stream, ReplayConfig(rows=4, seed=3))
    a, b = make(7), make(7)
    assert all(torch.equal(a[k], b[k]) for k in a)  # a step's batch is drawn again identically
    assert set(a["weight"].flatten().tolist()) <= {0.0, 1.0}
    assert bool((a["weight"] <= a["answer"].float()).all())
    total = sum(len(f) - 2 for f in found)
    assert 0 < int(a["weight"].sum()) <= 4 * total


def test_replay_and_control_runs_train_on_from_one_checkpoint(tmp_path: Path) -> None:
    model = _model()
    (tmp_path / "data").mkdir()
    stream = write_shards(model, tmp_path / "data", range(8))
    run_eagle(CFG, model, stream, tmp_path / "main", 10, None)
    data = tmp_path / "data"
    runs = {}
    for every in (2, 0):
        out = tmp_path / f"every{every}"
        runs[every] = run_replay(
            ReplayConfig(shards=7, every=every), model, tmp_path / "main", out, data, data, 6
        )
        rows = [json.loads(line) for line in (out / "curve.jsonl").open()]
        assert rows[-1]["step"] == 16 and 0 <= rows[-1]["alpha_1"] <= 1
    found = load_index(tmp_path / "every2")
    assert found and all(len(f) >= 3 for f in found)
    meta = json.loads((tmp_path / "every2" / INDEX).read_text())
    assert meta["start"] == 10 and meta["rejected"] == sum(len(f) - 2 for f in found)
    assert load_index(tmp_path / "every0") == []
    # the control reads six stream batches, the replay run three (and three replay batches)
    assert runs[0]["positions"] != runs[2]["positions"]
    again = run_replay(ReplayConfig(shards=7, every=2), model, tmp_path / "main",
                       tmp_path / "every2", data, data, 6)  # fmt: skip
    assert again["step"] == 16  # done: a rerun trains nothing more
