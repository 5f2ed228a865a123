"""Self-speculative drafting from the target's first layers: shares weights, stays exact."""

from __future__ import annotations

import pytest
import torch

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.early_exit import Adapter, early_exit_model
from specviz.drafters.model import ModelDrafter
from specviz.stats.mutants import MUTANTS
from specviz.stats.suite import check_setting, default_settings, family_adjusted

from ..conftest import tiny_model


def test_early_exit_shares_the_targets_weights(tokenizer) -> None:
    target = tiny_model("llama", seed=3, scale=3.0, num_hidden_layers=4)
    draft = early_exit_model(target, 2, Adapter(32).double())
    assert draft.model.layers[0] is target.model.layers[0] and len(draft.model.layers) == 2
    assert draft.lm_head is target.lm_head
    ids = torch.tensor([tokenizer("the cat")["input_ids"]])
    with torch.no_grad():  # zero adapter: the exit equals the first 2 layers + norm + head
        hidden = target(ids, output_hidden_states=True).hidden_states[2]
        expected = target.lm_head(target.model.norm(hidden))
        assert torch.allclose(draft(ids).logits, expected, atol=1e-10)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_self_speculation_is_exact_in_greedy(arch: str, tokenizer) -> None:
    target = tiny_model(arch, seed=3, scale=3.0, num_hidden_layers=4)
    greedy = SamplingConfig(temperature=0)
    plain = autoregressive_generate(
        target, tokenizer, "the cat", sampling=greedy, max_new_tokens=30, stop=()
    )
    drafter = ModelDrafter(early_exit_model(target, 3), greedy, target.config.vocab_size)
    spec = speculative_generate(
        target,
        drafter,
        tokenizer,
        "the cat",
        sampling=greedy,
        speculation=SpeculationConfig(gamma=3, max_new_tokens=30),
        stop=(),
    )
    assert spec.tokens == plain.tokens and spec.accepted > 0


def test_bad_exit_layer_and_architecture(pair) -> None:
    target = tiny_model("llama", seed=3, num_hidden_layers=4)
    with pytest.raises(
        ValueError, match=r"exit layer k must be in \[1, 3\] for this target \(got 4\)"
    ):
        early_exit_model(target, 4)
    with pytest.raises(ValueError, match=r"early exit needs a decoder with \.model\.layers"):
        early_exit_model(pair("gpt2")[0], 1)


def test_self_speculation_passes_the_equivalence_suite(tokenizer) -> None:
    """Family-wise alpha 0.01 (Holm); the accept-all mutant must be rejected in the same setting."""
    target = tiny_model("llama", seed=3, scale=3.0, num_hidden_layers=4)
    draft = early_exit_model(target, 2)
    prompt = tokenizer("the cat")["input_ids"]
    setting = next(s for s in default_settings() if s.name == "gamma=8 max_new_tokens=2")
    exact = family_adjusted(check_setting(target, draft, prompt, setting, n=500, alpha=0.01))
    assert not any(r.reject for r in exact), [(r.name, r.p_value) for r in exact]
    accept_all = next(m for m in MUTANTS if m.name == "accept_all")
    broken = family_adjusted(
        check_setting(target, draft, prompt, setting, n=500, alpha=0.01, variant=accept_all)
    )
    assert any(r.reject for r in broken)


def test_adapter_training_lowers_the_kl(tokenizer) -> None:
    from specviz.train.draft.early_exit import Adapter as A
    from specviz.train.draft.early_exit import kl_loss

    target = tiny_model("llama", seed=3, scale=3.0, num_hidden_layers=4)
    target.requires_grad_(False)
    adapter = A(32).double()
    batch = torch.tensor([tokenizer("the cat sat on the mat and ran")["input_ids"]] * 2)
    before = float(kl_loss(target, adapter, 2, batch).detach())
    optimizer = torch.optim.Adam(adapter.parameters(), lr=1e-2)
    for _ in range(60):
        loss = kl_loss(target, adapter, 2, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert float(kl_loss(target, adapter, 2, batch).detach()) < 0.7 * before
