"""The agent workloads: tasks of at least 8 steps, in order, each prompt carrying the last."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest

from specviz.workloads import AGENT_WORKLOADS, Request, load_requests, tasks, workload_path


@pytest.mark.parametrize("name", AGENT_WORKLOADS)
def test_each_agent_workload_has_three_tasks_of_eight_steps_or_more(name: str) -> None:
    requests = load_requests(name)
    grouped = tasks(requests)
    assert len(grouped) >= 3
    assert [r for _, steps in grouped for r in steps] == requests  # file order: task by task
    for task, steps in grouped:
        assert len(steps) >= 8, task
        assert [r.step for r in steps] == list(range(len(steps)))
        assert all(r.category == name and r.task == task for r in steps)
        for before, after in pairwise(steps):  # the conversation so far
            assert after.prompt.startswith(before.prompt.removesuffix("Assistant:"))
            assert len(after.prompt) > len(before.prompt)
    assert len({r.id for r in requests}) == len(requests)


def test_the_tool_calls_and_observations_in_the_prompts_are_json() -> None:
    for request in load_requests("agent-tools"):
        for line in request.prompt.splitlines():
            for prefix in ("Assistant: {", "Observation: "):
                if line.startswith(prefix):
                    json.loads(line[len(prefix) - (prefix.endswith("{")) :])


def test_the_sql_prompts_share_one_schema() -> None:
    requests = load_requests("agent-sql")
    schema = requests[0].prompt.split("User:")[0]
    assert "CREATE TABLE orders" in schema
    assert all(r.prompt.startswith(schema) for r in requests)


def test_the_code_prompts_hold_the_whole_file_after_each_change() -> None:
    steps = [r for r in load_requests("agent-code") if r.task == "inventory"]
    assert steps[-1].prompt.count("class Inventory:") == len(steps)  # the file, then each reply


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _row(task: str | None, step: int | None, n: int) -> dict[str, object]:
    row: dict[str, object] = {"id": f"r{n}", "category": "c", "prompt": "p"}
    row |= {"max_new_tokens": 8, "temperature": 0.0}
    return row | ({} if task is None else {"task": task}) | ({} if step is None else {"step": step})


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("a", 0), ("a", 2)], "is step 2 of task 'a', but step 1 comes next"),
        ([("a", 1)], "is step 1 of task 'a', but step 0 comes next"),
        ([("a", 0), ("b", 0), ("a", 1)], "must come one after another"),
        ([("a", 0), (None, None), ("a", 1)], "must come one after another"),
        ([("a", None)], "needs both a task and a step"),
    ],
)
def test_steps_out_of_order_are_refused(
    tmp_path: Path, rows: list[tuple[str | None, int | None]], message: str
) -> None:
    path = _write(tmp_path / "w.jsonl", [_row(t, s, n) for n, (t, s) in enumerate(rows)])
    with pytest.raises(ValueError, match=message):
        load_requests(path)


def test_plain_workloads_load_as_before(tmp_path: Path) -> None:
    path = _write(tmp_path / "w.jsonl", [_row(None, None, 0), _row("a", 0, 1), _row("a", 1, 2)])
    requests = load_requests(path)
    assert requests[0] == Request(id="r0", category="c", prompt="p", max_new_tokens=8,
                                  temperature=0.0)  # fmt: skip
    assert [(name, [r.id for r in steps]) for name, steps in tasks(requests)] == [
        ("a", ["r1", "r2"])
    ]
    assert workload_path("agent-sql").name == "agent-sql.jsonl"
    with pytest.raises(ValueError, match="workload must be one of"):
        workload_path("agent-chat")
