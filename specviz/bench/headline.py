"""The tables of README.md and benchmarks/RESULTS.md, rendered from the saved bench results.

Each table sits in those files between `<!-- table: NAME -->` and `<!-- /table -->`, and is what
`render_table(NAME)` returns for the JSON files in benchmarks/results/: no figure is typed in by
hand. `python -m specviz.bench.headline` rewrites every marked table in place after a new run
(`--check` only reports the stale ones, exit status 1); tests/test_docs.py checks them.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from specviz.bench.batch_table import headline_table
from specviz.bench.head_table import heads_table
from specviz.bench.markdown import _setting, _spread, resummarized
from specviz.bench.runner import drafter_label
from specviz.bench.saved import RESULTS_DIR
from specviz.bench.sweeps.levers import headline_table as levers_headline
from specviz.bench.sweeps.levers import parts_row as levers_parts_row
from specviz.bench.sweeps.memory import render_memory, step_curves
from specviz.bench.table import markdown_table
from specviz.bench.tree_table import pivot_table
from specviz.endpoint.table import endpoint_table
from specviz.endpoint.table import parts_row as endpoint_parts_row
from specviz.gamma.theory import alpha_to_match, optimal_gamma, speedup_bound

ROOT = RESULTS_DIR.parents[1]
DOCUMENTS = (ROOT / "README.md", ROOT / "benchmarks" / "RESULTS.md")
MEMORY_REPORT = ROOT / "benchmarks" / "MEMORY.md"  # the memory study's page (its own tables)
# A marked table: the opening marker, whole lines that are not markers, the closing marker.
BLOCK = re.compile(
    r"(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>(?:(?!<!-- ).*\n)*?)(<!-- /table -->)"
)


@cache
def load(part: str) -> dict[str, Any]:
    """A saved result (benchmarks/results/PART.json) with its summary recomputed from records."""
    path = RESULTS_DIR / f"{part}.json"
    return resummarized(json.loads(path.read_text(encoding="utf-8")))


def _meta(part: str) -> dict[str, Any]:
    """A part's meta, with what its one draft recorded (draft_forward) beside it."""
    result = load(part)
    drafts = [d for d in result.get("drafts", {}).values()]
    extra = {k: v for k, v in drafts[0].items() if k != "batch_step_seconds"} if drafts else {}
    return {**result["meta"], **extra}


def _rows(part: str, workload: str | None = None, temperature: float | None = None) -> list[Any]:
    """The summary rows of one part, for one workload and temperature when given."""
    return [
        r
        for r in load(part)["summary"]
        if (workload is None or r["workload"] == workload)
        and (temperature is None or r["setting"]["temperature"] == temperature)
    ]


def _best(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The row with the highest median speedup."""
    return max(rows, key=lambda r: r["speedup"]["median"])


def _prompts(part: str, workload: str) -> str:
    """'prompts × repetitions' of one workload in one part."""
    records = [r for r in load(part)["records"] if r["category"] == workload]
    prompts = len({r["request_id"] for r in records})
    reps = len({r["repetition"] for r in records})
    return f"{prompts} × {reps}"


def _x(value: float) -> str:
    return f"{value:.2f}×"


def _t(value: float) -> str:
    return f"{value:g}"


def _alpha(value: float) -> str:
    """An α from theory.alpha_to_match: nan means no α below 1 reaches the goal."""
    return "out of reach" if math.isnan(value) else f"{value:.2f}"


def _bold_spread(s: dict[str, float]) -> str:
    """'**median×** (min–max)'."""
    return f"**{_x(s['median'])}** ({s['low']:.2f}–{s['high']:.2f})"


@dataclass(frozen=True)
class Pick:
    """One headline row: the fastest setting of a workload at a temperature, in its widest part."""

    workload: str
    temperature: float

    @property
    def part(self) -> str:
        """The part that times this workload at this temperature on the most prompts.

        Ties go to a part whose target runs on specviz.fast.lean's forward (plain and
        speculative decoding alike: the faster forward), then to more repetitions.
        """

        def width(part: str) -> tuple[int, bool, int]:
            records = [r for r in load(part)["records"] if r["category"] == self.workload]
            records = [r for r in records if r["setting"]["temperature"] == self.temperature]
            lean = "target_forward" in _meta(part)
            reps = len({r["repetition"] for r in records})
            return len({r["request_id"] for r in records}), lean, reps

        return max(parts_in_order(), key=width)

    def row(self) -> dict[str, Any]:
        """The part's fastest setting for this workload and temperature."""
        return _best(_rows(self.part, self.workload, self.temperature))


# The headline's workloads: code at T = 0 and 1, JSON and repeat/edit at T = 0, prose at T = 1.
WORKLOADS = (("code", 0.0), ("code", 1.0), ("json", 0.0), ("prose", 1.0), ("repeat", 0.0))
HEADLINE = tuple(Pick(w, t) for w, t in WORKLOADS)


def headline() -> list[str]:
    """Plain against speculative decoding per workload, at its best measured setting."""
    header = ["workload", "T", "prompts × runs", "best setting", "plain tok/s"]
    header += ["speculative tok/s", "speedup (min–max)", "α", "tokens a round", "part"]
    body = []
    for pick in HEADLINE:
        r = pick.row()
        body.append(
            [
                pick.workload,
                _t(pick.temperature),
                _prompts(pick.part, pick.workload),
                _setting(r["setting"]),
                f"{r['plain_tokens_per_second']['median']:.1f}",
                f"{r['tokens_per_second']['median']:.1f}",
                _bold_spread(r["speedup"]),
                f"{r['alpha']['median']:.2f}",
                f"{r['tokens_per_round']['median']:.2f}",
                pick.part,
            ]
        )
    return markdown_table(header, body)


def limits() -> list[str]:
    """The headline rows through the bound: α, c, r, the bound, and how close the loop gets."""
    header = ["workload", "T", "setting", "α", "α for 2× (r = 1)", "c", "r", "bound (r = 1)"]
    header += ["bound with r", "speedup", "efficiency", "decode efficiency", "loop efficiency"]
    body = []
    for pick in HEADLINE:
        r = pick.row()
        body.append(
            [
                pick.workload,
                _t(pick.temperature),
                _setting(r["setting"]),
                f"{r['alpha']['median']:.2f}",
                _alpha(alpha_to_match(2.0, r["cost_ratio"]["median"])),
                f"{r['cost_ratio']['median']:.3f}",
                f"{r['verify_ratio']['median']:.2f}",
                f"{r['bound']['median']:.2f}",
                f"{r['refined_bound']['median']:.2f}",
                _x(r["speedup"]["median"]),
                f"{r['efficiency']['median']:.2f}",
                f"{r['decode_efficiency']['median']:.2f}" if r.get("decode_efficiency") else "–",
                f"{r['loop_efficiency']['median']:.2f}",
            ]
        )
    return markdown_table(header, body)


def machine() -> list[str]:
    """The machines and software the saved parts ran on."""
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for part in parts_in_order():
        m = _meta(part)
        key = tuple(
            str(m.get(k, "–"))
            for k in (
                "cpu",
                "threads",
                "device",
                "dtype",
                "packed_weights",
                "torch",
                "transformers",
            )
        )
        groups[key].append(part)
    header = ["cpu", "threads", "device", "dtype", "packed weights", "torch", "transformers"]
    return markdown_table([*header, "parts"], [[*k, ", ".join(v)] for k, v in groups.items()])


def parts_in_order() -> list[str]:
    """The saved parts, in the order benchmarks/results/tables.md shows them."""
    tables = (RESULTS_DIR / "tables.md").read_text(encoding="utf-8")
    return re.findall(r"^## (\S+)$", tables, flags=re.M)


def parts() -> list[str]:
    """What each saved part ran: workloads, temperatures, drafters, gammas, repetitions."""
    header = ["part", "prompts × runs", "T", "drafters", "γ", "policies", "target forward"]
    body = []
    for part in parts_in_order():
        result = load(part)
        if result.get("batch_sweep") is not None and not result["summary"]:
            body.append(_batch_part(part, result["batch_sweep"]))
            continue
        if result.get("levers") is not None:
            body.append(levers_parts_row(part, result["levers"]))
            continue
        if result.get("endpoint") is not None:
            body.append(endpoint_parts_row(part, result["endpoint"]))
            continue
        settings = [r["setting"] for r in result["summary"]]
        workloads = dict.fromkeys(r["workload"] for r in result["summary"])
        forward = _meta(part).get("target_forward", "transformers")
        body.append(
            [
                part,
                ", ".join(f"{w} {_prompts(part, w)}" for w in workloads),
                ", ".join(_t(t) for t in sorted({s["temperature"] for s in settings})),
                ", ".join(dict.fromkeys(drafter_label(s) for s in settings)),
                ", ".join(str(g) for g in sorted({s["gamma"] for s in settings})),
                ", ".join(dict.fromkeys(s["policy"] for s in settings)),
                str(forward).split(" ")[0],
            ]
        )
    return markdown_table(header, body)


def _batch_part(part: str, sweep: dict[str, Any]) -> list[str]:
    """A batch sweep part's row of the parts table: N requests × repetitions at each B."""
    plan = sweep["plan"]
    reps = len({r["repetition"] for r in sweep["runs"]})
    workloads = ", ".join(dict.fromkeys(r["category"] for r in sweep["requests"]))
    sizes = ", ".join(map(str, plan["batch_sizes"]))
    return [
        part,
        f"{workloads} {plan['requests']} × {reps} (batches of {sizes})",
        ", ".join(_t(t) for t in sorted({r["temperature"] for r in sweep["runs"]})),
        ", ".join(plan["drafters"]),
        ", ".join(map(str, plan["gammas"])),
        "fixed",
        "transformers",
    ]


def _by_drafter(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each drafter's fastest fixed-γ row, in the order the drafters first appear."""
    best: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r["setting"]["policy"] != "fixed":
            continue
        label = drafter_label(r["setting"])
        if label not in best or r["speedup"]["median"] > best[label]["speedup"]["median"]:
            best[label] = r
    return best


def draft_size() -> list[str]:
    """Draft model against early exits, and the α each would need to match the trimmed draft."""
    best = _by_drafter(_rows("draft-size"))
    trimmed = best["model-trimmed"]
    a, c = trimmed["alpha"]["median"], trimmed["cost_ratio"]["median"]
    goal = speedup_bound(a, optimal_gamma(a, c), c)
    header = ["drafter", "best γ", "c", "α", f"α needed for {_x(goal)}", "r", "speedup"]
    header += ["loop efficiency"]
    body = []
    for label, r in best.items():
        needed = alpha_to_match(goal, r["cost_ratio"]["median"])
        body.append(
            [
                label,
                str(r["setting"]["gamma"]),
                f"{r['cost_ratio']['median']:.3f}",
                f"{r['alpha']['median']:.2f}",
                _alpha(needed),
                f"{r['verify_ratio']['median']:.2f}",
                _x(r["speedup"]["median"]),
                f"{r['loop_efficiency']['median']:.2f}",
            ]
        )
    return markdown_table(header, body)


GAMMA_PARTS = ("code", "lean-target")


def _curves(part: str) -> list[dict[str, Any]]:
    """The fixed-γ curves of one part."""
    return list(load(part)["gamma_curves"])


def gamma() -> list[str]:
    """Speedup at each fixed γ on the code part's prompts, on both target forwards."""
    gammas = sorted({g for p in GAMMA_PARTS for c in _curves(p) for g in c["gammas"]})
    header = ["part", "drafter", "T", "α", "c", *(f"γ={g}" for g in gammas), "best γ", "theory γ"]
    body = []
    for part in GAMMA_PARTS:
        for c in _curves(part):
            by = dict(zip(c["gammas"], c["measured_speedup"], strict=True))
            body.append(
                [
                    part,
                    drafter_label(c),
                    _t(c["temperature"]),
                    f"{c['alpha']:.2f}",
                    f"{c['cost_ratio']:.3f}",
                    *(f"{by[g]:.2f}" if g in by else "–" for g in gammas),
                    str(c["measured_best_gamma"]),
                    str(c["theory_best_gamma"]),
                ]
            )
    return markdown_table(header, body)


def verify_cost() -> list[str]:
    """r, a verification pass of γ + 1 tokens in plain steps, at each fixed γ (T = 0)."""
    rows = {
        p: [r for r in _rows(p, "code", 0.0) if r["setting"]["policy"] == "fixed"]
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


def temperature() -> list[str]:
    """Per temperature: the best fixed γ, theory's γ, α, the speedup and the bound."""
    result = load("temperature")
    header = ["T", "best γ", "theory γ", "α", "speedup (min–max)", "bound", "efficiency"]
    header += ["loop efficiency"]
    body = []
    for curve in result["gamma_curves"]:
        t = curve["temperature"]
        r = _best([r for r in _rows("temperature", curve["workload"], t)])
        body.append(
            [
                _t(t),
                str(curve["measured_best_gamma"]),
                str(curve["theory_best_gamma"]),
                f"{r['alpha']['median']:.2f}",
                _spread(r["speedup"]),
                f"{r['bound']['median']:.2f}",
                f"{r['efficiency']['median']:.2f}",
                f"{r['loop_efficiency']['median']:.2f}",
            ]
        )
    return markdown_table(header, body)


def _batch() -> list[tuple[int, float]]:
    result = load("batch")
    drafts = result.get("drafts", {"": result})  # results before per-draft meta: at the top
    (steps,) = (d["batch_step_seconds"] for d in drafts.values() if d.get("batch_step_seconds"))
    return [(int(b), float(t)) for b, t in steps]


def _fit(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares seconds = a + b rows."""
    xs, ys = [float(b) for b, _ in points], [t for _, t in points]
    b, a = statistics.linear_regression(xs, ys)
    return a, b


def batch() -> list[str]:
    """A plain decode step against the rows in the batch (the batch part)."""
    points = _batch()
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


def batch_fit() -> list[str]:
    """The least-squares line through the batch part's step times."""
    points = _batch()
    a, b = _fit(points)
    worst = max(abs(t - a - b * n) for n, t in points)
    header = ["fixed cost, ms", "cost per row, ms", "rows where the two are equal"]
    header += ["largest miss, ms"]
    return markdown_table(
        header, [[f"{a * 1e3:.1f}", f"{b * 1e3:.2f}", f"{a / b:.0f}", f"{worst * 1e3:.1f}"]]
    )


BATCH_SWEEP_PART = "batch-sweep"


def _not_measured(part: str, title: str) -> list[str]:
    """The one-line note a table shows until its part is saved."""
    command = f"bash benchmarks/cpu_bench.sh benchmarks/results {part}"
    return markdown_table(
        [title], [[f"not measured yet: {command} writes benchmarks/results/{part}.json"]]
    )


def _section_table(
    part: str, key: str, title: str, render: Callable[[dict[str, Any], float], list[str]]
) -> list[str]:
    """A sweep part's section rendered at its price (the note until the part is saved)."""
    saved = (RESULTS_DIR / f"{part}.json").exists()
    result = load(part) if saved else {}
    if result.get(key) is None:
        return _not_measured(part, title)
    return render(result[key], float(result["meta"]["price_per_hour"]))


def batch_sweep() -> list[str]:
    """The batch sweep part at each batch size, at its best γ (a note until the part is saved)."""
    return _section_table(
        BATCH_SWEEP_PART, "batch_sweep", "batch sweep", lambda s, _: headline_table(s)
    )


LEVERS_PART = "levers"


def levers() -> list[str]:
    """The levers part over all its workloads (a one-line note until the part is saved)."""
    return _section_table(LEVERS_PART, "levers", "levers", levers_headline)


ENDPOINT_PART = "endpoint"


def endpoint() -> list[str]:
    """The served-model part: lookup on against off at each concurrency (a note until saved)."""
    return _section_table(ENDPOINT_PART, "endpoint", "endpoint", endpoint_table)


MEMORY_PART = "memory"
MEMORY_FIGURE = "memory-steps.png"  # beside the saved results


def memory() -> list[str]:
    """Drafting from memory on the agent workloads, and its figure (a note until saved)."""
    lines = _section_table(
        MEMORY_PART, "memory", "drafting from memory", lambda s, _: render_memory(s).splitlines()
    )
    if (RESULTS_DIR / f"{MEMORY_PART}.json").exists():
        lines += ["", f"![Speedup against the step index](results/{MEMORY_FIGURE})"]
    return lines


def memory_figure() -> Path | None:
    """Plot the memory part's speedup against the step index (None until the part is saved)."""
    if not (RESULTS_DIR / f"{MEMORY_PART}.json").exists():
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for drafter, points in step_curves(load(MEMORY_PART)["memory"]).items():
        ax.plot([s for s, _ in points], [x for _, x in points], marker="o", label=drafter)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set(xlabel="step of the agent's task", ylabel="speedup over plain decoding")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = RESULTS_DIR / MEMORY_FIGURE
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


DRAFTER_PARTS = (("code-all", "code"), ("hybrid-cap", "json"), ("hybrid-cap", "repeat"))


def drafters() -> list[str]:
    """Lookup, the trimmed draft, and lookup first: each drafter's best γ per workload (T = 0)."""
    header = ["workload", "drafter", "best γ", "speedup (min–max)", "α", "tokens a round", "c"]
    header += ["part"]
    body = []
    for part, workload in DRAFTER_PARTS:
        for label, r in _by_drafter(_rows(part, workload, 0.0)).items():
            body.append(
                [
                    workload,
                    label,
                    str(r["setting"]["gamma"]),
                    _spread(r["speedup"]),
                    f"{r['alpha']['median']:.2f}",
                    f"{r['tokens_per_round']['median']:.2f}",
                    f"{r['cost_ratio']['median']:.3f}",
                    part,
                ]
            )
    return markdown_table(header, body)


def dynamic() -> list[str]:
    """Each dynamic γ policy's speedup over the best fixed γ's, timed / priced (dynamic part)."""
    curves: dict[tuple[str, str, float], dict[str, Any]] = defaultdict(dict)
    best: dict[tuple[str, str, float], str] = {}
    for d in load("dynamic")["policies_vs_best_fixed"]:
        key = (d["workload"], d["drafter"], d["temperature"])
        priced = d.get("priced_ratio")
        both = f"{d['ratio']:.2f} / {priced:.2f}" if priced is not None else f"{d['ratio']:.2f}"
        curves[key][d["policy"]] = both
        best[key] = f"{d['best_fixed_gamma']} ({d['best_fixed_speedup']:.2f})"
    policies = list(dict.fromkeys(p for c in curves.values() for p in c))
    header = ["workload", "drafter", "T", "best fixed γ (speedup)"]
    header += [f"{p}: timed / priced ratio" for p in policies]
    body = [
        [w, drafter, _t(t), best[w, drafter, t], *(c.get(p, "–") for p in policies)]
        for (w, drafter, t), c in curves.items()
    ]
    return markdown_table(header, body)


# Parts timed against transformers' generate() with the target on the same forward as ours
# (the lean-target part runs our target on specviz.fast.lean's forward: not a loop comparison).
HF_PARTS = ("code", "json-prose", "repeat", "lookup")


def transformers() -> list[str]:
    """Our time per token over transformers' generate() with the same drafter and settings."""
    header = ["part", "workload", "T", "drafter", "settings", "ours/HF time per token"]
    header += ["settings where ours is faster", "pairs where ours is faster", "same tokens"]
    body = []
    for part in HF_PARTS:
        groups: dict[tuple[str, float, str], list[dict[str, Any]]] = defaultdict(list)
        for r in _rows(part):
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
                    _t(t),
                    drafter,
                    str(len(rs)),
                    f"{min(ratios):.2f}–{max(ratios):.2f}",
                    f"{sum(x < 1 for x in ratios)} of {len(rs)}",
                    f"{sum(w['faster'] for w in wins)} of {sum(w['pairs'] for w in wins)}",
                    _share(same),
                ]
            )
    return markdown_table(header, body)


def _share(values: Sequence[float]) -> str:
    """A share of requests, or its range; – where it means nothing (T > 0)."""
    if not values:
        return "–"
    low, high = min(values), max(values)
    return f"{low:.0%}" if low == high else f"{low:.0%}–{high:.0%}"


TREE_PARTS = ("tree-sweep", "tree-sweep-t1")


def trees() -> list[str]:
    """The node-budget sweeps: tokens a pass, r(N) and the speedup at each N (tree parts)."""
    saved = [p for p in TREE_PARTS if (RESULTS_DIR / f"{p}.json").exists()]
    return pivot_table([load(p)["tree_sweep"] for p in saved])


TABLES: dict[str, Callable[[], list[str]]] = {
    "headline": headline,
    "limits": limits,
    "machine": machine,
    "parts": parts,
    "draft-size": draft_size,
    "gamma": gamma,
    "verify-cost": verify_cost,
    "temperature": temperature,
    "batch": batch,
    "batch-fit": batch_fit,
    "batch-sweep": batch_sweep,
    "levers": levers,
    "endpoint": endpoint,
    "memory": memory,
    "drafters": drafters,
    "dynamic": dynamic,
    "transformers": transformers,
    "trees": trees,
    "heads": lambda: heads_table(load),
}


def render_table(name: str) -> str:
    """The named table as Markdown, from the saved results (KeyError for an unknown name)."""
    return "\n".join(TABLES[name]())


def marked_tables(text: str) -> list[tuple[str, str]]:
    """(name, body) of every marked table in a document."""
    return [(m["name"], m["body"].removesuffix("\n")) for m in BLOCK.finditer(text)]


def refreshed(text: str) -> str:
    """The document with every marked table re-rendered."""
    return BLOCK.sub(lambda m: m[1] + render_table(m["name"]) + "\n" + m[4], text)


def main(argv: list[str] | None = None) -> int:
    """Re-render the marked tables of README.md and benchmarks/RESULTS.md (or the given files)."""
    parser = argparse.ArgumentParser(prog="python -m specviz.bench.headline", description=__doc__)
    parser.add_argument("files", nargs="*", type=Path, default=[*DOCUMENTS, MEMORY_REPORT])
    parser.add_argument("--check", action="store_true", help="report stale tables, change nothing")
    args = parser.parse_args(argv)
    stale = []
    for path in args.files:
        text = path.read_text(encoding="utf-8")
        new = refreshed(text)
        if new != text:
            stale.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for path in stale:
        print(f"{'stale' if args.check else 'rewrote'}: {path}")
    figure = None if args.check else memory_figure()
    if figure is not None:
        print(f"drew: {figure}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
