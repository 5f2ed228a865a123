"""README.md and benchmarks/RESULTS.md: short, and every table in them rendered from saved JSON."""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from specviz.results.saved import saved_results
from tools.report.documents import (
    AUDIT_REPORT,
    DOCUMENTS,
    GUIDES,
    main,
    marked_tables,
    refreshed,
)
from tools.report.saved import RESULTS_DIR, Saved
from tools.report.tables import TABLES
from tools.report.tables import render_table as render

ROOT = Path(__file__).resolve().parents[1]
SAVED = Saved(RESULTS_DIR)
README, RESULTS = ROOT / "README.md", ROOT / "benchmarks" / "RESULTS.md"
PAGES = [README, RESULTS, *sorted((ROOT / "docs").glob("*.md"))]

# The README's two set-up commands for a fresh machine, exactly as a reader copies them.
SETUP_APP = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && "
    "pip install -e . && python app.py"
)
SETUP_TESTS = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install -e ".[dev]" && '
    "HF_HUB_OFFLINE=1 python -m pytest -n auto"
)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def render_table(name: str) -> str:
    """The named table rendered from the repository's saved results."""
    return render(name, SAVED)


def _without_code(text: str) -> str:
    """The text with fenced code blocks removed."""
    return re.sub(r"^```.*?^```\n", "", text, flags=re.M | re.S)


def test_readme_and_results_are_short() -> None:
    assert len(_text(README).splitlines()) <= 200
    assert len(_text(RESULTS).splitlines()) <= 300


def test_the_headline_table_is_in_both_documents() -> None:
    for path in DOCUMENTS:
        assert "headline" in dict(marked_tables(_text(path))), path.name


@pytest.mark.parametrize("path", [*DOCUMENTS, AUDIT_REPORT, *GUIDES], ids=lambda p: p.name)
def test_each_marked_table_is_what_the_saved_json_renders_to(path: Path) -> None:
    tables = marked_tables(_text(path))
    assert tables, f"{path.name} has no marked table"
    for name, body in tables:
        assert body == render_table(name), f"{path.name}: table {name!r} is stale"
    assert refreshed(_text(path), SAVED) == _text(path)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_every_table_line_sits_between_markers(path: Path) -> None:
    """No table typed in by hand: outside code, every '|' line belongs to a marked table."""
    text = _without_code(_text(path))
    for _, body in marked_tables(text):
        text = text.replace(body, "", 1)
    stray = [line for line in text.splitlines() if line.startswith("|")]
    assert not stray, f"{path.name}: table lines outside markers: {stray[:3]}"


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_every_figure_in_the_prose_is_one_a_rendered_table_shows(path: Path) -> None:
    """A measured-looking number (a decimal, or a number with × or %) in the prose must appear in
    one of the document's rendered tables, so prose cannot drift from the saved results."""
    text = _text(path)
    rendered = "\n".join(render_table(name) for name, _ in marked_tables(text))
    prose = _without_code(text)
    for _, body in marked_tables(prose):
        prose = prose.replace(body, "", 1)
    prose = re.sub(r"`[^`]*`|\]\([^)]*\)|<!--.*?-->|https?://\S+", " ", prose)
    prose = re.sub(r"(?:Python|torch|transformers)\s*(?:≥|>=|==)\s*[\d.]+", " ", prose)
    figures = re.findall(r"\d+(?:\.\d+)?\s?(?:×|%)|\d+\.\d+", prose)
    missing = [f for f in figures if re.sub(r"\s?[×%]$", "", f) not in rendered]
    assert not missing, f"{path.name}: figures in the prose that no table shows: {missing}"


def test_every_saved_result_is_among_the_parts_and_in_tables_md() -> None:
    saved = {Path(p).stem for p in saved_results(RESULTS_DIR)}
    assert set(SAVED.parts_in_order()) == saved
    parts = render_table("parts")
    assert all(f"| {name} |" in parts for name in saved)


def test_each_reproduce_command_names_parts_of_cpu_bench() -> None:
    script = _text(ROOT / "benchmarks" / "cpu_bench.sh")
    default = re.search(r'PARTS="\$\{\*:-([^}]*)\}"', script)
    assert default, "cpu_bench.sh no longer lists its parts"
    known = set(default[1].split())
    command = r"bash benchmarks/cpu_bench\.sh benchmarks/results ([\w -]+)"
    commands = re.findall(command, _text(RESULTS))
    assert commands
    for parts in commands:
        assert set(parts.split()) <= known, parts


def test_the_readme_set_up_commands_are_the_ones_ci_runs() -> None:
    section = _text(README).split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)\n```", section, flags=re.S)
    assert commands == [SETUP_APP, SETUP_TESTS]
    assert (ROOT / "app.py").is_file()
    ci = _text(ROOT / ".ci" / "run")
    line = ci.split("# The README's test command", 1)[1].splitlines()[1]
    venv = "python3 -m venv .venv && . .venv/bin/activate && "
    env = "HF_HUB_OFFLINE=1 "
    assert SETUP_TESTS.removeprefix(venv).replace(env, "") == line  # CI has its own venv
    assert re.search(r"^export [^\n]*\bHF_HUB_OFFLINE=1\b", ci, flags=re.M)
    app, tests = shlex.split(SETUP_APP), shlex.split(SETUP_TESTS)
    assert app[:12] == tests[:12] and app[12:15] == tests[13:16]  # the same install


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_point_at_files_that_exist(page: Path) -> None:
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", _without_code(_text(page)))
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    broken = [t for t in local if not (page.parent / t).exists()]
    assert not broken, f"{page.name}: broken links {broken}"


def test_a_stale_table_is_found_and_rewritten(tmp_path: Path) -> None:
    fresh = (
        "intro\n<!-- table: batch-fit -->\n<!-- /table -->\nkept between\n"
        "<!-- table: batch-fit -->\n| stale |\n<!-- /table -->\nend\n"
    )
    doc = tmp_path / "doc.md"
    doc.write_text(fresh, encoding="utf-8")
    assert main(["--check", str(doc)]) == 1
    assert _text(doc) == fresh  # --check changes nothing
    assert main([str(doc)]) == 0
    text = _text(doc)
    assert "kept between\n" in text and text.endswith("end\n")  # empty blocks swallow nothing
    assert [b for _, b in marked_tables(text)] == [render_table("batch-fit")] * 2
    assert main(["--check", str(doc)]) == 0


def test_every_renderer_gives_a_markdown_table() -> None:
    for name in TABLES:
        lines = render_table(name).splitlines()
        assert len(lines) >= 3 and all(line.startswith("| ") for line in lines[:1]), name
        assert lines[1].startswith("|---"), name
    with pytest.raises(KeyError):
        render_table("no-such-table")


def test_results_dir_holds_the_saved_json() -> None:
    assert RESULTS_DIR == ROOT / "benchmarks" / "results"
    assert saved_results(RESULTS_DIR)


def test_the_report_refuses_a_folder_without_results_and_a_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["--check", "--results", str(tmp_path)])
    assert "no tables.md there" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--check", str(tmp_path / "missing.md")])
    assert "no such file" in capsys.readouterr().err


def test_nothing_in_the_package_finds_the_repository_by_its_own_path() -> None:
    """A path built from a module's own file (its .parent hops or .parents[k]) stays inside the
    installed package: an installed wheel has no repository around it."""
    up = re.compile(r"__file__\)(?:\.resolve\(\))?(?:(?:\.parent\b)+|\.parents\[(\d+)\])")
    escaping = []
    for path in (ROOT / "specviz").rglob("*.py"):
        inside = len(path.relative_to(ROOT).parts) - 1  # hops up that stay in specviz/
        for m in up.finditer(_text(path)):
            hops = int(m[1]) + 1 if m[1] else m[0].count(".parent")
            if hops > inside:
                escaping.append(f"{path.relative_to(ROOT)}: {m[0]}")
    assert not escaping, f"paths that leave the package: {escaping}"


def readme_python() -> str:
    """The README's Python snippet, exactly as a reader copies it."""
    section = _text(README).split("## Use it from Python", 1)[1].split("\n## ", 1)[0]
    snippets = re.findall(r"```python\n(.*?)\n```", section, flags=re.S)
    assert len(snippets) == 1, "the README's Python section should hold one snippet"
    return str(snippets[0])


def test_the_readme_snippet_sets_threads_and_every_call_takes_its_settings() -> None:
    """It runs torch on one thread (specviz.runtime.set_threads), and every generate call gets
    the snippet's own sampling and speculation (or its max_new_tokens), none a default."""
    tree = ast.parse(readme_python())
    calls = {
        node.func.attr: {k.arg for k in node.keywords}
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert "set_threads(1)" in readme_python()
    for name in ("speculative_generate", "speculative_generate_batch"):
        assert {"sampling", "speculation"} <= calls[name], name
    assert {"sampling", "max_new_tokens"} <= calls["autoregressive_generate"]


@pytest.mark.integration
def test_the_readme_snippet_runs_as_written_on_one_thread(tmp_path: Path) -> None:
    """The snippet, run as a reader runs it (a fresh process, in an empty folder), finishes
    without an error on the bundled pair; how long it takes is a benchmark's matter."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", readme_python()]
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "events.jsonl").stat().st_size > 0 and "Prefill" in run.stdout
