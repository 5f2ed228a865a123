"""The records of a saved result: what one request measured under one setting (its metrics from
the events of a speculative run and its paired plain run), and the arithmetic every table shares
(spreads, cost per 1k tokens, rows grouped by a key)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

from specviz.api import GenerationResult
from specviz.core.events import Rejected, Sampled
from specviz.gamma.theory import speedup_bound
from specviz.results.setting import BenchSetting

T = TypeVar("T")
DEFAULT_PRICE_PER_HOUR = 0.10  # USD per device-hour; a small cloud CPU instance (documented)


@dataclass(frozen=True, kw_only=True)
class RequestMetrics:
    """What one speculative request measured, beside its paired plain run."""

    latency: float
    plain_latency: float
    tokens: int
    rounds: int
    proposed: int
    accepted: int
    rejected: int
    draft_seconds: float
    draft_calls: int
    target_seconds: float
    # The decode-phase split; 0.0 and () where it was not recorded (schema-1 results, see
    # specviz.results.schema): then the ratios below fall back on the whole plain run.
    prefill_seconds: float = 0.0  # the speculative run's prompt time (drafter and target share)
    plain_decode_seconds: float = 0.0  # the plain run less its prompt time, scaled to `tokens`
    widths: tuple[int, ...] = ()  # tokens verified by each pass (gamma + 1), round by round
    pass_seconds: tuple[float, ...] = ()  # seconds of each verification pass, prompt share out

    @property
    def tokens_per_second(self) -> float:
        """Generated tokens per wall-clock second."""
        return self.tokens / self.latency

    @property
    def target_calls_per_token(self) -> float:
        """Target forward passes per generated token (the prompt rides in the first)."""
        return self.rounds / self.tokens

    @property
    def alpha(self) -> float:
        """Per-token acceptance: accepted / verified (drafts after a rejection are not verified)."""
        verified = self.accepted + self.rejected
        return self.accepted / verified if verified else float("nan")

    @property
    def accepted_per_round(self) -> float:
        """Mean accepted drafts per round (bonus and resampled tokens not counted)."""
        return self.accepted / self.rounds

    @property
    def tokens_per_round(self) -> float:
        """Mean emitted tokens per round (bonus or resampled token counted)."""
        return self.tokens / self.rounds

    @property
    def step_seconds(self) -> float:
        """Seconds per plain decode step: the paired plain run after its prompt pass."""
        plain = self.plain_decode_seconds or self.plain_latency  # no split: prompt included
        return plain / self.tokens

    @property
    def cost_ratio(self) -> float:
        """c = seconds per draft forward / seconds per plain decode step (paired plain run)."""
        if not self.draft_calls:
            return 0.0
        return (self.draft_seconds / self.draft_calls) / self.step_seconds

    @property
    def mean_gamma(self) -> float:
        """Drafted tokens per round (a dynamic policy's effective gamma)."""
        return self.proposed / self.rounds if self.rounds else 0.0

    @property
    def speedup(self) -> float:
        """Plain latency / speculative latency for the same request and length (end to end)."""
        return self.plain_latency / self.latency

    @property
    def decode_speedup(self) -> float:
        """The same less each run's prompt time: the decode loop the bound describes.

        The prompt costs both runs about the same, so it pulls the end-to-end speedup toward 1
        on short outputs. nan where the split was not recorded.
        """
        if not self.plain_decode_seconds:
            return float("nan")
        return self.plain_decode_seconds / (self.latency - self.prefill_seconds)

    def bound(self) -> float:
        """Leviathan et al.'s expected speedup for the measured alpha and c.

        Evaluated at the mean number of tokens actually drafted per round: a fixed gamma's
        last rounds are shortened by max_new_tokens, dynamic policies vary it, and an n-gram
        drafter proposes nothing when it finds no match (a round that is then a plain step).
        """
        a = min(max(self.alpha, 0.0), 1.0) if self.alpha == self.alpha else 0.0
        return speedup_bound(a, self.mean_gamma, self.cost_ratio)

    def efficiency(self) -> float:
        """End-to-end speedup / the bound (the prompt pass included)."""
        return self.speedup / self.bound()

    def decode_efficiency(self) -> float:
        """Decode speedup / the bound: 1.0 means the loop adds no overhead beyond theory."""
        return self.decode_speedup / self.bound()

    @property
    def verify_ratio(self) -> float:
        """r = seconds per verification pass (gamma + 1 tokens) / seconds per plain target step.

        The Leviathan bound assumes r = 1 (a memory-bound target); on a CPU r > 1.
        """
        return (self.target_seconds / self.rounds) / self.step_seconds

    def refined_bound(self) -> float:
        """E[tokens per round] / (gamma c + r): the bound with the measured verification cost."""
        g, c = self.mean_gamma, self.cost_ratio
        return self.bound() * (g * c + 1) / (g * c + self.verify_ratio)

    def loop_efficiency(self) -> float:
        """Decode speedup / refined_bound: what is left is the loop's own overhead.

        Where the split was not recorded, the end-to-end speedup stands in.
        """
        decode = self.decode_speedup
        return (decode if decode == decode else self.speedup) / self.refined_bound()


def _carried(seconds: list[float], widths: list[int]) -> float:
    """Prompt seconds in the first of these passes: its excess over the median of the later
    passes of its width (of all later passes if none; 0 if there are none)."""
    same = [t for t, w in zip(seconds[1:], widths[1:], strict=True) if w == widths[0]]
    others = same or seconds[1:]
    return max(seconds[0] - statistics.median(others), 0.0) if others else 0.0


def request_metrics(spec: GenerationResult, plain: GenerationResult) -> RequestMetrics:
    """Metrics of one speculative run paired with one plain run of the same request.

    Both runs score the prompt in their first target pass; its share of that pass (the excess
    over later passes of the same width) counts as prompt time, the rest as decoding.
    """
    rounds = spec.rounds
    scale = len(spec.tokens) / max(len(plain.tokens), 1)  # T > 0: the two may differ in length
    widths = [r.proposed + 1 for r in rounds]
    passes = [r.target_seconds for r in rounds]
    spec_prompt = _carried(passes, widths) if rounds and rounds[0].prompt_tokens else 0.0
    if passes:
        passes[0] -= spec_prompt
    steps = [e.target_seconds for e in plain.events if isinstance(e, Sampled)]
    plain_prompt = plain.prefill.target_seconds + _carried(steps, [1] * len(steps))
    prefill = spec.prefill
    return RequestMetrics(
        latency=spec.seconds,
        plain_latency=plain.seconds * scale,
        tokens=len(spec.tokens),
        rounds=len(rounds),
        proposed=spec.proposed,
        accepted=spec.accepted,
        rejected=sum(isinstance(e, Rejected) for e in spec.events),
        draft_seconds=sum(r.draft_seconds for r in rounds),
        draft_calls=sum(r.draft_forward_calls for r in rounds),
        target_seconds=sum(passes),
        prefill_seconds=prefill.target_seconds + prefill.draft_seconds + spec_prompt,
        plain_decode_seconds=(plain.seconds - plain_prompt) * scale,
        widths=tuple(widths),
        pass_seconds=tuple(passes),
    )


def cost_per_1k_tokens(seconds: float, tokens: int, price_per_hour: float) -> float:
    """Device cost of generating 1000 tokens at the measured rate."""
    if tokens <= 0:
        raise ValueError("cost per token needs at least one generated token")
    return price_per_hour * seconds / 3600 / tokens * 1000


@dataclass(frozen=True, kw_only=True)
class Spread:
    """Median with min and max."""

    median: float
    low: float
    high: float


def spread(values: Sequence[float]) -> Spread:
    """Median, min and max of values."""
    if not values:
        raise ValueError("spread of no values")
    return Spread(median=statistics.median(values), low=min(values), high=max(values))


def grouped(items: Iterable[T], key: Callable[[T], Any]) -> dict[Any, list[T]]:
    """items by key(item), each key in the order it first comes."""
    out: dict[Any, list[T]] = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return out


@dataclass(frozen=True, kw_only=True)
class Record:
    """One timed repetition of one request under one setting."""

    request_id: str
    category: str
    setting: BenchSetting
    repetition: int
    metrics: RequestMetrics
    hf_latency: float | None  # transformers' assisted generation, same request and settings
    hf_tokens: int | None
    hf_identical: bool | None  # token-identical to our output (meaningful at T = 0)

    def to_dict(self) -> dict[str, object]:
        """Plain data for JSON."""
        m = self.metrics
        chain_theory = not self.setting.tree  # the Leviathan bound describes chains only
        derived = {
            "mean_gamma": m.mean_gamma,
            "tokens_per_second": m.tokens_per_second,
            "target_calls_per_token": m.target_calls_per_token,
            "alpha": m.alpha,
            "accepted_per_round": m.accepted_per_round,
            "tokens_per_round": m.tokens_per_round,
            "cost_ratio": m.cost_ratio,
            "speedup": m.speedup,
            "bound": m.bound() if chain_theory else None,
            "efficiency": m.efficiency() if chain_theory else None,
            "decode_speedup": m.decode_speedup,
            "decode_efficiency": m.decode_efficiency() if chain_theory else None,
            "verify_ratio": m.verify_ratio,
            "refined_bound": m.refined_bound() if chain_theory else None,
            "loop_efficiency": m.loop_efficiency() if chain_theory else None,
        }
        return {
            "exact": self.setting.exact,  # False: a lossy tree rule, not the target's law
            "request_id": self.request_id,
            "category": self.category,
            "setting": self.setting.saved(),
            "repetition": self.repetition,
            "metrics": asdict(m) | derived,
            "hf_latency": self.hf_latency,
            "hf_tokens": self.hf_tokens,
            "hf_identical": self.hf_identical,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        """Inverse of to_dict (derived metrics are recomputed, not read back).

        data: a record of the current schema; specviz.results.schema.migrate brings older ones.
        """
        saved = data["metrics"]
        raw = {f.name: saved[f.name] for f in fields(RequestMetrics)}
        raw.update({k: tuple(raw[k]) for k in ("widths", "pass_seconds")})
        return cls(
            request_id=data["request_id"],
            category=data["category"],
            setting=BenchSetting(**data["setting"]),
            repetition=data["repetition"],
            metrics=RequestMetrics(**raw),
            hf_latency=data["hf_latency"],
            hf_tokens=data["hf_tokens"],
            hf_identical=data["hf_identical"],
        )
