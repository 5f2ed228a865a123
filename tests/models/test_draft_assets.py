"""Tests for the committed draft in specviz/assets/draft."""

from __future__ import annotations

import json
import os

import pytest

from specviz.models import bundled

os.environ.setdefault("HF_HUB_OFFLINE", "1")
DRAFT = bundled.bundled_draft_dir()
SAMPLES = (
    "def fibonacci(n: int) -> int:\n    return n if n < 2 else fibonacci(n - 1)",
    "The quick brown fox jumps over the lazy dog. Ünïcödé, emoji 🙂, tabs\tand  spaces.",
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
)


def test_draft_files_exist_and_are_small() -> None:
    for name in ("config.json", "model.safetensors", "tokenizer.json", "MODEL_CARD.md"):
        assert (DRAFT / name).is_file(), name
    assert (DRAFT / "model.safetensors").stat().st_size <= 20_000_000


def test_draft_config_is_a_small_tied_llama() -> None:
    config = json.loads((DRAFT / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["vocab_size"] == 49152
    assert config["tie_word_embeddings"] is True
    assert config["num_hidden_layers"] <= 3
    assert config["hidden_size"] < 576  # not the 30-layer, 576-wide target


def test_draft_loads_and_runs() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(DRAFT).eval()
    tokenizer = AutoTokenizer.from_pretrained(DRAFT)
    assert sum(p.numel() for p in model.parameters()) < 11_000_000
    ids = tokenizer(SAMPLES[0], return_tensors="pt").input_ids
    with torch.inference_mode():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], 49152)
    assert torch.isfinite(logits).all()


def test_draft_tokenizer_special_tokens() -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(DRAFT)
    assert len(tokenizer) == 49152
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.bos_token == "<|im_start|>"
    assert tokenizer.chat_template


@pytest.mark.integration
def test_draft_tokenizer_equals_target_tokenizer() -> None:
    from transformers import AutoTokenizer

    target = AutoTokenizer.from_pretrained(bundled.ensure_bundled_target())
    draft = AutoTokenizer.from_pretrained(DRAFT)
    assert draft.get_vocab() == target.get_vocab()
    assert draft.special_tokens_map == target.special_tokens_map
    assert draft.all_special_ids == target.all_special_ids
    assert draft.chat_template == target.chat_template
    for text in SAMPLES:
        assert draft(text).input_ids == target(text).input_ids
