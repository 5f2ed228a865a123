"""Loading pairs from local folders: tokenizer compatibility, dtype, eval mode."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

from specviz.models.loading import ModelLoadError, load_pair, parse_dtype

from ..conftest import PairFactory


def test_load_pair_from_folders(pair: PairFactory, tokenizer, tmp_path) -> None:
    target, draft = pair("llama")
    for name, model in (("t", target), ("d", draft)):
        model.save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
    loaded = load_pair(str(tmp_path / "t"), str(tmp_path / "d"), dtype=torch.bfloat16)
    for model in (loaded.target, loaded.draft):
        assert model.dtype == torch.bfloat16 and not model.training
        assert not any(p.requires_grad for p in model.parameters())
    assert loaded.tokenizer("the cat")["input_ids"] == tokenizer("the cat")["input_ids"]


def test_mismatched_tokenizers_are_refused(pair: PairFactory, tokenizer, tmp_path) -> None:
    target, draft = pair("gpt2")
    target.save_pretrained(tmp_path / "t")
    tokenizer.save_pretrained(tmp_path / "t")
    draft.save_pretrained(tmp_path / "d")
    other = AutoTokenizer.from_pretrained(tmp_path / "t")
    other.add_tokens(["<extra>"])
    other.save_pretrained(tmp_path / "d")
    with pytest.raises(ModelLoadError, match="tokenizers differ"):
        load_pair(str(tmp_path / "t"), str(tmp_path / "d"))


def test_parse_dtype() -> None:
    assert parse_dtype("bfloat16") is torch.bfloat16
    with pytest.raises(
        ValueError, match=r"dtype must be one of \['bfloat16', 'float16', 'float32', 'float64'\]"
    ):
        parse_dtype("int8")
