"""The audit loop on a fake source with known laws: verdicts, early stops, resume, greedy
identity, refusals; and the planted-fault proxy's laws."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from specviz.audit.draw import Event, Looked, Planned
from specviz.audit.greedy import GreedyCase, compare, first_difference, greedy_verdict
from specviz.audit.power import Target
from specviz.audit.proxy import first_token, late_top_p_law, top_p_law
from specviz.audit.runner import AuditConfig, run_audit
from specviz.audit.settings import Sample, Settings
from specviz.audit.sources import Side, refuse
from specviz.audit.table import audit_table, result_lines

TOKENS = ["a", "b", "c", "d", "e"]
PLAIN = [0.4, 0.25, 0.15, 0.12, 0.08]


@dataclass(frozen=True, kw_only=True)
class FakeSource:
    """Tokens i.i.d. from PLAIN; the speculative side moves `shift` of the first token's mass
    from 'a' to 'e' (TV shift)."""

    shift: float = 0.0
    name: str = "fake"
    token_outcomes: bool = False
    sides_at_once: bool = False

    def check(self, settings: Settings) -> None:
        refuse(settings, {"frequency_penalty": "--frequency-penalty"}, "the fake")

    def preflight(self) -> None:
        pass

    def sample(
        self, side: Side, prompt: str, settings: Settings, *, seed: int, tokens: int, top: bool
    ) -> Sample:
        rng = random.Random(seed * 31 + len(prompt))
        first = list(PLAIN)
        if side == "spec":
            first[0] -= self.shift
            first[-1] += self.shift
        laws = [first] + [PLAIN] * (tokens - 1)
        out = tuple(rng.choices(TOKENS, weights=law)[0] for law in laws)
        reported = {t: float(np.log(p)) for t, p in zip(TOKENS, PLAIN, strict=True)}
        return Sample(tokens=out, top=tuple(reported for _ in out) if top else None)


def audit(source: FakeSource, **kw: object) -> tuple[dict[str, object], list[Event]]:
    events: list[Event] = []
    config = AuditConfig(prompts=("p1", "p2"), settings=Settings(), **kw)  # type: ignore[arg-type]
    return run_audit(source, config, events.append), events


TARGETS = (Target(k=1, tv=0.1, cells=8), Target(k=3, tv=0.2, cells=16))


def test_an_exact_source_is_exact_and_may_stop_early() -> None:
    result, events = audit(FakeSource(), targets=TARGETS)
    assert result["verdict"] == "exact"
    plan = next(e for e in events if isinstance(e, Planned))
    looks = [e for e in events if isinstance(e, Looked)]
    laws = 2 * 2 * sum(result["plan"]["n"].values())  # type: ignore[index]
    assert plan.requests == laws + 2 * 200  # and the default 200 logprob requests a prompt
    assert looks[-1].decision in ("exact", "done")
    assert result["logprob_check"]["applies"]  # type: ignore[index]
    assert not result["logprob_check"]["reject"]  # type: ignore[index]


@pytest.mark.parametrize("token_outcomes", [False, True])
def test_a_source_tv_apart_is_not_exact(token_outcomes: bool) -> None:
    result, _ = audit(FakeSource(shift=0.1, token_outcomes=token_outcomes), targets=TARGETS)
    assert result["verdict"] == "not exact"


def test_the_sides_drawn_at_once_give_the_same_samples_and_result() -> None:
    one, _ = audit(FakeSource(shift=0.05), targets=TARGETS, n=60)
    both, events = audit(FakeSource(shift=0.05, sides_at_once=True), targets=TARGETS, n=60)
    assert both["tests"] == one["tests"] and both["verdict"] == one["verdict"]
    assert next(e for e in events if isinstance(e, Planned)).at_once


def test_an_error_on_one_side_drawn_at_once_stops_the_audit() -> None:
    with pytest.raises(ValueError, match="plain side down"):
        audit(Broken(sides_at_once=True), targets=TARGETS, n=60)


@dataclass(frozen=True, kw_only=True)
class Broken(FakeSource):
    """The plain side fails on its fifth request."""

    def sample(
        self, side: Side, prompt: str, settings: Settings, *, seed: int, tokens: int, top: bool
    ) -> Sample:
        if side == "plain" and seed >= 9:
            raise ValueError("plain side down")
        return super().sample(side, prompt, settings, seed=seed, tokens=tokens, top=top)


def test_a_smaller_n_than_planned_without_rejection_is_inconclusive() -> None:
    result, _ = audit(FakeSource(), targets=TARGETS, n=40, logprob_samples=0)
    assert result["verdict"] == "inconclusive"
    assert result["stopped_at_look"] == 4


def test_resume_draws_nothing_twice(tmp_path: Path) -> None:
    saved = tmp_path / "samples.jsonl"
    first, _ = audit(FakeSource(), targets=TARGETS, n=40, samples=saved)
    again, _ = audit(FakeSource(), targets=TARGETS, n=40, samples=saved)
    assert first["budget"]["requests"] > 0 and again["budget"]["requests"] == 0  # type: ignore[index]
    assert again["tests"] == first["tests"]


def test_settings_the_source_cannot_honour_are_refused_before_sampling() -> None:
    with pytest.raises(ValueError, match=r"cannot apply --frequency-penalty 0\.5"):
        run_audit(
            FakeSource(),
            AuditConfig(prompts=("p",), settings=Settings(frequency_penalty=0.5)),
            lambda e: pytest.fail("sampled"),
        )


def test_a_budget_over_the_limit_is_refused_after_the_probe() -> None:
    with pytest.raises(ValueError, match="over --max-minutes"):
        audit(FakeSource(), targets=TARGETS, max_seconds=1e-9)


def test_greedy_cases() -> None:
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2
    tied = Sample(tokens=("x", "y"), top=({"x": -0.1}, {"y": -0.69, "z": -0.70}))
    far = Sample(tokens=("x", "y"), top=({"x": -0.1}, {"y": -0.1, "z": -3.0}))
    other = Sample(tokens=("x", "z"))
    assert compare(0, other, tied).kind == "tie"
    assert compare(0, other, far).kind == "bug"
    assert compare(0, other, other).kind == "identical"
    assert compare(0, other, Sample(tokens=("x", "y"))).kind == "unknown"
    assert greedy_verdict([GreedyCase(prompt=0, identical=True)]) == "exact"
    assert greedy_verdict([compare(0, other, far)]) == "not exact"


def test_proxy_first_token_fault_plants_the_stated_tv() -> None:
    law = {"a": 0.5, "b": 0.2, "c": 0.1, "d": 0.1, "e": 0.05, "f": 0.05}
    rng = random.Random(0)
    picks = [first_token(law, "a", 0.05, rng) for _ in range(20000)]
    assert picks[0][1] == pytest.approx(0.05)
    share = sum(t == "e" for t, _ in picks) / len(picks)  # x: the 5th likeliest
    assert share == pytest.approx(0.05 / 0.95, abs=0.005)


def test_proxy_late_top_p_differs_only_below_top_p_1() -> None:
    law = {"a": 0.5, "b": 0.3, "c": 0.15, "d": 0.05}
    assert late_top_p_law(law, 1.0) == pytest.approx(top_p_law(law, 1.0))
    wrong, right = late_top_p_law(law, 0.7), top_p_law(law, 0.7)
    assert right == pytest.approx({"a": 0.625, "b": 0.375})
    # the residual (b .6, c .3, d .1) cut to its nucleus 0.7 keeps b and c, renormalised
    assert wrong == pytest.approx({"a": 0.5, "b": 0.5 * 2 / 3, "c": 0.5 / 3})


def test_results_render_as_a_table_with_their_commands() -> None:
    law, _ = audit(FakeSource(shift=0.1), targets=TARGETS, command="specviz audit --x")
    greedy = run_audit(
        FakeSource(), AuditConfig(prompts=("p",), settings=Settings(temperature=0)), print
    )
    lines = audit_table([law, greedy | {"command": "specviz audit --temperature 0"}])
    assert lines[0].startswith("| engine | setting | verdict")
    assert "| not exact |" in lines[2] and "`specviz audit --x`" in lines[2]
    assert "greedy" in lines[3] and "`specviz audit --temperature 0`" in lines[3]
    assert result_lines(law)[-1] == "verdict: not exact"
