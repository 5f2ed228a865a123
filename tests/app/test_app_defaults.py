"""The app's forward path and threads: the tuned profile's for the pair it starts on, else the
shipped DEFAULT_CONFIG's (specviz.tune.defaults), resolved once at its start."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specviz.app.main import SpecVizApp, startup_defaults
from specviz.fast.packed import is_packed
from specviz.tune.defaults import shipped_defaults
from specviz.tune.profile import Choice

from ..tune.profiles import make_profile, write_profile
from .test_app import model_dirs, settings

__all__ = ["model_dirs"]  # the fixture shared with test_app

pytestmark = [  # gradio's queue calls pandas in ways pandas 3 deprecates: not ours to fix
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting':Warning"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated:Warning"),
]


def test_without_a_profile_the_app_runs_the_shipped_default(model_dirs: tuple[str, str]) -> None:
    app = SpecVizApp(*model_dirs)
    assert app.session.defaults == shipped_defaults()
    assert app.session.pairs.pack is shipped_defaults().pack


def test_the_app_loads_and_decodes_on_the_profiles_forward_and_threads(
    model_dirs: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECVIZ_PROFILES", str(tmp_path))
    speculative = Choice(forward="transformers", threads=2)
    write_profile(tmp_path, make_profile(*model_dirs, "float32", speculative=speculative))
    before = torch.get_num_threads()
    try:
        defaults = startup_defaults(*model_dirs, "float32", threads=None)
        assert torch.get_num_threads() == 2 and defaults.forward == "transformers"
        startup_defaults(*model_dirs, "float32", threads=1)  # --threads wins
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    app = SpecVizApp(*model_dirs)  # resolves the same profile
    assert app.session.defaults == defaults and app.session.pairs.pack is False
    s = settings(model_dirs, temperature=0, max_new=6)
    pair = app.session.pair(s)
    assert not any(is_packed(m) for m in pair.target.modules())  # transformers' own weights
    outs = list(app.decode.generate(s))[-1]
    assert "sv-status-error" not in str(outs)
