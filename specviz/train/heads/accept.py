"""Per-position losses of a drafting head against the target's soft labels, and α.

Terms, per position (N positions at once, V_d the draft vocabulary's size):

* p (N, V_d): the target's law of the next token at T = 1, known on its top-K tokens only
  (``exp(top_logp)``) and restricted to the draft vocabulary: Σ p ≤ 1, the mass outside the
  top K or the draft vocabulary left out. The head's q is zero off the draft vocabulary, so
  that mass can never be accepted anyway.
* q (N, V_d): the head's law, softmax of its logits; log q given as ``q_log``.
* α = Σ_x min(p(x), q(x)): the probability that a token drafted from q is kept by a target
  sampling from p at T = 1 (a lower bound where p's tail past the top K is unknown).

Losses (each (N,), averaged by the caller):

* ``kl``: the forward KL up to p's entropy, a constant: the cross entropy -Σ p log q;
* ``tv``: 1 - α, the rejection probability itself (total variation where Σ p = 1);
* ``lk``: λ · kl + (1 - λ) · tv, the KL term lending its dense gradient to the TV term that
  measures acceptance (after the LK losses, arXiv 2602.23881).
"""

from __future__ import annotations

import torch
from torch import Tensor

KINDS = ("kl", "tv", "lk")


def draft_index(vocab: Tensor, vocab_size: int) -> Tensor:
    """t2d (V,): a token's index in the draft vocabulary vocab (V_d,), or V_d off it."""
    index = torch.full((vocab_size,), int(vocab.shape[0]), dtype=torch.long, device=vocab.device)
    index[vocab] = torch.arange(int(vocab.shape[0]), device=vocab.device)
    return index


def soft_labels(top_ids: Tensor, top_logp: Tensor, t2d: Tensor, size: int) -> Tensor:
    """p (N, V_d) from the top-K ids (N, K) and log-probs (N, K), restricted by t2d (V,).

    size: V_d (t2d's value for a token off the draft vocabulary).
    """
    index = t2d[top_ids.long()]  # (N, K) in 0..V_d
    out = torch.zeros(top_ids.shape[0], size + 1, device=top_logp.device)
    out.scatter_add_(1, index, top_logp.float().exp())
    return out[:, :size]


def alpha(p: Tensor, q_log: Tensor) -> Tensor:
    """α (N,) = Σ_x min(p(x), q(x))."""
    return torch.minimum(p, q_log.exp()).sum(-1)


def position_loss(kind: str, p: Tensor, q_log: Tensor, lam: float = 0.5) -> Tensor:
    """The loss of `kind` ('kl', 'tv' or 'lk' with weight lam on KL) per position (N,)."""
    if kind == "kl":
        return -(p * q_log).sum(-1)
    if kind == "tv":
        return 1.0 - alpha(p, q_log)
    if kind == "lk":
        return lam * -(p * q_log).sum(-1) + (1.0 - lam) * (1.0 - alpha(p, q_log))
    raise ValueError(f"unknown loss {kind!r}: one of {', '.join(KINDS)}")
