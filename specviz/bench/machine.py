"""What a bench result records about the machine and the forwards its models ran through."""

from __future__ import annotations

import argparse
import platform
from pathlib import Path
from typing import Any

import torch

from specviz.fast.lean import lean_problem


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (Linux), else platform.processor()."""
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def gpu_meta(device: str) -> dict[str, str]:
    """The GPU's name and the CUDA version torch was built with, on a CUDA device ({} else)."""
    if not device.startswith("cuda"):
        return {}
    return {"gpu": torch.cuda.get_device_name(device), "cuda": str(torch.version.cuda)}


def draft_forward(args: argparse.Namespace, draft: Any) -> str:
    """How the draft model ran: specviz.fast.lean's forward, or transformers' (and why)."""
    if args.no_lean:
        return "transformers (--no-lean)"
    if args.tree_sweep is not None:
        return "transformers (--tree-sweep: the chain drafts as the tree drafters do)"
    problem = lean_problem(draft)
    return "lean (specviz.fast.lean)" if problem is None else f"transformers ({problem})"


def target_forward(args: argparse.Namespace, target: Any) -> str:
    """How the target ran in our loops: transformers' forward, or specviz.fast.lean's."""
    if not args.lean_target:
        return "transformers"
    problem = lean_problem(target, wide=True)
    return "lean (specviz.fast.lean)" if problem is None else f"transformers ({problem})"
