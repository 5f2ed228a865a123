"""Step ``data corpus``: an offline corpus of Python stdlib source and Python documentation prose.

Sources and licences: the local CPython standard library (``sysconfig`` "stdlib" path; PSF License
v2) and the reStructuredText sources of the Python documentation from Debian's ``python3.X-doc``
package (``/usr/share/doc/python3.X/html/_sources``; PSF License v2, examples under 0BSD).
Codec tables, test suites, site-packages and files over ``max_bytes`` are skipped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from specviz.train.common import work_dir, write_json_atomic

LOG = logging.getLogger("specviz.train.data.corpus")
SKIP_DIRS = {
    "test",
    "tests",
    "idle_test",
    "site-packages",
    "dist-packages",
    "__pycache__",
    "encodings",
    "lib2to3",
    "turtledemo",
    "ensurepip",
    "pydoc_data",
    "config-3",
}


def corpus_dir() -> Path:
    """Folder holding ``docs.jsonl`` and ``manifest.json``."""
    return work_dir("corpus")


def _skipped(path: Path, root: Path) -> bool:
    """Whether a stdlib path lies in an excluded directory."""
    parts = path.relative_to(root).parts[:-1]
    return any(p in SKIP_DIRS or p.startswith(("test", "config-")) for p in parts)


def stdlib_files(max_bytes: int) -> Iterator[tuple[str, Path]]:
    """Yield (relative name, path) of stdlib ``.py`` files worth learning from."""
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.rglob("*.py")):
        if _skipped(path, root) or path.name.startswith("test_"):
            continue
        if 200 <= path.stat().st_size <= max_bytes:
            yield f"stdlib/{path.relative_to(root)}", path


def doc_files(max_bytes: int) -> Iterator[tuple[str, Path]]:
    """Yield (relative name, path) of Python documentation ``.rst.txt`` sources, if installed."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(f"/usr/share/doc/python{version}/html/_sources")]
    candidates += sorted(Path("/usr/share/doc").glob("python3.*/html/_sources"))
    for root in candidates:
        if root.is_dir():
            for path in sorted(root.rglob("*.txt")):
                if 200 <= path.stat().st_size <= max_bytes and "whatsnew" not in path.parts:
                    yield f"pydoc/{path.relative_to(root)}", path
            return


def build_corpus(max_bytes: int = 150_000) -> dict[str, Any]:
    """Write ``docs.jsonl`` (one {kind, source, text} per line) if missing; return the manifest."""
    out = corpus_dir()
    manifest_path = out / "manifest.json"
    if manifest_path.is_file():
        LOG.info("corpus already built in %s", out)
        manifest: dict[str, Any] = json.loads(manifest_path.read_text(encoding="utf-8"))
        return manifest
    tmp = out / "docs.jsonl.tmp"
    counts = {"code": 0, "prose": 0}
    chars = {"code": 0, "prose": 0}
    with tmp.open("w", encoding="utf-8") as handle:
        for kind, files in (("code", stdlib_files(max_bytes)), ("prose", doc_files(max_bytes))):
            for name, path in files:
                text = path.read_text(encoding="utf-8", errors="replace")
                handle.write(json.dumps({"kind": kind, "source": name, "text": text}) + "\n")
                counts[kind] += 1
                chars[kind] += len(text)
    digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
    tmp.replace(out / "docs.jsonl")
    manifest = {"docs": counts, "chars": chars, "sha256": digest, "python": sys.version.split()[0]}
    write_json_atomic(manifest_path, manifest)
    LOG.info("corpus: %s", manifest)
    return manifest


def load_docs() -> list[dict[str, str]]:
    """All corpus documents (builds the corpus first if needed)."""
    build_corpus()
    lines = (corpus_dir() / "docs.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line]
