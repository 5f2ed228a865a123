"""One audit: refuse what cannot be honoured, plan N and the budget, draw and look, and return
a JSON-ready result with its verdict.

Verdicts (temperature > 0): 'not exact' when a look's Holm-adjusted two-sample test rejects, or
the check against reported logprobs does; 'exact' when a futility stop is reached, or the last
look does not reject and its least-favourable power reaches the goal; otherwise 'inconclusive'
(a smaller --n than planned). At temperature 0 the verdict is the greedy check's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specviz.audit.compare import logprob_check, two_sample_k
from specviz.audit.draw import Drawer, Looked, OnEvent, Planned
from specviz.audit.greedy import TIE_NATS, compare, greedy_verdict
from specviz.audit.power import DEFAULT_TARGETS, Target, power
from specviz.audit.sequential import LOOKS, Plan, final_goal, futile, plan, rejected
from specviz.audit.settings import Settings
from specviz.audit.sources import SIDES, Source
from specviz.audit.store import Store
from specviz.stats.testing import TestResult, holm_adjust

METHOD = (
    "two-sample chi-square on the first k tokens (at most 8 cells for k = 1, 16 beyond; sparse "
    "cells pooled), Holm across prompts and k; power from the noncentral chi-square at the "
    "least-favourable noncentrality 4 TV^2 n_eff; group-sequential looks at 1/4, 1/2, 3/4, 1 "
    "of N (alpha spent 10/10/10/70 %, futility stops spending beta 0.02)"
)
PROBE = 3  # requests per side and k timed before the budget is predicted


@dataclass(frozen=True, kw_only=True)
class AuditConfig:
    """What to audit and how surely."""

    prompts: tuple[str, ...]
    settings: Settings
    targets: tuple[Target, ...] = DEFAULT_TARGETS
    alpha: float = 0.01
    goal: float = 0.95
    n: int | None = None  # per side, prompt and k, instead of the planned N
    logprob_samples: int = 200  # per prompt, speculative side; 0: no logprob check
    logprob_tv: float = 0.1
    greedy_tokens: int = 32
    tie: float = TIE_NATS
    first_seed: int = 0
    samples: Path | None = None
    max_seconds: float | None = None
    command: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def run_audit(source: Source, config: AuditConfig, on_event: OnEvent) -> dict[str, Any]:
    """Run one audit of source; ValueError before any sampling for what cannot be audited."""
    source.check(config.settings)
    source.preflight()
    drawer = Drawer(source, config.settings, _store(source, config), on_event, config.first_seed)
    head = _head(source, config)
    if config.settings.greedy:
        return head | _greedy(drawer, config)
    return head | _laws(drawer, config, on_event)


def _store(source: Source, config: AuditConfig) -> Store:
    return Store(path=config.samples, engine=source.name, setting=config.settings.key)


def _head(source: Source, config: AuditConfig) -> dict[str, Any]:
    """The result's description of what was audited."""
    return {
        "engine": source.name,
        "command": config.command,
        "settings": asdict(config.settings),
        "setting": config.settings.key,
        "prompts": list(config.prompts),
        **config.extra,
    }


def _greedy(drawer: Drawer, config: AuditConfig) -> dict[str, Any]:
    """Temperature 0: one request a side and prompt, compared token by token."""
    wants = [(p, config.greedy_tokens, 1, True) for p in config.prompts]
    drawer.fill(wants, "greedy")
    n = config.greedy_tokens
    cases = [
        compare(
            i,
            drawer.samples(p, "spec", n, 1, True)[0],
            drawer.samples(p, "plain", n, 1, True)[0],
            tie=config.tie,
        )
        for i, p in enumerate(config.prompts)
    ]
    differ = [c for c in cases if not c.identical]
    return {
        "mode": "greedy",
        "verdict": greedy_verdict(cases),
        "tie_nats": config.tie,
        "differing_share": len(differ) / len(cases),
        "cases": [asdict(c) | {"kind": c.kind} for c in cases],
        "requests": drawer.requests,
    }


def _laws(drawer: Drawer, config: AuditConfig, on_event: OnEvent) -> dict[str, Any]:
    """Temperature > 0: the planned, sequential two-sample audit, then the logprob check."""
    design = plan(
        config.targets, len(config.prompts), alpha=config.alpha, goal=config.goal, n=config.n
    )
    budget = _budget(drawer, config, design, on_event)
    results: list[TestResult] = []
    decision, look = "continue", 0
    for look in range(len(LOOKS)):
        drawer.fill(_wants(drawer, config, design, look), f"look {look + 1} of {len(LOOKS)}")
        results = _tests(drawer, config, design, look)
        decision = _decide(results, config, design, look)
        on_event(
            Looked(look=look, n={k: design.size(k, look) for k in design.n}, decision=decision)
        )
        if decision != "continue":
            break
    logprobs = _logprob_part(drawer, config) if decision != "not exact" else _skipped("rejected")
    return {
        "mode": "law",
        "verdict": _verdict(decision, results, logprobs, design, look),
        "plan": _plan_json(config, design),
        "budget": budget | {"requests": drawer.requests},
        "stopped_at_look": look + 1,
        "tests": _tests_json(results, design.level(look)),
        "logprob_check": logprobs,
    }


def _budget(drawer: Drawer, config: AuditConfig, design: Plan, on_event: OnEvent) -> dict[str, Any]:
    """Time PROBE requests of each kind a side on the first prompt, predict the whole audit
    (every look drawn: an upper bound), refuse it if too long. The probe's samples are the
    first ones the audit uses."""
    per, work = _probe(drawer, config, design)
    prompts, at_once = len(config.prompts), drawer.source.sides_at_once
    seconds = prompts * (max(work.values()) if at_once else sum(work.values()))
    asked = _asked_sizes(drawer, design, design.last_look)
    requests = prompts * (sum(2 * n for n in asked.values()) + _logprob_requests(config))
    on_event(Planned(requests=requests, seconds=seconds, per_request=per, at_once=at_once))
    if config.max_seconds is not None and seconds > config.max_seconds:
        raise ValueError(
            f"the audit would take about {seconds / 60:.1f} min ({requests} requests), over "
            f"--max-minutes {config.max_seconds / 60:g}: give fewer --prompts, a smaller --n "
            "(less power) or more minutes"
        )
    budget = {"predicted_requests": requests, "predicted_seconds": seconds}
    return budget | {"per_request": per, "sides_at_once": at_once}


def _probe(
    drawer: Drawer, config: AuditConfig, design: Plan
) -> tuple[dict[str, float], dict[str, float]]:
    """Draw the probe: (median seconds of each kind of request, seconds of each side's
    requests for one prompt)."""
    asked = _asked_sizes(drawer, design, design.last_look)
    drawer.fill([(config.prompts[0], k, PROBE, False) for k in asked], "timing probe")
    per = {f"{side} k={k}": drawer.median_seconds(side, k) for side in SIDES for k in asked}
    work: dict[str, float] = {
        side: sum(n * per[f"{side} k={k}"] for k, n in asked.items()) for side in SIDES
    }
    logprobs, longest = _logprob_requests(config), max(t.k for t in config.targets)
    if logprobs:
        drawer.fill([(config.prompts[0], longest, PROBE, True)], "timing probe", sides=("spec",))
        per[f"spec k={longest} logprobs"] = drawer.median_seconds("spec", longest, True)
        work["spec"] += logprobs * per[f"spec k={longest} logprobs"]
    return per, work


def _logprob_requests(config: AuditConfig) -> int:
    """The logprob check's requests per prompt (0 where it does not run)."""
    settings = config.settings
    return config.logprob_samples if settings.temperature == 1.0 and settings.neutral else 0


def _asked(drawer: Drawer, design: Plan, k: int) -> int:
    """The tokens a request asks for the test of k: the longest k where one request's tokens
    serve every k (the source gives token outcomes), else k itself."""
    return max(design.n) if drawer.source.token_outcomes else k


def _asked_sizes(drawer: Drawer, design: Plan, look: int) -> dict[int, int]:
    """Requests per side and prompt of each length at a look."""
    sizes: dict[int, int] = {}
    for k in design.n:
        length = _asked(drawer, design, k)
        sizes[length] = max(sizes.get(length, 0), design.size(k, look))
    return sizes


def _wants(
    drawer: Drawer, config: AuditConfig, design: Plan, look: int
) -> list[tuple[str, int, int, bool]]:
    sizes = _asked_sizes(drawer, design, look)
    return [(p, k, n, False) for p in config.prompts for k, n in sizes.items()]


def _tests(drawer: Drawer, config: AuditConfig, design: Plan, look: int) -> list[TestResult]:
    """Every prompt's two-sample test of each k at this look."""
    out = []
    for i, prompt in enumerate(config.prompts):
        for target in config.targets:
            size = design.size(target.k, look)
            asked = _asked(drawer, design, target.k)
            spec, plain = (
                [s.tokens[: target.k] for s in drawer.samples(prompt, side, asked, size, False)]
                for side in ("spec", "plain")
            )
            name = f"prompt {i + 1} k={target.k}"
            out.append(two_sample_k(spec, plain, target, level=design.worst_level(look), name=name))
    return out


def _decide(results: list[TestResult], config: AuditConfig, design: Plan, look: int) -> str:
    if any(rejected(results, design.level(look))):
        return "not exact"
    targets = [t for _ in config.prompts for t in config.targets]
    if look < design.last_look and futile(results, targets):
        return "exact"
    return "continue" if look < design.last_look else "done"


def _verdict(
    decision: str, results: Sequence[TestResult], logprobs: dict[str, Any], design: Plan, look: int
) -> str:
    if decision == "not exact" or logprobs.get("reject"):
        return "not exact"
    if decision == "exact":
        return "exact"
    return "exact" if min(r.power for r in results) >= final_goal(design.goal) else "inconclusive"


def _tests_json(results: Sequence[TestResult], level: float) -> list[dict[str, Any]]:
    adjusted = holm_adjust([r.p_value for r in results])
    return [
        asdict(r) | {"p_holm": p, "reject": p < level, "level": level}
        for r, p in zip(results, adjusted, strict=True)
    ]


def _plan_json(config: AuditConfig, design: Plan) -> dict[str, Any]:
    return {
        "n": design.n,
        "alpha": design.alpha,
        "power_goal": design.goal,
        "tests": design.tests,
        "targets": [asdict(t) for t in config.targets],
        "looks": list(LOOKS),
        "method": METHOD,
        "n_given": config.n is not None,
        "planned_power": min(
            power(t.tv, design.n[t.k], design.n[t.k], t.df, design.worst_level(design.last_look))
            for t in config.targets
        ),
    }


def _skipped(why: str) -> dict[str, Any]:
    return {"applies": False, "why": why, "reject": False, "tests": []}


def _logprob_part(drawer: Drawer, config: AuditConfig) -> dict[str, Any]:
    """Each position's sampled tokens against the engine's own logprobs (speculative side)."""
    k = max(t.k for t in config.targets)
    if config.logprob_samples == 0:
        return _skipped("--logprob-samples 0")
    if not _logprob_requests(config):
        return _skipped("needs temperature 1 with no top-k, top-p or penalty (raw logprobs)")
    wants = [(p, k, config.logprob_samples, True) for p in config.prompts]
    drawer.fill(wants, "logprobs", sides=("spec",))
    results = [
        r
        for i, p in enumerate(config.prompts)
        for pos in range(k)
        if (r := _position(drawer, p, k, pos, config, f"prompt {i + 1} position {pos + 1}"))
    ]
    if not results:
        return _skipped("the source reports no logprobs")
    tests = _tests_json(results, config.alpha)
    return {"applies": True, "reject": any(t["reject"] for t in tests), "tests": tests}


def _position(
    drawer: Drawer, prompt: str, k: int, pos: int, config: AuditConfig, name: str
) -> TestResult | None:
    samples = drawer.samples(prompt, "spec", k, config.logprob_samples, True)
    level = config.alpha / (len(config.prompts) * k)
    return logprob_check(samples, pos, level=level, tv=config.logprob_tv, name=name)
