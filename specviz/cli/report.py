"""What `specviz generate` prints: the text and a line per round, or a JSON summary; and one
line saying which drafter, gamma and target forward ran, and how fast."""

from __future__ import annotations

import argparse

from specviz.api import GenerationResult
from specviz.models.chat import PromptFormat

LOSSY_NOTE = (
    "LOSSY: typical acceptance chose these tokens; they do not follow the target's law "
    "(use --tree-rule exact for exact output)"
)


def summary(result: GenerationResult, fmt: PromptFormat = "raw") -> dict[str, object]:
    """The numbers a user wants after a decode; fmt: how the prompt was formatted."""
    return {
        "text": result.text,
        "prompt_format": fmt,
        "prompt_tokens": len(result.prompt_ids),
        "tokens": list(result.tokens),
        "new_tokens": len(result.tokens),
        "finish_reason": result.finish_reason,
        "seconds": result.seconds,
        "rounds": len(result.rounds),
        "proposed": result.proposed,
        "accepted": result.accepted,
        "acceptance_rate": result.acceptance_rate if result.proposed else None,
        "exact": result.exact,
        "target_calls": result.target_calls,
        "per_round": [
            {"round": r.round, "proposed": r.proposed, "accepted": r.accepted, "emitted": r.emitted}
            for r in result.rounds
        ],
    }


def render_text(result: GenerationResult, fmt: PromptFormat = "raw") -> str:
    """Human-readable report: the text, one line per round, the acceptance rate, and how the
    prompt was formatted (fmt)."""
    lines = [result.text, ""]
    lines += [
        f"round {r.round:3d}: accepted {r.accepted}/{r.proposed}, emitted {r.emitted}"
        for r in result.rounds
    ]
    rate = f"{result.acceptance_rate:.3f}" if result.proposed else "n/a"
    lines.append(
        f"{len(result.tokens)} tokens in {result.seconds:.2f} s, {result.target_calls} target "
        f"calls, acceptance rate {rate} ({result.accepted}/{result.proposed}), "
        f"stopped by {result.finish_reason}"
    )
    how = "through the chat template" if fmt == "chat" else "as raw text"
    lines.append(f"prompt: {len(result.prompt_ids)} tokens, {how}")
    if not result.exact:
        lines.append(LOSSY_NOTE)
    return "\n".join(lines)


def run_line(args: argparse.Namespace, result: GenerationResult, threads: int) -> str:
    """One line: which drafter, gamma and target forward ran, on how many threads, how fast."""
    forward = "lean" if args.lean_target else "transformers'"
    how = "plain decoding" if args.plain else f"drafter {args.drafter}, γ={args.gamma}"
    rate = len(result.tokens) / result.seconds if result.seconds > 0 else 0.0
    return (
        f"specviz: {how}, target forward {forward}, {threads} thread(s): "
        f"{len(result.tokens)} tokens in {result.seconds:.2f} s, {rate:.1f} tok/s"
    )
