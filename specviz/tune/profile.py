"""A tuned profile: what `specviz tune` measured for one machine and model pair, and its choice.

Terms. A forward path is how the target computes a pass (FORWARDS): "transformers" (transformers'
forward on the weights as loaded), "packed" (transformers' forward on weights pre-packed for
oneDNN, specviz.fast.packed) or "lean" (specviz.fast.lean's forward on packed weights). A pass
over w tokens scores w positions at once; the plain decode step is a 1-token pass. r(k), the
k-token pass ratio, is the seconds of a pass scoring k + 1 tokens over those of a 1-token pass
(what verifying k draft tokens costs in plain steps); c is the seconds of one draft-model step
over those of a 1-token target pass. A round of speculation with γ draft tokens costs
γ · draft step + the pass over γ + 1 tokens = (γ c + r(γ)) plain steps.

A profile is one JSON file per machine and pair, `<machine>-<pair>.json` under profiles_dir():
machine is a stable id made of the platform, the CPU model and the core count (Machine.id),
pair one of the target's and draft's names and the dtype (pair_id).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specviz.models.bundled import cache_dir
from specviz.models.loading import NAMED_MODELS
from specviz.runtime import cpu_name

FORWARDS = ("transformers", "packed", "lean")  # the target's forward paths, as defined above
RATIO_TOKENS = (1, 2, 4, 8)  # the k of r(k) a profile reports
FORMAT, VERSION = "specviz-profile", 1  # what a profile file says it is, and its version
PROFILES_ENV = "SPECVIZ_PROFILES"  # the profiles' folder, where set (else the user cache's)


class ProfileError(ValueError):
    """A profile file cannot be read as one; the message names the file and what to do."""


def _slug(text: str, limit: int = 48) -> str:
    """text lowercased, every run of other characters than a-z, 0-9 and '.' made one '-'."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")[:limit].strip("-") or "x"


@dataclass(frozen=True, kw_only=True)
class Machine:
    """What a profile was measured on: the OS (system), the CPU architecture (arch), the CPU
    model (cpu) and the number of cores torch can use (cores, os.cpu_count())."""

    system: str
    arch: str
    cpu: str
    cores: int

    @property
    def id(self) -> str:
        """A stable id: 'linux-x86_64-<cpu model>-<cores>c', as a file name takes it."""
        return f"{_slug(self.system)}-{_slug(self.arch)}-{_slug(self.cpu)}-{self.cores}c"


def this_machine() -> Machine:
    """The machine this process runs on."""
    return Machine(
        system=platform.system() or "unknown",
        arch=platform.machine() or "unknown",
        cpu=cpu_name(),
        cores=os.cpu_count() or 1,
    )


def _model_id(spec: str) -> str:
    """A model spec as a file name takes it: a named model as is, a hub id 'org/name' as
    'org-name', a folder as its name and a hash of its whole path (two folders of one name
    stay apart)."""
    if spec in NAMED_MODELS:
        return spec
    path = Path(spec).expanduser()
    if path.exists():
        full = str(path.resolve())
        digest = hashlib.sha256(os.fsencode(full)).hexdigest()[:8]
        return f"{_slug(path.resolve().name, 32)}-{digest}"
    return _slug(spec)


def pair_id(target: str, draft: str, dtype: str) -> str:
    """The pair's id in a profile's file name: '<target>+<draft>-<dtype>'."""
    return f"{_model_id(target)}+{_model_id(draft)}-{_slug(dtype)}"


def profiles_dir(folder: str | Path | None = None) -> Path:
    """Where profiles live: folder where given, else $SPECVIZ_PROFILES, else the user cache's
    profiles folder (~/.cache/specviz/profiles; specviz.models.bundled.cache_dir)."""
    if folder is not None:
        return Path(folder).expanduser()
    override = os.environ.get(PROFILES_ENV)
    return Path(override).expanduser() if override else cache_dir() / "profiles"


def profile_path(
    target: str,
    draft: str,
    dtype: str,
    *,
    folder: str | Path | None = None,
    machine: Machine | None = None,
) -> Path:
    """The profile file of this machine (or machine) and the pair, in profiles_dir(folder)."""
    name = f"{(machine or this_machine()).id}-{pair_id(target, draft, dtype)}.json"
    return profiles_dir(folder) / name


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """One forward path at one thread count. pass_seconds: tokens scored in one target pass →
    its median seconds (1: the plain decode step); draft_seconds: the median seconds of one
    step of the draft model, timed right after a target pass as in a round."""

    forward: str
    threads: int
    pass_seconds: Mapping[int, float]
    draft_seconds: float

    @property
    def step_seconds(self) -> float:
        """The plain decode step: a 1-token pass."""
        return self.pass_seconds[1]

    def ratio(self, k: int) -> float:
        """r(k): a pass scoring k + 1 tokens over a 1-token pass."""
        return self.pass_seconds[k + 1] / self.step_seconds

    @property
    def c(self) -> float:
        """One draft step over one 1-token target pass."""
        return self.draft_seconds / self.step_seconds

    def round_seconds(self, gamma: int) -> float:
        """Seconds of a round of γ draft steps and the pass verifying them: the step times
        (γ c + r(γ))."""
        return gamma * self.draft_seconds + self.pass_seconds[gamma + 1]

    def to_json(self, gamma: int) -> dict[str, Any]:
        """The JSON object of a profile file; step, r, c and the round at γ are written for a
        reader (from_json reads the pass and draft seconds only)."""
        return {
            "forward": self.forward,
            "threads": self.threads,
            "step_seconds": self.step_seconds,
            "pass_seconds": {str(w): s for w, s in sorted(self.pass_seconds.items())},
            "r": {str(k): self.ratio(k) for k in RATIO_TOKENS if k + 1 in self.pass_seconds},
            "draft_step_seconds": self.draft_seconds,
            "c": self.c,
            "round_seconds": self.round_seconds(gamma),
        }


@dataclass(frozen=True, kw_only=True)
class Choice:
    """A forward path (one of FORWARDS) and the number of torch threads to run it on."""

    forward: str
    threads: int

    def __post_init__(self) -> None:
        if self.forward not in FORWARDS:
            raise ValueError(f"forward must be one of {FORWARDS} (got {self.forward!r})")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"threads must be an integer >= 1 (got {self.threads!r})")


def fastest_plain(measurements: tuple[Measurement, ...]) -> Choice:
    """The path and thread count with the least plain decode step."""
    best = min(measurements, key=lambda m: m.step_seconds)
    return Choice(forward=best.forward, threads=best.threads)


def fastest_speculative(measurements: tuple[Measurement, ...], gamma: int) -> Choice:
    """The path and thread count with the least expected time per token of speculation at γ.

    That time is round_seconds(γ) over the expected tokens a round emits, which depend on the
    acceptance rate and γ alone, not on the path or the threads: so it minimises the round's
    seconds, γ · draft step + the pass over γ + 1 tokens.
    """
    best = min(measurements, key=lambda m: m.round_seconds(gamma))
    return Choice(forward=best.forward, threads=best.threads)


@dataclass(frozen=True, kw_only=True)
class Profile:
    """What `specviz tune` measured and chose for one machine and pair.

    target, draft, dtype: the pair as given to `specviz tune`, pair its id (pair_id); drafter
    and gamma: the drafter whose draft model's step c times, and the γ the speculative choice
    assumes; quick: a short run; repeats: timed rounds after the warm-up; measurements: every
    path and thread count measured; skipped: path → why it does not apply to this pair; plain
    and speculative: the fastest choice for plain decoding and for speculation; torch: the
    version of torch that ran it.
    """

    machine: Machine
    target: str
    draft: str
    dtype: str
    drafter: str
    gamma: int
    torch: str
    quick: bool
    repeats: int
    measurements: tuple[Measurement, ...]
    skipped: Mapping[str, str]
    plain: Choice
    speculative: Choice
    pair: str  # pair_id(target, draft, dtype), where and when it was measured

    def to_json(self) -> dict[str, Any]:
        """The JSON object a profile file holds."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "machine": {"id": self.machine.id, **asdict(self.machine)},
            "pair": {"id": self.pair, "target": self.target, "draft": self.draft},
            "dtype": self.dtype,
            "drafter": self.drafter,
            "gamma": self.gamma,
            "torch": self.torch,
            "quick": self.quick,
            "repeats": self.repeats,
            "plain": asdict(self.plain),
            "speculative": asdict(self.speculative),
            "skipped": dict(self.skipped),
            "measurements": [m.to_json(self.gamma) for m in self.measurements],
        }


def save_profile(profile: Profile, path: str | Path) -> Path:
    """Write profile as JSON at path (its folders made); returns the path."""
    file = Path(path).expanduser()
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps(profile.to_json(), indent=2) + "\n", encoding="utf-8")
    return file


def load_profile(path: str | Path) -> Profile:
    """The profile in the file at path; ProfileError naming the file when it is not one."""
    file = Path(path).expanduser()
    redo = "run `specviz tune` again to rewrite it, or delete it"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as err:
        raise ProfileError(f"profile {file}: cannot read it ({err.strerror or err})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ProfileError(f"profile {file} is not JSON ({err}): {redo}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ProfileError(f'{file} is not a specviz profile (no "format": {FORMAT!r}): {redo}')
    if data.get("version") != VERSION:
        raise ProfileError(
            f"profile {file} has version {data.get('version')!r}; this specviz reads version "
            f"{VERSION}: {redo}"
        )
    try:
        return _from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ProfileError(
            f"profile {file} is damaged ({type(err).__name__}: {err}): {redo}"
        ) from None


def _from_json(data: dict[str, Any]) -> Profile:
    """A Profile from a profile file's object (KeyError, TypeError, ValueError where it is not
    one)."""
    machine = data["machine"]
    measurements = tuple(
        Measurement(
            forward=Choice(forward=m["forward"], threads=m["threads"]).forward,
            threads=int(m["threads"]),
            pass_seconds={int(w): _seconds(s) for w, s in m["pass_seconds"].items()},
            draft_seconds=_seconds(m["draft_step_seconds"]),
        )
        for m in data["measurements"]
    )
    if not all(1 in m.pass_seconds for m in measurements):
        raise ValueError("a measurement lacks the 1-token pass")
    return Profile(
        machine=Machine(
            system=str(machine["system"]),
            arch=str(machine["arch"]),
            cpu=str(machine["cpu"]),
            cores=int(machine["cores"]),
        ),
        target=str(data["pair"]["target"]),
        draft=str(data["pair"]["draft"]),
        pair=str(data["pair"]["id"]),
        dtype=str(data["dtype"]),
        drafter=str(data["drafter"]),
        gamma=int(data["gamma"]),
        torch=str(data["torch"]),
        quick=bool(data["quick"]),
        repeats=int(data["repeats"]),
        measurements=measurements,
        skipped={str(k): str(v) for k, v in dict(data["skipped"]).items()},
        plain=Choice(**data["plain"]),
        speculative=Choice(**data["speculative"]),
    )


def _seconds(value: object) -> float:
    """value as seconds: a finite number > 0, else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e9:
        raise ValueError(f"{value!r} is not a number of seconds")
    return float(value)
