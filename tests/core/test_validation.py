"""Every invalid input raises a ValueError that names the field and the allowed range."""

from __future__ import annotations

import pytest

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig

from ..conftest import PairFactory, tiny_model


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"temperature": -0.1},
            r"temperature must be a finite number >= 0, 0 for greedy \(got -0.1\)",
        ),
        ({"temperature": float("nan")}, r"temperature must be a finite number >= 0"),
        ({"top_k": -1}, r"top_k must be an integer >= 0; use 0 to disable \(got -1\)"),
        ({"top_k": 2.5}, r"top_k must be an integer >= 0"),
        (
            {"top_p": 0.0},
            r"top_p must be in \(0, 1\]; use 1.0 to disable nucleus sampling \(got 0.0\)",
        ),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
        ({"seed": -3}, r"seed must be an integer >= 0 \(got -3\)"),
    ],
)
def test_sampling_config_rejects(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SamplingConfig(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gamma": 0}, r"gamma must be an integer >= 1 \(got 0\)"),
        ({"gamma": -2}, r"gamma must be an integer >= 1 \(got -2\)"),
        ({"max_new_tokens": 0}, r"max_new_tokens must be an integer >= 1 \(got 0\)"),
    ],
)
def test_speculation_config_rejects(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SpeculationConfig(**kwargs)


def test_configs_are_frozen_and_keyword_only() -> None:
    with pytest.raises(TypeError):
        SamplingConfig(0.5)
    cfg = SpeculationConfig(gamma=3)
    with pytest.raises(AttributeError):
        cfg.gamma = 4


def test_empty_prompt(pair: PairFactory, tokenizer) -> None:
    target, draft = pair("gpt2")
    for prompt in ("", "   ", []):
        with pytest.raises(ValueError, match="prompt is empty"):
            speculative_generate(target, draft, tokenizer, prompt)
        with pytest.raises(ValueError, match="prompt is empty"):
            autoregressive_generate(target, tokenizer, prompt)


def test_prompt_longer_than_context(pair: PairFactory, tokenizer) -> None:
    target, draft = pair("llama")  # context of 96 positions
    with pytest.raises(
        ValueError, match=r"prompt is 120 tokens but the model's context .* is 96: shorten"
    ):
        speculative_generate(target, draft, tokenizer, "a" * 120)
    with pytest.raises(ValueError, match=r"lower max_new_tokens to at most 16"):
        speculative_generate(
            target, draft, tokenizer, "a" * 80, speculation=SpeculationConfig(max_new_tokens=40)
        )
    with pytest.raises(ValueError, match=r"lower max_new_tokens to at most 6"):
        autoregressive_generate(target, tokenizer, "a" * 90, max_new_tokens=10)


def test_different_vocabularies(pair: PairFactory, tokenizer) -> None:
    target, _ = pair("gpt2")
    other = tiny_model("gpt2", seed=5, vocab_size=50)
    with pytest.raises(
        ValueError, match=r"different vocabularies \(draft vocab_size=50, target vocab_size=33\)"
    ):
        speculative_generate(target, other, tokenizer, "abc")


def test_prompt_ids_outside_vocabulary(pair: PairFactory, tokenizer) -> None:
    target, draft = pair("gpt2")
    with pytest.raises(
        ValueError, match=r"prompt token ids \[40\] are outside the vocabulary \[0, 33\)"
    ):
        speculative_generate(target, draft, tokenizer, [1, 2, 40])


def test_plain_decoding_checks_max_new_tokens(pair: PairFactory, tokenizer) -> None:
    target, _ = pair("gpt2")
    with pytest.raises(ValueError, match=r"max_new_tokens must be an integer >= 1 \(got 0\)"):
        autoregressive_generate(target, tokenizer, "abc", max_new_tokens=0)


def test_a_device_this_machine_lacks_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from specviz.models.loading import check_device, load_pair

    check_device("cpu")
    with pytest.raises(ValueError, match="'banana' is not a torch device: give cpu, cuda"):
        check_device("banana")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="sees no CUDA GPU here; use cpu"):
        check_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    check_device("cuda:1")
    with pytest.raises(
        ValueError, match=r"'cuda:2': this machine has 2 CUDA GPU\(s\), cuda:0 to cuda:1"
    ):
        check_device("cuda:2")
    with pytest.raises(ValueError, match="not a torch device"):  # before any model is looked up
        load_pair("/no/such/target", "/no/such/draft", device="banana")
