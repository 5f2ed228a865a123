"""`specviz audit`: audit an engine's speculative decoding against its own plain decoding.

Sources (one of): --endpoint URL (an OpenAI-compatible server), --hf MODE (transformers'
generate() in process), --drafter NAME (a specviz drafter). Progress goes to stderr, the tests
and verdict to stdout, the whole result to --json. Exit status: 0 exact, 1 not exact,
3 inconclusive, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from specviz.audit.draw import Drawn, Event, Looked, Planned
from specviz.audit.endpoint import FLAVOURS, EndpointSource, Server, served_models
from specviz.audit.greedy import TIE_NATS
from specviz.audit.hf import MODES, TransformersSource
from specviz.audit.power import DEFAULT_TARGETS, Target
from specviz.audit.registered import DrafterSource
from specviz.audit.runner import AuditConfig, run_audit
from specviz.audit.settings import Settings
from specviz.audit.sources import Source
from specviz.audit.table import result_lines
from specviz.console import progress_bar, say
from specviz.drafters.names import drafter_spec
from specviz.models.loading import BUNDLED, MODEL_SPEC_HELP, load_pair
from specviz.runtime import HelpFormatter, add_threads_argument

# One prompt that repeats itself, so that prompt lookup drafts at once. The power is stated per
# prompt; each --prompt added costs as much again (and a little more: Holm's family grows).
DEFAULT_PROMPTS = ("The list: apple, banana, cherry, apple, banana, cherry, apple,",)
EXIT = {"exact": 0, "not exact": 1, "inconclusive": 3}


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the audit subcommand."""
    parser = sub.add_parser(
        "audit",
        help="statistical audit of any engine's speculative decoding",
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    _source_flags(parser)
    _sampling_flags(parser)
    _design_flags(parser)
    add_threads_argument(parser)
    flags = [(a.option_strings[0], a.dest, a.default) for a in parser._actions if a.option_strings]
    parser.set_defaults(audit_flags=[f for f in flags if f[1] != "help"])


def _source_flags(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--endpoint", metavar="URL", help="server with speculation on")
    which.add_argument("--hf", choices=MODES, help="transformers generate() with this speculation")
    which.add_argument("--drafter", metavar="NAME", help="a specviz drafter (`specviz drafters`)")
    parser.add_argument("--plain-endpoint", metavar="URL", help="server with speculation off")
    parser.add_argument(
        "--plain-fields",
        metavar="JSON",
        help="request fields that switch speculation off at "
        "--endpoint itself (e.g. an engine's per-request switch)",
    )
    parser.add_argument("--fields", metavar="JSON", help="more request fields for both sides")
    parser.add_argument("--model", help="the served model (default: the first /v1/models lists)")
    parser.add_argument("--api", choices=FLAVOURS, default="openai", help="the server's fields")
    parser.add_argument("--chat", action="store_true", help="ask /v1/chat/completions")
    parser.add_argument(
        "--token-outcomes",
        action="store_true",
        help="--endpoint: read tokens from logprobs, one request of the longest k serving every "
        "k (tests the first tokens of speculative requests; costlier where logprobs are slow)",
    )
    parser.add_argument("--target", help=f"--hf/--drafter: {MODEL_SPEC_HELP} (default: {BUNDLED})")
    parser.add_argument(
        "--assistant", help=f"--hf assistant(-tokenizer), --drafter: {MODEL_SPEC_HELP}"
    )
    parser.add_argument("--lookup-tokens", type=int, default=4, help="--hf prompt-lookup tokens")
    parser.add_argument("--gamma", type=int, default=4, help="--drafter: draft tokens a round")


def _sampling_flags(parser: argparse.ArgumentParser) -> None:
    server = "; 'server' leaves it to the engine's default"
    parser.add_argument("--temperature", type=float, default=1.0, help="0: the greedy check")
    parser.add_argument("--top-k", type=_maybe(int), default=0, help=f"0: off{server}")
    parser.add_argument("--top-p", type=_maybe(float), default=1.0, help=f"1: off{server}")
    parser.add_argument(
        "--repetition-penalty", type=_maybe(float), default=1.0, help=f"1: off{server}"
    )
    parser.add_argument(
        "--frequency-penalty", type=_maybe(float), default=0.0, help=f"0: off{server}"
    )


def _design_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prompt", action="append", help="a prompt (repeat for several)")
    parser.add_argument("--k", default="1,3", help="the joint laws tested: first k tokens, 1..4")
    parser.add_argument("--alpha", type=float, default=0.01, help="family-wise false alarm rate")
    parser.add_argument("--power", type=float, default=0.95, help="power the N is planned for")
    parser.add_argument(
        "--tv-first", type=float, default=0.05, help="the TV the first token's test must see"
    )
    parser.add_argument(
        "--tv-joint", type=float, default=0.1, help="the TV the tests of k >= 2 tokens must see"
    )
    parser.add_argument("--n", type=int, help="samples per side, prompt and k (default: planned)")
    parser.add_argument("--logprob-samples", type=int, default=200, help="per prompt; 0: off")
    parser.add_argument("--greedy-tokens", type=int, default=32, help="tokens compared at T=0")
    parser.add_argument("--tie", type=float, default=TIE_NATS, help="top-2 gap of a tie (nats)")
    parser.add_argument("--seed", type=int, default=0, help="the first request's seed")
    parser.add_argument("--samples", metavar="FILE", help="JSONL of samples: resumed, appended")
    parser.add_argument("--max-minutes", type=float, help="refuse an audit predicted longer")
    parser.add_argument("--json", metavar="FILE", help="write the result as JSON")


def _maybe(kind: type[int] | type[float]) -> Any:
    """An argparse type: a number, or 'server' for None (the engine's default)."""

    def parse(text: str) -> int | float | None:
        if text == "server":
            return None
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"a number or 'server' (got {text!r})") from None

    return parse


def run(args: argparse.Namespace) -> int:
    """Validate, build the source, audit with progress on stderr, print and save the result."""
    config = _config(args)
    source = _source(args)
    result = run_audit(source, config, _render)
    print(f"{result['engine']} | {result['setting']}")
    print("\n".join(result_lines(result)))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return EXIT[result["verdict"]]


def _config(args: argparse.Namespace) -> AuditConfig:
    """The audit's settings and design from the flags (ValueError for bad values)."""
    ks = _ks(args.k)
    if not 0 < args.alpha < 1 or not 0 < args.power < 1:
        raise ValueError("--alpha and --power must be in (0, 1)")
    if args.n is not None and args.n < 10:
        raise ValueError(f"--n must be at least 10 (got {args.n})")
    settings = Settings(
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        repetition_penalty=args.repetition_penalty,
        frequency_penalty=args.frequency_penalty,
    )
    return AuditConfig(
        prompts=tuple(args.prompt or DEFAULT_PROMPTS),
        settings=settings,
        targets=_targets(ks, args.tv_first, args.tv_joint),
        alpha=args.alpha,
        goal=args.power,
        n=args.n,
        logprob_samples=args.logprob_samples,
        greedy_tokens=args.greedy_tokens,
        tie=args.tie,
        first_seed=args.seed,
        samples=None if args.samples is None else Path(args.samples),
        max_seconds=None if args.max_minutes is None else 60 * args.max_minutes,
        command=_command(args),
    )


def _command(args: argparse.Namespace) -> str:
    """The command line behind a result: every flag given a value other than its default
    (but --json, where the result goes)."""
    words = ["specviz", "audit"]
    for flag, dest, default in args.audit_flags:
        value = getattr(args, dest)
        if value == default or dest == "json":
            continue
        if value is True:
            words.append(flag)
        else:
            values = value if isinstance(value, list) else [value]
            words += [w for v in values for w in (flag, "server" if v is None else str(v))]
    return shlex.join(words)


def _targets(ks: set[int], first: float, joint: float) -> tuple[Target, ...]:
    """The default targets of the chosen k, at the given TVs."""
    if not (0 < first < 1 and 0 < joint < 1):
        raise ValueError("--tv-first and --tv-joint must be in (0, 1)")
    return tuple(replace(t, tv=first if t.k == 1 else joint) for t in DEFAULT_TARGETS if t.k in ks)


def _ks(text: str) -> set[int]:
    try:
        ks = {int(k) for k in text.split(",")}
    except ValueError:
        ks = set()
    if not ks or not ks <= {1, 2, 3, 4}:
        raise ValueError(f"--k takes numbers 1 to 4, comma-separated (got {text!r})")
    return ks


def _source(args: argparse.Namespace) -> Source:
    """The source the flags name (ValueError for flags of another source)."""
    if args.endpoint is not None:
        return _endpoint(args)
    if args.plain_endpoint or args.plain_fields:
        raise ValueError("--plain-endpoint and --plain-fields go with --endpoint")
    if args.hf is not None:
        cross = "cross" if args.hf == "assistant-tokenizer" else None
        pair = load_pair(
            args.target or BUNDLED, args.assistant, pack=False, progress=say, drafter=cross
        )
        return TransformersSource(
            target=pair.target,
            tokenizer=pair.tokenizer,
            mode=args.hf,
            assistant=pair.draft,
            assistant_tokenizer=pair.draft_tokenizer,
            lookup_tokens=args.lookup_tokens,
        )
    uses_draft = drafter_spec(args.drafter).uses_draft_model
    pair = load_pair(
        args.target or BUNDLED,
        (args.assistant or BUNDLED) if uses_draft else None,
        dtype=torch.float32,
        progress=say,
        drafter=args.drafter,
    )
    return DrafterSource(
        target=pair.target,
        tokenizer=pair.tokenizer,
        drafter=args.drafter,
        draft=pair.draft,
        gamma=args.gamma,
    )


def _endpoint(args: argparse.Namespace) -> EndpointSource:
    """The endpoint source: a second server, or the same one with --plain-fields."""
    if (args.plain_endpoint is None) == (args.plain_fields is None):
        raise ValueError(
            "--endpoint needs its plain side: --plain-endpoint URL (a server with speculation "
            "off) or --plain-fields JSON (fields that switch it off per request), one of them"
        )
    model = args.model or next(iter(served_models(args.endpoint)), None)
    if model is None:
        raise ValueError(f"{args.endpoint}/v1/models lists no model: give --model")
    both = _fields(args.fields, "--fields")
    plain_url = args.plain_endpoint or args.endpoint
    return EndpointSource(
        spec=Server(url=args.endpoint, model=model, fields=both),
        plain=Server(url=plain_url, model=model, fields=both | _fields(args.plain_fields, "x")),
        flavour=args.api,
        chat=args.chat,
    )


def _fields(text: str | None, flag: str) -> dict[str, Any]:
    """A JSON object given on the command line ({} for None)."""
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ValueError(f"{flag} takes a JSON object such as '{{\"top_k\": 0}}' (got {text!r})")
    return value


def _render(event: Event) -> None:
    """Progress on stderr."""
    if isinstance(event, Drawn):
        progress_bar(event.done, event.total, event.label)
    elif isinstance(event, Planned):
        per = ", ".join(f"{what}: {s * 1000:.0f} ms" for what, s in event.per_request.items())
        how = "the sides at once" if event.at_once else "one request at a time"
        say(
            f"plan: at most {event.requests} requests, about {event.seconds / 60:.1f} min "
            f"({how}; {per} each)"
        )
    elif isinstance(event, Looked):
        say(f"look {event.look + 1}: N {event.n} per side and prompt: {event.decision}")
