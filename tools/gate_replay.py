"""The suffix hybrid's gate replayed: target passes and draft-model forwards, without timing.

`suffix+model:trimmed` lets the draft model draft the rounds where memory is weak only while the
target keeps at least `model_min_alpha` of its tokens. This tool replays workloads under several
gates and counts what each costs, with no clock (the counts do not depend on the machine):

* rounds: target passes (the first one reads the prompt too);
* model forwards: the draft model's forward calls (one per drafted token, plus catch-ups);
* tokens a pass: tokens written over rounds.

Each workload's requests run in file order with one suffix memory per gate, greedily (T = 0:
every gate writes the target's greedy answer, so the tokens agree), raw prompts, at most 128 new
tokens a request, the suffix chain up to 16 tokens and the draft model up to 3 a round (the
memory bench's settings). A gate is a threshold and how the kept share is counted: across the
requests the memory has seen (`carried`, the shipped rule) or afresh in each request (the
memory's shares cleared before each one).

    python -m tools.gate_replay code agent-tools agent-code agent-sql repeat \\
        --out benchmarks/analysis/gate-replay.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DRAFTER = "suffix+model:trimmed"
SUFFIX_GAMMA, MODEL_GAMMA, MAX_NEW = 16, 3, 128
GATES = ("0.3/request", "0.3", "0.2", "0")  # threshold, "/request": counted per request


@dataclass(frozen=True, kw_only=True)
class Replay:
    """One workload under one gate."""

    workload: str
    gate: str
    min_alpha: float
    carried: bool
    tokens: int
    rounds: int
    model_forwards: int

    @property
    def tokens_per_pass(self) -> float:
        """Tokens written per target pass."""
        return self.tokens / max(self.rounds, 1)


def parse_gate(gate: str) -> tuple[float, bool]:
    """(model_min_alpha, carried) of a gate "A" or "A/request"; ValueError when malformed."""
    value, _, scope = gate.partition("/")
    try:
        alpha = float(value)
    except ValueError:
        alpha = -1.0
    if not 0.0 <= alpha <= 1.0 or scope not in ("", "request"):
        raise ValueError(f'a gate is "A" or "A/request" with A in [0, 1] (got {gate!r})')
    return alpha, scope == ""


def replay(
    pair: Any, workload: str, requests: Sequence[Any], gate: str, drafter: str = DRAFTER
) -> Replay:
    """The workload's requests in order under gate, one memory for all of them; drafter: a
    suffix hybrid (its name in the registry)."""
    from specviz.api import speculative_generate
    from specviz.core.config import SamplingConfig, SpeculationConfig
    from specviz.core.events import RoundSummary
    from specviz.drafters.options import DrafterOptions
    from specviz.drafters.registry import build_drafter
    from specviz.drafters.suffix.memory import SuffixMemory
    from specviz.workloads import checked_prompt_ids

    alpha, carried = parse_gate(gate)
    greedy, memory = SamplingConfig(temperature=0.0), SuffixMemory()
    tokens = rounds = forwards = 0
    for r in requests:
        new = min(MAX_NEW, r.max_new_tokens)
        ids = checked_prompt_ids(pair.tokenizer, r, new, [pair.target], raw=True)
        if not carried:
            memory.shares.clear()
        options = DrafterOptions(memory=memory, model_gamma=MODEL_GAMMA, model_min_alpha=alpha)
        built = build_drafter(
            drafter, target=pair.target, draft=pair.draft, sampling=greedy, options=options
        )
        out = speculative_generate(
            pair.target,
            built,
            pair.tokenizer,
            ids,
            sampling=greedy,
            speculation=SpeculationConfig(gamma=SUFFIX_GAMMA, max_new_tokens=new),
        )
        summaries = [e for e in out.events if isinstance(e, RoundSummary)]
        tokens += len(out.tokens)
        rounds += len(summaries)
        forwards += sum(e.draft_forward_calls for e in summaries)
    return Replay(
        workload=workload,
        gate=gate,
        min_alpha=alpha,
        carried=carried,
        tokens=tokens,
        rounds=rounds,
        model_forwards=forwards,
    )


def table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Per workload and gate (rows as saved: asdict(Replay)), target passes, draft-model
    forwards and tokens a pass, as Markdown lines."""
    from specviz.results.table import markdown_table

    head = ["workload", "gate (model_min_alpha)", "share counted", "tokens", "target passes",
            "model forwards", "tokens/pass"]  # fmt: skip
    return markdown_table(
        head,
        [
            [
                r["workload"],
                f"{r['min_alpha']:g}",
                "across requests" if r["carried"] else "per request",
                str(r["tokens"]),
                str(r["rounds"]),
                str(r["model_forwards"]),
                f"{r['tokens'] / r['rounds']:.2f}",
            ]
            for r in rows
        ],
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Replay the named workloads under each gate; save and print as each finishes."""
    from specviz.models.loading import load_pair
    from specviz.workloads import AGENT_WORKLOADS, WORKLOADS, load_requests

    parser = argparse.ArgumentParser(prog="python -m tools.gate_replay", description=__doc__)
    parser.add_argument("workloads", nargs="+", choices=[*WORKLOADS, *AGENT_WORKLOADS])
    parser.add_argument("--gates", default=",".join(GATES), help='comma-separated "A[/request]"')
    parser.add_argument("--out", type=Path, help="save the rows here (JSON)")
    args = parser.parse_args(argv)
    gates = args.gates.split(",")
    try:
        for gate in gates:
            parse_gate(gate)
    except ValueError as err:
        parser.error(str(err))
    pair = load_pair()
    rows: list[Replay] = []
    for w in args.workloads:
        requests = load_requests(w)
        for gate in gates:
            rows.append(replay(pair, w, requests, gate))
            if args.out is not None:
                saved = {
                    "drafter": DRAFTER,
                    "suffix_gamma": SUFFIX_GAMMA,
                    "model_gamma": MODEL_GAMMA,
                    "max_new_tokens": MAX_NEW,
                    "rows": [asdict(r) for r in rows],
                }
                args.out.write_text(json.dumps(saved, indent=1) + "\n")
            print("\n".join(table([asdict(rows[-1])])), flush=True)


if __name__ == "__main__":
    main()
