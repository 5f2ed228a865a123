"""The headline table, the limits it reaches, and the tables of machines and parts.

The *headline* is, per workload and temperature, the fastest setting measured, taken from the
part that timed that workload on the most prompts (see Pick). The tables read the saved parts
through a Saved (tools.report.saved).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from specviz.endpoint.table import parts_row as endpoint_parts_row
from specviz.gamma.theory import alpha_to_match
from specviz.results.setting import drafter_label, setting_label
from specviz.results.table import markdown_table
from tools.report.saved import Saved
from tools.report.text import alpha_text, best, bold_spread, temp, times


@dataclass(frozen=True)
class Pick:
    """One headline row: the fastest setting of a workload at a temperature, in its widest part."""

    workload: str
    temperature: float

    def part(self, saved: Saved) -> str:
        """The saved part that times this workload at this temperature on the most prompts.

        Ties go to a part whose target runs on specviz.fast.lean's forward (plain and
        speculative decoding alike: the faster forward), then to one that sent its prompts
        through the chat template (what `specviz generate` and the app send by default), then
        to more repetitions.
        """

        def width(part: str) -> tuple[int, bool, bool, int]:
            records = [r for r in saved.load(part)["records"] if r["category"] == self.workload]
            records = [r for r in records if r["setting"]["temperature"] == self.temperature]
            meta = saved.meta(part)
            lean, chat = "target_forward" in meta, meta.get("prompt_format") == "chat"
            reps = len({r["repetition"] for r in records})
            return len({r["request_id"] for r in records}), lean, chat, reps

        return max(saved.parts_in_order(), key=width)

    def row(self, saved: Saved) -> dict[str, Any]:
        """The part's fastest setting for this workload and temperature (a summary row)."""
        return best(saved.rows(self.part(saved), self.workload, self.temperature))


# The headline's workloads: code at T = 0 and 1, JSON and repeat/edit at T = 0, prose at T = 1.
WORKLOADS = (("code", 0.0), ("code", 1.0), ("json", 0.0), ("prose", 1.0), ("repeat", 0.0))
HEADLINE = tuple(Pick(w, t) for w, t in WORKLOADS)


def headline(saved: Saved) -> list[str]:
    """Plain against speculative decoding per workload, at its best measured setting."""
    header = ["workload", "T", "prompts × runs", "best setting", "plain tok/s"]
    header += ["speculative tok/s", "speedup (min–max)", "α", "tokens a round", "part"]
    body = []
    for pick in HEADLINE:
        r, part = pick.row(saved), pick.part(saved)
        body.append(
            [
                pick.workload,
                temp(pick.temperature),
                saved.prompts(part, pick.workload),
                setting_label(r["setting"]),
                f"{r['plain_tokens_per_second']['median']:.1f}",
                f"{r['tokens_per_second']['median']:.1f}",
                bold_spread(r["speedup"]),
                f"{r['alpha']['median']:.2f}",
                f"{r['tokens_per_round']['median']:.2f}",
                part,
            ]
        )
    return markdown_table(header, body)


def limits(saved: Saved) -> list[str]:
    """The headline rows through the bound: α, c, r, the bound, and how close the loop gets."""
    header = ["workload", "T", "setting", "α", "α for 2× (r = 1)", "c", "r", "bound (r = 1)"]
    header += ["bound with r", "speedup", "efficiency", "decode efficiency", "loop efficiency"]
    body = []
    for pick in HEADLINE:
        r = pick.row(saved)
        body.append(
            [
                pick.workload,
                temp(pick.temperature),
                setting_label(r["setting"]),
                f"{r['alpha']['median']:.2f}",
                alpha_text(alpha_to_match(2.0, r["cost_ratio"]["median"])),
                f"{r['cost_ratio']['median']:.3f}",
                f"{r['verify_ratio']['median']:.2f}",
                f"{r['bound']['median']:.2f}",
                f"{r['refined_bound']['median']:.2f}",
                times(r["speedup"]["median"]),
                f"{r['efficiency']['median']:.2f}",
                f"{r['decode_efficiency']['median']:.2f}" if r.get("decode_efficiency") else "–",
                f"{r['loop_efficiency']['median']:.2f}",
            ]
        )
    return markdown_table(header, body)


MACHINE_KEYS = ("cpu", "threads", "device", "dtype", "packed_weights", "torch", "transformers")


def machine(saved: Saved) -> list[str]:
    """The machines and software the saved parts ran on."""
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for part in saved.parts_in_order():
        m = saved.meta(part)
        groups[tuple(str(m.get(k, "–")) for k in MACHINE_KEYS)].append(part)
    header = ["cpu", "threads", "device", "dtype", "packed weights", "torch", "transformers"]
    return markdown_table([*header, "parts"], [[*k, ", ".join(v)] for k, v in groups.items()])


def parts(saved: Saved) -> list[str]:
    """What each saved part ran: workloads, temperatures, drafters, gammas, repetitions."""
    header = ["part", "prompts × runs", "T", "drafters", "γ", "policies", "target forward"]
    body = []
    for part in saved.parts_in_order():
        result = saved.load(part)
        if result.get("batch_sweep") is not None and not result["summary"]:
            body.append(batch_part(part, result["batch_sweep"]))
            continue
        if result.get("levers") is not None:
            body.append(levers_part(part, result["levers"]))
            continue
        if result.get("endpoint") is not None:
            body.append(endpoint_parts_row(part, result["endpoint"]))
            continue
        body.append(_summary_part(saved, part))
    return markdown_table(header, body)


def _summary_part(saved: Saved, part: str) -> list[str]:
    """A part's row of the parts table, from its summary rows."""
    result = saved.load(part)
    settings = [r["setting"] for r in result["summary"]]
    workloads = dict.fromkeys(r["workload"] for r in result["summary"])
    forward = saved.meta(part).get("target_forward", "transformers")
    return [
        part,
        ", ".join(f"{w} {saved.prompts(part, w)}" for w in workloads),
        ", ".join(temp(t) for t in sorted({s["temperature"] for s in settings})),
        ", ".join(dict.fromkeys(drafter_label(s) for s in settings)),
        ", ".join(str(g) for g in sorted({s["gamma"] for s in settings})),
        ", ".join(dict.fromkeys(s["policy"] for s in settings)),
        str(forward).split(" ")[0],
    ]


def batch_part(part: str, sweep: dict[str, Any]) -> list[str]:
    """A batch sweep part's row of the parts table: N requests × repetitions at each B."""
    plan = sweep["plan"]
    reps = len({r["repetition"] for r in sweep["runs"]})
    workloads = ", ".join(dict.fromkeys(r["category"] for r in sweep["requests"]))
    sizes = ", ".join(map(str, plan["batch_sizes"]))
    return [
        part,
        f"{workloads} {plan['requests']} × {reps} (batches of {sizes})",
        ", ".join(temp(t) for t in sorted({r["temperature"] for r in sweep["runs"]})),
        ", ".join(plan["drafters"]),
        ", ".join(map(str, plan["gammas"])),
        "fixed",
        "transformers",
    ]


def levers_part(part: str, section: dict[str, Any]) -> list[str]:
    """A levers part's row of the report's parts table."""
    plan = section["plan"]
    runs = section["runs"]
    reps = len({r["rep"] for r in runs})
    counts: dict[str, set[str]] = {}
    for d in section["distances"]:
        counts.setdefault(d["category"], set()).add(d["request"])
    prompts = ", ".join(f"{c} {len(ids)} × {reps}" for c, ids in counts.items())
    return [
        part,
        f"{prompts} ({len(plan['levers'])} levers)",
        ", ".join(f"{t:g}" for t in sorted({float(r["temperature"]) for r in runs})),
        plan["drafter"],
        str(plan["gamma"]),
        "fixed",
        "transformers",
    ]
