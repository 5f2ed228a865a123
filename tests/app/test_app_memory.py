"""The app's suffix memory: one per session, fed by every suffix decode run to its end, shown
with how each round drafted, and emptied by Clear memory (handlers called directly, tiny pair)."""

from __future__ import annotations

from html import unescape
from typing import Any

import pytest

from specviz.app import views
from specviz.app.main import SpecVizApp
from specviz.core.events import SuffixLookup

from .test_app import model_dirs, settings

__all__ = ["model_dirs"]  # the session fixture shared with test_app

pytestmark = [  # gradio's queue calls pandas in ways pandas 3 deprecates: not ours to fix
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting':Warning"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated:Warning"),
]
PROMPT = "the cat sat on the mat"


def generate(app: SpecVizApp, dirs: tuple[str, str], **overrides: Any) -> views.Run:
    """A whole decode through the Generate handler, at T = 0; its run."""
    s = settings(dirs, prompt=PROMPT, temperature=0, max_new=24, **overrides)
    run = list(app.decode.generate(s))[-1][0]
    assert isinstance(run, views.Run) and run.done
    return run


def sources(run: views.Run) -> set[str]:
    """Where the run's suffix rounds matched."""
    return {e.source for e in run.log if isinstance(e, SuffixLookup)}


def output(run: views.Run) -> tuple[int, ...]:
    return tuple(c.token for c in run.cells() if c.emitted)


def test_the_memory_keeps_each_request_across_generations_until_cleared(
    model_dirs: tuple[str, str],
) -> None:
    app = SpecVizApp(*model_dirs)
    memory = app.session.memory
    assert "empty" in app.decode.memory_line()
    first = generate(app, model_dirs, drafter="suffix")
    assert memory.requests == (output(first),)  # the output, without its prompt
    second = generate(app, model_dirs, drafter="suffix")
    assert app.session.memory is memory and memory.requests == (output(first), output(second))
    assert output(second) == output(first)  # T = 0: the target's greedy text both times
    assert "memory" in sources(second) and "memory" not in sources(first)
    assert len(second.rounds) < len(first.rounds)  # the second copies the first: fewer passes
    detail, line = app.decode.after_decode(second)
    assert f"2 requests, {len(memory)} tokens" in line
    assert 'data-kind="suffix_lookup"' in detail and "round" in detail
    from_memory = next(e.round for e in second.log if getattr(e, "source", "") == "memory")
    token = next(c.index for c in second.cells() if c.round == from_memory)
    shown = unescape(app.decode.round_view(second, token))
    assert f'data-round="{from_memory}"' in shown and "in the memory of earlier requests" in shown
    assert "empty" in app.decode.clear_memory()
    assert len(app.session.memory) == 0 and app.session.memory is not memory
    third = generate(app, model_dirs, drafter="suffix")
    assert "memory" not in sources(third) and len(third.rounds) == len(first.rounds)
    assert app.session.memory.requests == (output(third),)


def test_only_a_suffix_decode_run_to_its_end_feeds_the_memory(
    model_dirs: tuple[str, str],
) -> None:
    app = SpecVizApp(*model_dirs)
    generate(app, model_dirs, drafter="model")
    assert len(app.session.memory) == 0  # the draft model remembers nothing
    s = settings(model_dirs, drafter="tree-suffix", prompt=PROMPT, temperature=0, max_new=24)
    run = None
    for _ in range(200):
        run = list(app.decode.step(run, s))[-1][0]
        if run.done:
            break
        assert len(app.session.memory) == 0  # not before the decode's end
    assert run is not None and run.done
    assert app.session.memory.requests == (output(run),)
    assert "1 request" in app.decode.after_decode(run)[1]
