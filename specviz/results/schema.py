"""The shape of a saved `specviz bench --out` result, and migrate() from any older shape.

Versions (1 and 2 carry no "schema" key and are told apart by their records):

1. The first results. Records' metrics lack the decode-phase split (prefill_seconds,
   plain_decode_seconds, widths, pass_seconds); settings may lack exit_layer, policy and
   model_gamma, and the file policies_vs_best_fixed. meta describes one draft (draft_forward)
   and the file one batch_step_seconds list: the last --draft's, when several were compared.
2. As 1, with the decode-phase split in every record.
3. "schema": 3. meta holds what is common to the run, price_per_hour among it; "drafts" maps
   each --draft, as given, to what was measured with it loaded: draft_forward and
   batch_step_seconds.
4. "schema": 4. meta's prompt_format says how the prompts reached the models: "chat" (through
   the target tokenizer's chat template, the default since this version) or "raw" (plain
   text, `--raw`).
5. "schema": 5. Tree drafters: settings hold tree_nodes, tree_width and tree_rule (null for a
   chain drafter; a tree's gamma is its depth), records an "exact" flag (false where a lossy
   tree rule chose tokens), and the file a "tree_sweep" section (null unless `specviz bench
   trees` ran: specviz.bench.sweeps.trees). Added within this version: a "batch_sweep"
   section, null unless `specviz bench batch` ran the batch sweep (specviz.bench.sweeps.batch);
   files written before it have no such key, which reads as no batch sweep (a sweep's
   --batch-sizes was then --step-batch-sizes: the plain decode step timings,
   batch_step_seconds in each draft); and a "levers" section, null unless `specviz bench
   levers` ran the levers sweep (specviz.bench.sweeps.levers), absent from files written
   before it; an "endpoint" section, null unless `specviz bench endpoint` benchmarked a server
   (specviz.bench.sweeps.endpoint), absent from files written before it; a "memory" section,
   null unless `specviz bench memory` ran (specviz.bench.sweeps.memory), absent from files
   written before it; a "cross" section, null unless `specviz bench
   cross` ran the cross-tokenizer study (specviz.bench.sweeps.cross), absent from files
   written before it; and meta's "profile": the tuned profile of the machine for the target and
   the first draft (specviz.tune) as {"path", "content"}, or null where there was none; absent
   from files written before it, which reads as null (no profile existed then). Rows of the
   memory section carry prefill_seconds and plain_decode_seconds (the decode-phase split of
   their records); rows written before that take them from their records. A setting carries
   suffix_factor (the memory study's --suffix-factors) only where it was set; absent, the
   suffix drafters ran at the registry's default of their day (factor 1 before the
   suffix-factors part measured 2 faster).
6. "schema": 6. Drafters are named by family (model:trimmed, ngram+eagle, tree-model, ...):
   older files' names are renamed as they are read (specviz.results.names).

migrate() brings any of them to the current version and checks the result. What an older
file did not record stays unknown: 0.0 and [] in a record's decode-phase split, and no cpu,
packed_weights or target_forward in meta nor draft_forward in its draft (gpu and cuda are
only ever there on CUDA). What it fills in is what those runs did: exit layer 8, the fixed
policy, no draft-model cap, the last --draft of their command (else the bundled draft), raw
prompts (versions 1 to 3 sent every prompt as plain text), chain drafters and no tree sweep
(versions 1 to 4 had no tree drafters). Commands saved before the studies were subcommands
(`--tree-sweep`, `--batch-sizes`, `--levers`, `--cross`, `--endpoint`) are read in their
spelling now (specviz.results.commands).
"""

from __future__ import annotations

import copy
import itertools
import json
import shlex
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from specviz.models.loading import BUNDLED
from specviz.results.commands import respelled_commands
from specviz.results.names import renamed
from specviz.results.records import DEFAULT_PRICE_PER_HOUR, RequestMetrics
from specviz.results.sections import section_problems
from specviz.results.setting import BenchSetting, drafter_label

SCHEMA = 6  # what `specviz bench` writes now
OPTIONAL_SETTINGS = {"suffix_factor"}  # only where set (BenchSetting.saved)
RECORD_KEYS: tuple[str, ...] = ("request_id", "category", "setting", "repetition", "metrics")
RECORD_KEYS += ("hf_latency", "hf_tokens", "hf_identical")
LISTS = ("summary", "gamma_curves", "policies_vs_best_fixed", "records")
PROMPT_FORMATS = ("chat", "raw")  # meta's prompt_format (specviz.models.chat)
NOT_A_RESULT = "not a specviz bench result"
HINT = "give a JSON written by `specviz bench --out`"


def version(data: dict[str, Any]) -> int:
    """The schema version of a saved result (1 or 2 for the unversioned ones)."""
    if "schema" in data:
        v = data["schema"]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{NOT_A_RESULT}: its schema {v!r} is not a version number ({HINT})")
        return v
    split = all("plain_decode_seconds" in r["metrics"] for r in data["records"])
    return 2 if split else 1


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A saved bench result of any schema version in the current shape (a copy; checked).

    Raises ValueError, saying what to do, for JSON that is not a bench result or that a newer
    specviz wrote.
    """
    _check_top(data)
    v = version(data)
    if v > SCHEMA:
        raise ValueError(
            f"this bench result has schema {v}, newer than this specviz reads (up to {SCHEMA}): "
            "upgrade specviz to read it"
        )
    out: dict[str, Any] = respelled_commands(copy.deepcopy(data), batch_sweep="batch_sweep" in data)
    try:
        for step in STEPS[v - 1 :]:
            out = step(out)
        out = _split_memory_rows(out)
    except (KeyError, IndexError, TypeError, AttributeError) as err:
        problem = f"{type(err).__name__}: {err}"
        raise ValueError(f"{NOT_A_RESULT} of schema {v} ({problem}; {HINT})") from None
    validate(out)
    return out


def read_result(path: str | Path) -> dict[str, Any]:
    """A saved result file, migrated (ValueError naming the file when it is not one)."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"no such file: {file} ({HINT})")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{file.name} is not JSON: {err}") from None
    try:
        return migrate(data)
    except ValueError as err:
        raise ValueError(f"{file.name}: {err}") from None


def batch_steps(result: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """Each draft's plain decode step seconds against batch size, of a current result."""
    return {
        name: [(int(b), float(t)) for b, t in d["batch_step_seconds"]]
        for name, d in result["drafts"].items()
    }


def flat_meta(result: dict[str, Any]) -> dict[str, Any]:
    """meta with each per-draft key beside it: one draft's value as it is, several drafts'
    as 'draft: value' joined by '; ' (keys a draft did not record are left out)."""
    drafts = result["drafts"]
    flat = dict(result["meta"])
    described = dict.fromkeys(k for d in drafts.values() for k in d if k != "batch_step_seconds")
    for key in described:
        known = {name: d[key] for name, d in drafts.items() if key in d}
        if len(drafts) == 1 and known:
            (flat[key],) = known.values()
        elif known:
            flat[key] = "; ".join(f"{name}: {value}" for name, value in known.items())
    return flat


def _check_top(data: object) -> None:
    """ValueError unless data looks like a bench result of some version."""
    if not isinstance(data, dict):
        raise ValueError(f"{NOT_A_RESULT} (a JSON {type(data).__name__}, not an object; {HINT})")
    missing = [k for k in ("meta", "summary", "records") if k not in data]
    if missing:
        raise ValueError(f"{NOT_A_RESULT} (missing {', '.join(missing)}; {HINT})")
    if not isinstance(data["meta"], dict) or not isinstance(data["summary"], list):
        raise ValueError(f"{NOT_A_RESULT} (its meta or summary is not one; {HINT})")
    records = data["records"]
    if not isinstance(records, list) or not all(
        isinstance(r, dict)
        and isinstance(r.get("metrics"), dict)
        and isinstance(r.get("setting"), dict)
        for r in records
    ):
        raise ValueError(f"{NOT_A_RESULT} (its records are not a list of records; {HINT})")


def _to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Records without the decode-phase split get it as not recorded; settings get the exit
    layer, policy and cap every run had then."""
    split = {"prefill_seconds": 0.0, "plain_decode_seconds": 0.0, "widths": [], "pass_seconds": []}
    then = {"exit_layer": 8, "policy": "fixed", "model_gamma": None}
    for r in data["records"]:
        r["metrics"] = split | r["metrics"]
        r["setting"] = then | r["setting"]
    return data


def _to_3(data: dict[str, Any]) -> dict[str, Any]:
    """The one draft's forward and batch step times under its --draft, the price in meta,
    settings' model_gamma (added within version 2) as no cap; curves and policy table, which
    readers recompute from the records, empty where the file has none."""
    data.setdefault("gamma_curves", [])
    data.setdefault("policies_vs_best_fixed", [])
    for r in data["records"]:
        r["setting"] = {"model_gamma": None} | r["setting"]
    meta = data["meta"]
    draft: dict[str, Any] = {"batch_step_seconds": data.pop("batch_step_seconds", [])}
    if "draft_forward" in meta:
        draft = {"draft_forward": meta.pop("draft_forward")} | draft
    rows = data["summary"]
    price = rows[0]["cost_per_1k_tokens"]["price_per_hour"] if rows else DEFAULT_PRICE_PER_HOUR
    meta.setdefault("price_per_hour", price)
    data["drafts"] = {_last_draft(str(meta.get("command", ""))): draft}
    return {"schema": 3, **data}


def _to_4(data: dict[str, Any]) -> dict[str, Any]:
    """The prompt format those runs used: raw text (no chat template)."""
    data["meta"].setdefault("prompt_format", "raw")
    return data | {"schema": 4}


def _to_5(data: dict[str, Any]) -> dict[str, Any]:
    """Every setting a chain drafter's (no tree fields), every record exact, no tree sweep."""
    chain = {"tree_nodes": None, "tree_width": None, "tree_rule": None}
    for r in data["records"]:
        r["setting"] = chain | r["setting"]
        r.setdefault("exact", True)
    for row in data["summary"]:
        row["setting"] = chain | row["setting"]
    data.setdefault("tree_sweep", None)
    return data | {"schema": 5}


def _split_memory_rows(data: dict[str, Any]) -> dict[str, Any]:
    """Memory rows lacking the decode-phase split copy it from their records (the same request,
    drafter, temperature and repetition: one record a row)."""
    memory = data.get("memory")
    if not isinstance(memory, dict) or not isinstance(memory.get("rows"), list):
        return data
    metrics = {
        (
            r["request_id"],
            drafter_label(r["setting"]),
            r["setting"]["temperature"],
            r["repetition"],
        ): r["metrics"]
        for r in data["records"]
    }
    for row in memory["rows"]:
        if isinstance(row, dict) and "plain_decode_seconds" not in row:
            key = (row["request"], row["drafter"], row["temperature"], row["rep"])
            m = metrics[key]
            row |= {k: m[k] for k in ("prefill_seconds", "plain_decode_seconds")}
    return data


def _to_6(data: dict[str, Any]) -> dict[str, Any]:
    """Drafters by their names now (specviz.results.names)."""
    out: dict[str, Any] = renamed(data)
    return out | {"schema": 6}


STEPS: tuple[Callable[[dict[str, Any]], dict[str, Any]], ...] = (_to_2, _to_3, _to_4, _to_5, _to_6)


def _last_draft(command: str) -> str:
    """The last --draft of a bench command line ('bundled' when it gives none)."""
    try:
        words = shlex.split(command)
    except ValueError:  # version 1 joined argv unquoted
        words = command.split()
    drafts = [b for a, b in itertools.pairwise(words) if a == "--draft"]
    drafts += [w.split("=", 1)[1] for w in words if w.startswith("--draft=")]
    return drafts[-1] if drafts else BUNDLED


def validate(data: dict[str, Any]) -> None:
    """ValueError unless data is a bench result of the current schema, in every part."""
    _check_top(data)
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{NOT_A_RESULT} of schema {SCHEMA} (its schema: {data.get('schema')!r})")
    problems = [f"{k} is not a list" for k in LISTS if not isinstance(data.get(k), list)]
    meta = data["meta"]
    if not isinstance(meta, dict) or not isinstance(meta.get("command"), str):
        problems.append("meta has no command")
    elif not isinstance(meta.get("price_per_hour"), int | float):
        problems.append("meta has no price_per_hour")
    elif meta.get("prompt_format") not in PROMPT_FORMATS:
        problems.append(f"meta's prompt_format is not one of {PROMPT_FORMATS}")
    elif not _is_profile(meta.get("profile")):
        problems.append('meta\'s profile is neither null nor {"path", "content"}')
    problems += section_problems(data)
    drafts = data.get("drafts")
    if not isinstance(drafts, dict) or not drafts:
        problems.append("drafts is not a non-empty object")
    else:
        for name, d in drafts.items():
            steps = d.get("batch_step_seconds") if isinstance(d, dict) else None
            if not isinstance(steps, list) or not all(
                isinstance(s, list) and len(s) == 2 for s in steps
            ):
                problems.append(f"draft {name!r} has no batch_step_seconds pairs")
    settings = {f.name for f in fields(BenchSetting)} - OPTIONAL_SETTINGS
    metrics = {f.name for f in fields(RequestMetrics)}
    for i, r in enumerate(data["records"]):
        lacks = [k for k in RECORD_KEYS if k not in r]
        lacks += sorted(settings - set(r["setting"]))
        lacks += sorted(metrics - set(r["metrics"]))
        if lacks:
            problems.append(f"record {i} lacks {', '.join(lacks)}")
            break
    if problems:
        raise ValueError(f"{NOT_A_RESULT} of schema {SCHEMA}: {'; '.join(problems)}")


def _is_profile(profile: object) -> bool:
    """True for meta's profile: null (or absent), or an object with a path and a content."""
    return profile is None or (
        isinstance(profile, dict)
        and isinstance(profile.get("path"), str)
        and isinstance(profile.get("content"), dict)
    )
