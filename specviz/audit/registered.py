"""A specviz drafter, by its registry name, as an audit source: speculative_generate with that
drafter against autoregressive_generate of the same target.

specviz's sampling has temperature, top-k and top-p; penalties are refused. Each request builds
a fresh drafter (build_drafter) with the request's seed in its SamplingConfig.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specviz.api import autoregressive_generate, speculative_generate
from specviz.audit.settings import Sample, Settings
from specviz.audit.sources import Side, refuse
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter

PENALTIES = {
    "repetition_penalty": "--repetition-penalty",
    "frequency_penalty": "--frequency-penalty",
}


@dataclass(frozen=True, kw_only=True)
class DrafterSource:
    """speculative_generate with the registered drafter `drafter` ('spec') or plain decoding."""

    target: Any
    tokenizer: Any
    drafter: str
    draft: Any = None
    options: DrafterOptions = field(default_factory=DrafterOptions)
    gamma: int = 4
    token_outcomes: bool = True
    sides_at_once: bool = False  # one model in this process: one request at a time

    @property
    def name(self) -> str:
        """'specviz <drafter>'."""
        return f"specviz {self.drafter}"

    def check(self, settings: Settings) -> None:
        """Refuse penalties (specviz samples without them) and engine defaults (it has none)."""
        refuse(settings, PENALTIES, "specviz")
        if settings.top_k is None or settings.top_p is None:
            raise ValueError("specviz has no server defaults: give --top-k and --top-p as numbers")

    def preflight(self) -> None:
        """Build the drafter once: bad weights or options fail here, before sampling."""
        self._drafter(SamplingConfig())

    def _drafter(self, sampling: SamplingConfig) -> Any:
        return build_drafter(
            self.drafter,
            target=self.target,
            draft=self.draft,
            sampling=sampling,
            options=self.options,
        )

    def sample(
        self, side: Side, prompt: str, settings: Settings, *, seed: int, tokens: int, top: bool
    ) -> Sample:
        """One decode of `tokens` tokens with this seed (no logprobs: top is not reported)."""
        sampling = SamplingConfig(
            temperature=settings.temperature,
            top_k=settings.top_k or 0,
            top_p=settings.top_p or 1.0,
            seed=seed,
        )
        if side == "plain":
            result = autoregressive_generate(
                self.target, self.tokenizer, prompt, sampling=sampling, max_new_tokens=tokens
            )
        else:
            result = speculative_generate(
                self.target,
                self._drafter(sampling),
                self.tokenizer,
                prompt,
                sampling=sampling,
                speculation=SpeculationConfig(gamma=self.gamma, max_new_tokens=tokens),
            )
        return Sample(tokens=tuple(result.tokens))
