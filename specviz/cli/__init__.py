"""The command line, a module per command: generate (with its defaults, prompts, report and
--batch), verify, bench, tune, drafters; entry assembles them into `specviz`."""

from specviz.cli.entry import build_parser, main

__all__ = ["build_parser", "main"]
