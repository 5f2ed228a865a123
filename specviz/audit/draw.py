"""Drawing an audit's samples: seeds, resume from saved samples, timing, progress events.

Seeds are distinct on every request of a prompt and k: the i-th speculative request has seed
first + 2i, the i-th plain one first + 2i + 1, so no two samples share a seed (engines that
consume one random number a token would otherwise pair the two sides' tokens).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specviz.audit.settings import Sample, Settings
from specviz.audit.sources import SIDES, Side, Source
from specviz.audit.store import SampleKey, Store


@dataclass(frozen=True, kw_only=True)
class Drawn:
    """Progress: `done` of the `total` requests a phase needs have been answered."""

    done: int
    total: int
    label: str


@dataclass(frozen=True, kw_only=True)
class Planned:
    """The budget, predicted from the timed probe before the audit samples in earnest."""

    requests: int
    seconds: float
    per_request: dict[int, float]  # k → median seconds of one request


@dataclass(frozen=True, kw_only=True)
class Looked:
    """One look at the samples: N per side and prompt of each k, and what it decided."""

    look: int
    n: dict[int, int]
    decision: str  # 'continue', 'not exact' or 'exact'


Event = Drawn | Planned | Looked
OnEvent = Callable[[Event], None]
Want = tuple[str, int, int, bool]  # (prompt, k, samples per side, with logprobs)


class Drawer:
    """Draws the samples an audit asks for, reusing the saved ones; counts and times requests."""

    def __init__(
        self, source: Source, settings: Settings, store: Store, on_event: OnEvent, first_seed: int
    ) -> None:
        self.source, self.settings, self.store = source, settings, store
        self.on_event, self.first_seed = on_event, first_seed
        self.saved = store.load()
        self.requests = 0
        self.seconds: dict[int, list[float]] = {}

    def seed(self, side: Side, i: int) -> int:
        """The seed of the i-th request of a side."""
        return self.first_seed + 2 * i + (side == "plain")

    def key(self, prompt: str, side: Side, k: int, i: int, top: bool) -> SampleKey:
        """The saved-sample key of the i-th request of a side."""
        return (prompt, side, k, self.seed(side, i), top)

    def fill(self, wants: Sequence[Want], label: str, sides: Sequence[Side] = SIDES) -> None:
        """Draw every missing sample the wants name, the sides interleaved, with progress."""
        missing = [
            (prompt, side, k, i, top)
            for prompt, k, count, top in wants
            for i in range(count)
            for side in sides
            if self.key(prompt, side, k, i, top) not in self.saved
        ]
        for done, (prompt, side, k, i, top) in enumerate(missing, 1):
            self._draw(prompt, side, k, i, top)
            self.on_event(Drawn(done=done, total=len(missing), label=label))

    def _draw(self, prompt: str, side: Side, k: int, i: int, top: bool) -> None:
        start = time.perf_counter()
        sample = self.source.sample(
            side, prompt, self.settings, seed=self.seed(side, i), tokens=k, top=top
        )
        self.seconds.setdefault(k, []).append(time.perf_counter() - start)
        self.requests += 1
        key = self.key(prompt, side, k, i, top)
        self.saved[key] = sample
        self.store.append(key, sample)

    def samples(self, prompt: str, side: Side, k: int, count: int, top: bool) -> list[Sample]:
        """The first count samples of a side (all drawn already)."""
        return [self.saved[self.key(prompt, side, k, i, top)] for i in range(count)]

    def median_seconds(self, k: int) -> float:
        """Median seconds of the requests of k tokens drawn so far (0 when none were): a
        server's first request on a prompt evaluates all of it, the later ones reuse it."""
        times = self.seconds.get(k, [])
        return statistics.median(times) if times else 0.0
