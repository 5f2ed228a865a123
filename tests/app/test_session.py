"""The session's load → wait → work → release → fail pattern, without models."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from specviz.app import session as module
from specviz.app.session import PairCache, Session
from specviz.models.loading import ModelPair


@dataclass(frozen=True)
class Spec:
    target: str = "t"
    draft: str | None = "d"
    dtype: str = "float32"


class FakeCache(PairCache):
    """A cache whose pairs are the keys themselves (or the load's error)."""

    def __init__(self, error: Exception | None = None) -> None:
        super().__init__()
        self.error, self.loads = error, 0

    def cached(self, target: str, draft: str | None, dtype: str) -> Any:
        return None

    def get(self, target: str, draft: str | None, dtype: str, say: Callable[[str], None]) -> Any:
        self.loads += 1
        say("fetching")
        if self.error is not None:
            raise self.error
        return (target, draft, dtype)


def session(cache: PairCache | None = None) -> Session:
    s = Session()
    s.pairs = cache or FakeCache()
    return s


def shown(message: str) -> str:
    return f"show: {message}"


def failed(err: Exception) -> str:
    return f"fail: {err}"


def test_decode_loads_then_works_holding_the_slot_then_releases_it() -> None:
    s = session()

    def work(pair: Any) -> Iterator[str]:
        assert s.decoding.locked()
        yield f"work on {pair}"

    outs = list(s.decode(Spec(), shown, work, failed))
    assert outs[-1] == "work on ('t', 'd', 'float32')" and not s.decoding.locked()


@pytest.mark.parametrize("where", ["load", "work"])
def test_an_error_becomes_fails_outputs_and_the_slot_is_released(where: str) -> None:
    s = session(FakeCache(ValueError("no such model") if where == "load" else None))

    def work(pair: Any) -> Iterator[str]:
        yield "started"
        raise ValueError("bad prompt")

    outs = list(s.decode(Spec(), shown, work, failed))
    assert outs[-1] == ("fail: no such model" if where == "load" else "fail: bad prompt")
    assert not s.decoding.locked()


def test_a_request_waits_for_the_slot_and_says_so() -> None:
    s = session()
    s.decoding.acquire()  # another request decodes
    outs = s.decode(Spec(), shown, lambda pair: iter(["done"]), failed)
    first = next(outs)
    while "waiting" not in first:
        first = next(outs)
    assert "waiting for another request's decode to finish" in first
    threading.Timer(0.1, s.decoding.release).start()
    assert list(outs)[-1] == "done" and not s.decoding.locked()


def test_a_stream_closed_early_releases_the_slot() -> None:
    s = session()
    outs = s.decode(Spec(), shown, lambda pair: iter(["one", "two"]), failed)
    while next(outs) != "one":  # the load's messages come first
        pass
    assert s.decoding.locked()
    outs.close()  # the browser went away mid-decode
    assert not s.decoding.locked()


def test_decode_maybe_without_a_pair_loads_nothing_but_takes_the_slot() -> None:
    cache = FakeCache()
    s = session(cache)

    def work(pair: Any) -> Iterator[str]:
        yield f"{pair} {s.decoding.locked()}"

    assert list(s.decode_maybe(None, shown, work, failed)) == ["None True"]
    assert cache.loads == 0 and not s.decoding.locked()


def test_check_loads_without_the_slot() -> None:
    s = session()
    s.decoding.acquire()  # a decode runs: a check does not wait for it
    assert list(s.check(Spec(), shown, lambda p: f"ready {p[0]}", failed))[-1] == "ready t"
    bad = session(FakeCache(ValueError("no network")))
    assert list(bad.check(Spec(), shown, lambda p: "ready", failed))[-1] == "fail: no network"


def test_a_target_is_loaded_once_whichever_drafters_ask_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A drafter needing no draft gets the target of the loaded pair; a pair asked after the
    target alone loads only its draft (the target handed to load_pair)."""
    handed: list[Any] = []

    def load_pair(target: str, draft: str | None, **kw: Any) -> ModelPair:
        handed.append(kw["target_model"])
        model = kw["target_model"] or object()
        return ModelPair(target=model, draft=None if draft is None else object(), tokenizer=None)

    monkeypatch.setattr(module, "load_pair", load_pair)
    cache = PairCache()
    full = cache.get("t", "d", "float32", print)
    alone = cache.get("t", None, "float32", print)
    assert alone.target is full.target and alone.draft is None and len(handed) == 1
    other = PairCache()
    first = other.get("u", None, "float32", print)
    paired = other.get("u", "d", "float32", print)
    assert handed[1:] == [None, first.target] and paired.target is first.target
