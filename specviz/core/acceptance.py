"""The acceptance rule of speculative sampling (Leviathan et al. 2023, Chen et al. 2023).

A draft token x drawn from q_draft is kept with probability min(1, p(x)/q(x)); the first
rejected one is replaced by a draw from norm(max(0, p - q)); if all gamma are kept, a bonus
token is drawn from the target's next distribution. The emitted tokens then follow p exactly.

A tree tries several children x_1..x_k of one node in turn against a working distribution r
(at first p there); each *step* below gives P(keep x) and the r to try the next child with.
specviz.tree.verify walks a whole tree with them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from specviz.core.config import SamplingConfig
from specviz.core.drafter import Draft
from specviz.core.sampling import logits_to_probs, sample, uniform


def acceptance_prob(p_x: Tensor, q_x: Tensor) -> Tensor:
    """min(1, p(x)/q(x)) elementwise (gamma,); a token q could not draw (q = 0) counts as 1."""
    safe_q = torch.where(q_x > 0, q_x, torch.ones_like(q_x))
    return torch.where(q_x > 0, torch.clamp(p_x / safe_q, max=1.0), torch.ones_like(p_x))


def residual(p_target: Tensor, q_draft: Tensor) -> Tensor:
    """norm(max(0, p - q)) over the vocabulary (V,); falls back to p when p == q (no NaN)."""
    excess = torch.clamp(p_target - q_draft, min=0.0)  # (V,)
    mass = excess.sum()
    return excess / mass if mass > 0 else p_target


Step = Callable[[Tensor, Tensor, int], tuple[Tensor, Tensor]]  # (r, q, x) -> (P(keep), r after)


def sampled_step(r: Tensor, q: Tensor, x: int) -> tuple[Tensor, Tensor]:
    """Children i.i.d. from q: keep x with min(1, r(x)/q(x)); else r <- norm(max(0, r - q))."""
    return acceptance_prob(r[x], q[x]), residual(r, q)


def deterministic_step(r: Tensor, q: Tensor, x: int) -> tuple[Tensor, Tensor]:
    """Children chosen without sampling: keep x with r(x); else r(x) <- 0, renormalised."""
    left = r.clone()
    left[x] = 0.0
    mass = left.sum()
    return r[x], left / mass if mass > 0 else r


TYPICAL_EPSILON, TYPICAL_DELTA = 0.3, 0.09  # Medusa's defaults


def typical_step(r: Tensor, q: Tensor, x: int) -> tuple[Tensor, Tensor]:
    """LOSSY, Medusa's typical acceptance: keep x when r(x) > min(eps, delta exp(-H(r)))."""
    entropy = -(r[r > 0] * r[r > 0].log()).sum()
    threshold = min(TYPICAL_EPSILON, TYPICAL_DELTA * math.exp(-float(entropy)))
    return (r[x] > threshold).to(r.dtype), r


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """Outcome of one round: how many drafts were kept and the token that follows them."""

    n_accepted: int
    next_token: int
    is_bonus: bool
    p_x: tuple[float, ...]  # p(x_i) for each draft token
    q_x: tuple[float, ...]  # q(x_i) for each draft token
    accept_prob: tuple[float, ...]  # min(1, p/q) per draft token
    u: tuple[float, ...]  # the uniform draw compared against accept_prob
    next_dist: Tensor  # (V,) the distribution next_token was drawn from (residual or p)

    def fields(self, i: int) -> dict[str, float]:
        """Draft token i's p_x, q_x, u and accept_prob, as an event's fields."""
        return {
            "p_x": self.p_x[i],
            "q_x": self.q_x[i],
            "u": self.u[i],
            "accept_prob": self.accept_prob[i],
        }


def target_bonus(verdict: Verdict, spare: Tensor, spare_q: Tensor) -> Verdict:
    """The exact bonus: the verdict as verify drew it (from p after the last draft)."""
    return verdict


@dataclass(frozen=True, kw_only=True)
class AcceptanceRule:
    """The swappable pieces of verification; EXACT is the only correct one (mutants swap one).

    warp_target turns the target's logits (..., V) into p_target under the sampling config;
    lookahead is how many draft tokens are asked for past gamma each round and left unverified
    (the spare tokens); bonus(verdict, spare (e,), spare_q (e, V)) gives the round's verdict
    from verify's, and may read the spare tokens.
    """

    acceptance_prob: Callable[[Tensor, Tensor], Tensor] = acceptance_prob
    residual: Callable[[Tensor, Tensor], Tensor] = residual
    uniforms: Callable[[int, torch.Generator, Tensor], Tensor] = uniform
    warp_target: Callable[[Tensor, SamplingConfig], Tensor] = logits_to_probs
    lookahead: int = 0
    bonus: Callable[[Verdict, Tensor, Tensor], Verdict] = target_bonus


EXACT = AcceptanceRule()


def verify(
    p_target: Tensor,
    q_draft: Tensor,
    draft_tokens: Tensor,
    generator: torch.Generator,
    rule: AcceptanceRule = EXACT,
) -> Verdict:
    """Verify draft_tokens (gamma,) given p_target (gamma+1, V) and q_draft (gamma, V)."""
    gamma = draft_tokens.shape[0]
    rows = torch.arange(gamma, device=draft_tokens.device)
    p_x = p_target[rows, draft_tokens]  # (gamma,)
    q_x = q_draft[rows, draft_tokens]  # (gamma,)
    accept = rule.acceptance_prob(p_x, q_x)  # (gamma,)
    u = rule.uniforms(gamma, generator, accept)  # (gamma,)
    rejected = (u >= accept).nonzero()
    n = int(rejected[0].item()) if rejected.numel() else gamma
    is_bonus = n == gamma
    next_dist = p_target[gamma] if is_bonus else rule.residual(p_target[n], q_draft[n])
    return Verdict(
        n_accepted=n,
        next_token=sample(next_dist, generator),
        is_bonus=is_bonus,
        p_x=tuple(p_x.tolist()),
        q_x=tuple(q_x.tolist()),
        accept_prob=tuple(accept.tolist()),
        u=tuple(u.tolist()),
        next_dist=next_dist,
    )


def verify_round(
    p_target: Tensor, draft: Draft, gamma: int, generator: torch.Generator, rule: AcceptanceRule
) -> Verdict:
    """Verify a round's first gamma drafts given p_target (k+1, V) for its k drafted tokens;
    the k - gamma after them (rule.lookahead) are spare, for rule.bonus to read."""
    q_draft, tokens = draft.q_draft.to(p_target), draft.tokens.to(p_target.device)
    g = min(gamma, tokens.shape[0])
    verdict = verify(p_target[: g + 1], q_draft[:g], tokens[:g], generator, rule)
    return rule.bonus(verdict, tokens[g:], q_draft[g:])
