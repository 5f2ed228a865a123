"""The app's memory stays flat over 200 requests from 8 sessions (measured in a subprocess, so
other tests do not disturb it), and a server that keeps each request's state is caught."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .test_app import model_dirs

__all__ = ["model_dirs"]  # the session fixture shared with test_app

ROOT = Path(__file__).resolve().parents[2]
FLAT_MB = 300  # the most RSS may grow after the first request


def probe(dirs: tuple[str, str], *flags: str) -> dict[str, float]:
    """tests.app.memory_probe's RSS figures for 200 requests from 8 sessions."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.app.memory_probe", *dirs, *flags],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def test_rss_stays_flat_and_a_leak_of_4_mb_a_request_is_caught(
    model_dirs: tuple[str, str],
) -> None:
    flat = probe(model_dirs)
    assert flat["peak"] - flat["first"] <= FLAT_MB, flat
    leaking = probe(model_dirs, "--leak")  # 199 requests x 4 MB kept: about 800 MB
    assert leaking["last"] - leaking["first"] > FLAT_MB, leaking
