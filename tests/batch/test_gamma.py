"""The γ cap by batch size: the table's lookup, its checks, and a decoder that keeps to it."""

from __future__ import annotations

import pytest

from specviz.batch.decoding import BatchSpeculativeDecoder
from specviz.batch.drafters import build_batch_drafter
from specviz.batch.gamma import GammaByRows, best_gammas
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import EMITTING, RoundSummary
from specviz.stats.toy import random_pair

TABLE = ((1, 4), (2, 2), (4, 2), (8, 1))


def test_the_cap_is_the_best_gamma_at_the_largest_measured_size_not_above() -> None:
    cap = GammaByRows(TABLE)
    assert [cap(rows) for rows in (0, 1, 2, 3, 4, 7, 8, 100)] == [4, 4, 2, 2, 2, 2, 1, 1]


@pytest.mark.parametrize("table", [(), ((2, 2),), ((1, 2), (1, 3)), ((1, 3), (4, 0))])
def test_a_table_that_cannot_cap_is_refused(table: tuple[tuple[int, int], ...]) -> None:
    with pytest.raises(ValueError, match="γ table"):
        GammaByRows(table)


def test_a_sweeps_best_entries_make_the_table() -> None:
    best = [{"batch_size": 4, "gamma": 2}, {"batch_size": 1, "gamma": 4}]
    assert best_gammas(best) == ((1, 4), (4, 2))


def decode(cap: GammaByRows | None, temperature: float) -> tuple[list[list[int]], list[int]]:
    """Three rows of a toy pair, one shorter: each row's tokens, and each round's γ."""
    target, draft = random_pair(8, seed=3, sharpness=1.0, draft_noise=0.5)
    prompts = [[1, 2], [3, 1, 4], [5]]
    decoder = BatchSpeculativeDecoder(
        target,
        build_batch_drafter("model", target=target, draft=draft),
        prompts,
        sampling=SamplingConfig(temperature=temperature, seed=5),
        speculation=SpeculationConfig(gamma=4, max_new_tokens=12),
        gamma_cap=cap,
    )
    decoder.join([2, 2], sampling=SamplingConfig(temperature=temperature), max_new_tokens=3, seed=1)
    tokens: list[list[int]] = [[] for _ in range(4)]
    gammas = []
    for event in decoder.events():
        if isinstance(event, EMITTING) and event.row is not None:
            tokens[event.row].append(event.token)
        if isinstance(event, RoundSummary):
            gammas.append((event.round, event.row, event.gamma, event.proposed))
    return tokens, [g for _, _, g, _ in gammas]


def test_rows_draft_at_most_the_cap_and_greedy_text_does_not_change() -> None:
    capped, gammas = decode(GammaByRows(((1, 4), (2, 3), (4, 1))), 0.0)
    uncapped, free = decode(None, 0.0)
    assert capped == uncapped  # greedy tokens do not depend on γ
    assert max(gammas) <= 3 and 1 in gammas  # 4 rows draft 1, fewer more
    assert max(free) == 4
