"""The equivalence lab's views: outcome distributions side by side and the table of tests.

Plain data only (outcomes are tuples of token ids, test rows are strings): no torch, no scipy.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

import plotly.graph_objects as go

from specviz.app.views.cells import Decode
from specviz.app.views.plots import HEIGHT, _empty, figure
from specviz.app.views.style import COLORS

Outcome = tuple[int, ...]
TOP = 15  # outcomes shown per plot; the rest are summed into one bar
OTHER = "(all others)"
HEADER = (
    *("test", "N", "statistic", "df", "p (Holm)", "TV estimate", "TV upper bound", "power"),
    "verdict",
)
SERIES = {  # name → colour: Okabe–Ito, as the token views
    "speculative": COLORS["accepted"],
    "plain": COLORS["sampled"],
    "exact law": COLORS["bonus"],
}


@dataclass(frozen=True, kw_only=True)
class LabView:
    """One lab run: both samples, the exact laws where known, and the tests as table rows."""

    spec: Sequence[Outcome]
    plain: Sequence[Outcome]
    exact: Mapping[Outcome, float] | None  # joint law of the first k tokens, when enumerable
    exact_first: Mapping[Outcome, float] | None  # law of the first token
    decode: Decode
    sampler: str
    alpha: float
    rows: Sequence[Sequence[str]]  # specviz.stats.report.rows: one per test, HEADER order
    rejected: int
    seconds: float = 0.0
    prompt_format: str | None = None  # 'chat' or 'raw' for a model pair's prompt; None: toy ids
    _texts: dict[int, str] = field(default_factory=dict, repr=False, compare=False)

    def label(self, outcome: Outcome) -> str:
        """Token texts with visible whitespace, '·' between tokens; '(ended)' for no token."""
        if not outcome:
            return "(ended)"
        for t in outcome:
            self._texts.setdefault(t, self.decode(t))
        parts = [self._texts[t].replace(" ", "␣").replace("\n", "⏎") or f"#{t}" for t in outcome]
        return "·".join(parts)

    def figures(self) -> tuple[go.Figure, go.Figure]:
        """First-token and joint first-k distributions: speculative, plain and exact."""
        k = max((len(o) for o in (*self.spec, *self.plain)), default=1)
        first = outcome_figure(
            "First token",
            [o[:1] for o in self.spec],
            [o[:1] for o in self.plain],
            self.exact_first,
            self.label,
        )
        joint = outcome_figure(
            f"First {k} tokens (joint)", self.spec, self.plain, self.exact, self.label
        )
        return first, joint

    def status(self) -> str:
        """One line: the sampler, the verdict and how long it took."""
        verdict = (
            f"{self.rejected} of {len(self.rows)} tests reject equality in law — caught"
            if self.rejected
            else f"no test rejects equality in law (all {len(self.rows)} pass)"
        )
        took = f"{self.seconds:.0f} s"
        sent = {"chat": "; prompt sent through the chat template", "raw": "; prompt as raw text"}
        how = sent.get(self.prompt_format or "", "")
        return f"sampler: {self.sampler}: {verdict} at family-wise α = {self.alpha} ({took}{how})"

    def table_html(self) -> str:
        """The tests as an HTML table, verdicts marked, with how to read them."""
        head = "".join(f"<th>{escape(h)}</th>" for h in HEADER)
        body = "".join(
            f'<tr class="{"sv-reject" if r[-1] == "REJECT" else "sv-pass"}">'
            + "".join(f"<td>{escape(c)}</td>" for c in r)
            + "</tr>"
            for r in self.rows
        )
        note = (
            f"H0: speculative and plain sampling give the same law. p-values are Holm-adjusted "
            f"across this table, so the whole table wrongly rejects with probability ≤ α = "
            f"{self.alpha}. TV upper bound: with confidence 1 − α the true total variation is "
            f"below it. Power: against moving TV 0.05 between the two likeliest outcomes."
        )
        return (
            f'<div class="sv-lab-table"><table><tr>{head}</tr>{body}</table>'
            f"<p><small>{escape(note)}</small></p></div>"
        )


def top_outcomes(
    counts: Sequence[Counter[Outcome]], exact: Mapping[Outcome, float] | None, top: int = TOP
) -> list[Outcome]:
    """The outcomes with the most mass across the samples (and the exact law), at most top."""
    mass: dict[Outcome, float] = {}
    for c in counts:
        total = sum(c.values()) or 1
        for o, n in c.items():
            mass[o] = mass.get(o, 0.0) + n / total
    for o, pr in (exact or {}).items():
        mass[o] = mass.get(o, 0.0) + pr
    return sorted(mass, key=lambda o: -mass[o])[:top]


def outcome_figure(
    title: str,
    spec: Sequence[Outcome],
    plain: Sequence[Outcome],
    exact: Mapping[Outcome, float] | None,
    label: Callable[[Outcome], str] = str,
) -> go.Figure:
    """Grouped bars of each outcome's frequency (95% binomial error bars) and exact probability."""
    if not spec or not plain:
        return _empty(title, "run the lab to draw samples")
    counts = [Counter(spec), Counter(plain)]
    shown = top_outcomes(counts, exact)
    labels = _unique([label(o) for o in shown])
    bars = []
    for series, c in zip(SERIES, counts, strict=False):
        n = sum(c.values())
        freq = [c[o] / n for o in shown]
        freq.append(1 - sum(freq))
        err = [1.96 * math.sqrt(max(f * (1 - f), 0.0) / n) for f in freq]
        bars.append(
            go.Bar(
                x=[*labels, OTHER],
                y=freq,
                name=f"{series} (N = {n})",
                marker_color=SERIES[series],
                error_y={"type": "data", "array": err, "thickness": 1},
            )
        )
    if exact:
        probs = [exact.get(o, 0.0) for o in shown]
        probs.append(max(0.0, 1 - sum(probs)))
        color = SERIES["exact law"]
        bars.append(go.Bar(x=[*labels, OTHER], y=probs, name="exact law", marker_color=color))
    legend = {"orientation": "v", "x": 0.99, "xanchor": "right", "y": 0.99, "yanchor": "top"}
    return figure(
        bars,
        title,
        "outcome (top 15; ␣ space, ⏎ newline, · between tokens)",
        "P",
        xaxis={"type": "category", "tickangle": -45},
        barmode="group",
        bargap=0.2,
        height=HEIGHT + 40,
        legend=legend,  # top right: the bars fall from the left
    )


def _unique(labels: list[str]) -> list[str]:
    """Labels made distinct (two token sequences can decode to the same text)."""
    seen: Counter[str] = Counter()
    out = []
    for text in labels:
        seen[text] += 1
        out.append(text if seen[text] == 1 else f"{text} ({seen[text]})")
    return out
