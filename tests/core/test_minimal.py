"""core/minimal.py emits exactly the tokens of the full decoder for the same seed."""

from __future__ import annotations

from typing import Any

import pytest

from specviz.api import speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.minimal import speculative_sample
from specviz.drafters.model import ModelDrafter

from ..conftest import EOS, VOCAB, PairFactory


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
@pytest.mark.parametrize(
    ("temperature", "top_p", "seed", "gamma"),
    [(0.0, 1.0, 0, 4), (1.0, 1.0, 5, 2), (1.0, 0.9, 3, 3), (0.7, 1.0, 9, 1)],
)
def test_minimal_matches_the_full_decoder(
    pair: PairFactory,
    tokenizer: Any,
    arch: str,
    temperature: float,
    top_p: float,
    seed: int,
    gamma: int,
) -> None:
    target, draft = pair(arch)
    sampling = SamplingConfig(temperature=temperature, top_p=top_p, seed=seed)
    prompt = tokenizer("the cat sat on the mat")["input_ids"]
    for stop in (frozenset(), frozenset({EOS})):
        full = speculative_generate(
            target,
            ModelDrafter(draft, sampling, VOCAB),
            tokenizer,
            prompt,
            sampling=sampling,
            speculation=SpeculationConfig(gamma=gamma, max_new_tokens=40),
            stop=stop,
        )
        minimal = speculative_sample(
            target,
            draft,
            prompt,
            gamma=gamma,
            max_new_tokens=40,
            sampling=sampling,
            stop_ids=stop,
        )
        assert minimal == list(full.tokens)
        assert full.proposed > 0 and len(minimal) > 0


def test_minimal_differs_for_another_seed(pair: PairFactory, tokenizer: Any) -> None:
    """The comparison above has power: a different seed gives a different sample."""
    target, draft = pair("llama")
    prompt = tokenizer("the cat")["input_ids"]
    runs = {
        seed: speculative_sample(target, draft, prompt, sampling=SamplingConfig(seed=seed))
        for seed in (0, 1)
    }
    assert runs[0] != runs[1]
