"""Benchmark workloads as JSON lines: id, category, prompt, max_new_tokens, temperature.

The agent workloads (AGENT_WORKLOADS) are sequences of related requests, in the order an agent
sends them: each line also names its task and its step (0, 1, ... within the task), and a
task's steps come one after another, each prompt carrying the conversation so far. Run them in
file order, so that a drafter that remembers earlier requests (the suffix drafters) sees them
as the agent would.

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

from specviz.checks import check_prompt, check_token_ids, vocab_size
from specviz.models.chat import PromptFormat, prompt_ids

WORKLOADS = ("code", "json", "repeat", "prose")
AGENT_WORKLOADS = ("agent-tools", "agent-code", "agent-sql")  # tasks of steps, in order
PROMPT_FORMAT: PromptFormat = "chat"  # the shipped requests' format ("raw": bench --raw)


@dataclass(frozen=True, kw_only=True)
class Request:
    """One prompt of a workload; an agent workload's also names its task and step (from 0)."""

    id: str
    category: str
    prompt: str
    max_new_tokens: int
    temperature: float
    task: str | None = None
    step: int | None = None


def workload_path(name: str) -> Path:
    """The shipped JSONL file of a workload (AGENT_WORKLOADS' too)."""
    if name not in (*WORKLOADS, *AGENT_WORKLOADS):
        raise ValueError(f"workload must be one of {[*WORKLOADS, *AGENT_WORKLOADS]} (got {name!r})")
    return Path(str(resources.files("specviz.workloads").joinpath(f"{name}.jsonl")))


def load_requests(source: str | Path) -> list[Request]:
    """Requests from a shipped workload name or a JSONL path, validated line by line (and the
    order of the tasks' steps, where the lines name them)."""
    shipped = str(source) in (*WORKLOADS, *AGENT_WORKLOADS)
    path = workload_path(str(source)) if shipped else Path(source)
    if not path.is_file():
        raise ValueError(
            f"no workload file at {path}: give a workload name "
            f"{(*WORKLOADS, *AGENT_WORKLOADS)} or a path"
        )
    requests = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            requests.append(Request(**row))
        except (json.JSONDecodeError, TypeError) as err:
            raise ValueError(f"{path}:{number}: not a workload request ({err})") from err
    check_steps(requests, str(path))
    return requests


def check_steps(requests: Sequence[Request], where: str) -> None:
    """ValueError unless the requests that name a task name a step too, and each task's steps
    are 0, 1, 2, ... on consecutive lines."""
    done: set[str] = set()
    current: str | None = None
    expected = 0
    for request in requests:
        if (request.task is None) != (request.step is None):
            raise ValueError(
                f"{where}: request {request.id} needs both a task and a step, or neither"
            )
        if request.task is None:
            if current is not None:
                done.add(current)
            current = None
            continue
        if request.task != current:
            if request.task in done:
                raise ValueError(
                    f"{where}: the steps of task {request.task!r} must come one after another "
                    f"(request {request.id} comes after another task's)"
                )
            if current is not None:
                done.add(current)
            current, expected = request.task, 0
        if request.step != expected:
            raise ValueError(
                f"{where}: request {request.id} is step {request.step} of task "
                f"{request.task!r}, but step {expected} comes next"
            )
        expected += 1


def tasks(requests: Sequence[Request]) -> list[tuple[str, list[Request]]]:
    """An agent workload's requests grouped by task, each task's steps in order, tasks in the
    order they come (requests without a task are left out)."""
    grouped: dict[str, list[Request]] = {}
    for request in requests:
        if request.task is not None:
            grouped.setdefault(request.task, []).append(request)
    return [(name, sorted(steps, key=lambda r: r.step or 0)) for name, steps in grouped.items()]


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
