"""The batch sweep on tiny models: plain and speculative decodes of the same requests at each
batch size (no timing asserts: every number is checked against the runs it comes from)."""

from __future__ import annotations

import contextlib
import io
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from specviz.batch.rows import _stops_from
from specviz.bench.report import figures, load_result_view, render, resummarized
from specviz.bench.sweep import plain as as_data
from specviz.bench.sweep import unplain
from specviz.bench.sweeps.batch import BatchPlan, render_batch, sweep_requests
from specviz.cli import bench as bench_cli
from specviz.cli import main
from specviz.gamma.theory import expected_tokens_per_round, pass_speedup, token_bound_from
from specviz.results.records import cost_per_1k_tokens
from specviz.results.saved import saved_results
from specviz.results.schema import SCHEMA, migrate, validate
from specviz.tune.timing import TARGET
from specviz.workloads import Request
from tools.report.headline import batch_part
from tools.report.saved import RESULTS_DIR, Saved
from tools.report.sections import batch_headline
from tools.report.tables import render_table

from ..conftest import PairFactory, save_pair

PROMPTS = [("c-1", "abcabcab"), ("c-2", "the cat the")]
SIZES, N, NEW = [1, 2, 4], 5, 6


def _argv(root: Path, *extra: str) -> list[str]:
    """A bench command line on the tiny pair saved under root, writing root/b.json and b.html."""
    argv = ["bench", "--target", str(root / "target"), "--draft", str(root / "draft")]
    argv += ["--workloads", str(root / "w.jsonl"), "--dtype", "float64", "--reps", "2"]
    argv += ["--step-batch-sizes", "1", "--out", str(root / "b.json")]
    return [*argv, "--html", str(root / "b.html"), *extra]


def _save(root: Path, pair: PairFactory, tokenizer: Any) -> Path:
    save_pair(root, *pair("llama"), tokenizer)
    rows = [
        {"id": i, "category": "code", "prompt": p, "max_new_tokens": 10, "temperature": 0.0}
        for i, p in PROMPTS
    ]
    (root / "w.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    return root


@pytest.fixture(scope="module")
def swept(
    pair: PairFactory, tokenizer: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any], str]:
    """One sweep: B = 1, 2, 4 over 5 requests, model and n-gram drafters at γ = 1, 2, T = 0."""
    root = _save(tmp_path_factory.mktemp("batch"), pair, tokenizer)
    sweep = [
        "batch",
        "--batch-sizes",
        "4,1,2",
        "--batch-requests",
        str(N),
        "--batch-new-tokens",
        str(NEW),
    ]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        argv = _argv(root, *sweep, "--gammas", "1,2", "--drafters", "model,ngram")
        assert main(argv) == 0
    return root, json.loads((root / "b.json").read_text()), out.getvalue()


def test_every_batch_size_decodes_the_same_requests_plainly_and_speculatively(
    swept: tuple[Path, dict[str, Any], str],
) -> None:
    _, result, _ = swept
    validate(result)
    assert result["schema"] == SCHEMA and result["records"] == [] and result["summary"] == []
    sweep = result["batch_sweep"]
    plan = {"batch_sizes": SIZES, "requests": N, "gammas": [1, 2], "drafters": ["model", "ngram"]}
    assert sweep["plan"] == plan | {"new_tokens": NEW}
    assert [r["id"] for r in sweep["requests"]] == ["c-1", "c-2", "c-1", "c-2", "c-1"]  # cycled
    runs = sweep["runs"]
    assert len(runs) == 2 * len(SIZES) * (1 + 2 * 2)  # reps x B x (plain + drafters x gammas)
    plain_tokens = {tuple(r["tokens"]) for r in runs if r["drafter"] is None}
    assert len(plain_tokens) == 1  # the same requests and seeds at every B and repetition
    for run in runs:
        assert len(run["tokens"]) == len(run["latency"]) == N
        assert all(1 <= n <= NEW for n in run["tokens"])
        assert all(0 < s <= run["seconds"] for s in run["latency"])  # within its group
        if run["drafter"] is None:
            assert run["row_rounds"] == sum(run["tokens"]) and run["same_tokens_as_plain"] is None
        else:  # T = 0: speculative decoding writes the target's own greedy tokens
            assert run["same_tokens_as_plain"] == N and tuple(run["tokens"]) in plain_tokens
    widths = {(p["batch_size"], p["model"], p["tokens_per_row"]) for p in sweep["passes"]}
    shapes = [(TARGET, 1), (TARGET, 2), (TARGET, 3), ("model", 1)]  # n-gram: no model pass
    assert widths == {(b, m, w) for b in SIZES for m, w in shapes}  # plain, γ + 1, a draft step
    assert all(p["seconds"] > 0 for p in sweep["passes"])


def _run(runs: list[dict[str, Any]], row: dict[str, Any], rep: int, spec: bool) -> dict[str, Any]:
    (match,) = [
        r
        for r in runs
        if r["batch_size"] == row["batch_size"]
        and r["repetition"] == rep
        and (r["drafter"], r["gamma"]) == ((row["drafter"], row["gamma"]) if spec else (None, None))
    ]
    return match


def test_every_row_is_computed_from_its_runs_and_pass_timings(
    swept: tuple[Path, dict[str, Any], str],
) -> None:
    _, result, _ = swept
    sweep, price = result["batch_sweep"], result["meta"]["price_per_hour"]
    timed = {
        (p["batch_size"], p["model"], p["tokens_per_row"]): p["seconds"] for p in sweep["passes"]
    }
    assert len(sweep["rows"]) == len(SIZES) * 2 * 2
    for row in sweep["rows"]:
        spec = [_run(sweep["runs"], row, k, spec=True) for k in (0, 1)]
        plain = [_run(sweep["runs"], row, k, spec=False) for k in (0, 1)]
        speedups = sorted(p["seconds"] / s["seconds"] for s, p in zip(spec, plain, strict=True))
        assert [row["speedup"][k] for k in ("low", "high")] == pytest.approx(speedups)
        total = [sum(s["tokens"]) / s["seconds"] for s in spec]
        assert row["speculative"]["tokens_per_second"] == pytest.approx(statistics.median(total))
        costs = [cost_per_1k_tokens(p["seconds"], sum(p["tokens"]), price) for p in plain]
        assert row["plain"]["cost_per_1k_tokens"] == pytest.approx(statistics.median(costs))
        latency = [statistics.fmean(s["latency"]) for s in spec]
        assert row["speculative"]["latency"] == pytest.approx(statistics.median(latency))
        alphas = [s["accepted"] / (s["accepted"] + s["rejected"]) for s in spec]
        assert row["alpha"] == pytest.approx(statistics.median(alphas))
        b, g = row["batch_size"], row["gamma"]
        step, verify = timed[b, TARGET, 1], timed[b, TARGET, g + 1]
        draft = timed.get((b, row["drafter"], 1), 0.0)
        theory = expected_tokens_per_round(row["alpha"], g) * step / (g * draft + verify)
        assert row["predicted_speedup"] == pytest.approx(theory)
        assert row["verify_ratio"] == pytest.approx(verify / step) and row["same_tokens"] == 1.0
    for best in sweep["best"]:
        rivals = [
            r
            for r in sweep["rows"]
            if (r["drafter"], r["batch_size"]) == (best["drafter"], best["batch_size"])
        ]
        assert best["speedup"]["median"] == max(r["speedup"]["median"] for r in rivals)
    for v in sweep["verdicts"]:
        mine = [r for r in sweep["best"] if r["drafter"] == v["drafter"]]
        assert v["pays_at"] == [r["batch_size"] for r in mine if r["speedup"]["median"] > 1]
    assert resummarized(result)["batch_sweep"] == sweep  # the runs and passes alone rebuild it


def test_the_table_figure_and_headline_render(
    swept: tuple[Path, dict[str, Any], str], tmp_path: Path
) -> None:
    root, result, printed = swept
    sweep = result["batch_sweep"]
    table = render_batch(sweep)
    assert table in printed and table in render(resummarized(result), "batch")
    assert "| 0 | model | 4 | 2 |" in table and "Cost per 1k generated tokens" not in printed
    html = (root / "b.html").read_text()
    title = "Batch sweep: speedup against batch size"
    assert html.count('class="plotly-graph-div"') == 5 and title in html
    last = figures([], [], {}, sweep=sweep)[-1]
    assert len(last.data) == 2 * 2 * 2  # measured and predicted, per drafter and γ
    assert list(last.layout.xaxis.tickvals) == SIZES and last.layout.xaxis.type == "log"
    figs, _ = load_result_view(root / "b.json")
    assert len(figs) == 5 and title in figs[-1].layout.title.text  # the app's view draws it too
    lines = batch_headline(sweep)
    assert lines[0].startswith("| T | drafter | B | plain tok/s | speculative tok/s (best γ)")
    assert len(lines) == 2 + 2 * len(SIZES)  # a row per drafter and batch size
    assert "not measured yet" in render_table("batch-sweep", Saved(tmp_path))  # no saved part
    (tmp_path / "batch-sweep.json").write_text(json.dumps(result))
    assert render_table("batch-sweep", Saved(tmp_path)) == "\n".join(lines)
    part = batch_part("batch-sweep", sweep)
    assert part[:2] == ["batch-sweep", "code 5 × 2 (batches of 1, 2, 4)"]


def test_at_t_1_each_request_writes_the_same_tokens_at_every_batch_size(
    pair: PairFactory, tokenizer: Any, tmp_path: Path
) -> None:
    root = _save(tmp_path, pair, tokenizer)
    sweep = ["batch", "--batch-sizes", "1,3", "--batch-new-tokens", "8", "--temperatures", "1"]
    assert main(_argv(root, *sweep, "--gammas", "3", "--reps", "1")) == 0
    runs = json.loads((root / "b.json").read_text())["batch_sweep"]["runs"]
    for drafter in (None, "model"):  # row r is seeded alike at every B: the same draws
        lengths = {tuple(r["tokens"]) for r in runs if r["drafter"] == drafter}
        assert len(lengths) == 1 and all(r["temperature"] == 1.0 for r in runs)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["batch", "--batch-sizes", "1,2", "--drafters", "eagle"],
            "from model, model:trimmed, ngram",
        ),
        (
            ["batch", "--batch-sizes", "1,2", "--drafters", "tree-model"],
            "tree-model has no batched",
        ),
        (["batch", "--batch-sizes", "0,2"], r"two or more batch sizes >= 1"),
        (["batch", "--batch-sizes", "1"], "the plain decode step timing is --step-batch-sizes"),
        (["batch", "--batch-sizes", "2,2"], "names a batch size twice"),
        (
            ["batch", "--batch-sizes", "1,4", "--batch-requests", "2"],
            "at least the largest batch size, 4",
        ),
        (
            ["batch", "--batch-sizes", "1,2", "--batch-new-tokens", "0"],
            "--batch-new-tokens must be",
        ),
        (["batch", "--batch-sizes", "1,2", "--lean-target"], "drop --lean-target"),
        (["batch", "--batch-sizes", "1,2", "--policies", "fixed,theory"], "drop --policies"),
        (["batch", "--batch-sizes", "1,2", "--draft", "a", "--draft", "b"], "give one --draft"),
        (["--step-batch-sizes", "0"], "--step-batch-sizes must be integers >= 1"),
    ],
)
def test_bad_batch_flags_are_refused_before_any_model_loads(
    extra: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def no_loading(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a model was loaded before the flags were checked")

    monkeypatch.setattr(bench_cli, "load_pair", no_loading)
    (tmp_path / "w.jsonl").write_text(
        json.dumps(
            {"id": "c", "category": "code", "prompt": "ab", "max_new_tokens": 4, "temperature": 0}
        )
    )
    argv = ["bench", "--workloads", str(tmp_path / "w.jsonl"), "--out", str(tmp_path / "b.json")]
    assert main([*argv, *extra]) == 2
    assert message in capsys.readouterr().err


def test_the_plan_the_request_list_and_the_theory_formulas() -> None:
    plan = BatchPlan(batch_sizes=(1, 8), requests=8, gammas=(2,), drafters=("ngram",), new_tokens=4)
    assert unplain(BatchPlan, as_data(plan)) == plan
    pool = [Request(id="r0", category="code", prompt="x", max_new_tokens=4, temperature=0.0)]
    pool += [Request(id="r1", category="json", prompt="y", max_new_tokens=4, temperature=0.0)]
    assert [r.id for r in sweep_requests(pool, 5)] == ["r0", "r1", "r0", "r1", "r0"]
    with pytest.raises(ValueError, match="no requests"):
        sweep_requests([], 3)
    # a weight-bound pass (r = 1) and no draft cost: the speedup is the tokens a round
    assert pass_speedup(1.0, 3, 0.05, 0.0, 0.05) == pytest.approx(4.0)
    assert pass_speedup(0.5, 1, 0.05, 0.01, 0.05) == pytest.approx(1.5 / 1.2)
    assert token_bound_from([(1, 1.1), (8, 3.1), (4, 2.0)], gamma=4) == 8  # (3.1 - 1) / 4 ≥ 0.5
    assert token_bound_from([(1, 1.1), (2, 1.2)], gamma=1) is None
    assert _stops_from([(1, 1.5), (2, 0.9), (4, 1.1), (8, 0.8), (16, 0.7)]) == 8
    assert _stops_from([(1, 1.5), (2, 1.2)]) is None and _stops_from([(1, 0.9), (2, 0.8)]) == 1


def test_a_result_without_a_batch_sweep_reads_and_a_broken_one_is_refused(
    swept: tuple[Path, dict[str, Any], str],
) -> None:
    before = next(p for p in saved_results(RESULTS_DIR) if Path(p).stem == "code")
    old = migrate(json.loads(Path(before).read_text(encoding="utf-8")))
    assert "batch_sweep" not in old  # saved before the sweep: its batch figure is the step times
    assert (
        "Plain decode step time"
        in figures([], [], {"bundled": [(1, 0.05), (2, 0.06)]})[-1].layout.title.text
    )
    _, result, _ = swept
    broken: list[Any] = [[], {"plan": {}}, result["batch_sweep"] | {"runs": [{"batch_size": 1}]}]
    for bad in broken:
        with pytest.raises(ValueError, match="batch_sweep"):
            validate(result | {"batch_sweep": bad})
    validate({k: v for k, v in result.items() if k != "batch_sweep"})  # older files lack it
