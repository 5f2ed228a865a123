"""`specviz verify --drafter NAME --settings quick` runs for every registered drafter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from specviz.cli import main
from specviz.cli.verify import HEAD_DRAFTERS
from specviz.drafters.names import DRAFTER_NAMES

from ..conftest import VOCAB, PairFactory, save_pair
from ..heads.helpers import save_random_heads


@pytest.fixture(scope="module")
def folders(pair: PairFactory, tokenizer: Any, tmp_path_factory: Any) -> tuple[Path, Path]:
    return save_pair(tmp_path_factory.mktemp("verify-models"), *pair("llama"), tokenizer)


@pytest.fixture(scope="module")
def heads(pair: PairFactory, tmp_path_factory: Any) -> Path:
    """Random eagle3 and medusa heads (3 Medusa heads) for the saved target."""
    folder = tmp_path_factory.mktemp("verify-heads")
    return save_random_heads(pair("llama")[0], folder, seed=3, head_tokens=torch.arange(1, VOCAB))


def _models(folders: tuple[Path, Path]) -> list[str]:
    return ["verify", "--pair", "models", "--target", str(folders[0]), "--draft", str(folders[1])]


@pytest.mark.parametrize("name", DRAFTER_NAMES)
def test_verify_runs_for_every_registered_drafter(
    folders: tuple[Path, Path], heads: Path, capsys: Any, name: str
) -> None:
    argv = [*_models(folders), "--prompt", "ab", "--settings", "quick", "--n", "20"]
    argv += ["--drafter", name, "--exit-layer", "1"]
    if name in HEAD_DRAFTERS:
        argv += ["--heads", str(heads)]
    assert main(argv) == 0, capsys.readouterr()
    assert "0 of" in capsys.readouterr().out


def test_verify_rejects_a_mutant_with_a_registered_drafter(
    folders: tuple[Path, Path], capsys: Any
) -> None:
    """Negative control: the same run with every draft accepted is rejected."""
    argv = [*_models(folders), "--prompt", "ab", "--settings", "quick", "--n", "150"]
    argv += ["--drafter", "early-exit", "--exit-layer", "1", "--mutant", "accept_all"]
    assert main(argv) == 1
    assert "REJECT" in capsys.readouterr().out


def test_verify_rejects_a_mutant_with_a_drafting_head(
    folders: tuple[Path, Path], heads: Path, capsys: Any
) -> None:
    """Negative control for the heads: every draft accepted is rejected."""
    argv = [*_models(folders), "--prompt", "ab", "--settings", "quick", "--n", "50"]
    argv += ["--drafter", "eagle", "--heads", str(heads), "--mutant", "accept_all"]
    assert main(argv) == 1
    assert "REJECT" in capsys.readouterr().out


def test_the_toy_pair_refuses_drafters_it_cannot_run(capsys: Any) -> None:
    assert main(["verify", "--settings", "quick", "--drafter", "early-exit"]) == 2
    assert "use --pair models" in capsys.readouterr().err
    for name in HEAD_DRAFTERS:
        assert main(["verify", "--settings", "quick", "--drafter", name]) == 2
        err = capsys.readouterr().err
        assert "no hidden states for a drafting head" in err and "use --pair models" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--drafter", "eagle", "--mutant", "unprocessed_q"], "which --drafter eagle does not"),
        (["--drafter", "medusa", "--mutant", "cache_one_too_few"], "--drafter medusa does not"),
        (["--drafter", "model"], "--heads gives the weights of the drafting-head drafters"),
        (["--drafter", "tree-medusa", "--tree-depth", "4"], "pass --tree-depth 3 or less"),
    ],
)
def test_verify_refuses_what_a_drafting_head_cannot_take(
    folders: tuple[Path, Path], heads: Path, capsys: Any, extra: list[str], message: str
) -> None:
    argv = [*_models(folders), "--prompt", "ab", "--settings", "quick", "--n", "20"]
    assert main([*argv, "--heads", str(heads), *extra]) == 2
    assert message in capsys.readouterr().err


def test_verify_says_where_head_weights_are_missing(
    folders: tuple[Path, Path], tmp_path: Path, capsys: Any
) -> None:
    argv = [*_models(folders), "--prompt", "ab", "--settings", "quick", "--n", "20"]
    assert main([*argv, "--drafter", "medusa", "--heads", str(tmp_path)]) == 2
    assert f"no head weights at {tmp_path / 'medusa.safetensors'}" in capsys.readouterr().err
    assert main([*argv, "--drafter", "medusa", "--heads", str(tmp_path / "none")]) == 2
    assert "no such folder" in capsys.readouterr().err
