"""Training the Medusa heads (specviz.train.heads.medusa) on a tiny target's features."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from specviz.train.data.features import target_features
from specviz.train.heads import medusa
from specviz.train.heads.medusa import MedusaConfig, Trainer, collate, pick
from tests.conftest import EOS, VOCAB, tiny_model


def _seqs(model: Any) -> list[dict[str, Any]]:
    """Feature records of a few repetitive sequences, as step `data features` writes them."""
    seqs = [[1 + (i + k) % 5 for i in range(24)] for k in range(4)]
    rows = target_features(model, seqs, pad=EOS)
    return [{"tokens": torch.tensor(s), "start": 2, **r} for s, r in zip(seqs, rows, strict=True)]


def test_training_lowers_the_loss_and_raises_alpha(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(medusa, "bundled_head_tokens", lambda: torch.arange(VOCAB))
    model = tiny_model("llama", seed=5, scale=3.0).float()  # the trainer's features are float32
    seqs = _seqs(model)
    batch = collate(seqs, max_len=32)
    assert batch["features"].shape == (4, 24, model.config.hidden_size)
    trainer = Trainer(MedusaConfig(medusa_heads=2), model)
    before = {k: float(v) for k, v in trainer.losses(batch).items()}
    optimizer = torch.optim.AdamW(trainer.module.parameters(), lr=1e-2)
    for _ in range(30):
        optimizer.zero_grad()
        trainer.losses(batch)["loss"].backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    after = {k: float(v) for k, v in trainer.losses(batch).items()}
    assert after["loss"] < before["loss"]
    assert after["alpha_1"] > before["alpha_1"] and set(after) >= {"alpha_2", "agree_2"}


def test_pick_draws_about_the_budget_from_its_generator() -> None:
    pool: list[dict[str, Any]] = [{"tokens": torch.zeros(n)} for n in (4, 8, 16)]
    first = pick(pool, 40, 32, torch.Generator().manual_seed(1))
    again = pick(pool, 40, 32, torch.Generator().manual_seed(1))
    assert [len(s["tokens"]) for s in first] == [len(s["tokens"]) for s in again]
    assert sum(len(s["tokens"]) for s in first) >= 40
