"""HTML for the coloured token stream, its legend and the token inspector."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from specviz.app.views.cells import Cell
from specviz.app.views.style import CUES, LABELS, LOSSY

SPECULATIVE = ("accepted", "rejected", "resampled", "bonus")


def fmt(x: float | None) -> str:
    """A probability or draw for display: 4 significant digits, '—' when absent."""
    return "—" if x is None else f"{x:.4g}"


def visible(text: str) -> str:
    """Token text with newlines, tabs and empty tokens made visible (not yet escaped)."""
    if not text:
        return "∅"
    return text.replace("\n", "↵\n").replace("\t", "→\t")


def legend_html(kinds: Sequence[str] = SPECULATIVE) -> str:
    """A legend: one swatch per outcome, with its colour-free cue spelled out."""
    items = "".join(
        f'<span class="sv-legend-item" data-kind="{k}">'
        f'<span class="sv-tok sv-{k}" style="color:#000">{escape(LABELS[k])}</span>'
        f" <small>({escape(CUES[k])})</small></span>"
        for k in kinds
    )
    rounds = '<span class="sv-legend-item"><span class="sv-round">n</span> round n starts</span>'
    return f'<div class="sv-legend" role="group" aria-label="legend">{items}{rounds}</div>'


def verdict(cell: Cell) -> str:
    """One line saying why the token was kept, discarded or drawn."""
    if cell.tree:
        return tree_verdict(cell)
    if cell.kind == "accepted":
        return f"accepted: u = {fmt(cell.u)} < min(1, p/q) = {fmt(cell.accept_prob)}"
    if cell.kind == "rejected":
        return f"rejected: u = {fmt(cell.u)} ≥ min(1, p/q) = {fmt(cell.accept_prob)}"
    if cell.kind == "resampled":
        return "resampled: drawn from norm(max(0, p − q)) after the draft here was rejected"
    if cell.kind == "bonus":
        return "bonus: every draft of the round was accepted, so one more token is drawn from p"
    return "sampled from p by plain decoding"


def tree_verdict(cell: Cell) -> str:
    """The verdict on a token of a tree round (the rule's P(keep) in place of min(1, p/q))."""
    node = f"(tree node #{cell.node})"
    if cell.kind == "accepted":
        return f"kept: u = {fmt(cell.u)} < P(keep) = {fmt(cell.accept_prob)} {node}"
    if cell.kind == "rejected":
        return f"rejected: u = {fmt(cell.u)} ≥ P(keep) = {fmt(cell.accept_prob)} {node}"
    if cell.kind == "resampled":
        return "resampled: every child tried here was rejected, so drawn from what is left of p"
    return "bonus: the kept path reached a leaf of the tree, so one more token is drawn from p"


def rows(cell: Cell) -> list[tuple[str, str]]:
    """(label, value) pairs describing a token: where it is and the numbers behind it."""
    out = [
        ("token", f"{visible(cell.text)!r} (id {cell.token})"),
        ("outcome", cell.kind),
        ("round", "—" if cell.round is None else str(cell.round)),
        ("position in round", "—" if cell.in_round is None else str(cell.in_round)),
        ("position in the output", str(cell.position)),
        ("p(x) target", fmt(cell.p_x)),
        ("q(x) draft", fmt(cell.q_x)),
    ]
    if cell.tree and cell.node is not None:
        out.insert(4, ("tree node", f"#{cell.node} (see the Tree rounds tab)"))
    if cell.kind in ("accepted", "rejected"):
        keep = "P(keep) (the tree rule's)" if cell.tree else "min(1, p/q)"
        out += [(keep, fmt(cell.accept_prob)), ("u ~ U(0, 1)", fmt(cell.u))]
    if cell.kind == "resampled":
        out += [
            ("residual(x)", fmt(cell.residual_x)),
            ("residual mass Σ max(0, p − q)", fmt(cell.residual_mass)),
        ]
    return [*out, ("verdict", verdict(cell))]


def title(cell: Cell) -> str:
    """Hover text for a token (plain text, one fact per line)."""
    return "\n".join(f"{k}: {v}" for k, v in rows(cell))


def token_span(cell: Cell) -> str:
    """One token as a coloured, clickable span carrying its numbers as data attributes."""
    data = (
        f'data-idx="{cell.index}" data-kind="{cell.kind}" data-p="{fmt(cell.p_x)}" '
        f'data-q="{fmt(cell.q_x)}"'
    )
    return (
        f'<span class="sv-tok sv-{cell.kind}" {data} tabindex="0" '
        f'title="{escape(title(cell))}">{escape(visible(cell.text))}</span>'
    )


SENT = {"chat": "chat template: the prompt is the user's turn", "raw": "raw text continued"}
NUMBERING = (
    "token # counts every token in the stream above, rejected drafts included; position in "
    "the output counts only the tokens kept in the text (a rejected draft and the token that "
    "replaced it share one)."
)


def lossy_html(message: str = LOSSY) -> str:
    """The banner on an output that a lossy rule chose: it does not follow the target's law."""
    return f'<div class="sv-lossy" role="alert" data-lossy="true">⚠ {escape(message)}</div>'


def stream_html(
    cells: Sequence[Cell],
    prompt: str = "",
    note: str = "",
    prompt_format: str = "",
    lossy: bool = False,
) -> str:
    """The prompt (tagged with how it was sent), then every token coloured by outcome, with a
    marker where each round starts; under a banner when a lossy rule chose the tokens."""
    parts = [lossy_html()] if lossy else []
    if prompt_format in SENT:
        tag = escape(SENT[prompt_format])
        parts.append(f'<span class="sv-sent" data-format="{prompt_format}">{tag}</span>\n')
    if prompt:
        parts.append(f'<span class="sv-prompt">{escape(prompt)}</span>')
    current: int | None = None
    for cell in cells:
        if cell.round is not None and cell.round != current:
            current = cell.round
            parts.append(f'<span class="sv-round" title="round {current}">{current}</span>')
        parts.append(token_span(cell))
    tail = f'<div class="sv-note">{escape(note)}</div>' if note else ""
    return f'<div class="sv-stream" aria-live="polite">{"".join(parts)}</div>{tail}'


def inspector_html(cell: Cell | None) -> str:
    """The inspector panel for one token, or a hint when none is selected; both say how tokens
    are numbered."""
    how = f'<p class="sv-note"><small>{escape(NUMBERING)}</small></p>'
    if cell is None:
        hint = "<em>Click a token (or hover it) to inspect it.</em>"
        return f'<div class="sv-inspector">{hint}{how}</div>'
    body = "".join(f"<tr><td>{escape(k)}</td><td>{escape(v)}</td></tr>" for k, v in rows(cell))
    swatch = f'<span class="sv-tok sv-{cell.kind}">{escape(visible(cell.text))}</span>'
    head = f"<div>token #{cell.index} {swatch}</div>"
    table = f"<table>{body}</table>"
    return f'<div class="sv-inspector" data-idx="{cell.index}">{head}{table}{how}</div>'
