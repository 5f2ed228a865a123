"""suffix+model drafts with its draft model only while the target keeps enough of its tokens.

The kept share is read from the rounds' ends (rollback) and carried from request to request in
the suffix memory; below model_min_alpha a weak suffix match is proposed (or nothing), and every
probe_every-th such round the model drafts again. The
equivalence suite (ALPHA = 0.01, Holm-adjusted, as in test_suffix) runs with a gate that each
decode's own draws open or shut, and a known bug on the same runs is rejected.
"""

from __future__ import annotations

import pytest
import torch

from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import SpeculativeDecoder
from specviz.core.events import RoundSummary
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix.hybrid import SHARE_WINDOW, SuffixThenModelDrafter
from specviz.drafters.suffix.memory import SuffixMemory
from specviz.stats.mutants import MUTANTS
from specviz.stats.toy import random_pair

from .test_suffix import TOY_PROMPT, _memory, _suite, _toy_maker


def _hybrid(
    min_alpha: float, min_score: float = 100.0, memory: SuffixMemory | None = None
) -> SuffixThenModelDrafter:
    """The hybrid on the toy draft (as its own target), memory [1, 2, 3, 4] unless given; by
    default no suffix chain is strong enough to be proposed unasked: the gate decides every
    round."""
    _, draft = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    memory = _memory([1, 2, 3, 4]) if memory is None else memory
    options = DrafterOptions(memory=memory, suffix_factor=2.0,
                             suffix_min_score=min_score, model_min_alpha=min_alpha)  # fmt: skip
    hybrid = build_drafter("suffix+model", target=draft, draft=draft,
                           sampling=SamplingConfig(), options=options)  # fmt: skip
    assert isinstance(hybrid, SuffixThenModelDrafter)
    hybrid.prefill([5])
    return hybrid


def _round(hybrid: SuffixThenModelDrafter, ids: list[int], kept: int) -> int:
    """One round after ids: propose, commit `kept` of the drafts and one more token, end the
    round; the forward calls the proposal made."""
    draft = hybrid.propose(ids, 4, torch.Generator().manual_seed(0), ())
    ids += [*draft.tokens.tolist()[:kept], 1]
    hybrid.rollback(len(ids))
    return draft.forward_calls


def test_the_model_stops_drafting_when_its_tokens_are_rejected_and_probes_again() -> None:
    hybrid, ids = _hybrid(0.3), [5, 0]
    assert _round(hybrid, ids, kept=0) == 4  # 1 kept of 2 in advance: it drafts
    assert hybrid.kept == 1 and hybrid.drafted == 6 and hybrid.model_alpha < 0.3
    calls = [_round(hybrid, ids, kept=0) for _ in range(16)]
    assert calls == [0] * 7 + [4] + [0] * 7 + [4]  # held back, probing every 8th round


def test_a_model_whose_tokens_are_kept_drafts_every_weak_round() -> None:
    hybrid, ids = _hybrid(0.3), [5, 0]
    calls = [_round(hybrid, ids, kept=4) for _ in range(10)]
    assert calls == [4] * 10 and hybrid.model_alpha == pytest.approx(41 / 42)
    always, ids = _hybrid(0.0), [5, 0]  # 0: the model drafts whatever it keeps
    assert [_round(always, ids, kept=0) for _ in range(5)] == [4] * 5


def test_the_kept_share_carries_from_request_to_request_in_the_memory() -> None:
    memory = _memory([1, 2, 3, 4])
    first, ids = _hybrid(0.3, memory=memory), [5, 0]
    assert [_round(first, ids, kept=0) for _ in range(2)] == [4, 0]  # rejected, then held back
    assert memory.shares == {}  # written when the request ends
    first.remember(ids, 1)
    assert memory.shares == {"model": (1, 6)}
    second, ids = _hybrid(0.3, memory=memory), [5, 0]
    assert (second.kept, second.drafted) == (1, 6)  # starts where the first request ended
    assert _round(second, ids, kept=0) == 0  # so its first weak round is held back
    fresh, ids = _hybrid(0.3), [5, 0]  # another memory: one kept of two in advance
    assert (fresh.kept, fresh.drafted) == (1, 2) and _round(fresh, ids, kept=0) == 4
    alone = SuffixThenModelDrafter(first.model, first.suffix, min_model_alpha=0.3)
    assert (alone.kept, alone.drafted) == (1, 2)  # no share_key: counted per request only


def test_the_counts_halve_past_the_window_so_the_share_follows_recent_rounds() -> None:
    hybrid, ids = _hybrid(0.0), [5, 0]
    drafted = []
    for _ in range(100):
        _round(hybrid, ids, kept=0)
        drafted.append(hybrid.drafted)
    assert max(drafted) <= SHARE_WINDOW and min(drafted[80:]) > SHARE_WINDOW // 2
    assert hybrid.kept == 1  # every later token rejected: the advance count fades to one
    for _ in range(40):  # now every token is kept: the share climbs within the window
        _round(hybrid, ids, kept=4)
    assert hybrid.model_alpha > 0.5


def test_held_back_rounds_propose_the_weak_suffix_chain() -> None:
    hybrid = _hybrid(1.0, min_score=1.5)  # 1: the gate is shut from the start
    weak = hybrid.propose([5, 1, 2, 3], 4, torch.Generator(), ())  # score 1 < 1.5
    assert weak.tokens.tolist() == [4] and weak.forward_calls == 0 and hybrid.last == "suffix"


def test_bad_gate_settings_are_refused() -> None:
    with pytest.raises(ValueError, match=r"model_min_alpha must be in \[0, 1\]"):
        DrafterOptions(model_min_alpha=1.5)
    hybrid = _hybrid(0.3)
    with pytest.raises(ValueError, match="probe_every must be >= 1"):
        SuffixThenModelDrafter(hybrid.model, hybrid.suffix, probe_every=0)


def test_the_toy_decodes_shut_the_gate_or_keep_it_open_by_chance() -> None:
    """The suite below tests a gate that each decode's own draws decide: at 0.5, a first model
    round keeping 2 of its 4 drafts keeps the model drafting, one keeping fewer holds it back."""
    target, draft = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    shut, opened = 0, 0
    for seed in range(10):
        seeded = SamplingConfig(temperature=1.0, seed=seed)
        hybrid = _toy_maker("suffix+model", target, draft, model_min_alpha=0.5)(seeded)
        assert isinstance(hybrid, SuffixThenModelDrafter)
        decoder = SpeculativeDecoder(
            target, hybrid, TOY_PROMPT, sampling=seeded,
            speculation=SpeculationConfig(gamma=4, max_new_tokens=12),
        )  # fmt: skip
        rounds = [e for e in decoder.events() if isinstance(e, RoundSummary)]
        shut += hybrid.held_back > 0
        opened += sum(r.draft_forward_calls > 0 for r in rounds) >= 2
    assert shut >= 3 and opened >= 2


@pytest.mark.parametrize("setting_name", ["gamma=4 T=1", "gamma=2 T=0.7 top_p=0.8"])
def test_the_gated_hybrid_passes_the_equivalence_suite(setting_name: str) -> None:
    results = _suite("suffix+model", setting_name, model_min_alpha=0.5)
    assert not any(r.reject for r in results), [(r.name, r.p_value) for r in results]


def test_the_suite_rejects_a_known_bug_on_the_gated_hybrid() -> None:
    mutant = next(m for m in MUTANTS if m.name == "residual_is_p")
    results = _suite("suffix+model", "gamma=4 T=1", variant=mutant, model_min_alpha=0.5)
    assert any(r.reject for r in results), [(r.name, r.p_value) for r in results]
