"""The study sections of a saved bench result: the parts each study's section holds, the keys
its rows hold, and what is wrong with one (specviz.results.schema checks a whole result)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

# Each study's section (specviz.bench.sweep.Sweep.key): the parts a whole one holds, by name,
# with their types, and the keys every row of its lists holds, by list (its rows' noun, keys).
Rows = dict[str, tuple[str, tuple[str, ...]]]
SECTIONS: dict[str, tuple[Mapping[str, type], Rows]] = {
    "tree_sweep": ({"plan": dict, "passes": dict, "rows": list, "verdicts": list}, {}),
    "batch_sweep": (
        {"plan": dict, "requests": list, "runs": list, "passes": list, "rows": list}
        | {"best": list, "verdicts": list, "verify": list},
        {"runs": ("run", ("temperature", "batch_size", "drafter", "gamma", "repetition",
                          "seconds", "tokens", "latency", "row_rounds", "accepted", "rejected",
                          "same_tokens_as_plain"))},
    ),
    "levers": (
        {"plan": dict, "memory_bytes": dict, "distances": list, "runs": list},
        {"runs": ("run", ("request", "category", "temperature", "lever", "rep", "seconds",
                          "tokens", "proposed", "accepted", "rejected")),
         "distances": ("distance", ("request", "category", "lever", "matched", "compared",
                                    "first_divergence", "tv", "tv_of"))},
    ),
    "endpoint": (
        {"plan": dict, "endpoints": dict, "runs": list, "batches": list},
        {"runs": ("run", ("side", "concurrency", "rep", "request", "temperature", "ttft", "e2e",
                          "tokens", "text", "engine")),
         "batches": ("batch", ("side", "concurrency", "rep", "temperature", "wall", "counters"))},
    ),
    "memory": (
        {"plan": dict, "rows": list, "sizes": list},
        {"rows": ("row", ("workload", "request", "task", "step", "drafter", "rep", "temperature",
                          "tokens", "rounds", "accepted", "verified", "latency", "plain_latency",
                          "draft_seconds", "step_seconds", "prefill_seconds",
                          "plain_decode_seconds", "identical")),
         "sizes": ("size", ("workload", "drafter", "rep", "tokens", "bytes_per_token",
                            "update_seconds_per_token"))},
    ),
    "cross": (
        {"plan": dict, "runs": list, "baselines": list},
        {"runs": ("run", ("request", "category", "temperature", "rep", "drafter", "gamma",
                          "tokens", "alpha", "tokens_per_pass", "c", "speedup_plain",
                          "speedup_generate", "speedup_assisted", "identical")),
         "baselines": ("baseline", ("request", "temperature", "rep", "plain_seconds",
                                    "generate_seconds"))},
    ),
}  # fmt: skip
BATCH_PLAN = ("batch_sizes", "requests", "gammas", "drafters", "new_tokens")
REQUIRED = ("tree_sweep",)  # in every file of this version; the later ones may lack the rest


def _is_section(section: object, parts: Mapping[str, type]) -> TypeGuard[dict[str, Any]]:
    """True for an object whose every part has its type."""
    return isinstance(section, dict) and all(
        isinstance(section.get(k), t) for k, t in parts.items()
    )


def problems(key: str, section: object) -> list[str]:
    """What is wrong with a result's section saved under key ([] for none, or a whole one):
    a part missing or of another type, a row lacking a key, and what the study adds."""
    parts, rows = SECTIONS[key]
    if section is None:
        return []
    if not _is_section(section, parts):
        return [f"{key} is neither null nor a sweep ({', '.join(parts)})"]
    owner = f"{key}'" if key == "levers" else f"{key}'s"  # a plural's possessive: levers'
    out = []
    for part, (noun, keys) in rows.items():
        whole = [isinstance(r, dict) and not set(keys) - set(r) for r in section[part]]
        bad = whole.index(False) if False in whole else None
        if bad is not None:
            out.append(f"{owner} {noun} {bad} lacks some of {', '.join(keys)}")
    return out + _own_problems(key, section)


def _own_problems(key: str, section: dict[str, Any]) -> list[str]:
    """What a study's section must hold beyond its parts and rows."""
    if key == "batch_sweep" and (lacks := sorted(set(BATCH_PLAN) - set(section["plan"]))):
        return [f"batch_sweep's plan lacks {', '.join(lacks)}"]
    if key == "levers":
        levers = section["plan"].get("levers")
        if not isinstance(levers, list) or set(levers) - set(section["memory_bytes"]):
            return ["levers' plan lists levers without memory_bytes"]
    if key == "endpoint" and any(
        isinstance(r, dict) and not isinstance(r.get("tokens"), int) for r in section["runs"]
    ):
        return ["endpoint's runs must count tokens from the server's usage"]
    return []


def section_problems(data: dict[str, Any]) -> list[str]:
    """What is wrong with a result's study sections. Each is saved under its study's key in one
    envelope: null where the run did not make it, else an object with its plan and the parts
    SECTIONS lists; a file older than a section lacks its key, read as null."""
    return [
        problem
        for key in SECTIONS
        for problem in problems(key, data.get(key, "missing" if key in REQUIRED else None))
    ]
