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
   tree rule chose tokens), and the file a "tree_sweep" section (null unless `--tree-sweep`
   ran: specviz.bench.tree_table). Added within this version: a "batch_sweep" section, null
   unless `--batch-sizes` ran the batch sweep (specviz.bench.batch_rows); files written before
   it have no such key, which reads as no batch sweep (a sweep's --batch-sizes was then
   --step-batch-sizes: the plain decode step timings, batch_step_seconds in each draft); and a
   "levers" section, null unless `--levers` ran the levers sweep (specviz.bench.lever_sweep),
   absent from files written before it; an "endpoint" section, null unless `--endpoint`
   benchmarked a server (specviz.endpoint.sweep), absent from files written before it; a
   "memory" section, null unless `specviz bench memory` ran (specviz.bench.sweeps.memory),
   absent from files written before it; a "cross" section, null unless `specviz bench
   cross` ran the cross-tokenizer study (specviz.bench.sweeps.cross), absent from files
   written before it; and meta's "profile": the tuned profile of the machine for the target and
   the first draft (specviz.tune) as {"path", "content"}, or null where there was none; absent
   from files written before it, which reads as null (no profile existed then).

migrate() brings any of them to the current version and checks the result. What an older
file did not record stays unknown: 0.0 and [] in a record's decode-phase split, and no cpu,
packed_weights or target_forward in meta nor draft_forward in its draft (gpu and cuda are
only ever there on CUDA). What it fills in is what those runs did: exit layer 8, the fixed
policy, no draft-model cap, the last --draft of their command (else the bundled draft), raw
prompts (versions 1 to 3 sent every prompt as plain text), chain drafters and no tree sweep
(versions 1 to 4 had no tree drafters).
"""

from __future__ import annotations

import copy
import itertools
import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeGuard

from specviz.bench.metrics import DEFAULT_PRICE_PER_HOUR, RequestMetrics
from specviz.bench.runner import BenchSetting
from specviz.models.loading import BUNDLED

SCHEMA = 5  # what `specviz bench` writes now
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
    out = copy.deepcopy(data)
    try:
        for step in STEPS[v - 1 :]:
            out = step(out)
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


STEPS: tuple[Callable[[dict[str, Any]], dict[str, Any]], ...] = (_to_2, _to_3, _to_4, _to_5)


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
    settings = {f.name for f in fields(BenchSetting)}
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


TREE_PARTS = {"plan": dict, "passes": dict, "rows": list, "verdicts": list}
BATCH_PARTS = {"plan": dict, "requests": list, "runs": list, "passes": list, "rows": list}
BATCH_PARTS |= {"best": list, "verdicts": list, "verify": list}
BATCH_PLAN = ("batch_sizes", "requests", "gammas", "drafters", "new_tokens")
BATCH_RUN: tuple[str, ...] = ("temperature", "batch_size", "drafter", "gamma", "repetition")
BATCH_RUN += ("seconds", "tokens", "latency", "row_rounds", "accepted", "rejected")
BATCH_RUN += ("same_tokens_as_plain",)


def _is_section(section: object, parts: Mapping[str, type]) -> TypeGuard[dict[str, Any]]:
    """True for an object whose every part has its type."""
    return isinstance(section, dict) and all(
        isinstance(section.get(k), t) for k, t in parts.items()
    )


def _not_a_section(name: str, parts: Mapping[str, type]) -> str:
    """The problem of a section that is neither null nor whole."""
    return f"{name} is neither null nor a sweep ({', '.join(parts)})"


def tree_sweep_problems(sweep: object) -> list[str]:
    """What is wrong with a result's tree_sweep section ([] for none, or a whole one)."""
    if not _is_section(sweep, TREE_PARTS):
        return [] if sweep is None else [_not_a_section("tree_sweep", TREE_PARTS)]
    return []


def batch_sweep_problems(sweep: object) -> list[str]:
    """What is wrong with a result's batch_sweep section ([] for none, or a whole one)."""
    if sweep is None or not _is_section(sweep, BATCH_PARTS):
        return [] if sweep is None else [_not_a_section("batch_sweep", BATCH_PARTS)]
    lacks = sorted(set(BATCH_PLAN) - set(sweep["plan"]))
    runs = sweep["runs"]
    bad = next((i for i, r in enumerate(runs) if not isinstance(r, dict)), None)
    if bad is None:
        bad = next((i for i, r in enumerate(runs) if set(BATCH_RUN) - set(r)), None)
    out = [f"batch_sweep's plan lacks {', '.join(lacks)}"] if lacks else []
    if bad is not None:
        out.append(f"batch_sweep's run {bad} lacks some of {', '.join(BATCH_RUN)}")
    return out


LEVER_PARTS = {"plan": dict, "memory_bytes": dict, "distances": list, "runs": list}
LEVER_RUN: tuple[str, ...] = (
    "request",
    "category",
    "temperature",
    "lever",
    "rep",
    "seconds",
    "tokens",
)
LEVER_RUN += ("proposed", "accepted", "rejected")
LEVER_DISTANCE: tuple[str, ...] = (
    "request",
    "category",
    "lever",
    "matched",
    "compared",
    "first_divergence",
)
LEVER_DISTANCE += ("tv", "tv_of")


def levers_problems(section: object) -> list[str]:
    """What is wrong with a result's levers section ([] for none, or a whole one)."""
    if section is None or not _is_section(section, LEVER_PARTS):
        return [] if section is None else [_not_a_section("levers", LEVER_PARTS)]
    out = []
    for part, name, keys in (("runs", "run", LEVER_RUN), ("distances", "distance", LEVER_DISTANCE)):
        rows = section[part]
        bad = next(
            (i for i, r in enumerate(rows) if not isinstance(r, dict) or set(keys) - set(r)), None
        )
        if bad is not None:
            out.append(f"levers' {name} {bad} lacks some of {', '.join(keys)}")
    levers = section["plan"].get("levers")
    if not isinstance(levers, list) or set(levers) - set(section["memory_bytes"]):
        out.append("levers' plan lists levers without memory_bytes")
    return out


ENDPOINT_PARTS = {"plan": dict, "endpoints": dict, "runs": list, "batches": list}
ENDPOINT_RUN: tuple[str, ...] = ("side", "concurrency", "rep", "request", "temperature")
ENDPOINT_RUN += ("ttft", "e2e", "tokens", "text", "engine")
ENDPOINT_BATCH = ("side", "concurrency", "rep", "temperature", "wall", "counters")


def endpoint_problems(section: object) -> list[str]:
    """What is wrong with a result's endpoint section ([] for none, or a whole one)."""
    if section is None or not _is_section(section, ENDPOINT_PARTS):
        return [] if section is None else [_not_a_section("endpoint", ENDPOINT_PARTS)]
    out = []
    for part, keys in (("runs", ENDPOINT_RUN), ("batches", ENDPOINT_BATCH)):
        rows = section[part]
        bad = next(
            (i for i, r in enumerate(rows) if not isinstance(r, dict) or set(keys) - set(r)), None
        )
        if bad is not None:
            out.append(f"endpoint's {part} {bad} lacks some of {', '.join(keys)}")
    if any(isinstance(r, dict) and not isinstance(r.get("tokens"), int) for r in section["runs"]):
        out.append("endpoint's runs must count tokens from the server's usage")
    return out


MEMORY_PARTS = {"plan": dict, "rows": list, "sizes": list}
MEMORY_ROW: tuple[str, ...] = ("workload", "request", "task", "step", "drafter", "rep")
MEMORY_ROW += ("temperature", "tokens", "rounds", "accepted", "verified", "latency")
MEMORY_ROW += ("plain_latency", "draft_seconds", "step_seconds", "identical")
MEMORY_SIZE: tuple[str, ...] = ("workload", "drafter", "rep", "tokens", "bytes_per_token")
MEMORY_SIZE += ("update_seconds_per_token",)


def memory_problems(section: object) -> list[str]:
    """What is wrong with a result's memory section ([] for none, or a whole one)."""
    if section is None or not _is_section(section, MEMORY_PARTS):
        return [] if section is None else [_not_a_section("memory", MEMORY_PARTS)]
    out = []
    for part, keys in (("rows", MEMORY_ROW), ("sizes", MEMORY_SIZE)):
        rows = section[part]
        bad = next(
            (i for i, r in enumerate(rows) if not isinstance(r, dict) or set(keys) - set(r)), None
        )
        if bad is not None:
            out.append(f"memory's {part} {bad} lacks some of {', '.join(keys)}")
    return out


CROSS_PARTS = {"plan": dict, "runs": list, "baselines": list}
CROSS_RUN: tuple[str, ...] = ("request", "category", "temperature", "rep", "drafter", "gamma")
CROSS_RUN += ("tokens", "alpha", "tokens_per_pass", "c", "speedup_plain", "speedup_generate")
CROSS_RUN += ("speedup_assisted", "identical")
CROSS_BASELINE = ("request", "temperature", "rep", "plain_seconds", "generate_seconds")


def cross_problems(section: object) -> list[str]:
    """What is wrong with a result's cross section ([] for none, or a whole one)."""
    if section is None or not _is_section(section, CROSS_PARTS):
        return [] if section is None else [_not_a_section("cross", CROSS_PARTS)]
    out = []
    for part, name, keys in (("runs", "run", CROSS_RUN), ("baselines", "baseline", CROSS_BASELINE)):
        rows = section[part]
        bad = next(
            (i for i, r in enumerate(rows) if not isinstance(r, dict) or set(keys) - set(r)), None
        )
        if bad is not None:
            out.append(f"cross's {name} {bad} lacks some of {', '.join(keys)}")
    return out


REQUIRED = ("tree_sweep",)  # in every file of this version; the later ones may lack the rest
SECTIONS: dict[str, Callable[[object], list[str]]] = {  # each study's section, by its key
    "tree_sweep": tree_sweep_problems,
    "batch_sweep": batch_sweep_problems,
    "levers": levers_problems,
    "endpoint": endpoint_problems,
    "memory": memory_problems,
    "cross": cross_problems,
}


def section_problems(data: dict[str, Any]) -> list[str]:
    """What is wrong with a result's study sections. Each is saved under its study's key
    (specviz.bench.sweep.Sweep.key) in one envelope: null where the run did not make it, else
    an object with its plan and the parts its check lists; a file older than a section lacks
    its key, read as null."""
    return [
        problem
        for key, check in SECTIONS.items()
        for problem in check(data.get(key, "missing" if key in REQUIRED else None))
    ]
