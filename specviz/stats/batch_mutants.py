"""Bugs of batched speculative decoding, each the real batch decoder with one step swapped.

They are negative controls for specviz.stats.batch: each breaks what a batch must keep, that
every row is exact on its own and that the rows are independent requests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from torch import Tensor

from specviz.batch.decoding import BatchSpeculativeDecoder
from specviz.core.acceptance import Verdict, residual, verify
from specviz.core.drafter import Draft
from specviz.core.sampling import sample, uniform


class RejectionTruncatesRows(BatchSpeculativeDecoder):
    """One row's rejection truncates every row: all keep the fewest drafts any row kept.

    Mirrors a batched verifier that keeps the batch rectangular by cutting every row to the
    shortest accepted run, then draws each row's next token from the residual at that position
    as though its draft there had been rejected (it was accepted, so that token should follow p).
    """

    def verify_rows(self, p_targets: list[Tensor], drafts: list[Draft]) -> list[Verdict]:
        """Each row's verdict, cut back to the smallest number of accepted drafts of the batch."""
        verdicts = super().verify_rows(p_targets, drafts)
        shortest = min(v.n_accepted for v in verdicts)
        return [
            v if v.n_accepted <= shortest else self._cut(v, p, d, r, shortest)
            for v, p, d, r in zip(verdicts, p_targets, drafts, self.live, strict=True)
        ]

    def _cut(self, verdict: Verdict, p_target: Tensor, draft: Draft, r: int, n: int) -> Verdict:
        """verdict with only n drafts kept and the next token from the residual at draft n."""
        next_dist = residual(p_target[n], draft.q_draft.to(p_target)[n])  # (V,)
        return dataclasses.replace(
            verdict,
            n_accepted=n,
            next_token=sample(next_dist, self.generators[r]),
            is_bonus=False,
            next_dist=next_dist,
        )


class SharedUniform(BatchSpeculativeDecoder):
    """One uniform per draft position, shared by every row of the batch.

    Mirrors a batched verifier drawing one vector of gamma uniforms per round (from the first
    row's stream) and broadcasting it over the rows instead of drawing a (B, gamma) array. Each
    row's own law stays exact; the rows' accept decisions move together, so they are no longer
    independent requests.
    """

    def verify_rows(self, p_targets: list[Tensor], drafts: list[Draft]) -> list[Verdict]:
        """Every row verified against the same uniforms, drawn from the first live row's stream."""
        longest = max(len(d.tokens) for d in drafts)
        shared = uniform(longest, self.generators[self.live[0]], p_targets[0])  # (gamma,)

        def uniforms(n: int, _generator: object, like: Tensor) -> Tensor:
            """The shared draws (n,), whatever generator is passed."""
            return shared[:n].to(like)

        rule = dataclasses.replace(self.rule, uniforms=uniforms)
        return [
            verify(p, d.q_draft.to(p), d.tokens.to(self.device), self.generators[r], rule)
            for r, p, d in zip(self.live, p_targets, drafts, strict=True)
        ]


class CacheCutToOtherRow(BatchSpeculativeDecoder):
    """Each row's target cache is cut to the next row's length (the lengths rolled by one row).

    Mirrors per-row lengths applied to the wrong rows: a list kept in one order (e.g. by request)
    used on a cache whose rows are in another. A row then keeps stale rejected drafts or loses
    committed positions, and its next tokens see the wrong context.
    """

    def crop_lengths(self) -> list[int]:
        """Row i keeps row i + 1's committed length (the last row keeps the first's)."""
        lengths = super().crop_lengths()
        return lengths[1:] + lengths[:1]


@dataclass(frozen=True, kw_only=True)
class BatchMutant:
    """A named batch decoder with one step swapped, and the bug it mirrors."""

    name: str
    description: str
    decoder_cls: type[BatchSpeculativeDecoder]


MUTANTS: tuple[BatchMutant, ...] = (
    BatchMutant(
        name="rejection_truncates_rows",
        description="every row cut to the fewest drafts any row accepted, then resampled there",
        decoder_cls=RejectionTruncatesRows,
    ),
    BatchMutant(
        name="shared_uniform",
        description="one uniform per draft position shared by all rows (rows not independent)",
        decoder_cls=SharedUniform,
    ),
    BatchMutant(
        name="cache_cut_to_other_row",
        description="each row's target cache cut to another row's length",
        decoder_cls=CacheCutToOtherRow,
    ),
)
