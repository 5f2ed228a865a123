"""`specviz bench endpoint`: the workloads sent to an OpenAI-compatible
server with speculation on and to a baseline without it, at each concurrency
(specviz.endpoint)."""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specviz.bench.sweep import Context, Outcome, ints
from specviz.endpoint.client import Endpoint, EndpointError, Job, base_url, served_model
from specviz.endpoint.sweep import EndpointPlan, Progress, merge_baseline, run_endpoint_sweep
from specviz.endpoint.table import render_endpoint
from specviz.results.schema import read_result
from specviz.runtime import cpu_name
from specviz.workloads import Request

SECOND_SERVER = "a second server without speculation, interleaved batch by batch"
SERVER_FORWARD = "the server's own (specviz sends requests only)"
CLASHES = (  # local-bench flags an endpoint run has no use for: (flag, attribute, its default)
    ("--drafters", "drafters", None), ("--draft", "draft", None), ("--heads", "heads", None),
    ("--lean-target", "lean_target", False),
)  # fmt: skip


def add_endpoint_arguments(b: argparse.ArgumentParser) -> None:
    """Register --endpoint and its companions."""
    b.add_argument(
        "--endpoint",
        metavar="URL",
        help="benchmark an OpenAI-compatible server (vLLM, SGLang, llama.cpp, ...) running with "
        "speculation on, e.g. http://127.0.0.1:8000, against --baseline-endpoint (or "
        "--baseline-result): the workloads at each --concurrency, paired request by request; "
        "no model is loaded here",
    )
    b.add_argument(
        "--baseline-endpoint",
        metavar="URL",
        help="the same model served without speculation. Alone (no --endpoint) it measures the "
        "baseline only, for --baseline-result after restarting that server with speculation",
    )
    b.add_argument(
        "--baseline-result",
        metavar="JSON",
        help="the baseline from an earlier `--baseline-endpoint URL` run of the same server, "
        "same requests and --concurrency, restarted since without speculation",
    )
    b.add_argument(
        "--endpoint-model",
        metavar="NAME",
        help="the model name to request (default: the first one each server lists at /v1/models)",
    )
    b.add_argument(
        "--request-fields",
        metavar="JSON",
        default="{}",
        help="more fields for every request's JSON, e.g. '{\"return_spec_tokens_details\": "
        "true}' for SGLang's per-request acceptance, or '{\"top_p\": 0.9}'",
    )
    b.add_argument(
        "--concurrency",
        type=ints,
        default="1,2,4,8,16",
        help="the load sweep: requests in flight at once, comma list",
    )
    b.add_argument(
        "--warmup",
        type=int,
        default=2,
        help="untimed requests each server answers first (at least 1: it shows whether the "
        "server's streamed replies carry usage)",
    )


def check_endpoint_flags(args: argparse.Namespace) -> dict[str, str]:
    """Each side's base URL; ValueError, saying what to change, before any request."""
    if not (args.endpoint or args.baseline_endpoint or args.baseline_result):
        raise ValueError(
            "specviz bench endpoint measures a server: give --endpoint URL (or "
            "--baseline-endpoint URL for the baseline alone)"
        )
    for flag, attr, default in CLASHES:
        if getattr(args, attr) != default:
            raise ValueError(f"{flag} sets up local models: drop it from specviz bench endpoint")
    if args.baseline_result and args.baseline_endpoint:
        raise ValueError("give the baseline once: --baseline-endpoint or --baseline-result")
    if args.baseline_result and not args.endpoint:
        raise ValueError("--baseline-result pairs an earlier baseline with --endpoint URL: add it")
    if not args.concurrency or min(args.concurrency) < 1:
        raise ValueError(f"--concurrency must be integers >= 1 (got {args.concurrency})")
    if args.warmup < 1:
        raise ValueError(f"--warmup must be >= 1 (got {args.warmup})")
    if args.baseline_result and not Path(args.baseline_result).is_file():
        raise ValueError(f"--baseline-result {args.baseline_result}: no such file")
    request_fields(args.request_fields)
    urls = {"spec": args.endpoint, "base": args.baseline_endpoint}
    return {side: base_url(url) for side, url in urls.items() if url}


def request_fields(text: str) -> tuple[tuple[str, Any], ...]:
    """--request-fields as (key, value) pairs; ValueError unless it is a JSON object."""
    try:
        fields = json.loads(text)
    except ValueError as err:
        raise ValueError(f"--request-fields is not JSON ({err}): give an object") from None
    if not isinstance(fields, dict):
        raise ValueError(f"--request-fields must be a JSON object (got {text!r})")
    return tuple(fields.items())


def jobs_of(requests: Sequence[Request], temperatures: list[float] | None) -> list[Job]:
    """Each request at each temperature (None: at its own), seeded by its position."""
    picked = [(r, t) for r in requests for t in (temperatures or [r.temperature])]
    return [
        Job(
            request=r.id,
            category=r.category,
            prompt=r.prompt,
            max_tokens=r.max_new_tokens,
            temperature=t,
            seed=i,
        )
        for i, (r, t) in enumerate(picked)
    ]


def _baseline(args: argparse.Namespace) -> str:
    """How the baseline ran, in the report's words."""
    if args.baseline_result:
        return f"the same server restarted without speculation ({Path(args.baseline_result).name})"
    return SECOND_SERVER if args.endpoint and args.baseline_endpoint else "not run"


def endpoint_section(
    args: argparse.Namespace, requests: Sequence[Request], progress: Progress
) -> dict[str, Any]:
    """Check the flags and servers, run the sweep, join an earlier baseline: the section."""
    urls = check_endpoint_flags(args)
    earlier = None
    if args.baseline_result:
        earlier = read_result(args.baseline_result).get("endpoint")
        if earlier is None:
            raise ValueError(
                f"{args.baseline_result} is not an endpoint run: rerun it with --baseline-endpoint"
            )
    plan = EndpointPlan(
        concurrency=tuple(args.concurrency),
        repetitions=args.reps,
        warmup=args.warmup,
        baseline=_baseline(args),
    )
    try:
        sides = {
            side: Endpoint(
                url=url, model=args.endpoint_model or served_model(url), chat=not args.raw
            )
            for side, url in urls.items()
        }
        section = run_endpoint_sweep(sides, jobs_of(requests, args.temperatures), plan, progress)
    except EndpointError as err:
        raise ValueError(f"{err} (is the server up, and is it OpenAI-compatible?)") from None
    if earlier is not None:
        section = merge_baseline(section, earlier, args.baseline_result)
    return section


def endpoint_meta(args: argparse.Namespace) -> dict[str, Any]:
    """meta of an endpoint run: what the local bench's meta holds that applies, and the URLs."""
    return {
        "cpu": cpu_name(),  # the client's: the server's too where it runs on this machine
        "machine": platform.machine(),
        "python": platform.python_version(),
        "device": "endpoint",
        "target_forward": SERVER_FORWARD,
        "endpoint": args.endpoint,
        "baseline_endpoint": args.baseline_endpoint,
        "price_per_hour": args.price_per_hour,
        "prompt_format": "raw" if args.raw else "chat",
        "command": shlex.join(["specviz", *sys.argv[1:]]),
        "profile": None,  # no local model runs: no tuned profile applies
    }


@dataclass(frozen=True, kw_only=True)
class Served:
    """The endpoint sweep: no model is loaded here; its section is saved under endpoint."""

    name: str = "endpoint"
    key: str | None = "endpoint"
    per_draft: bool = False
    own_flags: bool = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_endpoint_arguments(parser)

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        return args

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> dict[str, str]:
        if args.reps < 1 or not args.price_per_hour > 0:
            raise ValueError("--reps must be >= 1 and --price-per-hour > 0 USD")
        return check_endpoint_flags(args)

    def run(self, plan: dict[str, str], context: Context) -> Outcome:
        return Outcome(section=endpoint_section(context.args, context.requests, context.progress))

    def render(self, section: dict[str, Any], price_per_hour: float) -> str:
        return render_endpoint(section, price_per_hour)
