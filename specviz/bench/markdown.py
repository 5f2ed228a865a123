"""Render saved `specviz bench` JSON results as Markdown tables (for benchmarks/RESULTS.md).

`python -m specviz.bench.markdown run1.json [run2.json ...] > benchmarks/RESULTS.md`
Every number comes from the JSON files; nothing is typed in by hand.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specviz.bench.batch_rows import rebatch
from specviz.bench.runner import Record, drafter_label
from specviz.bench.schema import batch_steps, flat_meta, migrate, read_result
from specviz.bench.setting import is_tree
from specviz.bench.summary import gamma_curves, policies_vs_best_fixed, summarize
from specviz.bench.sweeps import RENDER_ORDER, by_key
from specviz.bench.table import markdown_table
from specviz.bench.tree_table import resweep


def _spread(s: dict[str, float], fmt: str = ".2f") -> str:
    """'median (min–max)'."""
    return f"{s['median']:{fmt}} ({s['low']:{fmt}}–{s['high']:{fmt}})"


def _median(s: dict[str, float] | None) -> str:
    """A spread's median, '–' where there is none (the chain bounds of a tree row)."""
    return "–" if s is None else f"{s['median']:.2f}"


def _setting(s: dict[str, Any]) -> str:
    """Drafter, policy and gamma in a few words (a tree's depth D for its gamma)."""
    drafter = drafter_label(s)
    if is_tree(s):
        return f"{drafter} D={s['gamma']}"
    policy = "" if s["policy"] == "fixed" else f" {s['policy']} from"
    return f"{drafter}{policy} γ={s['gamma']}"


def summary_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per (workload, setting): speedup, theory, acceptance, cost ratio, transformers."""
    header = [
        "workload",
        "T",
        "setting",
        "n",
        "speedup",
        "bound",
        "efficiency",
        "decode speedup",
        "decode efficiency",
        "α",
        "c",
        "r",
        "bound with r",
        "loop efficiency",
        "tokens/round",
        "target calls/token",
        "ours/HF time per token",
        "ours faster than HF (pairs; sign test p)",
        "same tokens as HF",
    ]
    body = []
    for r in rows:
        hf = r["ours_over_transformers_time_per_token"]
        same = r["identical_to_transformers"]
        wins = r["ours_faster_than_transformers"]
        body.append(
            [
                r["workload"],
                f"{r['setting']['temperature']:g}",
                _setting(r["setting"]),
                str(r["requests"]),
                _spread(r["speedup"]),
                _median(r["bound"]),
                _spread(r["efficiency"]) if r["efficiency"] else "–",
                _spread(r["decode_speedup"]) if r["decode_speedup"] else "–",
                _spread(r["decode_efficiency"]) if r["decode_efficiency"] else "–",
                _spread(r["alpha"]),
                f"{r['cost_ratio']['median']:.3f}",
                f"{r['verify_ratio']['median']:.2f}",
                _median(r["refined_bound"]),
                _median(r["loop_efficiency"]),
                f"{r['tokens_per_round']['median']:.2f}",
                f"{r['target_calls_per_token']['median']:.2f}",
                _spread(hf) if hf else "–",
                f"{wins['faster']}/{wins['pairs']} ({wins['p_value']:.2g})" if wins else "–",
                f"{same:.0%}" if same is not None else "–",
            ]
        )
    return markdown_table(header, body)


def latency_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Per request: end-to-end seconds and tokens/s of each run, accepted length with and
    without the bonus (– where transformers did not run)."""
    header = ["workload", "T", "setting", "tokens", "plain s", "speculative s", "transformers s"]
    header += ["plain tok/s", "speculative tok/s", "transformers tok/s"]
    header += ["accepted drafts/round", "tokens/round (with bonus or resample)"]
    body = [
        [
            r["workload"],
            f"{r['setting']['temperature']:g}",
            _setting(r["setting"]),
            f"{r['tokens']['median']:.0f}",
            *(_spread(r[k]) if r[k] else "–" for k in ("plain_latency", "latency", "hf_latency")),
            *(
                _spread(r[k], ".1f") if r[k] else "–"
                for k in ("plain_tokens_per_second", "tokens_per_second", "hf_tokens_per_second")
            ),
            f"{r['accepted_per_round']['median']:.2f}",
            f"{r['tokens_per_round']['median']:.2f}",
        ]
        for r in rows
    ]
    return markdown_table(header, body)


def curves_table(curves: Sequence[dict[str, Any]]) -> list[str]:
    """Measured best gamma against the gamma theory predicts from the measured α and c."""
    header = ["workload", "drafter", "T", "α", "c", "γ: measured speedup", "best γ", "theory γ"]
    body = [
        [
            c["workload"],
            drafter_label(c),
            f"{c['temperature']:g}",
            f"{c['alpha']:.2f}",
            f"{c['cost_ratio']:.3f}",
            ", ".join(
                f"{g}: {m:.2f}" for g, m in zip(c["gammas"], c["measured_speedup"], strict=True)
            ),
            str(c["measured_best_gamma"]),
            str(c["theory_best_gamma"]),
        ]
        for c in curves
    ]
    return markdown_table(header, body)


def policies_table(dynamic: Sequence[dict[str, Any]]) -> list[str]:
    """Each dynamic gamma policy against the best fixed gamma of the same workload and drafter."""
    header = ["workload", "drafter", "T", "policy", "speedup", "best fixed γ (speedup)", "ratio"]
    header += ["priced speedup", "best fixed γ priced", "priced ratio"]
    body = [
        [
            d["workload"],
            d["drafter"],
            f"{d['temperature']:g}",
            f"{d['policy']} from γ={d['start_gamma']}",
            f"{d['speedup']:.2f}",
            f"{d['best_fixed_gamma']} ({d['best_fixed_speedup']:.2f})",
            f"{d['ratio']:.2f}",
            *(
                [
                    f"{d['priced_speedup']:.2f}",
                    f"{d['best_fixed_priced_gamma']} ({d['best_fixed_priced_speedup']:.2f})",
                    f"{d['priced_ratio']:.2f}",
                ]
                if d["priced_ratio"] is not None
                else ["–"] * 3
            ),
        ]
        for d in dynamic
    ]
    return markdown_table(header, body)


def cost_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Device cost per 1k generated tokens, plain against speculative."""
    header = ["workload", "T", "setting", "price/h", "plain $/1k tok", "speculative $/1k tok"]
    body = [
        [
            r["workload"],
            f"{r['setting']['temperature']:g}",
            _setting(r["setting"]),
            f"{r['cost_per_1k_tokens']['price_per_hour']:.2f}",
            f"{r['cost_per_1k_tokens']['plain']:.5f}",
            f"{r['cost_per_1k_tokens']['speculative']:.5f}",
        ]
        for r in rows
    ]
    return markdown_table(header, body)


def resummarized(result: dict[str, Any]) -> dict[str, Any]:
    """The result (any schema version) migrated, with its summary, curves and policy table
    recomputed from the raw records."""
    result = migrate(result)
    records = [Record.from_dict(r) for r in result["records"]]
    rows = summarize(records, result["meta"]["price_per_hour"])
    sweep, batch = result["tree_sweep"], result.get("batch_sweep")
    price = float(result["meta"]["price_per_hour"])
    rebatched = {} if batch is None else {"batch_sweep": rebatch(batch, price)}
    return result | {
        "summary": rows,
        "gamma_curves": gamma_curves(rows),
        "policies_vs_best_fixed": policies_vs_best_fixed(rows),
        "tree_sweep": None if sweep is None else resweep(sweep, records),
        **rebatched,
    }


def render(result: dict[str, Any], title: str) -> str:
    """One run (of the current schema: resummarized or schema.migrate) as a Markdown section."""
    meta = flat_meta(result)
    command = re.sub(r"^\S*(__main__\.py|specviz)\s", "specviz ", meta["command"])
    out = [f"## {title}", "", f"```bash\n{command}\n```", ""]
    out += [
        ", ".join(
            f"{k}: {meta[k]}"
            for k in (
                "cpu",
                "machine",
                "threads",
                "device",
                "gpu",
                "cuda",
                "dtype",
                "packed_weights",
                "draft_forward",
                "target_forward",
                "torch",
                "transformers",
            )
            if k in meta
        )
        + (
            f", prompts: {meta['prompt_format']}"
            if meta.get("prompt_format", "raw") != "raw"
            else ""
        )
        + (f", tuned profile: {Path(meta['profile']['path']).name}" if meta.get("profile") else ""),
        "",
    ]
    if result["summary"]:  # a batch sweep alone has no per-request records
        out += [*summary_table(result["summary"]), ""]
        out += [
            "Latency and throughput per request (medians with min–max; at T > 0 the plain "
            "run's seconds are scaled to the speculative run's length):",
            "",
        ]
        out += [*latency_table(result["summary"]), ""]
    if result["gamma_curves"]:
        out += ["Speedup against γ, and the γ theory picks for the measured α and c:", ""]
        out += [*curves_table(result["gamma_curves"]), ""]
    if result["policies_vs_best_fixed"]:
        out += [
            "Dynamic γ against the best fixed γ (ratio of median speedups; priced: every run's "
            "work at the sweep's median costs, free of timing noise):",
            "",
        ]
        out += [*policies_table(result["policies_vs_best_fixed"]), ""]
    studies = by_key()
    for key in RENDER_ORDER:  # each study's own section, where the run saved one
        if result.get(key) is not None:
            out += [studies[key].render(result[key], float(result["meta"]["price_per_hour"])), ""]
    if result["summary"]:
        out += ["Cost per 1k generated tokens:", "", *cost_table(result["summary"]), ""]
    for name, batch in batch_steps(result).items():
        if not batch:
            continue
        base = batch[0][1]
        loaded = f", loaded with draft {name}" if len(result["drafts"]) > 1 else ""
        out += [f"Plain decode step time against batch size (one new token per row{loaded}):", ""]
        out += markdown_table(
            ["batch", "ms per step", "ms per row", "step time / batch-1 step"],
            [[str(b), f"{t * 1e3:.1f}", f"{t * 1e3 / b:.1f}", f"{t / base:.2f}"] for b, t in batch],
        )
        out += [""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Print every given JSON result as a Markdown section."""
    paths = argv if argv is not None else sys.argv[1:]
    if not paths:
        print("usage: python -m specviz.bench.markdown RESULT.json [...]", file=sys.stderr)
        return 2
    for path in paths:
        try:
            result = resummarized(read_result(path))
        except ValueError as err:
            print(f"specviz: {err}", file=sys.stderr)
            return 2
        print(render(result, Path(path).stem))
    return 0


if __name__ == "__main__":
    sys.exit(main())
