"""The Batch tab on the tiny local pair: its form, its streamed rows, each row against the
single-prompt Generate seeded seed + r, and bad input shown in the tab."""

from __future__ import annotations

import inspect
import os
import re
import time
from html import unescape
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from specviz.app.main import SpecVizApp
from specviz.app.tabs import batch as batch_tab
from specviz.app.tabs.batch import (
    BATCH_DEFAULTS,
    BATCH_FIELDS,
    MAX_ROWS,
    PAIR_FIELDS,
    BatchRequest,
    default_drafter,
)
from specviz.app.views.batch import BatchRun, batch_html, row_tokens
from specviz.core.events import RoundSummary
from specviz.drafters.names import BATCH_DRAFTERS

from .test_app import free_port, model_dirs, ranked_dirs, served, settings
from .test_app_browser import ROOT, browser, open_app

__all__ = ["browser", "model_dirs", "ranked_dirs", "served"]  # fixtures shared
SCREENSHOT = ROOT / "artifacts" / "app-batch.png"

pytestmark = [  # gradio's queue calls pandas in ways pandas 3 deprecates: not ours to fix
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting':Warning"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated:Warning"),
]
PROMPTS = ("the cat sat", "a dog ran far", "we see the sea")
SEED = 3


def batch_form(dirs: tuple[str, str], **overrides: Any) -> dict[str, Any]:
    """The Batch tab's values (and the form's pair) by field name, then overrides."""
    values = {"target": dirs[0], "draft": dirs[1], "dtype": "float32"}
    values |= {"prompts": "\n".join(PROMPTS), "drafter": "model", "gamma": 4}
    values |= {"temperature": 1.0, "max_new": 16, "seed": SEED, "raw": False}
    return values | overrides


def outputs(app: SpecVizApp, dirs: tuple[str, str], **overrides: Any) -> list[list[Any]]:
    """Every update the tab's callback streams for these values."""
    return list(app.callbacks()["batch"](**batch_form(dirs, **overrides)))


@pytest.fixture(scope="module")
def app(model_dirs: tuple[str, str]) -> SpecVizApp:
    return SpecVizApp(*model_dirs)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"prompts": " \n \n"}, "a batch needs 2 to 8 prompts, one per line (got none)"),
        ({"prompts": "only one"}, "(got 1): add lines, or use Generate for a single prompt"),
        ({"prompts": "x\n" * (MAX_ROWS + 1)}, "at most 8 prompts, one per line (got 9)"),
        ({"drafter": "eagle"}, "batch drafter must be one of model, model:trimmed, ngram"),
        ({"gamma": 0}, "γ (draft tokens per round) must be between 1 and 16 (got 0)"),
        ({"temperature": -1}, "temperature must be between 0 and 2 (got -1)"),
        ({"max_new": 2.5}, "max new tokens must be a whole number (got 2.5)"),
        ({"seed": None}, "seed must be a number"),
    ],
)
def test_bad_batch_input_shows_a_message_in_the_tab(
    app: SpecVizApp, model_dirs: tuple[str, str], overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        BatchRequest.parse(batch_form(model_dirs, **overrides))
    [(status, view)] = outputs(app, model_dirs, **overrides)
    assert "sv-status-error" in status and message in unescape(status)
    assert "Traceback" not in status and isinstance(view, type(gr.skip()))


def test_errors_from_the_models_show_in_the_tab(
    app: SpecVizApp, model_dirs: tuple[str, str], tmp_path: Path
) -> None:
    long = "x" * 100  # the tiny models hold 96 positions
    status = outputs(app, model_dirs, prompts=f"ab\n{long}")[-1][0]
    assert "sv-status-error" in status and "prompt 1:" in unescape(status)
    status = outputs(app, model_dirs, drafter="model:trimmed")[-1][0]  # no token ranking here
    assert "token_ranking.safetensors" in unescape(status) and "'model' drafter" in unescape(status)
    status = outputs(app, (model_dirs[0], str(tmp_path)))[-1][0]
    assert "sv-status-error" in status and "no config.json" in unescape(status)
    assert "Traceback" not in status


def test_rows_stream_and_each_is_the_single_decode_seeded_seed_plus_r(
    app: SpecVizApp, model_dirs: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batch_tab, "REDRAW_SECONDS", 0.0)  # every batch round redrawn
    outs = outputs(app, model_dirs)
    run = app_run(app, model_dirs)
    assert len(outs) > 3 and "running" in outs[1][0] and "finished: 3 rows" in outs[-1][0]
    final = outs[-1][1]
    for r, prompt in enumerate(PROMPTS):  # each row: its prompt, seed, α and tokens per round
        assert f'data-row="{r}"' in final and f"seed {SEED + r}" in final and prompt in final
    assert final.count('data-key="alpha">α 0.') + final.count("α 1.00") == 3
    assert final.count("tokens/round") == 3 and "tokens/s</b> for the whole batch" in final
    assert all(f"sv-{kind}" in final for kind in ("accepted", "rejected", "resampled", "bonus"))
    for r, (prompt, tokens) in enumerate(zip(PROMPTS, row_tokens(run), strict=True)):
        s = settings(model_dirs, prompt=prompt, seed=SEED + r, max_new=16, temperature=1.0)
        single = app.decode.start(s, app.session.pair(s)).finish()
        assert tokens == single["tokens"], r
        assert tokens, r
    kept = [[e.accepted for e in run.row_events(r) if isinstance(e, RoundSummary)] for r in (0, 1)]
    assert kept[0][: len(kept[1])] != kept[1][: len(kept[0])]  # each row keeps its own drafts


def app_run(app: SpecVizApp, dirs: tuple[str, str], **overrides: Any) -> BatchRun:
    """The batch run the tab's handler decodes for these values, run to its end."""
    req = BatchRequest.parse(batch_form(dirs, **overrides))
    run = batch_tab.start(req, app.session.pair(settings(dirs)))
    for _ in run.run_to_end():
        pass
    return run


@pytest.mark.parametrize("drafter", BATCH_DRAFTERS)
def test_every_batched_drafter_runs_in_the_tab_greedy_as_plain(
    ranked_dirs: tuple[str, str], drafter: str
) -> None:
    app = SpecVizApp(*ranked_dirs)
    run = app_run(app, ranked_dirs, drafter=drafter, temperature=0, max_new=10)
    assert run.done and "finished" in outputs(app, ranked_dirs, drafter=drafter)[-1][0]
    for prompt, tokens in zip(PROMPTS, row_tokens(run), strict=True):
        s = settings(ranked_dirs, prompt=prompt, temperature=0, max_new=10)
        assert tokens == app.decode.start(s, app.session.pair(s), plain=True).finish()["tokens"]


def test_the_tab_defaults_to_the_trimmed_draft_where_the_pair_has_a_ranking(
    model_dirs: tuple[str, str], ranked_dirs: tuple[str, str]
) -> None:
    assert default_drafter(ranked_dirs[1]) == "model:trimmed" == default_drafter("bundled")
    assert default_drafter(model_dirs[1]) == "model" == default_drafter("org/hub-id")
    for dirs, expected in ((ranked_dirs, "model:trimmed"), (model_dirs, "model")):
        blocks = SpecVizApp(*dirs).build().blocks.values()
        [menu] = [b for b in blocks if getattr(b, "elem_id", None) == "sv-batch-drafter"]
        assert menu.value == expected and [c[1] for c in menu.choices] == list(BATCH_DRAFTERS)
    prompts = BATCH_DEFAULTS["prompts"].splitlines()
    assert 2 <= len(prompts) <= MAX_ROWS  # the default batch is a valid one


def test_the_batch_callback_takes_its_fields_by_name(app: SpecVizApp) -> None:
    names = list(inspect.signature(app.callbacks()["batch"]).parameters)
    assert names == [*PAIR_FIELDS, *BATCH_FIELDS, "progress"]
    assert "Enter 2 to 8 prompts" in batch_html(None)


def test_the_batch_through_gradio_client(
    served: tuple[SpecVizApp, str], model_dirs: tuple[str, str]
) -> None:
    from gradio_client import Client

    client = Client(served[1], verbose=False)
    status, view = client.predict(**batch_form(model_dirs, max_new=8), api_name="/batch")
    assert "finished: 3 rows" in status and view.count('class="sv-batch-row"') == 3
    status, _view = client.predict(**batch_form(model_dirs, prompts="one"), api_name="/batch")
    assert "sv-status-error" in status and "got 1" in status


def test_the_batch_tab_in_a_browser_at_1366x768(
    browser: Any, served: tuple[SpecVizApp, str]
) -> None:
    """Rows side by side, inside the page's width, every outcome coloured; bad input in red."""
    page = open_app(browser, served[1])
    page.get_by_role("tab", name="Batch").click()
    page.locator("#sv-batch-prompts textarea").fill("\n".join(PROMPTS))
    for name, value in (("temperature", 1), ("max_new", 16), ("seed", SEED)):
        field = page.locator(f"#sv-batch-{name} input")
        field.fill(str(value))
        field.press("Tab")
    page.locator("#sv-batch-run").click()
    page.wait_for_selector("#sv-batch-status:has-text('finished: 3 rows')")
    rows = [page.locator(f'#sv-batch-view [data-row="{r}"]') for r in range(3)]
    boxes = [row.bounding_box() for row in rows]
    assert all(b and b["x"] >= 0 and b["x"] + b["width"] <= 1366 for b in boxes)
    assert abs(boxes[0]["y"] - boxes[1]["y"]) < 1  # the first two rows side by side
    for kind in ("accepted", "rejected", "resampled", "bonus"):
        assert page.locator(f"#sv-batch-view .sv-{kind}").count() > 0, kind
    assert "tokens/s" in page.locator("#sv-batch-view .sv-batch-total").inner_text()
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.locator("#sv-batch-view").screenshot(path=str(SCREENSHOT))
    page.locator("#sv-batch-prompts textarea").fill("only one prompt")
    page.locator("#sv-batch-run").click()
    page.wait_for_selector("#sv-batch-status .sv-status-error:has-text('got 1')")
    page.close()


@pytest.mark.skipif(
    os.environ.get("SPECVIZ_SCREENSHOTS") != "docs",
    reason="set SPECVIZ_SCREENSHOTS=docs to rewrite the README's screenshots",
)
def test_the_batch_screenshot(browser: Any) -> None:
    """docs/app-batch.png: the Batch tab's default batch on the bundled pair, at 1366 wide."""
    app = SpecVizApp()  # the bundled pair
    demo = app.build()
    port = free_port()
    app.preload().join()  # loaded before any test goes on (launch finds it cached)
    app.launch(demo, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
    path = ROOT / "docs" / "app-batch.png"
    try:
        tab = browser.new_page(viewport={"width": 1366, "height": 768})
        tab.set_default_timeout(600_000)  # the first fetch of the bundled target included
        tab.goto(f"http://127.0.0.1:{port}/", wait_until="domcontentloaded")
        tab.add_style_tag(content="#sv-actions { position: static !important; }")
        tab.get_by_role("tab", name="Batch").click()
        tab.locator("#sv-batch-run").click()
        tab.wait_for_selector("#sv-batch-status:has-text('finished')")
        tab.mouse.move(0, 0)
        time.sleep(1)
        scrolled = tab.evaluate("window.scrollY")
        top, view = (tab.locator(s).bounding_box() for s in ("#sv-batch-prompts", "#sv-batch-view"))
        y = top["y"] + scrolled - 8
        bottom = view["y"] + scrolled + view["height"] + 8
        clip = {"x": view["x"] - 8, "y": y, "width": view["width"] + 16, "height": bottom - y}
        tab.screenshot(path=str(path), clip=clip, full_page=True)
        tab.close()
    finally:
        demo.close()
    assert path.stat().st_size > 20_000
