"""`specviz bench memory` on tiny models: requests in order, one memory per drafter and
workload, and the tables it renders (no timing asserts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specviz.bench.report import render, resummarized
from specviz.cli import main
from specviz.results.memory_tables import render_memory, step_curves
from specviz.results.schema import validate
from tools.report.documents import MEMORY_REPORT, marked_tables, refreshed
from tools.report.saved import RESULTS_DIR, Saved
from tools.report.sections import memory, memory_figure, memory_section, suffix_factors

from ..conftest import PairFactory, save_pair

STEPS = ["the cat sat on the mat", "the cat sat on the mat and", "the cat sat on the mat and the"]


def _workload(root: Path) -> Path:
    """Two tasks of three steps, each step repeating the last: an agent's shape."""
    rows = [
        {"id": f"{task}-{step}", "category": "toy-agent", "prompt": f"{task}: {text}",
         "max_new_tokens": 12, "temperature": 0.0, "task": task, "step": step}
        for task in ("a", "b") for step, text in enumerate(STEPS)
    ]  # fmt: skip
    path = root / "agent.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


def _run(root: Path, pair: PairFactory, tokenizer: Any, *extra: str) -> dict[str, Any]:
    if not (root / "target").exists():
        save_pair(root, *pair("llama"), tokenizer)
    argv = ["bench", "memory", "--target", str(root / "target"), "--draft", str(root / "draft")]
    argv += ["--workloads", str(_workload(root)), "--reps", "1", "--step-batch-sizes", "1"]
    argv += ["--dtype", "float64", "--out", str(root / "b.json"), "--html", str(root / "b.html")]
    assert main([*argv, "--raw", *extra]) == 0
    result: dict[str, Any] = json.loads((root / "b.json").read_text())
    return result


def test_the_study_runs_requests_in_order_with_one_memory_each(
    pair: PairFactory,
    tokenizer: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    drafters = "suffix,tree-suffix,ngram,suffix+model"
    result = _run(tmp_path, pair, tokenizer, "--drafters", drafters, "--suffix-gamma", "6")
    validate(result)
    section = result["memory"]
    assert section["plan"]["drafters"] == drafters.split(",")
    assert section["plan"]["suffix_gamma"] == 6 and section["plan"]["reps"] == 1
    assert section["plan"]["prefix_cache"] is True  # every run reuses the prefix it has seen
    rows = section["rows"]
    assert len(rows) == 6 * 4 and len(result["records"]) == 6 * 4
    assert [r["request"] for r in rows[::4]] == [f"{t}-{s}" for t in "ab" for s in range(3)]
    assert {r["step"] for r in rows} == {0, 1, 2} and {r["task"] for r in rows} == {"a", "b"}
    assert all(r["identical"] for r in rows)  # T = 0: the greedy output, with memory or not
    assert all(r.get("hf_latency", 0) > 0 for r in rows)  # transformers' generate() beside it
    sizes = {s["drafter"]: s for s in section["sizes"]}
    assert set(sizes) == {"suffix", "tree-suffix N=8 w=4", "suffix+model (model ≤ 4)"}
    for label, size in sizes.items():  # each memory holds the outputs of all six requests
        assert size["tokens"] == sum(r["tokens"] for r in rows if r["drafter"] == label)
        assert size["bytes_per_token"] > 0 and size["update_seconds_per_token"] > 0
    split = [(r["prefill_seconds"], r["plain_decode_seconds"]) for r in rows]
    metrics = [r["metrics"] for r in result["records"]]  # the prompt pass apart, as recorded
    assert split == [(m["prefill_seconds"], m["plain_decode_seconds"]) for m in metrics]
    assert all(0 < a < r["latency"] and b > 0 for (a, b), r in zip(split, rows, strict=True))
    table = render_memory(section)
    assert all(r["prefix_cache"] is True for r in rows)  # each row says how it passed its prompt
    assert "| toy-agent | suffix | 0 | prefix kept |" in table
    assert table.count("| drafter | 0 | 1 | 2 |") == 2
    assert "| cold | warm | cold decode | warm decode |" in table and "less the prompt" in table
    decode = step_curves(section, decode=True)
    assert list(decode) == list(step_curves(section)) and all(
        x > 0 for points in decode.values() for _, x in points
    )  # fmt: skip
    assert table in capsys.readouterr().out
    assert table in render(resummarized(result), "memory")
    curves = step_curves(section)
    assert list(curves) == [r["drafter"] for r in rows[:4]]
    assert all([s for s, _ in points] == [0, 1, 2] for points in curves.values())
    results = tmp_path / "results"  # the report's table and figure from the saved part
    results.mkdir()
    assert "not measured yet" in "\n".join(memory(Saved(results)))
    assert memory_figure(Saved(results)) is None and not list(results.iterdir())
    (results / "memory-agent-code.json").write_text((tmp_path / "b.json").read_text())
    report = "\n".join(memory(Saved(results)))  # one part saved: its table, the others named
    assert table.split("\n", 2)[2] in report and "memory-agent-tools, memory-agent-sql" in report
    (results / "memory-repeat.json").write_text((tmp_path / "b.json").read_text())
    both = render_memory(memory_section(Saved(results)) or {})  # the parts' rows together
    assert both.count(
        "| toy-agent | suffix | 0 | prefix kept |"
    ) == 1 and "memory-repeat" not in "\n".join(memory(Saved(results)))
    assert memory_section(Saved(results)) == {
        "plan": section["plan"], "rows": rows + rows, "sizes": section["sizes"] * 2
    }  # fmt: skip
    old = json.loads((tmp_path / "b.json").read_text())  # a part saved before the prefix cache
    del old["memory"]["plan"]["prefix_cache"]
    for r in old["memory"]["rows"]:
        del r["prefix_cache"]
    (results / "memory-repeat.json").write_text(json.dumps(old))
    stamped = memory_section(Saved(results))["rows"]  # type: ignore[index]
    assert [r["prefix_cache"] for r in stamped] == [True] * len(rows) + [False] * len(rows)
    figure = memory_figure(Saved(results))
    assert figure == results / "memory-steps.png" and figure.read_bytes().startswith(b"\x89PNG")


def test_the_study_defaults_to_the_agent_workloads_and_suffix_drafters() -> None:
    from specviz.cli import build_parser
    from specviz.cli.bench import study_of

    args = build_parser().parse_args(["bench", "memory"])
    study = study_of(args)
    chosen = study.chosen(args)
    assert study.name == "memory" and chosen.workloads == "agent-tools,agent-code,agent-sql"
    assert "suffix" in chosen.drafters.split(",") and "suffix+model:trimmed" in chosen.drafters


def test_suffix_factors_give_each_memory_drafter_one_setting_a_factor(
    pair: PairFactory, tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specviz.bench.sweeps import memory as study

    built: list[tuple[str, float]] = []
    real = study.build_drafter

    def spy(name: str, **kw: Any) -> Any:
        built.append((name, kw["options"].suffix_factor))
        return real(name, **kw)

    monkeypatch.setattr(study, "build_drafter", spy)
    extra = ("--drafters", "suffix,ngram", "--suffix-factors", "1,2.5", "--no-hf")
    section = _run(tmp_path, pair, tokenizer, *extra)["memory"]
    assert section["plan"]["suffix_factors"] == [1.0, 2.5]
    labels = ["suffix, factor 1", "suffix, factor 2.5", "ngram"]
    assert {r["drafter"] for r in section["rows"]} == set(labels)
    assert {s["drafter"] for s in section["sizes"]} == set(labels[:2])  # a memory each
    assert {f for name, f in built if name == "suffix"} == {1.0, 2.5}
    assert all(r["identical"] for r in section["rows"])
    results = tmp_path / "results"  # the report's table of the part
    results.mkdir()
    assert "not measured yet" in "\n".join(suffix_factors(Saved(results)))
    (results / "suffix-factors.json").write_text((tmp_path / "b.json").read_text())
    table = suffix_factors(Saved(results))
    assert table[0].startswith("| workload | drafter |") and len(table) == 2 + 3
    assert [row.split(" | ")[1] for row in table[2:]] == labels


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--suffix-gamma", "0"], "--suffix-gamma must be >= 1"),
        (["--suffix-factors", "1,0"], "--suffix-factors must be > 0"),
        (["--max-new-tokens", "-1"], "--max-new-tokens must be >= 0"),
        (["--drafters", "suffix", "--policies", "heuristic"], "fixed lengths: drop --policies"),
    ],
)
def test_bad_flags_are_refused_before_any_model_loads(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "memory", "--target", "/nonexistent", *extra]) == 2
    assert message in capsys.readouterr().err


def test_the_memory_page_shows_what_the_saved_results_render_to() -> None:
    text = MEMORY_REPORT.read_text(encoding="utf-8")
    assert "memory" in dict(marked_tables(text))
    assert refreshed(text, Saved(RESULTS_DIR)) == text


def test_the_decode_speedup_leaves_the_prompt_pass_out_of_both_runs() -> None:
    row = {"workload": "w", "request": "r", "task": "t", "drafter": "suffix", "rep": 0}
    row |= {"temperature": 0.0, "tokens": 10, "rounds": 2, "accepted": 8, "verified": 9}
    row |= {"draft_seconds": 0.0, "step_seconds": 0.1, "identical": True}
    cold = row | {"step": 0, "latency": 3.0, "prefill_seconds": 2.0, "plain_latency": 6.0}
    warm = row | {"step": 1, "latency": 4.0, "prefill_seconds": 3.0, "plain_latency": 7.0}
    cold["plain_decode_seconds"], warm["plain_decode_seconds"] = 4.0, 4.0
    plan = {"suffix_gamma": 8, "gamma": 3, "reps": 1}  # saved before the prefix cache
    table = render_memory({"plan": plan, "rows": [cold, warm], "sizes": []})
    assert "| w | suffix | 0 | whole | 2.00× | 1.75× | 4.00× | 4.00× |" in table  # 6/3, 7/4, 4/1
    assert step_curves({"rows": [cold, warm]}, decode=True) == {"suffix": [(0, 4.0), (1, 4.0)]}
    unsplit = {k: v for k, v in warm.items() if k != "plain_decode_seconds"}
    table = render_memory({"plan": plan, "rows": [unsplit], "sizes": []})
    assert "| w | suffix | 0 | whole | — | 1.75× | — | — |" in table  # no split: no decode ratio


def test_a_rounding_tie_is_counted_apart_from_the_identical_decodes() -> None:
    """Greedy identity: a decode that first differs where its token is within TIE_TOLERANCE of
    the best logit is a tie (shown beside the count); a larger gap, or none, is not."""
    row = {"workload": "w", "request": "r", "task": "t", "drafter": "suffix", "rep": 0}
    row |= {"temperature": 0.0, "tokens": 10, "rounds": 2, "accepted": 8, "verified": 9}
    row |= {"draft_seconds": 0.0, "step_seconds": 0.1, "step": 1, "latency": 1.0}
    row |= {"plain_latency": 2.0, "identical": True}
    tie = row | {"identical": False, "diverges": 3, "tie_gap": 2e-5}
    wrong = row | {"identical": False, "diverges": 3, "tie_gap": 0.5}
    ended = row | {"identical": False, "diverges": 3, "tie_gap": None}
    plan = {"suffix_gamma": 8, "gamma": 3, "reps": 1}

    def cell(*rows: dict[str, object]) -> str:
        table = render_memory({"plan": plan, "rows": list(rows), "sizes": []})
        return table.splitlines()[4].split(" | ")[11]

    assert cell(row, tie, tie) == "1/3 (+2 ties)" and cell(row, tie) == "1/2 (+1 tie)"
    assert cell(row, wrong) == "1/2" and cell(row, ended) == "1/2" and cell(row) == "1/1"


def test_parts_that_passed_their_prompts_differently_are_told_apart() -> None:
    """A part run with the prefix cache beside one run without: each table row and each step
    curve names its prompt pass (one curve a drafter and pass)."""
    row = {"request": "r", "task": "t", "drafter": "suffix", "rep": 0, "temperature": 0.0}
    row |= {"tokens": 10, "rounds": 2, "accepted": 8, "verified": 9, "draft_seconds": 0.0}
    row |= {"step_seconds": 0.1, "identical": True, "prefill_seconds": 1.0}
    row |= {"step": 1, "latency": 2.0, "plain_latency": 6.0, "plain_decode_seconds": 5.0}
    kept, whole = row | {"workload": "a", "prefix_cache": True}, row | {"workload": "b"}
    section = {"plan": {"suffix_gamma": 8, "gamma": 3, "reps": 1}, "rows": [kept, whole]}
    table = render_memory(section | {"sizes": []})
    assert "| a | suffix | 0 | prefix kept |" in table and "| b | suffix | 0 | whole |" in table
    assert list(step_curves(section)) == ["suffix, prefix kept", "suffix, whole"]
    assert list(step_curves({"rows": [kept]})) == ["suffix"]  # one pass only: no label


def test_each_run_keeps_its_own_prefix_cache_unless_asked_not_to(pair: PairFactory) -> None:
    """Plain decoding and each setting get a PrefixCache of their own (one workload's), on the
    forward they would run anyway; a drafter that brings the target's cache gets none."""
    from specviz.bench.runner import run_caches
    from specviz.bench.sweeps.memory import MemoryPlan, memory_settings
    from specviz.fast.prefix import HeldCache

    target, _ = pair("llama")
    fields = dict(suffix_gamma=4, gamma=3, tree_nodes=8, tree_width=2, max_new_tokens=0)
    plan = MemoryPlan(drafters=("suffix", "tree-suffix", "early-exit:shared"),
                      prefix_cache=True, **fields)  # type: ignore[arg-type]  # fmt: skip
    suffix, tree, shared = memory_settings(plan, "draft", 0.0)
    caches = run_caches([suffix, tree, shared], lean=False, keep_prefix=plan.prefix_cache)
    made = {run: caches(run, [1, 2, 3])(target) for run in (None, suffix, tree)}
    assert all(isinstance(m, HeldCache) for m in made.values())
    assert len({id(m) for m in made.values()}) == 3  # one each
    assert caches(suffix, [1, 2, 4])(target) is made[suffix]  # the same one, next request
    assert caches(shared, [1, 2, 3]) is None
    off = run_caches([suffix, tree, shared], lean=False, keep_prefix=False)
    assert not isinstance(off(None, [1, 2, 3])(target), HeldCache) and off(tree, [1]) is None
