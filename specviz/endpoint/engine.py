"""Acceptance as a serving engine reports it: Prometheus counters scraped around a run, and the
per-request fields some engines put in their responses. What an engine does not expose is
absent (None, or a missing key), never guessed.

Terms (vLLM's counters, read as deltas between two scrapes of /metrics):
- drafts: verification steps that had draft tokens (`vllm:spec_decode_num_drafts`).
- draft_tokens: tokens proposed (`…_num_draft_tokens`); accepted: those kept
  (`…_num_accepted_tokens`); per_position[i]: accepted at draft position i
  (`…_num_accepted_tokens_per_pos`, label position="i").
- acceptance rate = accepted / draft_tokens; mean acceptance length = 1 + accepted / drafts
  (the verified step's own token, counted the way vLLM's logger counts it).
Counters are summed over every other label (model, engine). A counter may be exposed with or
without the `_total` suffix; both are read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

VLLM = "vllm:spec_decode_"
COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
PER_POSITION = "num_accepted_tokens_per_pos"
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]  # (name, labels) → value


def parse_metrics(text: str) -> Samples:
    """The samples of a Prometheus text exposition (comments skipped; ValueError naming the line
    for one that is not a sample)."""
    out: Samples = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        if match is None:
            raise ValueError(f"metrics line {number} is not a Prometheus sample: {line[:120]!r}")
        name, _, labels, value = match.group(1, 2, 3, 4)
        pairs = tuple(sorted(LABEL.findall(labels or "")))
        out[name, pairs] = float(value)
    return out


def _base(name: str) -> str:
    """A counter's name without the `_total` suffix."""
    return name[: -len("_total")] if name.endswith("_total") else name


def _sum(samples: Samples, counter: str) -> float | None:
    """A vLLM spec-decode counter summed over its labels (None where it is not exposed)."""
    values = [v for (n, _), v in samples.items() if _base(n) == VLLM + counter]
    return math.fsum(values) if values else None


def _per_position(samples: Samples) -> dict[int, float]:
    """Accepted tokens by draft position, summed over the other labels."""
    out: dict[int, float] = {}
    for (name, labels), value in samples.items():
        position = dict(labels).get("position")
        if _base(name) == VLLM + PER_POSITION and position is not None and position.isdigit():
            out[int(position)] = out.get(int(position), 0.0) + value
    return out


def spec_counters(samples: Samples) -> dict[str, Any] | None:
    """The spec-decode counters of one scrape (None when the server exposes none of them)."""
    counts = {c: _sum(samples, c) for c in COUNTERS}
    if all(v is None for v in counts.values()):
        return None
    positions = _per_position(samples)
    return counts | {"per_position": [positions[i] for i in sorted(positions)]}


def counter_delta(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """What the counters grew by between two scrapes (None unless both exposed them). A counter
    that shrank was reset (the server restarted): ValueError, since the run is not one window."""
    if before is None or after is None:
        return None
    out: dict[str, Any] = {}
    for key in COUNTERS:
        b, a = before.get(key), after.get(key)
        out[key] = None if a is None or b is None else a - b
    width = max(len(before["per_position"]), len(after["per_position"]))
    pad = [0.0] * width
    b_pos = [*before["per_position"], *pad][:width]
    a_pos = [*after["per_position"], *pad][:width]
    out["per_position"] = [a - b for a, b in zip(a_pos, b_pos, strict=True)]
    if any(v is not None and v < 0 for v in out.values() if not isinstance(v, list)) or any(
        v < 0 for v in out["per_position"]
    ):
        raise ValueError("the server's spec-decode counters went down during a run: it restarted")
    return out


def acceptance(delta: Mapping[str, Any] | None) -> dict[str, float | None]:
    """Acceptance rate and mean acceptance length of a counter delta (None where unknown)."""
    if delta is None:
        return {"rate": None, "length": None}
    drafts, proposed, accepted = (delta.get(c) for c in COUNTERS)
    rate = accepted / proposed if accepted is not None and proposed else None
    length = 1 + accepted / drafts if accepted is not None and drafts else None
    return {"rate": rate, "length": length}


VLLM_FIELDS: tuple[str, ...] = ("mean_acceptance_length", "draft_acceptance_rate", "num_spec_steps")
VLLM_FIELDS += ("num_accepted_draft_tokens", "num_draft_tokens")
SGLANG_FIELDS: tuple[str, ...] = ("spec_accept_rate", "spec_accept_length", "spec_verify_ct")
SGLANG_FIELDS += ("spec_num_correct_drafts", "spec_num_proposed_drafts")
RATES = ("vllm.draft_acceptance_rate", "sglang.spec_accept_rate")  # what the table shows
LENGTHS = ("vllm.mean_acceptance_length", "sglang.spec_accept_length")


def _numbers(found: object, keys: tuple[str, ...], prefix: str) -> dict[str, float]:
    """The numeric fields among keys of a mapping, renamed prefix.key ({} for no mapping)."""
    if not isinstance(found, Mapping):
        return {}
    return {f"{prefix}.{k}": float(found[k]) for k in keys if _number(found.get(k))}


def request_acceptance(chunk: Mapping[str, Any]) -> dict[str, float]:
    """The per-request acceptance fields one response chunk carries, {} where it has none:
    vLLM's top-level `metrics.speculative_decoding` (server run with
    --per-request-spec-decode-metrics summary; streamed, in the final usage chunk), and SGLang's
    `sglext.spec_tokens_details` (request field return_spec_tokens_details) or, on its native
    API, `meta_info`."""
    metrics = chunk.get("metrics")
    found = _numbers(
        metrics.get("speculative_decoding") if isinstance(metrics, Mapping) else None,
        VLLM_FIELDS,
        "vllm",
    )
    sglext = chunk.get("sglext")
    details = sglext.get("spec_tokens_details") if isinstance(sglext, Mapping) else None
    found |= _numbers(details, SGLANG_FIELDS, "sglang")
    return found | _numbers(chunk.get("meta_info"), SGLANG_FIELDS, "sglang")


def _number(value: object) -> bool:
    """True for an int or float that is not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)
