"""The swappable pieces of a batch round: how the live rows are verified, and how far each
row's target cache is cut back. EXACT_BATCH is the only correct rule (mutants swap a piece).

A live row is a request still decoding; lists over live rows are in the cache's row order.
Each row is verified with the acceptance rule (specviz.core.acceptance.AcceptanceRule), which
stays the decoder's own argument.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from specviz.core.acceptance import AcceptanceRule, Verdict, verify_round
from specviz.core.drafter import Draft

# (p_targets, drafts, gammas, generators, rule) -> each live row's verdict; row i's p_target is
# (k_i + 1, V) for its k_i drafted tokens, gammas[i] how many of them it verifies, generators[i]
# its own generator.
VerifyRows = Callable[
    [list[Tensor], list[Draft], list[int], list[torch.Generator], AcceptanceRule], list[Verdict]
]


def each_row_alone(
    p_targets: list[Tensor],
    drafts: list[Draft],
    gammas: list[int],
    generators: list[torch.Generator],
    rule: AcceptanceRule,
) -> list[Verdict]:
    """Each live row's verdict alone: its own uniforms and draws, from its own generator."""
    rows = zip(p_targets, drafts, gammas, generators, strict=True)
    return [verify_round(p, draft, gamma, gen, rule) for p, draft, gamma, gen in rows]


def own_lengths(lengths: list[int]) -> list[int]:
    """Each live row's cache keeps its own committed tokens but the last (lengths, unchanged)."""
    return lengths


@dataclass(frozen=True, kw_only=True)
class BatchRule:
    """How a batch round combines its rows.

    verify_rows gives every live row's verdict (VerifyRows above); crop(lengths) gives what each
    live row's target cache keeps after the round, from lengths, each row's committed tokens but
    the last.
    """

    verify_rows: VerifyRows = each_row_alone
    crop: Callable[[list[int]], list[int]] = own_lengths


EXACT_BATCH = BatchRule()
