"""The EAGLE-3 head's held-out learning curve: its table and figure (α against positions trained).

The curve is data/heads/eagle3-curve.jsonl, a copy of the training run's curve.jsonl
(specviz.train.curve reads it and states the stop rule); the figure goes beside the saved bench
results as CURVE_FIGURE.
"""

from __future__ import annotations

from pathlib import Path

from specviz.results.table import markdown_table
from specviz.train.curve import DEPTHS, comparable, per_doubling, plateau, read_curve
from tools.report.saved import ROOT, Saved

CURVE = ROOT / "data" / "heads" / "eagle3-curve.jsonl"
CURVE_FIGURE = "eagle3-curve.png"  # beside the saved results


def heads_curve(saved: Saved, path: Path = CURVE) -> list[str]:
    """Every held-out evaluation, the stop rule's reading, and the figure's link."""
    if not path.is_file():
        return markdown_table(["held-out curve"], [[f"not there yet: {path.name}"]])
    rows = read_curve(path)
    head = ["step", "positions trained", "hours", "loss", "held-out positions"]
    head += [f"α{d}" for d in "₁₂₃₄₅"[:DEPTHS]]
    table = markdown_table(head, [
        [str(r["step"]), f"{r['positions']:,}", f"{r['hours']:.2f}", str(r.get("loss", "—")),
         f"{r['eval_positions']:,}", *(f"{r[f'alpha_{d}']:.3f}" for d in range(1, DEPTHS + 1))]
        for r in rows
    ])  # fmt: skip
    verdict = plateau(rows)
    if verdict is None:
        rule = "fewer than three comparable evaluations an hour apart yet"
    else:
        points = ", ".join(f"{r['hours']:.2f} h: {r['alpha_1']:.3f}" for r in verdict.rows)
        state = "flat: the stop rule is met" if verdict.flat else "still rising"
        rule = f"α₁ over three evaluations an hour apart ({points}): {verdict.gain:+.3f}, {state}"
    slope = per_doubling(rows)
    trend = (
        "fewer than three comparable evaluations over the last doubling of positions"
        if slope is None
        else f"{slope:+.3f} of α₁ per doubling of positions, over the last doubling"
    )
    return [*table, "", f"Stop rule (gain under 0.01): {rule}.", "", f"Trend: {trend}.", "",
            f"![Held-out α against positions trained](results/{CURVE_FIGURE})"]  # fmt: skip


def curve_figure(saved: Saved, path: Path = CURVE) -> Path | None:
    """Plot α₁…α₅ against positions trained (log scale), the rows of the newest held-out set
    joined and the older ones hollow, into the results folder (None without a curve)."""
    if not path.is_file():
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_curve(path)
    newest = comparable(rows)
    older = [r for r in rows if r not in newest]
    fig, ax = plt.subplots(figsize=(7, 4))
    for d in range(1, DEPTHS + 1):
        key = f"alpha_{d}"
        line = ax.plot([r["positions"] for r in newest], [r[key] for r in newest], marker="o",
                       label=f"α{d}")  # fmt: skip
        ax.plot([r["positions"] for r in older], [r[key] for r in older], marker="o",
                linestyle="none", fillstyle="none", color=line[0].get_color())  # fmt: skip
    ax.set_xscale("log")
    ax.set(xlabel="positions trained", ylabel="held-out α (T = 1)")
    ax.legend(fontsize=7, title="draft depth", title_fontsize=7)
    fig.tight_layout()
    out = saved.folder / CURVE_FIGURE
    fig.savefig(out, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return out
