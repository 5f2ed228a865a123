"""The batch sweep as Markdown: its rows, pass timings and verdicts, the headline table, and
the curves the report plots (speedup against batch size, measured and predicted)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specviz.bench.batch_rows import TARGET, TOKEN_BOUND, pass_seconds
from specviz.results.table import markdown_table


def _spread(s: dict[str, float]) -> str:
    """'median (min–max)'."""
    return f"{s['median']:.2f} ({s['low']:.2f}–{s['high']:.2f})"


def _alpha(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _cost(value: float) -> str:
    return f"{value:.3g}"


def _note(section: dict[str, Any]) -> str:
    """What the sweep ran and how its columns are read."""
    plan = section["plan"]
    workloads = ", ".join(dict.fromkeys(r["category"] for r in section["requests"]))
    reps = max((r["repetition"] for r in section["runs"]), default=0) + 1
    return (
        f"Batch sweep: {plan['requests']} requests ({workloads}), {plan['new_tokens']} new "
        f"tokens each, decoded in consecutive groups of B rows, plainly and speculatively on "
        f"the same requests and seeds, {reps} repetition(s) after a warm-up, through "
        "transformers' forward (specviz.batch). tok/s: all requests' tokens over their wall "
        "time; latency: a request's seconds within its group (mean); speedup: plain seconds "
        "per token over speculative; predicted: E[tokens a round] t_plain / (γ t_draft + "
        "t_verify) from the passes timed below and the measured α; r = t_verify / t_plain."
    )


def rows_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Every (T, drafter, B, γ) row with its paired plain numbers."""
    header = ["T", "drafter", "B", "γ", "plain tok/s", "speculative tok/s", "speedup (min–max)"]
    header += ["predicted", "α", "tokens/round", "r", "plain latency s", "speculative latency s"]
    header += ["plain tok/s a request", "speculative tok/s a request", "plain $/1k tok"]
    header += ["speculative $/1k tok", "same tokens as plain"]
    body = [
        [
            f"{r['temperature']:g}",
            r["drafter"],
            str(r["batch_size"]),
            str(r["gamma"]),
            f"{r['plain']['tokens_per_second']:.1f}",
            f"{r['speculative']['tokens_per_second']:.1f}",
            _spread(r["speedup"]),
            f"{r['predicted_speedup']:.2f}",
            _alpha(r["alpha"]),
            f"{r['tokens_per_round']:.2f}",
            f"{r['verify_ratio']:.2f}",
            f"{r['plain']['latency']:.2f}",
            f"{r['speculative']['latency']:.2f}",
            f"{r['plain']['request_tokens_per_second']:.1f}",
            f"{r['speculative']['request_tokens_per_second']:.1f}",
            _cost(r["plain"]["cost_per_1k_tokens"]),
            _cost(r["speculative"]["cost_per_1k_tokens"]),
            f"{r['same_tokens']:.0%}",
        ]
        for r in rows
    ]
    return markdown_table(header, body)


def passes_table(section: dict[str, Any]) -> list[str]:
    """Per B: the plain step, each γ's verification pass (its r) and each draft step, in ms."""
    plan = section["plan"]
    timed = pass_seconds(section["passes"])
    drafts = [d for d in plan["drafters"] if any(k[1] == d for k in timed)]
    header = ["B", "plain step ms", *(f"verify γ={g} ms (r)" for g in plan["gammas"])]
    header += [f"{d} draft step ms" for d in drafts]
    body = []
    for b in plan["batch_sizes"]:
        step = timed[b, TARGET, 1]
        verify = [timed[b, TARGET, g + 1] for g in plan["gammas"]]
        body.append(
            [
                str(b),
                f"{step * 1e3:.1f}",
                *(f"{v * 1e3:.1f} ({v / step:.2f})" for v in verify),
                *(f"{timed[b, d, 1] * 1e3:.1f}" for d in drafts),
            ]
        )
    return markdown_table(header, body)


def _where(pays_at: Sequence[int], stops_from: int | None) -> str:
    """Where a speedup exceeds 1, and from which batch size it no longer does."""
    if not pays_at:
        return "at no B"
    at = f"at B = {', '.join(map(str, pays_at))}"
    return at + ("" if stops_from is None else f", not from B = {stops_from} on")


def verdict_text(v: dict[str, Any]) -> str:
    """One sentence: where speculation pays, from which batch size it stops, and theory's."""
    head = f"T = {v['temperature']:g}, {v['drafter']}"
    best = f"{v['best_speedup']:.2f}× at B = {v['best_batch_size']}, γ = {v['best_gamma']}"
    measured = _where(v["pays_at"], v["stops_from"])
    predicted = _where(v["predicted_pays_at"], v["predicted_stops_from"])
    return (
        f"{head}: speculation beats plain decoding {measured} (fastest {best}); "
        f"theory predicts it does {predicted}."
    )


def verify_text(costs: Sequence[dict[str, Any]], largest: int) -> str:
    """One sentence: from which B each γ's verification pass is token-bound."""
    parts = [
        f"at γ = {c['gamma']} "
        + (
            f"at no B up to {largest}"
            if c["token_bound_from"] is None
            else f"from B = {c['token_bound_from']}"
        )
        for c in costs
    ]
    return (
        f"The verification pass of γ + 1 tokens a row is token-bound ((r − 1)/γ ≥ "
        f"{TOKEN_BOUND:g}: past halfway from a plain step's cost to γ + 1 steps') "
        f"{'; '.join(parts)}."
    )


def sweep_table(section: dict[str, Any]) -> list[str]:
    """The sweep as GitHub Markdown lines: a note, the rows, the pass timings, the verdicts."""
    return [
        _note(section),
        "",
        *rows_table(section["rows"]),
        "",
        "Batched passes (medians; r = verify / plain step):",
        "",
        *passes_table(section),
        "",
        *(f"- {verdict_text(v)}" for v in section["verdicts"]),
        f"- {verify_text(section['verify'], max(section['plan']['batch_sizes']))}",
    ]


def render_batch_sweep(section: dict[str, Any]) -> str:
    """The batch sweep section of a result as Markdown (python -m specviz.bench.markdown)."""
    return "\n".join(sweep_table(section))


def headline_table(section: dict[str, Any]) -> list[str]:
    """One row per batch size at its best γ: throughput, speedup, α, latency, cost, theory
    (a T and drafter column where the sweep ran several)."""
    best = section["best"]
    several = len({(r["temperature"], r["drafter"]) for r in best}) > 1
    gammas = sorted({r["gamma"] for r in section["rows"]})
    ratios = {
        (r["temperature"], r["drafter"], r["batch_size"], r["gamma"]): r["verify_ratio"]
        for r in section["rows"]
    }
    header = [*(["T", "drafter"] if several else []), "B", "plain tok/s"]
    header += ["speculative tok/s (best γ)", "speedup (min–max)", "best γ", "α"]
    header += ["tokens a round", f"r at γ = {' / '.join(map(str, gammas))}"]
    header += ["latency plain / speculative, s", "$/1k tokens plain / speculative"]
    header += ["predicted speedup"]
    body = [
        [
            *([f"{r['temperature']:g}", r["drafter"]] if several else []),
            str(r["batch_size"]),
            f"{r['plain']['tokens_per_second']:.1f}",
            f"{r['speculative']['tokens_per_second']:.1f}",
            _spread(r["speedup"]),
            str(r["gamma"]),
            _alpha(r["alpha"]),
            f"{r['tokens_per_round']:.2f}",
            " / ".join(
                f"{ratios[r['temperature'], r['drafter'], r['batch_size'], g]:.2f}"
                for g in gammas
                if (r["temperature"], r["drafter"], r["batch_size"], g) in ratios
            ),
            f"{r['plain']['latency']:.2f} / {r['speculative']['latency']:.2f}",
            f"{_cost(r['plain']['cost_per_1k_tokens'])} / "
            f"{_cost(r['speculative']['cost_per_1k_tokens'])}",
            f"{r['predicted_speedup']:.2f}",
        ]
        for r in best
    ]
    return markdown_table(header, body)


def sweep_curves(section: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (T, drafter, γ): batch sizes, measured median speedups and predicted speedups."""
    curves: dict[tuple[float, str, int], dict[str, Any]] = {}
    for r in section["rows"]:
        key = (r["temperature"], r["drafter"], r["gamma"])
        label = f"{r['drafter']} γ={r['gamma']} T={r['temperature']:g}"
        curve = curves.setdefault(
            key, {"label": label, "batch_sizes": [], "measured": [], "predicted": []}
        )
        curve["batch_sizes"].append(r["batch_size"])
        curve["measured"].append(r["speedup"]["median"])
        curve["predicted"].append(r["predicted_speedup"])
    return list(curves.values())
