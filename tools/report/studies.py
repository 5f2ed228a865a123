"""The tables of the study parts: draft size, γ, verification cost, temperature, the batch
step, the drafters, dynamic γ and transformers' generate().

Terms: α is the acceptance rate, c the cost ratio (a draft step in target steps), r the
verification ratio (a target pass over γ + 1 tokens in plain steps), γ the draft length. Each
table reads the saved parts through a Saved (tools.report.saved).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from specviz.gamma.theory import alpha_to_match, optimal_gamma, speedup_bound
from specviz.results.setting import drafter_label
from specviz.results.table import markdown_table, spread_cell
from tools.report.saved import Saved
from tools.report.text import alpha_text, best, share, temp, times


def _by_drafter(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each drafter's fastest fixed-γ row, in the order the drafters first appear."""
    fastest: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["setting"]["policy"] != "fixed":
            continue
        label = drafter_label(r["setting"])
        if label not in fastest or r["speedup"]["median"] > fastest[label]["speedup"]["median"]:
            fastest[label] = r
    return fastest


def draft_size(saved: Saved) -> list[str]:
    """Draft model against early exits, and the α each would need to match the trimmed draft."""
    rows = _by_drafter(saved.rows("draft-size"))
    trimmed = rows["model:trimmed"]
    a, c = trimmed["alpha"]["median"], trimmed["cost_ratio"]["median"]
    goal = speedup_bound(a, optimal_gamma(a, c), c)
    header = ["drafter", "best γ", "c", "α", f"α needed for {times(goal)}", "r", "speedup"]
    header += ["loop efficiency"]
    body = []
    for label, r in rows.items():
        needed = alpha_to_match(goal, r["cost_ratio"]["median"])
        body.append(
            [
                label,
                str(r["setting"]["gamma"]),
                f"{r['cost_ratio']['median']:.3f}",
                f"{r['alpha']['median']:.2f}",
                alpha_text(needed),
                f"{r['verify_ratio']['median']:.2f}",
                times(r["speedup"]["median"]),
                f"{r['loop_efficiency']['median']:.2f}",
            ]
        )
    return markdown_table(header, body)


GAMMA_PARTS = ("code", "lean-target")


def gamma(saved: Saved) -> list[str]:
    """Speedup at each fixed γ on the code part's prompts, on both target forwards."""
    curves = {p: list(saved.load(p)["gamma_curves"]) for p in GAMMA_PARTS}
    gammas = sorted({g for cs in curves.values() for c in cs for g in c["gammas"]})
    header = ["part", "drafter", "T", "α", "c", *(f"γ={g}" for g in gammas), "best γ", "theory γ"]
    body = []
    for part, cs in curves.items():
        for c in cs:
            by = dict(zip(c["gammas"], c["measured_speedup"], strict=True))
            body.append(
                [
                    part,
                    drafter_label(c),
                    temp(c["temperature"]),
                    f"{c['alpha']:.2f}",
                    f"{c['cost_ratio']:.3f}",
                    *(f"{by[g]:.2f}" if g in by else "–" for g in gammas),
                    str(c["measured_best_gamma"]),
                    str(c["theory_best_gamma"]),
                ]
            )
    return markdown_table(header, body)


def verify_cost(saved: Saved) -> list[str]:
    """r, a verification pass of γ + 1 tokens in plain steps, at each fixed γ (T = 0)."""
    rows = {
        p: [r for r in saved.rows(p, "code", 0.0) if r["setting"]["policy"] == "fixed"]
        for p in GAMMA_PARTS
    }
    gammas = sorted({r["setting"]["gamma"] for rs in rows.values() for r in rs})
    body = []
    for part, rs in rows.items():
        for label in dict.fromkeys(drafter_label(r["setting"]) for r in rs):
            by = {
                r["setting"]["gamma"]: r["verify_ratio"]["median"]
                for r in rs
                if drafter_label(r["setting"]) == label
            }
            body.append([part, label, *(f"{by[g]:.2f}" if g in by else "–" for g in gammas)])
    return markdown_table(["part", "drafter", *(f"r at γ={g}" for g in gammas)], body)


def temperature(saved: Saved) -> list[str]:
    """Per temperature: the best fixed γ, theory's γ, α, the speedup and the bound."""
    header = ["T", "best γ", "theory γ", "α", "speedup (min–max)", "bound", "efficiency"]
    header += ["loop efficiency"]
    body = []
    for curve in saved.load("temperature")["gamma_curves"]:
        t = curve["temperature"]
        r = best(saved.rows("temperature", curve["workload"], t))
        body.append(
            [
                temp(t),
                str(curve["measured_best_gamma"]),
                str(curve["theory_best_gamma"]),
                f"{r['alpha']['median']:.2f}",
                spread_cell(r["speedup"]),
                f"{r['bound']['median']:.2f}",
                f"{r['efficiency']['median']:.2f}",
                f"{r['loop_efficiency']['median']:.2f}",
            ]
        )
    return markdown_table(header, body)


def _batch(saved: Saved) -> list[tuple[int, float]]:
    """(rows, seconds) of a plain decode step, from the batch part."""
    result = saved.load("batch")
    drafts = result.get("drafts", {"": result})  # results before per-draft meta: at the top
    (steps,) = (d["batch_step_seconds"] for d in drafts.values() if d.get("batch_step_seconds"))
    return [(int(b), float(t)) for b, t in steps]


def _fit(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares seconds = a + b rows: (a, b)."""
    xs, ys = [float(b) for b, _ in points], [t for _, t in points]
    b, a = statistics.linear_regression(xs, ys)
    return a, b


def batch(saved: Saved) -> list[str]:
    """A plain decode step against the rows in the batch (the batch part)."""
    points = _batch(saved)
    a, b = _fit(points)
    base = points[0][1]
    header = ["rows", *(str(n) for n, _ in points)]
    return markdown_table(
        header,
        [
            ["ms per step", *(f"{t * 1e3:.1f}" for _, t in points)],
            ["step / 1-row step", *(f"{t / base:.2f}" for _, t in points)],
            ["ms per row", *(f"{t * 1e3 / n:.1f}" for n, t in points)],
            ["fitted line, ms", *(f"{(a + b * n) * 1e3:.1f}" for n, _ in points)],
        ],
    )


def batch_fit(saved: Saved) -> list[str]:
    """The least-squares line through the batch part's step times."""
    points = _batch(saved)
    a, b = _fit(points)
    worst = max(abs(t - a - b * n) for n, t in points)
    header = ["fixed cost, ms", "cost per row, ms", "rows where the two are equal"]
    header += ["largest miss, ms"]
    return markdown_table(
        header, [[f"{a * 1e3:.1f}", f"{b * 1e3:.2f}", f"{a / b:.0f}", f"{worst * 1e3:.1f}"]]
    )


DRAFTER_PARTS = (("code-all", "code"), ("hybrid-cap", "json"), ("hybrid-cap", "repeat"))


def drafters(saved: Saved) -> list[str]:
    """Lookup, the trimmed draft, and lookup first: each drafter's best γ per workload (T = 0)."""
    header = ["workload", "drafter", "best γ", "speedup (min–max)", "α", "tokens a round", "c"]
    header += ["part"]
    body = []
    for part, workload in DRAFTER_PARTS:
        for label, r in _by_drafter(saved.rows(part, workload, 0.0)).items():
            body.append(
                [
                    workload,
                    label,
                    str(r["setting"]["gamma"]),
                    spread_cell(r["speedup"]),
                    f"{r['alpha']['median']:.2f}",
                    f"{r['tokens_per_round']['median']:.2f}",
                    f"{r['cost_ratio']['median']:.3f}",
                    part,
                ]
            )
    return markdown_table(header, body)


def dynamic(saved: Saved) -> list[str]:
    """Each dynamic γ policy's speedup over the best fixed γ's, timed / priced (dynamic part)."""
    curves: dict[tuple[str, str, float], dict[str, Any]] = defaultdict(dict)
    fixed: dict[tuple[str, str, float], str] = {}
    for d in saved.load("dynamic")["policies_vs_best_fixed"]:
        key = (d["workload"], d["drafter"], d["temperature"])
        priced = d.get("priced_ratio")
        both = f"{d['ratio']:.2f} / {priced:.2f}" if priced is not None else f"{d['ratio']:.2f}"
        curves[key][d["policy"]] = both
        fixed[key] = f"{d['best_fixed_gamma']} ({d['best_fixed_speedup']:.2f})"
    policies = list(dict.fromkeys(p for c in curves.values() for p in c))
    header = ["workload", "drafter", "T", "best fixed γ (speedup)"]
    header += [f"{p}: timed / priced ratio" for p in policies]
    body = [
        [w, drafter, temp(t), fixed[w, drafter, t], *(c.get(p, "–") for p in policies)]
        for (w, drafter, t), c in curves.items()
    ]
    return markdown_table(header, body)


# Parts timed against transformers' generate() with the target on the same forward as ours
# (the lean-target part runs our target on specviz.fast.lean's forward: not a loop comparison).
HF_PARTS = ("code", "json-prose", "repeat", "lookup")


def transformers(saved: Saved) -> list[str]:
    """Our time per token over transformers' generate() with the same drafter and settings."""
    header = ["part", "workload", "T", "drafter", "settings", "ours/HF time per token"]
    header += ["settings where ours is faster", "pairs where ours is faster", "same tokens"]
    body = []
    for part in HF_PARTS:
        groups: dict[tuple[str, float, str], list[dict[str, Any]]] = defaultdict(list)
        for r in saved.rows(part):
            if r["ours_over_transformers_time_per_token"]:
                key = (r["workload"], r["setting"]["temperature"], r["setting"]["drafter"])
                groups[key].append(r)
        for (workload, t, drafter), rs in groups.items():
            ratios = [r["ours_over_transformers_time_per_token"]["median"] for r in rs]
            wins = [r["ours_faster_than_transformers"] for r in rs]
            same = [r["identical_to_transformers"] for r in rs] if t == 0 else []
            body.append(
                [
                    part,
                    workload,
                    temp(t),
                    drafter,
                    str(len(rs)),
                    f"{min(ratios):.2f}–{max(ratios):.2f}",
                    f"{sum(x < 1 for x in ratios)} of {len(rs)}",
                    f"{sum(w['faster'] for w in wins)} of {sum(w['pairs'] for w in wins)}",
                    share(same),
                ]
            )
    return markdown_table(header, body)
