"""`specviz bench`: measure speedup on workloads, interleaved, against transformers and theory."""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import transformers

from specviz.bench.machine import cpu_name, draft_forward, gpu_meta, target_forward
from specviz.bench.metrics import DEFAULT_PRICE_PER_HOUR
from specviz.bench.report import figures, html_report
from specviz.bench.runner import Record, batch_step_times
from specviz.bench.schema import SCHEMA, batch_steps, validate
from specviz.bench.summary import gamma_curves, policies_vs_best_fixed, summarize
from specviz.bench.sweep import Context, Sweep
from specviz.bench.sweeps import studies
from specviz.bench.sweeps.endpoint import endpoint_meta
from specviz.bench.sweeps.speedup import check, ints, summary_line
from specviz.bench.workloads import AGENT_WORKLOADS, WORKLOADS, Request, load_requests
from specviz.console import progress_bar, say
from specviz.drafters.registry import HEAD_DRAFTERS
from specviz.drafters.trimmed import load_head_tokens
from specviz.fast.packed import is_packed
from specviz.models.chat import prompt_format
from specviz.models.loading import (
    BUNDLED,
    DTYPES,
    MODEL_SPEC_HELP,
    load_pair,
    parse_dtype,
    resolve,
)
from specviz.runtime import HelpFormatter, add_threads_argument

PROMPT_FORMATS = {"chat": "through the chat template", "raw": "as raw text"}  # meta's wording
LEVERS_FORWARD = "transformers (--levers: every lever's target; int8 weights through torchao)"
LEVERS_DRAFT_FORWARD = "specviz.fast.lean where it applies (fp32, bf16), else transformers"
BATCH_FORWARD = "transformers (--batch-sizes: batched through specviz.batch)"
REPLAY = "replay"  # the study with a parser of its own (specviz.bench.replay)


def subcommands() -> tuple[str, ...]:
    """The words that may follow `specviz bench`."""
    return (*(s.name for s in studies()), REPLAY)


def study_argv(argv: Sequence[str]) -> list[str]:
    """`bench STUDY ...` as `bench --study STUDY ...`: its subcommand as the hidden flag the
    parser reads (replay, whose parser is its own, is left to replay_argv)."""
    if len(argv) > 1 and argv[0] == "bench" and argv[1] in (s.name for s in studies()):
        return ["bench", "--study", argv[1], *argv[2:]]
    return list(argv)


def replay_argv(argv: Sequence[str]) -> list[str] | None:
    """The flags of `bench replay ...` (None for any other command)."""
    return list(argv[2:]) if list(argv[:2]) == ["bench", REPLAY] else None


def _floats(text: str) -> list[float]:
    """'0,1' → [0.0, 1.0]."""
    return [float(x) for x in text.split(",") if x.strip()]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the bench subcommand."""
    b = sub.add_parser(
        "bench",
        help="benchmark speedup on workloads against plain and transformers",
        description="Benchmark speculative decoding on workloads, interleaved with plain "
        "decoding and transformers' assisted generation; writes JSON and an HTML report. "
        "The first word picks the study: speedup (the default), trees (the tree drafters' "
        "node-budget sweep; alias --tree-sweep), batch (plain and speculative decoding of the "
        "same requests at each batch size; alias --batch-sizes), levers (speculation beside "
        "lower precision and the small model; alias --levers), memory (drafting from memory on "
        "the agent workloads, run in order), cross (a draft with another tokenizer: the "
        "cross-tokenizer drafters against transformers; alias --cross), endpoint (a served "
        "model; alias "
        "--endpoint URL), replay (γ policies replayed on recorded target passes: `specviz bench "
        "replay --help`).",
        formatter_class=HelpFormatter,
    )
    b.add_argument(
        "--study", choices=[s.name for s in studies()], default=None, help=argparse.SUPPRESS
    )  # set by the subcommand (study_argv)
    b.add_argument("--target", default=BUNDLED, help=f"target: {MODEL_SPEC_HELP}")
    b.add_argument(
        "--draft",
        action="append",
        help=f"draft: {MODEL_SPEC_HELP}; repeat to compare drafts (default: {BUNDLED})",
    )
    b.add_argument(
        "--workloads",
        default=None,
        help=f"comma list of {(*WORKLOADS, *AGENT_WORKLOADS)} or JSONL paths (default: code; "
        "the memory study's: the agent workloads)",
    )
    b.add_argument(
        "--raw",
        action="store_true",
        help="send each prompt as plain text to continue; by default it goes through the "
        "target tokenizer's chat template (one user turn) where the tokenizer has one",
    )
    b.add_argument("--limit", type=int, default=0, help="first N prompts of each workload (0: all)")
    b.add_argument("--gammas", type=ints, default="4", help="comma list, e.g. 1,2,3,4,6,8")
    b.add_argument(
        "--temperatures",
        type=_floats,
        default=None,
        help="comma list, e.g. 0,1 (default: each prompt's own)",
    )
    b.add_argument(
        "--drafters",
        default=None,
        help="comma list of model, model-trimmed (head cut to 8,192 tokens), ngram, early-exit, "
        "early-exit-shared (the same layers drafting into the target's own KV cache), "
        "ngram+model, ngram+model-trimmed (n-gram lookup where the text repeats, else the "
        "draft), eagle, medusa (drafting heads on the target's own features: --heads), "
        "tree-model, tree-sampled, tree-ngram, eagle-tree, eagle-tree-sampled, medusa-tree "
        "(token trees verified in one pass: --tree-nodes, --tree-depth, --tree-width; no "
        "transformers counterpart) (default: model; tree-model with --tree-sweep)",
    )
    b.add_argument(
        "--heads",
        metavar="DIR",
        help="head drafters (eagle, eagle3, medusa and their trees): the folder of "
        "eagle.safetensors / eagle3.safetensors / medusa.safetensors trained for --target "
        "(default: the heads shipped for the bundled target); they verify through the target "
        "forward plain decoding runs on",
    )
    for study in studies()[:1]:
        study.add_arguments(b)
    b.add_argument("--reps", type=int, default=3, help="timed repetitions after one warm-up")
    b.add_argument("--no-hf", action="store_true", help="skip transformers' assisted generation")
    b.add_argument(
        "--price-per-hour",
        type=float,
        default=DEFAULT_PRICE_PER_HOUR,
        help="USD per device-hour for the cost per 1k tokens (default %(default)s: a small "
        "cloud CPU instance; give your GPU's rate there)",
    )
    b.add_argument(
        "--dtype", default="float32", choices=sorted(DTYPES), help="weights' and compute dtype"
    )
    b.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    add_threads_argument(b)
    b.add_argument(
        "--no-pack",
        action="store_true",
        help="no oneDNN weight pre-packing on CPU",
    )
    b.add_argument(
        "--no-lean",
        action="store_true",
        help="draft through transformers' forward instead of specviz.fast.lean's "
        "(small Llama drafts; the drafting heads' target forward follows --lean-target)",
    )
    b.add_argument(
        "--lean-target",
        action="store_true",
        help="run the target (plain and speculative) through specviz.fast.lean's forward where it "
        "applies (packed Llama targets); transformers' own generation keeps its forward",
    )
    for study in studies()[1:]:
        study.add_arguments(b)
    b.add_argument("--out", default="bench.json", help="JSON results")
    b.add_argument("--html", default="bench.html", help="self-contained plotly report")


def study_of(args: argparse.Namespace) -> Sweep:
    """The study its subcommand names, else the one an alias flag asks for (the endpoint's
    first), else speedup; ValueError when a subcommand meets another study's flag."""
    default, *others = studies()
    asked = [s for s in sorted(others, key=lambda s: s.name != "endpoint") if s.asked(args)]
    named = getattr(args, "study", None)
    if named is None:
        return asked[0] if asked else default
    study = next(s for s in studies() if s.name == named)
    clash = [s.name for s in asked if s.name != named]
    if clash:
        raise ValueError(
            f"specviz bench {named} runs one study: drop the flags that ask for {clash[0]}"
        )
    return study


def _requests(args: argparse.Namespace) -> list[Request]:
    """--workloads' requests, the first --limit of each."""
    names = (args.workloads or "code").split(",")
    return [r for w in names for r in _limit(load_requests(w), args.limit)]


def run_endpoint_bench(args: argparse.Namespace, study: Sweep) -> int:
    """Send the workloads to the servers, write JSON and HTML, print the sweep's table."""
    plan = study.plan(args, [], [], [])
    requests = _requests(args)
    section = study.run(plan, Context(args=args, requests=requests, progress=progress_bar)).section
    drafts = {"server": {"draft_forward": "the server's own speculation", "batch_step_seconds": []}}
    payload = saved_result(endpoint_meta(args), drafts, [], {"endpoint": section})
    Path(args.out).write_text(json.dumps(payload, indent=2), encoding="utf-8")
    report = figures([], [], {}, endpoint=section, price_per_hour=args.price_per_hour)
    Path(args.html).write_text(html_report(report, "specviz endpoint benchmark"), encoding="utf-8")
    print(study.render(section or {}, args.price_per_hour))
    print(f"wrote {args.out} and {args.html}")
    return 0


def run_bench(args: argparse.Namespace) -> int:
    """Load, run the chosen study interleaved, write JSON and HTML, print a summary."""
    study = study_of(args)
    args = study.chosen(args)
    if study.name == "endpoint":
        return run_endpoint_bench(args, study)
    drafters, policies = check(args)
    requests = _requests(args)
    local = [s for s in studies() if s.name != "endpoint"]
    plans = {  # every local study's plan: each checks its flags against the others'
        s.name: s.plan(args, drafters, policies, requests) for s in local
    }
    plan = plans[study.name]
    records: list[Record] = []
    sections: dict[str, dict[str, Any] | None] = {}
    drafts: dict[str, dict[str, Any]] = {}  # what was measured with each --draft loaded
    packed, forward, fmt = False, "", "raw"
    if not study.per_draft:  # the levers sweep loads its own models
        outcome = study.run(plan, Context(args=args, requests=requests, progress=progress_bar))
        sections[str(study.key)], fmt = outcome.section, outcome.prompt_format
        packed, forward = not args.no_pack, LEVERS_FORWARD
        drafts[(args.draft or [BUNDLED])[0]] = {
            "draft_forward": LEVERS_DRAFT_FORWARD,
            "batch_step_seconds": [],  # no plain step timing in a levers run
        }
    if study.per_draft and any(d.endswith("model-trimmed") for d in drafters):  # ranking first
        for draft_spec in args.draft or [BUNDLED]:
            load_head_tokens(resolve(draft_spec, "draft", say))
    for draft_spec in (args.draft or [BUNDLED]) if study.per_draft else []:
        pair = load_pair(
            args.target,
            draft_spec,
            dtype=parse_dtype(args.dtype),
            device=args.device,
            pack=not args.no_pack,
            progress=say,
        )
        fmt = prompt_format(pair.tokenizer, raw=args.raw)  # the target's: the same each time
        context = Context(
            args=args, requests=requests, progress=progress_bar, pair=pair, draft=draft_spec
        )
        outcome = study.run(plan, context)
        records += outcome.records
        if study.key is not None:
            sections[study.key] = outcome.section
        steps = batch_step_times(pair.target, args.step_batch_sizes)
        drafts[draft_spec] = {
            "draft_forward": BATCH_FORWARD
            if study.name == "batch"
            else draft_forward(args, pair.draft),
            "batch_step_seconds": [[b, t] for b, t in steps],
        }
        packed = is_packed(pair.target.get_output_embeddings())  # the target's: the same each time
        forward = target_forward(args, pair.target)
    meta = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "threads": torch.get_num_threads(),
        "cpu": cpu_name(),
        "device": args.device,
        **gpu_meta(args.device),
        "dtype": args.dtype,
        "packed_weights": packed,
        "target_forward": forward,
        "price_per_hour": args.price_per_hour,
        "prompt_format": fmt,
        "command": shlex.join(["specviz", *sys.argv[1:]]),
    }
    if any(d in HEAD_DRAFTERS for d in drafters):  # whose features the heads were trained on
        meta["heads"] = args.heads or "shipped (specviz/assets/heads)"
    payload = saved_result(meta, drafts, records, sections)
    rows, dynamic = payload["summary"], payload["policies_vs_best_fixed"]
    Path(args.out).write_text(json.dumps(payload, indent=2), encoding="utf-8")
    report = figures(
        records, payload["gamma_curves"], batch_steps(payload), sweep=payload["batch_sweep"],
        levers=payload["levers"], price_per_hour=args.price_per_hour,
    )  # fmt: skip
    title = f"specviz benchmark (prompts {PROMPT_FORMATS[fmt]})"
    Path(args.html).write_text(html_report(report, title), encoding="utf-8")
    for row in rows:
        print(summary_line(row))
    for d in dynamic:
        print(
            f"{d['workload']:7s} {d['drafter']:5s} {d['policy']:9s} from gamma={d['start_gamma']} "
            f"T={d['temperature']}: {d['ratio']:.2f} of the best fixed gamma "
            f"({d['best_fixed_gamma']}, {d['best_fixed_speedup']:.2f}x)"
        )
    if study.key is not None and payload[study.key] is not None:
        print(study.render(payload[study.key], args.price_per_hour))
    print(f"prompts {PROMPT_FORMATS[fmt]}; wrote {args.out} and {args.html}")
    return 0


def saved_result(
    meta: dict[str, Any],
    drafts: dict[str, dict[str, Any]],
    records: Sequence[Record],
    sections: Mapping[str, dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """What `specviz bench --out` writes (specviz.bench.schema, version SCHEMA).

    meta: what is common to the run, its price_per_hour among it; drafts: each --draft's own
    draft_forward and batch_step_seconds; the summary, γ curves and policy table are the
    records' at that price; sections: each study's section by its key (Sweep.key; those not
    given are saved as null): tree_sweep (specviz.bench.tree_table), batch_sweep
    (specviz.bench.batch_rows), levers (specviz.bench.lever_sweep), cross
    (specviz.bench.sweeps.cross) and endpoint (specviz.endpoint.sweep).
    """
    given = sections or {}
    rows = summarize(records, meta["price_per_hour"])
    payload = {
        "schema": SCHEMA,
        "meta": meta,
        "drafts": drafts,
        "summary": rows,
        "gamma_curves": gamma_curves(rows),
        "policies_vs_best_fixed": policies_vs_best_fixed(rows),
        **{s.key: given.get(s.key) for s in studies() if s.key is not None},
        "records": [r.to_dict() for r in records],
    }
    validate(payload)
    return payload


def _limit(requests: list, n: int) -> list:  # type: ignore[type-arg]
    """The first n requests (all when n is 0)."""
    return requests[:n] if n else requests
