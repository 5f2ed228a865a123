"""``python -m specviz.train data STEP``: the data every pipeline reads.

corpus (the offline corpus), teacher (the target's top-k log-probs, for the draft model),
features (the target's last hidden states, for the Medusa heads), regen (the target's own answers
to the prompt pool and the layers the EAGLE-3 head reads).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from specviz.train.common import hours
from specviz.train.data.corpus import build_corpus
from specviz.train.data.features import FeatureConfig, run_features
from specviz.train.data.regen import RegenConfig, regen_dir, run_regen
from specviz.train.data.teacher import TeacherConfig, run_teacher


def add_parser(rooms: Any) -> None:
    """The `data` room and its steps."""
    room = rooms.add_parser("data", help="the data: corpus, teacher, features, regen")
    sub = room.add_subparsers(dest="step", required=True)
    sub.add_parser("corpus", help="build the offline corpus (stdlib + Python docs)")
    teacher = sub.add_parser("teacher", help="cache the target's top-k log-probs (resumable)")
    teacher.add_argument("--jobs", type=int, default=100_000, help="highest shard index + 1")
    teacher.add_argument("--hours", type=hours, default=None, help="stop after this long")
    features = sub.add_parser("features", help="cache the target's hidden states (resumable)")
    features.add_argument("--jobs", type=int, default=400, help="highest shard index + 1")
    features.add_argument("--hours", type=hours, default=None, help="stop after this long")
    features.add_argument(
        "--worker", default="0/1", help="k/n: this process makes jobs i %% n == k"
    )
    regen = sub.add_parser("regen", help="the target answers the prompt pool: ids + features")
    regen.add_argument("--shards", type=int, default=400, help="highest shard index + 1")
    regen.add_argument("--hours", type=hours, default=None, help="stop after this long")
    regen.add_argument("--batch", type=int, default=16, help="rows decoded together (B)")
    regen.add_argument("--ids", default=None, help="folder of the ids shards (default: work dir)")
    regen.add_argument("--worker", default="0/1", help="k/n: this process makes shards i %% n == k")
    regen.add_argument(
        "--no-rescore",
        action="store_true",
        help="only generate: skip shards whose ids exist without features (heads train "
        "--rescore rebuilds those it reads)",
    )


def worker(value: str) -> tuple[int, int]:
    """k, n of a --worker k/n."""
    k, n = (int(x) for x in value.split("/"))
    return k, n


def run(args: argparse.Namespace) -> None:
    """Run one data step."""
    if args.step == "corpus":
        print(build_corpus())
    elif args.step == "teacher":
        run_teacher(TeacherConfig(), args.jobs, args.hours, args.threads)
    elif args.step == "features":
        k, n = worker(args.worker)
        run_features(FeatureConfig(), range(k, args.jobs, n), args.hours, args.threads)
    elif args.step == "regen":
        k, n = worker(args.worker)
        ids_dir = regen_dir() / "ids" if args.ids is None else Path(args.ids)
        jobs = range(k, args.shards, n)
        rescore = not args.no_rescore
        run_regen(
            RegenConfig(batch=args.batch), jobs, ids_dir, args.hours, args.threads, rescore=rescore
        )
