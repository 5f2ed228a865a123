"""How far drafting by copying can go on a workload: the suffix chain beside two oracles.

The target answers each request greedily (T = 0, the requests in file order, as the memory
bench runs them). On those fixed answers a round is replayed without the target: a drafter
proposes up to `gamma` tokens, the longest prefix that equals the answer is accepted and one
more token (the target's) is committed. Three drafters are replayed:

- suffix: the shipped suffix chain (specviz.drafters.suffix, default SuffixConfig), with one
  SuffixMemory fed each finished request, as the bench runs it;
- anchored oracle: each round copies the continuation of whichever earlier position of the text
  (the earlier requests' prompts and answers, and the request so far) is preceded by the
  context's last token and would be accepted longest. Any drafter that copies from a match of
  at least one token proposes one of these continuations (or a prefix of one), so no such
  drafter makes fewer rounds; the same oracle over the request's own text alone (own-text)
  bounds a drafter that copies from the request (its prompt and answer so far) alone;
- free oracle: the same, without the anchor: the best copy from anywhere, as if the drafter
  knew where the answer resumes copying after an edit (no real drafter knows).

Tokens per round (tokens / rounds) is what drafting buys: a drafter with more of them at
about the same cost per round is faster by about their ratio.

    python -m tools.copy_bound repeat code --raw --out benchmarks/analysis/copy-bound.json
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

GAMMA = 16  # the memory bench's suffix_gamma: the most tokens one round proposes


@dataclass(frozen=True, kw_only=True)
class Stream:
    """A request's prompt ids and the target's greedy answer (its new ids)."""

    prompt: list[int]
    answer: list[int]


@dataclass(frozen=True, kw_only=True)
class Bound:
    """A workload's answers replayed: rounds each drafter needs for the same tokens."""

    workload: str
    requests: int
    tokens: int
    suffix_rounds: int
    own_oracle_rounds: int
    anchored_oracle_rounds: int
    free_oracle_rounds: int


Proposer = Callable[[list[int], list[int]], int]
"""(context ids, the answer's rest) → how many tokens the round accepts."""


def accepted(text: Sequence[int], start: int, rest: Sequence[int], gamma: int) -> int:
    """How many tokens of rest a copy of text from start would have accepted (≤ gamma)."""
    k = 0
    while k < gamma and k < len(rest) and start + k < len(text) and text[start + k] == rest[k]:
        k += 1
    return k


def rounds(stream: Stream, accept: Proposer) -> int:
    """Rounds to commit stream's answer when each accepts accept(context, rest) + 1 tokens."""
    pos, n = 0, 0
    while pos < len(stream.answer):
        pos += accept(stream.prompt + stream.answer[:pos], stream.answer[pos:]) + 1
        n += 1
    return n


def oracle_rounds(
    streams: Sequence[Stream], *, anchored: bool, shared: bool = True, gamma: int = GAMMA
) -> int:
    """Rounds the oracle needs over the streams in order: each round the best copy of an
    earlier position, anchored: preceded by the last token; shared: earlier streams' text is
    its memory (else each stream copies from its own text alone)."""
    text: list[int] = []  # every token so far: earlier requests, then this one's context
    at: dict[int, list[int]] = defaultdict(list)  # token → the positions e ≥ 1 holding it

    def extend(ids: Sequence[int]) -> None:
        for t in ids:
            if text:
                at[t].append(len(text))
            text.append(t)

    total = 0
    for s in streams:
        if not shared:
            text.clear()
            at.clear()
        extend(s.prompt)
        pos = 0
        while pos < len(s.answer):
            rest = s.answer[pos:]
            starts = at.get(rest[0], [])
            if anchored:
                starts = [e for e in starts if text[e - 1] == text[-1]]
            k = max((accepted(text, e, rest, gamma) for e in starts), default=0)
            extend(rest[: k + 1])
            pos += k + 1
            total += 1
    return total


def suffix_rounds(streams: Sequence[Stream], vocab: int, stop: set[int]) -> int:
    """Rounds the shipped suffix chain needs, one memory fed each finished request."""
    from specviz.drafters.suffix.drafter import SuffixConfig, SuffixTries
    from specviz.drafters.suffix.memory import SuffixMemory

    tries = SuffixTries(vocab, SuffixMemory(), SuffixConfig())
    total = 0
    for s in streams:
        tries.prefill(s.prompt)

        def chain(context: list[int], rest: list[int]) -> int:
            tokens = tries.speculate(context, GAMMA, stop).tokens
            return accepted(tokens, 0, rest, GAMMA)

        total += rounds(s, chain)
        tries.remember(s.prompt + s.answer, len(s.prompt))
    return total


def greedy_streams(pair: Any, workload: str, *, raw: bool) -> list[Stream]:
    """The workload's requests in file order with the target's greedy answers."""
    from specviz.api import autoregressive_generate
    from specviz.core.config import SamplingConfig
    from specviz.workloads import checked_prompt_ids, load_requests, workload_path

    streams = []
    for r in load_requests(workload_path(workload)):
        ids = checked_prompt_ids(pair.tokenizer, r, r.max_new_tokens, [pair.target], raw=raw)
        out = autoregressive_generate(
            pair.target,
            pair.tokenizer,
            ids,
            sampling=SamplingConfig(temperature=0.0),
            max_new_tokens=r.max_new_tokens,
        )
        streams.append(Stream(prompt=ids, answer=list(out.tokens)))
    return streams


def bound(pair: Any, workload: str, *, raw: bool) -> Bound:
    """The workload's rounds for the suffix chain and both oracles."""
    streams = greedy_streams(pair, workload, raw=raw)
    stop = {int(pair.tokenizer.eos_token_id)} if pair.tokenizer.eos_token_id is not None else set()
    return Bound(
        workload=workload,
        requests=len(streams),
        tokens=sum(len(s.answer) for s in streams),
        suffix_rounds=suffix_rounds(streams, int(pair.target.config.vocab_size), stop),
        own_oracle_rounds=oracle_rounds(streams, anchored=True, shared=False),
        anchored_oracle_rounds=oracle_rounds(streams, anchored=True),
        free_oracle_rounds=oracle_rounds(streams, anchored=False),
    )


def table(bounds: Sequence[Bound]) -> str:
    """Tokens per round of each drafter, one workload a row (Markdown)."""
    rows = [
        "| workload | tokens | suffix | own-text oracle | anchored oracle | free oracle |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for b in bounds:
        n = (b.suffix_rounds, b.own_oracle_rounds, b.anchored_oracle_rounds, b.free_oracle_rounds)
        per_round = " | ".join(f"{b.tokens / r:.2f}" for r in n)
        rows.append(f"| {b.workload} | {b.tokens} | {per_round} |")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> None:
    """Replay the named workloads on the bundled target's greedy answers; save and print."""
    from specviz.models.loading import load_pair
    from specviz.workloads import AGENT_WORKLOADS, WORKLOADS

    parser = argparse.ArgumentParser(prog="python -m tools.copy_bound", description=__doc__)
    parser.add_argument("workloads", nargs="+", choices=[*WORKLOADS, *AGENT_WORKLOADS])
    parser.add_argument("--raw", action="store_true", help="prompts as raw text (bench --raw)")
    parser.add_argument("--out", type=Path, help="save the rounds here (JSON)")
    args = parser.parse_args(argv)
    pair = load_pair(draft=None)
    bounds: list[Bound] = []
    for w in args.workloads:  # saved and shown as each workload finishes
        bounds.append(bound(pair, w, raw=args.raw))
        if args.out is not None:
            saved = {"raw": args.raw, "gamma": GAMMA, "bounds": [asdict(b) for b in bounds]}
            args.out.write_text(json.dumps(saved, indent=1) + "\n")
        print(table(bounds[-1:]), flush=True)


if __name__ == "__main__":
    main()
