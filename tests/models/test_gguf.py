"""specviz.models.gguf: the GGUF's vocabulary as the tokenizer spells it, checked and given the
GGUF's special tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

from specviz.models.gguf import GGUFConversionError, gguf_vocabulary, match_gguf_tokenizer


class FakeTokenizer:
    """What match_gguf_tokenizer reads and writes of a tokenizer."""

    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab, self.eos_token, self.bos_token = vocab, "<old>", "<old>"

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)


def _tiny_gguf(
    path: Path, tokens: list[str], eos: int, bos: int, *, types: list[int] | None = None
) -> Path:
    """A GGUF holding a token list (with llama.cpp's token types and a SentencePiece tokenizer
    model where types are given) and no tensors."""
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), "llama")
    if types is not None:
        writer.add_tokenizer_model("llama")
        writer.add_token_types(types)
    writer.add_token_list(tokens)
    writer.add_eos_token_id(eos)
    writer.add_bos_token_id(bos)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_converted_tokenizer_takes_the_gguf_special_tokens(tmp_path: Path) -> None:
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "Ġthe"]
    read, specials = gguf_vocabulary(_tiny_gguf(tmp_path / "t.gguf", tokens, eos=2, bos=1))
    assert read == tokens and specials == {"eos_token": 2, "bos_token": 1}
    tokenizer = FakeTokenizer({t: i for i, t in enumerate(tokens)})
    match_gguf_tokenizer(tokenizer, read, specials)
    assert (tokenizer.eos_token, tokenizer.bos_token) == ("<|im_end|>", "<|im_start|>")


def test_user_defined_space_runs_are_read_in_the_tokenizers_spelling(tmp_path: Path) -> None:
    """llama.cpp writes a SentencePiece model's user-defined tokens (Gemma's runs of spaces)
    with plain spaces; the tokenizer transformers builds spells them with '▁'. A normal token's
    text is left alone, whatever it holds."""
    tokens = ["<pad>", "<eos>", "<bos>", "  ", "   ", "▁the", "a b"]
    types = [3, 3, 3, 4, 4, 1, 1]  # control, user-defined, normal (llama.cpp's token types)
    path = _tiny_gguf(tmp_path / "g.gguf", tokens, eos=1, bos=2, types=types)
    read, specials = gguf_vocabulary(path)
    assert read == ["<pad>", "<eos>", "<bos>", "▁▁", "▁▁▁", "▁the", "a b"]
    tokenizer = FakeTokenizer({t: i for i, t in enumerate(read)})
    match_gguf_tokenizer(tokenizer, read, specials)  # the spelling the tokenizer has
    assert (tokenizer.eos_token, tokenizer.bos_token) == ("<eos>", "<bos>")
    with pytest.raises(GGUFConversionError, match="converts the GGUF's tokenizer wrongly"):
        match_gguf_tokenizer(tokenizer, tokens, specials)  # the file's own spelling differs


def test_a_wrongly_converted_tokenizer_is_a_clear_error() -> None:
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    extra = FakeTokenizer({**{t: i for i, t in enumerate(tokens)}, "▁<PRE>": 3})
    with pytest.raises(GGUFConversionError, match=r"4 tokens; the GGUF has 3.*>=5\.6"):
        match_gguf_tokenizer(extra, tokens, {"eos_token": 2})
    shuffled = FakeTokenizer({t: 2 - i for i, t in enumerate(tokens)})
    with pytest.raises(GGUFConversionError, match="converts the GGUF's tokenizer wrongly"):
        match_gguf_tokenizer(shuffled, tokens, {"eos_token": 2})
    assert extra.eos_token == shuffled.eos_token == "<old>"
