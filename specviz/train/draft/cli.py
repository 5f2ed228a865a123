"""``python -m specviz.train draft STEP``: distilling the bundled draft model.

student (distil it from the teacher's shards), evaluate (α, greedy agreement and cost on held-out
prompts), export (the bf16 draft and the target's tokenizer into a folder).
"""

from __future__ import annotations

import argparse
from typing import Any

from specviz.train.common import hours
from specviz.train.draft.evaluate import run_evaluate
from specviz.train.draft.export import run_export
from specviz.train.draft.student import StudentConfig, run_student


def add_parser(rooms: Any) -> None:
    """The `draft` room and its steps."""
    room = rooms.add_parser("draft", help="the draft model: student, evaluate, export")
    sub = room.add_subparsers(dest="step", required=True)
    student = sub.add_parser("student", help="distil the draft from the shards (resumable)")
    student.add_argument("--hours", type=hours, default=None, help="stop after this long")
    student.add_argument("--steps", type=int, default=1_000_000, help="stop at this step")
    student.add_argument("--wait", action="store_true", help="wait for shards still being made")
    student.add_argument("--total-steps", type=int, default=3000, help="length of the lr schedule")
    evaluate = sub.add_parser("evaluate", help="alpha, greedy agreement, speed on held-out prompts")
    evaluate.add_argument("--draft", default=None, help="draft folder (default: latest export)")
    evaluate.add_argument("--prompts", type=int, default=32, help="held-out prompts to use")
    export = sub.add_parser("export", help="write the bf16 draft + tokenizer into a folder")
    export.add_argument("--out", default=None, help="default: specviz/assets/draft")


def run(args: argparse.Namespace) -> None:
    """Run one draft step."""
    if args.step == "student":
        cfg = StudentConfig(total_steps=args.total_steps)
        run_student(cfg, args.steps, args.hours, args.threads, args.wait)
    elif args.step == "evaluate":
        print(run_evaluate(args.draft, args.prompts, args.threads))
    elif args.step == "export":
        print(run_export(args.out))
