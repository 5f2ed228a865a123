"""Commands saved before the studies were subcommands are read in their spelling now, and every
saved result's command parses with today's `specviz bench`."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from specviz.cli import build_parser
from specviz.results.commands import respelled
from specviz.results.saved import saved_results
from specviz.results.schema import read_result
from tools.report.saved import RESULTS_DIR

SAVED = saved_results(RESULTS_DIR)


@pytest.mark.parametrize(
    ("old", "now"),  # the words after `specviz bench`
    [
        ("--tree-sweep 1,4,8 --reps 2", "trees --nodes 1,4,8 --reps 2"),
        ("--tree-sweep=1,4 --raw", "trees --nodes 1,4 --raw"),
        ("--tree-sweep --out t.json", "trees --out t.json"),
        ("trees --tree-sweep 1,4", "trees --nodes 1,4"),
        ("--raw --levers --out l.json", "levers --raw --out l.json"),
        ("--levers target@bf16 --reps 1", "levers --levers target@bf16 --reps 1"),
        ("--gammas 2 --batch-sizes 1,2", "batch --gammas 2 --batch-sizes 1,2"),
        ("--draft d --cross", "cross --draft d"),
        ("--cross cross:text", "cross --drafters cross:text"),
        ("--reps 2 --endpoint http://h:1", "endpoint --reps 2 --endpoint http://h:1"),
        ("--baseline-endpoint http://h:2", "endpoint --baseline-endpoint http://h:2"),
    ],
)
def test_a_flag_that_asked_for_a_study_is_read_as_its_subcommand(old: str, now: str) -> None:
    assert respelled(f"specviz bench {old}") == f"specviz bench {now}"


@pytest.mark.parametrize(
    "command",
    [
        "specviz bench --workloads code --gammas 2,4",
        "specviz bench memory --workloads agent-sql --suffix-gamma 16",
        "specviz bench batch --batch-sizes 1,2 --gammas 2",
        "specviz bench levers --levers 'spec@fp32/int8-weight'",
        "specviz generate --prompt 'bench --tree-sweep'",
    ],
)
def test_a_command_spelled_the_new_way_is_left_as_it_is(command: str) -> None:
    """Negative control: nothing to respell, not even its quoting."""
    assert respelled(command) == command


def test_before_the_batch_sweep_batch_sizes_timed_the_plain_step() -> None:
    old = "specviz bench --tree-sweep 1,4 --batch-sizes 1 --reps 2"
    now = "specviz bench trees --nodes 1,4 --step-batch-sizes 1 --reps 2"
    assert respelled(old, batch_sweep=False) == now
    assert respelled("specviz bench --batch-sizes 1,2", batch_sweep=False) == (
        "specviz bench --step-batch-sizes 1,2"
    )


def test_a_saved_tree_sweep_reads_with_its_subcommand() -> None:
    command = read_result(RESULTS_DIR / "tree-sweep.json")["meta"]["command"]
    assert command.startswith("specviz bench trees ") and "--nodes 1,4,8,16,32" in command
    assert "--tree-sweep" not in command and "--step-batch-sizes 1" in command


@pytest.mark.parametrize("path", SAVED, ids=[Path(p).stem for p in SAVED])
def test_every_saved_command_parses_with_todays_bench(path: str) -> None:
    """Each but those naming a retired drafter, which no command runs now."""
    command = read_result(path)["meta"]["command"]
    if "(retired)" in command:
        pytest.skip("it names a retired drafter (specviz.results.names)")
    words = shlex.split(command)
    args = build_parser().parse_args(words[words.index("bench") :])
    assert args.command == "bench"
