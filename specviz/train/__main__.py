"""Command line of the training pipelines: ``python -m specviz.train ROOM STEP [options]``.

Rooms: data (the data every pipeline reads), draft (the distilled draft model), heads (the
drafting heads); ``python -m specviz.train ROOM --help`` lists a room's steps.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from specviz.train.common import setup_logging
from specviz.train.data import cli as data_cli
from specviz.train.draft import cli as draft_cli
from specviz.train.heads import cli as heads_cli

ROOMS = {"data": data_cli, "draft": draft_cli, "heads": heads_cli}


def build_parser() -> argparse.ArgumentParser:
    """Argument parser with one sub-command per room, and one per step in each room."""
    parser = argparse.ArgumentParser(prog="python -m specviz.train", description=__doc__)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("SPECVIZ_THREADS", "2")))
    rooms = parser.add_subparsers(dest="room", required=True)
    for room in ROOMS.values():
        room.add_parser(rooms)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Run one step."""
    args = build_parser().parse_args(argv)
    setup_logging(f"{args.room}-{args.step}")
    ROOMS[args.room].run(args)


if __name__ == "__main__":
    main()
