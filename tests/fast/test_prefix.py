"""PrefixCache: a target's cache kept across requests changes no decode, and skips the prefix.

Each decode below runs twice on the same seed, once from a fresh cache and once from a
PrefixCache that holds an earlier request: the tokens must be the same (float64 models, so a
reused key equals a recomputed one to rounding), and the reused prefix must be what the two
prompts share. A cache handed over uncropped (all it holds, not the shared prefix) is the
negative control: it does not match the prompt, and the same check catches it.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix.memory import SuffixMemory
from specviz.fast.lean import lean_target_cache
from specviz.fast.prefix import HeldCache, PrefixCache, common_prefix

from ..conftest import VOCAB, tiny_model

FIRST = [3, 4, 5, 6, 3, 4, 5, 7, 3, 4, 9, 10, 11, 3, 4, 5]
SECOND = [*FIRST, 12, 13, 3, 4, 5, 6]  # an agent's next request: the conversation so far, and more
OTHER = [3, 4, 5, 20, 21, 22, 3, 4]  # shares three tokens with FIRST
SPEC = SpeculationConfig(gamma=3, max_new_tokens=12)


@pytest.fixture(scope="module")
def target() -> Any:
    return tiny_model("llama", seed=1, scale=3.0)


def _decode(target: Any, tokenizer: Any, kind: str, ids: list[int], seed: int, make: Any) -> Any:
    sampling = SamplingConfig(temperature=1.0 if seed else 0.0, seed=seed)
    if kind == "plain":
        return autoregressive_generate(
            target, tokenizer, ids, sampling=sampling, max_new_tokens=12, stop=(), make_cache=make
        )
    drafter = build_drafter(
        kind, target=target, sampling=sampling, options=DrafterOptions(memory=SuffixMemory())
    )
    return speculative_generate(
        target, drafter, tokenizer, ids, sampling=sampling, speculation=SPEC, stop=(),
        make_cache=make,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["plain", "suffix", "ngram", "tree-suffix", "tree-ngram"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_reused_prefix_changes_no_token(target, tokenizer, kind: str, seed: int) -> None:
    prefix = PrefixCache()
    first = _decode(target, tokenizer, kind, FIRST, seed, prefix.reuse(FIRST))
    assert prefix.reused == 0 and len(prefix) >= len(FIRST) - 1
    reused = _decode(target, tokenizer, kind, SECOND, seed, prefix.reuse(SECOND))
    fresh = _decode(target, tokenizer, kind, SECOND, seed, None if kind != "plain" else KVCache)
    assert reused.tokens == fresh.tokens
    # the first decode's prompt and its output up to where the second prompt departs from it
    assert prefix.reused == common_prefix([*FIRST, *first.tokens], SECOND) >= len(FIRST)
    held = prefix.held
    assert held is not None and held.ids == [*SECOND, *reused.tokens][: len(held)]


def test_the_first_pass_scores_only_what_is_new(target, tokenizer) -> None:
    """The speculative run's first round carries only the prompt tokens not held."""
    prefix = PrefixCache()
    _decode(target, tokenizer, "suffix", FIRST, 0, prefix.reuse(FIRST))
    result = _decode(target, tokenizer, "suffix", OTHER, 0, prefix.reuse(OTHER))
    assert prefix.reused == 3
    fresh = _decode(target, tokenizer, "suffix", OTHER, 0, None)
    assert result.tokens == fresh.tokens


def test_a_whole_prompt_held_still_scores_its_last_token(target, tokenizer) -> None:
    prefix = PrefixCache()
    _decode(target, tokenizer, "plain", FIRST, 0, prefix.reuse(FIRST))
    again = _decode(target, tokenizer, "plain", FIRST, 0, prefix.reuse(FIRST))
    assert prefix.reused == len(FIRST) - 1
    assert again.tokens == _decode(target, tokenizer, "plain", FIRST, 0, KVCache).tokens


def test_a_fast_forward_path_is_kept_too(target, tokenizer) -> None:
    prefix = PrefixCache(lean_target_cache)
    _decode(target, tokenizer, "tree-suffix", FIRST, 1, prefix.reuse(FIRST))
    reused = _decode(target, tokenizer, "tree-suffix", SECOND, 1, prefix.reuse(SECOND))
    assert type(prefix.held.inner).__name__ != "KVCache"  # type: ignore[union-attr]
    fresh = _decode(target, tokenizer, "tree-suffix", SECOND, 1, lean_target_cache)
    assert reused.tokens == fresh.tokens and prefix.reused >= len(FIRST)


def test_a_cache_not_cropped_to_the_shared_prefix_is_caught(target, tokenizer) -> None:
    """Negative control: the check above fails for a cache handed over with all it holds."""
    held = HeldCache(KVCache(target))
    _decode(target, tokenizer, "suffix", FIRST, 0, lambda _: held)
    longer = OTHER * 4  # longer than what is held, so the decode feeds its tail after it
    assert len(held) < len(longer)
    broken = _decode(target, tokenizer, "suffix", longer, 0, lambda _: held)
    fresh = _decode(target, tokenizer, "suffix", longer, 0, None)
    assert broken.tokens != fresh.tokens


def test_another_target_and_an_empty_prompt_are_refused(target, tokenizer) -> None:
    prefix = PrefixCache()
    _decode(target, tokenizer, "plain", FIRST, 0, prefix.reuse(FIRST))
    other = tiny_model("llama", seed=5)
    with pytest.raises(ValueError, match="one PrefixCache per target"):
        prefix.reuse(FIRST)(other)
    with pytest.raises(ValueError, match="prompt is empty"):
        prefix.reuse([])
    prefix.clear()
    assert len(prefix) == 0
    prefix.reuse(FIRST)(other)  # cleared: any target again


def test_a_drafter_that_shares_the_targets_cache_refuses_it(target, tokenizer) -> None:
    sampling = SamplingConfig(temperature=0)
    drafter = build_drafter(
        "early-exit:shared", target=target, sampling=sampling,
        options=DrafterOptions(exit_layer=1),
    )  # fmt: skip
    with pytest.raises(ValueError, match="shares the target's cache"):
        speculative_generate(
            target, drafter, tokenizer, FIRST, sampling=sampling, speculation=SPEC,
            make_cache=PrefixCache().reuse(FIRST),
        )  # fmt: skip


def test_held_ids_follow_a_trees_kept_path(target) -> None:
    held = HeldCache(KVCache(target))
    held.forward(torch.tensor([1, 2, 3, 4, 5]))
    held.keep_only(torch.tensor([0, 1, 3]))
    assert held.ids == [1, 2, 4] and len(held) == 3
    held.crop(2)
    assert held.ids == [1, 2] and len(held) == 2
    assert VOCAB > 5


def test_an_adapter_for_another_width_is_left_out_or_refused(target, tmp_path) -> None:
    """The shipped adapters are the bundled target's: another target drafts without them, and
    an adapter file given for the wrong width is a clear error, not a loading trace."""
    from safetensors.torch import save_file

    from specviz.drafters.early_exit import Adapter, build_early_exit, shipped_adapter

    assert shipped_adapter(target, 1) is None
    _, used = build_early_exit(target, 1)
    assert used is None
    wrong = tmp_path / "adapter.safetensors"
    save_file(Adapter(8).state_dict(), str(wrong))
    with pytest.raises(ValueError, match="hidden size of 8, the target's is 32"):
        build_early_exit(target, 1, wrong)


@pytest.mark.parametrize("kind", ["plain", "tree-ngram", "tree-suffix", "suffix"])
@pytest.mark.parametrize("seed", [0, 1])
def test_one_cache_across_an_agents_requests_changes_no_token(
    target, tokenizer, kind, seed
) -> None:
    """Five requests, each the conversation so far (its prompt, its answer) and a new turn, as an
    agent sends them, through one PrefixCache: every decode equals a fresh one, and after each the
    held ids are the prompt and the tokens it fed (trees: after every kept path)."""
    prefix, conversation = PrefixCache(), list(FIRST)
    for turn in range(5):
        result = _decode(target, tokenizer, kind, conversation, seed, prefix.reuse(conversation))
        fresh = _decode(
            target, tokenizer, kind, conversation, seed, None if kind != "plain" else KVCache
        )
        assert result.tokens == fresh.tokens, turn
        held = prefix.held
        assert held is not None and held.ids == [*conversation, *result.tokens][: len(held)]
        assert len(held) >= len(conversation) + len(result.tokens) - 1
        assert prefix.reused >= (len(conversation) - 4 if turn else 0)  # all but the new turn
        conversation += [*result.tokens, 12 + turn, 3, 4]  # the answer, then the next turn
