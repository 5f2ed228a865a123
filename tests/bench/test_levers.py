"""The levers sweep on tiny models: every lever decodes the same requests, its speed and its
distance from the fp32 target are saved, tabled and plotted (no timing asserts: every number is
checked against the runs it comes from)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from specviz.bench.report import load_result_view, render, resummarized
from specviz.cli import main
from specviz.quant.levers import REFERENCE, Lever, parse_lever, parse_levers
from specviz.results.lever_tables import ALL, lever_rows, render_levers
from specviz.results.schema import SCHEMA, validate

from ..conftest import PairFactory, save_pair

LEVERS = "hf@fp32,target@bf16,target@int8-weight,draft@fp32,spec@fp32,spec@int8-dynamic,"
LEVERS += "spec@fp32/int8-weight"
NAMES = [
    "target@fp32",
    "hf@fp32",
    "target@bf16",
    "target@int8-weight",
    "draft@fp32",
    "spec@fp32/fp32",
]
NAMES += ["spec@int8-dynamic/fp32", "spec@fp32/int8-weight"]
NEW, REPS = 8, 2


def _argv(root: Path, *extra: str) -> list[str]:
    """A bench command line on the tiny pair saved under root, writing root/l.json and l.html."""
    argv = ["bench", "--target", str(root / "target"), "--draft", str(root / "draft")]
    argv += ["--workloads", str(root / "w.jsonl"), "--reps", str(REPS), "--gammas", "2"]
    return [*argv, "--out", str(root / "l.json"), "--html", str(root / "l.html"), *extra]


@pytest.fixture(scope="module")
def swept(
    pair: PairFactory, tokenizer: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any], str]:
    """One sweep over a T = 0 code prompt and a T = 1 prose prompt."""
    root = tmp_path_factory.mktemp("levers")
    save_pair(root, *pair("llama"), tokenizer)
    rows = [
        {"id": "c-1", "category": "code", "prompt": "abcabcab", "max_new_tokens": NEW,
         "temperature": 0.0},
        {"id": "p-1", "category": "prose", "prompt": "the cat the", "max_new_tokens": NEW,
         "temperature": 1.0},
    ]  # fmt: skip
    (root / "w.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(_argv(root, "levers", "--levers", LEVERS)) == 0
    return root, json.loads((root / "l.json").read_text()), out.getvalue()


def test_levers_parse_with_the_reference_first_and_bad_ones_are_refused() -> None:
    assert parse_lever("spec@int8-weight") == Lever(kind="spec", target="int8-weight", draft="fp32")
    assert parse_lever("draft@bf16").name == "draft@bf16"
    assert [lv.name for lv in parse_levers(LEVERS)] == NAMES  # the reference added, first
    assert parse_levers(f"spec@fp32,{REFERENCE}")[0].name == REFERENCE
    for bad in ("spec@fp16", "target", "model@fp32", "target@fp32/bf16", "spec@a/b/c", ""):
        with pytest.raises(ValueError, match="--levers"):
            parse_levers(bad)
    with pytest.raises(ValueError, match="more than once"):
        parse_levers("spec@fp32,spec@fp32/fp32")


def test_every_lever_decodes_every_request_and_its_distances_are_saved(
    swept: tuple[Path, dict[str, Any], str],
) -> None:
    _, result, _ = swept
    validate(result)
    assert result["schema"] == SCHEMA and result["records"] == [] and result["summary"] == []
    section = result["levers"]
    assert section["plan"] == {"levers": NAMES, "drafter": "model", "gamma": 2}
    runs = section["runs"]
    assert len(runs) == 2 * REPS * len(NAMES)
    assert {(r["request"], r["temperature"]) for r in runs} == {("c-1", 0.0), ("p-1", 1.0)}
    for run in runs:
        assert 1 <= run["tokens"] <= NEW and run["seconds"] > 0
        assert (run["proposed"] > 0) == run["lever"].startswith("spec@")
        assert run["accepted"] + run["rejected"] <= run["proposed"]
    assert parse_lever("hf@int8-weight").label == "target int8-weight, transformers generate()"
    greedy = {(r["request"], r["lever"]): r for r in runs if r["temperature"] == 0.0}
    ref = {r["rep"]: r["tokens"] for r in runs if r["lever"] == REFERENCE and r["temperature"] == 0}
    assert len(greedy) == len(NAMES) and len(ref) == REPS
    dist = {(d["request"], d["lever"]): d for d in section["distances"]}
    assert len(dist) == 2 * len(NAMES)
    for request in ("c-1", "p-1"):
        for lever in (REFERENCE, "hf@fp32", "spec@fp32/fp32", "spec@fp32/int8-weight"):
            d = dist[request, lever]
            assert (d["matched"], d["first_divergence"], d["tv"]) == (d["compared"], None, 0.0)
            assert d["tv_of"] == REFERENCE
        assert dist[request, "draft@fp32"]["tv"] > 0.0  # a different model
        assert dist[request, "target@bf16"]["tv"] > 0.0  # a perturbed one
        assert dist[request, "spec@int8-dynamic/fp32"]["tv_of"] == "target@int8-dynamic"
        assert dist[request, "spec@int8-dynamic/fp32"]["tv"] > 0.0
    sizes = section["memory_bytes"]
    assert sizes["target@bf16"] < sizes[REFERENCE] < sizes["spec@fp32/fp32"]
    assert sizes["spec@fp32/fp32"] == sizes[REFERENCE] + sizes["draft@fp32"]


def test_every_row_is_computed_from_its_runs(swept: tuple[Path, dict[str, Any], str]) -> None:
    _, result, out = swept
    price = result["meta"]["price_per_hour"]
    rows = lever_rows(result["levers"], price)
    n = len(NAMES)
    assert [r["workload"] for r in rows] == ["code"] * n + ["prose"] * n + [ALL] * n
    runs = result["levers"]["runs"]
    for row in rows:
        mine = [
            r for r in runs
            if r["lever"] == row["lever"] and row["workload"] in (ALL, r["category"])
        ]  # fmt: skip
        tokens, seconds = sum(r["tokens"] for r in mine), sum(r["seconds"] for r in mine)
        assert row["tokens_per_second"] == pytest.approx(tokens / seconds)
        assert row["cost_per_1k_tokens"] == pytest.approx(price * seconds / 3600 / tokens * 1000)
        verified = sum(r["accepted"] + r["rejected"] for r in mine)
        if row["lever"].startswith("spec@"):
            assert row["alpha"] == pytest.approx(sum(r["accepted"] for r in mine) / verified)
        else:
            assert row["alpha"] is None
        if row["lever"] == REFERENCE:
            assert row["speedup"] == 1.0 and row["agreement"] == 1.0 and row["tv"] == 0.0
        if row["lever"].startswith("spec@fp32"):
            assert row["agreement"] == 1.0 and row["identical"] == row["requests"]
    table = render_levers(result["levers"], price)
    assert table in out  # printed as it is saved
    assert "| all | speculative: target int8-dynamic, draft fp32 |" in table
    assert "(= target@int8-dynamic: exact)" in table


def test_the_report_plots_the_frontier_and_renders_the_table(
    swept: tuple[Path, dict[str, Any], str],
) -> None:
    root, result, _ = swept
    assert "Speed against distance" in (root / "l.html").read_text()
    figs, markdown = load_result_view(root / "l.json")
    assert len(figs) == 5
    assert figs[0].layout.title.text.startswith("Speed against distance")
    points = {name for trace in figs[0].data for name in trace.text}
    assert points == set(NAMES)
    assert render_levers(result["levers"], result["meta"]["price_per_hour"]) in markdown
    assert render(resummarized(result), "l") == markdown


def test_a_broken_levers_section_is_refused(swept: tuple[Path, dict[str, Any], str]) -> None:
    _, result, _ = swept
    section = result["levers"]
    broken: list[Any] = [[], {"plan": {}}, section | {"runs": [{"lever": "x"}]}]
    broken += [section | {"memory_bytes": {}}]
    for bad in broken:
        with pytest.raises(ValueError, match="levers"):
            validate(result | {"levers": bad})
    validate({k: v for k, v in result.items() if k != "levers"})  # older files lack it


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["levers", "--levers", "spec@fp16"], "is not a lever"),
        (["levers", "--dtype", "float64"], "drop --dtype"),
        (["levers", "--lean-target"], "drop --lean-target"),
        (
            ["levers", "--levers", "spec@fp32/int8-weight", "--drafters", "model:trimmed"],
            "--drafters model",
        ),
        (["levers", "--drafters", "ngram"], "model, model:trimmed"),
    ],
)
def test_what_the_sweep_cannot_run_is_refused_before_any_model_loads(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--target", str(tmp_path / "missing"), "--workloads", "code", *extra]
    assert main([*argv, "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x.json").exists()
