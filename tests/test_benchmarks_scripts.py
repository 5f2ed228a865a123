"""Every script under benchmarks/ runs: each Python script prints its help and runs its cheapest
real mode (a check of what it would write, or a tiny measurement), and each shell script parses,
so that a path or flag that went away fails here rather than hours into a benchmark."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "benchmarks"
PYTHON_SCRIPTS = sorted(SCRIPTS.glob("*.py"))
SHELL_SCRIPTS = sorted(SCRIPTS.glob("*.sh"))
AGENT_WORKLOADS = ("agent-tools", "agent-code", "agent-sql")


def _run(script: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """The script run from the repository root on this checkout's specviz."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, str(SCRIPTS / script), *argv]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_scripts_are_the_known_ones() -> None:
    names = {p.name for p in PYTHON_SCRIPTS}
    assert names == {"agent_workloads.py", "app_load.py", "audit_bench.py", "suffix_memory.py"}


@pytest.mark.parametrize("script", PYTHON_SCRIPTS, ids=lambda p: p.name)
def test_python_script_prints_its_help(script: Path) -> None:
    done = _run(script.name, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_shell_script_parses(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_agent_workloads_regenerate_the_tracked_files() -> None:
    done = _run("agent_workloads.py", "--check")
    assert done.returncode == 0, done.stderr
    shipped = ROOT / "specviz" / "workloads"
    assert all((shipped / f"{name}.jsonl").is_file() for name in AGENT_WORKLOADS)


def test_agent_workloads_check_rejects_a_changed_file(tmp_path: Path) -> None:
    for name in AGENT_WORKLOADS:
        shutil.copy(ROOT / "specviz" / "workloads" / f"{name}.jsonl", tmp_path)
    assert _run("agent_workloads.py", "--check", "--out", str(tmp_path)).returncode == 0
    changed = tmp_path / "agent-sql.jsonl"
    changed.write_text(changed.read_text(encoding="utf-8")[:-2] + "\n", encoding="utf-8")
    done = _run("agent_workloads.py", "--check", "--out", str(tmp_path))
    assert done.returncode == 1 and "agent-sql.jsonl" in done.stderr


def test_agent_workloads_write_what_check_accepts(tmp_path: Path) -> None:
    assert _run("agent_workloads.py", "--out", str(tmp_path)).returncode == 0
    for name in AGENT_WORKLOADS:
        written = (tmp_path / f"{name}.jsonl").read_bytes()
        assert written == (ROOT / "specviz" / "workloads" / f"{name}.jsonl").read_bytes()


def test_audit_bench_parts_parse_as_audit_flags() -> None:
    refused = _run("audit_bench.py", "no-such-part").stderr
    parts = refused.rsplit("parts: ", 1)[-1].strip().split(", ")
    done = _run("audit_bench.py", "--check")
    assert done.returncode == 0, done.stderr
    checked = [line.removeprefix("== ") for line in done.stderr.splitlines() if line[:3] == "== "]
    assert checked == parts and len(parts) > 10


def test_audit_bench_check_fails_on_a_flag_audit_does_not_take(tmp_path: Path) -> None:
    """Negative control: the same script with one flag misspelt fails its --check."""
    source = (SCRIPTS / "audit_bench.py").read_text(encoding="utf-8")
    assert '"--greedy-tokens"' in source
    broken = tmp_path / "audit_bench.py"
    broken.write_text(source.replace('"--greedy-tokens"', '"--greedy-token-count"'), "utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, str(broken), "--check"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 2 and "--greedy-token-count" in done.stderr


def test_audit_bench_refuses_an_unknown_part() -> None:
    done = _run("audit_bench.py", "no-such-part")
    assert done.returncode == 2 and "unknown parts" in done.stderr


def test_suffix_memory_measures_a_tiny_memory() -> None:
    done = _run("suffix_memory.py", "--tokens", "2048", "--rounds", "3")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines if not line.startswith(" ")] == [
        "random",
        "templates",
    ]
    assert sum("speculate (tree)" in line for line in lines) == 2


def test_app_load_names_its_modes_when_given_another() -> None:
    done = _run("app_load.py", "--modes", "shared batches,all at once")
    assert done.returncode == 2
    assert "--modes: no mode 'all at once'; the modes are shared batches, one at a time" in (
        done.stderr
    )
