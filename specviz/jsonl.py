"""Events as JSON lines, lossless out and in: one JSON object per event, with its kind.

write_jsonl(result.events, "events.jsonl")
events = list(read_jsonl("events.jsonl"))  # equal to result.events
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, get_args

from specviz.core.events import Event


def _kinds() -> dict[str, type[Any]]:
    """Each event class by its kind."""
    return {cls.kind: cls for cls in get_args(Event)}


def to_json(event: Event) -> str:
    """One event as a JSON object with its kind."""
    return json.dumps({"kind": event.kind, **dataclasses.asdict(event)})


def from_json(line: str) -> Event:
    """Inverse of to_json."""
    data = {name: _tuples(value) for name, value in json.loads(line).items()}
    event: Event = _kinds()[data.pop("kind")](**data)
    return event


def _tuples(value: Any) -> Any:
    """JSON arrays (nested) back to the tuples the events hold."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def write_jsonl(events: Iterable[Event], path: str | Path) -> None:
    """Write events to path, one JSON object per line."""
    with Path(path).open("w", encoding="utf-8") as f:
        f.writelines(to_json(e) + "\n" for e in events)


def read_jsonl(path: str | Path) -> Iterator[Event]:
    """Read events written by write_jsonl."""
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield from_json(line)
