"""A tree round drawn from its events: the candidate tree, its attention mask, and any node.

Pure functions of the events (TreeProposed, then the Accepted/Rejected verdicts in walk order,
TreeVerified, then the Resampled or Bonus token after the kept path); no torch: the mask is
rebuilt from the parents. Nodes are numbered as the drafter numbered them; node N (one past
the last) is the token drawn after the kept path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from html import escape

from specviz.app.views.cells import Decode
from specviz.app.views.style import LOSSY
from specviz.app.views.tokens import fmt, lossy_html, visible
from specviz.core.events import (
    Accepted,
    Bonus,
    Event,
    Rejected,
    Resampled,
    RoundSummary,
    TreeProposed,
    TreeVerified,
)

Verdict = Accepted | Rejected
STATUS = {  # a node's status → what the tree view says of it (its colour-free cue in the CSS)
    "kept": "kept (on the accepted path; bold, solid box)",
    "rejected": "tried and rejected (greyed, struck through)",
    "untried": "never tried (dotted box): its parent was not kept, or a sibling was first",
}
RULE_TEXT = {
    "sampled": "min(1, r(x)/q(x)); a rejection leaves r = norm(max(0, r − q)) for the next "
    "sibling (children i.i.d. from q)",
    "deterministic": "r(x); a rejection sets r(x) = 0 and renormalises r for the next sibling "
    "(children chosen without sampling)",
    "typical": "1 when r(x) > min(ε, δ·exp(−H(r))), else 0 (typical acceptance: LOSSY)",
}
PANEL_HINT = (
    "Choose a tree drafter (the menu's 'tree: …' entries), then Generate or Step: each "
    "round's candidate tree, its attention mask and every node's numbers show here."
)


@dataclass(frozen=True, kw_only=True)
class TreeRound:
    """One tree round: the proposal, the verdicts on the nodes tried, the kept path, the next."""

    round: int
    position: int  # the output position of the tree's first level
    tokens: tuple[int, ...]
    parents: tuple[int, ...]  # -1: a child of the root (the last committed token)
    q_x: tuple[float, ...]
    sampled: tuple[bool, ...]
    trials: tuple[Verdict, ...] = ()  # in walk order
    path: tuple[int, ...] = ()
    rule: str = ""
    exact: bool = True
    next: Resampled | Bonus | None = None  # None: an accepted stop token ended the decode
    done: bool = False  # its RoundSummary came

    @property
    def size(self) -> int:
        """N, the number of nodes (and the number of the token after the path)."""
        return len(self.tokens)

    @property
    def depths(self) -> tuple[int, ...]:
        """Each node's depth (the root's children are at depth 1)."""
        out: list[int] = []
        for parent in self.parents:
            out.append(1 + (out[parent] if parent >= 0 else 0))
        return tuple(out)

    def children(self, node: int) -> list[int]:
        """The children of node (-1: the root) in the order they are tried."""
        return [i for i, parent in enumerate(self.parents) if parent == node]

    def trial(self, node: int) -> Verdict | None:
        """The verdict on node, or None when it was never tried."""
        return next((t for t in self.trials if t.draft_index == node), None)

    def status(self, node: int) -> str:
        """'kept', 'rejected' or 'untried' (a key of STATUS)."""
        trial = self.trial(node)
        if trial is None:
            return "untried"
        return "kept" if isinstance(trial, Accepted) else "rejected"

    @property
    def kept(self) -> list[int]:
        """The kept path's nodes, root to leaf (those with an Accepted verdict)."""
        return [t.draft_index for t in self.trials if isinstance(t, Accepted)]


def tree_rounds(events: Iterable[Event]) -> list[TreeRound]:
    """Every tree round in the events, in order (empty for a chain or plain decode)."""
    rounds: list[TreeRound] = []
    for e in events:
        if isinstance(e, TreeProposed):
            rounds.append(
                TreeRound(
                    round=e.round,
                    position=e.position,
                    tokens=e.tokens,
                    parents=e.parents,
                    q_x=e.q_x,
                    sampled=e.sampled,
                )
            )
        elif rounds and getattr(e, "round", None) == rounds[-1].round and not rounds[-1].done:
            rounds[-1] = _with(rounds[-1], e)
    return rounds


def _with(tr: TreeRound, e: Event) -> TreeRound:
    """tr with one more of its round's events taken in."""
    if isinstance(e, Accepted | Rejected):
        return replace(tr, trials=(*tr.trials, e))
    if isinstance(e, TreeVerified):
        return replace(tr, path=e.path, rule=e.rule, exact=e.exact)
    if isinstance(e, Resampled | Bonus):
        return replace(tr, next=e)
    return replace(tr, done=True) if isinstance(e, RoundSummary) else tr


def pick_round(rounds: Sequence[TreeRound], number: object) -> TreeRound | None:
    """The round numbered number (as the stream numbers rounds), else the latest that drafted
    a tree (a decode's last round may have no room for one), else the latest, else None."""
    chosen = next((r for r in rounds if r.round == whole_number(number)), None)
    drafted = next((r for r in reversed(rounds) if r.size), None)
    return chosen or drafted or (rounds[-1] if rounds else None)


def whole_number(value: object) -> int | None:
    """A whole number from a field's value, else None."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() else None


def visible_matrix(parents: Sequence[int]) -> list[list[bool]]:
    """(N, N): node i attends to node j when j is i or one of its ancestors (as
    specviz.tree.proposal.TokenTree.visible, in plain python)."""
    n, rows = len(parents), list[list[bool]]()
    for i, parent in enumerate(parents):
        row = list(rows[parent]) if parent >= 0 else [False] * n
        row[i] = True
        rows.append(row)
    return rows


def _label(tr: TreeRound, node: int, decode: Decode) -> str:
    """'#i 'text'' for a node (N: the token after the path), escaped."""
    token = tr.tokens[node] if node < tr.size else tr.next.token if tr.next else -1
    return f"#{node} {escape(repr(visible(decode(token))))}"


def _node_span(tr: TreeRound, node: int, decode: Decode) -> str:
    """One node as a clickable span: its status, token and numbers."""
    status, trial = tr.status(node), tr.trial(node)
    numbers = f"q {fmt(tr.q_x[node])}" + (f" · p {fmt(trial.p_x)}" if trial else "")
    title = f"node #{node}: {STATUS[status]}; {numbers}"
    return (
        f'<span class="sv-node sv-node-{status}" data-node="{node}" data-status="{status}" '
        f'tabindex="0" title="{escape(title)}">{_label(tr, node, decode)} '
        f"<small>{numbers}</small></span>"
    )


def _next_span(tr: TreeRound, decode: Decode) -> str:
    """The token drawn after the kept path (resampled or bonus) as a node of its own."""
    if tr.next is None:
        return ""
    kind = tr.next.kind
    return (
        f'<li><span class="sv-node sv-node-next sv-{kind}" data-node="{tr.size}" '
        f'data-status="{kind}" tabindex="0" title="the token after the kept path: {kind}">'
        f"{_label(tr, tr.size, decode)} <small>{kind}</small></span></li>"
    )


def _branch(tr: TreeRound, node: int, decode: Decode, end: int) -> str:
    """The nested list under node (-1: the root); the next token hangs under node end."""
    items = [
        f"<li>{_node_span(tr, kid, decode)}{_branch(tr, kid, decode, end)}</li>"
        for kid in tr.children(node)
    ]
    if node == end:
        items.append(_next_span(tr, decode))
    return f"<ul>{''.join(items)}</ul>" if any(items) else ""


def tree_html(tr: TreeRound, decode: Decode) -> str:
    """The candidate tree as nested lists: the accepted path highlighted, rejected nodes greyed,
    untried ones dotted, and the token drawn after the path under its last node."""
    kept = tr.kept
    end = kept[-1] if kept else -1
    root = '<span class="sv-node sv-node-root">root: the committed text</span>'
    body = f'<ul class="sv-tree-list"><li>{root}{_branch(tr, -1, decode, end)}</li></ul>'
    legend = "".join(
        f'<span class="sv-node sv-node-{k}">{escape(k)}</span> {escape(v)}<br>'
        for k, v in STATUS.items()
    )
    return f'<div class="sv-tree-nodes">{body}<small class="sv-note">{legend}</small></div>'


def mask_html(tr: TreeRound, decode: Decode) -> str:
    """The tree's attention mask as a small node × node table (■: row attends to column)."""
    head = "".join(f"<th>{i}</th>" for i in range(tr.size))
    rows = "".join(
        f'<tr class="sv-mask-{tr.status(i)}"><th data-node="{i}">{_label(tr, i, decode)}</th>'
        + "".join('<td class="sv-on">■</td>' if on else "<td></td>" for on in row)
        + "</tr>"
        for i, row in enumerate(visible_matrix(tr.parents))
    )
    caption = (
        "Attention mask of the target's one pass: row i sees column j (■) when j is i or an "
        "ancestor; every node also sees the whole committed text."
    )
    return (
        f'<table class="sv-mask" aria-label="attention mask"><caption>{escape(caption)}'
        f"</caption><tr><th></th>{head}</tr>{rows}</table>"
    )


def tree_panel_html(rounds: Sequence[TreeRound], number: object, decode: Decode) -> str:
    """The chosen round's tree and mask under a one-line summary (a hint with no tree rounds);
    a banner when a lossy rule verified it."""
    tr = pick_round(rounds, number)
    if tr is None:
        return f'<div class="sv-tree"><em>{escape(PANEL_HINT)}</em></div>'
    depth = max(tr.depths, default=0)
    head = (
        f"round {tr.round} of {rounds[0].round}–{rounds[-1].round}: {tr.size} nodes, depth "
        f"{depth}; kept path {len(tr.kept)} · rule {tr.rule or '—'} · click a node to inspect it"
    )
    banner = "" if tr.exact else lossy_html(LOSSY)
    return (
        f'<div class="sv-tree" data-round="{tr.round}">{banner}<div class="sv-tree-head">'
        f'{escape(head)}</div><div class="sv-tree-body">{tree_html(tr, decode)}'
        f"{mask_html(tr, decode)}</div></div>"
    )
