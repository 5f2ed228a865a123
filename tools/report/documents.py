"""The marked tables of README.md and benchmarks/RESULTS.md, MEMORY.md, HEADS.md, AUDIT.md and
the guides that show saved results (docs/exactness.md, docs/app.md).

Each table sits in those files between `<!-- table: NAME -->` and `<!-- /table -->`, and is what
`render_table(NAME, saved)` (tools.report.tables) returns for the JSON files in
benchmarks/results/: no figure is typed in by hand. `python -m tools.report`, run from the
repository root, rewrites every marked table in place after a new run and draws the memory
study's figure and the head's learning curve (`--check` only reports the stale tables, exit
status 1); tests/test_docs.py checks them.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from tools.report.curve import curve_figure
from tools.report.saved import RESULTS_DIR, ROOT, Saved
from tools.report.sections import memory_figure
from tools.report.tables import render_table

DOCUMENTS = (ROOT / "README.md", ROOT / "benchmarks" / "RESULTS.md")
MEMORY_REPORT = ROOT / "benchmarks" / "MEMORY.md"  # the memory study's page (its own tables)
HEADS_REPORT = ROOT / "benchmarks" / "HEADS.md"  # the EAGLE-3 head's learning curve
AUDIT_REPORT = ROOT / "benchmarks" / "AUDIT.md"  # other engines' audits
GUIDES = (ROOT / "docs" / "exactness.md", ROOT / "docs" / "app.md")  # the audit's, the load's
# A marked table: the opening marker, whole lines that are not markers, the closing marker.
BLOCK = re.compile(
    r"(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>(?:(?!<!-- ).*\n)*?)(<!-- /table -->)"
)


def marked_tables(text: str) -> list[tuple[str, str]]:
    """(name, body) of every marked table in a document."""
    return [(m["name"], m["body"].removesuffix("\n")) for m in BLOCK.finditer(text)]


def refreshed(text: str, saved: Saved) -> str:
    """The document with every marked table re-rendered from the saved parts."""
    return BLOCK.sub(lambda m: m[1] + render_table(m["name"], saved) + "\n" + m[4], text)


def main(argv: list[str] | None = None) -> int:
    """Re-render the marked tables of README.md and benchmarks/RESULTS.md, MEMORY.md, HEADS.md,
    AUDIT.md and the guides (or of the given files), and draw the memory figure and the learning
    curve; the exit status is 1 for stale tables under --check, else 0."""
    parser = argparse.ArgumentParser(prog="python -m tools.report", description=__doc__)
    parser.add_argument(
        "files",
        nargs="*",
        type=Path,
        default=[*DOCUMENTS, MEMORY_REPORT, HEADS_REPORT, AUDIT_REPORT, *GUIDES],
    )
    parser.add_argument("--check", action="store_true", help="report stale tables, change nothing")
    parser.add_argument(
        "--results",
        type=Path,
        default=RESULTS_DIR,
        metavar="DIR",
        help="the folder of saved results (default: this repository's benchmarks/results)",
    )
    args = parser.parse_args(argv)
    if not (args.results / "tables.md").is_file():
        parser.error(f"--results {args.results}: no tables.md there (not a results folder)")
    missing = [str(p) for p in args.files if not p.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    saved = Saved(args.results)
    stale = []
    for path in args.files:
        text = path.read_text(encoding="utf-8")
        new = refreshed(text, saved)
        if new != text:
            stale.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for path in stale:
        print(f"{'stale' if args.check else 'rewrote'}: {path}")
    figures = [] if args.check else [memory_figure(saved), curve_figure(saved)]
    for figure in figures:
        if figure is not None:
            print(f"drew: {figure}")
    return 1 if args.check and stale else 0
