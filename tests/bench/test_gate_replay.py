"""tools.gate_replay: the hybrid's gates replayed on a tiny pair (counts, not timings)."""

from __future__ import annotations

from dataclasses import asdict
from types import SimpleNamespace

import pytest

from specviz.api import autoregressive_generate
from specviz.core.config import SamplingConfig
from specviz.workloads import Request
from tests.conftest import PairFactory, char_tokenizer
from tools.gate_replay import main, parse_gate, replay, table

TEXTS = ("the cat sat on the mat", "the dog sat on the mat", "a cat and a dog sat")


def _requests() -> list[Request]:
    return [Request(id=f"toy-{i}", category="toy", prompt=text, max_new_tokens=12,
                    temperature=0.0) for i, text in enumerate(TEXTS)]  # fmt: skip


def test_every_gate_writes_the_greedy_answers_and_a_shut_gate_drafts_less(
    pair: PairFactory,
) -> None:
    target, draft = pair("llama")
    toy = SimpleNamespace(target=target, draft=draft, tokenizer=char_tokenizer())
    requests = _requests()
    greedy = SamplingConfig(temperature=0.0)
    plain = 0
    for r in requests:
        ids = toy.tokenizer.encode(r.prompt)
        out = autoregressive_generate(target, toy.tokenizer, ids, sampling=greedy,
                                      max_new_tokens=r.max_new_tokens)  # fmt: skip
        plain += len(out.tokens)
    rows = {
        g: replay(toy, "toy", requests, g, "suffix+model") for g in ("0", "1", "1/request", "0.3")
    }
    assert {r.tokens for r in rows.values()} == {plain}  # greedy: the same answers
    assert all(1 <= r.rounds <= r.tokens for r in rows.values())
    assert rows["0"].model_forwards > rows["1"].model_forwards  # 1: held back, but probes
    assert rows["1/request"].carried is False and rows["0.3"].min_alpha == 0.3
    assert rows["0"].tokens_per_pass == rows["0"].tokens / rows["0"].rounds
    lines = table([asdict(r) for r in rows.values()])
    assert [line.split(" | ")[1] for line in lines[2:]] == ["0", "1", "1", "0.3"]


@pytest.mark.parametrize("gate", ["1.5", "x", "0.3/task"])
def test_a_bad_gate_is_refused_before_any_model_loads(
    gate: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match="a gate is"):
        parse_gate(gate)
    with pytest.raises(SystemExit):
        main(["code", "--gates", gate])
    assert "a gate is" in capsys.readouterr().err
