"""A GGUF checkpoint as a plain Hugging Face folder, through transformers' GGUF reader.

Every gap of transformers' GGUF support that specviz meets is worked around here, and only here:

- transformers' from_pretrained(..., gguf_file=...) needs the accelerate package; the weights
  are read with its lower-level load_gguf_checkpoint into a model built from the GGUF's config
  instead, which needs only the gguf package.
- Some transformers releases convert a GGUF's tokenizer wrongly (5.0-5.5 give SmolLM2's a
  CodeLlama tokenizer with 5 tokens more; 5.6-5.17 take <|im_start|> for its end of sequence):
  the converted vocabulary is checked against the GGUF's token list, and the special tokens are
  taken from the GGUF's metadata.
- llama.cpp writes a SentencePiece model's user-defined tokens (Gemma's runs of spaces) with
  plain spaces where the tokenizer spells them with "▁" (U+2581); the check compares those in
  the tokenizer's spelling.

Converting takes a while (a 270M model's tokenizer alone is tens of seconds), so each caller
converts once and caches the folder (specviz.models.bundled, specviz.models.gemma).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers
from gguf import GGUFReader
from safetensors.torch import save_file
from transformers import AutoConfig, AutoTokenizer
from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint as _load_gguf

GGUF_SPECIALS = {  # tokenizer attribute -> the GGUF metadata key of its id
    "bos_token": "tokenizer.ggml.bos_token_id",
    "eos_token": "tokenizer.ggml.eos_token_id",
    "unk_token": "tokenizer.ggml.unknown_token_id",
    "pad_token": "tokenizer.ggml.padding_token_id",
}
USER_DEFINED = 4  # llama.cpp's token type of a SentencePiece user-defined token
SPACE_MARK = "\u2581"  # "▁": SentencePiece's spelling of a space
WEIGHTS = "model.safetensors"

Progress = Callable[[str], None]


class GGUFConversionError(RuntimeError):
    """A GGUF checkpoint could not be turned into a Hugging Face folder; the message says why."""


def _quiet(_message: str) -> None:
    """Default progress callback: say nothing."""


def gguf_vocabulary(gguf: Path) -> tuple[list[str], dict[str, int]]:
    """The GGUF's token strings in id order, in the tokenizer's spelling (user-defined tokens'
    spaces written "▁"), and its special tokens' ids by tokenizer attribute."""
    fields = GGUFReader(str(gguf)).fields
    field = fields["tokenizer.ggml.tokens"]
    tokens = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
    model = fields.get("tokenizer.ggml.model")
    kinds = fields.get("tokenizer.ggml.token_type")
    if model is not None and bytes(model.parts[-1]).decode("utf-8") == "llama" and kinds:
        types = [int(kinds.parts[i][0]) for i in kinds.data]
        tokens = [
            t.replace(" ", SPACE_MARK) if kind == USER_DEFINED else t
            for t, kind in zip(tokens, types, strict=True)
        ]
    specials = {
        attr: int(fields[key].parts[-1][0]) for attr, key in GGUF_SPECIALS.items() if key in fields
    }
    return tokens, specials


def match_gguf_tokenizer(tokenizer: Any, tokens: list[str], specials: dict[str, int]) -> None:
    """Check ``tokenizer`` has the GGUF's vocabulary (tokens: in id order, as gguf_vocabulary
    reads them), then give it the GGUF's special tokens; GGUFConversionError when it differs."""
    vocab = tokenizer.get_vocab()
    if vocab != {token: i for i, token in enumerate(tokens)}:
        raise GGUFConversionError(
            f"transformers {transformers.__version__} converts the GGUF's tokenizer wrongly "
            f"({type(tokenizer).__name__} with {len(vocab)} tokens; the GGUF has {len(tokens)}): "
            "upgrade it with `pip install -U 'transformers>=5.6'`"
        )
    for attr, index in specials.items():
        setattr(tokenizer, attr, tokens[index])


def convert_gguf(gguf: Path, out: Path, *, model_id: str, step: Progress = _quiet) -> Path:
    """Dequantize ``gguf`` into an HF folder ``out`` (float32 model.safetensors, config,
    tokenizer, generation config); return the weights' path.

    model_id: the model's name on the hub, recorded as the config's name_or_path. step gets
    the part it is at ('reading the tokenizer', ...) as it goes.
    """
    auto_model: Any = transformers.AutoModelForCausalLM
    generation_config: Any = transformers.GenerationConfig
    load_gguf_checkpoint: Any = _load_gguf

    folder, name = str(gguf.parent), gguf.name
    step("reading the config")
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    config._name_or_path = model_id
    step("reading the tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    step("checking the tokenizer")
    match_gguf_tokenizer(tokenizer, *gguf_vocabulary(gguf))
    step("dequantizing the weights")
    model = auto_model.from_config(config, dtype=torch.float32)
    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)["tensors"]
    state = {k: torch.as_tensor(v, dtype=torch.float32).contiguous() for k, v in tensors.items()}
    result = model.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys if k != "lm_head.weight"]
    if missing or result.unexpected_keys:
        raise GGUFConversionError(f"GGUF conversion mismatch: {missing} {result.unexpected_keys}")
    step(f"writing {WEIGHTS}")
    out.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    generation_config(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
    ).save_pretrained(out)
    save_file(state, str(out / WEIGHTS), metadata={"format": "pt"})
    weights = out / WEIGHTS
    weights.chmod(0o644)
    return weights
