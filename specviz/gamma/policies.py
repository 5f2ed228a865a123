"""How many tokens to draft each round: fixed, transformers' heuristic, or chosen by theory.

A policy sees only round summaries (counts and timings), never the tokens' values, so any
policy leaves the output law exact; it changes speed only.
"""

from __future__ import annotations

import math
import statistics
from collections import deque

from specviz.core.events import RoundSummary
from specviz.core.policy import FixedGamma, GammaPolicy
from specviz.gamma.survival import KeptByPosition


class HeuristicGamma:
    """transformers' schedule: +2 after a round whose drafts were all kept, else -1 (min 1)."""

    def __init__(self, start: int = 4, max_gamma: int = 16) -> None:
        """Start at `start`, never above max_gamma."""
        if not 1 <= start <= max_gamma:
            raise ValueError(f"need 1 <= start <= max_gamma (got start={start}, max={max_gamma})")
        self.gamma, self.max_gamma = start, max_gamma

    def next_gamma(self) -> int:
        """Current gamma."""
        return self.gamma

    def update(self, summary: RoundSummary) -> None:
        """Grow after a full accept of a full-length draft, shrink otherwise."""
        if summary.proposed == 0 or summary.gamma != self.gamma:
            return  # a round capped by max_new_tokens says nothing about gamma
        full = summary.accepted == summary.proposed == summary.gamma
        self.gamma = min(self.max_gamma, self.gamma + 2) if full else max(1, self.gamma - 1)


class VerifyCost:
    """Seconds of a target pass over k tokens: a line a + b k, corrected per k as passes come in.

    Timings are noisy from one pass to the next on a busy CPU (benchmarks/RESULTS.md, section
    Machine and parts), the first pass at a new width can pay a one-off kernel setup, and a
    policy that trusted one unlucky pass would never try that width again. So each width is
    summarised by its median, a least-squares line is fitted
    through the medians (weighted by passes; slope >= 0), and a width's estimate moves from the
    line to its own median as its passes accumulate: n / (n + trust) of the way. Uneven costs
    (on some CPUs a 2- or 3-token pass costs more than a 5-token one) are still learned, from a
    few passes rather than one. Only the latest `window` passes of each width are kept, so a
    long-lived CostModel stays small and follows slow changes of the machine.
    """

    def __init__(self, trust: float = 4.0, window: int | None = 256) -> None:
        """No measurements yet; trust = passes at which a width's median counts half.

        window: passes kept per width (None: all of them, for pricing a finished run).
        """
        self.trust, self.window = trust, window
        self.by_k: dict[int, deque[float]] = {}  # k -> seconds of the latest passes over k
        self._medians: dict[int, float] = {}
        self._stale: set[int] = set()  # widths with passes added since their median
        self._ab = (0.0, 0.0)  # the line's intercept and slope

    def add(self, k: int, seconds: float) -> None:
        """One measured pass over k tokens."""
        self.by_k.setdefault(k, deque(maxlen=self.window)).append(seconds)
        self._stale.add(k)

    def _refresh(self) -> None:
        """Recompute the medians of widths measured since the last call, then the line."""
        if self._stale:
            self._medians.update({k: statistics.median(self.by_k[k]) for k in self._stale})
            self._stale.clear()
            self._ab = self._fit()

    def _fit(self) -> tuple[float, float]:
        """(a, b) of the pass-weighted least-squares line through the per-width medians."""
        w = {k: float(len(v)) for k, v in self.by_k.items()}
        n = sum(w.values())
        mk = sum(w[k] * k for k in w) / n
        mt = sum(w[k] * self._medians[k] for k in w) / n
        spread = sum(w[k] * (k - mk) ** 2 for k in w)
        b = sum(w[k] * (k - mk) * (self._medians[k] - mt) for k in w) / spread if spread else 0.0
        b = max(b, 0.0)
        return mt - b * mk, b

    @property
    def identified(self) -> bool:
        """True once two different k were measured (the slope is then estimable)."""
        return len(self.by_k) > 1

    def slope(self) -> float:
        """Seconds per extra token along the fitted line (>= 0)."""
        self._refresh()
        return self._ab[1]

    def passes(self, k: int) -> int:
        """How many passes over k tokens are kept (at most `window`)."""
        return len(self.by_k.get(k, ()))

    def line(self, k: float) -> float:
        """The fitted line at k: what an unmeasured width is estimated to cost."""
        self._refresh()
        a, b = self._ab
        return max(a + b * k, 1e-9)

    def median(self, k: int) -> float:
        """Median measured seconds at a measured k."""
        self._refresh()
        return self._medians[k]

    def __call__(self, k: int) -> float:
        """Estimated seconds for a pass over k tokens (0 before any measurement)."""
        if not self.by_k:
            return 0.0
        line, n = self.line(k), self.passes(k)
        return line + n / (n + self.trust) * (self.median(k) - line) if n else line


class CostModel:
    """What rounds cost on this hardware: seconds per draft step and per target pass by width.

    Costs belong to the (target, drafter, device), not to a request: one CostModel shared by the
    TheoryGamma policies of successive requests spares each request the rounds spent measuring.
    """

    def __init__(self) -> None:
        """Nothing measured yet."""
        self.verify = VerifyCost()  # target seconds per pass, by tokens scored
        self.draft_seconds = self.draft_calls = 0.0

    def add(self, summary: RoundSummary) -> None:
        """Fold in one round's timings."""
        if summary.proposed:
            self.draft_seconds += summary.draft_seconds
            self.draft_calls += summary.draft_forward_calls
        if not summary.prompt_tokens:  # a pass that also scored the prompt is no sample
            self.verify.add(summary.proposed + 1, summary.target_seconds)

    @property
    def draft_step_seconds(self) -> float:
        """Measured seconds per draft forward (0 for a free drafter)."""
        return self.draft_seconds / self.draft_calls if self.draft_calls else 0.0


class TheoryGamma:
    """Gamma (0 = a plain target step) maximising predicted tokens per second.

    A round drafts gamma tokens at t_draft seconds each and verifies gamma + 1 tokens in one
    target pass whose time is measured per width (VerifyCost); it emits 1 + sum_j P(drafts 1..j
    kept) tokens, with the keep rate measured per position in the round (KeptByPosition: equal
    to Leviathan et al.'s closed form when drafts are kept independently, larger when agreement
    comes in stretches). The width cost is what the r = 1 bound ignores: nearly flat on a
    bandwidth-bound GPU, steep and uneven on some CPUs. The best gamma > 0 is chosen with the
    estimated rates (recent verdicts weigh more); gamma = 0 (plain decoding) wins when drafting
    is not predicted to beat a single-token pass even with every rate raised by one standard
    error of alpha. A probe round tries the other side (0 against the best gamma > 0) so that
    alpha and the costs stay measured. While it drafts, the gap between probes starts at
    `probe_every` rounds and doubles each time a probe confirms the choice (it resets when one
    overturns it), so a settled request pays for few probes. While it takes plain steps it
    probes every `probe_every` rounds: such a probe costs only its draft steps (its
    verification pass still emits a token) and is the only news about alpha, which may have
    recovered after a stretch the draft got wrong. Given a CostModel shared across requests, a
    plain-step probe (which only re-measures the 1-token pass) also waits until the shared model
    has that pass measured rarely for its age.
    """

    def __init__(
        self,
        start: int = 4,
        max_gamma: int = 16,
        prior_rounds: float = 2.0,
        probe_every: int = 8,
        half_life: float = 32.0,
        costs: CostModel | None = None,
    ) -> None:
        """Start at `start`; alpha is shrunk toward 0.5 by prior_rounds pseudo-rounds.

        half_life: verified draft tokens after which a verdict counts half in alpha, so alpha
        follows a request whose agreement changes (a stretch the draft gets wrong, then right).

        costs: measured costs to start from and add to (shared across requests); a fresh one
        when None.
        """
        if not 1 <= start <= max_gamma:
            raise ValueError(f"need 1 <= start <= max_gamma (got start={start}, max={max_gamma})")
        if probe_every < 2:
            raise ValueError(f"probe_every must be >= 2 (got {probe_every})")
        self.gamma, self.start, self.max_gamma = start, start, max_gamma
        self.prior, self.probe_every, self.since_probe = prior_rounds, probe_every, 0
        self.probe_gap, self.probed_from = probe_every, -1  # -1: the last round was no probe
        self.kept_by_position = KeptByPosition(max_gamma, prior_rounds, half_life)  # decayed
        self.costs = costs if costs is not None else CostModel()
        self.verify_seconds = self.costs.verify  # target seconds per pass, by tokens scored

    @property
    def alpha(self) -> float:
        """Recent per-token acceptance estimate (accepted / verified, decayed, weak prior)."""
        return (self.kept_by_position.accepted + 0.5 * self.prior) / (self.verified + self.prior)

    @property
    def verified(self) -> float:
        """Draft verdicts behind alpha (decayed: recent ones weigh more)."""
        return self.kept_by_position.verified

    @property
    def draft_step_seconds(self) -> float:
        """Measured seconds per draft forward (0 for a free drafter)."""
        return self.costs.draft_step_seconds

    @property
    def cost_ratio(self) -> float:
        """Running c = seconds per draft forward / seconds per 1-token target pass."""
        one = self.verify_seconds(1)
        return self.draft_step_seconds / one if one else 0.0

    def verify_ratio(self, gamma: int) -> float:
        """Running r = seconds to verify gamma drafts / seconds for a 1-token target pass."""
        one = self.verify_seconds(1)
        return self.verify_seconds(gamma + 1) / one if one else 1.0

    @property
    def alpha_error(self) -> float:
        """One standard error of alpha: added to every keep rate only to decide between drafting
        and plain steps, so a few early rejections do not talk the policy out of drafting."""
        return math.sqrt(self.alpha * (1 - self.alpha) / (self.verified + self.prior))

    def tokens_per_second(self, gamma: int, lift: float = 0.0) -> float:
        """Predicted emitted tokens per second drafting gamma a round (lift: on every rate)."""
        return self._speeds(lift)[gamma]

    def _speeds(self, lift: float = 0.0) -> list[float]:
        """Predicted tokens per second for gamma = 0..max_gamma (0: a plain target step)."""
        tokens = self.kept_by_position.expected_tokens(lift)
        draft = self.draft_step_seconds
        seconds = [g * draft + self.verify_seconds(g + 1) for g in range(len(tokens))]
        # 0 before any pass is timed
        return [t / s if s > 0 else 0.0 for t, s in zip(tokens, seconds, strict=True)]

    def next_gamma(self) -> int:
        """Gamma for the coming round."""
        return self.gamma

    def update(self, summary: RoundSummary) -> None:
        """Fold in the round's acceptance and timings, then re-optimise gamma."""
        if summary.proposed:
            self.kept_by_position.add(summary.proposed, summary.accepted)  # older verdicts fade
        self.costs.add(summary)
        self.gamma = self._choose()

    def _choose(self) -> int:
        """argmax of tokens_per_second, or the probe that keeps the estimates alive."""
        self.since_probe += 1
        if not self.verify_seconds.identified:  # need a 1-token and a wider pass
            return 0 if set(self.verify_seconds.by_k) != {1} else self.start
        speeds = self._speeds()
        drafting = max(range(1, self.max_gamma + 1), key=speeds.__getitem__)
        optimistic = self.tokens_per_second(drafting, lift=self.alpha_error)
        best = drafting if optimistic > speeds[0] else 0
        if self.probed_from >= 0:  # the round that just ended was a probe: did it confirm?
            confirmed = (best == 0) == (self.probed_from == 0)
            backs_off = confirmed and best > 0
            self.probe_gap = 2 * self.probe_gap if backs_off else self.probe_every
            self.probed_from = -1
        gap = self.probe_gap
        if best > 0:  # a plain-step probe only re-measures the 1-token pass: rarer when shared
            gap = max(gap, self.probe_every * 2 ** (self.verify_seconds.passes(1) - 1))
        else:  # a drafting probe costs only its draft steps (its pass still emits a token), and
            gap = self.probe_every  # it is the only news about alpha while plain steps run
        if self.since_probe < gap:
            return best
        self.since_probe, self.probed_from = 0, best
        return drafting if best == 0 else 0


POLICY_CLASSES: dict[str, type[FixedGamma] | type[HeuristicGamma] | type[TheoryGamma]] = {
    "fixed": FixedGamma,
    "heuristic": HeuristicGamma,
    "theory": TheoryGamma,
}
POLICY_NAMES = tuple(POLICY_CLASSES)  # the names make_policy takes


def make_policy(name: str, gamma: int, costs: CostModel | None = None) -> GammaPolicy:
    """'fixed' | 'heuristic' | 'theory', starting from gamma (theory: with shared costs)."""
    if name not in POLICY_CLASSES:
        raise ValueError(f"gamma policy must be one of {sorted(POLICY_CLASSES)} (got {name!r})")
    return TheoryGamma(gamma, costs=costs) if name == "theory" else POLICY_CLASSES[name](gamma)
