"""Prompts drawn from the text a Debian machine already holds, for the target to answer.

The drafting heads learn from the target's own answers; what they answer should look like what
users ask. Besides the templated requests of `specviz.train.data.prompts`, this module reads:

* man pages (``/usr/share/man/man{1,5,8}``, English only): a command's NAME line and the first
  paragraphs of its DESCRIPTION, roff macros stripped;
* Debian package descriptions (``/var/lib/dpkg/status`` and apt's ``*_Packages`` lists,
  plain or lz4-compressed): a package's name and one-line summary;
* GNU info manuals (``/usr/share/info/*.info.gz``): paragraphs of prose;
* the Python standard library's docstrings, through `specviz.train.data.prompts`.

Each source is turned into requests of the kinds the benchmark measures (explain, write code,
answer in JSON, summarise, continue a text). Missing sources are skipped, so the same call
works on a machine without them.
"""

from __future__ import annotations

import gzip
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import torch

MAN_ROOT = Path("/usr/share/man")
INFO_ROOT = Path("/usr/share/info")
DPKG_STATUS = Path("/var/lib/dpkg/status")
APT_LISTS = Path("/var/lib/apt/lists")

MAN_TEMPLATES = (
    "What does the `{name}` command do? {summary}",
    "Explain how to use `{name}` with two examples.",
    "Write a bash script that uses `{name}` ({summary}).",
    "Summarize this manual page in three bullet points:\n\n{text}",
    "I read this in the manual of `{name}`:\n\n{text}\n\nCan you explain it in simple words?",
    "Write a Python function that calls `{name}` with subprocess and returns its output.",
    'Return a JSON object {{"command": ..., "purpose": ..., "example": ...}} for `{name}`.',
    "What are common mistakes when using `{name}`?",
)
PACKAGE_TEMPLATES = (
    "What is the Debian package {name} for? ({summary})",
    "Write a short, friendly description of a tool that is an {summary}.",
    'Describe the package {name} as JSON with the keys "name", "summary" and "use_cases".',
    "Give me three reasons to install {name}: {summary}.",
    "Write a Python snippet that shows how software like {name} ({summary}) might be used.",
    "Compare {name} and {other} in a short paragraph.",
    "Write a one-line apt command to install {name} and explain what it does.",
)
PROSE_TEMPLATES = (
    "Summarize the following text:\n\n{text}",
    "Rewrite this paragraph in plain English:\n\n{text}",
    "Continue this text:\n\n{text}",
    "Write three questions a reader might ask about this passage, with answers:\n\n{text}",
    "Extract the key terms of this passage as a JSON list:\n\n{text}",
)
_ROFF_ESCAPES = re.compile(r"\\[|^]|\\f[BIRPC]|\\f\[[A-Z]*\]|\\[,/&:]|\\s[-+]?\d")
_ROFF_DASH = re.compile(r"\\-|\\\(hy|\\\(en|\\\(em")
_SPACES = re.compile(r"\s+")


def _unroff(line: str) -> str:
    """A roff text line as plain text (fonts, escapes and dashes resolved)."""
    line = _ROFF_DASH.sub("-", line)
    line = _ROFF_ESCAPES.sub("", line)
    return line.replace("\\e", "\\").replace("\\(aq", "'").replace("\\(dq", '"')


def man_page(path: Path) -> tuple[str, str, str] | None:
    """(name, one-line summary, description text) of one gzipped man page, or None."""
    try:
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except (OSError, EOFError):
        return None
    section, name_line, desc = "", "", []
    for raw in lines:
        if raw.startswith(('.\\"', "'\\\"")):
            continue
        if raw.startswith(".SH") or raw.startswith(".Sh"):
            section = raw[3:].strip().strip('"').upper()
            continue
        if raw.startswith(".") and not raw.startswith((".B ", ".I ", ".BR ", ".IR ")):
            if section == "DESCRIPTION" and raw.startswith((".PP", ".P", ".LP", ".Pp")):
                desc.append("\n")
            continue
        text = _unroff(raw[3:] if raw.startswith((".B ", ".I ")) else raw).strip()
        if section == "NAME":
            name_line += " " + text
        elif section == "DESCRIPTION" and text:
            desc.append(text + " ")
    if " - " not in name_line:
        return None
    name, summary = (part.strip() for part in name_line.split(" - ", 1))
    paragraphs = [_SPACES.sub(" ", p).strip() for p in "".join(desc).split("\n")]
    text = " ".join(p for p in paragraphs if p)[:600]
    return name.split(",")[0].strip(), summary[:160], text


def man_pages(root: Path = MAN_ROOT) -> Iterator[tuple[str, str, str]]:
    """Every readable English man page in sections 1, 5 and 8 under root."""
    for section in ("man1", "man5", "man8"):
        for path in sorted((root / section).glob("*.gz")) if (root / section).is_dir() else []:
            page = man_page(path)
            if page is not None and len(page[2]) >= 80:
                yield page


def _package_text(path: Path) -> str:
    """A Packages or status file's text (lz4-compressed lists through ``lz4cat``)."""
    if path.suffix == ".lz4":
        done = subprocess.run(["lz4cat", str(path)], capture_output=True, check=False)
        return done.stdout.decode("utf-8", errors="replace") if done.returncode == 0 else ""
    return path.read_text(encoding="utf-8", errors="replace")


def debian_packages(status: Path = DPKG_STATUS, lists: Path = APT_LISTS) -> dict[str, str]:
    """{package name: one-line description} from dpkg's status and apt's package lists."""
    paths = [status] if status.is_file() else []
    if lists.is_dir():
        paths += sorted(p for p in lists.iterdir() if p.name.endswith(("_Packages", ".lz4")))
    found: dict[str, str] = {}
    for path in paths:
        name = ""
        for line in _package_text(path).splitlines():
            if line.startswith("Package: "):
                name = line[9:].strip()
            elif line.startswith("Description: ") and name:
                found.setdefault(name, line[13:].strip())
    return found


def info_paragraphs(root: Path = INFO_ROOT, per_manual: int = 200) -> Iterator[str]:
    """Prose paragraphs (200-700 characters) of the GNU info manuals under root."""
    for path in sorted(root.glob("*.info*.gz")) if root.is_dir() else []:
        try:
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except (OSError, EOFError):
            continue
        kept = 0
        for block in text.split("\n\n"):
            flat = _SPACES.sub(" ", block).strip()
            prose = flat.count(". ") >= 2 and not flat.startswith(("*", "File:", "-"))
            if prose and 200 <= len(flat) <= 700 and kept < per_manual:
                kept += 1
                yield flat


def _pick(options: tuple[str, ...], gen: torch.Generator) -> str:
    """One of options, drawn with gen."""
    return options[int(torch.randint(len(options), (1,), generator=gen))]


def source_prompts(gen: torch.Generator, limit_per_source: int = 12_000) -> dict[str, list[str]]:
    """Requests built from each offline source: {source: prompts} (deterministic in gen)."""
    out: dict[str, list[str]] = {"man": [], "debian": [], "info": []}
    for name, summary, text in man_pages():
        if len(out["man"]) >= limit_per_source:
            break
        out["man"].append(_pick(MAN_TEMPLATES, gen).format(name=name, summary=summary, text=text))
    packages = debian_packages()
    names = sorted(packages)
    order = torch.randperm(len(names), generator=gen).tolist()[:limit_per_source]
    for i in order:
        other = names[int(torch.randint(len(names), (1,), generator=gen))]
        template = _pick(PACKAGE_TEMPLATES, gen)
        out["debian"].append(
            template.format(name=names[i], summary=packages[names[i]], other=other)
        )
    for text in info_paragraphs():
        if len(out["info"]) >= limit_per_source:
            break
        out["info"].append(_pick(PROSE_TEMPLATES, gen).format(text=text))
    return out
