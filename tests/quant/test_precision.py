"""Every precision loads and generates on a tiny model (int8 through torchao), or is refused
with a message saying what to install or change, before any model is loaded."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import torch

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.fast.lean import draft_cache, lean_problem
from specviz.quant import precision
from specviz.quant.precision import (
    PRECISIONS,
    PrecisionError,
    check_precision,
    load_at_precision,
    precision_problem,
    quantize_int8,
    weight_bytes,
)

from ..conftest import PairFactory, save_pair

PROMPT = [3, 5, 7, 9, 11]


@pytest.fixture(scope="module")
def folders(
    pair: PairFactory, tokenizer: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("quant")
    return save_pair(root, *pair("llama"), tokenizer)


def test_unknown_precisions_and_a_missing_torchao_are_refused_before_loading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert (
        precision_problem("fp16")
        == f"precision must be one of {', '.join(PRECISIONS)} (got 'fp16')"
    )
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torchao" else real(name, *a)
    )
    for name in ("int8-weight", "int8-dynamic"):
        assert precision_problem(name) == precision.TORCHAO_HINT
        with pytest.raises(PrecisionError, match="pip install"):
            load_at_precision("/nonexistent/folder", name)  # refused before any loading
    assert precision_problem("bf16") is None and precision_problem("fp32") is None
    with pytest.raises(PrecisionError, match="quantize_int8 takes"):
        quantize_int8(object(), "bf16")


@pytest.mark.parametrize("name", PRECISIONS)
def test_every_precision_loads_and_generates_on_a_tiny_model(
    name: str, folders: tuple[Path, Path], tokenizer: Any
) -> None:
    target_dir, _ = folders
    check_precision(name)
    model = load_at_precision(str(target_dir), name)
    weight = model.model.layers[0].mlp.up_proj.weight
    if name.startswith("int8"):
        assert type(weight) not in (torch.Tensor, torch.nn.Parameter)  # torchao's int8 tensor
        assert weight.qdata.dtype == torch.int8  # its stored values
    else:
        assert weight.dtype == (torch.bfloat16 if name == "bf16" else torch.float32)
    result = autoregressive_generate(
        model, tokenizer, PROMPT, sampling=SamplingConfig(temperature=1.0, seed=0),
        max_new_tokens=8, stop=(),
    )  # fmt: skip
    assert len(result.tokens) == 8
    assert all(0 <= t < model.config.vocab_size for t in result.tokens)


def test_lower_precisions_hold_fewer_bytes_and_int8_falls_back_from_the_lean_forward(
    folders: tuple[Path, Path],
) -> None:
    _, draft_dir = folders
    fp32 = load_at_precision(str(draft_dir), "fp32", role="draft", pack=False)
    bf16 = load_at_precision(str(draft_dir), "bf16", role="draft", pack=False)
    int8 = load_at_precision(str(draft_dir), "int8-weight", role="draft")
    params = sum(p.numel() for p in fp32.parameters())  # a tied head counts once
    buffers = sum(b.numel() * 4 for b in fp32.buffers())  # RoPE's table stays fp32
    assert weight_bytes(fp32) == 4 * params + buffers
    assert weight_bytes(bf16) == 2 * params + buffers
    assert weight_bytes(int8) < weight_bytes(fp32)
    assert lean_problem(fp32) is None
    problem = lean_problem(int8)
    assert problem is not None and "non-standard modules" in problem
    assert type(draft_cache(int8)).__name__ == "KVCache"


def test_speculation_with_a_quantized_draft_writes_the_targets_greedy_tokens(
    folders: tuple[Path, Path], tokenizer: Any
) -> None:
    target_dir, draft_dir = folders
    target = load_at_precision(str(target_dir), "fp32", pack=False)
    greedy = SamplingConfig(temperature=0.0)
    plain = autoregressive_generate(
        target, tokenizer, PROMPT, sampling=greedy, max_new_tokens=20, stop=()
    )
    for name in ("int8-weight", "int8-dynamic", "bf16"):
        draft = load_at_precision(str(draft_dir), name, role="draft")
        spec = speculative_generate(
            target, draft, tokenizer, PROMPT, sampling=greedy,
            speculation=SpeculationConfig(gamma=3, max_new_tokens=20), stop=(),
        )  # fmt: skip
        assert spec.tokens == plain.tokens, name
        assert spec.proposed > 0
