"""The tree inspector: the numbers behind one node of a tree round (or the token after its path).

For a tried node: target p(x), draft q(x), the rule's P(keep), the uniform u and the verdict;
for an untried one, why it was never tried; for the token after the kept path (node N), how it
was drawn and, when resampled, the leading candidates of what was left of p.
"""

from __future__ import annotations

from html import escape

from specviz.app.views.cells import Decode
from specviz.app.views.tokens import fmt, visible
from specviz.app.views.tree import RULE_TEXT, STATUS, TreeRound, whole_number
from specviz.core.events import Accepted, Resampled

CHOSEN = {
    True: "drawn i.i.d. from its parent's q, with its siblings",
    False: "chosen without sampling (top-k of q, or an n-gram branch)",
}
NODE_HINT = "Click a node of the tree (or type its number) to inspect it."


def _text(decode: Decode, token: int) -> str:
    return f"{visible(decode(token))!r} (id {token})"


def keep_rule(tr: TreeRound, node: int) -> str:
    """How P(keep) was computed for node's sibling set under the round's rule."""
    if tr.rule == "typical":
        return RULE_TEXT["typical"]
    return RULE_TEXT["sampled" if tr.sampled[node] else "deterministic"]


def untried_reason(tr: TreeRound, node: int) -> str:
    """Why node was never tried: its parent was not kept, or a sibling before it was."""
    parent = tr.parents[node]
    if parent >= 0 and tr.status(parent) != "kept":
        return f"never tried: its parent #{parent} was not kept"
    if any(tr.status(s) == "kept" for s in tr.children(parent)):
        return "never tried: a sibling tried before it was kept"
    return "never tried: the decode stopped before it (an accepted stop token)"


def node_rows(tr: TreeRound, node: int, decode: Decode) -> list[tuple[str, str]]:
    """(label, value) pairs describing node of tr."""
    parent, status = tr.parents[node], tr.status(node)
    out = [
        ("node", f"#{node} in round {tr.round}"),
        ("token", _text(decode, tr.tokens[node])),
        ("status", STATUS[status]),
        ("depth", str(tr.depths[node])),
        ("parent", "the root (the committed text)" if parent < 0 else f"#{parent}"),
        ("position in the output", str(tr.position + tr.depths[node] - 1)),
        ("how it was chosen", CHOSEN[tr.sampled[node]]),
        ("q(x) draft", fmt(tr.q_x[node])),
    ]
    trial = tr.trial(node)
    if trial is None:
        return [*out, ("verdict", untried_reason(tr, node))]
    word = "kept: u < P(keep)" if isinstance(trial, Accepted) else "rejected: u ≥ P(keep)"
    return [
        *out,
        ("p(x) target", fmt(trial.p_x)),
        ("P(keep)", fmt(trial.accept_prob)),
        ("how P(keep) is computed", keep_rule(tr, node)),
        ("u ~ U(0, 1)", fmt(trial.u)),
        ("verdict", f"{word} ({fmt(trial.u)} vs {fmt(trial.accept_prob)})"),
    ]


def next_rows(tr: TreeRound, decode: Decode) -> list[tuple[str, str]]:
    """(label, value) pairs for the token drawn after the kept path."""
    e = tr.next
    if e is None:
        return [("verdict", "no token after the path: an accepted stop token ended the decode")]
    out = [
        ("node", f"#{tr.size}: the token after the kept path"),
        ("token", _text(decode, e.token)),
    ]
    out += [("outcome", e.kind), ("p(x) target", fmt(e.p_x))]
    if isinstance(e, Resampled):
        return [
            *out,
            ("q(x) draft", fmt(e.q_x)),
            ("residual(x)", fmt(e.residual_x)),
            ("mass left of p", fmt(e.residual_mass)),
            (
                "verdict",
                "every child tried below the path's end was rejected: drawn from what is left of p",
            ),
        ]
    return [*out, ("verdict", "the path reached a leaf: drawn from p after it")]


def residual_table(e: Resampled, decode: Decode) -> str:
    """The leading candidates of the resample as a table: token, residual, p, q."""
    rows = "".join(
        f"<tr><td>{escape(_text(decode, t))}</td><td>{fmt(r)}</td><td>{fmt(p)}</td>"
        f"<td>{fmt(q)}</td></tr>"
        for t, r, p, q in e.top
        if max(r, p, q) > 0
    )
    head = "<tr><th>candidate</th><th>residual</th><th>p target</th><th>q draft</th></tr>"
    return f'<table class="sv-residual-top">{head}{rows}</table>'


def node_html(tr: TreeRound | None, node: object, decode: Decode) -> str:
    """The tree inspector for node (0..N-1 a node, N the token after the path), or a hint."""
    index = whole_number(node)
    if tr is None or index is None or not 0 <= index <= tr.size:
        return f'<div class="sv-tree-inspector"><em>{escape(NODE_HINT)}</em></div>'
    rows = node_rows(tr, index, decode) if index < tr.size else next_rows(tr, decode)
    body = "".join(f"<tr><td>{escape(k)}</td><td>{escape(v)}</td></tr>" for k, v in rows)
    extra = (
        residual_table(tr.next, decode)
        if index == tr.size and isinstance(tr.next, Resampled)
        else ""
    )
    return (
        f'<div class="sv-tree-inspector" data-node="{index}" data-round="{tr.round}">'
        f"<table>{body}</table>{extra}</div>"
    )
