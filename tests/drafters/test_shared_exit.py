"""Self-speculation sharing the target's KV cache: transformers' logits, reuse, exactness."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import SpeculativeDecoder
from specviz.drafters.early_exit import early_exit_model
from specviz.drafters.shared_exit import SharedExit, SharedExitDrafter, shared_exit_problem
from specviz.gamma.policies import TheoryGamma
from specviz.stats.mutants import MUTANTS, SkipLastDraftSharedExit
from specviz.stats.suite import check_setting, default_settings, family_adjusted

from ..conftest import PairFactory, tiny_model


def _full_logits(model: Any, ids: list[int]) -> torch.Tensor:
    """Logits (T, V) of one uncached forward over ids."""
    with torch.no_grad():
        logits: torch.Tensor = model(torch.tensor([ids])).logits[0]
    return logits


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_both_views_match_transformers(arch: str) -> None:
    target = tiny_model(arch, seed=3, scale=3.0, num_hidden_layers=4)
    exit_model = early_exit_model(target, 2)
    store = SharedExit(target, 2, capacity=4)  # capacity 4: grows while the test runs
    drafter, verifier = store.exit_view, store.target_view
    prompt = [3, 17, 9, 22, 5]
    got = drafter.forward(torch.tensor(prompt[:-1]))  # the drafter's prefill
    torch.testing.assert_close(got, _full_logits(exit_model, prompt[:-1]), atol=1e-10, rtol=0)
    drafts = [30, 11]  # drafted one at a time after the prompt's last token
    for i, token in enumerate([prompt[-1], drafts[0]]):
        got = drafter.forward(torch.tensor([token]), keep=1)
        want = _full_logits(exit_model, prompt + drafts[:i])[-1:]
        torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
    seq = prompt + drafts
    got = verifier.forward(torch.tensor(seq), keep=3)  # the first pass also scores the prompt
    torch.testing.assert_close(got, _full_logits(target, seq)[-3:], atol=1e-10, rtol=0)
    assert len(verifier) == len(drafter) == len(seq)
    verifier.crop(5)  # reject both drafts; the resampled token differs from the draft there
    drafter.crop(5)
    replacement = [8, 2, 14]
    got = verifier.forward(torch.tensor(replacement))
    want = _full_logits(target, seq[:5] + replacement)[-3:]
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)


def test_verification_runs_the_first_k_layers_only_for_positions_not_drafted() -> None:
    target = tiny_model("llama", seed=3, scale=3.0, num_hidden_layers=4)
    rows = {0: 0, 3: 0}  # rows through layer 0 (shared) and layer 3 (target only)
    for index in rows:
        target.model.layers[index].mlp.register_forward_hook(
            lambda _m, inputs, _o, index=index: rows.__setitem__(
                index, rows[index] + inputs[0].shape[0]
            )
        )
    store = SharedExit(target, 2)
    store.exit_view.forward(torch.tensor([3, 17, 9]))  # prompt but its last token
    for token in (22, 30, 11):  # the last prompt token, then two drafts
        store.exit_view.forward(torch.tensor([token]), keep=1)
    assert rows == {0: 6, 3: 0}
    store.target_view.forward(torch.tensor([3, 17, 9, 22, 30, 11, 5]), keep=4)
    assert rows == {0: 7, 3: 7}  # only the last draft (5) was new to the first k layers


@pytest.mark.parametrize("policy", ["fixed", "theory"])  # theory also takes plain steps (γ = 0)
def test_shared_self_speculation_is_exact_in_greedy(policy: str, tokenizer) -> None:
    target = tiny_model("llama", seed=3, scale=3.0, num_hidden_layers=4)
    greedy = SamplingConfig(temperature=0)
    plain = autoregressive_generate(
        target, tokenizer, "the cat", sampling=greedy, max_new_tokens=40, stop=()
    )
    spec = speculative_generate(
        target,
        SharedExitDrafter(target, 3, greedy, target.config.vocab_size),
        tokenizer,
        "the cat",
        sampling=greedy,
        speculation=SpeculationConfig(gamma=3, max_new_tokens=40),
        stop=(),
        policy=TheoryGamma(start=3, probe_every=2) if policy == "theory" else None,
    )
    assert spec.tokens == plain.tokens and spec.accepted > 0
    assert len(spec.rounds) < len(plain.tokens)


def test_shared_self_speculation_passes_the_suite_and_its_mutants_fail(tokenizer) -> None:
    """Family-wise alpha 0.01 (Holm); accept-all and a cache skipping the last draft must fail."""
    target = tiny_model("llama", seed=3, scale=3.0, num_hidden_layers=4)
    prompt, vocab = tokenizer("the cat")["input_ids"], target.config.vocab_size
    setting = next(s for s in default_settings() if s.name == "gamma=1 T=1")

    def run(store: type[SharedExit] = SharedExit, **kwargs: Any) -> list[Any]:
        def make(s: SamplingConfig) -> SharedExitDrafter:
            return SharedExitDrafter(target, 2, s, vocab, store=store)

        results = check_setting(
            target, None, prompt, setting, n=500, alpha=0.01, make_drafter=make, **kwargs
        )
        return family_adjusted(results)

    exact = run()
    assert not any(r.reject for r in exact), [(r.name, r.p_value) for r in exact]
    assert any(r.reject for r in run(variant=next(m for m in MUTANTS if m.name == "accept_all")))
    assert any(r.reject for r in run(store=SkipLastDraftSharedExit))


def test_sharing_is_refused_clearly_where_it_cannot_work(pair: PairFactory) -> None:
    target = tiny_model("llama", seed=3, num_hidden_layers=4)
    with pytest.raises(ValueError, match=r"exit layer k must be in \[1, 3\]"):
        SharedExit(target, 4)
    assert shared_exit_problem(pair("gpt2")[0]) == "model type 'gpt2' is not one of " + str(
        ("llama", "qwen2")
    )
    with pytest.raises(ValueError, match="cannot share this target's cache: model type 'gpt2'"):
        SharedExit(pair("gpt2")[0], 1)
    drafter = SharedExitDrafter(target, 2, SamplingConfig(), target.config.vocab_size)
    with pytest.raises(ValueError, match="shares the target's cache; do not pass make_cache"):
        SpeculativeDecoder(
            target, drafter, [1, 2], sampling=SamplingConfig(),
            speculation=SpeculationConfig(), make_cache=lambda m: drafter.cache,
        )  # fmt: skip
    other = tiny_model("llama", seed=4, num_hidden_layers=4)
    with pytest.raises(ValueError, match="shares the cache of another target model"):
        SpeculativeDecoder(
            other, drafter, [1, 2], sampling=SamplingConfig(), speculation=SpeculationConfig()
        )
