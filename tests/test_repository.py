"""The repository holds sources, not products: no tracked file over 25 MB, none that .gitignore
names (what the project generates: reports, checkpoints, caches), no training checkpoint."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_BYTES = 25 * 1024 * 1024
CHECKPOINTS = (".pt", ".ckpt", ".bin")  # a trainer's state; shipped weights are .safetensors


def _git(*args: str) -> list[str]:
    """The lines git prints for args, run at the repository's root."""
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line]


@pytest.fixture(scope="module")
def tracked() -> list[str]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing is tracked")
    return _git("ls-files")


def test_no_tracked_file_is_over_25_mb(tracked: list[str]) -> None:
    sizes = {f: (ROOT / f).stat().st_size for f in tracked if (ROOT / f).is_file()}
    assert not {f: s for f, s in sizes.items() if s > MAX_BYTES}


def test_no_tracked_file_is_one_gitignore_names(tracked: list[str]) -> None:
    """.gitignore lists what the project generates (bench.html, results' HTML, resume
    snapshots, ...): none of it is tracked."""
    assert tracked
    assert _git("ls-files", "--cached", "--ignored", "--exclude-standard") == []


def test_no_training_checkpoint_is_tracked(tracked: list[str]) -> None:
    assert [f for f in tracked if f.endswith(CHECKPOINTS)] == []


def test_the_checks_catch_a_tracked_generated_file(tmp_path: Path) -> None:
    """Negative control: in a scratch repository, a tracked file .gitignore names is listed."""

    def git(*args: str) -> list[str]:
        run = subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True)
        return run.stdout.splitlines()

    git("init", "-q")
    (tmp_path / "bench.html").write_text("<html></html>")
    git("add", "bench.html")
    (tmp_path / ".gitignore").write_text("/bench.html\n")
    assert git("ls-files", "--cached", "--ignored", "--exclude-standard") == ["bench.html"]
