"""Profiles written by hand for tests of what reads them (no timing involved)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from specviz.drafters.names import DEFAULT_CONFIG
from specviz.tune.profile import (
    FORWARDS,
    Choice,
    Machine,
    Measurement,
    Profile,
    fastest_plain,
    fastest_speculative,
    pair_id,
    profile_path,
    save_profile,
    this_machine,
)


def measurement(forward: str, threads: int, step: float, extra: float, draft: float) -> Measurement:
    """A path whose pass over w tokens takes step + (w - 1) * extra seconds, and whose draft
    step takes draft seconds."""
    passes = {w: step + (w - 1) * extra for w in (1, 2, 3, 4, 5, 9)}
    return Measurement(forward=forward, threads=threads, pass_seconds=passes, draft_seconds=draft)


def make_profile(
    target: str,
    draft: str,
    dtype: str = "float32",
    *,
    plain: Choice | None = None,
    speculative: Choice | None = None,
    machine: Machine | None = None,
) -> Profile:
    """A profile of every path at 1 and 2 threads for the pair on this machine (or machine),
    choosing plain and speculative where given, else the fastest of its made-up timings."""
    found = tuple(
        measurement(f, t, step=0.01 * (i + 1) / t, extra=0.001 * (i + 1), draft=0.002)
        for i, f in enumerate(FORWARDS)
        for t in (1, 2)
    )
    gamma = DEFAULT_CONFIG.gamma
    return Profile(
        machine=machine or this_machine(), target=target, draft=draft, dtype=dtype,
        pair=pair_id(target, draft, dtype), drafter=DEFAULT_CONFIG.drafter, gamma=gamma,
        torch="test", quick=True, repeats=3, measurements=found, skipped={},
        plain=plain or fastest_plain(found),
        speculative=speculative or fastest_speculative(found, gamma),
    )  # fmt: skip


def write_profile(folder: Path, profile: Profile) -> Path:
    """Save profile where the defaults look for it in folder (its machine's and pair's name)."""
    path = profile_path(
        profile.target, profile.draft, profile.dtype, folder=folder, machine=profile.machine
    )
    return save_profile(profile, path)


def elsewhere() -> Machine:
    """Another machine than this one."""
    return replace(this_machine(), cpu="Some Other CPU", cores=this_machine().cores + 64)
