"""transformers' `generate()` as an audit source, in process: assisted generation with an
assistant model, prompt lookup, or an assistant with another tokenizer (universal assisted
decoding), against the same target's plain `generate()`.

Seeds. `generate()` samples from torch's global generator (it takes none as an argument), so
each request seeds it inside torch.random.fork_rng: the caller's global state is left as it was.

transformers has no frequency penalty: a frequency penalty is refused. top_k None and the other
None settings leave the model's generation_config defaults in place (both sides alike).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch

from specviz.audit.settings import Sample, Settings
from specviz.audit.sources import Side, refuse

Mode = Literal["assistant", "prompt-lookup", "assistant-tokenizer"]
MODES: tuple[Mode, ...] = ("assistant", "prompt-lookup", "assistant-tokenizer")
TOP = 10  # top logprobs kept per position


@dataclass(frozen=True, kw_only=True)
class TransformersSource:
    """target.generate() with `mode` speculation ('spec') or without ('plain')."""

    target: Any
    tokenizer: Any
    mode: Mode
    assistant: Any = None
    assistant_tokenizer: Any = None
    lookup_tokens: int = 4  # prompt_lookup_num_tokens
    label: str = "transformers"
    token_outcomes: bool = True
    sides_at_once: bool = False  # one model in this process: one request at a time

    @property
    def name(self) -> str:
        """'transformers <mode>'."""
        return f"{self.label} {self.mode}"

    def check(self, settings: Settings) -> None:
        """Refuse the frequency penalty (transformers has none)."""
        refuse(settings, {"frequency_penalty": "--frequency-penalty"}, "transformers' generate()")

    def preflight(self) -> None:
        """The mode has the models it needs (ValueError otherwise)."""
        if self.mode != "prompt-lookup" and self.assistant is None:
            raise ValueError(f"--hf-mode {self.mode} needs an assistant model: give --assistant")
        if self.mode == "assistant-tokenizer" and self.assistant_tokenizer is None:
            raise ValueError("--hf-mode assistant-tokenizer needs the assistant's tokenizer")

    def speculation(self) -> dict[str, Any]:
        """The generate() arguments that switch this mode's speculation on."""
        if self.mode == "prompt-lookup":
            return {"prompt_lookup_num_tokens": self.lookup_tokens}
        if self.mode == "assistant":
            return {"assistant_model": self.assistant}
        return {
            "assistant_model": self.assistant,
            "tokenizer": self.tokenizer,
            "assistant_tokenizer": self.assistant_tokenizer,
        }

    @torch.inference_mode()
    def sample(
        self, side: Side, prompt: str, settings: Settings, *, seed: int, tokens: int, top: bool
    ) -> Sample:
        """One generate() call: the new token ids, with the top raw logprobs when asked."""
        ids = torch.tensor([self.tokenizer(prompt).input_ids])
        extra = self.speculation() if side == "spec" else {}
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            out = self._generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=tokens,
                return_dict_in_generate=True,
                output_logits=top,
                pad_token_id=self._pad,
                **_sampling(settings),
                **extra,
            )
        new = tuple(int(t) for t in out.sequences[0, ids.shape[1] :])
        return Sample(tokens=new, top=_tops(out.logits, len(new)) if top else None)

    def _generate(self, ids: torch.Tensor, **kwargs: Any) -> Any:
        """target.generate(); its failure (an engine error is a finding) as a one-line
        ValueError naming the mode."""
        try:
            return self.target.generate(ids, **kwargs)
        except (RuntimeError, IndexError, AttributeError, KeyError, TypeError) as err:
            raise ValueError(
                f"transformers' generate() failed with speculation {self.mode}: "
                f"{type(err).__name__}: {err}"
            ) from None

    @property
    def _pad(self) -> int:
        eos = self.target.generation_config.eos_token_id
        return int(eos[0] if isinstance(eos, list) else eos or 0)


def _sampling(settings: Settings) -> dict[str, Any]:
    """generate()'s sampling arguments (greedy: do_sample False and no warpers)."""
    if settings.greedy:
        return {"do_sample": False, "temperature": None, "top_k": None, "top_p": None}
    given = {
        "temperature": settings.temperature,
        "top_k": settings.top_k,
        "top_p": settings.top_p,
        "repetition_penalty": settings.repetition_penalty,
    }
    return {"do_sample": True, **{k: v for k, v in given.items() if v is not None}}


def _tops(logits: tuple[torch.Tensor, ...], n: int) -> tuple[dict[str, float], ...]:
    """The TOP largest raw log-probabilities at each of the first n positions (id → value)."""
    out = []
    for step in logits[:n]:
        values, ids = torch.log_softmax(step[0].double(), -1).topk(TOP)
        out.append({str(int(i)): float(v) for i, v in zip(ids, values, strict=True)})
    return tuple(out)
