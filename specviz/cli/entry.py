"""The `specviz` command: one subcommand a module of specviz.cli (generate, verify, bench,
audit, tune, drafters; app is the app's own), bad input answered in one line, exit status 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from specviz.cli import audit as audit_cli
from specviz.cli import bench as bench_cli
from specviz.cli import bench_parser
from specviz.cli import drafters as drafters_cli
from specviz.cli import generate as generate_cli
from specviz.cli import tune as tune_cli
from specviz.cli import verify as verify_cli
from specviz.cli.defaults import generate_defaults
from specviz.models.loading import ModelLoadError
from specviz.runtime import set_threads

DESCRIPTION = (
    "Exact speculative decoding, every step logged: `specviz generate` decodes and reports; "
    "`specviz verify` runs the equivalence suite; `specviz audit` tests another engine's "
    "speculation; `specviz bench` measures; `specviz tune` profiles this machine for a pair; "
    "`specviz drafters` lists the drafters; `specviz app` serves the app."
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for all subcommands."""
    parser = argparse.ArgumentParser(prog="specviz", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    generate_cli.add_parser(sub)
    verify_cli.add_parser(sub)
    audit_cli.add_parser(sub)
    bench_parser.add_parser(sub)
    sub.add_parser(
        "app",
        add_help=False,  # `specviz app --help` is the app's own (specviz.app.main)
        help="the app: watch speculative decoding token by token, and saved bench results "
        "(`specviz app --help`; `python app.py` is the same)",
    )
    tune_cli.add_parser(sub)
    drafters_cli.add_parser(sub)
    return parser


def run_app(argv: Sequence[str]) -> int:
    """`specviz app`: the app (specviz.app.main), its Benchmark results tab showing saved results
    through the benchmark's own view of them."""
    from specviz.app.main import main as app_main  # gradio loads for the app alone

    return app_main(argv, view=bench_cli.load_result_view)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `specviz` command; bad input exits 2 with a one-line message."""
    given = sys.argv[1:] if argv is None else list(argv)
    if given[:1] == ["app"]:
        return run_app(given[1:])
    command = bench_cli.command(given)  # `specviz bench replay ...`: a parser of its own
    try:
        if command is not None:
            return command()
        args = build_parser().parse_args(given)
        defaults = generate_defaults(args) if args.command == "generate" else None
        threads = getattr(args, "threads", None)  # tune sets its own, per measurement
        if threads is None and defaults is not None:
            threads = defaults.threads
        set_threads(threads)  # once, for the whole process (specviz.runtime)
        if args.command == "bench":
            return bench_cli.run_bench(args)
        if args.command == "tune":
            return tune_cli.run_tune(args)
        if args.command == "verify":
            return verify_cli.run_verify(args)
        if args.command == "audit":
            return audit_cli.run(args)
        if args.command == "drafters":
            return drafters_cli.run_drafters(args)
        return generate_cli.run_generate(args, defaults)
    except (ValueError, ModelLoadError) as err:
        print(f"specviz: error: {err}", file=sys.stderr)
        return 2
