"""One drafter, built once, serves request after request: every registered drafter decodes three
different prompts in sequence, and each output is what a decode on its own gives.

At T = 0 each output equals plain greedy decoding's. At T = 1 each equals the output of a
drafter built afresh for that request with the same seed: a reused drafter carries nothing from
one request into the next. The memory drafters (DrafterSpec.remembers) are the exception by
design: they remember each finished request and draft from it in the next, so a fresh drafter
with a fresh memory proposes other tokens and, at T = 1, draws other samples. For them the
fresh drafter is built on a memory that has seen the same earlier requests, and must then
agree token for token.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.names import CROSS_TOKENIZER_DRAFTERS, DRAFTER_NAMES, REGISTRY
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix.memory import SuffixMemory

from ..conftest import VOCAB, PairFactory, save_pair
from ..heads.helpers import save_random_heads
from .cross_pairs import TOKENIZERS, tiny_llama

PROMPTS = ([5, 6, 7, 5, 6], [9, 3, 9, 3, 9, 3, 1], [12, 13])
SPECULATION = SpeculationConfig(gamma=3, max_new_tokens=12)


@pytest.fixture(scope="module")
def ranked(pair: PairFactory, tokenizer: Any, tmp_path_factory: Any) -> tuple[Any, Any]:
    """The llama pair, its draft loaded from a folder with a token ranking (trimmed heads)."""
    _target_dir, draft_dir = save_pair(tmp_path_factory.mktemp("reuse"), *pair("llama"), tokenizer)
    draft = AutoModelForCausalLM.from_pretrained(draft_dir, dtype=torch.float64).eval()
    return pair("llama")[0], draft


@pytest.fixture(scope="module")
def heads(pair: PairFactory, tmp_path_factory: Any) -> Path:
    folder = tmp_path_factory.mktemp("reuse-heads")
    return save_random_heads(pair("llama")[0], folder, seed=3, head_tokens=torch.arange(1, VOCAB))


def _models(
    name: str, ranked: tuple[Any, Any], tokenizer: Any, heads: Path
) -> tuple[Any, Any, Any, DrafterOptions]:
    """(target, draft, the target's tokenizer, options) for the drafter called name."""
    if name in CROSS_TOKENIZER_DRAFTERS:
        tt, dt = TOKENIZERS["char"](), TOKENIZERS["char_bpe"]()
        target, draft = tiny_llama(len(tt), 1), tiny_llama(len(dt), 2)
        return target, draft, tt, DrafterOptions(tokenizer=tt, draft_tokenizer=dt)
    options = DrafterOptions(exit_layer=1, heads=str(heads), tree_depth=3)  # 3 Medusa heads
    return *ranked, tokenizer, options


def _decode(target: Any, drafter: Any, tokenizer: Any, prompt: list[int], seed: int) -> list[int]:
    temperature = 0.0 if seed < 0 else 1.0
    sampling = SamplingConfig(temperature=temperature, seed=max(seed, 0))
    result = speculative_generate(
        target, drafter, tokenizer, prompt, sampling=sampling, speculation=SPECULATION, stop=()
    )
    return list(result.tokens)


@pytest.mark.parametrize("name", DRAFTER_NAMES)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_drafter_serves_request_after_request(
    name: str, temperature: float, ranked: tuple[Any, Any], tokenizer: Any, heads: Path
) -> None:
    target, draft, tokenizer, options = _models(name, ranked, tokenizer, heads)
    remembers = REGISTRY[name].remembers
    memory = SuffixMemory() if remembers else None
    sampling = SamplingConfig(temperature=temperature)

    def build(memory: SuffixMemory | None) -> Any:
        built = replace(options, memory=memory)
        return build_drafter(name, target=target, draft=draft, sampling=sampling, options=built)

    reused = build(memory)
    shadow = SuffixMemory() if remembers else None  # the same earlier requests, fed by fresh ones
    for i, prompt in enumerate(PROMPTS):
        seed = -1 if temperature == 0 else 100 + i
        got = _decode(target, reused, tokenizer, prompt, seed)
        if temperature == 0:
            greedy = SamplingConfig(temperature=0.0)
            plain = autoregressive_generate(
                target, tokenizer, prompt, sampling=greedy, max_new_tokens=12, stop=()
            )
            assert got == list(plain.tokens), f"request {i + 1}"
        expected = _decode(target, build(shadow), tokenizer, prompt, seed)
        assert got == expected, f"request {i + 1}"
