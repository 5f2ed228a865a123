"""`specviz bench`: measure speedup on workloads, interleaved, against transformers and theory."""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import transformers

from specviz.bench.batch_cli import add_batch_arguments, batch_plan, batch_result
from specviz.bench.batch_table import render_batch_sweep
from specviz.bench.endpoint_cli import (
    add_endpoint_arguments,
    endpoint_asked,
    endpoint_meta,
    endpoint_section,
)
from specviz.bench.lever_table import render_levers
from specviz.bench.levers_cli import add_levers_arguments, levers_plan, levers_result
from specviz.bench.machine import cpu_name, draft_forward, gpu_meta, target_forward
from specviz.bench.metrics import DEFAULT_PRICE_PER_HOUR
from specviz.bench.report import (
    figures,
    gamma_curves,
    html_report,
    policies_vs_best_fixed,
    summarize,
)
from specviz.bench.runner import (
    DRAFTERS,
    POLICIES,
    BenchSetting,
    Record,
    batch_step_times,
    drafter_label,
    run_all,
)
from specviz.bench.schema import SCHEMA, batch_steps, validate
from specviz.bench.tree_cli import (
    add_tree_arguments,
    check_tree_flags,
    drafter_names,
    sweep_plan,
    sweep_result,
    tree_settings,
)
from specviz.bench.tree_sweep import SweepPlan, run_sweep
from specviz.bench.tree_table import render_sweep
from specviz.bench.workloads import WORKLOADS, Request, load_requests
from specviz.console import progress_bar, say
from specviz.drafters.registry import (
    EXIT_DRAFTERS,
    HEAD_DRAFTERS,
    HYBRID_DRAFTERS,
    MODEL_DRAFTERS,
    TREE_DRAFTERS,
    UNCONFIDENT_DRAFTERS,
)
from specviz.drafters.trimmed import load_head_tokens
from specviz.endpoint.table import render_endpoint
from specviz.fast.packed import is_packed
from specviz.heads.lookup import check_heads
from specviz.models.chat import prompt_format
from specviz.models.loading import (
    BUNDLED,
    DTYPES,
    check_device,
    load_pair,
    parse_dtype,
    resolve,
)
from specviz.runtime import HelpFormatter, add_threads_argument

PROMPT_FORMATS = {"chat": "through the chat template", "raw": "as raw text"}  # meta's wording
LEVERS_FORWARD = "transformers (--levers: every lever's target; int8 weights through torchao)"
LEVERS_DRAFT_FORWARD = "specviz.fast.lean where it applies (fp32, bf16), else transformers"
BATCH_FORWARD = "transformers (--batch-sizes: batched through specviz.batch)"


def _ints(text: str) -> list[int]:
    """'1,2,4' → [1, 2, 4]."""
    return [int(x) for x in text.split(",") if x.strip()]


def _floats(text: str) -> list[float]:
    """'0,1' → [0.0, 1.0]."""
    return [float(x) for x in text.split(",") if x.strip()]


def _caps(text: str) -> list[int | None]:
    """'none,2' → [None, 2]: draft-model caps of the hybrid drafters (none: no cap)."""
    return [None if x.strip() == "none" else int(x) for x in text.split(",") if x.strip()]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the bench subcommand."""
    b = sub.add_parser(
        "bench",
        help="benchmark speedup on workloads against plain and transformers",
        description="Benchmark speculative decoding on workloads, interleaved with plain "
        "decoding and transformers' assisted generation; writes JSON and an HTML report. "
        "--tree-sweep runs the tree drafters' node-budget sweep instead, --batch-sizes the batch "
        "sweep (plain and speculative decoding of the same requests at each batch size), "
        "--levers the levers sweep (speculation beside lower precision and the small model).",
        formatter_class=HelpFormatter,
    )
    b.add_argument("--target", default=BUNDLED, help="target: local folder, hub id, or 'bundled'")
    b.add_argument(
        "--draft",
        action="append",
        help="draft: local folder, hub id, or 'bundled'; repeat to compare drafts (default: "
        f"{BUNDLED})",
    )
    b.add_argument("--workloads", default="code", help=f"comma list of {WORKLOADS} or JSONL paths")
    b.add_argument(
        "--raw",
        action="store_true",
        help="send each prompt as plain text to continue; by default it goes through the "
        "target tokenizer's chat template (one user turn) where the tokenizer has one",
    )
    b.add_argument("--limit", type=int, default=0, help="first N prompts of each workload (0: all)")
    b.add_argument("--gammas", type=_ints, default="4", help="comma list, e.g. 1,2,3,4,6,8")
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
        help="head drafters (eagle, medusa and their trees): the folder of eagle.safetensors / "
        "medusa.safetensors trained for --target (default: the heads shipped for the bundled "
        "target); they verify through the target forward plain decoding runs on",
    )
    b.add_argument(
        "--exit-layer",
        type=_ints,
        default="8",
        help="layers the early-exit drafter uses (comma list to compare draft sizes)",
    )
    b.add_argument(
        "--model-gamma",
        type=_caps,
        default="none",
        help="hybrid drafters (ngram+...): at most this many draft-model tokens a round while "
        "lookup copies run to gamma; comma list to compare, 'none' for no cap (default)",
    )
    b.add_argument(
        "--policies",
        default="fixed",
        help=f"comma list of gamma policies {POLICIES}; fixed sweeps --gammas",
    )
    b.add_argument(
        "--start-gamma", type=int, default=4, help="where the dynamic gamma policies start"
    )
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
    add_tree_arguments(b)
    add_batch_arguments(b)
    add_levers_arguments(b)
    add_endpoint_arguments(b)
    b.add_argument("--out", default="bench.json", help="JSON results")
    b.add_argument("--html", default="bench.html", help="self-contained plotly report")


def _check(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """Validate flags before any model work; returns the drafter and policy names."""
    drafters = drafter_names(args)
    if not drafters or any(d not in DRAFTERS for d in drafters):
        raise ValueError(
            f"--drafters must list some of {', '.join(map(repr, DRAFTERS))} (got {args.drafters!r})"
        )
    if not args.gammas or min(args.gammas) < 1:
        raise ValueError(f"--gammas must be integers >= 1 (got {args.gammas})")
    if args.reps < 1:
        raise ValueError(f"--reps must be >= 1 (got {args.reps})")
    if args.temperatures is not None and min(args.temperatures, default=0) < 0:
        raise ValueError(f"--temperatures must be >= 0 (got {args.temperatures})")
    if args.start_gamma < 1:
        raise ValueError(f"--start-gamma must be >= 1 (got {args.start_gamma})")
    check_device(args.device)
    if not args.price_per_hour > 0:
        raise ValueError(f"--price-per-hour must be > 0 USD (got {args.price_per_hour})")
    if not args.exit_layer or min(args.exit_layer) < 1:
        raise ValueError(f"--exit-layer must be integers >= 1 (got {args.exit_layer})")
    if not args.model_gamma or min((k for k in args.model_gamma if k is not None), default=1) < 1:
        raise ValueError(f"--model-gamma must be integers >= 1 or 'none' (got {args.model_gamma})")
    if args.model_gamma != [None] and not any(d in HYBRID_DRAFTERS for d in drafters):
        raise ValueError(
            "--model-gamma caps the draft model after lookup: add one of "
            f"{', '.join(HYBRID_DRAFTERS)} to --drafters, or drop --model-gamma"
        )
    twice = sorted({d for d in args.draft or [] if args.draft.count(d) > 1})
    if twice:
        raise ValueError(f"--draft names {', '.join(twice)} more than once: give each draft once")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies or any(p not in POLICIES for p in policies):
        raise ValueError(f"--policies must list some of {POLICIES} (got {args.policies!r})")
    check_tree_flags(args, drafters, policies)
    check_heads(drafters, args.heads, flag="--drafters")
    return drafters, policies


def _settings(
    drafters: list[str], policies: list[str], args: argparse.Namespace, draft: str, t: float
) -> list[BenchSetting]:
    """Every drafter x policy x gamma (x exit layer, x draft-model cap) point; n-gram and the
    head drafters have no confidence policy (they never stop drafting on their q).

    The fixed policy sweeps --gammas; each dynamic policy runs once, from --start-gamma. A tree
    drafter runs once, at --tree-depth (tree_cli.tree_settings).
    """
    trees = [s for d in drafters if d in TREE_DRAFTERS for s in tree_settings(args, d, draft, t)]
    return trees + [
        BenchSetting(
            drafter=d,
            gamma=g,
            temperature=t,
            draft_name=draft if d in MODEL_DRAFTERS else d,
            exit_layer=k,
            policy=p,
            model_gamma=cap,
        )
        for d in drafters
        if d not in TREE_DRAFTERS
        for k in (args.exit_layer if d in EXIT_DRAFTERS else args.exit_layer[:1])
        for cap in (args.model_gamma if d in HYBRID_DRAFTERS else [None])
        for p in policies
        if not (p == "confidence" and d in UNCONFIDENT_DRAFTERS)
        for g in (args.gammas if p == "fixed" else [args.start_gamma])
    ]


def _run_settings(
    args: argparse.Namespace,
    pair: Any,
    requests: list[Request],
    drafters: list[str],
    policies: list[str],
    plan: SweepPlan | None,
    draft_spec: str,
) -> list[Record]:
    """Every setting (or the tree sweep's) on the requests, one temperature after another."""
    records: list[Record] = []
    temps = (
        args.temperatures
        if args.temperatures is not None
        else sorted({r.temperature for r in requests})
    )
    for temperature in temps:
        subset = [
            r for r in requests if args.temperatures is not None or r.temperature == temperature
        ]
        if plan is not None:
            records += run_sweep(
                pair.target, pair.draft, pair.tokenizer, subset, plan,
                temperature=temperature, draft_name=draft_spec, repetitions=args.reps,
                with_hf=not args.no_hf, progress=progress_bar, raw=args.raw,
                heads=args.heads,
            )  # fmt: skip
            continue
        settings = _settings(drafters, policies, args, draft_spec, temperature)
        records += run_all(
            pair.target,
            pair.draft,
            pair.tokenizer,
            subset,
            settings,
            repetitions=args.reps,
            with_hf=not args.no_hf,
            progress=progress_bar,
            lean=not args.no_lean,
            lean_target=args.lean_target,
            raw=args.raw,
            heads=args.heads,
        )
    return records


def run_endpoint_bench(args: argparse.Namespace) -> int:
    """Send the workloads to the servers, write JSON and HTML, print the sweep's table."""
    if args.reps < 1 or not args.price_per_hour > 0:
        raise ValueError("--reps must be >= 1 and --price-per-hour > 0 USD")
    requests = [r for w in args.workloads.split(",") for r in _limit(load_requests(w), args.limit)]
    section = endpoint_section(args, requests, progress_bar)
    drafts = {"server": {"draft_forward": "the server's own speculation", "batch_step_seconds": []}}
    payload = saved_result(endpoint_meta(args), drafts, [], endpoint=section)
    Path(args.out).write_text(json.dumps(payload, indent=2), encoding="utf-8")
    report = figures([], [], {}, endpoint=section, price_per_hour=args.price_per_hour)
    Path(args.html).write_text(html_report(report, "specviz endpoint benchmark"), encoding="utf-8")
    print(render_endpoint(section, args.price_per_hour))
    print(f"wrote {args.out} and {args.html}")
    return 0


def run_bench(args: argparse.Namespace) -> int:
    """Load, run every sweep point interleaved, write JSON and HTML, print a summary."""
    if endpoint_asked(args):
        return run_endpoint_bench(args)
    drafters, policies = _check(args)
    plan = sweep_plan(args, drafters)  # None unless --tree-sweep
    requests = [r for w in args.workloads.split(",") for r in _limit(load_requests(w), args.limit)]
    batch = batch_plan(args, drafters, policies, requests)  # None unless --batch-sizes
    levers = levers_plan(args, drafters, policies)  # None unless --levers
    records: list[Record] = []
    sweep: dict[str, Any] | None = None
    batch_sweep: dict[str, Any] | None = None
    lever_section: dict[str, Any] | None = None
    drafts: dict[str, dict[str, Any]] = {}  # what was measured with each --draft loaded
    packed, forward, fmt = False, "", "raw"
    if levers is not None:
        lever_section, fmt = levers_result(levers, args, requests, progress_bar)
        packed, forward = not args.no_pack, LEVERS_FORWARD
        drafts[(args.draft or [BUNDLED])[0]] = {
            "draft_forward": LEVERS_DRAFT_FORWARD,
            "batch_step_seconds": [],  # no plain step timing in a levers run
        }
    if levers is None and any(d.endswith("model-trimmed") for d in drafters):  # ranking first
        for draft_spec in args.draft or [BUNDLED]:
            load_head_tokens(resolve(draft_spec, "draft", say))
    for draft_spec in [] if levers is not None else args.draft or [BUNDLED]:
        pair = load_pair(
            args.target,
            draft_spec,
            dtype=parse_dtype(args.dtype),
            device=args.device,
            pack=not args.no_pack,
            progress=say,
        )
        fmt = prompt_format(pair.tokenizer, raw=args.raw)  # the target's: the same each time
        if batch is not None:
            batch_sweep = batch_result(
                batch, pair, requests, temperatures=args.temperatures, repetitions=args.reps,
                raw=args.raw, price_per_hour=args.price_per_hour, progress=progress_bar,
            )  # fmt: skip
        else:
            records += _run_settings(args, pair, requests, drafters, policies, plan, draft_spec)
        if plan is not None:
            sweep = sweep_result(plan, pair, requests[0].prompt, args.raw, records)
        steps = batch_step_times(pair.target, args.step_batch_sizes)
        drafts[draft_spec] = {
            "draft_forward": BATCH_FORWARD if batch else draft_forward(args, pair.draft),
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
    payload = saved_result(meta, drafts, records, sweep, batch_sweep, lever_section)
    rows, dynamic = payload["summary"], payload["policies_vs_best_fixed"]
    Path(args.out).write_text(json.dumps(payload, indent=2), encoding="utf-8")
    report = figures(
        records, payload["gamma_curves"], batch_steps(payload), sweep=batch_sweep,
        levers=payload["levers"], price_per_hour=args.price_per_hour,
    )  # fmt: skip
    title = f"specviz benchmark (prompts {PROMPT_FORMATS[fmt]})"
    Path(args.html).write_text(html_report(report, title), encoding="utf-8")
    for row in rows:
        print(_summary_line(row))
    for d in dynamic:
        print(
            f"{d['workload']:7s} {d['drafter']:5s} {d['policy']:9s} from gamma={d['start_gamma']} "
            f"T={d['temperature']}: {d['ratio']:.2f} of the best fixed gamma "
            f"({d['best_fixed_gamma']}, {d['best_fixed_speedup']:.2f}x)"
        )
    if payload["tree_sweep"] is not None:
        print(render_sweep(payload["tree_sweep"]))
    if batch_sweep is not None:
        print(render_batch_sweep(batch_sweep))
    if payload["levers"] is not None:
        print(render_levers(payload["levers"], args.price_per_hour))
    print(f"prompts {PROMPT_FORMATS[fmt]}; wrote {args.out} and {args.html}")
    return 0


def _summary_line(row: dict[str, Any]) -> str:
    """One summary row in a line: speedup, the chain bound where it applies, alpha and c."""
    s = row["setting"]
    head = f"{row['workload']:7s} {s['drafter']:5s} {s['policy']:9s} gamma={s['gamma']} "
    if s.get("tree_nodes") is not None:  # a tree: its gamma is its depth; no chain bound
        head = f"{row['workload']:7s} {drafter_label(s)} depth={s['gamma']} "
    theory = (
        f" (bound {row['bound']['median']:.2f}x, efficiency {row['efficiency']['median']:.2f})"
        if row["bound"] is not None
        else ""
    )
    return (
        f"{head}T={s['temperature']}: speedup {row['speedup']['median']:.2f}x{theory}, "
        f"alpha {row['alpha']['median']:.2f}, c {row['cost_ratio']['median']:.3f}"
    )


def saved_result(
    meta: dict[str, Any],
    drafts: dict[str, dict[str, Any]],
    records: Sequence[Record],
    tree_sweep: dict[str, Any] | None = None,
    batch_sweep: dict[str, Any] | None = None,
    levers: dict[str, Any] | None = None,
    endpoint: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What `specviz bench --out` writes (specviz.bench.schema, version SCHEMA).

    meta: what is common to the run, its price_per_hour among it; drafts: each --draft's own
    draft_forward and batch_step_seconds; the summary, γ curves and policy table are the
    records' at that price; tree_sweep: --tree-sweep's section (specviz.bench.tree_table);
    batch_sweep: --batch-sizes' section (specviz.bench.batch_rows); levers: --levers' section
    (specviz.bench.lever_sweep); endpoint: --endpoint's section (specviz.endpoint.sweep).
    """
    rows = summarize(records, meta["price_per_hour"])
    payload = {
        "schema": SCHEMA,
        "meta": meta,
        "drafts": drafts,
        "summary": rows,
        "gamma_curves": gamma_curves(rows),
        "policies_vs_best_fixed": policies_vs_best_fixed(rows),
        "tree_sweep": tree_sweep,
        "batch_sweep": batch_sweep,
        "levers": levers,
        "endpoint": endpoint,
        "records": [r.to_dict() for r in records],
    }
    validate(payload)
    return payload


def _limit(requests: list, n: int) -> list:  # type: ignore[type-arg]
    """The first n requests (all when n is 0)."""
    return requests[:n] if n else requests
