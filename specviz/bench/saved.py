"""A saved `specviz bench` result, re-read for viewing: the report's figures and tables (the
saved results of a folder, and the one with the most to show: specviz.results.saved)."""

from __future__ import annotations

import sys
from pathlib import Path

import plotly.graph_objects as go

from specviz.bench.markdown import render, resummarized
from specviz.bench.report import Empty, Look, figures, html_report, plain_empty, plain_look
from specviz.results.records import Record
from specviz.results.schema import batch_steps, read_result


def load_result_view(
    path: str | Path, look: Look = plain_look, empty: Empty = plain_empty
) -> tuple[list[go.Figure], str]:
    """The five report figures (styled by look) and the Markdown tables of one saved result
    (any schema version).

    Raises ValueError with what is wrong when path is not a bench result this specviz reads.
    """
    result = resummarized(read_result(path))
    records = [Record.from_dict(r) for r in result["records"]]
    figs = figures(
        records,
        result["gamma_curves"],
        batch_steps(result),
        look,
        empty,
        sweep=result.get("batch_sweep"),
        levers=result.get("levers"),
        endpoint=result.get("endpoint"),
        price_per_hour=result["meta"]["price_per_hour"],
    )
    return figs, render(result, Path(path).stem)


def main(argv: list[str] | None = None) -> int:
    """Write the self-contained HTML report of a saved result: RESULT.json OUT.html."""
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 2:
        print("usage: python -m specviz.bench.saved RESULT.json OUT.html", file=sys.stderr)
        return 2
    try:
        figs, _ = load_result_view(args[0])
    except ValueError as err:
        print(f"specviz: {err}", file=sys.stderr)
        return 2
    Path(args[1]).write_text(html_report(figs, "specviz benchmark"), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
