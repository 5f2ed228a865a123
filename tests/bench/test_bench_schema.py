"""Saved bench results: one schema version, migrate() from every older shape, per-draft meta."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from specviz.bench.report import load_result_view, render, resummarized
from specviz.cli import main
from specviz.cli.bench import run_profile, saved_result
from specviz.results.commands import respelled_commands
from specviz.results.names import rename, renamed
from specviz.results.records import Record
from specviz.results.saved import saved_results
from specviz.results.schema import SCHEMA, batch_steps, flat_meta, migrate, validate, version
from specviz.results.setting import BenchSetting
from tools.report.saved import RESULTS_DIR

from ..conftest import PairFactory, tiny_model
from ..tune.profiles import make_profile, write_profile

SAVED_ALL = saved_results(RESULTS_DIR)
SAVED = [p for p in SAVED_ALL if "schema" not in json.loads(Path(p).read_text(encoding="utf-8"))]
CURRENT = [p for p in SAVED_ALL if p not in SAVED]  # saved with a schema version (the tree sweeps)
SPLIT = ("prefill_seconds", "plain_decode_seconds", "widths", "pass_seconds")


def _raw(path: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data


def test_the_repo_has_saved_results_to_migrate() -> None:
    assert len(SAVED) >= 10


@pytest.mark.parametrize("path", SAVED, ids=[Path(p).stem for p in SAVED])
def test_every_saved_result_migrates_to_the_current_shape(path: str) -> None:
    raw = _raw(path)
    assert "schema" not in raw and version(raw) == 2  # saved before versions: left as they are
    result = migrate(raw)
    validate(result)
    assert result["schema"] == SCHEMA and "batch_step_seconds" not in result
    ((name, draft),) = result["drafts"].items()
    assert name == "bundled"  # none of these runs gave --draft
    assert draft["batch_step_seconds"] == raw["batch_step_seconds"]
    assert draft["draft_forward"] == raw["meta"]["draft_forward"]
    assert "draft_forward" not in result["meta"]
    assert result["meta"]["prompt_format"] == "raw"  # what every run before schema 4 used
    assert (
        result["meta"]["price_per_hour"]
        == raw["summary"][0]["cost_per_1k_tokens"]["price_per_hour"]
    )
    records = [Record.from_dict(r) for r in result["records"]]
    assert len(records) == len(raw["records"])
    lacked = [i for i, r in enumerate(raw["records"]) if "model_gamma" not in r["setting"]]
    assert all(records[i].setting.model_gamma is None for i in lacked)  # no cap then
    assert raw == _raw(path)  # migrate copies: the input is not changed


@pytest.mark.parametrize("path", CURRENT, ids=[Path(p).stem for p in CURRENT])
def test_a_result_saved_in_schema_5_loads_with_its_drafters_renamed(path: str) -> None:
    """The saved results predate names by family: reading one renames its drafters (and the
    commands that ran them, spelled as the studies' subcommands now), and changes nothing
    else."""
    raw = _raw(path)
    assert raw["schema"] == 5 == SCHEMA - 1
    now = migrate(raw)
    validate(now)
    respelled = respelled_commands(raw, batch_sweep="batch_sweep" in raw)
    assert now == renamed(respelled) | {"schema": SCHEMA}
    assert migrate(now) == now


def test_old_drafter_names_are_renamed_where_they_stand_alone() -> None:
    old = "-".join(("ngram+model", "trimmed"))  # written apart: no rename pass finds it here
    assert rename(f"{old} γ=3") == "ngram+model:trimmed γ=3"
    assert rename("--drafters eagle3,eagle3" + "-tree,cross-" + "tli") == (
        "--drafters eagle,tree-eagle,cross"
    )
    assert rename("eagle") == "eagle-1 (retired)" and rename("eagle3") == "eagle"
    assert rename("early-exit-" + "shared k=1") == "early-exit:shared k=1"
    assert rename("suffix-factors memory-cost-tree") == "suffix-factors memory-cost-tree"
    old = "tree-" + "sampled"
    data = {"setting": {"drafter": old}, "meta": {"note": old}}
    assert renamed(data) == {"setting": {"drafter": "tree-model:sampled"}, "meta": {"note": old}}


def test_the_newest_parts_are_saved_in_the_current_schema() -> None:
    newest = {"tree-sweep", "tree-sweep-t1", "heads-code", "heads-t1", "heads-json-prose"}
    newest |= {"batch-sweep", "levers", "cross", "endpoint", "memory-agent-code"}
    newest |= {"memory-agent-tools", "memory-agent-sql", "memory-repeat", "memory-code"}
    newest |= {"suffix-factors", "memory-lean", "memory-chat", "memory-cost", "memory-cost-tree"}
    assert {Path(p).stem for p in CURRENT} == newest


def test_memory_rows_saved_without_the_decode_split_take_it_from_their_records() -> None:
    raw = _raw(str(RESULTS_DIR / "memory-agent-code.json"))
    old = copy.deepcopy(raw)
    for row in old["memory"]["rows"]:
        del row["prefill_seconds"], row["plain_decode_seconds"]
    assert migrate(old) == migrate(raw)  # each row's split is its own record's, not another's
    pairs = {(r["prefill_seconds"], r["plain_decode_seconds"]) for r in raw["memory"]["rows"]}
    assert len(pairs) == len(raw["records"])  # one record a row: every row's split differs
    old["records"] = old["records"][1:]  # negative control: a row without its record
    with pytest.raises(ValueError, match="not a specviz bench result"):
        migrate(old)


@pytest.mark.parametrize("path", SAVED[:3], ids=[Path(p).stem for p in SAVED[:3]])
def test_migrate_is_idempotent_on_current_data(path: str) -> None:
    once = migrate(_raw(path))
    assert migrate(once) == once
    again = resummarized(once)
    assert migrate(again) == again and resummarized(again) == again


def _schema_1(raw: dict[str, Any]) -> dict[str, Any]:
    """A result as the first bench saved it: no decode-phase split, no policy or exit layer."""
    old = copy.deepcopy(raw)
    for r in old["records"]:
        for key in SPLIT:
            del r["metrics"][key]
        for key in ("exit_layer", "policy", "model_gamma"):
            r["setting"].pop(key, None)
    del old["policies_vs_best_fixed"]
    for key in ("draft_forward", "packed_weights", "cpu"):
        del old["meta"][key]
    old["meta"]["command"] = "/usr/bin/specviz bench --draft a/small --draft b/large --gammas 2"
    return old


def test_a_schema_1_result_migrates_with_its_split_as_not_recorded() -> None:
    repeat = _raw(next(p for p in SAVED if Path(p).stem == "repeat"))
    repeat["records"] = [r for r in repeat["records"] if r["setting"]["policy"] == "fixed"]
    old = _schema_1(repeat)
    assert version(old) == 1
    result = migrate(old)
    record = result["records"][0]
    assert {k: record["metrics"][k] for k in SPLIT} == {
        "prefill_seconds": 0.0,
        "plain_decode_seconds": 0.0,
        "widths": [],
        "pass_seconds": [],
    }
    then = {k: record["setting"][k] for k in ("exit_layer", "policy", "model_gamma")}
    assert then == {"exit_layer": 8, "policy": "fixed", "model_gamma": None}  # what runs did then
    assert list(result["drafts"]) == ["b/large"]  # the last --draft: the one its meta described
    assert "draft_forward" not in result["drafts"]["b/large"]  # not recorded then: not invented
    metrics = Record.from_dict(record).metrics
    assert metrics.decode_speedup != metrics.decode_speedup  # nan: not recorded
    md = render(resummarized(old), "old")
    assert "draft_forward" not in md and "Plain decode step time" in md
    lines = md.split("\n")
    at = lines.index(
        next(line for line in lines if line.startswith("| workload | T | setting | n"))
    )
    header, _, first = lines[at : at + 3]
    cells = dict(zip(header.split(" | "), first.split(" | "), strict=True))
    assert cells["decode speedup"] == cells["decode efficiency"] == "–"  # not recorded


def test_a_schema_3_result_is_marked_raw_and_a_chat_result_keeps_its_format() -> None:
    current = migrate(_raw(SAVED[0]))
    old = copy.deepcopy(current) | {"schema": 3}
    del old["meta"]["prompt_format"]
    assert version(old) == 3 and migrate(old) == current  # raw: what version 3 runs sent
    assert current["meta"]["prompt_format"] == "raw"
    chat = copy.deepcopy(current)
    chat["meta"]["prompt_format"] = "chat"
    assert migrate(chat)["meta"]["prompt_format"] == "chat"  # a current result: as recorded


@pytest.mark.parametrize("value", [None, "html", 1])
def test_validate_refuses_a_prompt_format_that_is_missing_or_unknown(value: Any) -> None:
    result = migrate(_raw(SAVED[0]))
    if value is None:
        del result["meta"]["prompt_format"]
    else:
        result["meta"]["prompt_format"] = value
    with pytest.raises(ValueError, match=r"meta's prompt_format is not one of \('chat', 'raw'\)"):
        validate(result)


def test_meta_records_the_tuned_profile_and_results_before_it_load_as_null(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A result saved before profiles has no meta.profile: it validates and migrates as it is,
    read as null; a run records the profile of its machine and pair, or null."""
    for path in (SAVED[0], CURRENT[0]):
        result = migrate(_raw(path))
        assert "profile" not in result["meta"] and migrate(result) == result
    args = argparse.Namespace(target="bundled", draft=None, dtype="float32", device="cpu")
    monkeypatch.setenv("SPECVIZ_PROFILES", str(tmp_path))
    assert run_profile(args) is None
    profile = make_profile("bundled", "bundled")
    written = write_profile(tmp_path, profile)
    recorded = run_profile(args)
    assert recorded == {"path": str(written), "content": profile.to_json()}
    result = migrate(_raw(CURRENT[0]))
    for value in (None, recorded):
        result["meta"]["profile"] = value
        validate(result)
        assert migrate(result) == result
    assert f"tuned profile: {written.name}" in render(result, "x")
    for bad in ("p.json", {"path": "p.json"}, {"path": 1, "content": {}}):
        result["meta"]["profile"] = bad
        with pytest.raises(ValueError, match="meta's profile is neither null nor"):
            validate(result)


def test_old_results_render_as_before_with_their_format_recorded() -> None:
    """The format goes into meta; the rendered tables of older results stay as they were."""
    raw = _raw(SAVED[0])
    result = resummarized(raw)
    assert result["meta"]["prompt_format"] == "raw"
    without = copy.deepcopy(result)
    del without["meta"]["prompt_format"]
    assert render(result, "x") == render(without, "x")


def test_a_result_from_a_newer_specviz_is_refused_with_what_to_do(tmp_path: Path) -> None:
    future = migrate(_raw(SAVED[0])) | {"schema": SCHEMA + 1}
    with pytest.raises(ValueError, match=rf"schema {SCHEMA + 1}, newer than .* upgrade specviz"):
        migrate(future)
    path = tmp_path / "future.json"
    path.write_text(json.dumps(future))
    with pytest.raises(ValueError, match=r"future\.json: this bench result has schema"):
        load_result_view(path)
    assert main(["bench", "saved", str(path), str(tmp_path / "f.html")]) == 2
    assert main(["bench", "markdown", str(path)]) == 2 and not (tmp_path / "f.html").exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], r"not a specviz bench result \(a JSON list"),
        ({"meta": {}}, r"not a specviz bench result \(missing summary, records; give a JSON"),
        ({"meta": {}, "summary": [], "records": [], "schema": "3"}, r"schema '3' is not a ver"),
        ({"meta": {}, "summary": [], "records": [{"x": 1}]}, r"records are not a list of rec"),
        ({"meta": {}, "summary": [], "records": []}, r"meta has no command"),
        ({"meta": {"command": ""}, "summary": [{}], "records": []}, r"schema 2 \(KeyError"),
    ],
)
def test_what_is_not_a_bench_result_is_refused_readably(data: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        migrate(data)


def test_validate_refuses_a_record_that_lacks_a_field() -> None:
    result = migrate(_raw(SAVED[0]))
    del result["records"][0]["metrics"]["pass_seconds"]
    with pytest.raises(ValueError, match="record 0 lacks pass_seconds"):
        validate(result)
    result = migrate(_raw(SAVED[0]))
    result["drafts"] = {}
    with pytest.raises(ValueError, match="drafts is not a non-empty object"):
        validate(result)


def _record(draft: str) -> Record:
    from .test_bench import _metrics

    setting = BenchSetting(drafter="model", gamma=2, temperature=0.0, draft_name=draft)
    return Record(
        request_id="c-1",
        category="code",
        setting=setting,
        repetition=0,
        metrics=_metrics(prefill_seconds=0.1, plain_decode_seconds=4.8),
        hf_latency=None,
        hf_tokens=None,
        hf_identical=None,
    )


def test_the_saved_result_keeps_each_drafts_forward_and_batch_times() -> None:
    drafts = {
        "a": {"draft_forward": "lean (specviz.fast.lean)", "batch_step_seconds": [[1, 0.01]]},
        "b": {"draft_forward": "transformers (--no-lean)", "batch_step_seconds": [[1, 0.02]]},
    }
    meta = {"device": "cpu", "price_per_hour": 0.5, "command": "specviz bench --draft a --draft b"}
    meta |= {"prompt_format": "chat"}
    result = saved_result(meta, copy.deepcopy(drafts), [_record("a"), _record("b")])
    assert result["schema"] == SCHEMA and result["drafts"] == drafts
    assert migrate(json.loads(json.dumps(result))) == json.loads(json.dumps(result))
    assert batch_steps(result) == {"a": [(1, 0.01)], "b": [(1, 0.02)]}
    assert result["summary"][0]["cost_per_1k_tokens"]["price_per_hour"] == 0.5
    flat = flat_meta(result)
    assert flat["draft_forward"] == "a: lean (specviz.fast.lean); b: transformers (--no-lean)"
    md = render(resummarized(result), "two")
    assert "draft_forward: a: lean (specviz.fast.lean); b: transformers (--no-lean)" in md
    assert "(one new token per row, loaded with draft a):" in md
    assert "(one new token per row, loaded with draft b):" in md
    assert "| 1 | 20.0 | 20.0 | 1.00 |" in md and "| 1 | 10.0 | 10.0 | 1.00 |" in md


def test_a_bench_run_with_two_drafts_records_both(
    pair: PairFactory, tokenizer: Any, tmp_path: Path
) -> None:
    target, draft = pair("llama")
    models = {"t": target, "lean": draft, "gpt2": tiny_model("gpt2", seed=3)}
    for name, model in models.items():
        model.save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
    work = tmp_path / "w.jsonl"
    row = {"id": "c-1", "category": "code", "prompt": "abcab", "max_new_tokens": 6}
    work.write_text(json.dumps(row | {"temperature": 0.0}))
    out = tmp_path / "b.json"
    argv = ["bench", "--target", str(tmp_path / "t"), "--workloads", str(work)]
    argv += ["--draft", str(tmp_path / "lean"), "--draft", str(tmp_path / "gpt2")]
    argv += ["--gammas", "2", "--reps", "1", "--no-hf", "--step-batch-sizes", "1,2", "--dtype"]
    argv += ["float64", "--out", str(out), "--html", str(tmp_path / "b.html")]
    assert main(argv) == 0
    result = json.loads(out.read_text())
    validate(result)
    drafts = result["drafts"]
    assert list(drafts) == [str(tmp_path / "lean"), str(tmp_path / "gpt2")]
    assert all([b for b, _ in d["batch_step_seconds"]] == [1, 2] for d in drafts.values())
    assert drafts[str(tmp_path / "lean")]["draft_forward"].startswith("lean")
    assert "'gpt2'" in drafts[str(tmp_path / "gpt2")]["draft_forward"]
    assert {r["setting"]["draft_name"] for r in result["records"]} == set(drafts)
    figs, md = load_result_view(out)
    assert len(figs[-1].data) == 2 and md.count("Plain decode step time") == 2


def test_the_same_draft_twice_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--draft", "x", "--draft", "y", "--draft", "x"]) == 2
    assert "--draft names x more than once" in capsys.readouterr().err
