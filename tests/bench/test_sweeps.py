"""`specviz bench STUDY`: one protocol for every study; the old flags still pick theirs."""

from __future__ import annotations

import pytest

from specviz.bench.sweep import DEFAULT_NODES
from specviz.bench.sweeps import studies
from specviz.bench.sweeps.batch import STEP_BATCH_SIZES
from specviz.cli import build_parser, main
from specviz.cli.bench import command, study_argv, study_of, subcommands
from specviz.quant.levers import DEFAULT_LEVERS


def _args(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(study_argv(["bench", *argv]))


def test_each_study_has_its_own_name_and_section_key() -> None:
    names = [s.name for s in studies()]
    keys = [s.key for s in studies() if s.key is not None]
    assert names == [
        "speedup", "trees", "batch", "levers", "memory", "cross", "endpoint", "heads", "replay"
    ]  # fmt: skip
    assert keys == ["tree_sweep", "batch_sweep", "levers", "memory", "cross", "endpoint"]
    assert [s.name for s in studies() if s.own_flags] == ["replay"]  # a parser of its own
    assert subcommands() == (*names[:-1], "replay", "passes", "identity", "saved", "markdown")


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        ([], "speedup"),
        (["speedup"], "speedup"),
        (["trees"], "trees"),
        (["--tree-sweep"], "trees"),
        (["batch"], "batch"),
        (["--batch-sizes", "1,2"], "batch"),
        (["levers"], "levers"),
        (["--levers"], "levers"),
        (["cross"], "cross"),
        (["--cross"], "cross"),
        (["--endpoint", "http://127.0.0.1:1"], "endpoint"),
        (["endpoint", "--endpoint", "http://127.0.0.1:1"], "endpoint"),
    ],
)
def test_the_subcommand_and_its_old_flag_pick_the_same_study(argv: list[str], name: str) -> None:
    assert study_of(_args(*argv)).name == name


def test_a_subcommand_means_what_its_old_flag_meant_without_a_value() -> None:
    def chosen(name: str):  # type: ignore[no-untyped-def]
        args = _args(name)
        return study_of(args).chosen(args)

    assert chosen("trees").tree_sweep == ",".join(map(str, DEFAULT_NODES))
    assert chosen("batch").batch_sizes == [int(b) for b in STEP_BATCH_SIZES.split(",")]
    assert chosen("levers").levers == DEFAULT_LEVERS
    assert _args("trees", "--tree-sweep", "1,8").tree_sweep == "1,8"


def test_a_subcommand_with_another_studys_flag_is_refused() -> None:
    with pytest.raises(ValueError, match="runs one study"):
        study_of(_args("speedup", "--levers"))
    assert main(["bench", "trees", "--batch-sizes", "1,2"]) == 2
    assert main(["bench", "endpoint"]) == 2


def test_replay_keeps_its_own_flags() -> None:
    assert command(["bench", "replay", "--samples", "2"]) is not None
    assert command(["bench", "trees"]) is None and command(["replay"]) is None
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "replay", "--gammas", "x"])
    assert exit_.value.code == 2
