"""The draft room's building blocks: the student, its loss, its scoring and the shipped ranking."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specviz.train.common import learning_rate
from specviz.train.draft.evaluate import score_pair
from specviz.train.draft.export import teacher_stats, token_ranking
from specviz.train.draft.student import StudentConfig, kl_loss, make_student
from tests.conftest import VOCAB, tiny_config, tiny_model


def test_a_student_shares_the_targets_vocabulary_and_ties_its_head() -> None:
    cfg = StudentConfig(hidden=16, layers=1, heads=2, intermediate=32)
    student = make_student(cfg, tiny_config("llama"))
    assert student.config.vocab_size == VOCAB and student.config.num_hidden_layers == 1
    assert student.get_output_embeddings().weight is student.get_input_embeddings().weight


def test_the_kl_loss_vanishes_when_the_student_is_the_teacher() -> None:
    logits = torch.randn(4, VOCAB, generator=torch.Generator().manual_seed(0))
    logq = torch.log_softmax(logits, -1)
    top = logq.topk(5, -1)
    kl, overlap = kl_loss(logits, top.indices, top.values)
    assert float(kl) == pytest.approx(0.0, abs=1e-5) and float(overlap) == pytest.approx(1.0)
    worse, less = kl_loss(-logits, top.indices, top.values)  # the control: another law
    assert float(worse) > 0.1 and float(less) < 0.9


def test_the_learning_rate_warms_up_then_decays_to_a_tenth() -> None:
    cfg = StudentConfig(warmup=10, total_steps=100)
    rates = [learning_rate(cfg, s) for s in range(101)]
    assert rates[:10] == sorted(rates[:10]) and rates[9] == pytest.approx(cfg.lr)
    assert rates[10:] == sorted(rates[10:], reverse=True)
    assert rates[100] == pytest.approx(0.1 * cfg.lr)


def test_a_model_scored_against_itself_overlaps_and_agrees_everywhere() -> None:
    target = tiny_model("llama", seed=5, scale=3.0)
    tokens = torch.tensor([1, 2, 3, 4, 5, 6])
    with torch.no_grad():
        scores = score_pair(target, target, 2, tokens, torch.arange(VOCAB))
    assert torch.allclose(scores["overlap"], torch.ones(4)) and bool(scores["agree"].all())
    assert torch.allclose(scores["overlap_trimmed"], torch.ones(4))  # every token kept
    other = tiny_model("llama", seed=6, scale=3.0)  # the control: another model
    with torch.no_grad():
        assert float(score_pair(target, other, 2, tokens, None)["overlap"].mean()) < 0.99


def test_the_ranking_orders_tokens_by_the_teachers_mass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECVIZ_TRAIN_DIR", str(tmp_path))
    shards = tmp_path / "teacher"
    shards.mkdir()
    record = {
        "ids": torch.tensor([[7, 5], [5, 9]]),
        "logp": torch.tensor([[0.6, 0.3], [0.5, 0.4]]).log(),
    }
    torch.save({"kind": "code", "records": [record]}, shards / "shard_00000.pt")
    held = {"ids": torch.tensor([[11, 12]]), "logp": torch.tensor([[0.9, 0.1]]).log()}
    torch.save({"kind": "chat", "records": [held]}, shards / "shard_00001.pt")  # held out
    assert token_ranking()[:4].tolist() == [5, 7, 9, 0]  # 0.8, 0.6, 0.4, then id order
    assert teacher_stats() == {"shards": 2, "positions_by_kind": {"code": 2, "chat": 1}}
