"""Pre-packed oneDNN linears: the same model to ~1e-4, and decoding on it unchanged."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch import nn

from specviz.drafters.trimmed import trim_head
from specviz.fast.packed import PackedLinear, is_packed, pack_linears, packing_problem

from ..conftest import EOS, VOCAB, PairFactory, greedy_plain_and_speculative

PROMPT = [20, 8, 5, 27]
HEAD = torch.tensor([EOS, *range(1, VOCAB, 2)])

needs_packing = pytest.mark.skipif(
    packing_problem(nn.Linear(2, 2)) is not None, reason="no oneDNN packed linear here"
)
# oneDNN's bf16 packed product needs AVX-512 (bw, vl, dq) or AVX-NE-CONVERT: on other CPUs
# packing leaves bf16 models as they are (test_packing_is_a_no_op_where_it_does_not_apply)
needs_bf16_packing = pytest.mark.skipif(
    packing_problem(nn.Linear(2, 2).to(torch.bfloat16)) is not None,
    reason="no oneDNN bf16 packed linear on this CPU",
)


def _packed_copy(model: Any, dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """(unpacked, packed) copies of model in dtype."""
    plain = copy.deepcopy(model).to(dtype)
    packed = copy.deepcopy(plain)
    assert pack_linears(packed) > 0
    return plain, packed


@needs_packing
@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_packed_model_gives_the_same_logits(pair: PairFactory, arch: str) -> None:
    plain, packed = _packed_copy(pair(arch)[0])
    ids = torch.tensor([PROMPT * 3])
    with torch.no_grad():
        want, got = plain(ids).logits, packed(ids).logits
    assert torch.allclose(got, want, atol=1e-4, rtol=1e-4)


@needs_packing
def test_packing_replaces_every_linear_and_keeps_tied_weights(pair: PairFactory) -> None:
    plain, packed = _packed_copy(pair("llama")[0])
    linears = [m for m in plain.modules() if type(m) is nn.Linear]
    assert pack_linears(plain) == len(linears) > 0
    assert not any(type(m) is nn.Linear for m in packed.modules())
    head, embed = packed.get_output_embeddings(), packed.get_input_embeddings()
    assert is_packed(head)
    if packed.config.tie_word_embeddings:
        assert head.weight is embed.weight  # code reading .weight still sees the shared matrix


def test_packing_is_a_no_op_where_it_does_not_apply(pair: PairFactory) -> None:
    target = pair("llama")[0]  # float64: oneDNN packs float32 and bfloat16 only
    model = copy.deepcopy(target)
    assert "float32 and bfloat16" in str(packing_problem(model))
    assert pack_linears(model) == 0
    assert not any(isinstance(m, PackedLinear) for m in model.modules())


@needs_bf16_packing
def test_packed_bfloat16_model_is_close(pair: PairFactory) -> None:
    plain, packed = _packed_copy(pair("llama")[0], torch.bfloat16)
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        want, got = plain(ids).logits.float(), packed(ids).logits.float()
    assert torch.allclose(got, want, atol=0.1, rtol=0.05)


@needs_packing
def test_speculative_greedy_on_packed_models_equals_plain_greedy_unpacked(
    pair: PairFactory,
    tokenizer,
) -> None:
    (unpacked, target), (_, draft) = (_packed_copy(m) for m in pair("llama"))
    plain, spec, accepted = greedy_plain_and_speculative(  # the draft: trimmed head, packed
        unpacked, target, draft, tokenizer, PROMPT, HEAD
    )
    assert spec == plain and accepted > 0


@needs_packing
def test_trimmed_head_of_a_packed_draft_is_packed_and_equal(pair: PairFactory) -> None:
    _, draft = _packed_copy(pair("llama")[1])
    trimmed = trim_head(draft, HEAD)
    assert is_packed(trimmed.get_output_embeddings())
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        full, part = draft(ids).logits[0, -1], trimmed(ids).logits[0, -1]
    assert torch.allclose(part, full[HEAD], atol=1e-5, rtol=0)
