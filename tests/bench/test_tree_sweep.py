"""Tree drafters in the bench and the node-budget sweep, on tiny models (no timing asserts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specviz.bench.report import load_result_view, render, resummarized
from specviz.bench.runner import has_hf_counterpart, run_request
from specviz.bench.sweep import unplain
from specviz.bench.sweeps.trees import PASS_REPEATS, SweepPlan, parse_nodes
from specviz.cli import main
from specviz.results.schema import SCHEMA, migrate, validate
from specviz.results.setting import LOSSY, BenchSetting
from specviz.results.tree_tables import sweep_table
from specviz.tree.proposal import top_k_capacity, top_k_shape
from specviz.tune.timing import tree_pass_timings
from specviz.workloads import Request

from ..conftest import PairFactory, save_pair

PROMPTS = [("c-1", "abcabcab"), ("c-2", "the cat the")]


def _argv(root: Path, pair: PairFactory, tokenizer: Any, *extra: str) -> list[str]:
    """A bench command line on the tiny llama pair and two short prompts, writing root/b.*."""
    if not (root / "target").exists():
        save_pair(root, *pair("llama"), tokenizer)
        rows = [
            {"id": i, "category": "code", "prompt": p, "max_new_tokens": 10, "temperature": 0.0}
            for i, p in PROMPTS
        ]
        (root / "w.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    argv = ["bench", "--target", str(root / "target"), "--draft", str(root / "draft")]
    argv += ["--workloads", str(root / "w.jsonl"), "--reps", "1", "--step-batch-sizes", "1"]
    argv += ["--dtype", "float64", "--out", str(root / "b.json"), "--html", str(root / "b.html")]
    return [*argv, *extra]


def _sweep(root: Path, pair: PairFactory, tokenizer: Any, *extra: str) -> dict[str, Any]:
    argv = _argv(root, pair, tokenizer, "trees", "--nodes", "1,4,8", "--tree-depth", "3", *extra)
    assert main(argv) == 0
    result: dict[str, Any] = json.loads((root / "b.json").read_text())
    return result


def test_the_sweep_reports_each_node_budget_and_round_trips(
    pair: PairFactory, tokenizer: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _sweep(tmp_path, pair, tokenizer, "--drafters", "tree-model,tree-ngram")
    validate(result)
    assert result["schema"] == SCHEMA
    sweep = result["tree_sweep"]
    assert sweep["plan"] == {
        "drafters": ["tree-model", "tree-ngram"],
        "nodes": [1, 4, 8],
        "depth": 3,
        "width": 4,
        "rule": "exact",
        "exact": True,
    }
    # 2 prompts x 1 repetition x (chains model and ngram + 2 tree drafters x N = 4, 8)
    assert len(result["records"]) == 2 * (2 + 2 * 2)
    rows = sweep["rows"]
    assert [(r["drafter"], r["nodes"]) for r in rows] == [
        (d, n) for d in ("tree-model", "tree-ngram") for n in (1, 4, 8)
    ]
    for row in rows:
        assert row["runs"] == 2 and row["exact"]
        assert row["tokens_per_pass"]["low"] >= 1.0  # a round emits its next token at least
        assert row["pass_ratio"] > 0 and row["speedup"]["median"] > 0
        assert row["draft_calls_per_round"] <= 3  # at most one draft call a level: D = 3
        assert row["vs_transformers"] is not None  # the chain's counterpart ran every repetition
        if row["nodes"] == 1:
            assert row["setting"]["tree_nodes"] is None and row["setting"]["gamma"] == 3
            assert row["vs_chain"] is None and row["pays"] is None
        else:
            assert row["setting"]["tree_nodes"] == row["nodes"]
            assert row["nodes_per_round"] <= row["nodes"]
            assert row["pays"] == (row["vs_chain"]["median"] > 1.0)
    timings = {t["nodes"]: t for t in sweep["passes"]["timings"]}
    assert set(timings) == {0, 1, 4, 8} and timings[0]["ratio"] == 1.0  # 0: the plain step
    assert [timings[n]["tokens"] for n in (0, 1, 4, 8)] == [1, 4, 5, 9]
    assert all(t["seconds"] > 0 and t["ratio"] > 0 for t in timings.values())
    assert sweep["passes"]["repeats"] == PASS_REPEATS
    assert {(v["drafter"], v["temperature"]) for v in sweep["verdicts"]} == {
        ("tree-model", 0.0),
        ("tree-ngram", 0.0),
    }
    again = resummarized(result)  # the records and pass timings alone rebuild the sweep
    assert again["tree_sweep"] == sweep and again["summary"] == result["summary"]
    assert unplain(SweepPlan, sweep["plan"], "exact").to_dict() == sweep["plan"]
    assert all(r["hf_latency"] is None for r in result["records"] if r["setting"]["tree_nodes"])
    table = "\n".join(sweep_table(sweep))
    assert table in render(again, "tree") and table in capsys.readouterr().out
    body = [line for line in sweep_table(sweep) if line.startswith("| code |")]
    assert [line.split(" | ")[2] for line in body] == ["1", "4", "8"] * 2
    figs, tables = load_result_view(tmp_path / "b.json")
    assert len(figs) == 5 and table in tables


def test_a_lossy_tree_rule_is_labelled_in_every_row_and_record(
    pair: PairFactory, tokenizer: Any, tmp_path: Path
) -> None:
    result = _sweep(tmp_path, pair, tokenizer, "--tree-rule", "typical", "--temperatures", "1")
    for record in result["records"]:
        tree = record["setting"]["tree_nodes"] is not None
        assert record["exact"] is not tree  # the chain stays exact, every tree run is not
    for row in result["summary"]:
        assert row["exact"] is (row["setting"]["tree_nodes"] is None)
    sweep = result["tree_sweep"]
    assert sweep["plan"]["exact"] is False
    assert [r["exact"] for r in sweep["rows"]] == [True, False, False]
    lines = sweep_table(sweep)
    assert all(LOSSY in line for line in lines if line.startswith("| code | 1 | 4"))
    assert all(LOSSY in line for line in lines if line.startswith("| code | 1 | 8"))
    md = render(resummarized(result), "lossy")
    trees = [line for line in md.splitlines() if line.startswith("| code | 1 | tree-model")]
    assert trees and all(LOSSY in line for line in trees)  # the summary and latency tables too


def test_tree_drafters_run_in_the_ordinary_bench_without_a_transformers_counterpart(
    pair: PairFactory, tokenizer: Any, tmp_path: Path
) -> None:
    extra = ["--drafters", "model,tree-model,tree-model:sampled,tree-ngram", "--gammas", "2"]
    extra += ["--tree-nodes", "6", "--tree-depth", "3", "--tree-width", "2"]
    assert main(_argv(tmp_path, pair, tokenizer, *extra, "--temperatures", "1")) == 0
    result = json.loads((tmp_path / "b.json").read_text())
    assert result["tree_sweep"] is None
    by_drafter = {r["setting"]["drafter"]: r for r in result["records"]}
    assert set(by_drafter) == {"model", "tree-model", "tree-model:sampled", "tree-ngram"}
    for name in ("tree-model", "tree-model:sampled", "tree-ngram"):
        s = by_drafter[name]["setting"]
        assert (s["gamma"], s["tree_nodes"], s["tree_width"], s["tree_rule"]) == (3, 6, 2, "exact")
        assert by_drafter[name]["hf_latency"] is None  # no tree drafter in transformers
        assert by_drafter[name]["metrics"]["bound"] is None  # the chain bound is not a tree's
        assert by_drafter[name]["metrics"]["proposed"] <= 6 * by_drafter[name]["metrics"]["rounds"]
    assert by_drafter["model"]["hf_latency"] is not None
    assert by_drafter["model"]["setting"]["gamma"] == 2
    curves = result["gamma_curves"]
    assert [c["drafter"] for c in curves] == ["model"]  # trees have no γ curve


def test_a_tree_drafter_with_the_lean_target_forward_is_refused(
    pair: PairFactory, tokenizer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    target, draft = pair("llama")
    setting = BenchSetting(
        drafter="tree-model", gamma=2, temperature=0.0, tree_nodes=4, tree_width=2,
        tree_rule="exact",
    )  # fmt: skip
    assert not has_hf_counterpart(setting)
    request = Request(id="c-1", category="code", prompt="abc", max_new_tokens=4, temperature=0.0)
    with pytest.raises(ValueError, match="drop --lean-target"):
        list(run_request(target, draft, tokenizer, request, setting, repetitions=1,
                         with_hf=True, lean_target=True))  # fmt: skip
    assert main(["bench", "--drafters", "model,tree-model", "--lean-target"]) == 2
    assert "drop --lean-target" in capsys.readouterr().err
    with pytest.raises(ValueError, match="tree_nodes, tree_width and tree_rule"):
        BenchSetting(drafter="tree-ngram", gamma=2, temperature=0.0)
    with pytest.raises(ValueError, match="not a tree drafter"):
        BenchSetting(drafter="model", gamma=2, temperature=0.0, tree_nodes=4)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["trees", "--nodes", "4,8"], "1 (the chain) first"),
        (["trees", "--nodes", "1"], "1 (the chain) first, then tree node budgets"),
        (["trees", "--nodes", "1,8,4"], "increasing"),
        (["trees", "--nodes", "1,4,4"], "increasing"),
        (["trees", "--nodes", "1,four"], "--nodes takes node budgets"),
        (["trees", "--nodes", "1,0"], "increasing"),
        (["trees", "--tree-depth", "0"], "--tree-depth must be an integer >= 1"),
        (["trees", "--tree-width", "0"], "--tree-width must be an integer >= 1"),
        (["trees", "--nodes", "1,4,64"], "holds at most 52 nodes"),
        (["trees", "--tree-depth", "1"], "depth 1 and width 4 holds at most 4 nodes"),
        (["trees", "--drafters", "model"], "--drafters must list some of tree-model"),
        (["trees", "--drafters", "tree-model,tree-model"], "names a drafter twice"),
        (["trees", "--policies", "fixed,heuristic"], "drop --policies"),
        (["trees", "--draft", "a", "--draft", "b"], "give one --draft"),
        (["--drafters", "tree-model", "--tree-depth", "0"], "--tree-depth must be an integer"),
        (["--drafters", "tree-model", "--policies", "heuristic"], "add fixed to --policies"),
    ],
)
def test_bad_sweeps_are_refused_before_any_model_loads(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--target", "/no/such/model", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_parse_nodes_and_the_plan_refuse_what_they_cannot_run() -> None:
    assert parse_nodes("1, 4,8,") == (1, 4, 8)
    with pytest.raises(ValueError, match=r"e\.g\. 1,4,8,16,32"):
        parse_nodes("1;4")
    plan = SweepPlan(drafters=("tree-model:sampled", "tree-model"), nodes=(1, 4), depth=2, width=2)
    settings = plan.settings(0.0, "bundled")
    assert [(s.drafter, s.tree_nodes) for s in settings] == [
        ("model", None),  # one chain for both: the draft model at gamma = depth
        ("tree-model:sampled", 4),
        ("tree-model", 4),
    ]
    assert all(s.gamma == 2 for s in settings)
    with pytest.raises(ValueError, match="holds at most 6 nodes"):
        SweepPlan(drafters=("tree-model",), nodes=(1, 8), depth=2, width=2)
    with pytest.raises(ValueError, match="--tree-rule must be one of exact, typical"):
        SweepPlan(drafters=("tree-model",), nodes=(1, 4), depth=2, width=2, rule="greedy")


@pytest.mark.parametrize(
    ("nodes", "depth", "width"), [(1, 1, 1), (4, 4, 4), (32, 4, 4), (52, 4, 4)]
)
def test_the_timing_tree_has_the_budgets_shape(nodes: int, depth: int, width: int) -> None:
    tree = top_k_shape(nodes, depth, width)
    assert len(tree.parents) == nodes and max(tree.depths) <= depth
    assert all(len(tree.children(i)) <= width for i in range(-1, nodes))
    grown = {p for p in tree.parents if p >= 0}
    assert all(sum(tree.depths[p] == d for p in grown) <= width for d in range(1, depth))
    assert top_k_capacity(depth, width) >= nodes
    with pytest.raises(ValueError, match="raise --tree-width or --tree-depth"):
        top_k_shape(top_k_capacity(depth, width) + 1, depth, width)


def test_pass_timings_cover_the_plain_step_the_chain_and_each_tree(pair: PairFactory) -> None:
    target, _ = pair("llama")
    timings = tree_pass_timings(target, [1, 2, 3, 4, 5], (1, 4, 8), depth=3, width=4, repeats=2)
    assert [(t.nodes, t.tokens, t.mask) for t in timings] == [
        (0, 1, "causal"),
        (1, 4, "causal"),
        (4, 5, "tree"),
        (8, 9, "tree"),
    ]
    assert timings[0].ratio == 1.0 and all(t.seconds > 0 and t.ratio > 0 for t in timings)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        tree_pass_timings(target, [1], (1, 4), depth=3, width=4)


def test_an_older_result_migrates_without_a_sweep_and_a_bad_sweep_is_refused() -> None:
    from specviz.results.saved import saved_results
    from tools.report.saved import RESULTS_DIR

    raw = json.loads(Path(saved_results(RESULTS_DIR)[0]).read_text(encoding="utf-8"))
    result = migrate(raw)
    assert result["tree_sweep"] is None and all(r["exact"] for r in result["records"])
    assert all(r["setting"]["tree_nodes"] is None for r in result["records"])
    for bad in ({"plan": {}}, [], {"plan": {}, "passes": {}, "rows": {}, "verdicts": []}):
        result["tree_sweep"] = bad
        with pytest.raises(ValueError, match=r"tree_sweep is neither null nor a sweep \(plan"):
            validate(result)
    del result["tree_sweep"]  # a current result always says whether it has a sweep
    with pytest.raises(ValueError, match="tree_sweep is neither null"):
        validate(result)


def test_the_pivot_table_puts_each_rows_figures_under_its_node_budget() -> None:
    from tools.report.saved import RESULTS_DIR, Saved
    from tools.report.sections import pivot_table

    section = Saved(RESULTS_DIR).load("tree-sweep")["tree_sweep"]
    lines = pivot_table([section])
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    budgets = [int(r["nodes"]) for r in section["rows"]]
    assert header[4:] == [("N = 1 (chain)" if n == 1 else f"N = {n}") for n in budgets]
    cells = {line.split("|")[4].strip(): line for line in lines[2:]}
    tokens = [c.strip() for c in cells["tokens a pass"].strip("|").split("|")[4:]]
    assert tokens == [f"{r['tokens_per_pass']['median']:.2f}" for r in section["rows"]]
    speedups = [c.strip() for c in cells["speedup vs plain"].strip("|").split("|")[4:]]
    assert speedups == [f"{r['speedup']['median']:.2f}" for r in section["rows"]]
