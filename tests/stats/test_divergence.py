"""Where two greedy decodes differ: a rounding tie is told from a decoding error.

divergence() scores the first differing position with one forward of the target; these checks
compute the same logits independently (a whole-sequence forward) and build the three cases: a
token within TIE_TOLERANCE of the best (a tie), the runner-up of a clear winner (an error the
check must not excuse: the negative control), and a decode that ended first.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from specviz.api import autoregressive_generate
from specviz.core.config import SamplingConfig
from specviz.stats.identity import TIE_TOLERANCE, Divergence, divergence

from ..conftest import tiny_model

PROMPT = [3, 4, 5, 6, 3, 4]
GREEDY = SamplingConfig(temperature=0.0)


@pytest.fixture(scope="module")
def target() -> Any:
    return tiny_model("llama", seed=2, scale=3.0)


def _logits(target: Any, ids: list[int]) -> torch.Tensor:
    """The target's logits after ids (V,), from one forward without a cache."""
    with torch.no_grad():
        return target(torch.tensor([ids])).logits[0, -1].double()


def test_identical_decodes_have_no_divergence(target: Any, tokenizer: Any) -> None:
    plain = autoregressive_generate(
        target, tokenizer, PROMPT, max_new_tokens=8, stop=(), sampling=GREEDY
    )
    assert divergence(target, PROMPT, plain.tokens, list(plain.tokens)) is None


def test_a_runner_up_of_a_clear_winner_is_an_error_not_a_tie(target: Any, tokenizer: Any) -> None:
    ref = list(
        autoregressive_generate(
            target, tokenizer, PROMPT, max_new_tokens=8, stop=(), sampling=GREEDY
        ).tokens
    )
    at = 3
    logits = _logits(target, PROMPT + ref[:at])
    top = torch.topk(logits, 2)
    assert int(top.indices[0]) == ref[at]
    margin = float(top.values[0] - top.values[1])
    assert margin > 100 * TIE_TOLERANCE  # a clear winner in this toy model
    other = [*ref[:at], int(top.indices[1]), *ref[at + 1 :]]
    split = divergence(target, PROMPT, ref, other)
    assert split is not None and not split.tie
    assert (split.position, split.tokens) == (at, (ref[at], int(top.indices[1])))
    assert split.gap == pytest.approx(margin, abs=1e-9)


def test_a_token_within_the_tolerance_is_a_tie() -> None:
    assert Divergence(position=5, tokens=(1, 2), gap=TIE_TOLERANCE / 2).tie
    assert Divergence(position=5, tokens=(1, 2), gap=TIE_TOLERANCE).tie
    assert not Divergence(position=5, tokens=(1, 2), gap=2 * TIE_TOLERANCE).tie


def test_a_decode_that_ended_first_is_no_tie(target: Any, tokenizer: Any) -> None:
    ref = list(
        autoregressive_generate(
            target, tokenizer, PROMPT, max_new_tokens=8, stop=(), sampling=GREEDY
        ).tokens
    )
    split = divergence(target, PROMPT, ref, ref[:5])
    assert split == Divergence(position=5, tokens=(ref[5], None), gap=float("inf"))
    assert not split.tie


def test_the_identity_check_names_a_tie_and_passes_it() -> None:
    from specviz.stats.identity import IdentityRow, row_line

    fields = dict(prompt="p", drafter="cross:text", tokens=9, accepted=3, proposed=5)
    same = IdentityRow(plain=True, generate=True, diverges=None, **fields)  # type: ignore[arg-type]
    tie = IdentityRow(plain=False, generate=True, diverges=4, gap=2e-5, **fields)  # type: ignore[arg-type]
    wrong = IdentityRow(plain=False, generate=False, diverges=4, gap=0.5, **fields)  # type: ignore[arg-type]
    assert not same.tie and tie.tie and not wrong.tie
    assert "DIFFERS from token 4 (a rounding tie: gap 2.0e-05)" in row_line(tie)
    assert "tie" not in row_line(wrong) and "identical" in row_line(same)
