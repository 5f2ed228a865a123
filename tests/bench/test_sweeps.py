"""`specviz bench STUDY`: one protocol for every study, each a subcommand with its own options;
the flags that once asked for a study are refused with their spelling now."""

from __future__ import annotations

import pytest

from specviz.bench.sweeps import studies
from specviz.bench.sweeps.batch import STEP_BATCH_SIZES
from specviz.bench.sweeps.trees import DEFAULT_NODES
from specviz.cli import build_parser, main
from specviz.cli.bench import command, study_of, subcommands
from specviz.quant.levers import DEFAULT_LEVERS


def _args(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(["bench", *argv])


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
        (["batch"], "batch"),
        (["levers"], "levers"),
        (["memory"], "memory"),
        (["cross"], "cross"),
        (["endpoint", "--endpoint", "http://127.0.0.1:1"], "endpoint"),
        (["heads"], "heads"),
    ],
)
def test_the_subcommand_picks_the_study(argv: list[str], name: str) -> None:
    assert study_of(_args(*argv)).name == name


def test_each_study_has_its_own_options_with_their_defaults() -> None:
    assert _args("trees").nodes == ",".join(map(str, DEFAULT_NODES))
    assert _args("trees", "--nodes", "1,8").nodes == "1,8"
    assert _args("batch").batch_sizes == [int(b) for b in STEP_BATCH_SIZES.split(",")]
    assert _args("levers").levers == DEFAULT_LEVERS
    args = _args("cross")
    assert study_of(args).chosen(args).drafters == "cross,cross:text"


def test_the_shared_options_stand_before_or_after_the_study_name() -> None:
    assert _args("trees").reps == 3  # the default
    assert _args("--reps", "5", "trees").reps == 5
    assert _args("trees", "--reps", "5").reps == 5
    assert _args("--gammas", "2,3", "batch", "--batch-sizes", "1,2").gammas == [2, 3]


TREES = "specviz bench trees --nodes N,..."


@pytest.mark.parametrize(
    ("argv", "flag", "spelling"),
    [
        (["--tree-sweep"], "--tree-sweep", TREES),
        (["--tree-sweep", "1,4"], "--tree-sweep", TREES),
        (["trees", "--tree-sweep", "1,4"], "--tree-sweep", TREES),
        (["--batch-sizes", "1,2"], "--batch-sizes", "specviz bench batch --batch-sizes"),
        (["--levers"], "--levers", "specviz bench levers --levers"),
        (["--cross", "cross:text"], "--cross", "specviz bench cross --drafters DRAFTER,..."),
        (["--endpoint", "http://127.0.0.1:1"], "--endpoint", "specviz bench endpoint --endpoint"),
        (["trees", "--batch-sizes", "1,2"], "--batch-sizes", "specviz bench batch --batch-sizes"),
        (["speedup", "--levers"], "--levers", "specviz bench levers --levers"),
        (["--batch-requests", "4"], "--batch-requests", "specviz bench batch --batch-requests"),
    ],
)
def test_an_old_study_flag_is_refused_with_its_spelling_now(
    argv: list[str], flag: str, spelling: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        _args(*argv)
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"{flag} is now spelled: {spelling}" in error


def test_the_new_spelling_is_not_refused() -> None:
    """Negative control: the option that is refused before the study's name is taken after it."""
    assert _args("batch", "--batch-sizes", "1,2").batch_sizes == [1, 2]
    assert _args("levers", "--levers", "target@bf16").levers == "target@bf16"


def test_a_study_without_what_it_needs_is_refused() -> None:
    assert main(["bench", "endpoint"]) == 2


def test_replay_keeps_its_own_flags() -> None:
    assert command(["bench", "replay", "--samples", "2"]) is not None
    assert command(["bench", "trees"]) is None and command(["replay"]) is None
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "replay", "--gammas", "x"])
    assert exit_.value.code == 2
