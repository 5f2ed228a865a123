"""The Benchmark results tab: a saved `specviz bench` result's plots and tables, in the app's
look (the same figures and tables as its HTML report).

The tab lists and ranks the saved results itself (specviz.results.saved); their figures and
tables come from a Viewer it is given, the benchmark's own (`specviz app` passes it), so the app
never imports the benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import gradio as gr
import plotly.graph_objects as go

from specviz.app import views
from specviz.app.wiring import NO_API
from specviz.results.saved import most_informative, saved_results

BENCH_FIGURES = 5  # speedup by drafter, gamma curves, alpha, latency CDF, batch step time
# The folder of saved results the tab lists unless told otherwise: benchmarks/results under the
# current folder, which a checkout of the repository run from its root has.
DEFAULT_RESULTS = Path("benchmarks", "results")
Look = Callable[[go.Figure, str, str, str], go.Figure]  # (figure, title, x title, y title)
Empty = Callable[[str, str], go.Figure]  # (title, why there is nothing to draw)


class Viewer(Protocol):
    """What shows a saved result: its BENCH_FIGURES figures, each styled by look (empty: a
    figure saying why it has nothing to draw), and its Markdown tables; ValueError, saying what
    is wrong, for a file that is not a result."""

    def __call__(self, path: str, look: Look, empty: Empty) -> tuple[list[go.Figure], str]: ...


@dataclass(frozen=True)
class ResultsPanels:
    """The tab's components: the tab itself, the saved result's menu, the upload, the button,
    the figures (BENCH_FIGURES of them) and the tables."""

    tab: gr.Tab
    path: gr.Dropdown
    upload: gr.File
    show: gr.Button
    plots: tuple[gr.Plot, ...]
    tables: gr.Markdown

    def outputs(self) -> list[Any]:
        """The figures, then the tables."""
        return [*self.plots, self.tables]


def listing_note(folder: Path, saved: list[str]) -> str:
    """What the tab says above its menu: which folder's results it lists, if any."""
    intro = "Plots and tables of a saved `specviz bench --out result.json` run"
    if not saved:
        return f"{intro}: upload one (`python app.py --results DIR` lists a folder of them)."
    return f"{intro} (the JSON files in `{folder}` are listed; or upload one)."


def build(tab: gr.Tab, folder: Path) -> ResultsPanels:
    """The tab's contents (tab: the tab they are built in; folder: the saved results it lists),
    the most informative saved result first, the figures two by two, the tables in a scrolling
    box."""
    saved = saved_results(folder)
    gr.Markdown(listing_note(folder, saved))
    with gr.Row():
        path = gr.Dropdown(
            [(Path(p).stem, p) for p in saved],
            value=most_informative(saved),
            label="saved result",
            allow_custom_value=True,
            elem_id="sv-bench-path",
        )
        upload = gr.File(file_types=[".json"], label="or upload a result JSON")
    show = gr.Button("Show result", elem_id="sv-bench-show")
    plots: list[gr.Plot] = []
    for row in ((0, 1), (2, 3), (4,)):
        with gr.Row():
            plots += [gr.Plot(label=f"figure {i + 1}", elem_id=f"sv-bench-{i}") for i in row]
    assert len(plots) == BENCH_FIGURES
    tables = gr.Markdown(elem_id="sv-bench-tables")
    return ResultsPanels(
        tab=tab, path=path, upload=upload, show=show, plots=tuple(plots), tables=tables
    )


def bench_result(path: str | None, upload: str | None, view: Viewer) -> list[Any]:
    """A saved benchmark result's figures (in the app's look) and tables, as view shows them (an
    upload wins over the dropdown)."""
    chosen = upload or path
    if not chosen:
        raise gr.Error("choose a saved result or upload a `specviz bench --out` JSON")
    try:
        figs, tables = view(chosen, views.bench_look, views.placeholder)
    except ValueError as err:
        raise gr.Error(str(err)) from None
    return [*figs, tables]


def bench_first(path: str | None, upload: str | None, shown: str | None, view: Viewer) -> list[Any]:
    """On opening the tab: the chosen result, unless one is shown."""
    if shown:
        return [gr.skip()] * (BENCH_FIGURES + 1)
    return bench_result(path, upload, view)


def wire(w: ResultsPanels, view: Viewer, queue: Mapping[str, Any]) -> None:
    """Connect the tab; view: what shows a saved result; queue: its events' concurrency
    settings."""

    def show(path: str | None, upload: str | None) -> list[Any]:
        return bench_result(path, upload, view)

    def first(path: str | None, upload: str | None, shown: str | None) -> list[Any]:
        return bench_first(path, upload, shown, view)

    shown_in, shown_out = [w.path, w.upload], w.outputs()
    w.show.click(show, shown_in, shown_out, api_name="bench_result", **queue)
    w.path.change(show, shown_in, shown_out, api_name=NO_API, **queue)
    w.tab.select(first, [*shown_in, w.tables], shown_out, api_name=NO_API, **queue)
