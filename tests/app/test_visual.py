"""The views: token cells, HTML, plots and summaries built from events (no server, no browser)."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from html import unescape

import plotly.graph_objects as go
import pytest

from specviz.api import speculative_generate
from specviz.app import views
from specviz.app.views import metrics, tokens
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import (
    Accepted,
    Bonus,
    Event,
    Finished,
    Prefill,
    Proposed,
    Rejected,
    Resampled,
    RoundSummary,
    Sampled,
)
from specviz.gamma import theory

from ..conftest import PairFactory

TOP = ((7, 0.6, 0.5, 0.1), (8, 0.4, 0.3, 0.1))


def decode(token: int) -> str:
    """A fake tokenizer: token 9 is markup, to check escaping."""
    return "<b>" if token == 9 else f"t{token} "


def sample_log() -> list[Event]:
    """Two rounds: accept, reject, resample; then accept both and a bonus."""
    return [
        Prefill(prompt_tokens=3, target_seconds=0.01, draft_seconds=0.01),
        *(Proposed(round=0, position=i, draft_index=i, token=i, q_x=0.5) for i in range(3)),
        Accepted(round=0, position=0, draft_index=0, token=0, p_x=0.6, q_x=0.5, u=0.2,
                 accept_prob=1.0),
        Rejected(round=0, position=1, draft_index=1, token=1, p_x=0.1, q_x=0.5, u=0.7,
                 accept_prob=0.2),
        Resampled(round=0, position=1, token=7, p_x=0.5, q_x=0.1, residual_x=0.6,
                  residual_mass=0.4, top=TOP),
        RoundSummary(round=0, gamma=3, proposed=3, accepted=1, emitted=2, draft_seconds=0.03,
                     target_seconds=0.02, draft_forward_calls=3),
        *(Proposed(round=1, position=2 + i, draft_index=i, token=9, q_x=0.4) for i in range(2)),
        Accepted(round=1, position=2, draft_index=0, token=9, p_x=0.5, q_x=0.4, u=0.1,
                 accept_prob=1.0),
        Accepted(round=1, position=3, draft_index=1, token=9, p_x=0.3, q_x=0.4, u=0.5,
                 accept_prob=0.75),
        Bonus(round=1, position=4, token=5, p_x=0.9),
        RoundSummary(round=1, gamma=2, proposed=2, accepted=2, emitted=3, draft_seconds=0.02,
                     target_seconds=0.02, draft_forward_calls=2),
        Finished(reason="max_new_tokens", new_tokens=5, seconds=0.5),
    ]  # fmt: skip


def test_views_never_import_torch() -> None:
    code = "import specviz.app.views, specviz.app.views.form, specviz.app.views.lab, sys"
    code += "; import specviz.app.views.page, specviz.app.views.tree, specviz.app.views.tree_node"
    code += "; assert 'torch' not in sys.modules and 'scipy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cells_follow_the_log_with_positions_in_round() -> None:
    cells = views.cells_from_events(sample_log(), decode)
    assert [c.kind for c in cells] == ["accepted", "rejected", "resampled"] + ["accepted"] * 2 + [
        "bonus"
    ]
    assert [c.in_round for c in cells] == [0, 1, 1, 0, 1, 2]
    assert cells[1].position == cells[2].position and not cells[1].emitted
    assert views.emitted_text(cells) == "t0 t7 <b><b>t5 "
    assert cells[2].top == TOP and cells[1].u == 0.7


def test_stream_html_colours_marks_rounds_and_escapes() -> None:
    html = views.stream_html(views.cells_from_events(sample_log(), decode), prompt="a < b")
    for kind in ("accepted", "rejected", "resampled", "bonus"):
        assert f'class="sv-tok sv-{kind}"' in html
    assert html.count('class="sv-round"') == 2 and "a &lt; b" in html
    assert "<b>" not in html.replace('<b>"', "") and "&lt;b&gt;" in html
    assert 'data-idx="1"' in html and "min(1, p/q): 0.2" in html and "u ~ U(0, 1): 0.7" in html


def test_legend_names_each_outcome_with_a_second_cue_and_distinct_colours() -> None:
    html = views.legend_html()
    for kind in ("accepted", "rejected", "resampled", "bonus"):
        assert f"sv-{kind}" in html and tokens.CUES[kind] in html
    assert len(set(views.COLORS.values())) == len(views.COLORS)
    assert "line-through" in views.CSS and "double" in views.CSS


def test_inspector_shows_the_numbers_and_the_verdict() -> None:
    cells = views.cells_from_events(sample_log(), decode)
    rejected = views.inspector_html(cells[1])
    assert (
        "0.1" in rejected
        and "0.5" in rejected
        and "rejected: u = 0.7 ≥ min(1, p/q) = 0.2" in (rejected.replace("&#x27;", "'"))
    )
    assert "residual mass" in views.inspector_html(cells[2])
    assert "bonus" in views.inspector_html(cells[5])
    assert "Click a token" in views.inspector_html(None)


def test_summary_of_the_sample_log() -> None:
    s = views.summarize(sample_log(), plain_tokens_per_second=5.0)
    assert s["new_tokens"] == 5 and s["rounds"] == 2 and s["alpha"] == pytest.approx(3 / 5)
    assert s["mean_accepted_per_round_without_bonus"] == 1.5
    assert s["mean_tokens_per_round_with_bonus"] == 2.5
    assert s["cost_ratio_c"] == pytest.approx((0.05 / 5) / 0.02)
    assert s["measured_speedup"] == pytest.approx((5 / 0.5) / 5.0)
    assert s["iid_speedup_estimate"] == pytest.approx(theory.speedup_bound(0.6, 3, 0.5))
    # Per-position keep rates (Kaplan-Meier over the two rounds, each rate shrunk toward the
    # one before it by 2 pseudo-rounds): draft 1 kept 2 of 2, draft 2 kept 1 of 2, draft 3
    # never reached.
    a1 = (2 + 2 * 0.5) / (2 + 2)
    a2 = (1 + 2 * a1) / (2 + 2)
    a3 = (0 + 2 * a2) / (0 + 2)
    tokens = 1 + a1 + a1 * a2 + a1 * a2 * a3
    assert s["kept_rates_tokens_per_round"] == pytest.approx(tokens)
    assert s["kept_rates_speedup_estimate"] == pytest.approx(tokens / (3 * 0.5 + 1))
    json.dumps(s, allow_nan=False)
    empty = views.summarize([])
    assert empty["alpha"] is None and empty["iid_speedup_estimate"] is None
    assert empty["kept_rates_speedup_estimate"] is None
    json.dumps(empty, allow_nan=False)


def test_the_summary_calls_both_speedups_estimates_and_never_a_bound() -> None:
    s = views.summarize(sample_log(), plain_tokens_per_second=5.0)
    html = unescape(views.summary_html(s))
    assert "bound" not in html.split("</table>")[0].lower()  # no figure in the table is called so
    assert "speedup estimate, i.i.d. acceptances (Leviathan)" in html
    assert "speedup estimate from per-position keep rates" in html
    assert "estimates, not bounds" in html
    beaten = {**s, "measured_speedup": s["iid_speedup_estimate"] + 0.4}
    assert "beats the i.i.d. estimate" in unescape(views.summary_html(beaten))
    below = {**s, "measured_speedup": s["iid_speedup_estimate"] - 0.1}
    assert "beats" not in views.summary_html(below)


def test_summary_agrees_with_a_real_generation(pair: PairFactory, tokenizer) -> None:
    target, draft = pair("gpt2")
    result = speculative_generate(
        target, draft, tokenizer, "the cat",
        sampling=SamplingConfig(temperature=1.0, seed=3),
        speculation=SpeculationConfig(gamma=3, max_new_tokens=16),
    )  # fmt: skip
    s = views.summarize(result.events)
    assert s["new_tokens"] == len(result.tokens) and s["rounds"] == len(result.rounds)
    assert s["alpha"] == pytest.approx(result.acceptance_rate)
    assert s["target_calls"] == result.target_calls
    cells = views.cells_from_events(result.events, lambda t: tokenizer.decode([t]))
    assert views.emitted_text(cells) == tokenizer.decode(list(result.tokens))  # stop token too


def test_plots_are_figures_with_data_and_placeholders_when_empty() -> None:
    log = sample_log()
    rounds = [e for e in log if isinstance(e, RoundSummary)]
    cells = views.cells_from_events(log, decode)
    figs = [
        views.acceptance_figure(rounds),
        views.accepted_length_figure(rounds),
        views.accepted_histogram(rounds),
        views.pq_figure(cells),
        views.residual_figure(cells[2], decode),
    ]
    for fig in figs:
        assert isinstance(fig, go.Figure) and fig.data
        json.loads(fig.to_json())
    assert [t.name for t in figs[3].data][1:] == ["accepted", "rejected"]
    assert list(figs[4].data[0].y) == [0.6, 0.4]
    assert list(figs[2].data[0].y) == [0, 1, 1, 0]  # rounds accepting 0..max gamma drafts
    pmf3, pmf2 = theory.accepted_length_pmf(0.6, 3), [*theory.accepted_length_pmf(0.6, 2), 0]
    mixture = [a + b for a, b in zip(pmf3, pmf2, strict=True)]
    assert list(figs[2].data[1].y) == pytest.approx(mixture)
    each = [theory.expected_accepted_per_round(0.6, g) for g in (3, 2)]  # each round's own gamma
    assert list(figs[1].data[1].y) == pytest.approx(each)
    for fig in figs[:3]:  # rounds and counts: whole-number ticks only, never 0.5
        assert (fig.layout.xaxis.tick0, fig.layout.xaxis.dtick) == (0, 1)
    assert figs[1].layout.yaxis.dtick == figs[2].layout.yaxis.dtick == 1
    for empty in (
        views.acceptance_figure([]),
        views.pq_figure([]),
        views.residual_figure(None, str),
    ):
        assert not empty.data and empty.layout.annotations


def test_residual_figure_leaves_out_candidates_with_nothing_to_show() -> None:
    cell = views.cells_from_events(sample_log(), decode)[2]
    padded = dataclasses.replace(cell, top=(*TOP, (9, 0.0, 0.0, 0.0)))
    assert len(views.residual_figure(padded, decode).data[0].x) == len(TOP)


def test_run_steps_one_round_at_a_time() -> None:
    run = views.Run(stream=iter(sample_log()), decode=decode, prompt="p")
    assert run.step() and len(run.rounds) == 1 and not run.done
    assert [c.kind for c in run.cells()] == ["accepted", "rejected", "resampled"]
    assert run.step() and len(run.rounds) == 2 and not run.done
    assert run.step() and run.done and run.finished is not None
    assert not run.step() and run.cell(99) is None and run.cell(5) is not None


def test_plain_runs_step_per_token() -> None:
    log: list[Event] = [
        Prefill(prompt_tokens=1, target_seconds=0.0, draft_seconds=0.0),
        *(Sampled(position=i, token=i, p_x=0.5, target_seconds=0.01) for i in range(3)),
        Finished(reason="eos", new_tokens=3, seconds=0.1),
    ]
    run = views.Run(stream=iter(log), decode=decode)
    assert len(list(run.run_to_end())) == 4
    assert [c.kind for c in run.cells()] == ["sampled"] * 3
    assert views.summarize(run.log)["target_calls_per_token"] == 1.0


def test_panels() -> None:
    summary = views.summary_html(views.summarize(sample_log()))
    assert "without bonus" in summary and "Run the race" in summary
    done = {"done": True, "tokens_per_second": 10.0, "new_tokens": 5, "seconds": 0.5}
    same = views.race_html({**done, "text": "ab"}, {**done, "text": "ab"}, greedy=True)
    assert "identical" in same and "1.00×" in same
    assert "different" in views.race_html({**done, "text": "a"}, {**done, "text": "b"}, True)
    ids = {**done, "text": "ab"}  # the same text from different token ids is not a match
    assert "different" in views.race_html({**ids, "tokens": [1]}, {**ids, "tokens": [2]}, True)
    assert "identical" not in views.race_html({**done, "text": "a"}, {**done, "text": "a"}, False)
    assert "sv-status-error" in views.status_html("bad <input>", error=True)
    assert math.isfinite(metrics.cost_ratio([])) is False


def test_lab_view_plots_both_samples_and_the_exact_law_and_marks_rejections() -> None:
    from specviz.app.views.lab import OTHER, LabView

    spec = [(1, 2)] * 6 + [(3,)] * 3 + [(9, 9)]
    plain = [(1, 2)] * 5 + [(3,)] * 5
    exact = {(1, 2): 0.5, (3,): 0.4, (4, 4): 0.1}
    rows = [("joint vs exact law", "10", "9.1", "2", "0.001", "0.2", "0.5", "0.3", "REJECT")]
    rows += [("target log-prob (KS)", "20", "0.1", "0", "1", "0.1", "0.4", "-", "ok")]
    view = LabView(
        spec=spec, plain=plain, exact=exact, exact_first=None, decode=decode, sampler="x",
        alpha=0.01, rows=rows, rejected=1,
    )  # fmt: skip
    first, joint = view.figures()
    assert len(first.data) == 2 and len(joint.data) == 3  # no exact first-token law given
    assert list(joint.data[0].x) == ["t1␣·t2␣", "t3␣", "<b>·<b>", "t4␣·t4␣", OTHER]
    assert sum(joint.data[0].y) == pytest.approx(1.0) and joint.data[2].y[-1] == pytest.approx(0)
    assert "1 of 2 tests reject" in view.status() and "caught" in view.status()
    html = view.table_html()
    assert html.count('class="sv-reject"') == 1 and html.count('class="sv-pass"') == 1
    assert "TV upper bound" in html and "α = 0.01" in html
