"""transformers' assisted generation beside ours runs without the deprecation warning it logs
about its own call to the assistant's generate() (a caller cannot act on it)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import torch

from specviz.models.generate import GENERATION_LOG, generate

from ..conftest import PairFactory

DEPRECATED = "together with generation-related"


class Caught(logging.Handler):
    """The messages a logger passes on."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def caught() -> Iterator[Caught]:
    """The generation logger's messages, its warn-once memory cleared before and after."""
    log, handler = logging.getLogger(GENERATION_LOG), Caught()
    once = logging.Logger.warning_once  # transformers adds it, a cached function
    once.cache_clear()
    log.addHandler(handler)
    yield handler
    log.removeHandler(handler)
    once.cache_clear()


def _assisted(pair: PairFactory) -> tuple[torch.nn.Module, torch.nn.Module, list[int]]:
    target, draft = pair("llama")
    return target, draft, [3, 4, 5, 6]


def test_assisted_generation_logs_no_deprecation(pair: PairFactory, caught: Caught) -> None:
    target, draft, ids = _assisted(pair)
    generate(target, ids, 6, 1.0, assistant=draft, stop=())
    assert not [m for m in caught.messages if DEPRECATED in m]


def test_the_same_call_without_quieting_logs_it(pair: PairFactory, caught: Caught) -> None:
    """Negative control: transformers' own assisted call does log the deprecation here."""
    target, draft, ids = _assisted(pair)
    batch = torch.tensor([ids])
    target.generate(
        batch,
        attention_mask=torch.ones_like(batch),
        max_new_tokens=6,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        assistant_model=draft,
        pad_token_id=0,
    )
    assert [m for m in caught.messages if DEPRECATED in m]
