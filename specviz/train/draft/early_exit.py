"""Train the early-exit adapter: KL(target's final p || exit head's q) on the target's own text.

`python -m specviz.train.draft.early_exit --exit-layer 8 --steps 300 --out adapter.safetensors`
One no-grad pass of the full target per batch gives both the exit-layer hidden state and the
teacher distribution; only the adapter (d x d + d) is trained. Resumable from --out.
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch.nn import functional as F

from specviz.console import say
from specviz.drafters.early_exit import Adapter, decoder_stack
from specviz.models.loading import BUNDLED, load_model, load_tokenizer


def text_windows(tokenizer: Any, length: int, limit_files: int = 400) -> Iterator[list[int]]:
    """Token windows (length,) from the local Python standard library's sources."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if p.stat().st_size < 200_000)[:limit_files]
    for path in files:
        ids = tokenizer(path.read_text(encoding="utf-8", errors="ignore"))["input_ids"]
        for start in range(0, len(ids) - length, length):
            yield ids[start : start + length]


def kl_loss(target: Any, adapter: Adapter, k: int, batch: torch.Tensor) -> torch.Tensor:
    """Mean KL(p_target || q_exit) over the positions of batch (B, T)."""
    with torch.no_grad():
        out = target(input_ids=batch, output_hidden_states=True)
        p_log = F.log_softmax(out.logits.float(), dim=-1)  # (B, T, V)
        hidden = out.hidden_states[k]  # (B, T, d) after k decoder layers
    inner = decoder_stack(target)
    q_logits = target.lm_head(inner.norm(adapter(hidden))).float()  # (B, T, V)
    q_log = F.log_softmax(q_logits, dim=-1)
    return F.kl_div(q_log, p_log, log_target=True, reduction="none").sum(-1).mean()


def fit_adapter(
    target: Any,
    tokenizer: Any,
    k: int,
    *,
    steps: int,
    batch_size: int = 4,
    length: int = 128,
    lr: float = 1e-3,
    adapter: Adapter | None = None,
    log_every: int = 10,
) -> Iterator[tuple[int, float, Adapter]]:
    """Adam on the adapter only; yields (step, loss, adapter) every log_every steps."""
    width = int(target.config.hidden_size)
    adapter = adapter or Adapter(width).to(target.device, target.dtype)
    optimizer = torch.optim.Adam(adapter.parameters(), lr=lr)
    windows = text_windows(tokenizer, length)
    for step in range(1, steps + 1):
        rows = [next(windows, None) for _ in range(batch_size)]
        if any(r is None for r in rows):
            windows = text_windows(tokenizer, length)
            continue
        batch = torch.tensor(rows, device=target.device)  # (B, T)
        loss = kl_loss(target, adapter, k, batch)
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        if step % log_every == 0 or step == steps:
            yield step, float(loss), adapter


def main(argv: list[str] | None = None) -> int:
    """Command line: train and save an adapter for the bundled (or given) target."""
    parser = argparse.ArgumentParser(prog="python -m specviz.train.draft.early_exit")
    parser.add_argument("--target", default=BUNDLED)
    parser.add_argument("--exit-layer", type=int, default=8)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", default="early_exit_adapter.safetensors")
    args = parser.parse_args(argv)
    target = load_model(args.target, role="target", progress=say)
    tokenizer = load_tokenizer(args.target, progress=say)
    adapter = Adapter(int(target.config.hidden_size))
    if Path(args.out).is_file():
        adapter.load_state_dict(load_file(args.out))
        say(f"resuming from {args.out}")
    for step, loss, trained in fit_adapter(
        target, tokenizer, args.exit_layer, steps=args.steps, adapter=adapter
    ):
        say(f"step {step}: KL {loss:.4f}")
        save_file({n: t.contiguous() for n, t in trained.state_dict().items()}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
