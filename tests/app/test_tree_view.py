"""The tree views from hand-made tree events: the tree, its mask, the node inspector, and what
the other views make of a tree round (no models, no server)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from html import unescape

import pytest
import torch

from specviz.app import views
from specviz.app.views.tree import visible_matrix
from specviz.core.events import (
    Accepted,
    Bonus,
    Event,
    Finished,
    Prefill,
    Rejected,
    Resampled,
    RoundSummary,
    TreeProposed,
    TreeVerified,
)
from specviz.jsonl import from_json, to_json
from specviz.tree.proposal import TokenTree

# Round 0: two children of the root (#0, #1), #0 has #2 and #3, #1 has #4, #2 has #5.
# The walk: #0 rejected, #1 kept; #1's only child #4 rejected; so the token after the path is
# resampled under #1. Untried: #2, #3 (their parent was rejected) and #5 (its grandparent).
PARENTS = (-1, -1, 0, 0, 1, 2)
TOP = ((7, 0.7, 0.4, 0.1), (8, 0.3, 0.2, 0.0), (9, 0.0, 0.0, 0.0))


def decode(token: int) -> str:
    """A fake tokenizer: token 9 is markup, to check escaping."""
    return "<i>" if token == 9 else f"t{token}"


def verdict(cls: type[Accepted | Rejected], node: int, position: int, u: float) -> Event:
    return cls(round=0, position=position, draft_index=node, token=10 + node, p_x=0.3, q_x=0.4,
               u=u, accept_prob=0.5)  # fmt: skip


def tree_log(exact: bool = True, rule: str = "exact") -> list[Event]:
    """One tree round as the tree decoder emits it, then a bonus-ended second round."""
    return [
        Prefill(prompt_tokens=3, target_seconds=0.0, draft_seconds=0.01),
        TreeProposed(
            round=0,
            position=0,
            tokens=tuple(10 + i for i in range(6)),
            parents=PARENTS,
            q_x=(0.4, 0.3, 0.2, 0.1, 0.6, 0.5),
            sampled=(True,) * 6,
        ),
        verdict(Rejected, 0, 0, 0.9),
        verdict(Accepted, 1, 0, 0.1),
        verdict(Rejected, 4, 1, 0.8),
        TreeVerified(round=0, path=(1,), rule=rule, exact=exact),
        Resampled(
            round=0,
            position=1,
            token=7,
            p_x=0.4,
            q_x=0.1,
            residual_x=0.7,
            residual_mass=0.5,
            top=TOP,
        ),
        RoundSummary(
            round=0,
            gamma=3,
            proposed=6,
            accepted=1,
            emitted=2,
            draft_seconds=0.01,
            target_seconds=0.01,
            draft_forward_calls=3,
        ),
        TreeProposed(round=1, position=2, tokens=(9,), parents=(-1,), q_x=(1.0,), sampled=(False,)),
        Accepted(
            round=1, position=2, draft_index=0, token=9, p_x=0.8, q_x=1.0, u=0.2, accept_prob=0.8
        ),
        TreeVerified(round=1, path=(0,), rule=rule, exact=exact),
        Bonus(round=1, position=3, token=5, p_x=0.6),
        RoundSummary(
            round=1,
            gamma=1,
            proposed=1,
            accepted=1,
            emitted=2,
            draft_seconds=0.01,
            target_seconds=0.01,
            draft_forward_calls=1,
        ),
        Finished(reason="max_new_tokens", new_tokens=4, seconds=0.1),
    ]


def first_round() -> views.TreeRound:
    return views.tree_rounds(tree_log())[0]


@pytest.mark.parametrize("seed", range(6))
def test_the_mask_is_the_token_trees_ancestors_or_self(seed: int) -> None:
    rng = random.Random(seed)
    parents = tuple(rng.randrange(-1, i) for i in range(rng.randrange(1, 20)))
    n = len(parents)
    tree = TokenTree(
        tokens=torch.zeros(n, dtype=torch.long), parents=parents, q_draft=torch.zeros(n + 1, 2),
        sampled=(True,) * n, forward_calls=0,
    )  # fmt: skip
    assert visible_matrix(parents) == tree.visible().tolist()


def test_the_mask_differs_for_another_tree() -> None:
    """Negative control: moving one parent changes the mask (the comparison above can fail)."""
    assert visible_matrix((-1, 0, 1)) != visible_matrix((-1, 0, 0))


def test_tree_rounds_collect_each_rounds_proposal_verdicts_path_and_next_token() -> None:
    first, second = views.tree_rounds(tree_log())
    statuses = [first.status(i) for i in range(first.size)]
    assert statuses == ["rejected", "kept", "untried", "untried", "rejected", "untried"]
    assert first.kept == [1] and first.path == (1,) and first.rule == "exact" and first.exact
    assert isinstance(first.next, Resampled) and first.done and first.depths == (1, 1, 2, 2, 2, 3)
    assert second.kept == [0] and isinstance(second.next, Bonus)
    assert views.pick_round([first, second], 0) is first
    assert views.pick_round([first, second], "x") is second  # not a round: the latest
    assert views.pick_round([], 0) is None and not views.tree_rounds(tree_log()[:1])
    empty = views.TreeRound(round=2, position=4, tokens=(), parents=(), q_x=(), sampled=())
    assert views.pick_round([first, second, empty], None) is second  # the latest with a tree
    assert views.pick_round([first, second, empty], 2) is empty and "<table" in views.mask_html(
        empty, decode
    )  # asked for: shown, empty as it is


def test_the_tree_highlights_the_path_greys_rejections_and_marks_untried_nodes() -> None:
    html = views.tree_panel_html(views.tree_rounds(tree_log()), 0, decode)
    for node, status in ((0, "rejected"), (1, "kept"), (2, "untried"), (4, "rejected")):
        assert f'class="sv-node sv-node-{status}" data-node="{node}"' in html
    assert html.count('data-status="kept"') == 1 and html.count('data-status="untried"') == 3
    order = re.findall(r'class="sv-node[^"]*" data-node="(\d+)"', html)
    assert order == ["0", "2", "5", "3", "1", "4", "6"]  # depth first; #6 under #1, after #4
    assert 'sv-node-next sv-resampled" data-node="6"' in html
    assert "round 0 of 0–1: 6 nodes, depth 3; kept path 1" in unescape(html)
    assert "sv-lossy" not in html


def test_the_mask_table_marks_ancestors_and_the_kept_row() -> None:
    html = views.mask_html(first_round(), decode)
    rows = html.split("<tr")[2:]  # after the header
    cells = [row.count('class="sv-on"') for row in rows]
    assert cells == [1, 1, 2, 2, 2, 3]  # each node sees itself and its ancestors
    assert 'class="sv-mask-kept"' in rows[1] and 'class="sv-mask-rejected"' in rows[0]


def test_the_node_inspector_explains_each_kind_of_node() -> None:
    tr = first_round()
    rejected = unescape(views.node_html(tr, 0, decode))
    assert "rejected: u ≥ P(keep) (0.9 vs 0.5)" in rejected and "p(x) target" in rejected
    assert "min(1, r(x)/q(x))" in rejected  # sampled children: recursive rejection
    assert "kept: u < P(keep)" in unescape(views.node_html(tr, 1, decode))
    assert "its parent #0 was not kept" in unescape(views.node_html(tr, 3, decode))
    assert "its parent #2 was not kept" in unescape(views.node_html(tr, 5, decode))
    after = unescape(views.node_html(tr, 6, decode))
    assert "the token after the kept path" in after and "mass left of p" in after
    assert after.count("<tr>") == 8 + 3  # its rows, then the residual table (zero rows dropped)
    for outside in (-1, 7, "x", None, 1.5):
        assert "Click a node" in views.node_html(tr, outside, decode)
    bonus = views.tree_rounds(tree_log())[1]
    text = unescape(views.node_html(bonus, 1, decode))
    assert "bonus" in text and "drawn from p after it" in text
    assert "chosen without sampling" in unescape(views.node_html(bonus, 0, decode))
    assert "drawn i.i.d. from its parent's q" in unescape(views.node_html(tr, 0, decode))


def test_a_lossy_round_carries_its_banner_and_rule() -> None:
    log = tree_log(exact=False, rule="typical")
    html = views.tree_panel_html(views.tree_rounds(log), 1, decode)
    assert 'class="sv-lossy"' in html and "do not follow the target" in unescape(html)
    text = unescape(views.node_html(views.tree_rounds(log)[0], 0, decode))
    assert "typical acceptance: LOSSY" in text
    stream = views.stream_html(views.cells_from_events(log, decode), lossy=True)
    assert stream.index("sv-lossy") < stream.index("sv-tok")  # above the tokens
    summary = views.summarize(log)
    assert summary["follows_target_law"] is False and summary["tree_rule"] == "typical"
    assert "NO: a lossy rule" in views.summary_html(summary)


def test_the_token_views_take_tree_rounds() -> None:
    cells = views.cells_from_events(tree_log(), decode)
    kinds = ["rejected", "accepted", "rejected", "resampled", "accepted", "bonus"]
    assert [c.kind for c in cells] == kinds
    assert Counter(c.position for c in cells if c.kind == "rejected") == {0: 1, 1: 1}
    assert [c.node for c in cells] == [0, 1, 4, None, 0, None] and all(c.tree for c in cells)
    inspector = unescape(views.inspector_html(cells[0]))
    assert "rejected: u = 0.9 ≥ P(keep) = 0.5 (tree node #0)" in inspector
    assert "min(1, p/q)" not in inspector and "tree node" in inspector
    html = views.stream_html(cells)
    assert html.count('data-kind="rejected"') == 2 and "&lt;i&gt;" in html


def test_several_rejected_siblings_share_a_position_in_the_stream() -> None:
    log = tree_log()
    log.insert(3, verdict(Rejected, 1, 0, 0.95))  # a second root child rejected at position 0
    cells = [c for c in views.cells_from_events(log, decode) if c.kind == "rejected"]
    assert [c.position for c in cells][:2] == [0, 0] and [c.node for c in cells][:2] == [0, 1]


def test_the_plots_and_summary_take_tree_rounds_without_chain_estimates() -> None:
    log = tree_log()
    rounds = [e for e in log if isinstance(e, RoundSummary)]
    for figure in (views.acceptance_figure, views.accepted_length_figure):
        fig = figure(rounds, tree=True)
        assert fig.data and not any("i.i.d." in (t.name or "") for t in fig.data)
    hist = views.accepted_histogram(rounds, tree=True)
    assert [t.name for t in hist.data] == ["rounds"] and list(hist.data[0].y) == [0, 2, 0, 0]
    chain = views.accepted_length_figure(rounds)
    assert any("i.i.d." in (t.name or "") for t in chain.data)  # the chain view keeps it
    assert views.pq_figure(views.cells_from_events(log, decode)).data
    s = views.summarize(log)
    assert s["tree"] and s["follows_target_law"] is True and s["mean_nodes_per_round"] == 3.5
    assert s["iid_speedup_estimate"] is None and s["kept_rates_speedup_estimate"] is None
    assert s["alpha"] == pytest.approx(2 / 7)
    html = unescape(views.summary_html(s))
    assert "tree depth (deepest round)" in html and "race it instead" in html
    json.dumps(s, allow_nan=False)


def test_the_race_never_calls_a_lossy_text_a_match() -> None:
    side = {"done": True, "tokens": [1, 2], "text": "ab", "tokens_per_second": 2.0}
    same = views.race_html(side, {**side, "follows_target_law": True}, greedy=True)
    assert "identical" in same and "LOSSY" not in same
    lossy = views.race_html(side, {**side, "follows_target_law": False}, greedy=True)
    assert "identical" not in lossy and "LOSSY" in lossy and 'class="sv-lossy"' in lossy


def test_tree_events_round_trip_to_the_same_views() -> None:
    log = tree_log()
    again = [from_json(to_json(e)) for e in log]
    assert views.tree_panel_html(views.tree_rounds(again), 0, decode) == views.tree_panel_html(
        views.tree_rounds(log), 0, decode
    )
