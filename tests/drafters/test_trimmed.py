"""The trimmed-head draft: q = 0 off the head, same logits on it, and the output law stays exact."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specviz.core.config import SamplingConfig
from specviz.drafters.model import ModelDrafter
from specviz.drafters.trimmed import load_head_tokens, save_ranking, trim_head
from specviz.models.bundled import bundled_draft_dir
from specviz.stats.mutants import MUTANTS
from specviz.stats.suite import check_setting, default_settings, family_adjusted

from ..conftest import EOS, VOCAB, PairFactory, greedy_plain_and_speculative

HEAD = torch.tensor([EOS, *range(1, VOCAB, 2)])  # <eos> and every other character
PROMPT = [20, 8, 5, 27]


def test_trimmed_head_scores_its_tokens_like_the_full_head(pair: PairFactory) -> None:
    _, draft = pair("llama")
    trimmed = trim_head(draft, HEAD)
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        full, part = draft(ids).logits[0, -1], trimmed(ids).logits[0, -1]
    assert part.shape == (HEAD.shape[0],)
    assert torch.allclose(part, full[HEAD], atol=1e-12, rtol=0)
    assert draft.get_output_embeddings().weight.shape[0] == VOCAB  # the original is untouched


def test_trimmed_drafter_proposes_only_head_tokens(pair: PairFactory) -> None:
    _, draft = pair("gpt2")
    sampling = SamplingConfig(temperature=1.0)
    drafter = ModelDrafter(draft, sampling, VOCAB, head_tokens=HEAD)
    drafter.prefill(PROMPT[:-1])
    proposal = drafter.propose(PROMPT, 6, torch.Generator().manual_seed(0), stop_ids=())
    off_head = torch.ones(VOCAB, dtype=torch.bool)
    off_head[HEAD] = False
    assert set(proposal.tokens.tolist()) <= set(HEAD.tolist())
    assert proposal.q_draft.shape == (6, VOCAB) and float(proposal.q_draft[:, off_head].sum()) == 0
    assert torch.allclose(proposal.q_draft.sum(-1), torch.ones(6, dtype=proposal.q_draft.dtype))


def test_greedy_output_with_a_trimmed_head_equals_plain_greedy(
    pair: PairFactory,
    tokenizer,
) -> None:
    target, draft = pair("llama")
    plain, spec, accepted = greedy_plain_and_speculative(
        target, target, draft, tokenizer, PROMPT, HEAD
    )
    assert spec == plain and accepted > 0


def _trimmed(draft):
    return lambda sampling: ModelDrafter(draft, sampling, VOCAB, head_tokens=HEAD)


def test_trimmed_drafter_passes_the_equivalence_suite(pair: PairFactory) -> None:
    """Family-wise alpha 0.01 (Holm), fixed seeds; half the vocabulary has q = 0."""
    target, draft = pair("gpt2")
    setting = next(s for s in default_settings() if s.name == "gamma=4 T=1")
    results = family_adjusted(
        check_setting(
            target, None, PROMPT, setting, n=800, alpha=0.01, make_drafter=_trimmed(draft)
        )
    )
    assert not any(r.reject for r in results), [(r.name, r.p_value) for r in results]


@pytest.mark.parametrize("mutant_name", ["accept_all", "residual_is_p"])
def test_trimmed_drafter_mutants_are_rejected(pair: PairFactory, mutant_name: str) -> None:
    target, draft = pair("gpt2")
    setting = next(s for s in default_settings() if s.name == "gamma=4 T=1")
    mutant = next(m for m in MUTANTS if m.name == mutant_name)
    results = family_adjusted(
        check_setting(
            target,
            None,
            PROMPT,
            setting,
            n=800,
            alpha=0.01,
            variant=mutant,
            make_drafter=_trimmed(draft),
        )
    )
    assert any(r.reject for r in results), [(r.name, r.p_value) for r in results]


def test_head_tokens_come_from_the_ranking_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"needs token_ranking\.safetensors in the draft folder"):
        load_head_tokens(tmp_path)
    save_ranking(torch.tensor([3, 1, 2, 0]), tmp_path)
    assert load_head_tokens(tmp_path, size=2).tolist() == [3, 1]
    with pytest.raises(ValueError, match=r"head size must be in \[1, 4\]"):
        load_head_tokens(tmp_path, size=5)


def test_bundled_draft_ships_a_full_ranking() -> None:
    ranking = load_head_tokens(bundled_draft_dir(), size=49_152)
    assert sorted(ranking.tolist()) == list(range(49_152))
