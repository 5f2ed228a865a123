"""The shipped heads: small, documented, and loadable for the bundled target only."""

from __future__ import annotations

import json

import pytest
import torch

from specviz.heads.lookup import ASSETS, head_path
from specviz.heads.weights import KINDS

FEATURE_KINDS = tuple(k for k in KINDS if k != "eagle3")  # trained by `heads`, with heads-eval


def test_shipped_heads_are_small_and_documented() -> None:
    total = sum(head_path(kind).stat().st_size for kind in FEATURE_KINDS)
    assert total <= 20 * 2**20
    for kind in FEATURE_KINDS:
        summary = json.loads((ASSETS / f"{kind}.json").read_text(encoding="utf-8"))
        assert summary["weights_bytes"] == head_path(kind).stat().st_size
        for field in ("parameters", "shards_sha256", "train_positions", "hours", "held_out"):
            assert field in summary, (kind, field)
        card = (ASSETS / f"{kind}.md").read_text(encoding="utf-8")
        assert f"{summary['parameters']:,}" in card and summary["shards_sha256"] in card


def test_the_shipped_eagle3_head_is_small_and_documented() -> None:
    from safetensors import safe_open

    path = head_path("eagle3")
    assert path.stat().st_size <= 20 * 2**20  # about 15 MB: bf16, 4,096 output rows
    summary = json.loads((ASSETS / "eagle3.json").read_text(encoding="utf-8"))
    assert summary["weights_bytes"] == path.stat().st_size
    for field in ("parameters", "steps", "trained_positions", "hours", "held_out", "draft_vocab"):
        assert field in summary, field
    with safe_open(str(path), "pt") as handle:
        meta = handle.metadata()
        vocab = handle.get_tensor("vocab")
    assert int(meta["steps"]) == summary["steps"] and meta["kind"] == "eagle3"
    assert int(meta["vocab"]) == summary["draft_vocab"]["size"] == vocab.shape[0]
    assert len(set(vocab.tolist())) == vocab.shape[0]  # distinct token ids
    rows = summary["held_out"]
    assert rows and all(r["step"] <= summary["steps"] for r in rows)
    assert 0 < summary["draft_vocab"]["held_out_coverage"] <= 1
    card = (ASSETS / "eagle3.md").read_text(encoding="utf-8")
    assert f"{summary['parameters']:,}" in card and f"{summary['steps']:,}" in card


@pytest.mark.integration
def test_shipped_heads_draft_exactly_for_the_bundled_target() -> None:
    from specviz.api import speculative_generate
    from specviz.core.config import SamplingConfig, SpeculationConfig
    from specviz.core.events import Sampled
    from specviz.drafters.registry import build_drafter
    from specviz.models.loading import load_pair
    from specviz.plain import autoregressive_events

    pair = load_pair(draft=None, dtype=torch.float32)
    prompt = list(pair.tokenizer("def fibonacci(n):\n")["input_ids"])
    sampling = SamplingConfig(temperature=0.0)
    plain = [
        e.token
        for e in autoregressive_events(pair.target, prompt, sampling=sampling, max_new_tokens=24)
        if isinstance(e, Sampled)
    ]
    for name in ("medusa", "eagle", "tree-eagle"):
        drafter = build_drafter(name, target=pair.target, sampling=sampling)
        result = speculative_generate(
            pair.target, drafter, pair.tokenizer, prompt, sampling=sampling,
            speculation=SpeculationConfig(gamma=3, max_new_tokens=24), stop=(),
        )  # fmt: skip
        assert list(result.tokens) == plain, name
        assert result.accepted > 0, name  # a trained head is kept


def test_a_head_names_its_target_without_this_machines_paths() -> None:
    from pathlib import Path
    from types import SimpleNamespace

    from safetensors import safe_open

    from specviz.heads.weights import model_label

    for kind in KINDS:
        with safe_open(str(head_path(kind)), "pt") as handle:
            name = (handle.metadata() or {})["target"]
        assert name and not Path(name).is_absolute(), (kind, name)
    local = SimpleNamespace(config=SimpleNamespace(_name_or_path="/home/me/models/SmolLM2-ft"))
    hub = SimpleNamespace(config=SimpleNamespace(_name_or_path="HuggingFaceTB/SmolLM2-135M"))
    assert model_label(local) == "SmolLM2-ft"
    assert model_label(hub) == "HuggingFaceTB/SmolLM2-135M"
