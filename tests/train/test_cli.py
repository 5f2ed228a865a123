"""`python -m specviz.train ROOM STEP`: each room's steps parse, and bad input exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from specviz.train.__main__ import ROOMS, build_parser, main
from specviz.train.data import cli as data_cli
from specviz.train.draft import cli as draft_cli
from specviz.train.heads import cli as heads_cli


def test_the_rooms_are_the_three_pipelines() -> None:
    assert {"data": data_cli, "draft": draft_cli, "heads": heads_cli} == ROOMS


def test_each_room_parses_its_steps() -> None:
    parser = build_parser()
    args = parser.parse_args(["data", "regen", "--shards", "3", "--worker", "1/2", "--no-rescore"])
    assert (args.room, args.step, args.shards, args.no_rescore) == ("data", "regen", 3, True)
    assert data_cli.worker(args.worker) == (1, 2)
    args = parser.parse_args(["--threads", "1", "draft", "student", "--total-steps", "9", "--wait"])
    assert (args.threads, args.room, args.step, args.total_steps, args.wait) == (
        1, "draft", "student", 9, True
    )  # fmt: skip
    args = parser.parse_args(["heads", "medusa", "--batch", "64", "--hours", "0.5"])
    assert (args.room, args.step, args.batch, args.hours) == ("heads", "medusa", 64, 1800.0)
    args = parser.parse_args(["heads", "export", "eagle3", "--vocab", "4096"])
    assert (args.step, args.which, args.vocab) == ("export", "eagle3", 4096)


@pytest.mark.parametrize(
    "argv", [["heads3"], ["data", "heads"], ["heads", "export", "eagle"], ["draft"]]
)
def test_a_step_that_is_not_there_exits_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2


def test_eagle3_flags_on_a_medusa_export_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECVIZ_TRAIN_DIR", str(tmp_path))  # the command's logs
    with pytest.raises(SystemExit, match="apply to heads export eagle3"):
        main(["heads", "export", "medusa", "--from-checkpoint", str(tmp_path)])
