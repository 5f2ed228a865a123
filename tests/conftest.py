"""Tiny random Hugging Face models and a character tokenizer: fast, offline fixtures."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers reads it: never touch the hub

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    LlamaConfig,
    PreTrainedTokenizerFast,
    Qwen2Config,
)

CHARS = ["<eos>", *"abcdefghijklmnopqrstuvwxyz .,'!?"]
VOCAB = len(CHARS)
EOS = 0


def char_tokenizer() -> PreTrainedTokenizerFast:
    """One token per character; id 0 is <eos>."""
    vocab = {c: i for i, c in enumerate(CHARS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="?"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="?")


def tiny_config(arch: str, **overrides: Any) -> Any:
    """A 2-layer config of the given architecture over the character vocabulary."""
    if arch == "gpt2":
        gpt2: dict[str, Any] = dict(n_positions=96, n_embd=32, n_layer=2, n_head=4)
        return GPT2Config(**(gpt2 | _special() | overrides))
    cls = {"llama": LlamaConfig, "qwen2": Qwen2Config}[arch]
    fields: dict[str, Any] = dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=96,
    )
    return cls(**(fields | _special() | overrides))


def _special() -> dict[str, Any]:
    """Vocabulary and special tokens shared by every tiny config."""
    return dict(vocab_size=VOCAB, eos_token_id=EOS, bos_token_id=EOS)


def tiny_model(arch: str, seed: int, scale: float = 1.0, **overrides: Any) -> Any:
    """A random float64 model; weights drawn under a forked RNG, so global state is untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(tiny_config(arch, **overrides))
        with torch.no_grad():
            for param in model.parameters():
                if param.dim() > 1:  # sharpen: random models are otherwise near-uniform
                    param.normal_(0.0, scale / param.shape[-1] ** 0.5)
    return model.to(torch.float64).eval()


def perturbed_copy(model: Any, seed: int, noise: float) -> Any:
    """A draft that partly agrees with model: its weights plus relative Gaussian noise."""
    draft = AutoModelForCausalLM.from_config(model.config).to(torch.float64).eval()
    draft.load_state_dict(model.state_dict())
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in draft.parameters():
            if param.dim() > 1:
                param.add_(
                    noise * param.std() * torch.randn(param.shape, generator=gen, dtype=param.dtype)
                )
    return draft


@pytest.fixture(scope="session", autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models run fastest on one intra-op thread (threads only add contention)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session", autouse=True)
def no_tuned_profiles(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every test starts without a tuned profile (specviz.tune), whatever this machine's user
    cache holds: the profiles' folder is an empty one made for this test run."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECVIZ_PROFILES", str(tmp_path_factory.mktemp("profiles")))
        yield


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerFast:
    return char_tokenizer()


PairFactory = Callable[[str], tuple[Any, Any]]


@pytest.fixture(scope="session")
def pair() -> PairFactory:
    """(target, draft) for an architecture; the draft agrees with the target only partly."""
    cache: dict[str, tuple[Any, Any]] = {}

    def make(arch: str) -> tuple[Any, Any]:
        if arch not in cache:
            target = tiny_model(arch, seed=1, scale=3.0)
            cache[arch] = (target, perturbed_copy(target, seed=2, noise=0.05))
        return cache[arch]

    return make


def greedy_plain_and_speculative(
    plain_model: Any, target: Any, draft: Any, tokenizer: Any, prompt: list[int], head: Any
) -> tuple[list[int], list[int], int]:
    """(plain greedy tokens of plain_model, speculative greedy tokens, drafts accepted), 30 each.

    The speculative run verifies with target and drafts with draft, its head trimmed to head.
    """
    from specviz.api import autoregressive_generate, speculative_generate
    from specviz.core.config import SamplingConfig, SpeculationConfig
    from specviz.drafters.model import ModelDrafter

    greedy = SamplingConfig(temperature=0)
    plain = autoregressive_generate(
        plain_model, tokenizer, prompt, sampling=greedy, max_new_tokens=30, stop=()
    )
    spec = speculative_generate(
        target,
        ModelDrafter(draft, greedy, VOCAB, head_tokens=head),
        tokenizer,
        prompt,
        sampling=greedy,
        speculation=SpeculationConfig(gamma=4, max_new_tokens=30),
        stop=(),
    )
    return list(plain.tokens), list(spec.tokens), spec.accepted


def save_pair(root: Any, target: Any, draft: Any, tokenizer: Any) -> tuple[Any, Any]:
    """Write target and draft (with a token ranking, for the trimmed head) as model folders."""
    from specviz.drafters.trimmed import save_ranking

    for name, model in (("target", target), ("draft", draft)):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    save_ranking(torch.arange(VOCAB).flip(0), root / "draft")
    return root / "target", root / "draft"
