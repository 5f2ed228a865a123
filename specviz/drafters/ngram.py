"""N-gram prompt lookup drafting: propose what followed the last n tokens earlier in the text.

The drafter is deterministic, so q is one-hot: acceptance becomes min(1, p(x)) and the residual
norm(max(0, p - onehot(x))). The output law stays exactly the target's, at any temperature. The
one-hot rows are written into a buffer the drafter reuses (specviz.drafters.sparse_q).
"""

from __future__ import annotations

from collections.abc import Collection

import torch

from specviz.core.drafter import Draft
from specviz.drafters.sparse_q import SparseRows


class NgramDrafter:
    """Prompt lookup (no model): match the last n tokens, n from max_ngram down to min_ngram."""

    def __init__(
        self, vocab_size: int, *, max_ngram: int = 3, min_ngram: int = 1, device: str = "cpu"
    ) -> None:
        """Validate the n-gram range; nothing is kept between rounds but the q buffer."""
        check_ngram_sizes(min_ngram, max_ngram)
        self.vocab_size, self.max_ngram, self.min_ngram = vocab_size, max_ngram, min_ngram
        self.device = torch.device(device)
        self.q = SparseRows(vocab_size, self.device)

    def prefill(self, prefix: list[int]) -> None:
        """Nothing to precompute."""

    def rollback(self, committed: int) -> None:
        """Stateless: nothing to roll back."""

    def propose(
        self,
        ids: list[int],
        gamma: int,
        generator: torch.Generator,
        stop_ids: Collection[int],
    ) -> Draft:
        """Up to gamma tokens copied from after the latest earlier match of the longest n-gram."""
        tokens = lookup(ids, gamma, self.max_ngram, self.min_ngram)
        for i, token in enumerate(tokens):
            if token in stop_ids:
                tokens = tokens[: i + 1]
                break
        chain, q_draft = self.q.chain(tokens)  # (k,) and (k, V) one-hot rows
        return Draft(tokens=chain, q_draft=q_draft, forward_calls=0)


def check_ngram_sizes(min_ngram: int, max_ngram: int) -> None:
    """Raise ValueError unless 1 <= min_ngram <= max_ngram."""
    if min_ngram < 1 or max_ngram < min_ngram:
        raise ValueError(
            f"n-gram sizes must satisfy 1 <= min_ngram <= max_ngram "
            f"(got min_ngram={min_ngram}, max_ngram={max_ngram})"
        )


def lookup(ids: list[int], gamma: int, max_ngram: int, min_ngram: int) -> list[int]:
    """The continuation (<= gamma tokens) of the latest earlier occurrence of ids' last n-gram."""
    for n in range(min(max_ngram, len(ids) - 1), min_ngram - 1, -1):
        pattern = ids[-n:]
        for start in range(len(ids) - n - 1, -1, -1):
            if ids[start : start + n] == pattern:
                return ids[start + n : start + n + gamma]
    return []
