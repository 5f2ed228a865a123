"""The replay makes exactly a real decode's rounds at T = 0, rounds with their law at T = 1, and
prices them as documented."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import specviz.bench.sweeps.replay as replay_module
from specviz.api import autoregressive_generate, encode, speculative_generate
from specviz.bench.sweeps.heads import (
    Lookahead,
    draft_probabilities,
    keep_probabilities,
    model_lookahead,
    target_path,
)
from specviz.bench.sweeps.replay import (
    GREEDY,
    compare,
    lookaheads,
    replay,
    report,
)
from specviz.cli import main
from specviz.core.cache import CachedForward
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.drafter import Drafter
from specviz.core.policy import FixedGamma
from specviz.drafters.hybrid import LookupThenModelDrafter
from specviz.drafters.model import ModelDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.fast.lean import lean_target_cache
from specviz.gamma.policies import HeuristicGamma
from specviz.stats.testing import two_sample
from specviz.tune.timing import PassCosts, measure_costs

from ..conftest import PairFactory

COSTS = PassCosts(draft_step=0.1, verify=(1.0, 1.5, 1.75))


def test_pass_costs_extrapolate_the_last_step() -> None:
    assert [COSTS.target(k) for k in (1, 3, 4, 6)] == [1.0, 1.75, 2.0, 2.5]
    assert PassCosts(draft_step=0.0, verify=(2.0,)).target(5) == 2.0


def test_replay_rounds_and_prices_by_hand() -> None:
    # a model agreeing at positions 0, 1, 3 and 6 of 7: runs of agreement from each position
    look = Lookahead(kept=(2, 1, 0, 1, 0, 0, 1), offered=None, forwards=True)
    result = replay(look, FixedGamma(2), COSTS)
    # gamma 2 keeps 2 (+1 emitted); gamma 2 keeps 1 (+1); capped to 1 near the end, keeps 0
    # (+1); then 0 left to draft: a plain step (+1) -> 7 tokens
    made = [(r.gamma, r.proposed, r.accepted, r.emitted) for r in result.rounds]
    assert made == [(2, 2, 2, 3), (2, 2, 1, 2), (1, 1, 0, 1), (0, 0, 0, 1)]
    assert [r.prompt_tokens for r in result.rounds] == [1, 0, 0, 0]
    assert result.seconds == pytest.approx((0.2 + 1.75) * 2 + (0.1 + 1.5) + 1.0)
    assert result.plain_seconds == pytest.approx(7.0)
    assert result.speedup == pytest.approx(7.0 / result.seconds)


def test_replay_of_a_lookup_drafts_only_what_it_has_for_free() -> None:
    look = Lookahead(kept=(1, 0, 0, 0, 0), offered=(1, 0, 3, 0, 0), forwards=False)
    result = replay(look, FixedGamma(3), COSTS)
    made = [(r.gamma, r.proposed, r.accepted, r.draft_forward_calls) for r in result.rounds]
    # 1 token on offer, kept (+1); gamma capped to 2 of 3 on offer, none kept (+1); nothing on
    # offer: a 1-token pass (+1); nothing left to draft (+1) -> 5 tokens, no draft forwards
    assert made == [(3, 1, 1, 0), (2, 2, 0, 0), (1, 0, 0, 0), (0, 0, 0, 0)]
    assert result.seconds == pytest.approx(1.5 + 1.75 + 1.0 + 1.0)


def _real_and_replayed(
    make_drafter: Any, look: Lookahead, target: Any, tokenizer: Any, prompt: list[int], policy: str
) -> tuple[list[list[int]], list[list[int]]]:
    """(real rounds, replayed rounds) as [gamma, proposed, accepted, emitted] lists."""

    def make_policy() -> FixedGamma | HeuristicGamma:
        return FixedGamma(3) if policy == "fixed" else HeuristicGamma(start=3)

    real = speculative_generate(
        target,
        make_drafter(),
        tokenizer,
        prompt,
        sampling=GREEDY,
        speculation=SpeculationConfig(gamma=3, max_new_tokens=40),
        stop=(),
        policy=make_policy(),
    )
    fields = ("gamma", "proposed", "accepted", "emitted")
    replayed = replay(look, make_policy(), COSTS)
    return (
        [[getattr(r, f) for f in fields] for r in real.rounds],
        [[getattr(r, f) for f in fields] for r in replayed.rounds],
    )


@pytest.mark.parametrize("policy", ["fixed", "heuristic"])
@pytest.mark.parametrize("kind", ["model", "ngram", "ngram+model", "ngram+model, model <= 2"])
def test_replay_makes_the_rounds_of_a_real_greedy_decode(
    kind: str, policy: str, pair: PairFactory, tokenizer
) -> None:
    """Policies that do not look at timings choose the same gammas, so rounds must match."""
    target, draft = pair("llama")
    vocab = int(target.config.vocab_size)
    prompt = encode(tokenizer, "the cat sat on the mat, the cat sat on the")
    plain = autoregressive_generate(
        target, tokenizer, prompt, sampling=GREEDY, max_new_tokens=40, stop=()
    )

    def make_drafter() -> Drafter:
        model = ModelDrafter(draft, GREEDY, vocab)
        if kind == "model":
            return model
        if kind == "ngram":
            return NgramDrafter(vocab)
        return LookupThenModelDrafter(model, model_gamma=2 if "<=" in kind else None)

    (look,) = lookaheads(make_drafter(), target_path(plain), draws=4, seed=0)  # T = 0: one, certain
    kept = [k > 0 for k in look.kept]
    assert any(kept) and not all(kept)  # the drafter is right only sometimes: a real test
    if kind.startswith("ngram+model"):  # both kinds of proposal occur
        assert len({look.model_drafts(i) for i in range(len(look.kept))}) == 2
    real, replayed = _real_and_replayed(make_drafter, look, target, tokenizer, prompt, policy)
    assert replayed == real
    assert sum(r[3] for r in replayed) == len(plain.tokens) == 40


def test_keep_probability_is_q_over_p_capped_at_one() -> None:
    assert keep_probabilities([0.2, 0.5, 0.0, 1.0], [0.4, 0.25, 0.3, 1.0]) == [0.5, 1.0, 0.0, 1.0]


def test_verdicts_are_drawn_per_position_and_counted_as_runs() -> None:
    look = model_lookahead([1.0, 1.0, 0.0, 1.0], torch.Generator().manual_seed(0))
    assert look.kept == (2, 1, 0, 1) and look.forwards
    keeps = [0.5] * 400
    draws = [model_lookahead(keeps, torch.Generator().manual_seed(s)).kept for s in (0, 0, 1)]
    assert draws[0] == draws[1] != draws[2]  # seeded: the same draws for every policy
    kept_first = sum(k > 0 for k in draws[0])
    assert 160 <= kept_first <= 240  # Binomial(400, 1/2): mean 200, sd 10


def test_lookaheads_draw_verdicts_only_where_they_are_uncertain(
    pair: PairFactory, tokenizer
) -> None:
    target, draft = pair("llama")
    vocab = int(target.config.vocab_size)
    prompt = encode(tokenizer, "the cat sat on the")
    for sampling, expected in ((GREEDY, 1), (SamplingConfig(temperature=1.0, seed=3), 5)):
        plain = autoregressive_generate(
            target, tokenizer, prompt, sampling=sampling, max_new_tokens=20, stop=()
        )
        looks = lookaheads(ModelDrafter(draft, sampling, vocab), target_path(plain), 5, seed=0)
        assert len(looks) == expected  # T = 0: verdicts are certain, one lookahead is all
    assert len({look.kept for look in looks}) > 1  # T = 1: the draws differ


T1 = SamplingConfig(temperature=1.0)


def _first_two_rounds(rounds: Any) -> tuple[int, ...]:
    """Drafts kept in the first two rounds: an outcome that sees the policy's dependence."""
    return tuple(r.accepted for r in rounds[:2])


def test_replay_at_t1_makes_rounds_with_the_law_of_real_ones(pair: PairFactory, tokenizer) -> None:
    """Two-sample chi-square at significance 0.01 (400 seeded decodes a side): replayed rounds
    (a plain decode, verdicts drawn with keep = min(1, q(y)/p(y))) against real speculative
    sampling, with transformers' heuristic schedule so that round 2 depends on round 1. Two
    broken keep rules must be rejected: min(1, p/q) (ratio upside down) and q(y) alone."""
    target, draft = pair("llama")
    vocab = int(target.config.vocab_size)
    prompt = encode(tokenizer, "the cat sat on the")
    n, new_tokens = 400, 10
    real, replayed, upside_down, q_only = [], [], [], []
    for seed in range(n):
        sampling = SamplingConfig(temperature=1.0, seed=seed)
        result = speculative_generate(
            target,
            ModelDrafter(draft, sampling, vocab),
            tokenizer,
            prompt,
            sampling=sampling,
            speculation=SpeculationConfig(gamma=3, max_new_tokens=new_tokens),
            stop=(),
            policy=HeuristicGamma(start=3),
        )
        real.append(_first_two_rounds(result.rounds))
        plain = autoregressive_generate(
            target,
            tokenizer,
            prompt,
            sampling=SamplingConfig(temperature=1.0, seed=n + seed),  # independent of real
            max_new_tokens=new_tokens,
            stop=(),
        )
        path = target_path(plain)
        p_y = path.p_tokens
        q_y = draft_probabilities(ModelDrafter(draft, T1, vocab), path)
        for keeps, out in (
            (keep_probabilities(q_y, p_y), replayed),
            (keep_probabilities(p_y, q_y), upside_down),
            (q_y, q_only),
        ):
            look = model_lookahead(keeps, torch.Generator().manual_seed(seed))
            out.append(_first_two_rounds(replay(look, HeuristicGamma(start=3), COSTS).rounds))
    assert len(set(real)) >= 8  # a law with many outcomes, not a near-certain one
    assert not two_sample(real, replayed, alpha=0.01).reject
    assert two_sample(real, upside_down, alpha=0.01).reject
    assert two_sample(real, q_only, alpha=0.01).reject


def test_measured_costs_and_the_comparison_table(pair: PairFactory, tokenizer) -> None:
    target, draft = pair("llama")
    drafter = ModelDrafter(draft, GREEDY, int(target.config.vocab_size))
    costs = measure_costs(target, drafter, encode(tokenizer, "the cat sat"), widths=4, repeats=2)
    assert len(costs.verify) == 4 and min(costs.verify) > 0 and costs.draft_step > 0
    made: list[object] = []

    def lean_forward(model: object) -> CachedForward:
        made.append(model)
        return lean_target_cache(model)

    prompt = encode(tokenizer, "the cat sat")
    drafter = ModelDrafter(draft, GREEDY, int(target.config.vocab_size))  # a fresh draft cache
    lean = measure_costs(target, drafter, prompt, widths=3, repeats=2, make_cache=lean_forward)
    assert made == [target] and len(lean.verify) == 3 and min(lean.verify) > 0
    looks = [
        Lookahead(kept=(1, 0) * 10, offered=None, forwards=True),
        Lookahead(kept=tuple(range(20, 0, -1)), offered=None, forwards=True),
    ]
    speedups = compare(looks, costs, [1, 2], ["theory"], start=2)
    assert set(speedups) == {"γ=1", "γ=2", "theory"} and all(len(v) == 2 for v in speedups.values())
    rows = report("toy", speedups, [1, 2])
    assert len(rows) == 4 and rows[-1].startswith("| toy | best fixed γ per run (oracle)")
    assert float(rows[-1].split("|")[-2]) >= 1.0  # the best per request beats one gamma for all


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gammas", "2,x"], "--gammas: comma-separated integers"),
        (["--gammas", "0,2"], "--gammas and --start-gamma must be >= 1"),
        (["--workloads", "poems"], "--workloads: no workload file"),
        (
            ["--drafters", "early-exit:shared"],
            "--drafters: replay supports model, model:trimmed, ngram",
        ),
        (["--policies", "fixed"], "--policies: heuristic and/or theory"),
        (["--temperature", "-1"], "--temperature: temperature must be a finite number >= 0"),
        (["--draws", "0"], "--samples and --draws must be >= 1"),
    ],
)
def test_bad_arguments_fail_before_any_model_loads(
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def no_loading() -> None:
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(replay_module, "load_pair", no_loading)
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "replay", *args])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
