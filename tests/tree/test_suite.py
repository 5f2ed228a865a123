"""The equivalence suite on tree drafters: the real sampler passes; every tree mutant is caught.

Significance: each test at ALPHA = 0.01, Holm-adjusted across one run (family-wise 0.01), on
the toy pair after a prompt that repeats (so n-gram trees branch). Seeds are fixed, so every
verdict is deterministic. The negative controls are the tree mutants, rejected with estimated
power >= 0.99 at the strictest Holm level; `specviz verify` runs the same suite. On a tiny
Llama target (8 tokens, so the law of 4 tokens is enumerated) the draft-model trees pass through
transformers' target forward and through specviz.fast.lean's, whose compaction skipped is
caught the same way.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
import torch

from specviz.cli import main
from specviz.cli.verify import toy_unsupported
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import EMITTING, RoundSummary, TreeProposed
from specviz.drafters.names import TREE_DRAFTERS
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.fast.lean import LeanLlama, lean_target_cache
from specviz.stats.laws import EXACT_VARIANT, Variant, draw, speculative_sampler
from specviz.stats.mutants import MUTANTS, TREE_MUTANTS, TREE_SHOWS_IN
from specviz.stats.suite import check_setting, family_adjusted, run_suite, tree_settings
from specviz.stats.testing import estimated_power
from specviz.stats.toy import REPEATING_PROMPT, random_pair
from specviz.tree.decoding import TreeDecoder
from tests.conftest import perturbed_copy, tiny_model

ALPHA = 0.01
N = 600  # samples per sampler and setting
DEPTH = DrafterOptions().tree_depth
PROMPT = list(REPEATING_PROMPT)
SETTINGS = {s.name: s for s in tree_settings(DEPTH, stop_id=0)}
# the drafting heads' trees need hidden states the toy pair lacks: tests/heads/test_suite.py
TOY_TREES = tuple(name for name in TREE_DRAFTERS if toy_unsupported(name) is None)


@pytest.fixture(scope="module")
def toy() -> tuple[torch.nn.Module, torch.nn.Module]:
    return random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)


def _maker(name: str, target: Any, draft: Any) -> Any:
    return lambda sampling: build_drafter(name, target=target, draft=draft, sampling=sampling)


def _events(toy: Any, name: str, seed: int, **kwargs: Any) -> list[Any]:
    target, draft = toy
    sampling = SamplingConfig(temperature=1.0, seed=seed)
    drafter = _maker(name, target, draft)(sampling)
    decoder = TreeDecoder(target, drafter, PROMPT, sampling=sampling, **kwargs)
    return list(decoder.events())


@pytest.mark.parametrize("name", TOY_TREES)
def test_tree_drafters_branch_on_the_toy_pair(toy: Any, name: str) -> None:
    """The suite tests real trees: every first round has a node with several children."""
    for seed in range(20):
        first = next(
            e for e in _events(toy, name, seed, max_new_tokens=5) if isinstance(e, TreeProposed)
        )
        assert max(Counter(first.parents).values()) >= 2, (name, seed, first.parents)
    if name == "tree-ngram":  # the prompt's three continuations of (1, 2), latest first
        roots = [t for t, parent in zip(first.tokens, first.parents, strict=True) if parent == -1]
        assert roots == [5, 4, 3]


def test_each_tree_setting_drafts_the_full_depth_in_the_first_round(toy: Any) -> None:
    for setting in SETTINGS.values():
        target, draft = toy
        drafter = _maker("tree-model", target, draft)(setting.sampling)
        decoder = TreeDecoder(
            target,
            drafter,
            PROMPT,
            sampling=setting.sampling,
            max_new_tokens=setting.speculation.max_new_tokens,
            stop_ids=setting.stop_ids,
        )
        first = next(e for e in decoder.events() if isinstance(e, RoundSummary))
        assert first.gamma == DEPTH, setting.name


def test_no_token_follows_an_accepted_stop_token(toy: Any) -> None:
    """A stop token kept as the last node of the path ends the decode (no bonus after it)."""
    for seed in range(50):
        events = _events(toy, "tree-model", seed, max_new_tokens=8, stop_ids={0})
        tokens = [e.token for e in events if isinstance(e, EMITTING)]
        assert 0 not in tokens[:-1], (seed, tokens)


@pytest.mark.parametrize("name", TOY_TREES)
def test_exact_tree_sampler_passes_every_tree_setting(toy: Any, name: str) -> None:
    target, draft = toy
    results = run_suite(
        target,
        draft,
        PROMPT,
        list(SETTINGS.values()),
        n=N,
        alpha=ALPHA,
        make_drafter=_maker(name, target, draft),
    )
    failed = [(r.name, r.p_value) for r in results if r.reject]
    assert not failed, failed
    assert len(results) >= 4 * len(SETTINGS)  # joint, marginals, two-sample and KS per setting


@pytest.mark.parametrize("mutant", TREE_MUTANTS, ids=lambda m: m.name)
def test_each_tree_mutant_is_rejected(toy: Any, mutant: Variant) -> None:
    target, draft = toy
    drafter, setting = TREE_SHOWS_IN[mutant.name]
    results = family_adjusted(
        check_setting(
            target,
            draft,
            PROMPT,
            SETTINGS[setting],
            n=N,
            alpha=ALPHA,
            variant=mutant,
            make_drafter=_maker(drafter, target, draft),
        )
    )
    rejected = [r for r in results if r.reject]
    assert rejected, f"{mutant.name} slipped through: {[(r.name, r.p_value) for r in results]}"
    level = ALPHA / len(results)  # the strictest Holm threshold: power there bounds power below
    best = max(estimated_power(r, level) for r in rejected if r.df > 0)
    assert best >= 0.99, f"{mutant.name}: estimated power {best:.3f}"


def test_a_mutant_needs_a_drafter_of_its_kind(toy: Any) -> None:
    target, draft = toy
    setting = SETTINGS["tree T=1"]
    for variant, name, kind in (
        (MUTANTS[0], "tree-model", "chain"),
        (TREE_MUTANTS[0], "model", "tree"),
    ):
        sampler = speculative_sampler(
            target,
            draft,
            PROMPT,
            sampling=setting.sampling,
            speculation=SpeculationConfig(gamma=2, max_new_tokens=3),
            k=3,
            variant=variant,
            make_drafter=_maker(name, target, draft),
        )
        with pytest.raises(ValueError, match=f"needs a {kind} drafter"):
            draw(sampler, 1)
    assert not EXACT_VARIANT.swaps_tree and not EXACT_VARIANT.swaps_chain
    assert all(m.swaps_tree and not m.swaps_chain for m in TREE_MUTANTS)
    assert all(m.swaps_chain and not m.swaps_tree for m in MUTANTS)


# --- specviz verify ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", TOY_TREES)
def test_verify_runs_each_tree_drafter_on_the_toy_pair(capsys: Any, name: str) -> None:
    assert main(["verify", "--drafter", name, "--settings", "quick", "--n", "20"]) == 0
    out = capsys.readouterr().out
    assert "tree T=1" in out and "0 of" in out


def test_verify_takes_the_tree_shape(capsys: Any) -> None:
    argv = ["verify", "--drafter", "tree-model:sampled", "--settings", "quick", "--n", "20"]
    assert main([*argv, "--tree-nodes", "3", "--tree-depth", "2", "--tree-width", "2"]) == 0
    assert main([*argv, "--tree-nodes", "0"]) == 2
    assert "--tree-nodes must be >= 1" in capsys.readouterr().err


def test_verify_rejects_typical_acceptance_with_a_tree_drafter(capsys: Any) -> None:
    """Negative control of the command: the lossy rule is rejected (exit 1)."""
    argv = ["verify", "--drafter", "tree-ngram", "--settings", "quick", "--n", "200"]
    assert main([*argv, "--mutant", "tree_typical"]) == 1
    out = capsys.readouterr().out
    assert "LOSSY" in out and "REJECT" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--drafter", "model", "--mutant", "tree_typical"], "applies to the tree drafters"),
        (["--drafter", "tree-model", "--mutant", "accept_all"], "applies to the chain drafters"),
        (["--drafter", "ngram", "--tree-depth", "2"], "shapes the trees of tree drafters"),
    ],
)
def test_verify_refuses_what_the_drafter_cannot_take(
    capsys: Any, argv: list[str], message: str
) -> None:
    assert main(["verify", "--settings", "quick", *argv]) == 2
    assert message in capsys.readouterr().err


# --- verified through specviz.fast.lean's target forward ----------------------------------------


LEAN = Variant(name="exact, lean target", tree_cache=lean_target_cache)
KEYS_KEPT = next(v for v in TREE_MUTANTS if v.name == "tree_rejected_keys_kept")


LLAMA_PROMPT = [1, 2, 3, 4]
LLAMA_OPTIONS = DrafterOptions(tree_nodes=6, tree_depth=2, tree_width=2)
LLAMA_SETTINGS = {s.name: s for s in tree_settings(2, stop_id=0)}


@pytest.fixture(scope="module")
def llama() -> tuple[Any, Any]:
    """A tiny Llama target over 8 tokens (its law of 4 tokens enumerable) and a noisy draft."""
    target = tiny_model("llama", seed=5, scale=3.0, vocab_size=8)
    return target, perturbed_copy(target, seed=2, noise=0.4)


def _llama_run(llama: Any, name: str, setting: str, variant: Variant) -> list[Any]:
    target, draft = llama
    return check_setting(
        target, draft, LLAMA_PROMPT, LLAMA_SETTINGS[setting], n=N, alpha=ALPHA, variant=variant,
        make_drafter=lambda s: build_drafter(
            name, target=target, draft=draft, sampling=s, options=LLAMA_OPTIONS
        ),
    )  # fmt: skip


@pytest.mark.parametrize("name", ["tree-model", "tree-model:sampled"])
@pytest.mark.parametrize("variant", [EXACT_VARIANT, LEAN], ids=["hf", "lean"])
def test_trees_verified_through_either_target_forward_pass(
    llama: Any, name: str, variant: Variant
) -> None:
    """The same tree drafters on a Llama target, verified through transformers' forward and
    through specviz.fast.lean's (a tree pass with its mask, then the kept path's compaction)."""
    results = family_adjusted(
        [r for s in ("tree T=1", "tree EOS in round") for r in _llama_run(llama, name, s, variant)]
    )
    failed = [(r.name, r.p_value) for r in results if r.reject]
    assert not failed, failed
    sampling = SETTINGS["tree T=1"].sampling
    probe = TreeDecoder(llama[0], _maker(name, *llama)(sampling), LLAMA_PROMPT, sampling=sampling,
                        max_new_tokens=3, make_cache=variant.tree_cache or KVCache)  # fmt: skip
    assert isinstance(probe.target_cache, LeanLlama) is (variant is LEAN)


def test_rejected_keys_kept_in_the_lean_target_forward_are_caught(llama: Any) -> None:
    """Negative control: the compaction skipped on the lean forward is rejected."""
    variant = replace(KEYS_KEPT, tree_cache=lean_target_cache)
    results = family_adjusted(_llama_run(llama, "tree-model:sampled", "tree EOS in round", variant))
    rejected = [r for r in results if r.reject]
    assert rejected, [(r.name, r.p_value) for r in results]
    level = ALPHA / len(results)  # the strictest Holm threshold: power there bounds power below
    assert max(estimated_power(r, level) for r in rejected if r.df > 0) >= 0.99
