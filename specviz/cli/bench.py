"""`specviz bench`: measure speedup on workloads, interleaved, against transformers and theory.

The first word after `bench` picks the study (specviz.bench.sweeps; its parser:
specviz.cli.bench_parser); a study with flags of its own (replay) and the commands beside the
studies (passes, identity, markdown, saved) parse their own. A run writes its JSON result
(specviz.results.schema) and a self-contained HTML report, and prints its summary.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch
import transformers

from specviz.bench.passes import passes_command
from specviz.bench.report import figures, html_report, render, resummarized
from specviz.bench.report import load_result_view as load_result_view  # specviz app's view
from specviz.bench.summary import gamma_curves, policies_vs_best_fixed, summarize
from specviz.bench.sweep import Context, Sweep, check
from specviz.bench.sweeps import studies
from specviz.bench.sweeps.endpoint import endpoint_meta
from specviz.bench.sweeps.speedup import summary_line
from specviz.console import progress_bar, say
from specviz.drafters.names import HEAD_DRAFTERS
from specviz.drafters.trimmed import load_head_tokens
from specviz.fast.lean import lean_problem
from specviz.fast.packed import is_packed
from specviz.models.chat import prompt_format
from specviz.models.loading import BUNDLED, load_pair, parse_dtype, resolve
from specviz.results.records import DEFAULT_PRICE_PER_HOUR, Record
from specviz.results.schema import SCHEMA, batch_steps, read_result, validate
from specviz.runtime import cpu_name, gpu_meta
from specviz.stats.identity import identity_command
from specviz.tune.defaults import resolve_defaults
from specviz.tune.timing import step_times
from specviz.workloads import Request, load_requests

PROMPT_FORMATS = {"chat": "through the chat template", "raw": "as raw text"}  # meta's wording
LEVERS_FORWARD = "transformers (specviz bench levers: every lever's target; int8 through torchao)"
LEVERS_DRAFT_FORWARD = "specviz.fast.lean where it applies (fp32, bf16), else transformers"
BATCH_FORWARD = "transformers (specviz bench batch: batched through specviz.batch)"
SERVER_DRAFT = "the server's own speculation"  # an endpoint run's draft_forward


def saved_command(argv: Sequence[str]) -> int:
    """`specviz bench saved RESULT.json OUT.html`: a saved result's HTML report, rebuilt."""
    parser = argparse.ArgumentParser(
        prog="specviz bench saved",
        description="Write the self-contained HTML report of a saved "
        "result (any schema version) again.",
    )
    parser.add_argument("result", metavar="RESULT.json", help="a `specviz bench --out` result")
    parser.add_argument("html", metavar="OUT.html", help="the report to write")
    args = parser.parse_args(argv)
    figs, _ = load_result_view(args.result)
    Path(args.html).write_text(html_report(figs, "specviz benchmark"), encoding="utf-8")
    return 0


def markdown_command(argv: Sequence[str]) -> int:
    """`specviz bench markdown RESULT.json ...`: every saved result's tables, as Markdown."""
    parser = argparse.ArgumentParser(
        prog="specviz bench markdown",
        description="Print each saved result as a Markdown "
        "section: its command, machine and every table, each number from the JSON.",
    )
    parser.add_argument("results", nargs="+", metavar="RESULT.json", help="saved results")
    paths = parser.parse_args(argv).results
    sections = [render(resummarized(read_result(p)), Path(p).stem) for p in paths]
    print("\n".join(sections))
    return 0


def study_command(study: Sweep, argv: Sequence[str]) -> int:
    """A study with flags of its own: its parser, its plan (a bad value is the parser's error,
    before any model loads), its run, its section printed."""
    parser = argparse.ArgumentParser(prog=f"specviz bench {study.name}", description=study.__doc__)
    study.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        plan = study.plan(args, [], [], [])
    except ValueError as err:
        parser.error(str(err))
    outcome = study.run(plan, Context(args=args, requests=(), progress=progress_bar))
    print(study.render(outcome.section or {}, DEFAULT_PRICE_PER_HOUR), flush=True)
    return 0


def commands() -> dict[str, Callable[[Sequence[str]], int]]:
    """The words after `specviz bench` that parse flags of their own, and what runs them."""
    table: dict[str, Callable[[Sequence[str]], int]] = {
        s.name: partial(study_command, s) for s in studies() if s.own_flags
    }
    return table | {
        "passes": passes_command,
        "identity": identity_command,
        "saved": saved_command,
        "markdown": markdown_command,
    }


def subcommands() -> tuple[str, ...]:
    """The words that may follow `specviz bench`."""
    return (*(s.name for s in studies() if not s.own_flags), *commands())


def command(argv: Sequence[str]) -> Callable[[], int] | None:
    """`bench replay ...` and the other commands with a parser of their own, ready to run with
    the flags after their word (None for any other command line)."""
    table = commands()
    if len(argv) < 2 or argv[0] != "bench" or argv[1] not in table:
        return None
    run, rest = table[argv[1]], list(argv[2:])
    return lambda: run(rest)


def study_of(args: argparse.Namespace) -> Sweep:
    """The study its subcommand names (speedup where none is named)."""
    return next(s for s in studies() if s.name == args.study)


def _requests(args: argparse.Namespace) -> list[Request]:
    """--workloads' requests, the first --limit of each (all where it is 0)."""
    names = (args.workloads or "code").split(",")
    return [r for w in names for r in load_requests(w)[: args.limit or None]]


def draft_forward(args: argparse.Namespace, draft: Any) -> str:
    """How the draft model ran: specviz.fast.lean's forward, or transformers' (and why)."""
    if args.no_lean:
        return "transformers (--no-lean)"
    if args.study == "trees":
        return "transformers (specviz bench trees: the chain drafts as the tree drafters do)"
    problem = lean_problem(draft)
    return "lean (specviz.fast.lean)" if problem is None else f"transformers ({problem})"


def target_forward(args: argparse.Namespace, target: Any) -> str:
    """How the target ran in our loops: transformers' forward, or specviz.fast.lean's."""
    if not args.lean_target:
        return "transformers"
    problem = lean_problem(target, wide=True)
    return "lean (specviz.fast.lean)" if problem is None else f"transformers ({problem})"


def run_bench(args: argparse.Namespace) -> int:
    """Load, run the chosen study interleaved, write JSON and HTML, print a summary."""
    study = study_of(args)
    args = study.chosen(args)
    if study.name == "endpoint":  # no model here: a served one
        plan = study.plan(args, [], [], [])
        context = Context(args=args, requests=_requests(args), progress=progress_bar)
        section = study.run(plan, context).section
        server = {"server": {"draft_forward": SERVER_DRAFT, "batch_step_seconds": []}}
        payload = saved_result(endpoint_meta(args), server, [], {"endpoint": section})
        return _write(args, study, payload, [], "specviz endpoint benchmark", "")
    drafters, policies = check(args)
    if not args.step_batch_sizes or min(args.step_batch_sizes) < 1:
        steps = args.step_batch_sizes
        raise ValueError(f"--step-batch-sizes must be integers >= 1 (got {steps})")
    requests = _requests(args)
    plan = study.plan(args, drafters, policies, requests)
    records: list[Record] = []
    sections: dict[str, dict[str, Any] | None] = {}
    drafts: dict[str, dict[str, Any]] = {}  # what was measured with each --draft loaded
    packed, forward, fmt = False, "", "raw"
    if not study.per_draft:  # the levers sweep loads its own models
        outcome = study.run(plan, Context(args=args, requests=requests, progress=progress_bar))
        sections[str(study.key)], fmt = outcome.section, outcome.prompt_format
        packed, forward = not args.no_pack, LEVERS_FORWARD
        drafts[(args.draft or [BUNDLED])[0]] = {  # no plain step timing in a levers run
            "draft_forward": LEVERS_DRAFT_FORWARD,
            "batch_step_seconds": [],
        }
    if study.per_draft and any(d.endswith("model:trimmed") for d in drafters):  # ranking first
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
        outcome = study.run(
            plan,
            Context(
                args=args, requests=requests, progress=progress_bar, pair=pair, draft=draft_spec
            ),
        )
        records += outcome.records
        if study.key is not None:
            sections[study.key] = outcome.section
        steps = step_times(pair.target, args.step_batch_sizes)
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
        "profile": run_profile(args),
    }
    if any(d in HEAD_DRAFTERS for d in drafters):  # whose features the heads were trained on
        meta["heads"] = args.heads or "shipped (specviz/assets/heads)"
    payload = saved_result(meta, drafts, records, sections)
    for row in payload["summary"]:
        print(summary_line(row))
    for d in payload["policies_vs_best_fixed"]:
        print(
            f"{d['workload']:7s} {d['drafter']:5s} {d['policy']:9s} from gamma={d['start_gamma']} "
            f"T={d['temperature']}: {d['ratio']:.2f} of the best fixed gamma "
            f"({d['best_fixed_gamma']}, {d['best_fixed_speedup']:.2f}x)"
        )
    said = f"prompts {PROMPT_FORMATS[fmt]}"
    return _write(args, study, payload, records, f"specviz benchmark ({said})", f"{said}; ")


def _write(
    args: argparse.Namespace,
    study: Sweep,
    payload: dict[str, Any],
    records: Sequence[Record],
    title: str,
    said: str,
) -> int:
    """Write the result's JSON and HTML report (figures of its records), print the study's
    section and where they are."""
    Path(args.out).write_text(json.dumps(payload, indent=2), encoding="utf-8")
    html = Path(args.html) if args.html else Path(args.out).with_suffix(".html")
    report = figures(
        records,
        payload["gamma_curves"],
        batch_steps(payload),
        sweep=payload["batch_sweep"],
        levers=payload["levers"],
        endpoint=payload["endpoint"],
        price_per_hour=args.price_per_hour,
    )
    html.write_text(html_report(report, title), encoding="utf-8")
    if study.key is not None and payload[study.key] is not None:
        print(study.render(payload[study.key], args.price_per_hour))
    print(f"{said}wrote {args.out} and {html}")
    return 0


def run_profile(args: argparse.Namespace) -> dict[str, Any] | None:
    """The tuned profile of this machine for the target and the first --draft, which
    `specviz generate` and the app read (specviz.tune.defaults): its path and content, or None
    where there is none (or none that applies). The bench runs on its own flags all the same."""
    draft = (args.draft or [BUNDLED])[0]
    return resolve_defaults(args.target, draft, args.dtype, device=args.device, warn=say).meta()


def saved_result(
    meta: dict[str, Any],
    drafts: dict[str, dict[str, Any]],
    records: Sequence[Record],
    sections: Mapping[str, dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """What `specviz bench --out` writes (specviz.results.schema, version SCHEMA).

    meta: what is common to the run, its price_per_hour among it; drafts: each --draft's own
    draft_forward and batch_step_seconds; the summary, γ curves and policy table are the
    records' at that price; sections: each study's section by its key (Sweep.key; those not
    given are saved as null).
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
