"""The `specviz bench` studies, one file each, every one a specviz.bench.sweep.Sweep."""

from __future__ import annotations

from specviz.bench.sweep import Sweep
from specviz.bench.sweeps.batch import Batch
from specviz.bench.sweeps.cross import Cross
from specviz.bench.sweeps.endpoint import Served
from specviz.bench.sweeps.heads import Heads
from specviz.bench.sweeps.levers import Levers
from specviz.bench.sweeps.memory import Memory
from specviz.bench.sweeps.replay import Replay
from specviz.bench.sweeps.speedup import Speedup
from specviz.bench.sweeps.trees import Trees

RENDER_ORDER = ("tree_sweep", "batch_sweep", "endpoint", "levers", "memory", "cross")  # Markdown


def studies() -> tuple[Sweep, ...]:
    """Every study `specviz bench` runs, the default first, in the order of its help and of
    the sections in a saved result (replay, with flags of its own, last)."""
    return (Speedup(), Trees(), Batch(), Levers(), Memory(), Cross(), Served(), Heads(), Replay())


def by_key() -> dict[str, Sweep]:
    """The studies that save a section, by its key."""
    return {s.key: s for s in studies() if s.key is not None}
