"""The timings behind a profile: every target forward path at every thread count, in seconds.

For each path (specviz.tune.profile.FORWARDS) and each thread count, one round after another
runs a target pass over each width w (the tokens it scores: 1, k + 1 for each k of r(k), γ + 1)
and, right after each pass, one step of the default drafter's draft model, as in a round of
speculation (a step timed alone, back to back, would find the draft's weights still in the CPU's
caches). The context stays the prompt: each pass is cropped away before the next. The first
WARMUP rounds are not timed; the profile keeps the medians of the rest. The target loads once,
on the weights as stored; it is measured on transformers' forward, then packed for oneDNN in
place (the draft too) and measured on the packed and lean paths. Where packing does not apply
(packing_problem), the packed path is skipped and the lean one runs on the weights as loaded,
as `specviz generate --lean-target` would.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from specviz.core.cache import CachedForward, KVCache
from specviz.core.config import SamplingConfig
from specviz.core.decoding import clock
from specviz.core.drafter import Drafter
from specviz.drafters.hybrid import LookupThenModelDrafter
from specviz.drafters.names import DEFAULT_CONFIG, drafter_spec
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.trimmed import ranking_path
from specviz.fast.lean import lean_problem, lean_target_cache
from specviz.fast.packed import pack_linears, packing_problem
from specviz.models.loading import ModelLoadError, ModelPair, load_pair, parse_dtype, resolve
from specviz.tune.profile import (
    FORWARDS,
    RATIO_TOKENS,
    Measurement,
    Profile,
    fastest_plain,
    fastest_speculative,
    pair_id,
    this_machine,
)
from specviz.tune.timing import PASS_PROMPT

WARMUP = 1  # untimed rounds of every width first
REPEATS, QUICK_REPEATS = 9, 3  # timed rounds per path and thread count: a full run, --quick


@dataclass(frozen=True, kw_only=True)
class TunePlan:
    """What `specviz tune` measures: target and draft (model specs, as `specviz generate`
    takes them), dtype (its name), threads (the thread counts, each >= 1), repeats (timed
    rounds per path and thread count) and quick (a short run)."""

    target: str
    draft: str
    dtype: str
    threads: tuple[int, ...]
    repeats: int
    quick: bool


def plan_tune(
    target: str, draft: str, dtype: str, *, threads_max: int | None = None, quick: bool = False
) -> TunePlan:
    """The plan for thread counts 1..threads_max (None: every core, os.cpu_count()); ValueError
    saying what to change for a dtype or a threads_max this machine does not have."""
    parse_dtype(dtype)
    cores = os.cpu_count() or 1
    top = cores if threads_max is None else threads_max
    if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= cores:
        raise ValueError(
            f"--threads-max must be a whole number from 1 to {cores}, the cores this machine has "
            f"(got {threads_max!r})"
        )
    repeats = QUICK_REPEATS if quick else REPEATS
    return TunePlan(
        target=target,
        draft=draft,
        dtype=dtype,
        threads=tuple(range(1, top + 1)),
        repeats=repeats,
        quick=quick,
    )


def widths(gamma: int) -> tuple[int, ...]:
    """The pass widths to time: 1 (the plain step), k + 1 for each k of r(k), and γ + 1."""
    return tuple(sorted({1, gamma + 1, *(k + 1 for k in RATIO_TOKENS)}))


def tune(plan: TunePlan, progress: Callable[[str], None] = lambda _m: None) -> Profile:
    """Load the pair, time every path at every thread count, and choose (progress: a line per
    stage). torch's thread count is what it was before when this returns."""
    pair = load_pair(
        plan.target, plan.draft, dtype=parse_dtype(plan.dtype), pack=False, progress=progress
    )
    name = default_drafter(pair, plan.draft)
    prompt_ids = list(pair.tokenizer(PASS_PROMPT).input_ids)
    gamma = DEFAULT_CONFIG.gamma
    measured: list[Measurement] = []
    skipped: dict[str, str] = {}
    before = torch.get_num_threads()
    try:
        for forward in FORWARDS:
            problem = prepare(forward, pair)
            if problem is not None:
                skipped[forward] = problem
                progress(f"the {forward} forward does not apply: {problem}")
                continue
            for threads in plan.threads:
                progress(f"timing the {forward} forward on {threads} thread(s)")
                torch.set_num_threads(threads)
                seconds, draft_seconds = time_rounds(
                    pair.target,
                    make_cache(forward),
                    draft_stepper(name, pair),
                    prompt_ids,
                    widths(gamma),
                    plan.repeats,
                )
                measured.append(
                    Measurement(
                        forward=forward,
                        threads=threads,
                        pass_seconds=seconds,
                        draft_seconds=draft_seconds,
                    )
                )
    finally:
        torch.set_num_threads(before)
    found = tuple(measured)
    return Profile(
        machine=this_machine(),
        target=plan.target,
        draft=plan.draft,
        dtype=plan.dtype,
        pair=pair_id(plan.target, plan.draft, plan.dtype),
        drafter=name,
        gamma=gamma,
        torch=torch.__version__,
        quick=plan.quick,
        repeats=plan.repeats,
        measurements=found,
        skipped=skipped,
        plain=fastest_plain(found),
        speculative=fastest_speculative(found, gamma),
    )


def default_drafter(pair: ModelPair, draft: str) -> str:
    """The drafter `specviz generate` picks for this pair with no --drafter: the one load_pair
    chose for a draft with another tokenizer, else DEFAULT_CONFIG's (its untrimmed counterpart
    for a draft without a token ranking)."""
    if pair.drafter is not None:
        return pair.drafter
    spec = drafter_spec(DEFAULT_CONFIG.drafter)
    if spec.untrimmed is None:
        return spec.name
    try:
        ranked = ranking_path(resolve(draft, "draft", lambda _m: None)).is_file()
    except ModelLoadError:
        ranked = False
    return spec.name if ranked else spec.untrimmed


def prepare(forward: str, pair: ModelPair) -> str | None:
    """Make the pair's weights what forward runs on (packing both models in place for
    "packed"; "lean" follows it); why forward does not apply to them, or None."""
    if forward == "packed":
        problem = packing_problem(pair.target)
        if problem is None:
            pack_linears(pair.target)
            pack_linears(pair.draft)  # a no-op where the draft cannot be packed
        return problem
    if forward == "lean":
        return lean_problem(pair.target, wide=True)
    return None


def make_cache(forward: str) -> Callable[[Any], CachedForward]:
    """The target's cached forward on a path: specviz.fast.lean's for "lean", else
    transformers' (on the weights as they are: packed or not)."""
    return lean_target_cache if forward == "lean" else KVCache


def draft_stepper(name: str, pair: ModelPair) -> Drafter:
    """A fresh drafter called name for the pair, whose one-token proposal is one draft-model
    step: a lookup-then-model drafter's model (its lookups cost next to nothing)."""
    options = DrafterOptions(tokenizer=pair.tokenizer, draft_tokenizer=pair.draft_tokenizer)
    drafter = build_drafter(
        name,
        target=pair.target,
        draft=pair.draft,
        options=options,
        sampling=SamplingConfig(temperature=DEFAULT_CONFIG.temperature),
    )
    if isinstance(drafter, LookupThenModelDrafter):
        return drafter.model
    if not isinstance(drafter, Drafter):
        raise ValueError(f"the default drafter {name} drafts a tree: tune times chain drafters")
    return drafter


@torch.no_grad()
def time_rounds(
    target: Any,
    make: Callable[[Any], CachedForward],
    stepper: Drafter,
    prompt_ids: list[int],
    pass_widths: Sequence[int],
    repeats: int,
) -> tuple[dict[int, float], float]:
    """(width → median seconds of a target pass over that many tokens after the prompt, median
    seconds of one draft step), over repeats timed rounds after WARMUP (see the module's
    docstring); make: the target's cached forward."""
    device = target.device
    cache = make(target)
    cache.forward(torch.tensor(prompt_ids, device=device), keep=1)
    held = len(cache)
    stepper.prefill(prompt_ids[:-1])
    generator = torch.Generator(device=device).manual_seed(0)
    tokens = torch.tensor(prompt_ids[-1:] * max(pass_widths), device=device)  # (max width,)
    passes: dict[int, list[float]] = {w: [] for w in pass_widths}
    steps: list[float] = []
    for round_ in range(WARMUP + repeats):  # widths interleaved: drift touches each alike
        for w, times in passes.items():
            start = clock(device)
            cache.forward(tokens[:w])  # (w, V): every position scored, as in verification
            middle = clock(device)
            stepper.propose(prompt_ids, 1, generator, ())
            stepper.rollback(len(prompt_ids))
            end = clock(device)
            cache.crop(held)
            if round_ >= WARMUP:
                times.append(middle - start)
                steps.append(end - middle)
    return {w: statistics.median(t) for w, t in passes.items()}, statistics.median(steps)
