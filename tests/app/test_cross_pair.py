"""A pair whose draft has a tokenizer of its own runs in the app through a cross-tokenizer
drafter, whatever drafter the form names (specviz.app.drafting.for_pair)."""

from __future__ import annotations

from specviz.app.drafting import for_pair
from specviz.models.loading import CROSS_DRAFTER, ModelPair

from ..drafters.cross_pairs import char, char_bpe
from .test_app import settings

DIRS = ("target-folder", "draft-folder")  # the settings name them; nothing is loaded here


def test_a_draft_with_its_own_tokenizer_drafts_through_a_cross_tokenizer_drafter() -> None:
    s = settings(DIRS, drafter="model")
    two = ModelPair(target=None, draft=None, tokenizer=char(), draft_tokenizer=char_bpe())
    assert for_pair(s, two).drafter == CROSS_DRAFTER
    picked = ModelPair(target=None, draft=None, tokenizer=char(), draft_tokenizer=char_bpe(),
                       drafter="cross:text")  # fmt: skip
    assert for_pair(s, picked).drafter == "cross:text"  # the one load_pair was asked for
    asked = settings(DIRS, drafter="cross:text")
    assert for_pair(asked, two) == asked  # the form's cross-tokenizer drafter is kept


def test_a_pair_with_one_tokenizer_runs_the_settings_as_they_are() -> None:
    s = settings(DIRS, drafter="model")
    assert for_pair(s, ModelPair(target=None, draft=None, tokenizer=char())) == s
    same = ModelPair(target=None, draft=None, tokenizer=char(), draft_tokenizer=char())
    assert for_pair(s, same) == s
