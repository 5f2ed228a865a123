"""Suffix decoding drafters: proposals, memory fed by decodes, greedy identity, exact laws, CLI.

Exactness under sampling runs the project's equivalence suite (specviz.stats) on the toy pair
with fixed seeds: each test at ALPHA = 0.01, Holm-adjusted across one setting's family; the
negative controls (every draft accepted; the residual taken as p; siblings tried against p
itself) must be rejected on the same drafter and setting.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from specviz.api import autoregressive_generate, speculative_generate
from specviz.cli import main
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import SpeculativeDecoder
from specviz.core.events import Proposed, RoundSummary, TreeProposed
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix.drafter import SuffixConfig, SuffixDrafter, TreeSuffixDrafter
from specviz.drafters.suffix.hybrid import SuffixThenModelDrafter
from specviz.drafters.suffix.memory import SuffixMemory
from specviz.stats.laws import AnyDrafter
from specviz.stats.mutants import MUTANTS, TREE_MUTANTS
from specviz.stats.suffix import SUFFIX_MUTANTS, FrequencyQ, SampledSiblings, SuffixMutant
from specviz.stats.suite import check_setting, default_settings, family_adjusted, tree_settings
from specviz.stats.testing import estimated_power
from specviz.stats.toy import random_pair
from specviz.tree.decoding import TreeDecoder

from ..conftest import PairFactory, save_pair

GREEDY = SamplingConfig(temperature=0)
ALPHA = 0.01


def _memory(*sequences: list[int], **kwargs: Any) -> SuffixMemory:
    memory = SuffixMemory(**kwargs)
    for seq in sequences:
        memory.add(seq)
    return memory


def test_chain_proposal_is_one_hot_stops_at_a_stop_token_and_ignores_the_generator() -> None:
    memory = _memory([7, 1, 2, 3, 4, 5, 6])
    drafter = SuffixDrafter(10, memory=memory, config=SuffixConfig(factor=4.0))
    drafter.prefill([9, 9])
    draft = drafter.propose([9, 9, 1, 2], 6, torch.Generator().manual_seed(1), stop_ids=())
    assert draft.tokens.tolist() == [3, 4, 5, 6] and draft.forward_calls == 0
    assert torch.equal(draft.q_draft, torch.eye(10)[[3, 4, 5, 6]])
    again = drafter.propose([9, 9, 1, 2], 6, torch.Generator().manual_seed(2), stop_ids=())
    assert torch.equal(again.tokens, draft.tokens)  # deterministic
    assert drafter.propose([9, 9, 1, 2], 6, torch.Generator(), {4}).tokens.tolist() == [3, 4]
    assert drafter.propose([9, 9, 1, 2], 2, torch.Generator(), ()).tokens.tolist() == [3, 4]
    short = SuffixDrafter(10, memory=memory, config=SuffixConfig(factor=1.0))
    short.prefill([9, 9])
    assert short.propose([9, 9, 1, 2], 6, torch.Generator(), ()).tokens.tolist() == [3, 4]


def test_no_token_at_or_past_the_vocabulary_is_proposed() -> None:
    memory = _memory([1, 2, 3, 8, 9])
    drafter = SuffixDrafter(8, memory=memory, config=SuffixConfig(factor=4.0))
    drafter.prefill([1])
    assert drafter.propose([1, 2], 4, torch.Generator(), ()).tokens.tolist() == [3]
    tree = TreeSuffixDrafter(8, nodes=8, depth=4, memory=memory, config=SuffixConfig(factor=4.0))
    tree.prefill([1])
    assert tree.propose_tree([1, 2], 4, torch.Generator(), ()).tokens.tolist() == [3]


def test_the_requests_own_text_proposes_and_prefill_starts_it_afresh() -> None:
    drafter = SuffixDrafter(10, config=SuffixConfig(factor=2.0))
    drafter.prefill([1, 2, 3, 4, 1])
    found = drafter.propose([1, 2, 3, 4, 1, 2], 4, torch.Generator(), ()).tokens.tolist()
    assert found == [3, 4, 1, 2]  # the text so far repeats itself
    drafter.prefill([5, 6])  # another request: the first one's text is gone
    assert drafter.propose([5, 6, 1, 2], 4, torch.Generator(), ()).tokens.tolist() == []


def test_tree_proposal_branches_deterministically_with_frequencies_shown() -> None:
    memory = _memory([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 6, 7])
    drafter = TreeSuffixDrafter(10, nodes=4, depth=3, memory=memory, config=SuffixConfig(factor=4))
    drafter.prefill([0])
    tree = drafter.propose_tree([0, 1, 2], 3, torch.Generator(), ())
    assert tree.tokens.tolist() == [3, 4, 6, 5] and tree.parents == (-1, 0, -1, 0)
    assert tree.sampled == (False,) * 4
    assert tree.q_draft[0, 3] == pytest.approx(0.75) and tree.q_draft[0, 6] == pytest.approx(0.25)
    assert tree.q_draft[1, 4] == pytest.approx(2 / 3) and tree.q_draft[1, 5] == pytest.approx(1 / 3)
    assert max(tree.depths) <= 3
    assert drafter.propose_tree([0, 1, 2], 1, torch.Generator(), ()).tokens.tolist() == [3, 6]


def test_bad_configs_say_what_to_change() -> None:
    with pytest.raises(ValueError, match="factor must be > 0"):
        SuffixConfig(factor=0)
    with pytest.raises(ValueError, match=r"min_prob must be in \[0, 1\]"):
        SuffixConfig(min_prob=2)
    with pytest.raises(ValueError, match="suffix_factor must be > 0"):
        DrafterOptions(suffix_factor=-1)
    with pytest.raises(ValueError, match="nodes and depth must be >= 1"):
        TreeSuffixDrafter(10, nodes=0, depth=2)


@pytest.mark.parametrize("name", ["suffix", "tree-suffix", "suffix+model"])
def test_greedy_output_is_the_targets_greedy_output(
    name: str, pair: PairFactory, tokenizer
) -> None:
    target, draft = pair("llama")
    prompt = tokenizer("the cat sat on the mat. the cat sat on the")["input_ids"]
    plain = autoregressive_generate(
        target, tokenizer, prompt, sampling=GREEDY, max_new_tokens=30, stop=()
    )
    # earlier requests: the target's own continuation, and a wrong one
    memory = _memory(list(plain.tokens[:12]), [*prompt[-4:], 5, 6, 7, 8])
    options = DrafterOptions(memory=memory, suffix_factor=2.0, suffix_min_score=0.5)
    drafter = build_drafter(name, target=target, draft=draft, sampling=GREEDY, options=options)
    run = speculative_generate(
        target,
        drafter,
        tokenizer,
        prompt,
        sampling=GREEDY,
        speculation=SpeculationConfig(gamma=4, max_new_tokens=30),
        stop=(),
    )
    assert run.tokens == plain.tokens
    assert run.accepted > 0
    rounds = run.rounds
    if name == "suffix+model":  # both kinds of round: free copies and model drafts
        assert any(r.proposed and not r.draft_forward_calls for r in rounds)
        assert any(r.draft_forward_calls for r in rounds)
    assert memory.requests[-1] == plain.tokens  # the decode fed the memory


def test_a_second_similar_request_drafts_more_accepted_tokens(pair: PairFactory, tokenizer) -> None:
    """Memory works: a request like an earlier one copies the earlier output."""
    target, _ = pair("llama")
    memory = SuffixMemory()
    options = DrafterOptions(memory=memory)
    speculation = SpeculationConfig(gamma=4, max_new_tokens=40)

    def run(prompt: str, options: DrafterOptions) -> Any:
        drafter = build_drafter("suffix", target=target, sampling=GREEDY, options=options)
        return speculative_generate(
            target, drafter, tokenizer, prompt, sampling=GREEDY, speculation=speculation, stop=()
        )

    first = run("hello there, how are you", options)
    assert memory.requests == (first.tokens,)
    alone = run("hello there, who are you", DrafterOptions())  # no memory of the first
    second = run("hello there, who are you", options)
    assert second.tokens == alone.tokens
    assert second.accepted > max(first.accepted, alone.accepted)
    assert second.target_calls < alone.target_calls
    assert len(memory.requests) == 2


def test_the_hybrid_chooses_by_score() -> None:
    _, draft = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    memory = _memory([1, 2, 3, 4])
    hybrid = build_drafter(
        "suffix+model",
        target=draft,
        draft=draft,
        sampling=SamplingConfig(),
        options=DrafterOptions(memory=memory, suffix_factor=2.0, suffix_min_score=1.5),
    )
    assert isinstance(hybrid, SuffixThenModelDrafter)
    hybrid.prefill([5])
    copied = hybrid.propose([5, 1, 2], 4, torch.Generator().manual_seed(0), ())
    assert copied.tokens.tolist() == [3, 4] and copied.forward_calls == 0  # score 2
    drafted = hybrid.propose([5, 1, 2, 3], 4, torch.Generator().manual_seed(0), ())
    assert drafted.forward_calls == len(drafted.tokens) == 4  # suffix: 4 alone, score 1 < 1.5
    assert torch.allclose(drafted.q_draft.sum(-1), torch.ones(4, dtype=drafted.q_draft.dtype))


# --- exact laws under sampling: the equivalence suite on the toy pair ---------------------------

TOY_PROMPT = [1, 2, 3, 1, 2]
TOY_MEMORY = ([1, 2, 3, 4, 5], [2, 3, 1, 2, 4], [1, 2, 0, 3], [3, 1, 2, 3, 4, 1, 2])


def _toy_maker(name: str, target: Any, draft: Any, **extra: Any) -> Any:
    """A drafter of that name with a fresh memory of TOY_MEMORY for each decode (extra: more
    DrafterOptions)."""

    def make(sampling: SamplingConfig) -> AnyDrafter:
        options = DrafterOptions(
            memory=_memory(*TOY_MEMORY), suffix_factor=4.0, suffix_min_prob=0.05,
            suffix_min_score=1.0, **extra,
        )  # fmt: skip
        return build_drafter(name, target=target, draft=draft, sampling=sampling, options=options)

    return make


def _suite(
    name: str, setting_name: str, variant: Any = None, n: int = 1200, **extra: Any
) -> list[Any]:
    target, draft = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    tree = name.startswith("tree")
    settings = {s.name: s for s in (tree_settings(4, stop_id=0) if tree else default_settings(0))}
    mutated = {} if variant is None else {"variant": variant}
    results = check_setting(
        target, draft, TOY_PROMPT, settings[setting_name], n=n, alpha=ALPHA,
        make_drafter=_toy_maker(name, target, draft, **extra), **mutated,
    )  # fmt: skip
    return family_adjusted(results)


def test_the_toy_decodes_draft_from_memory() -> None:
    """The suite below tests real proposals: long suffix chains, branching trees."""
    target, draft = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    sampling = SamplingConfig(temperature=1.0, seed=0)
    chain = _toy_maker("suffix", target, draft)(sampling)
    assert isinstance(chain, SuffixDrafter)
    decoder = SpeculativeDecoder(
        target, chain, TOY_PROMPT, sampling=sampling,
        speculation=SpeculationConfig(gamma=4, max_new_tokens=5),
    )  # fmt: skip
    first = [e for e in decoder.events() if isinstance(e, Proposed) and e.round == 0]
    assert [e.token for e in first] == [3, 4, 1, 2]
    tree = _toy_maker("tree-suffix", target, draft)(sampling)
    events = TreeDecoder(target, tree, TOY_PROMPT, sampling=sampling, max_new_tokens=5).events()
    proposed = next(e for e in events if isinstance(e, TreeProposed))
    assert proposed.parents.count(-1) >= 2
    kinds = set()  # the hybrid: suffix rounds (no forward) and model rounds
    for seed in range(10):
        seeded = SamplingConfig(temperature=1.0, seed=seed)
        hybrid = _toy_maker("suffix+model", target, draft)(seeded)
        assert isinstance(hybrid, SuffixThenModelDrafter)
        decoder = SpeculativeDecoder(
            target, hybrid, TOY_PROMPT, sampling=seeded,
            speculation=SpeculationConfig(gamma=4, max_new_tokens=5),
        )  # fmt: skip
        rounds = [e for e in decoder.events() if isinstance(e, RoundSummary) and e.proposed]
        kinds |= {r.draft_forward_calls > 0 for r in rounds}
    assert kinds == {False, True}


@pytest.mark.parametrize(
    ("name", "setting_name"),
    [
        ("suffix", "gamma=4 T=1"),
        ("suffix", "gamma=2 T=0.7 top_p=0.8"),
        ("suffix", "gamma=4 EOS in round"),
        ("suffix+model", "gamma=4 T=1"),
        ("suffix+model", "gamma=4 T=0.5"),
        ("tree-suffix", "tree T=1"),
        ("tree-suffix", "tree EOS in round"),
    ],
)
def test_suffix_drafters_pass_the_equivalence_suite(name: str, setting_name: str) -> None:
    results = _suite(name, setting_name)
    assert not any(r.reject for r in results), [(r.name, r.p_value) for r in results]


@pytest.mark.parametrize(
    ("name", "mutant_name", "setting_name"),
    [
        ("suffix", "accept_all", "gamma=4 T=1"),
        ("suffix", "residual_is_p", "gamma=4 T=1"),
        ("suffix+model", "accept_all", "gamma=4 T=1"),
        ("tree-suffix", "tree_residual_not_updated", "tree T=1"),
    ],
)
def test_the_suite_rejects_known_bugs_on_suffix_drafters(
    name: str, mutant_name: str, setting_name: str
) -> None:
    """Negative controls: the same runs with a known bug are rejected."""
    mutant = next(m for m in (*MUTANTS, *TREE_MUTANTS) if m.name == mutant_name)
    results = _suite(name, setting_name, variant=mutant)
    assert any(r.reject for r in results), [(r.name, r.p_value) for r in results]


# --- the command line ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def folders(pair: PairFactory, tokenizer, tmp_path_factory) -> tuple[Path, Path]:
    return save_pair(tmp_path_factory.mktemp("suffix-models"), *pair("llama"), tokenizer)


def _argv(folders: tuple[Path, Path], *extra: str) -> list[str]:
    argv = ["generate", "--target", str(folders[0]), "--draft", str(folders[1]), "--raw"]
    return [*argv, "--temperature", "0", "--max-new-tokens", "12", "--dtype", "float64", *extra]


def test_generate_reads_and_writes_the_memory_file(folders, tmp_path: Path, capsys) -> None:
    path = tmp_path / "memory.json"
    argv = _argv(folders, "--drafter", "suffix", "--memory", str(path), "--json")
    assert main([*argv, "--prompt", "hello there, how are you"]) == 0
    first = json.loads(capsys.readouterr().out)
    saved = json.loads(path.read_text())
    assert saved["requests"] == [first["tokens"]]
    assert main([*argv, "--prompt", "hello there, how are you"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["tokens"] == first["tokens"] and second["accepted"] > first["accepted"]
    assert len(SuffixMemory.load(path).requests) == 2


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("{not json", ["--drafter", "suffix"], "is not JSON"),
        ('{"format": "other"}', ["--drafter", "tree-suffix"], "is not a suffix memory"),
        ("[]", ["--drafter", "model"], "--memory feeds the suffix drafters"),
        ("[]", ["--drafter", "suffix", "--plain"], "--memory feeds the suffix drafters"),
    ],
)
def test_a_bad_memory_file_exits_2_with_one_line_before_any_model_loads(
    tmp_path: Path, capsys, content: str, extra: list[str], message: str
) -> None:
    path = tmp_path / "memory.json"
    path.write_text(content)
    missing = tmp_path / "no-model"  # loading it would fail: the memory is checked first
    argv = ["generate", "--target", str(missing), "--draft", str(missing), "--prompt", "hi"]
    assert main([*argv, "--memory", str(path), *extra]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err
    assert captured.err.count("\n") == 1 and not captured.out
    assert main([*argv, "--drafter", "suffix", "--memory", str(tmp_path / "a" / "m.json")]) == 2
    assert "no folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("mutant", "setting_name"),
    [(SUFFIX_MUTANTS[0], "gamma=4 T=1"), (SUFFIX_MUTANTS[1], "tree T=1")],
    ids=lambda x: getattr(x, "name", x),
)
def test_a_deterministic_proposal_verified_as_sampled_is_rejected_with_power(
    mutant: SuffixMutant, setting_name: str
) -> None:
    """The suffix drafters' own bug: frequencies taken for the law a proposal was drawn from."""
    target, draft = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
    tree = mutant.drafter_cls is SampledSiblings
    settings = {s.name: s for s in (tree_settings(4, stop_id=0) if tree else default_settings(0))}
    config = SuffixConfig(factor=4.0, min_prob=0.05)

    def make(_sampling: SamplingConfig) -> Any:
        memory = _memory(*TOY_MEMORY)
        if tree:
            return SampledSiblings(6, nodes=8, depth=4, memory=memory, config=config)
        return FrequencyQ(6, memory=memory, config=config)

    results = family_adjusted(
        check_setting(
            target, draft, TOY_PROMPT, settings[setting_name], n=1200, alpha=ALPHA,
            make_drafter=make,
        )
    )  # fmt: skip
    rejected = [r for r in results if r.reject]
    assert rejected, f"{mutant.name} slipped through: {[(r.name, r.p_value) for r in results]}"
    level = ALPHA / len(results)  # the strictest Holm threshold: power there bounds power below
    best = max(estimated_power(r, level) for r in rejected if r.df > 0)
    assert best >= 0.99, f"{mutant.name}: estimated power {best:.3f}"
