"""Tree drafters in the app: the form, the run path, the tree view, the lossy rule, the lab."""

from __future__ import annotations

import json
from collections import Counter
from html import unescape
from pathlib import Path

import gradio as gr
import pytest

from specviz.app import views
from specviz.app.drafting import TREE_RULES, tree_rule
from specviz.app.main import SpecVizApp
from specviz.app.tabs import results
from specviz.app.tabs.decode_panels import MAIN, RACE
from specviz.app.tabs.lab import MODELS, TOY, lab_pair
from specviz.app.views.form import DEFAULTS, TREE_DRAFTERS, TREE_RULE_CHOICES
from specviz.core.events import Rejected, TreeProposed
from specviz.drafters.names import REGISTRY
from specviz.drafters.names import TREE_DRAFTERS as REGISTERED_TREES
from specviz.jsonl import read_jsonl
from specviz.stats.lab import REAL, equivalence_tests, samplers
from specviz.stats.laws import draw
from specviz.stats.testing import estimated_power
from specviz.tree.verify import EXACT_TREE, TYPICAL

from .test_app import heads_dir, lab_request, model_dirs, served, settings

__all__ = ["heads_dir", "model_dirs", "served"]  # fixtures shared with test_app

pytestmark = [  # gradio's queue calls pandas in ways pandas 3 deprecates: not ours to fix
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting':Warning"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated:Warning"),
]
STREAM, STATUS, SUMMARY, ROUND, TREE, NODE = 1, 2, 7, 8, 9, 10  # render()'s outputs


@pytest.fixture(scope="module")
def app(model_dirs: tuple[str, str], heads_dir: str) -> SpecVizApp:
    return SpecVizApp(*model_dirs, heads=heads_dir)


def test_the_form_knows_every_registered_tree_drafter_and_rule() -> None:
    assert sorted(TREE_DRAFTERS) == sorted(REGISTERED_TREES) and len(TREE_DRAFTERS) == 6
    assert set(TREE_RULE_CHOICES) == set(TREE_RULES) == {EXACT_TREE.name, TYPICAL.name}
    assert TREE_RULES["typical"] is TYPICAL and not TYPICAL.exact
    assert tree_rule(settings(("t", "d"), drafter="tree-model")) is EXACT_TREE


def test_the_lossy_rule_is_never_the_default(app: SpecVizApp) -> None:
    assert DEFAULTS["tree_rule"] == "exact" and "default" in TREE_RULE_CHOICES["exact"]
    assert "lossy, does not follow the target's law" in TREE_RULE_CHOICES["typical"]
    [radio] = [b for b in app.build().blocks.values() if isinstance(b, gr.Radio)
               and b.elem_id == "sv-tree_rule"]  # fmt: skip
    assert radio.value == "exact" and [c[1] for c in radio.choices] == ["exact", "typical"]
    assert settings(("t", "d"), drafter="tree-model:sampled").exact


@pytest.mark.parametrize("drafter", sorted(REGISTERED_TREES))
def test_a_tree_drafter_runs_through_the_apps_run_path(
    app: SpecVizApp, model_dirs: tuple[str, str], drafter: str
) -> None:
    s = settings(model_dirs, drafter=drafter, prompt="abc abc abc", tree_nodes=8, tree_depth=3)
    outs = list(app.decode.generate(s))
    last, run = outs[-1], outs[-1][0]
    assert len(last) == len(MAIN) and "finished" in last[STATUS] and run.trees
    assert run.settings["tree_nodes"] == 8 and run.settings["follows_target_law"] is True
    assert "gamma" not in run.settings and "gamma_policy" not in run.settings
    assert all(len(t.tokens) <= 8 and max(t.depths, default=0) <= 3 for t in run.trees)
    cells = run.cells()
    rejected = sum(c.kind == "rejected" for c in cells)
    assert last[STREAM].count('data-kind="rejected"') == rejected  # every sibling shown
    assert last[ROUND] == max(t.round for t in run.trees if t.size) and "sv-tree-list" in last[TREE]
    assert "tree depth (deepest round)" in last[SUMMARY]
    for tr in run.trees:  # every round and every node (and the token after the path) inspects
        panel, _ = app.decode.tree_view(run, tr.round)
        assert f'data-round="{tr.round}"' in panel and panel.count("sv-node-kept") >= len(tr.kept)
        for node in range(tr.size + 1):
            inspector = app.decode.tree_view(run, tr.round, node)[1]
            assert f'data-node="{node}"' in inspector and "verdict" in inspector
    drafted = next(t for t in run.trees if t.size)  # a head drafts nothing in the first round
    node, inspector = app.decode.tree_click(run, drafted.round, gr.EventData(None, {"node": 0}))
    assert node == 0 and "q(x) draft" in inspector


def test_tree_rounds_show_rejected_siblings_at_one_position_in_every_view(
    app: SpecVizApp, model_dirs: tuple[str, str]
) -> None:
    s = settings(model_dirs, drafter="tree-model", tree_width=4, max_new=16)
    run = list(app.decode.generate(s))[-1][0]
    cells = run.cells()
    shared = Counter((c.round, c.position) for c in cells if c.kind == "rejected")
    assert max(shared.values()) >= 2  # siblings rejected at one position
    assert all(c.tree and c.node is not None for c in cells if c.kind in ("accepted", "rejected"))
    cell = next(c for c in cells if c.kind == "rejected")
    inspector, residual = app.decode.inspect(run, cell.index)
    assert "P(keep)" in unescape(inspector) and f"tree node #{cell.node}" in inspector
    assert residual.layout.title.text  # a figure, not a crash
    events_path, summary_path = app.decode.export(run)
    assert list(read_jsonl(events_path)) == run.log  # tree events round-trip
    assert json.loads(Path(summary_path).read_text())["follows_target_law"] is True
    race = list(app.decode.race(s))[-1]
    assert len(race) == len(RACE) and "speedup" in race[-1] and "LOSSY" not in race[-1]


def test_step_shows_one_tree_round_per_click(app: SpecVizApp, model_dirs: tuple[str, str]) -> None:
    s = settings(model_dirs, drafter="tree-model:sampled")
    first = list(app.decode.step(None, s))[-1]
    run = first[0]
    assert len(run.trees) == 1 and first[ROUND] == 0 and 'data-round="0"' in first[TREE]
    second = list(app.decode.step(run, s))[-1]
    assert len(run.trees) == 2 and second[ROUND] == 1 and 'data-round="1"' in second[TREE]
    assert 'data-round="0"' in app.decode.tree_view(run, 0)[0]  # an earlier round stays reachable


def test_a_lossy_tree_rule_marks_every_output(app: SpecVizApp, model_dirs: tuple[str, str]) -> None:
    s = settings(model_dirs, drafter="tree-model:sampled", tree_rule="typical")
    assert not s.exact
    last = list(app.decode.generate(s))[-1]
    run = last[0]
    assert not run.exact and all(not t.exact for t in run.trees)
    assert 'class="sv-lossy"' in last[STREAM] and "not follow the target" in unescape(last[STREAM])
    assert "LOSSY" in last[STATUS] and "NO: a lossy rule" in last[SUMMARY]
    assert 'class="sv-lossy"' in last[TREE]
    stepped = list(app.decode.step(None, s))[-1]
    assert 'class="sv-lossy"' in stepped[STREAM] and "LOSSY" in stepped[STATUS]
    _, summary_path = app.decode.export(run)
    saved = json.loads(Path(summary_path).read_text())
    assert saved["follows_target_law"] is False and saved["settings"]["tree_rule"] == "typical"
    typical = settings(model_dirs, drafter="tree-model:sampled", tree_rule="typical", temperature=0)
    race = list(app.decode.race(typical))[-1][-1]
    assert "LOSSY" in race and "identical" not in race  # never claimed to match the target
    exact = list(app.decode.generate(settings(model_dirs, drafter="tree-model:sampled")))[-1]
    assert "sv-lossy" not in exact[STREAM] + exact[TREE] and "LOSSY" not in exact[STATUS]


def test_views_of_a_chain_decode_are_unchanged_by_the_tree_view(
    app: SpecVizApp, model_dirs: tuple[str, str]
) -> None:
    last = list(app.decode.generate(settings(model_dirs)))[-1]
    assert not last[0].trees and last[ROUND] is None and "Choose a tree drafter" in last[TREE]
    assert "yes (exact verification)" in last[SUMMARY] and "sv-lossy" not in last[STREAM]
    assert "Click a node" in last[NODE]


def test_the_lab_tests_a_tree_drafter_and_catches_the_lossy_rule() -> None:
    """The exact tree sampler passes on the toy pair; typical acceptance (the negative control)
    is rejected at family-wise α = 0.01, with power ≥ 0.99 against the table's alternative."""
    n = 300
    for rule, rejects in (("exact", False), ("typical", True)):
        s = settings(("t", "d"), drafter="tree-model", tree_rule=rule)
        pair, req = lab_pair(s, None), lab_request(TOY, REAL, n)
        assert pair.drafter == "tree-model" and pair.tree
        spec, plain = samplers(pair, req, s.sampling, s.speculation.gamma, None)
        results, law, _ = equivalence_tests(
            pair, req, s.sampling, draw(spec, n, s.sampling.seed), draw(plain, n, 10**6)
        )
        assert law is not None and any(r.reject for r in results) is rejects, rule
        if rejects:
            assert results[0].reject and estimated_power(results[0], 0.01) >= 0.99


def test_the_lab_on_a_tree_drafter_labels_the_rule_and_refuses_chain_mutants(
    app: SpecVizApp, model_dirs: tuple[str, str]
) -> None:
    s = settings(("t", "d"), drafter="tree-ngram", tree_rule="typical")
    status = list(app.lab.run(s, lab_request(TOY, REAL, 20)))[-1][0]
    assert "typical tree rule (LOSSY: does not follow the target's law)" in unescape(status)
    real = settings(model_dirs, drafter="tree-model")
    status = list(app.lab.run(real, lab_request(MODELS, REAL, 20)))[-1][0]
    assert "none (real sampler), tree drafter tree-model" in status
    with pytest.raises(gr.Error, match="breaks a piece of chain speculation"):
        list(app.lab.run(real, lab_request(TOY, "accept_all", 20)))


def test_events_of_a_tree_decode_name_nodes_the_tree_view_draws(
    app: SpecVizApp, model_dirs: tuple[str, str]
) -> None:
    run = list(app.decode.generate(settings(model_dirs, drafter="tree-model")))[-1][0]
    proposed = [e for e in run.log if isinstance(e, TreeProposed)]
    assert [t.tokens for t in run.trees] == [e.tokens for e in proposed]
    for tr in run.trees:
        rejected = {e.draft_index for e in run.log if isinstance(e, Rejected)
                    and e.round == tr.round}  # fmt: skip
        assert {i for i in range(tr.size) if tr.status(i) == "rejected"} == rejected


def test_the_tree_endpoint_through_gradio_client(
    served: tuple[SpecVizApp, str], model_dirs: tuple[str, str]
) -> None:
    from gradio_client import Client

    from .test_app import form

    client = Client(served[1], verbose=False)
    *_, shown, tree, _node, _text, _result = client.predict(
        **form(model_dirs, drafter="tree-ngram", prompt="abc abc abc"), api_name="/generate"
    )
    assert shown is not None and "sv-tree-list" in tree
    panel, inspector = client.predict(0, 0, api_name="/tree")
    assert 'data-round="0"' in panel and 'data-node="0"' in inspector


def test_the_chosen_rounds_panel_is_built_from_the_views(app: SpecVizApp) -> None:
    assert "Choose a tree drafter" in views.tree_panel_html([], None, str)
    assert "Click a node" in app.decode.tree_view(None, 3, 1)[1]
    assert REGISTRY["tree-model"].tree and not REGISTRY["model"].tree


@pytest.mark.parametrize("rule", ["exact", "typical"])
def test_the_benchmark_tab_shows_a_tree_setting_and_labels_a_lossy_one(
    app: SpecVizApp, tmp_path: Path, rule: str
) -> None:
    from specviz.bench.report import load_result_view
    from specviz.bench.summary import gamma_curves, policies_vs_best_fixed, summarize
    from specviz.results.records import Record, RequestMetrics
    from specviz.results.setting import BenchSetting

    setting = BenchSetting(
        drafter="tree-model", gamma=4, temperature=0.0, draft_name="bundled", tree_nodes=16,
        tree_width=4, tree_rule=rule,
    )  # fmt: skip
    metrics = RequestMetrics(
        latency=1.0, plain_latency=1.5, tokens=10, rounds=5, proposed=40, accepted=12,
        rejected=20, draft_seconds=0.1, draft_calls=10, target_seconds=0.8,
    )  # fmt: skip
    record = Record(
        request_id="c-1", category="code", setting=setting, repetition=0, metrics=metrics,
        hf_latency=1.1, hf_tokens=10, hf_identical=True,
    )  # fmt: skip
    rows = summarize([record], 0.1)
    payload: dict[str, object] = {"meta": {"command": "specviz bench"}, "summary": rows}
    payload |= {"gamma_curves": gamma_curves(rows), "records": [record.to_dict()]}
    payload |= {"policies_vs_best_fixed": policies_vs_best_fixed(rows)}
    saved = tmp_path / "tree.json"
    saved.write_text(json.dumps(payload))
    *figs, tables = results.bench_result(None, str(saved), load_result_view)
    assert len(figs) == 5 and "tree-model N=16 w=4" in tables
    assert ("LOSSY" in tables) is (rule == "typical")
