"""The EAGLE-3 head's lean drafting forward computes the head's function: its logits over the
draft vocabulary equal the module-by-module cache's on chains, trees and rollbacks; its drafters
report q zero off that vocabulary; and the registered eagle drafters decode exactly (greedy
tokens equal plain decoding's) on either target forward."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.names import drafters_where
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.tree_model import TreeShape
from specviz.heads.cache import Eagle3Cache
from specviz.heads.drafters import HeadDrafter, HeadTreeDrafter
from specviz.heads.eagle import Eagle3Head
from specviz.heads.eagle_lean import LeanEagle3Cache
from specviz.heads.tap import FusedFeatureCache, FusedFeatureLean
from specviz.heads.weights import save_eagle
from tests.conftest import VOCAB, char_tokenizer, tiny_model
from tests.heads.helpers import random_module

DRAFT_VOCAB = torch.tensor([3, 5, 6, 7, 8, 9, 10, 11, 12, 20, 21, 0])  # q = 0 on every other token
PROMPT = [5, 6, 7, 8, 5, 6, 9, 10]
EAGLE = drafters_where(lambda s: s.head == "eagle3")


@pytest.fixture(scope="module")
def target() -> Any:
    """A 6-layer tiny Llama (fused layers 2, 3, 3)."""
    return tiny_model("llama", seed=5, scale=3.0, num_hidden_layers=6)


def _head(target: Any, seed: int, vocab: torch.Tensor = DRAFT_VOCAB) -> Eagle3Head:
    module = random_module("eagle3", target, seed, vocab)
    assert isinstance(module, Eagle3Head)
    return module


def _pair(target: Any, head: Eagle3Head) -> tuple[Eagle3Cache, LeanEagle3Cache, Any]:
    """The module cache, the lean one, and a target cache both read."""
    ref, lean = Eagle3Cache(target, head), LeanEagle3Cache(target, head)
    forward = ref.attach(target, FusedFeatureCache)
    lean.features = ref.features
    return ref, lean, forward


def _same(lean: Tensor, ref: Tensor, vocab: torch.Tensor) -> None:
    """Lean logits (T, V_d) equal the module's (T, V) on the draft vocabulary, -inf off it."""
    torch.testing.assert_close(lean, ref[:, vocab], rtol=1e-9, atol=1e-9)
    off = torch.ones(ref.shape[-1], dtype=torch.bool)
    off[vocab] = False
    assert bool((ref[:, off] == float("-inf")).all())


def test_lean_logits_equal_the_modules_on_a_chain_and_its_rollback(target: Any) -> None:
    ref, lean, forward = _pair(target, _head(target, seed=3))
    ids = torch.tensor(PROMPT)
    forward.forward(ids[:-1])  # the target has scored every committed token but the last
    _same(lean.forward(ids), ref.forward(ids), DRAFT_VOCAB)
    for token in (11, 12, 20):  # drafted tokens go in with the head's own h
        step = torch.tensor([token])
        _same(lean.forward(step), ref.forward(step), DRAFT_VOCAB)
    torch.testing.assert_close(lean.outputs, ref.outputs, rtol=1e-9, atol=1e-9)
    assert len(lean) == len(ref) == len(PROMPT) + 3 and lean.real == ref.real == len(PROMPT)
    lean.crop(len(PROMPT) + 2), ref.crop(len(PROMPT) + 2)  # entries fed h are dropped
    assert len(lean) == len(ref) == len(PROMPT)
    forward.forward(torch.tensor([PROMPT[-1], 11]))  # the round's verification
    more = torch.tensor([11, 3])
    _same(lean.forward(more, keep=1), ref.forward(more, keep=1), DRAFT_VOCAB)
    assert lean.real == ref.real == len(PROMPT) + 2


def test_lean_logits_equal_the_modules_on_a_tree(target: Any) -> None:
    ref, lean, forward = _pair(target, _head(target, seed=4))
    ids = torch.tensor(PROMPT)
    forward.forward(ids[:-1])
    _same(lean.forward(ids, keep=1), ref.forward(ids, keep=1), DRAFT_VOCAB)
    base = len(PROMPT)
    for level, parents in enumerate(([base - 1, base - 1], [base, base + 1]), start=1):
        held = len(ref)
        tokens = torch.tensor([20, 21]) if level == 1 else torch.tensor([3, 5])
        visible = torch.zeros(2, held + 2, dtype=torch.bool)
        visible[:, :base] = True
        for row, parent in enumerate(parents):
            visible[row, parent] = True
            visible[row, held + row] = True
        positions = torch.full((2,), base - 1 + level)
        got = lean.forward(tokens, keep=2, positions=positions, visible=visible)
        _same(got, ref.forward(tokens, keep=2, positions=positions, visible=visible), DRAFT_VOCAB)
    torch.testing.assert_close(lean.outputs, ref.outputs, rtol=1e-9, atol=1e-9)


def test_a_float32_head_drafts_as_its_modules_do(target: Any) -> None:
    """In float32 (the shipped head's dtype on a CPU) the folded norms and fused products round
    differently from the modules, within float32's precision."""
    model = tiny_model("llama", seed=5, scale=3.0, num_hidden_layers=6).float()
    ref, lean, forward = _pair(model, _head(model, seed=5).float())
    ids = torch.tensor(PROMPT)
    forward.forward(ids[:-1])
    for step in (ids, torch.tensor([11]), torch.tensor([12])):
        want = ref.forward(step)[:, DRAFT_VOCAB]
        torch.testing.assert_close(lean.forward(step), want, rtol=1e-4, atol=1e-4)


def test_drafted_q_is_zero_off_the_draft_vocabulary(target: Any) -> None:
    head = _head(target, seed=6)
    sampling = SamplingConfig(temperature=1.0)
    for drafter in (
        HeadDrafter(LeanEagle3Cache(target, head), sampling, make_target_cache=FusedFeatureLean),
        HeadTreeDrafter(
            LeanEagle3Cache(target, head), sampling, shape=TreeShape(nodes=5, depth=2, width=2),
            sampled=True, make_target_cache=FusedFeatureLean,
        ),
    ):  # fmt: skip
        forward = drafter.target_cache(target)
        forward.forward(torch.tensor(PROMPT[:-1]))
        generator = torch.Generator().manual_seed(0)
        if isinstance(drafter, HeadDrafter):
            draft = drafter.propose(PROMPT, 3, generator, ())
            tokens, q = draft.tokens, draft.q_draft
        else:
            tree = drafter.propose_tree(PROMPT, 2, generator, ())
            tokens, q = tree.tokens, tree.q_draft
        off = torch.ones(VOCAB, dtype=torch.bool)
        off[DRAFT_VOCAB] = False
        assert q.shape[-1] == VOCAB and bool((q[:, off] == 0).all())
        laws = q[q.sum(-1) > 0]  # a tree's leaves were never expanded: their rows are 0
        assert laws.shape[0] >= (3 if isinstance(drafter, HeadDrafter) else 2)
        torch.testing.assert_close(laws.sum(-1), torch.ones(laws.shape[0], dtype=q.dtype))
        assert len(tokens) and all(int(t) in DRAFT_VOCAB.tolist() for t in tokens)


@pytest.fixture(scope="module")
def heads(target: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random EAGLE-3 head over tokens 2..V-1 saved for target (bf16 on disk)."""
    folder = tmp_path_factory.mktemp("eagle3")
    save_eagle(_head(target, seed=7, vocab=torch.arange(2, VOCAB)), target, 0, folder)
    return folder


@pytest.mark.parametrize("name", EAGLE)
@pytest.mark.parametrize("lean_target", [True, False])
def test_registered_eagle_drafters_keep_the_targets_greedy_tokens(
    target: Any, heads: Path, name: str, lean_target: bool
) -> None:
    tokenizer, greedy = char_tokenizer(), SamplingConfig(temperature=0.0)
    prompt = "abcabdabcab"
    plain = autoregressive_generate(target, tokenizer, prompt, sampling=greedy,
                                    max_new_tokens=20, stop=())  # fmt: skip
    options = DrafterOptions(heads=str(heads), tree_depth=3, tree_nodes=6, tree_width=2,
                             make_cache=None if lean_target else KVCache)  # fmt: skip
    drafter = build_drafter(name, target=target, sampling=greedy, options=options)
    result = speculative_generate(
        target, drafter, tokenizer, prompt, sampling=greedy,
        speculation=SpeculationConfig(gamma=3, max_new_tokens=20), stop=(),
    )  # fmt: skip
    assert result.tokens == plain.tokens and result.proposed > 0
    forward = drafter.target_cache(target)  # type: ignore[union-attr]
    assert isinstance(forward, FusedFeatureLean) is lean_target
