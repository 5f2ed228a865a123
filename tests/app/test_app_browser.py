"""The app in a real browser (Debian chromium driven by playwright), on tiny local models.

Skipped where chromium or playwright is missing, except under CI=true, where that is a failure.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specviz.app.main import SpecVizApp

from .test_app import MAX_NEW, PROMPT, SEED, model_dirs, served, settings

__all__ = ["model_dirs", "served"]  # session fixtures shared with test_app

pytestmark = [  # gradio's queue calls pandas in ways pandas 3 deprecates: not ours to fix
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting':Warning"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated:Warning"),
]
CHROMIUM = "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = Path(__file__).resolve().parents[2] / "artifacts" / "app.png"
OUTCOMES = ("accepted", "rejected", "resampled", "bonus")


def _browser_or_skip() -> Any:
    """playwright's sync API, or a skip (a failure under CI=true) when it cannot run here."""
    in_ci = os.environ.get("CI", "").lower() == "true"
    missing = [] if CHROMIUM else ["chromium"]
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing.append("playwright")
    if missing:
        reason = f"{' and '.join(missing)} not installed (apt-get install chromium; pip playwright)"
        if in_ci:
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    return sync_playwright


@pytest.fixture(scope="module")
def page(served: tuple[SpecVizApp, str]) -> Iterator[Any]:
    """A chromium page with the app loaded."""
    sync_playwright = _browser_or_skip()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        tab = browser.new_page(viewport={"width": 1400, "height": 1000})
        tab.set_default_timeout(60_000)
        tab.goto(served[1], wait_until="domcontentloaded")
        tab.wait_for_selector("#sv-generate")
        yield tab
        browser.close()


def expected_outcomes(app: SpecVizApp, dirs: tuple[str, str]) -> Counter[str]:
    """How many tokens of each outcome the same settings give without the browser."""
    run = list(app.generate(settings(dirs)))[-1][0]
    return Counter(c.kind for c in run.cells())


def set_inputs(page: Any) -> None:
    """Type the test settings into the form (slider values through their number boxes)."""
    page.locator("#sv-prompt textarea").fill(PROMPT)
    page.locator("#sv-seed input").fill(str(SEED))
    for box, value in (("#sv-temperature", "1"), ("#sv-max_new", str(MAX_NEW))):
        field = page.locator(f"{box} input[type=number]")
        field.fill(value)
        field.press("Tab")  # commit the value to the slider


def test_generate_colours_tokens_plots_and_inspects(
    page: Any, served: tuple[SpecVizApp, str], model_dirs: tuple[str, str]
) -> None:
    expected = expected_outcomes(served[0], model_dirs)
    assert {"accepted", "rejected", "resampled"} <= set(expected)
    set_inputs(page)
    page.locator("#sv-generate").click()
    page.wait_for_selector("#sv-status:has-text('finished')")
    for kind in OUTCOMES:
        assert page.locator(f"#sv-legend .sv-{kind}").is_visible()
        assert page.locator(f"#sv-stream .sv-{kind}").count() == expected[kind], kind
    assert page.locator("#sv-stream .sv-round").count() >= 2
    page.wait_for_selector("#sv-acceptance .js-plotly-plot .scatterlayer .trace")
    token = page.locator("#sv-stream .sv-rejected").first
    p_x, q_x = token.get_attribute("data-p"), token.get_attribute("data-q")
    assert "p(x) target" in (token.get_attribute("title") or "")  # hover text
    token.click()
    inspector = page.locator("#sv-inspector")
    inspector.locator("text=p(x) target").wait_for()
    text = inspector.inner_text()
    assert "rejected" in text and f"p(x) target\t{p_x}" in text and f"q(x) draft\t{q_x}" in text
    resampled = page.locator("#sv-stream .sv-resampled").first
    resampled.focus()
    resampled.press("Enter")  # keyboard users inspect too
    inspector.locator("text=residual mass").wait_for()
    page.wait_for_selector("#sv-residual .js-plotly-plot .barlayer .trace")
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    assert SCREENSHOT.stat().st_size > 10_000


def test_step_mode_advances_one_round_per_click(page: Any) -> None:
    set_inputs(page)
    for n in (1, 2):
        page.locator("#sv-step").click()
        page.wait_for_selector(f"#sv-status:has-text('round {n} ·')")
    assert page.locator("#sv-stream .sv-round").count() == 2


def test_equivalence_lab_passes_the_real_sampler_and_catches_a_mutant(page: Any) -> None:
    page.get_by_role("tab", name="Equivalence lab").click()
    page.locator("#sv-lab-pair").get_by_label("toy pair (exact law known)").check()
    n = page.locator("#sv-lab-n input")
    n.fill("200")
    n.press("Tab")
    page.locator("#sv-lab-run").click()
    status = page.locator("#sv-lab-status")
    status.locator("text=no test rejects").wait_for()
    table = page.locator("#sv-lab-table")
    assert table.locator("tr.sv-pass").count() == 6 and table.locator("tr.sv-reject").count() == 0
    page.wait_for_selector("#sv-lab-joint .js-plotly-plot .barlayer .trace")
    mutant = page.locator("#sv-lab-mutant input")
    mutant.click()
    mutant.fill("accept_all")
    page.get_by_role("option", name="accept_all", exact=False).first.click()
    page.locator("#sv-lab-run").click()
    status.locator("text=caught").wait_for()
    assert "accept_all" in status.inner_text() and table.locator("tr.sv-reject").count() >= 1
