"""Tree speculative decoding end to end: greedy identity, event structure, caches, refusals."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from specviz.api import speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import (
    EMITTING,
    Accepted,
    Bonus,
    Rejected,
    Resampled,
    RoundSummary,
    TreeProposed,
    TreeVerified,
)
from specviz.drafters.model import ModelDrafter
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.tree_model import TreeModelDrafter, TreeShape
from specviz.drafters.tree_ngram import TreeNgramDrafter
from specviz.fast.lean import LeanLlama, lean_target_cache
from specviz.gamma.policies import make_policy
from specviz.jsonl import from_json, to_json
from specviz.plain import autoregressive_events
from specviz.tree.decoding import TreeDecoder
from specviz.tree.drafter import ChainAsTree, TreeDrafter
from specviz.tree.verify import TYPICAL

from ..conftest import EOS, VOCAB, perturbed_copy, tiny_model

GREEDY = SamplingConfig(temperature=0)
PROMPT = [3, 4, 5, 6, 3, 4, 5, 7, 3, 4]  # repeats, so n-gram lookup finds branches
SHAPES = [TreeShape(nodes=4, depth=2, width=2), TreeShape(nodes=8, depth=3, width=3)]
SHAPES += [TreeShape(nodes=16, depth=4, width=4)]


@pytest.fixture(scope="module")
def models() -> dict[str, tuple[Any, Any]]:
    """A float64 target and a draft that often disagrees with it, per architecture."""
    out = {}
    for arch in ("gpt2", "llama", "qwen2"):
        target = tiny_model(arch, seed=1, scale=3.0)
        out[arch] = (target, perturbed_copy(target, seed=2, noise=0.4))
    return out


def drafters(draft: Any, sampling: SamplingConfig, shape: TreeShape) -> dict[str, TreeDrafter]:
    return {
        "top-k": TreeModelDrafter(draft, sampling, VOCAB, shape=shape, sampled=False),
        "sampled": TreeModelDrafter(draft, sampling, VOCAB, shape=shape, sampled=True),
        "ngram": TreeNgramDrafter(VOCAB, nodes=shape.nodes, depth=shape.depth),
        "chain": ChainAsTree(ModelDrafter(draft, sampling, VOCAB), shape.depth),
    }


def emitted(events: list[Any]) -> list[int]:
    return [e.token for e in events if isinstance(e, EMITTING)]


@pytest.mark.parametrize("arch", ["gpt2", "llama", "qwen2"])
def test_greedy_tree_decoding_is_token_identical_to_greedy_target_decoding(
    models: dict[str, tuple[Any, Any]], arch: str
) -> None:
    target, draft = models[arch]
    plain = emitted(list(autoregressive_events(target, PROMPT, sampling=GREEDY, max_new_tokens=30)))
    branched = 0
    for shape in SHAPES:
        for name, drafter in drafters(draft, GREEDY, shape).items():
            events = list(
                TreeDecoder(target, drafter, PROMPT, sampling=GREEDY, max_new_tokens=30).events()
            )
            assert emitted(events) == plain, (arch, shape, name)
            trees = [e for e in events if isinstance(e, TreeProposed)]
            branched += any(len(set(t.parents)) < len(t.parents) for t in trees)
    assert branched >= 3  # the trees really branched (not chains in disguise)


def test_a_greedy_top_k_tree_keeps_more_per_pass_than_the_chain(
    models: dict[str, tuple[Any, Any]],
) -> None:
    """Same draft, same depth: the tree's alternatives rescue some rejected first guesses."""
    target, draft = models["llama"]
    shape = TreeShape(nodes=16, depth=4, width=4)
    per_pass = {}
    for name in ("top-k", "chain"):
        drafter = drafters(draft, GREEDY, shape)[name]
        events = list(
            TreeDecoder(target, drafter, PROMPT, sampling=GREEDY, max_new_tokens=40).events()
        )
        rounds = [e for e in events if isinstance(e, RoundSummary)]
        per_pass[name] = sum(r.emitted for r in rounds) / len(rounds)
    assert per_pass["top-k"] > per_pass["chain"]


def test_tree_round_events_tell_a_consistent_story(models: dict[str, tuple[Any, Any]]) -> None:
    target, draft = models["qwen2"]
    sampling = SamplingConfig(temperature=1.0, top_p=0.9, seed=5)
    drafter = TreeModelDrafter(draft, sampling, VOCAB, shape=SHAPES[2], sampled=True)
    events = list(
        TreeDecoder(target, drafter, PROMPT, sampling=sampling, max_new_tokens=25).events()
    )
    assert [from_json(to_json(e)) for e in events] == events  # JSONL round trip
    rounds: list[list[Any]] = [[]]
    for e in events[1:-1]:
        rounds[-1].append(e)
        if isinstance(e, RoundSummary):
            rounds.append([])
    for log in rounds[:-1]:
        tree = next(e for e in log if isinstance(e, TreeProposed))
        verified = next(e for e in log if isinstance(e, TreeVerified))
        summary = log[-1]
        kept = [e for e in log if isinstance(e, Accepted)]
        assert [e.draft_index for e in kept] == list(verified.path)
        for node in verified.path:  # a kept path runs from the root down
            parent = tree.parents[node]
            assert parent == -1 or parent in verified.path
        first_tried: set[int] = set()
        for e in log:
            if isinstance(e, Accepted | Rejected):
                assert e.token == tree.tokens[e.draft_index] and 0 <= e.u < 1
                parent = tree.parents[e.draft_index]
                if parent not in first_tried:  # later siblings face the residual, not p
                    assert e.accept_prob == pytest.approx(min(1.0, e.p_x / e.q_x), abs=1e-9)
                first_tried.add(parent)
        assert verified.exact and verified.rule == "exact"
        last = [e for e in log if isinstance(e, Resampled | Bonus)]
        assert len(last) == 1 and summary.emitted == len(kept) + 1
        assert summary.proposed == len(tree.tokens) and summary.accepted == len(kept)


def test_max_new_tokens_cuts_the_tree(models: dict[str, tuple[Any, Any]]) -> None:
    target, draft = models["llama"]
    for limit in (1, 2, 5):
        drafter = TreeModelDrafter(draft, GREEDY, VOCAB, shape=SHAPES[2], sampled=False)
        events = list(
            TreeDecoder(target, drafter, PROMPT, sampling=GREEDY, max_new_tokens=limit).events()
        )
        assert len(emitted(events)) == limit
        depths = [e.gamma for e in events if isinstance(e, RoundSummary)]
        assert all(d <= limit - 1 for d in depths)


def test_an_accepted_stop_token_ends_the_decode(models: dict[str, tuple[Any, Any]]) -> None:
    """Wherever the stop token lands: inside the kept path, at its end, or drawn after it."""
    target, draft = models["llama"]
    plain = emitted(list(autoregressive_events(target, PROMPT, sampling=GREEDY, max_new_tokens=30)))
    for stop in dict.fromkeys(plain[1:20]):
        for sampled in (False, True):
            drafter = TreeModelDrafter(draft, GREEDY, VOCAB, shape=SHAPES[1], sampled=sampled)
            decoder = TreeDecoder(
                target, drafter, PROMPT, sampling=GREEDY, max_new_tokens=30, stop_ids={stop}
            )
            events = list(decoder.events())
            assert emitted(events) == plain[: plain.index(stop) + 1], (stop, sampled)
            assert events[-1].reason == "eos"


def test_both_caches_hold_exactly_the_committed_prefix(models: dict[str, tuple[Any, Any]]) -> None:
    """After every round the target's cache holds ids[:-1]; the draft's no more than that."""
    target, draft = models["gpt2"]
    sampling = SamplingConfig(temperature=1.0, seed=3)
    drafter = TreeModelDrafter(draft, sampling, VOCAB, shape=SHAPES[2], sampled=True)
    decoder = TreeDecoder(target, drafter, PROMPT, sampling=sampling, max_new_tokens=20)
    for event in decoder.events():
        if not isinstance(event, RoundSummary):
            continue
        ids = decoder.ids
        assert decoder.cached == len(decoder.target_cache) == len(ids) - 1
        nxt = decoder.target_cache.forward(torch.tensor([ids[-1]]))[-1]
        with torch.no_grad():
            fresh = target(input_ids=torch.tensor([ids])).logits[0, -1]
        assert torch.allclose(nxt, fresh, atol=1e-9, rtol=0)
        decoder.target_cache.crop(len(ids) - 1)
        held = len(drafter.cache)
        assert held <= len(ids) - 1
        with torch.no_grad():
            draft_next = drafter.cache.forward(torch.tensor(ids[held:]))[-1]
            draft_fresh = draft(input_ids=torch.tensor([ids])).logits[0, -1]
        assert torch.allclose(draft_next, draft_fresh, atol=1e-9, rtol=0)
        drafter.cache.crop(held)


def test_the_typical_rule_is_labelled_lossy_everywhere(
    models: dict[str, tuple[Any, Any]], tokenizer: Any
) -> None:
    target, draft = models["llama"]
    sampling = SamplingConfig(temperature=1.0, seed=1)
    drafter = build_drafter("tree-model", target=target, draft=draft, sampling=sampling)
    spec = SpeculationConfig(max_new_tokens=12)
    lossy = speculative_generate(
        target, drafter, tokenizer, PROMPT, sampling=sampling, speculation=spec, tree_rule=TYPICAL
    )
    assert not lossy.exact
    assert all(
        not e.exact and e.rule == "typical" for e in lossy.events if isinstance(e, TreeVerified)
    )
    drafter = build_drafter("tree-model", target=target, draft=draft, sampling=sampling)
    exact = speculative_generate(
        target, drafter, tokenizer, PROMPT, sampling=sampling, speculation=spec
    )
    assert exact.exact


def test_the_api_refuses_what_a_tree_decode_cannot_take(
    models: dict[str, tuple[Any, Any]], tokenizer: Any
) -> None:
    target, draft = models["llama"]
    options = DrafterOptions(tree_nodes=4, tree_depth=2)
    drafter = build_drafter(
        "tree-model", target=target, draft=draft, sampling=GREEDY, options=options
    )
    spec = SpeculationConfig(max_new_tokens=4)
    with pytest.raises(ValueError, match="gamma policy"):
        speculative_generate(
            target, drafter, tokenizer, PROMPT, sampling=GREEDY, speculation=spec,
            policy=make_policy("heuristic", 4),
        )  # fmt: skip
    with pytest.raises(ValueError, match="tree_nodes must be an integer >= 1"):
        DrafterOptions(tree_nodes=0)


@pytest.mark.parametrize("name", ["top-k", "sampled", "ngram", "chain"])
def test_a_tree_verified_through_the_lean_target_forward_keeps_the_greedy_tokens(
    models: dict[str, tuple[Any, Any]], tokenizer: Any, name: str
) -> None:
    """make_cache picks the target forward a tree is verified through: specviz.fast.lean's
    takes the tree's positions and mask and keeps the kept path."""
    target, draft = models["llama"]
    plain = emitted(list(autoregressive_events(target, PROMPT, sampling=GREEDY, max_new_tokens=30)))
    for shape in SHAPES:
        drafter = drafters(draft, GREEDY, shape)[name]
        decoder = TreeDecoder(target, drafter, PROMPT, sampling=GREEDY, max_new_tokens=30,
                              make_cache=lean_target_cache)  # fmt: skip
        assert isinstance(decoder.target_cache, LeanLlama)
        assert emitted(list(decoder.events())) == plain, (shape, name)
    result = speculative_generate(
        target, drafters(draft, GREEDY, SHAPES[0])[name], tokenizer, PROMPT, sampling=GREEDY,
        speculation=SpeculationConfig(max_new_tokens=30), make_cache=lean_target_cache, stop=(),
    )  # fmt: skip
    assert list(result.tokens) == plain


def test_a_model_without_custom_mask_attention_is_refused_before_decoding(
    models: dict[str, tuple[Any, Any]],
) -> None:
    target = tiny_model("llama", seed=1)
    target.config._attn_implementation_internal = "flash_attention_2"
    drafter = TreeNgramDrafter(VOCAB, nodes=4, depth=2)
    with pytest.raises(ValueError, match="custom 4D mask"):
        TreeDecoder(target, drafter, PROMPT, sampling=GREEDY, max_new_tokens=4)


def test_tree_ngram_offers_each_distinct_earlier_continuation() -> None:
    ids = [1, 2, 3, 4, 1, 2, 5, 6, 1, 2, 3, 7, 1, 2]
    tree = TreeNgramDrafter(VOCAB, nodes=16, depth=3).propose_tree(
        ids, 3, torch.Generator(), stop_ids={EOS}
    )
    paths = {tuple(int(tree.tokens[i]) for i in tree.path(n)) for n in range(len(tree.parents))}
    assert {(3, 7, 1), (5, 6, 1), (3, 4, 1)} <= paths
    assert tree.children(-1) == [0, 3] and tree.children(0) == [1, 6]  # 3, 5; under 3: 7, 4
    assert not any(tree.sampled)
