"""`specviz verify --drafter NAME --settings quick` runs for every registered drafter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specviz.cli import main
from specviz.drafters.registry import DRAFTER_NAMES

from ..conftest import PairFactory, save_pair


@pytest.fixture(scope="module")
def folders(pair: PairFactory, tokenizer: Any, tmp_path_factory: Any) -> tuple[Path, Path]:
    return save_pair(tmp_path_factory.mktemp("verify-models"), *pair("llama"), tokenizer)


@pytest.mark.parametrize("name", DRAFTER_NAMES)
def test_verify_runs_for_every_registered_drafter(
    folders: tuple[Path, Path], capsys: Any, name: str
) -> None:
    argv = ["verify", "--pair", "models", "--target", str(folders[0]), "--draft", str(folders[1])]
    argv += ["--prompt", "ab", "--settings", "quick", "--n", "20", "--drafter", name]
    assert main([*argv, "--exit-layer", "1"]) == 0, capsys.readouterr()
    assert "0 of" in capsys.readouterr().out


def test_verify_rejects_a_mutant_with_a_registered_drafter(
    folders: tuple[Path, Path], capsys: Any
) -> None:
    """Negative control: the same run with every draft accepted is rejected."""
    argv = ["verify", "--pair", "models", "--target", str(folders[0]), "--draft", str(folders[1])]
    argv += ["--prompt", "ab", "--settings", "quick", "--n", "150", "--drafter", "early-exit"]
    assert main([*argv, "--exit-layer", "1", "--mutant", "accept_all"]) == 1
    assert "REJECT" in capsys.readouterr().out


def test_the_toy_pair_refuses_drafters_it_cannot_run(capsys: Any) -> None:
    assert main(["verify", "--settings", "quick", "--drafter", "early-exit"]) == 2
    assert "use --pair models" in capsys.readouterr().err
