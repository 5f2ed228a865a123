"""The one resolver of the defaults a run uses where its flags do not choose: the target's
forward path and torch's thread count.

Where `specviz tune` saved a profile for this machine and the pair (specviz.tune.profile), its
choice applies: the fastest path and thread count it measured for plain decoding, or for
speculation. Without one, the registry's DEFAULT_CONFIG applies, as shipped. A profile that
cannot be read, or that was measured on another machine or for another pair, is ignored with a
message. `specviz generate` and the app both resolve their defaults here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specviz.drafters.names import DEFAULT_CONFIG, drafter_spec
from specviz.tune.profile import (
    FORWARDS,
    Profile,
    ProfileError,
    load_profile,
    pair_id,
    profile_path,
    this_machine,
)

SHIPPED = "the shipped DEFAULT_CONFIG"  # Defaults.source without a profile


@dataclass(frozen=True, kw_only=True)
class Defaults:
    """A run's default forward path (one of specviz.tune.profile.FORWARDS) and torch threads.

    threads None: specviz.runtime's default (OMP_NUM_THREADS where set, else one). path: the
    profile file they come from, profile its content (both None: the shipped DEFAULT_CONFIG).
    """

    forward: str
    threads: int | None
    path: Path | None = None
    profile: Profile | None = None

    def __post_init__(self) -> None:
        if self.forward not in FORWARDS:
            raise ValueError(f"forward must be one of {FORWARDS} (got {self.forward!r})")

    @property
    def lean(self) -> bool:
        """The target runs on specviz.fast.lean's forward (where the drafter takes it)."""
        return self.forward == "lean"

    @property
    def pack(self) -> bool:
        """The models load on pre-packed oneDNN weights (specviz.fast.packed)."""
        return self.forward != "transformers"

    @property
    def source(self) -> str:
        """Where they come from, for a message: the profile's path or the shipped default."""
        return SHIPPED if self.path is None else f"the tuned profile {self.path}"

    def meta(self) -> dict[str, Any] | None:
        """What a saved benchmark records of it: the profile's path and content, or None."""
        if self.path is None or self.profile is None:
            return None
        return {"path": str(self.path), "content": self.profile.to_json()}


def shipped_defaults() -> Defaults:
    """DEFAULT_CONFIG's forward and threads. Its forward "transformers" is transformers'
    forward on the weights `specviz generate` loads, pre-packed by default: the "packed" path."""
    forward = "lean" if DEFAULT_CONFIG.forward == "lean" else "packed"
    return Defaults(forward=forward, threads=DEFAULT_CONFIG.threads)


def resolve_defaults(
    target: str,
    draft: str,
    dtype: str,
    *,
    plain: bool = False,
    device: str = "cpu",
    folder: str | Path | None = None,
    warn: Callable[[str], None] = lambda _m: None,
) -> Defaults:
    """The defaults of a run of target and draft in dtype on device.

    The profile of this machine and the pair in specviz.tune.profile.profiles_dir(folder) gives
    its choice for plain decoding (plain=True) or for speculation; without one, or off the CPU
    (a profile times CPU threads), shipped_defaults(). A profile that cannot be read or belongs
    to another machine or pair is ignored: warn(why) says so, and the shipped defaults apply.
    """
    shipped = shipped_defaults()
    if device.split(":")[0] != "cpu":
        return shipped
    path = profile_path(target, draft, dtype, folder=folder)
    if not path.is_file():
        return shipped
    try:
        profile = load_profile(path)
    except ProfileError as err:
        warn(f"ignoring a profile: {err}; {SHIPPED} applies")
        return shipped
    problem = foreign(profile, pair_id(target, draft, dtype))
    if problem is not None:
        warn(f"ignoring the profile {path}: {problem}; {SHIPPED} applies")
        return shipped
    choice = profile.plain if plain else profile.speculative
    return Defaults(forward=choice.forward, threads=choice.threads, path=path, profile=profile)


def foreign(profile: Profile, pair: str) -> str | None:
    """Why profile does not apply to this machine and the pair called pair (None: it does)."""
    here = this_machine()
    if profile.machine.id != here.id:
        return (
            f"it was measured on another machine ({profile.machine.id}; this one is {here.id}): "
            "run `specviz tune` here"
        )
    if profile.pair != pair:
        return f"it is for another pair ({profile.pair}, not {pair}): run `specviz tune` for it"
    return None


def lean_applies(drafter: str | None) -> bool:
    """Whether a decode with drafter (None: plain decoding) takes the lean target forward: not
    a tree verified through transformers' forward with a 4D mask, nor early-exit:shared, which
    verifies through its own forward of the target (a drafting head's tree takes it). A
    batched decode (specviz.batch) never does."""
    if drafter is None:
        return True
    spec = drafter_spec(drafter)
    return not ((spec.tree or spec.shares_target_cache) and spec.head is None)
