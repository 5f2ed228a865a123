"""The endpoint sweep as numbers: one row per (temperature, concurrency), the verdict of where
speculation stops paying, and the Markdown the report and the app show.

Per row, for each side: throughput (usage completion tokens over the batches' wall seconds),
median TTFT, median TPOT = (E2E − TTFT)/(n − 1) over requests with n ≥ 2 and a TTFT, median E2E
and cost per 1k tokens (the batches' wall time at the price per device-hour). Paired speedup:
the median over requests of base E2E per token / spec E2E per token at the same (concurrency,
repetition): per token, since sampled replies differ in length. Greedy rows count requests
whose text is identical on both sides, and where the others first differ (characters).
Acceptance: the engine's counter deltas over the spec side's batches, else its per-request
fields, else absent.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from typing import Any

from specviz.endpoint.engine import COUNTERS, LENGTHS, RATES, acceptance
from specviz.results.records import cost_per_1k_tokens
from specviz.results.table import markdown_table

ABSENT = "absent"


def tpot(e2e: float, ttft: float | None, tokens: int | None) -> float | None:
    """Seconds per output token after the first: (E2E − TTFT)/(n − 1), n from usage (None
    without a TTFT or with fewer than two tokens)."""
    if ttft is None or tokens is None or tokens < 2:
        return None
    return (e2e - ttft) / (tokens - 1)


def _common(a: str, b: str) -> int:
    """How many leading characters two texts share."""
    return sum(
        1 for _ in itertools.takewhile(lambda pair: pair[0] == pair[1], zip(a, b, strict=False))
    )


def paired(runs: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(base, spec) runs of the same request (and copy) at the same concurrency and
    repetition."""

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return r["request"], r["temperature"], r["concurrency"], r["rep"], r.get("copy", 0)

    base = {key(r): r for r in runs if r["side"] == "base"}
    return [(base[key(r)], r) for r in runs if r["side"] == "spec" and key(r) in base]


def _median(values: Sequence[float | None]) -> float | None:
    """The median of the known values (None for none)."""
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _side(
    runs: Sequence[dict[str, Any]], batches: Sequence[dict[str, Any]], price: float
) -> dict[str, Any] | None:
    """One side's numbers at one (temperature, concurrency) (None where it did not run)."""
    if not runs:
        return None
    tokens = sum(int(r["tokens"]) for r in runs)
    wall = math.fsum(float(b["wall"]) for b in batches)
    return {
        "tokens_per_second": tokens / wall if wall else 0.0,
        "ttft": _median([r["ttft"] for r in runs]),
        "tpot": _median([tpot(r["e2e"], r["ttft"], r["tokens"]) for r in runs]),
        "e2e": statistics.median(float(r["e2e"]) for r in runs),
        "cost_per_1k_tokens": cost_per_1k_tokens(wall, tokens, price) if tokens else None,
    }


def _engine(runs: Sequence[dict[str, Any]], batches: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The spec side's acceptance: counter deltas summed over its batches, and the mean of
    each per-request field (absent ones left out)."""
    deltas = [b["counters"] for b in batches if b["counters"] is not None]
    total = None
    if deltas and len(deltas) == len(batches):
        total = {c: math.fsum(d[c] or 0.0 for d in deltas) for c in COUNTERS}
    fields = sorted({k for r in runs for k in r["engine"]})
    per_request = {
        k: statistics.fmean(r["engine"][k] for r in runs if k in r["engine"]) for k in fields
    }
    return {"counters": total, **acceptance(total), "per_request": per_request}


def _scope(t: float, c: int) -> Any:
    """A filter of runs or batches to one side at (temperature t, concurrency c)."""

    def mine(rows: Sequence[dict[str, Any]], side: str) -> list[dict[str, Any]]:
        return [r for r in rows if (r["side"], r["temperature"], r["concurrency"]) == (side, t, c)]

    return mine


def endpoint_rows(section: dict[str, Any], price: float) -> list[dict[str, Any]]:
    """Every (temperature, concurrency) row of a section at a price per device-hour."""
    runs, batches = section["runs"], section["batches"]
    keys = sorted({(r["temperature"], r["concurrency"]) for r in runs})
    pairs = paired(runs)
    out = []
    for t, c in keys:
        mine = _scope(t, c)
        here = [(b, s) for b, s in pairs if (s["temperature"], s["concurrency"]) == (t, c)]
        ratios = [(b["e2e"] / b["tokens"]) / (s["e2e"] / s["tokens"]) for b, s in here]
        spec, base = mine(runs, "spec"), mine(runs, "base")
        sides = {n: _side(mine(runs, n), mine(batches, n), price) for n in ("spec", "base")}
        tps = [(sides[n] or {}).get("tokens_per_second") for n in ("spec", "base")]
        out.append(
            {
                "temperature": t,
                "concurrency": c,
                "requests": len(spec or base),
                "spec": sides["spec"],
                "base": sides["base"],
                "pairs": len(here),
                "paired_speedup": statistics.median(ratios) if ratios else None,
                "throughput_ratio": tps[0] / tps[1] if None not in tps and tps[1] else None,
                "identical": sum(b["text"] == s["text"] for b, s in here) if t == 0 else None,
                "diverged_after": sorted(
                    _common(b["text"], s["text"])
                    for b, s in here
                    if t == 0 and b["text"] != s["text"]
                ),
                "engine": _engine(spec, mine(batches, "spec")),
            }
        )
    return out


def verdicts(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Per temperature: up to which concurrency speculation paid (paired speedup > 1), and
    where it stopped."""
    out = []
    for t in sorted({r["temperature"] for r in rows}):
        mine = [r for r in rows if r["temperature"] == t and r["paired_speedup"] is not None]
        if not mine:
            continue
        paying = [r["concurrency"] for r in mine if r["paired_speedup"] > 1]
        losing = [r["concurrency"] for r in mine if r["paired_speedup"] <= 1]
        mode = "greedy" if t == 0 else f"T={t:g}"
        if not losing:
            out.append(
                f"{mode}: speculation paid at every concurrency tried (up to "
                f"{mine[-1]['concurrency']})"
            )
        elif not paying:
            out.append(f"{mode}: speculation did not pay at any concurrency tried")
        elif max(paying) < min(losing):
            out.append(
                f"{mode}: speculation paid up to concurrency {max(paying)}; it stopped paying "
                f"from {min(losing)}"
            )
        else:  # not one crossing: say where it paid and where not
            out.append(
                f"{mode}: speculation paid at concurrency {', '.join(map(str, paying))}, not at "
                f"{', '.join(map(str, losing))}"
            )
    return out


def _f(value: float | None, fmt: str, scale: float = 1.0) -> str:
    """A number in a table cell, or 'absent'."""
    return ABSENT if value is None else format(value * scale, fmt)


def _first(values: dict[str, float], keys: tuple[str, ...]) -> float | None:
    """The first of keys that values holds (None for none)."""
    return next((values[k] for k in keys if k in values), None)


def _cells(row: dict[str, Any]) -> list[str]:
    """One table row's cells."""
    spec, base, engine = row["spec"] or {}, row["base"] or {}, row["engine"]
    ident = "" if row["identical"] is None else f"{row['identical']}/{row['pairs']}"
    if row["diverged_after"]:
        low, high = row["diverged_after"][0], row["diverged_after"][-1]
        ident += (
            f" (the rest differ after {low}–{high} chars)"
            if low != high
            else (f" (the rest differ after {low} chars)")
        )
    mine = engine["per_request"]
    rate = engine["rate"] if engine["rate"] is not None else _first(mine, RATES)
    length = engine["length"] if engine["length"] is not None else _first(mine, LENGTHS)
    where = "counters" if engine["rate"] is not None else "per request"
    accept = (
        ABSENT
        if rate is None and length is None
        else f"{_f(rate, '.2f')}, {_f(length, '.2f')} tokens/step ({where})"
    )
    return [
        "greedy" if row["temperature"] == 0 else f"T={row['temperature']:g}",
        str(row["concurrency"]),
        _f(base.get("tokens_per_second"), ".1f"),
        _f(spec.get("tokens_per_second"), ".1f"),
        _f(row["throughput_ratio"], ".2f"),
        _f(row["paired_speedup"], ".2f"),
        f"{_f(base.get('ttft'), '.0f', 1e3)} / {_f(spec.get('ttft'), '.0f', 1e3)}",
        f"{_f(base.get('tpot'), '.1f', 1e3)} / {_f(spec.get('tpot'), '.1f', 1e3)}",
        f"{_f(base.get('cost_per_1k_tokens'), '.5f')} / "
        f"{_f(spec.get('cost_per_1k_tokens'), '.5f')}",
        ident,
        accept,
    ]


HEADER = [
    "mode", "concurrency", "base tok/s", "spec tok/s", "throughput ×", "paired speedup",
    "TTFT ms base / spec", "TPOT ms base / spec", "$/1k tokens base / spec",
    "greedy identical", "engine acceptance",
]  # fmt: skip


def endpoint_table(section: dict[str, Any], price: float) -> list[str]:
    """The sweep's Markdown table lines."""
    return markdown_table(HEADER, [_cells(r) for r in endpoint_rows(section, price)])


def render_endpoint(section: dict[str, Any], price: float) -> str:
    """The endpoint section in Markdown: what ran, the table, and the verdicts."""
    ends = section["endpoints"]
    said = [
        f"{n} {e['url']} ({e['model']}, {'streamed' if e['stream'] else 'unstreamed: no TTFT'})"
        for n, e in ends.items()
    ]
    rows = endpoint_rows(section, price)
    out = [
        f"Endpoint load sweep: {'; '.join(said)}. Baseline: {section['plan']['baseline']}. "
        f"Tokens from the servers' usage counts; cost at {price} USD per device-hour.",
        "",
        *endpoint_table(section, price),
        "",
    ]
    out += [f"- {v}" for v in verdicts(rows)]
    return "\n".join(out)


def parts_row(part: str, section: dict[str, Any]) -> list[str]:
    """An endpoint part's row of the report's parts table."""
    runs = [r for r in section["runs"] if r["side"] == "spec"]
    reps = len({r["rep"] for r in runs})
    counts: dict[str, set[str]] = {}
    for r in runs:
        counts.setdefault(r["category"], set()).add(r["request"])
    prompts = ", ".join(f"{c} {len(ids)} × {reps}" for c, ids in counts.items())
    levels = ", ".join(str(c) for c in section["plan"]["concurrency"])
    temps = ", ".join(f"{t:g}" for t in sorted({float(r["temperature"]) for r in runs}))
    return [part, f"{prompts} (concurrency {levels})", temps, "the server's", "–", "–", "server"]
