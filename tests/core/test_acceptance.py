"""The acceptance rule: min(1, p/q), the residual, and the exact law of one round."""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch

from specviz.core.acceptance import EXACT, acceptance_prob, residual, verify


def test_acceptance_prob_is_min_one_ratio() -> None:
    p = torch.tensor([0.2, 0.5, 0.0, 0.3], dtype=torch.float64)
    q = torch.tensor([0.4, 0.25, 0.1, 0.0], dtype=torch.float64)
    assert acceptance_prob(p, q).tolist() == [0.5, 1.0, 0.0, 1.0]


def test_residual_is_normalised_positive_part() -> None:
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    q = torch.tensor([0.2, 0.6, 0.2], dtype=torch.float64)
    assert torch.allclose(residual(p, q), torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))


def test_residual_falls_back_to_p_when_p_equals_q() -> None:
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    r = residual(p, p.clone())
    assert not torch.isnan(r).any() and torch.equal(r, p)


def _random_dist(gen: torch.Generator, vocab: int) -> torch.Tensor:
    """A random distribution with some exact zeros, (V,)."""
    w = torch.rand(vocab, generator=gen, dtype=torch.float64) ** 3
    w[torch.rand(vocab, generator=gen, dtype=torch.float64) < 0.2] = 0.0
    w[int(torch.randint(vocab, (1,), generator=gen))] += 0.1
    return w / w.sum()


def round_law(
    gamma: int, vocab: int, seed: int
) -> tuple[dict[tuple[int, ...], float], dict[tuple[int, ...], torch.Tensor]]:
    """Exact law of the tokens one round emits, from the implementation's own pieces.

    p and q depend on the whole prefix of drafted tokens (drawn lazily per prefix). Returns
    the law over emitted tuples and the table of p rows per prefix.
    """
    gen = torch.Generator().manual_seed(seed)
    p_rows: dict[tuple[int, ...], torch.Tensor] = {}
    q_rows: dict[tuple[int, ...], torch.Tensor] = {}

    def p_of(prefix: tuple[int, ...]) -> torch.Tensor:
        return p_rows.setdefault(prefix, _random_dist(gen, vocab))

    def q_of(prefix: tuple[int, ...]) -> torch.Tensor:
        return q_rows.setdefault(prefix, _random_dist(gen, vocab))

    law: dict[tuple[int, ...], float] = defaultdict(float)

    def walk(prefix: tuple[int, ...], weight: float) -> None:
        p, q = p_of(prefix), q_of(prefix)
        if len(prefix) == gamma:  # all kept: bonus from p
            for y in range(vocab):
                law[(*prefix, y)] += weight * float(p[y])
            return
        res = EXACT.residual(p, q)
        for x in range(vocab):
            if q[x] == 0:
                continue
            a = float(EXACT.acceptance_prob(p[x : x + 1], q[x : x + 1])[0])
            walk((*prefix, x), weight * float(q[x]) * a)
            for y in range(vocab):
                law[(*prefix, y)] += weight * float(q[x]) * (1 - a) * float(res[y])

    walk((), 1.0)
    return dict(law), p_rows


@pytest.mark.parametrize("gamma", [1, 2, 4, 8])
def test_one_round_emits_exactly_p(gamma: int) -> None:
    vocab = 4 if gamma <= 4 else 3
    law, p_rows = round_law(gamma, vocab, seed=gamma)
    assert abs(sum(law.values()) - 1) < 1e-12
    first: dict[int, float] = defaultdict(float)
    for seq, prob in law.items():
        first[seq[0]] += prob
    for x in range(vocab):
        assert abs(first[x] - float(p_rows[()][x])) < 1e-9
    # deeper: given the round emitted prefix s (all accepted drafts), the next token follows p(s)
    for depth in range(1, gamma + 1):
        reach: dict[tuple[int, ...], float] = defaultdict(float)
        nxt: dict[tuple[int, ...], float] = defaultdict(float)
        for seq, prob in law.items():
            if len(seq) > depth:
                reach[seq[:depth]] += prob
                nxt[seq[: depth + 1]] += prob
        for s, mass in reach.items():
            if mass > 1e-12:
                for x in range(vocab):
                    assert abs(nxt[(*s, x)] / mass - float(p_rows[s][x])) < 1e-9


def test_enumeration_detects_a_wrong_residual() -> None:
    """Negative control for the enumeration itself: a residual of p breaks the law."""
    import specviz.core.acceptance as acc

    broken = acc.AcceptanceRule(residual=lambda p, q: p)
    gen = torch.Generator().manual_seed(0)
    p, q = _random_dist(gen, 4), _random_dist(gen, 4)
    a = broken.acceptance_prob(p, q)
    first = q * a + (q * (1 - a)).sum() * broken.residual(p, q)
    assert (first - p).abs().max() > 1e-3


def test_verify_counts_leading_accepts_and_draws_from_residual_or_p() -> None:
    vocab, gamma = 5, 3
    gen = torch.Generator().manual_seed(0)
    p = torch.stack([_random_dist(gen, vocab) for _ in range(gamma + 1)])
    q = torch.stack([_random_dist(gen, vocab) for _ in range(gamma)])
    tokens = torch.stack([torch.multinomial(q[i], 1, generator=gen)[0] for i in range(gamma)])
    for seed in range(100):
        v = verify(p, q, tokens, torch.Generator().manual_seed(seed))
        kept = [u < a for u, a in zip(v.u, v.accept_prob, strict=True)]
        assert v.n_accepted == (kept.index(False) if False in kept else gamma)
        assert v.is_bonus == (v.n_accepted == gamma)
        expected = p[gamma] if v.is_bonus else residual(p[v.n_accepted], q[v.n_accepted])
        assert torch.equal(v.next_dist, expected) and expected[v.next_token] > 0
