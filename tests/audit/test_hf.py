"""transformers' generate() as an audit source, on tiny random models (tests.conftest): assisted
generation, prompt lookup and an assistant with another tokenizer, at T = 1 and T = 0; a specviz
drafter; and a planted fault the audit must flag, its power computed first."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
import torch

from specviz.audit.hf import TransformersSource
from specviz.audit.power import Target, power
from specviz.audit.registered import DrafterSource
from specviz.audit.runner import AuditConfig, run_audit
from specviz.audit.settings import Sample, Settings
from specviz.audit.sources import Side

from ..conftest import PairFactory, char_tokenizer
from ..drafters import cross_pairs

PROMPTS = ("the cat sat on the mat. the cat", "a dog and a dog and a")
TARGETS = (Target(k=1, tv=0.2, cells=8), Target(k=3, tv=0.3, cells=16))
N = 200  # per side, prompt and k


def audit(source: Any, settings: Settings, **kw: Any) -> dict[str, Any]:
    config = AuditConfig(prompts=PROMPTS, settings=settings, targets=TARGETS, n=N, **kw)
    return run_audit(source, config, lambda _e: None)


@pytest.fixture(scope="module")
def tiny(pair: PairFactory) -> tuple[Any, Any]:
    return pair("llama")


@pytest.mark.parametrize("mode", ["assistant", "prompt-lookup"])
def test_same_tokenizer_modes_at_t1_and_t0(tiny: tuple[Any, Any], mode: str) -> None:
    target, draft = tiny
    source = TransformersSource(
        target=target, tokenizer=char_tokenizer(), mode=mode, assistant=draft
    )
    sampled = audit(source, Settings(top_k=0), logprob_samples=100)
    assert sampled["verdict"] != "not exact", sampled["tests"]
    assert sampled["logprob_check"]["applies"] and not sampled["logprob_check"]["reject"]
    greedy = audit(source, Settings(temperature=0), greedy_tokens=20)
    assert greedy["verdict"] == "exact" and greedy["differing_share"] == 0  # float64: no ties


def test_an_assistant_with_another_tokenizer_at_t1_and_t0() -> None:
    """Greedy outputs agree; under sampling, transformers' universal assisted decoding draws the
    first token from another law on this pair (TV about 0.4 observed, p < 1e-3 at N 50 a side):
    the audit says so. docs/exactness.md reports it; should a transformers release fix it, this
    test fails and that section needs updating."""
    tokenizer, assistant_tokenizer = cross_pairs.char_bpe(), cross_pairs.byte_bpe()
    source = TransformersSource(
        target=cross_pairs.tiny_llama(len(tokenizer), seed=1),
        tokenizer=tokenizer,
        mode="assistant-tokenizer",
        assistant=cross_pairs.tiny_llama(len(assistant_tokenizer), seed=3),
        assistant_tokenizer=assistant_tokenizer,
    )
    # greedy first: after sampled calls transformers' cached vocabulary translator has failed
    # greedy ones in the same process (IndexError inside generate())
    assert audit(source, Settings(temperature=0), greedy_tokens=20)["verdict"] == "exact"
    sampled = audit(source, Settings(top_k=0), logprob_samples=0)
    assert sampled["verdict"] == "not exact", sampled["tests"]


def test_a_frequency_penalty_is_refused_before_sampling(tiny: tuple[Any, Any]) -> None:
    source = TransformersSource(target=tiny[0], tokenizer=char_tokenizer(), mode="prompt-lookup")
    with pytest.raises(ValueError, match="cannot apply --frequency-penalty"):
        audit(source, Settings(frequency_penalty=0.5))


def test_a_specviz_drafter(tiny: tuple[Any, Any]) -> None:
    target, draft = tiny
    source = DrafterSource(target=target, tokenizer=char_tokenizer(), drafter="model", draft=draft)
    assert audit(source, Settings(), logprob_samples=0)["verdict"] != "not exact"
    with pytest.raises(ValueError, match="cannot apply --repetition-penalty"):
        audit(source, Settings(repetition_penalty=1.2))


@dataclass(frozen=True, kw_only=True)
class TopKOnSpec:
    """A planted fault: the speculative side samples with top-k 1 where the plain does not."""

    inner: TransformersSource
    name: str = "fault"
    token_outcomes: bool = True
    sides_at_once: bool = False

    def check(self, settings: Settings) -> None:
        self.inner.check(settings)

    def preflight(self) -> None:
        self.inner.preflight()

    def sample(
        self, side: Side, prompt: str, settings: Settings, *, seed: int, tokens: int, top: bool
    ) -> Sample:
        changed = replace(settings, top_k=1) if side == "spec" else settings
        return self.inner.sample(side, prompt, changed, seed=seed, tokens=tokens, top=top)


def test_a_planted_fault_is_flagged(tiny: tuple[Any, Any]) -> None:
    target, draft = tiny
    tok = char_tokenizer()
    inner = TransformersSource(target=target, tokenizer=tok, mode="assistant", assistant=draft)
    with torch.no_grad():  # the first token's TV: the mass outside the top 1, on each prompt
        tv = min(
            float(
                torch.softmax(target(torch.tensor([tok(p).input_ids])).logits[0, -1], -1)
                .sort(descending=True)
                .values[1:]
                .sum()
            )
            for p in PROMPTS
        )
    assert power(tv, N, N, 7, 0.007 / 4) > 0.99  # the last look's Holm level, 4 tests
    result = audit(TopKOnSpec(inner=inner), Settings(top_k=0), logprob_samples=0)
    assert result["verdict"] == "not exact"
