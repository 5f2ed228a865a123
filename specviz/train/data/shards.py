"""The regen shards' files: where each lies, its token ids, and the prompts it holds.

A shard ``index`` is an ids file ``ids_XXXXX.json.gz`` (gzipped JSON: the token ids of each
sequence, where its answer starts, its source) and a features file ``feats_XXXXX.pt`` (what
the EAGLE-3 head reads, rebuilt from the ids where missing).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

Record = dict[str, Any]


def _sha256(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_ids(path: Path) -> Record:
    """A shard's ids file: {"tokens": [[int]], "start": [int], "source": [str], ...}."""
    data: Record = json.loads(gzip.decompress(path.read_bytes()))
    return data


def _write_ids(path: Path, data: Record) -> None:
    """Write an ids file (gzipped JSON) atomically, byte-identical for the same data."""
    tmp = path.with_suffix(".tmp")
    raw = json.dumps(data, separators=(",", ":")).encode()
    tmp.write_bytes(gzip.compress(raw, mtime=0))
    tmp.replace(path)


def shard_index(path: Path) -> int:
    """The index of a shard file named ``<kind>_XXXXX.<ext>``."""
    return int(path.name.split(".")[0].split("_")[1])


def ids_path(ids_dir: Path, index: int) -> Path:
    """Shard index's token ids in ids_dir."""
    return ids_dir / f"ids_{index:05d}.json.gz"


def feats_path(feats_dir: Path, index: int) -> Path:
    """Shard index's features in feats_dir."""
    return feats_dir / f"feats_{index:05d}.pt"


def prompt_key(tokens: list[int], start: int) -> tuple[int, ...]:
    """A sequence's prompt: its token ids before the answer starts."""
    return tuple(tokens[:start])


def shard_prompts(ids_dir: Path, indices: list[int]) -> set[tuple[int, ...]]:
    """The prompts of the shards `indices` in ids_dir (their ids files only, no features)."""
    keys: set[tuple[int, ...]] = set()
    for index in indices:
        ids = read_ids(ids_path(ids_dir, index))
        keys |= {prompt_key(t, s) for t, s in zip(ids["tokens"], ids["start"], strict=True)}
    return keys
