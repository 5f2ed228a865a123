"""The EAGLE-3 head's held-out learning curve: its table and figure (α against positions trained).

The curve is data/heads/eagle3-curve.jsonl, a copy of the training run's curve.jsonl
(specviz.train.data.curve reads it and states the stop rule); the figure goes beside the saved bench
results as CURVE_FIGURE.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from specviz.results.table import markdown_table
from specviz.train.data.curve import DEPTHS, comparable, per_doubling, plateau, read_curve
from tools.report.saved import ROOT, Saved

CURVE = ROOT / "data" / "heads" / "eagle3-curve.jsonl"
CURVE_FIGURE = "eagle3-curve.png"  # beside the saved results


FIRST_VOCAB = 16_384  # the draft vocabulary of the rows written before rows named theirs


def _rows_table(rows: list[dict[str, Any]]) -> list[str]:
    """The rows as a table: step, positions, hours, loss, draft vocabulary, held-out positions,
    α₁…α₅."""
    head = ["step", "positions trained", "hours", "loss", "draft vocabulary", "held-out positions"]
    head += [f"α{d}" for d in "₁₂₃₄₅"[:DEPTHS]]
    return markdown_table(
        head,
        [
            [
                str(r["step"]),
                f"{r['positions']:,}",
                f"{r['hours']:.2f}",
                str(r.get("loss", "—")),
                f"{r.get('vocab', FIRST_VOCAB):,}",
                f"{r['eval_positions']:,}",
                *(f"{r[f'alpha_{d}']:.3f}" for d in range(1, DEPTHS + 1)),
            ]
            for r in rows
        ],
    )


def heads_curve(saved: Saved, path: Path = CURVE) -> list[str]:
    """The evaluations on the newest held-out set, the stop rule's reading and the trend on
    them, the figure's link, then the rows read on older sets."""
    if not path.is_file():
        return markdown_table(["held-out curve"], [[f"not there yet: {path.name}"]])
    rows = read_curve(path)
    newest = comparable(rows)
    verdict = plateau(rows)
    if verdict is None:
        rule = "fewer than three comparable evaluations an hour apart yet"
    else:
        points = ", ".join(f"{r['hours']:.2f} h: {r['alpha_1']:.3f}" for r in verdict.rows)
        state = "flat: the stop rule is met" if verdict.flat else "still rising"
        rule = f"α₁ over three evaluations an hour apart ({points}): {verdict.gain:+.4f}, {state}"
    slope = per_doubling(rows)
    trend = (
        "fewer than three comparable evaluations over the last doubling of positions"
        if slope is None
        else f"{slope:+.3f} of α₁ per doubling of positions, over the last doubling"
    )
    figure = f"![Held-out α against positions trained](results/{CURVE_FIGURE})"
    out = [
        *_rows_table(newest),
        "",
        f"Stop rule (gain under 0.01): {rule}.",
        "",
        f"Trend: {trend}.",
        "",
        figure,
    ]
    older = [r for r in rows if r not in newest]
    if older:
        out += [
            "",
            f"Rows read on earlier held-out sets ({len(older)}; they compare only with "
            "rows of the same held-out positions):",
            "",
            *_rows_table(older),
        ]
    return out


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
        line = ax.plot(
            [r["positions"] for r in newest], [r[key] for r in newest], marker="o", label=f"α{d}"
        )
        ax.plot(
            [r["positions"] for r in older],
            [r[key] for r in older],
            marker="o",
            linestyle="none",
            fillstyle="none",
            color=line[0].get_color(),
        )
    ax.set_xscale("log")
    ax.set(xlabel="positions trained", ylabel="held-out α (T = 1)")
    ax.legend(fontsize=7, title="draft depth", title_fontsize=7)
    fig.tight_layout()
    out = saved.folder / CURVE_FIGURE
    fig.savefig(out, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return out


REPLAY = ROOT / "data" / "heads" / "replay"  # on-curve.jsonl, off-curve.jsonl, collected.json


def heads_replay(saved: Saved, folder: Path = REPLAY) -> list[str]:
    """On-policy replay against its control: both arms' held-out α at the last step they share,
    and the gain (python -m specviz.train heads replay, --every 2 and --every 0)."""
    paths = [folder / "on-curve.jsonl", folder / "off-curve.jsonl", folder / "collected.json"]
    if not all(p.is_file() for p in paths):
        return markdown_table(["on-policy replay"], [[f"not there yet: {folder.name}/"]])
    on, off = read_curve(paths[0]), read_curve(paths[1])
    collected = json.loads(paths[2].read_text(encoding="utf-8"))
    shared = sorted({r["step"] for r in on} & {r["step"] for r in off})
    if not shared:
        return markdown_table(["on-policy replay"], [["the arms share no evaluated step yet"]])
    step = shared[-1]
    rows = {
        name: next(r for r in arm if r["step"] == step)
        for name, arm in (("replay", on), ("control", off))
    }
    head = ["arm", "batches replayed", "steps past the start", "held-out positions"]
    head += [f"α{d}" for d in "₁₂₃₄₅"[:DEPTHS]]
    every = {"replay": f"1 batch in {collected['every']}", "control": "none"}
    body = [
        [
            name,
            every[name],
            str(step - collected["start"]),
            f"{r['eval_positions']:,}",
            *(f"{r[f'alpha_{d}']:.4f}" for d in range(1, DEPTHS + 1)),
        ]
        for name, r in rows.items()
    ]
    gains = ", ".join(
        f"{rows['replay'][f'alpha_{d}'] - rows['control'][f'alpha_{d}']:+.4f}"
        for d in range(1, DEPTHS + 1)
    )
    note = (
        f"From step {collected['start']}: {collected['rejected']:,} rejected positions "
        f"collected from {collected['shards']} training shards in "
        f"{collected['seconds']:.0f} s. Gain of replay over the control at step {step}, "
        f"α₁…α₅: {gains}."
    )
    return [*markdown_table(head, body), "", note]


VOCAB = ROOT / "data" / "heads" / "vocab.json"  # heads vocab: coverage and cost per size
VOCAB_CUT = ROOT / "data" / "heads" / "vocab-cut.jsonl"  # one snapshot scored at each size


def heads_vocab(saved: Saved, path: Path = VOCAB, cut: Path = VOCAB_CUT) -> list[str]:
    """Per draft vocabulary size: its coverage of the target's answers (training and held-out
    shards), a head step's cost (heads vocab), and the held-out α of one snapshot cut to that
    size (heads export eagle3 --vocab, then heads score; "—" where not scored)."""
    if not path.is_file():
        return markdown_table(["draft vocabulary"], [[f"not there yet: {path.name}"]])
    sizes = json.loads(path.read_text(encoding="utf-8"))["rows"]
    scored = {int(r["vocab"]): r for r in read_curve(cut)} if cut.is_file() else {}
    if len({(r["step"], r["eval_positions"]) for r in scored.values()}) > 1:
        raise ValueError(f"{cut}: the rows must score one snapshot on one held-out set")
    top = scored[max(scored)]["alpha_1"] if scored else 0.0
    head = ["draft vocabulary", "coverage", "held-out coverage", "ms a head step"]
    head += [f"α{d}" for d in "₁₂₃₄₅"[:DEPTHS]] + ["α₁ change"]
    body = []
    for row in sizes:
        r = scored.get(int(row["size"]))
        alphas = [f"{r[f'alpha_{d}']:.4f}" for d in range(1, DEPTHS + 1)] if r else ["—"] * DEPTHS
        change = f"{r['alpha_1'] - top:+.4f}" if r else "—"
        body.append(
            [
                f"{row['size']:,}",
                f"{row['coverage']:.2%}",
                f"{row.get('held_out_coverage', float('nan')):.2%}",
                f"{row['head_ms_per_step']:.3f}",
                *alphas,
                change,
            ]
        )
    step = next(iter(scored.values()), {}).get("step")
    note = f"α: the step-{step} snapshot on the held-out set's answer positions." if step else ""
    return [*markdown_table(head, body), *(["", note] if note else [])]


GPU_RUN = ROOT / "data" / "heads" / "gpu"  # heads all on a GPU: summary, curve, scored


def heads_gpu(saved: Saved, folder: Path = GPU_RUN) -> list[str]:
    """The whole pipeline on one GPU (heads all --device cuda): its held-out curve, then its head
    and the shipped one (the CPU run's) scored again on one held-out set (heads score)."""
    paths = [folder / "summary.json", folder / "curve.jsonl", folder / "scored.json"]
    paths.append(folder / "decode.json")
    if not all(p.is_file() for p in paths):
        return markdown_table(["GPU run"], [[f"not there yet: {folder.name}/"]])
    summary = json.loads(paths[0].read_text(encoding="utf-8"))
    scored = json.loads(paths[2].read_text(encoding="utf-8"))
    head = ["head", "step", "positions trained", "minutes trained", "held-out positions"]
    head += [f"α{d}" for d in "₁₂₃₄₅"[:DEPTHS]]
    rows = [(f"GPU run, step {r['step']}", r) for r in read_curve(paths[1])]
    rows += [(f"**{name}**, scored again", r) for name, r in scored["rows"].items()]
    body = [
        [
            name,
            str(r["step"]),
            f"{r['positions']:,}",
            f"{r['hours'] * 60:,.1f}",
            f"{r['eval_positions']:,}",
            *(f"{r[f'alpha_{d}']:.4f}" for d in range(1, DEPTHS + 1)),
        ]
        for name, r in rows
    ]
    data, training = summary["data"], summary["training"]
    note = (
        f"`{scored['pipeline']}` on {scored['machine']}: {data['shards']} shards rescored "
        f"({data['positions']:,} positions) in {data['seconds']:.0f} s, "
        f"{training['step']:,} steps in {training['elapsed']:.0f} s, "
        f"{summary['seconds']:.0f} s in all. Scored again on the CPU: `{scored['command']}`."
    )
    decode = json.loads(paths[3].read_text(encoding="utf-8"))
    return [*markdown_table(head, body), "", note, "", *_decode_table(decode)]


def _decode_table(decode: dict[str, Any]) -> list[str]:
    """Both heads drafting the same requests: tokens a round per drafter and temperature, the
    requests where the GPU run's head made more or fewer, and the mean paired difference."""
    cells: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for row in decode["rows"]:
        cells.setdefault((row["drafter"], row["temperature"]), []).append(row)
    body = []
    for (drafter, temperature), rows in sorted(cells.items()):
        shipped, gpu = (_per_round([r[k] for r in rows]) for k in ("shipped", "gpu"))
        wins, losses = _wins(rows)
        counts = [str(len(rows)), f"{shipped:.3f}", f"{gpu:.3f}", str(wins), str(losses)]
        body.append([drafter, f"{temperature:g}", *counts])
    head = ["drafter", "T", "requests", "tokens a round, shipped", "GPU run's", "more", "fewer"]
    diffs = [_rate(r["gpu"]) - _rate(r["shipped"]) for r in decode["rows"]]
    mean = statistics.mean(diffs)
    error = statistics.stdev(diffs) / len(diffs) ** 0.5
    note = (
        f"Tokens a round, the GPU run's head minus the shipped one, request by request: "
        f"{mean:+.3f} ± {error:.3f} (mean ± standard error, {len(diffs)} requests). "
        f"`{decode['command']}`, HEADS each head's folder."
    )
    return [*markdown_table(head, body), "", note]


def _rate(run: dict[str, Any]) -> float:
    """A request's tokens a round."""
    return float(run["tokens"]) / float(run["rounds"])


def _per_round(runs: list[dict[str, Any]]) -> float:
    """Tokens a round over the runs together."""
    return sum(int(r["tokens"]) for r in runs) / sum(int(r["rounds"]) for r in runs)


def _wins(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """Requests where the GPU run's head made more tokens a round, and fewer."""
    diffs = [_rate(r["gpu"]) - _rate(r["shipped"]) for r in rows]
    return sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
