"""Which requests serve each test: shared requests where outcomes are token sequences."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from specviz.audit.layout import layout, spread
from specviz.audit.power import Target
from specviz.audit.runner import AuditConfig, run_audit
from specviz.audit.sequential import LOOKS, plan
from specviz.audit.settings import Sample, Settings
from specviz.audit.sources import Side


@pytest.mark.parametrize(("n", "total"), [(0, 5), (1, 1), (3, 10), (2158, 6977), (7, 7)])
def test_spread_picks_n_distinct_indices_evenly(n: int, total: int) -> None:
    picked = spread(n, total)
    assert len(picked) == len(set(picked)) == n
    assert all(0 <= i < total for i in picked)
    for m in range(0, total + 1, max(1, total // 50)):  # every prefix holds its share, +-1
        assert abs(sum(i < m for i in picked) - m * n / total) <= 1


@pytest.mark.parametrize("sizes", [{1: 6977, 3: 2158}, {1: 40, 2: 40, 3: 12}, {1: 9, 3: 30}])
def test_shared_requests_serve_each_test_once_and_keep_their_length(sizes: dict[int, int]) -> None:
    lay = layout(sizes, shared=True)
    total = max(sizes.values())
    final = lay.requests(sizes)
    assert len(final) == total and len({i for _, i in final}) == total
    for k, n in sizes.items():
        slots = lay.test(k, n)
        assert len({i for _, i in slots}) == n
        assert all(tokens >= k for tokens, _ in slots)  # a request serves k when it asks >= k
    longest = max(sizes)
    assert lay.lengths(sizes)[longest] == sizes[longest]  # only the longest test's requests
    drawn: set[tuple[int, int]] = set()
    for look in LOOKS:  # a look's requests grow with the looks: nothing redrawn at another length
        now = set(lay.requests({k: round(n * look) for k, n in sizes.items()}))
        assert drawn <= now
        drawn = now


def test_text_outcomes_ask_each_k_apart() -> None:
    lay = layout({1: 5, 3: 2}, shared=False)
    assert lay.test(1, 5) == tuple((1, i) for i in range(5))
    assert lay.requests({1: 5, 3: 2}) == [(1, 0), (3, 0), (1, 1), (3, 1), (1, 2), (1, 3), (1, 4)]


@dataclass(frozen=True, kw_only=True)
class Counting:
    """An exact source of token outcomes that records how many tokens each request asks."""

    asked: list[int] = field(default_factory=list)
    name: str = "counting"
    token_outcomes: bool = True
    sides_at_once: bool = False

    def check(self, settings: Settings) -> None:
        pass

    def preflight(self) -> None:
        pass

    def sample(
        self, side: Side, prompt: str, settings: Settings, *, seed: int, tokens: int, top: bool
    ) -> Sample:
        self.asked.append(tokens)
        rng = random.Random(seed)
        return Sample(tokens=tuple(rng.choice("abcd") for _ in range(tokens)), top=None)


def test_an_audit_of_token_outcomes_asks_the_long_requests_only_where_needed() -> None:
    targets = (Target(k=1, tv=0.1, cells=8), Target(k=3, tv=0.2, cells=16))
    config = AuditConfig(prompts=("p",), settings=Settings(), targets=targets, logprob_samples=0)
    source = Counting()
    result = run_audit(source, config, lambda _: None)
    design = plan(targets, 1, alpha=config.alpha, goal=config.goal)
    assert result["verdict"] == "exact"
    look = int(result["stopped_at_look"]) - 1
    sizes = {k: design.size(k, look) for k in design.n}
    assert design.n[1] > design.n[3]
    assert source.asked.count(3) <= 2 * (sizes[3] + 1)  # both sides, +1 for rounding
    assert source.asked.count(1) >= 2 * (sizes[1] - sizes[3] - 1)
    assert len(source.asked) == 2 * len(layout(design.n, shared=True).requests(sizes))
