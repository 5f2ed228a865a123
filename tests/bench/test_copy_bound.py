"""tools.copy_bound: replayed rounds, and the oracles' order (no copy beats the oracle)."""

from __future__ import annotations

import random

from tools.copy_bound import GAMMA, Stream, accepted, oracle_rounds, rounds, suffix_rounds


def test_a_drafter_that_never_hits_takes_a_round_per_token() -> None:
    s = Stream(prompt=[1, 2, 3], answer=[4, 5, 6, 7])
    assert rounds(s, lambda context, rest: 0) == 4
    assert rounds(s, lambda context, rest: len(rest) - 1) == 1  # all but the target's token


def test_accepted_stops_at_the_first_difference_and_at_gamma() -> None:
    assert accepted([9, 1, 2, 3, 4], 1, [1, 2, 5], GAMMA) == 2
    assert accepted(list(range(40)), 0, list(range(40)), GAMMA) == GAMMA


def test_an_answer_that_copies_its_prompt_takes_one_round_per_gamma_plus_one() -> None:
    text = list(range(10, 60))  # 50 distinct tokens
    s = Stream(prompt=[*text, 5, text[0]], answer=text[1:])  # the prompt's text again
    assert oracle_rounds([s], anchored=True) == -(-49 // (GAMMA + 1))
    assert suffix_rounds([s], 100, set()) >= oracle_rounds([s], anchored=True)


def test_no_drafter_that_copies_a_match_beats_the_anchored_oracle() -> None:
    rng = random.Random(0)
    for _ in range(20):
        streams = [
            Stream(
                prompt=[rng.randrange(6) for _ in range(rng.randrange(5, 40))],
                answer=[rng.randrange(6) for _ in range(rng.randrange(5, 40))],
            )
            for _ in range(3)
        ]
        free = oracle_rounds(streams, anchored=False)
        anchored = oracle_rounds(streams, anchored=True)
        assert free <= anchored <= suffix_rounds(streams, 6, set())
        assert anchored <= oracle_rounds(streams, anchored=True, shared=False)  # less to copy
