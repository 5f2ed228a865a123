"""Tiny offline pairs whose tokenizers really differ, with random Llama models over each.

- char: one token per character (tests.conftest's tokenizer, 33 tokens);
- char_bpe: a BPE over the same characters trained here, with merges ("th", "e ", ...);
- bundled: the bundled SmolLM2 tokenizer (byte-level BPE, 49152 tokens);
- byte_bpe: a byte-level BPE trained here on a short text (other merges than the bundled one);
- spiece: a SentencePiece-style BPE as Gemma's: spaces written "▁" (a "▁" in the text comes
  back as a space), a <bos> before every text, control tokens of its own.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch
from tokenizers import (
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, PreTrainedTokenizerFast

from ..conftest import CHARS, char_tokenizer

TEXT = (
    "the cat sat on the mat. the dog ate the bone, and the bird sang a song! "
    "what is that? it's the end of the story. a cat and a dog are not the same, "
    "but they both like to sleep in the sun. the sun is hot and the day is long. "
) * 4


@cache
def char() -> PreTrainedTokenizerFast:
    """One token per character; id 0 is <eos>."""
    return char_tokenizer()


@cache
def char_bpe(vocab_size: int = 64) -> PreTrainedTokenizerFast:
    """A BPE over the characters of tests.conftest.CHARS with merges learnt on TEXT."""
    tok = Tokenizer(models.BPE())
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<eos>"],
        initial_alphabet=[c for c in CHARS if len(c) == 1],
        show_progress=False,
    )
    tok.train_from_iterator([TEXT], trainer=trainer)
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")


@cache
def bundled() -> Any:
    """The bundled tokenizer (SmolLM2's), from the package's files."""
    from specviz.models.bundled import bundled_draft_dir

    return AutoTokenizer.from_pretrained(bundled_draft_dir())


@cache
def byte_bpe(vocab_size: int = 320) -> PreTrainedTokenizerFast:
    """A byte-level BPE (GPT-2 style: any text round-trips) with merges learnt on TEXT."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([TEXT], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")


@cache
def spiece(vocab_size: int = 72) -> PreTrainedTokenizerFast:
    """A BPE over "▁"-spaced characters as Gemma's tokenizer: the normaliser writes each space
    "▁", the decoder writes each "▁" back as a space, and every encoded text starts with <bos>
    (ids: <eos> 0, <bos> 1, <start_of_turn> 2)."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.Fuse()])
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<eos>", "<bos>", "<start_of_turn>", "<unk>"],
        initial_alphabet=[c.replace(" ", "▁") for c in CHARS if len(c) == 1],
        show_progress=False,
    )
    tok.train_from_iterator([TEXT.replace(" ", "▁")], trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", 1)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        additional_special_tokens=["<start_of_turn>"],
    )


def lowercasing() -> PreTrainedTokenizerFast:
    """A character tokenizer that lowercases its input but has upper-case tokens: it does not
    give back its own text ("A" comes back as "a")."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = {c: i for i, c in enumerate(["<eos>", " ", ".", *letters, *letters.upper()])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="."))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")


def digits() -> PreTrainedTokenizerFast:
    """Digits and the newline, no end-of-sequence token: it shares no token with char."""
    vocab = {c: i for i, c in enumerate("0123456789\n")}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="0"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="0")


def tiny_llama(vocab: int, seed: int, *, scale: float = 3.0, hidden: int = 32) -> Any:
    """A random 2-layer float64 Llama over vocab ids (weights drawn under a forked RNG)."""
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        eos_token_id=0,
        bos_token_id=0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
        with torch.no_grad():
            for param in model.parameters():
                if param.dim() > 1:
                    param.normal_(0.0, scale / param.shape[-1] ** 0.5)
    return model.to(torch.float64).eval()


TOKENIZERS = {
    "char": char,
    "char_bpe": char_bpe,
    "bundled": bundled,
    "byte_bpe": byte_bpe,
    "spiece": spiece,
}
