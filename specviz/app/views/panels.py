"""HTML panels: status line, summary table and the plain-vs-speculative race."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

SUMMARY_LABELS = {
    "new_tokens": "new tokens",
    "rounds": "rounds",
    "alpha": "acceptance rate α (accepted / proposed drafts)",
    "mean_accepted_per_round_without_bonus": "mean accepted drafts per round (without bonus)",
    "mean_tokens_per_round_with_bonus": "mean tokens per round (with the resampled/bonus token)",
    "expected_tokens_per_round": "tokens per round, i.i.d. estimate for α, γ (with bonus)",
    "kept_rates_tokens_per_round": "tokens per round, estimate from per-position keep rates",
    "mean_nodes_per_round": "tree: mean nodes proposed per round (α counts nodes)",
    "target_calls_per_token": "target calls per token",
    "tokens_per_second": "tokens / s (speculative; live drawing included, the race excludes it)",
    "cost_ratio_c": "cost ratio c (draft call / target call)",
    "iid_speedup_estimate": "speedup estimate, i.i.d. acceptances (Leviathan): "
    "(1 − α^(γ+1)) / ((1 − α)(γc + 1))",
    "kept_rates_speedup_estimate": "speedup estimate from per-position keep rates a₁…a_γ: "
    "(1 + a₁ + a₁a₂ + …) / (γc + 1)",
    "measured_speedup": "measured speedup (race: speculative / plain tokens/s)",
    "finish_reason": "stopped by",
}
FORMATS = {"chat": "chat template (a user turn, then the assistant's)", "raw": "raw text"}
TREE_NOTE = (
    "A tree round proposes many nodes and keeps at most one path, so α (kept / proposed nodes) "
    "is low by design, and the chain speedup estimates do not apply (—): race it instead."
)
LAW = {
    True: "yes (exact verification)",
    False: "NO: a lossy rule (typical acceptance) chose tokens",
}
ESTIMATES_NOTE = (
    "Both speedups are estimates, not bounds: the i.i.d. one assumes every draft is kept "
    "independently with the same α, while real drafts agree in stretches (a round that kept "
    "its first draft keeps its second more often), which the keep-rate estimate counts."
)


def status_html(message: str, error: bool = False) -> str:
    """A one-line status; errors are marked so they stand out."""
    cls = "sv-status-error" if error else "sv-status"
    prefix = "Error: " if error else ""
    return f'<div class="{cls}" role="status">{prefix}{escape(message)}</div>'


def number(value: Any) -> str:
    """A summary value for display."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return escape(str(value))


def summary_html(summary: Mapping[str, Any]) -> str:
    """The summary table (γ is the configured draft length), the prompt's format and a note on
    the two speedup estimates (saying so where the measurement beats the i.i.d. one)."""
    settings = summary.get("settings") or {}
    gamma = "tree depth (deepest round)" if summary.get("tree") else "γ (largest of any round)"
    rows = [f"<tr><td>{gamma}</td><td>{number(summary.get('gamma'))}</td></tr>"]
    if summary.get("follows_target_law") is not None:
        law, cls = (
            summary["follows_target_law"],
            "" if summary["follows_target_law"] else "sv-lossy",
        )
        rows.append(
            f'<tr data-key="follows_target_law" class="{cls}"><td>follows the target\'s law</td>'
            f"<td>{escape(LAW[bool(law)])}</td></tr>"
        )
    if settings.get("prompt_format") in FORMATS:
        shown = FORMATS[settings["prompt_format"]]
        rows.append(f'<tr data-key="prompt_format"><td>prompt sent as</td><td>{shown}</td></tr>')
    rows += [
        f'<tr data-key="{k}"><td>{escape(label)}</td><td>{number(summary.get(k))}</td></tr>'
        for k, label in SUMMARY_LABELS.items()
    ]
    notes = [TREE_NOTE if summary.get("tree") else ESTIMATES_NOTE]
    measured, iid = summary.get("measured_speedup"), summary.get("iid_speedup_estimate")
    if measured is None:
        notes.append("Run the race to measure the speedup against plain decoding.")
    elif iid is not None and measured > iid:
        notes.append(
            f"Here the measured {measured:.2f}× beats the i.i.d. estimate {iid:.2f}×: "
            "acceptances came in stretches."
        )
    hint = "".join(f'<p class="sv-note"><small>{escape(n)}</small></p>' for n in notes)
    return f'<div class="sv-summary"><table>{"".join(rows)}</table>{hint}</div>'


def race_html(plain: Mapping[str, Any], spec: Mapping[str, Any], greedy: bool) -> str:
    """Plain and speculative decoding side by side, their speeds and (at T = 0) a match check;
    a speculative side that a lossy rule chose is marked so, and never claimed to match."""
    lossy = spec.get("follows_target_law") is False
    marks = {
        "plain": "",
        "spec": f'<div class="sv-lossy">{escape(LAW[False])}</div>' if lossy else "",
    }
    sides = "".join(
        f'<div class="sv-race-{name}"><b>{title}</b><br>{_speed(side)}{marks[name]}'
        f"<pre>{escape(str(side.get('text', '')))}</pre></div>"
        for name, title, side in (
            ("plain", "plain (target only)", plain),
            ("spec", "speculative", spec),
        )
    )
    foot = _speedup(plain, spec)
    if lossy:
        foot += " · the speculative side is LOSSY: it does not follow the target's law"
    elif greedy and plain.get("done") and spec.get("done"):
        same = plain.get("tokens", plain.get("text")) == spec.get("tokens", spec.get("text"))
        cls, word = ("sv-match", "identical ✓") if same else ("sv-mismatch", "different ✗")
        foot += f' · T = 0: texts are <span class="{cls}">{word}</span>'
    elif not greedy:
        foot += " · T > 0: two independent samples of the same law, so the texts usually differ"
    return f'<div class="sv-race">{sides}</div><p class="sv-race-foot">{foot}</p>'


def _speed(side: Mapping[str, Any]) -> str:
    """'N tokens in S s (T tok/s)' for one side of the race."""
    tps = side.get("tokens_per_second")
    if tps is None:
        return "<small>waiting…</small>" if not side.get("done") else "<small>—</small>"
    return f"{side.get('new_tokens', 0)} tokens in {side.get('seconds', 0):.2f} s ({tps:.1f} tok/s)"


def _speedup(plain: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    """The wall-clock speedup, once both sides have finished."""
    a, b = plain.get("tokens_per_second"), spec.get("tokens_per_second")
    if not (a and b):
        return "speedup: —"
    return f"speedup: <b>{b / a:.2f}×</b> (speculative tok/s / plain tok/s)"
