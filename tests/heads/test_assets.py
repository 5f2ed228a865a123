"""The shipped heads: small, documented, and loadable for the bundled target only."""

from __future__ import annotations

import json

import pytest
import torch

from specviz.heads.weights import ASSETS, KINDS, head_path


def test_shipped_heads_are_small_and_documented() -> None:
    total = sum(head_path(kind).stat().st_size for kind in KINDS)
    assert total <= 20 * 2**20
    for kind in KINDS:
        summary = json.loads((ASSETS / f"{kind}.json").read_text(encoding="utf-8"))
        assert summary["weights_bytes"] == head_path(kind).stat().st_size
        for field in ("parameters", "shards_sha256", "train_positions", "hours", "held_out"):
            assert field in summary, (kind, field)
        card = (ASSETS / f"{kind}.md").read_text(encoding="utf-8")
        assert f"{summary['parameters']:,}" in card and summary["shards_sha256"] in card


@pytest.mark.integration
def test_shipped_heads_draft_exactly_for_the_bundled_target() -> None:
    from specviz.core.config import SamplingConfig, SpeculationConfig
    from specviz.core.decoding import SpeculativeDecoder, autoregressive_events
    from specviz.core.events import Accepted, Sampled
    from specviz.drafters.registry import build_drafter
    from specviz.models.loading import load_pair

    pair = load_pair(draft=None, dtype=torch.float32)
    prompt = list(pair.tokenizer("def fibonacci(n):\n")["input_ids"])
    sampling = SamplingConfig(temperature=0.0)
    plain = [
        e.token
        for e in autoregressive_events(pair.target, prompt, sampling=sampling, max_new_tokens=24)
        if isinstance(e, Sampled)
    ]
    for name in ("eagle", "medusa"):
        drafter = build_drafter(name, target=pair.target, sampling=sampling)
        decoder = SpeculativeDecoder(
            pair.target, drafter, prompt, sampling=sampling,
            speculation=SpeculationConfig(gamma=3, max_new_tokens=24),
        )  # fmt: skip
        events = list(decoder.events())
        assert decoder.ids[len(prompt) :] == plain, name
        assert any(isinstance(e, Accepted) for e in events), name  # a trained head is kept
