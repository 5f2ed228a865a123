"""CPU fast path: every nn.Linear of an inference model runs on a pre-packed oneDNN weight.

On CPU, PyTorch's default fp32 GEMM (MKL) re-packs the weight on every call, so with only a
few rows each extra row costs almost as much as the first: a pass over several tokens costs
well over a 1-token one, and that ratio r is what speculative decoding pays for verifying
γ + 1 tokens at once. A weight re-laid-out once for oneDNN (what torch.compile's CPU freezing
does) makes a 1-token pass cheaper and a pass over a few tokens cost about the same as a
1-token one, as the method assumes (r measured both ways: benchmarks/RESULTS.md, "What limits
the bundled pair on this CPU"). The arithmetic is the same product in a different order:
logits agree with the unpacked model to ~1e-4.

Inference only (no gradient), CPU only, fp32 / bf16 only; elsewhere `pack_linears` is a no-op.
The private oneDNN ops are probed once per call on a small example and skipped if missing.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

PACK_ROWS_HINT = 4  # oneDNN lays the weight out for about this many rows (the batch size hint)
PACKABLE_DTYPES = (torch.float32, torch.bfloat16)


class PackedLinear(nn.Module):
    """y = x Wᵀ + b with W (out, in) pre-packed for oneDNN; keeps `.weight` for code reading it."""

    def __init__(self, linear: nn.Linear) -> None:
        """Pack linear's weight once; the original weight is shared (tied heads still see it)."""
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.packed: Tensor = pack(linear.weight.detach())  # a plain attribute, not state

    def forward(self, x: Tensor) -> Tensor:
        """x (..., in) → (..., out)."""
        return packed_product(x, self.packed, self.bias)


def pack(weight: Tensor) -> Tensor:
    """The oneDNN layout of weight (out, in): a copy, for `packed_product`."""
    packed: Tensor = torch.ops.mkldnn._reorder_linear_weight(weight, PACK_ROWS_HINT)
    return packed


def packed_product(x: Tensor, packed: Tensor, bias: Tensor | None = None) -> Tensor:
    """x (..., in) Wᵀ + b for W (out, in) packed by `pack` → (..., out)."""
    out: Tensor = torch.ops.mkldnn._linear_pointwise(x.contiguous(), packed, bias, "none", [], "")
    return out


def packing_problem(model: Any) -> str | None:
    """Why model cannot be packed here (None if it can)."""
    param = next(iter(model.parameters()), None)
    if param is None:
        return "the model has no parameters"
    if param.device.type != "cpu":
        return f"packing is for CPU (the model is on {param.device.type})"
    if param.dtype not in PACKABLE_DTYPES:
        return f"packing supports float32 and bfloat16 (the model is {param.dtype})"
    if not torch.backends.mkldnn.is_available():  # type: ignore[no-untyped-call]
        return "this PyTorch build has no oneDNN (mkldnn)"
    return _probe(param.dtype)


def _probe(dtype: torch.dtype) -> str | None:
    """None if a packed linear agrees with F.linear on a small example in this dtype."""
    gen = torch.Generator().manual_seed(0)
    linear = nn.Linear(32, 24).to(dtype)
    x = torch.randn(3, 32, generator=gen).to(dtype)
    try:
        with torch.no_grad():
            got = PackedLinear(linear)(x)
            want = linear(x)
    except (RuntimeError, AttributeError) as err:  # op missing or unsupported on this CPU
        return f"oneDNN packed linear is not available: {err}"
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    if not torch.allclose(got.float(), want.float(), atol=tol, rtol=tol):
        return "oneDNN packed linear disagrees with torch.nn.functional.linear"
    return None


def pack_linears(model: Any) -> int:
    """Replace every nn.Linear in model (in place) by a PackedLinear; returns how many.

    Returns 0 and changes nothing when `packing_problem(model)` names a problem.
    """
    if packing_problem(model) is not None:
        return 0
    count = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                setattr(module, name, PackedLinear(child))
                count += 1
    return count


def is_packed(module: Any) -> bool:
    """Whether module is a PackedLinear."""
    return isinstance(module, PackedLinear)
