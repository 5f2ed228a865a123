"""Benchmark workloads as JSON lines: id, category, prompt, max_new_tokens, temperature.

The shipped prompts are meant for PROMPT_FORMAT, chat: `specviz bench` sends each as one user
turn through the target tokenizer's chat template, so that an instruct target (the bundled one)
answers it; with `--raw` it goes as plain text the model continues, which is what results of
schema 3 and older used. A result's meta.prompt_format records which.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from specviz.core.checks import check_prompt, check_token_ids, vocab_size
from specviz.models.chat import PromptFormat, prompt_ids

WORKLOADS = ("code", "json", "repeat", "prose")
PROMPT_FORMAT: PromptFormat = "chat"  # the shipped requests' format ("raw": bench --raw)


@dataclass(frozen=True, kw_only=True)
class Request:
    """One prompt of a workload."""

    id: str
    category: str
    prompt: str
    max_new_tokens: int
    temperature: float


def workload_path(name: str) -> Path:
    """The shipped JSONL file of a workload."""
    if name not in WORKLOADS:
        raise ValueError(f"workload must be one of {list(WORKLOADS)} (got {name!r})")
    return Path(str(resources.files("specviz.bench").joinpath("workloads", f"{name}.jsonl")))


def load_requests(source: str | Path) -> list[Request]:
    """Requests from a shipped workload name or a JSONL path, validated line by line."""
    path = workload_path(str(source)) if str(source) in WORKLOADS else Path(source)
    if not path.is_file():
        raise ValueError(f"no workload file at {path}: give a workload name {WORKLOADS} or a path")
    requests = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            requests.append(Request(**row))
        except (json.JSONDecodeError, TypeError) as err:
            raise ValueError(f"{path}:{number}: not a workload request ({err})") from err
    return requests


def checked_prompt_ids(
    tokenizer: Any, request: Request, new_tokens: int, models: Sequence[Any], *, raw: bool
) -> list[int]:
    """The request's prompt ids, checked against every model (the first sets the vocabulary);
    ValueError naming the request when it does not fit one of them."""
    ids = prompt_ids(tokenizer, request.prompt, raw=raw)
    try:
        check_prompt(ids, new_tokens, *models)
        check_token_ids(ids, vocab_size(models[0]))
    except ValueError as err:
        raise ValueError(f"request {request.id}: {err}") from None
    return ids
