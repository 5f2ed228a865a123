"""Timing arithmetic of the endpoint sweep: TPOT from usage, pairing, rows and verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from specviz.endpoint.table import endpoint_rows, paired, render_endpoint, tpot, verdicts


def _run(side: str, c: int, request: str, e2e: float, ttft: float | None, tokens: int,
         text: str = "x", t: float = 0.0, rep: int = 0) -> dict[str, Any]:  # fmt: skip
    return {
        "side": side, "concurrency": c, "rep": rep, "request": request, "category": "code",
        "temperature": t, "ttft": ttft, "e2e": e2e, "tokens": tokens, "prompt_tokens": 5,
        "chunks": 3, "finish_reason": "length", "text": text, "engine": {},
    }  # fmt: skip


def _batch(side: str, c: int, wall: float, counters: dict[str, Any] | None = None,
           t: float = 0.0) -> dict[str, Any]:  # fmt: skip
    return {"side": side, "concurrency": c, "rep": 0, "temperature": t, "wall": wall,
            "requests": 2, "counters": counters}  # fmt: skip


def _section(runs: list[dict[str, Any]], batches: list[dict[str, Any]]) -> dict[str, Any]:
    ends = {s: {"url": f"http://127.0.0.1:{p}", "model": "m", "chat": True, "stream": True,
                "extra": [], "counters": False} for s, p in (("spec", 1), ("base", 2))}  # fmt: skip
    plan = {"concurrency": [1, 4], "repetitions": 1, "warmup": 1, "baseline": "a second server",
            "requests": ["a", "b"]}  # fmt: skip
    return {"plan": plan, "endpoints": ends, "runs": runs, "batches": batches}


def test_tpot_counts_tokens_from_usage_after_the_first() -> None:
    assert tpot(e2e=1.1, ttft=0.1, tokens=11) == pytest.approx(0.1)
    assert tpot(e2e=1.0, ttft=0.2, tokens=1) is None  # one token: no time between tokens
    assert tpot(e2e=1.0, ttft=None, tokens=9) is None  # unstreamed: no TTFT, no TPOT
    assert tpot(e2e=1.0, ttft=0.2, tokens=None) is None


def test_pairs_match_request_concurrency_and_repetition() -> None:
    runs = [_run("spec", 1, "a", 1.0, 0.1, 10), _run("base", 1, "a", 2.0, 0.1, 10),
            _run("spec", 1, "b", 1.0, 0.1, 10), _run("base", 4, "b", 2.0, 0.1, 10),
            _run("base", 1, "a", 9.0, 0.1, 10, rep=1)]  # fmt: skip
    pairs = paired(runs)
    assert [(b["request"], b["e2e"], s["e2e"]) for b, s in pairs] == [("a", 2.0, 1.0)]


def test_rows_throughput_cost_speedup_and_identity() -> None:
    runs = [
        _run("spec", 1, "a", 1.0, 0.1, 10, text="same"),
        _run("base", 1, "a", 2.0, 0.2, 10, text="same"),
        _run("spec", 1, "b", 0.5, 0.1, 5, text="one"),
        _run("base", 1, "b", 2.0, 0.2, 5, text="other"),
    ]
    counters = {"num_drafts": 4.0, "num_draft_tokens": 12.0, "num_accepted_tokens": 6.0,
                "per_position": [3.0, 2.0, 1.0]}  # fmt: skip
    batches = [_batch("spec", 1, 1.5, counters), _batch("base", 1, 4.0)]
    (row,) = endpoint_rows(_section(runs, batches), price=3.6)
    assert row["spec"]["tokens_per_second"] == pytest.approx(15 / 1.5)
    assert row["base"]["tokens_per_second"] == pytest.approx(15 / 4.0)
    assert row["throughput_ratio"] == pytest.approx(4.0 / 1.5)
    assert row["paired_speedup"] == pytest.approx(3.0)  # median of 2.0 and 4.0
    # cost: 3.6 USD/h is 0.001 USD/s; 1.5 s for 15 tokens is 0.1 USD per 1k
    assert row["spec"]["cost_per_1k_tokens"] == pytest.approx(0.1)
    assert row["spec"]["ttft"] == pytest.approx(0.1)
    assert row["spec"]["tpot"] == pytest.approx(statistics_median([0.9 / 9, 0.4 / 4]))
    assert row["identical"] == 1 and row["pairs"] == 2
    assert row["engine"]["rate"] == pytest.approx(0.5)
    assert row["engine"]["length"] == pytest.approx(2.5)


def statistics_median(values: list[float]) -> float:
    ordered = sorted(values)
    return (ordered[0] + ordered[1]) / 2


def test_sampled_rows_have_no_identity_check_and_absent_engine_says_so() -> None:
    runs = [_run("spec", 1, "a", 1.0, None, 10, t=1.0), _run("base", 1, "a", 1.0, None, 10, t=1.0)]
    section = _section(runs, [_batch("spec", 1, 1.0, t=1.0), _batch("base", 1, 1.0, t=1.0)])
    (row,) = endpoint_rows(section, price=1.0)
    assert row["identical"] is None
    assert row["spec"]["ttft"] is None and row["spec"]["tpot"] is None
    text = render_endpoint(section, 1.0)
    assert "| T=1 | 1 |" in text and "absent" in text


def test_verdicts_say_where_speculation_stops_paying() -> None:
    rows = [{"temperature": 0.0, "concurrency": c, "paired_speedup": s}
            for c, s in ((1, 1.4), (2, 1.1), (4, 0.9), (8, 0.7))]  # fmt: skip
    rows += [{"temperature": 1.0, "concurrency": 1, "paired_speedup": 0.8}]
    rows += [{"temperature": 0.7, "concurrency": c, "paired_speedup": s}
             for c, s in ((1, 1.2), (2, 0.9), (4, 1.1))]  # fmt: skip
    rows += [{"temperature": 0.5, "concurrency": c, "paired_speedup": 1.1} for c in (1, 2)]
    assert verdicts(rows) == [
        "greedy: speculation paid up to concurrency 2; it stopped paying from 4",
        "T=0.5: speculation paid at every concurrency tried (up to 2)",
        "T=0.7: speculation paid at concurrency 1, 4, not at 2",
        "T=1: speculation did not pay at any concurrency tried",
    ]


def test_the_saved_section_must_count_tokens_from_usage() -> None:
    from specviz.results.sections import problems

    runs = [_run("spec", 1, "a", 1.0, 0.1, 10)]
    good = _section(runs, [_batch("spec", 1, 1.0)])
    assert problems("endpoint", good) == [] and problems("endpoint", None) == []
    no_usage = _section([runs[0] | {"tokens": None}], good["batches"])
    assert problems("endpoint", no_usage) == [
        "endpoint's runs must count tokens from the server's usage"
    ]
    assert "lacks" in problems("endpoint", _section([{"side": "spec"}], good["batches"]))[0]
    assert "neither null" in problems("endpoint", {"runs": []})[0]


def test_a_batch_smaller_than_the_concurrency_is_filled_with_copies() -> None:
    from specviz.endpoint.client import Job
    from specviz.endpoint.sweep import filled

    jobs = [Job(request=r, category="c", prompt="p", max_tokens=4, temperature=0.0, seed=i)
            for i, r in enumerate("abc")]  # fmt: skip
    assert [(c, j.request) for c, j in filled(jobs, 2)] == [(0, "a"), (0, "b"), (0, "c")]
    eight = filled(jobs, 8)
    assert len(eight) == 9 and [c for c, _ in eight] == [0] * 3 + [1] * 3 + [2] * 3
    runs = [_run("spec", 8, "a", 1.0, 0.1, 10) | {"copy": k} for k in (0, 1)]
    runs += [_run("base", 8, "a", 2.0 * (k + 1), 0.1, 10) | {"copy": k} for k in (0, 1)]
    assert [b["e2e"] / s["e2e"] for b, s in paired(runs)] == [2.0, 4.0]  # copy pairs with copy
