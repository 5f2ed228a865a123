"""Build the tutorial notebooks: jupytext percent source (.py) → executed .ipynb next to it.

    python tutorials/build.py                 # every tutorials/NN_*.py
    python tutorials/build.py 01 03_building_the_loop.py   # some of them (prefix, stem or file)

Each notebook is converted with jupytext, executed from a clean python3 kernel with nbclient
(cwd tutorials/, HF_HUB_OFFLINE=1), stripped of volatile metadata (timings, versions, random
cell ids) so that diffs stay small, and written to tutorials/NN_slug.ipynb. A failing cell
fails the build and writes nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
PATTERN = "[0-9][0-9]_*.py"
CELL_TIMEOUT_S = 300
KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}


def sources(names: list[str]) -> list[Path]:
    """The notebook sources selected by names (all of them when names is empty)."""
    found = sorted(HERE.glob(PATTERN))
    if not names:
        return found
    chosen = []
    for name in names:
        stem = Path(name).name.removesuffix(".py").removesuffix(".ipynb")
        matches = [p for p in found if p.stem == stem or p.stem.startswith(stem)]
        if not matches:
            raise SystemExit(f"no tutorial source matches {name!r} in {HERE}")
        chosen.extend(m for m in matches if m not in chosen)
    return chosen


def to_notebook(source: Path) -> nbformat.NotebookNode:
    """Read a percent-format source into an (unexecuted) notebook."""
    nb = jupytext.read(source, fmt="py:percent")
    nb.metadata = {"kernelspec": dict(KERNEL), "language_info": {"name": "python"}}
    return nb


def execute(nb: nbformat.NotebookNode, timeout: int = CELL_TIMEOUT_S) -> None:
    """Run every cell in order from a clean kernel started in tutorials/ (raises on errors)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(HERE)}},
        record_timing=False,
    )
    client.execute()


def strip(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop volatile metadata: deterministic cell ids, no timings, minimal notebook metadata."""
    nb.metadata = {"kernelspec": dict(KERNEL), "language_info": {"name": "python"}}
    for index, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{index:03d}"
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                output.get("metadata", {}).pop("execution", None)
    nb.nbformat, nb.nbformat_minor = 4, 5
    return nb


def build(source: Path) -> float:
    """Convert, execute and write one notebook; returns the execution time in seconds."""
    nb = to_notebook(source)
    start = time.perf_counter()
    execute(nb)
    seconds = time.perf_counter() - start
    strip(nb)
    nbformat.validate(nb)
    nbformat.write(nb, source.with_suffix(".ipynb"))
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="sources to build (default: all NN_*.py)")
    args = parser.parse_args(argv)
    for source in sources(args.names):
        print(f"building {source.name} ...", flush=True)
        seconds = build(source)
        print(f"  wrote {source.with_suffix('.ipynb').name} (executed in {seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
