"""The Benchmark results tab: a saved `specviz bench` result's plots and tables, in the app's
look (the same figures and tables as its HTML report)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from specviz.app import views
from specviz.app.wiring import NO_API
from specviz.bench.saved import load_result_view, most_informative, saved_results

BENCH_FIGURES = 5  # speedup by drafter, gamma curves, alpha, latency CDF, batch step time
# The folder of saved results the tab lists unless told otherwise: benchmarks/results under the
# current folder, which a checkout of the repository run from its root has.
DEFAULT_RESULTS = Path("benchmarks", "results")


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
            [(Path(p).stem, p) for p in saved], value=most_informative(saved),
            label="saved result", allow_custom_value=True, elem_id="sv-bench-path",
        )  # fmt: skip
        upload = gr.File(file_types=[".json"], label="or upload a result JSON")
    show = gr.Button("Show result", elem_id="sv-bench-show")
    plots: list[gr.Plot] = []
    for row in ((0, 1), (2, 3), (4,)):
        with gr.Row():
            plots += [gr.Plot(label=f"figure {i + 1}", elem_id=f"sv-bench-{i}") for i in row]
    assert len(plots) == BENCH_FIGURES
    tables = gr.Markdown(elem_id="sv-bench-tables")
    return ResultsPanels(tab=tab, path=path, upload=upload, show=show, plots=tuple(plots),
                         tables=tables)  # fmt: skip


def bench_result(path: str | None, upload: str | None) -> list[Any]:
    """A saved benchmark result's figures (in the app's look) and tables (an upload wins over
    the dropdown)."""
    chosen = upload or path
    if not chosen:
        raise gr.Error("choose a saved result or upload a `specviz bench --out` JSON")
    try:
        figs, tables = load_result_view(chosen, views.bench_look, views.placeholder)
    except ValueError as err:
        raise gr.Error(str(err)) from None
    return [*figs, tables]


def bench_first(path: str | None, upload: str | None, shown: str | None) -> list[Any]:
    """On opening the tab: the chosen result, unless one is shown."""
    if shown:
        return [gr.skip()] * (BENCH_FIGURES + 1)
    return bench_result(path, upload)


def wire(w: ResultsPanels, queue: Mapping[str, Any]) -> None:
    """Connect the tab; queue: its events' concurrency settings."""
    shown_in, shown_out = [w.path, w.upload], w.outputs()
    w.show.click(bench_result, shown_in, shown_out, api_name="bench_result", **queue)
    w.path.change(bench_result, shown_in, shown_out, api_name=NO_API, **queue)
    w.tab.select(bench_first, [*shown_in, w.tables], shown_out, api_name=NO_API, **queue)
