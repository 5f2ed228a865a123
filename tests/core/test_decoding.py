"""The decoding loop on tiny random HF models: greedy equality, seeds, rollback, stops, events."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.decoding import SpeculativeDecoder
from specviz.core.events import (
    EMITTING,
    Accepted,
    Bonus,
    Event,
    Finished,
    Proposed,
    Rejected,
    Resampled,
    RoundSummary,
)
from specviz.drafters.model import ModelDrafter
from specviz.jsonl import read_jsonl, write_jsonl

from ..conftest import EOS, PairFactory

ARCHS = ["gpt2", "llama", "qwen2"]
PROMPTS = ["the cat sat on", "speculative decoding is", "a"]
GREEDY = SamplingConfig(temperature=0)
TIMING = {"seconds", "target_seconds", "draft_seconds"}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("gamma", [1, 2, 4, 8])
def test_greedy_speculative_equals_greedy_target(
    arch: str, gamma: int, pair: PairFactory, tokenizer
) -> None:
    target, draft = pair(arch)
    accepted = rejected = 0
    for prompt in PROMPTS:
        plain = autoregressive_generate(
            target, tokenizer, prompt, sampling=GREEDY, max_new_tokens=40, stop=()
        )
        spec = speculative_generate(
            target,
            draft,
            tokenizer,
            prompt,
            sampling=GREEDY,
            speculation=SpeculationConfig(gamma=gamma, max_new_tokens=40),
            stop=(),
        )
        assert spec.tokens == plain.tokens
        accepted += spec.accepted
        rejected += sum(isinstance(e, Rejected) for e in spec.events)
    assert accepted > 0 and rejected > 0  # the draft agrees only partly


def _without_timings(events: tuple[Event, ...]) -> list[dict[str, object]]:
    """Events as dicts with wall-clock fields removed."""
    return [
        {k: v for k, v in dataclasses.asdict(e).items() if k not in TIMING} | {"kind": e.kind}
        for e in events
    ]


def test_same_seed_same_output_and_events(pair: PairFactory, tokenizer) -> None:
    target, draft = pair("llama")
    spec = SpeculationConfig(gamma=3, max_new_tokens=30)

    def run(seed: int):
        return speculative_generate(
            target,
            draft,
            tokenizer,
            "the cat",
            sampling=SamplingConfig(seed=seed),
            speculation=spec,
            stop=(),
        )

    a, b, c = run(7), run(7), run(8)
    assert a.tokens == b.tokens and _without_timings(a.events) == _without_timings(b.events)
    assert a.tokens != c.tokens


@pytest.mark.parametrize("arch", ARCHS)
def test_rolled_back_caches_match_a_fresh_forward(arch: str, pair: PairFactory, tokenizer) -> None:
    target, draft = pair(arch)
    prompt = tokenizer("the cat sat")["input_ids"]
    drafter = ModelDrafter(draft, SamplingConfig(), target.config.vocab_size)
    decoder = SpeculativeDecoder(
        target,
        drafter,
        prompt,
        sampling=SamplingConfig(seed=3, temperature=1.5),
        speculation=SpeculationConfig(gamma=4, max_new_tokens=60),
    )
    patterns: set[tuple[int, int]] = set()
    for event in decoder.events():
        if not isinstance(event, RoundSummary):
            continue
        patterns.add((event.proposed, event.accepted))
        ids = decoder.ids
        for model, cache, behind in (
            (target, decoder.target_cache, {1}),
            (draft, drafter.cache, {1, 2}),
        ):
            held = len(cache)
            assert len(ids) - held in behind
            with torch.no_grad():
                fresh = model(torch.tensor([ids])).logits[0, -1]
            last_only = cache.forward(torch.tensor(ids[held:]), keep=1)  # (1, V): head skipped
            assert last_only.shape[0] == 1
            assert torch.allclose(last_only[-1], fresh, atol=1e-10, rtol=0)
            cache.crop(held)  # undo the check's own extension
    full = {(k, a) for k, a in patterns if k == a and k > 0}
    partial = {(k, a) for k, a in patterns if a < k}
    assert full and partial  # both a full accept (draft one behind) and a rejection were seen


def test_max_new_tokens_is_never_overshot(pair: PairFactory, tokenizer) -> None:
    target, draft = pair("gpt2")
    for limit in range(1, 12):
        for seed in range(3):
            result = speculative_generate(
                target,
                draft,
                tokenizer,
                "abc",
                sampling=SamplingConfig(seed=seed),
                speculation=SpeculationConfig(gamma=4, max_new_tokens=limit),
                stop=(),
            )
            assert len(result.tokens) == limit and result.finish_reason == "max_new_tokens"
            assert all(e.position < limit for e in result.events if isinstance(e, Proposed))


def test_eos_inside_a_round_stops_exactly_there(pair: PairFactory, tokenizer) -> None:
    target, draft = pair("llama")
    plain = autoregressive_generate(
        target, tokenizer, "the cat", sampling=GREEDY, max_new_tokens=40
    )
    assert plain.finish_reason == "eos" and plain.tokens[-1] == EOS and 1 < len(plain.tokens) < 40
    for gamma in (1, 2, 4, 8):
        spec = speculative_generate(
            target,
            draft,
            tokenizer,
            "the cat",
            sampling=GREEDY,
            speculation=SpeculationConfig(gamma=gamma, max_new_tokens=40),
        )
        assert spec.tokens == plain.tokens and spec.finish_reason == "eos"
    ended = 0
    for seed in range(40):
        spec = speculative_generate(
            target,
            draft,
            tokenizer,
            "the",
            sampling=SamplingConfig(seed=seed),
            speculation=SpeculationConfig(gamma=6, max_new_tokens=25),
        )
        assert EOS not in spec.tokens[:-1]
        ended += spec.finish_reason == "eos"
        assert (spec.finish_reason == "eos") == (spec.tokens[-1] == EOS)
    assert ended > 5


def _check_event_consistency(events: tuple[Event, ...], tokens: tuple[int, ...]) -> None:
    """Per round: accepted + rejected <= proposed; each emitted token has exactly one source."""
    emitted = [e for e in events if isinstance(e, EMITTING)]
    assert tuple(e.token for e in emitted) == tokens
    assert [e.position for e in emitted] == list(range(len(tokens)))
    rounds = [e for e in events if isinstance(e, RoundSummary)]
    for summary in rounds:
        mine = [
            e
            for e in events
            if getattr(e, "round", None) == summary.round and not isinstance(e, RoundSummary)
        ]
        n_prop = sum(isinstance(e, Proposed) for e in mine)
        n_acc = sum(isinstance(e, Accepted) for e in mine)
        n_rej = sum(isinstance(e, Rejected) for e in mine)
        n_next = sum(isinstance(e, Resampled | Bonus) for e in mine)
        assert n_prop == summary.proposed and n_acc + n_rej <= n_prop and n_rej <= 1
        assert n_acc + n_next == summary.emitted and n_next <= 1
        assert n_rej == sum(isinstance(e, Resampled) for e in mine)
    assert isinstance(events[-1], Finished) and events[-1].new_tokens == len(tokens)


def test_events_are_consistent_and_round_trip_jsonl(pair: PairFactory, tokenizer, tmp_path) -> None:
    target, draft = pair("qwen2")
    result = speculative_generate(
        target,
        draft,
        tokenizer,
        "hello there",
        sampling=SamplingConfig(seed=1, temperature=1.2, top_k=20, top_p=0.95),
        speculation=SpeculationConfig(gamma=4, max_new_tokens=40),
        stop=(),
    )
    _check_event_consistency(result.events, result.tokens)
    kinds = {e.kind for e in result.events}
    assert {
        "prefill",
        "proposed",
        "accepted",
        "rejected",
        "resampled",
        "bonus",
        "round",
        "finished",
    } <= kinds
    path = tmp_path / "events.jsonl"
    write_jsonl(result.events, path)
    assert tuple(read_jsonl(path)) == result.events
    plain = autoregressive_generate(
        target, tokenizer, "hello", sampling=SamplingConfig(seed=2), max_new_tokens=10
    )
    write_jsonl(plain.events, path)
    assert tuple(read_jsonl(path)) == plain.events


def test_seeded_runs_leave_the_global_rng_alone(pair: PairFactory, tokenizer) -> None:
    target, draft = pair("gpt2")
    before = torch.random.get_rng_state()
    speculative_generate(
        target, draft, tokenizer, "abc", speculation=SpeculationConfig(max_new_tokens=8)
    )
    assert torch.equal(before, torch.random.get_rng_state())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_low_precision_models_decode(dtype: torch.dtype, pair: PairFactory, tokenizer) -> None:
    target, draft = (m.to(dtype) for m in pair("gpt2"))
    try:
        result = speculative_generate(
            target,
            draft,
            tokenizer,
            "the cat",
            sampling=SamplingConfig(seed=0, top_p=0.9),
            speculation=SpeculationConfig(gamma=3, max_new_tokens=20),
            stop=(),
        )
    finally:
        for m in (target, draft):
            m.to(torch.float64)
    assert len(result.tokens) == 20 and all(
        0 <= t < target.config.vocab_size for t in result.tokens
    )
    _check_event_consistency(result.events, result.tokens)


def test_the_target_scores_the_prompt_in_its_first_pass(pair: PairFactory, tokenizer) -> None:
    """No separate prompt pass: one target call per round (per token when plain)."""
    target, draft = pair("llama")
    calls = [0]
    hook = target.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    try:
        spec = speculative_generate(
            target,
            draft,
            tokenizer,
            PROMPTS[0],
            sampling=GREEDY,
            speculation=SpeculationConfig(gamma=3, max_new_tokens=20),
            stop=(),
        )
        assert calls[0] == len(spec.rounds) == spec.target_calls
        prompt = len(spec.prompt_ids)
        assert [r.prompt_tokens for r in spec.rounds] == [prompt - 1] + [0] * (calls[0] - 1)
        assert spec.prefill.target_seconds == 0.0
        calls[0] = 0
        plain = autoregressive_generate(
            target, tokenizer, PROMPTS[0], sampling=GREEDY, max_new_tokens=20, stop=()
        )
        assert calls[0] == len(plain.tokens) == plain.target_calls == 20
    finally:
        hook.remove()


@pytest.mark.parametrize("speculative", [False, True])
def test_the_stop_token_that_ends_a_decode_is_no_text(
    pair: PairFactory, tokenizer, speculative: bool
) -> None:
    """The stop token stays among the tokens (the model wrote it) but not in the text."""
    target, draft = pair("llama")
    greedy = SamplingConfig(temperature=0)
    free = autoregressive_generate(target, tokenizer, "ab", sampling=greedy, stop=())
    stop = free.tokens[3]  # the fourth token greedy decoding writes ends the decode below
    if speculative:
        spec = SpeculationConfig(gamma=3, max_new_tokens=64)
        run = speculative_generate(
            target, draft, tokenizer, "ab", sampling=greedy, speculation=spec, stop={stop}
        )
    else:
        run = autoregressive_generate(target, tokenizer, "ab", sampling=greedy, stop={stop})
    first = free.tokens.index(stop)
    assert run.finish_reason == "eos" and run.tokens == free.tokens[: first + 1]
    assert run.text == tokenizer.decode(list(free.tokens[:first]))
    assert free.finish_reason == "max_new_tokens" and free.text == tokenizer.decode(
        list(free.tokens)
    )
