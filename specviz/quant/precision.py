"""A model at a chosen precision: fp32, bf16, or int8 weights through torchao.

Precisions (the names every CLI flag and saved result use):
- fp32: the weights as trained (for the bundled target: its GGUF weights dequantized to fp32).
- bf16: every weight cast to bfloat16; activations in bfloat16 too.
- int8-weight: torchao's Int8WeightOnlyConfig on every nn.Linear (the output head included):
  int8 weights with one fp32 scale per output channel, dequantized in each matmul.
- int8-dynamic: torchao's Int8DynamicActivationInt8WeightConfig: int8 weights as above, and
  each activation quantized to int8 per token at run time, so the matmul is int8 × int8.

torchao is an optional dependency (`pip install torchao`); `precision_problem` says what is
missing before any model is loaded. Quantized weights are torchao tensor subclasses, so a
quantized model runs through transformers' forward (specviz.fast's packed and lean paths take
plain weights only).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from specviz.models.loading import load_model, quiet_torchao

PRECISIONS = ("fp32", "bf16", "int8-weight", "int8-dynamic")
INT8 = ("int8-weight", "int8-dynamic")
TORCHAO_HINT = "int8 precisions quantize through torchao: pip install 'torchao>=0.18'"


class PrecisionError(ValueError):
    """A precision that cannot run here; the message says what to change."""


def precision_problem(name: str, device: str = "cpu") -> str | None:
    """Why `name` cannot run on `device` (None: it can); checks names and libraries, no model."""
    if name not in PRECISIONS:
        return f"precision must be one of {', '.join(PRECISIONS)} (got {name!r})"
    if name in INT8 and importlib.util.find_spec("torchao") is None:
        return TORCHAO_HINT
    return None


def check_precision(name: str, device: str = "cpu") -> None:
    """Raise PrecisionError unless `name` can run on `device`."""
    problem = precision_problem(name, device)
    if problem is not None:
        raise PrecisionError(problem)


def quantize_int8(model: Any, name: str) -> Any:
    """Quantize every nn.Linear of `model` in place (int8-weight or int8-dynamic); returns it."""
    check_precision(name)
    if name not in INT8:
        raise PrecisionError(f"quantize_int8 takes {' or '.join(INT8)} (got {name!r})")
    with quiet_torchao():
        from torchao.quantization import (
            Int8DynamicActivationInt8WeightConfig,
            Int8WeightOnlyConfig,
            quantize_,
        )
    config = (
        Int8WeightOnlyConfig()
        if name == "int8-weight"
        else (Int8DynamicActivationInt8WeightConfig())
    )
    try:
        quantize_(model, config)
    except (RuntimeError, NotImplementedError, TypeError) as err:
        raise PrecisionError(f"torchao could not quantize the model to {name}: {err}") from None
    return model


def load_at_precision(
    spec: str,
    precision: str,
    *,
    role: str = "target",
    device: str = "cpu",
    pack: bool = True,
    progress: Callable[[str], None] = lambda _m: None,
) -> Any:
    """Load `spec` (bundled, a folder or a hub id) at `precision`, in eval mode.

    pack: pre-pack fp32 / bf16 weights for oneDNN on CPU (specviz.fast.packed); int8 models are
    never packed (their weights are torchao's).
    """
    check_precision(precision, device)
    if precision in INT8:
        model = load_model(spec, role=role, device=device, pack=False, progress=progress)
        return quantize_int8(model, precision)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    return load_model(spec, role=role, dtype=dtype, device=device, pack=pack, progress=progress)


def _storage_bytes(tensor: Tensor) -> int:
    """Bytes a tensor holds; a tensor subclass (torchao's) counts its inner tensors."""
    flatten = getattr(type(tensor), "__tensor_flatten__", None)
    if flatten is not None and type(tensor) not in (Tensor, torch.nn.Parameter):
        names, _ = tensor.__tensor_flatten__()  # type: ignore[attr-defined]
        return sum(_storage_bytes(getattr(tensor, n)) for n in names)
    return tensor.numel() * tensor.element_size()


def weight_bytes(model: Any) -> int:
    """Bytes of the model's parameters and buffers, each shared tensor once (a tied head once)."""
    seen: set[int] = set()
    total = 0
    tensors = [*model.parameters(), *model.buffers()]
    for t in tensors:
        key = id(t) if type(t) not in (Tensor, torch.nn.Parameter) else t.data_ptr()
        if key in seen:
            continue
        seen.add(key)
        total += _storage_bytes(t)
    return total
