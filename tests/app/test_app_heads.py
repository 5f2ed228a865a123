"""Drafting heads in the app: the menu, decoding on the app's forward, and missing weights."""

from __future__ import annotations

from html import unescape
from pathlib import Path

import gradio as gr
import pytest

from specviz.app.drafting import make_drafter
from specviz.app.main import SpecVizApp
from specviz.app.tabs.lab import MODELS, lab_pair
from specviz.app.views.form import drafter_choices
from specviz.core.drafter import SharesTargetCache
from specviz.drafters.names import HEAD_DRAFTERS, REGISTRY, UNCONFIDENT_DRAFTERS, WIDE_DRAFTERS
from specviz.heads import lookup
from specviz.heads.tap import FeatureCache, FeatureLean
from specviz.stats.lab import REAL
from specviz.tune.defaults import Defaults

from ..conftest import tiny_model
from .test_app import heads_dir, lab_request, model_dirs, save_heads, settings

__all__ = ["heads_dir", "model_dirs"]  # fixtures shared with test_app

pytestmark = [  # gradio's queue calls pandas in ways pandas 3 deprecates: not ours to fix
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting':Warning"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated:Warning"),
]
STATUS = 2  # render()'s status output


def test_the_menu_offers_every_head_drafter_without_a_draft_model() -> None:
    offered = {name for _label, name in drafter_choices()}
    assert set(HEAD_DRAFTERS) <= offered
    assert all(settings(("t", "d"), drafter=name).draft is None for name in HEAD_DRAFTERS)
    assert {"eagle", "medusa", "ngram+eagle"} <= set(UNCONFIDENT_DRAFTERS)  # no stop on their q
    assert {n for n in HEAD_DRAFTERS if REGISTRY[n].tree} <= set(WIDE_DRAFTERS)


def test_a_head_verifies_on_the_forward_the_apps_plain_decoding_uses(
    model_dirs: tuple[str, str], heads_dir: str
) -> None:
    """The race sets plain decoding against the head's decode on the app's one forward
    (specviz.tune.defaults): the lean one as shipped, transformers' where chosen so."""
    for defaults, lean in (
        (Defaults(forward="lean", threads=None), True),
        (Defaults(forward="packed", threads=None), False),
    ):
        app = SpecVizApp(*model_dirs, heads=heads_dir, defaults=defaults)
        assert app.session.defaults.lean is lean and app.session.pairs.pack
        s = settings(model_dirs, drafter="eagle", temperature=0)
        pair = app.session.pair(s)
        drafter = make_drafter(s, pair, heads_dir, lean=lean)
        assert isinstance(drafter, SharesTargetCache)
        verify = drafter.target_cache(pair.target)
        assert isinstance(verify, FeatureLean if lean else FeatureCache)
        outs = list(app.decode.race(s))[-1]
        assert "identical ✓" in outs[-1]  # T = 0: the same text on the same forward


@pytest.mark.parametrize("drafter", ["medusa", "tree-medusa"])
def test_a_head_without_weights_says_so_in_the_note_and_the_status(
    model_dirs: tuple[str, str], tmp_path: Path, drafter: str
) -> None:
    app = SpecVizApp(*model_dirs, heads=str(tmp_path))  # a folder without weights
    *_fields, note = app.form.drafter_fields(drafter)
    assert "No weights" in note and "holds no" in note
    s = settings(model_dirs, drafter=drafter, temperature=0)
    status = list(app.decode.generate(s))[-1][STATUS]
    assert "sv-status-error" in status and "Traceback" not in status
    assert f"drafter cannot draft for this target: no head weights at {tmp_path}" in unescape(
        status
    )
    with pytest.raises(gr.Error, match="no head weights at"):
        list(app.lab.run(s, lab_request(MODELS, REAL, 20)))


def test_the_shipped_heads_missing_are_named_under_the_menu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lookup, "ASSETS", tmp_path)
    *_fields, note = SpecVizApp().form.drafter_fields("tree-eagle")
    assert "the tree-eagle drafter reads the eagle3 head shipped" in note and "--heads" in note
    (tmp_path / "eagle3.safetensors").write_bytes(b"")
    *_fields, note = SpecVizApp().form.drafter_fields("tree-eagle")
    assert "No weights" not in note and "eagle3.safetensors" in note


def test_heads_trained_for_another_target_are_refused_in_the_status(
    model_dirs: tuple[str, str], tmp_path: Path
) -> None:
    other = tmp_path / "other"
    tiny_model("llama", seed=9, scale=3.0).save_pretrained(other)
    app = SpecVizApp(*model_dirs, heads=save_heads(str(other), tmp_path))
    status = list(app.decode.generate(settings(model_dirs, drafter="medusa", temperature=0)))[-1][
        STATUS
    ]
    assert "sv-status-error" in status and "was trained on the features of" in unescape(status)


def test_the_toy_pair_grows_a_head_trees_kind_of_tree_with_its_draft_model() -> None:
    kinds = {}
    for drafter in ("tree-eagle", "tree-medusa", "eagle", "ngram+eagle"):
        kinds[drafter] = lab_pair(settings(("t", "d"), drafter=drafter), None).drafter
    assert kinds == {
        "tree-eagle": "tree-model", "tree-medusa": "tree-model", "eagle": "model",
        "ngram+eagle": "model",
    }  # fmt: skip
