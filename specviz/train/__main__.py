"""Command line for the draft distillation: ``python -m specviz.train STEP [options]``."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from specviz.drafters.names import HEAD_KINDS
from specviz.train.common import setup_logging

# the heads trained on the target's last features by `heads` (EAGLE-3 trains with heads3)
FEATURE_HEADS = tuple(kind for kind in HEAD_KINDS if kind != "eagle3")


def _hours(value: str) -> float:
    """Parse a duration in hours into seconds."""
    return float(value) * 3600.0


def build_parser() -> argparse.ArgumentParser:
    """Argument parser with one sub-command per step."""
    parser = argparse.ArgumentParser(prog="python -m specviz.train", description=__doc__)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("SPECVIZ_THREADS", "2")))
    sub = parser.add_subparsers(dest="step", required=True)
    sub.add_parser("corpus", help="build the offline corpus (stdlib + Python docs)")
    teacher = sub.add_parser("teacher", help="cache the target's top-k log-probs (resumable)")
    teacher.add_argument("--jobs", type=int, default=100_000, help="highest shard index + 1")
    teacher.add_argument("--hours", type=_hours, default=None, help="stop after this long")
    features = sub.add_parser("features", help="cache the target's hidden states (resumable)")
    features.add_argument("--jobs", type=int, default=400, help="highest shard index + 1")
    features.add_argument("--hours", type=_hours, default=None, help="stop after this long")
    features.add_argument(
        "--worker", default="0/1", help="k/n: this process makes jobs i %% n == k"
    )
    regen = sub.add_parser("regen", help="the target answers the prompt pool: ids + features")
    regen.add_argument("--shards", type=int, default=400, help="highest shard index + 1")
    regen.add_argument("--hours", type=_hours, default=None, help="stop after this long")
    regen.add_argument("--batch", type=int, default=16, help="rows decoded together (B)")
    regen.add_argument("--ids", default=None, help="folder of the ids shards (default: work dir)")
    regen.add_argument("--worker", default="0/1", help="k/n: this process makes shards i %% n == k")
    regen.add_argument(
        "--no-rescore",
        action="store_true",
        help="only generate: skip shards whose ids exist without features (heads3 --rescore "
        "rebuilds those it reads)",
    )
    heads = sub.add_parser("heads", help="train the Medusa heads (resumable)")
    heads.add_argument("which", choices=FEATURE_HEADS)
    heads.add_argument("--hours", type=_hours, default=None, help="stop after this long")
    heads.add_argument("--steps", type=int, default=1_000_000, help="stop at this step")
    heads.add_argument("--total-steps", type=int, default=2000, help="length of the lr schedule")
    heads.add_argument("--batch", type=int, default=2048, help="trained positions per step")
    _eagle3_parsers(sub)
    heval = sub.add_parser("heads-eval", help="held-out alpha per draft position, agreement, c")
    heval.add_argument("which", choices=HEAD_KINDS)
    heval.add_argument("--heads", default=None, help="folder of the weights (default: shipped)")
    heval.add_argument("--prompts", type=int, default=16, help="held-out prompts per kind")
    hexport = sub.add_parser("heads-export", help="copy a trained head into specviz/assets/heads")
    hexport.add_argument("which", choices=HEAD_KINDS)
    hexport.add_argument(
        "--from-checkpoint",
        default=None,
        help="eagle3: the heads3 folder with ckpt.pt and curve.jsonl, a copy if it still trains "
        "(default: the work dir's head-eagle3)",
    )
    hexport.add_argument(
        "--ids", default="data/heads/answers", help="eagle3: ids shards the coverage is counted on"
    )
    hexport.add_argument(
        "--out", default=None, help="eagle3: folder written (default: specviz/assets/heads)"
    )
    hexport.add_argument(
        "--vocab",
        type=int,
        default=None,
        help="eagle3: cut the draft vocabulary to the N tokens of it the target writes most "
        "often (the output matrix shrinks; default: as trained)",
    )
    student = sub.add_parser("student", help="distil the draft from the shards (resumable)")
    student.add_argument("--hours", type=_hours, default=None, help="stop after this long")
    student.add_argument("--steps", type=int, default=1_000_000, help="stop at this step")
    student.add_argument("--wait", action="store_true", help="wait for shards still being made")
    student.add_argument("--total-steps", type=int, default=3000, help="length of the lr schedule")
    evaluate = sub.add_parser("evaluate", help="alpha, greedy agreement, speed on held-out prompts")
    evaluate.add_argument("--draft", default=None, help="draft folder (default: latest export)")
    evaluate.add_argument("--prompts", type=int, default=32, help="held-out prompts to use")
    export = sub.add_parser("export", help="write the bf16 draft + tokenizer into a folder")
    export.add_argument("--out", default=None, help="default: specviz/assets/draft")
    return parser


def _eagle3_parsers(sub: Any) -> None:
    """The EAGLE-3 steps: heads-vocab and heads3."""
    ids_help = "folder of the regen ids shards (default: the work dir's regen/ids)"
    vocab = sub.add_parser("heads-vocab", help="EAGLE-3 draft vocabulary: coverage, cost per size")
    vocab.add_argument("--ids", default=None, help=ids_help)
    vocab.add_argument("--sizes", default="4096,8192,16384,32768", help="comma-separated V_d")
    vocab.add_argument("--reps", type=int, default=300, help="timed head steps per size")
    vocab.add_argument(
        "--out", default=None, help="JSON (default: work dir/head-eagle3/vocab.json)"
    )
    h3 = sub.add_parser("heads3", help="train the EAGLE-3 head on the regen shards (resumable)")
    h3.add_argument("--hours", type=_hours, default=None, help="stop after this long")
    h3.add_argument("--steps", type=int, default=1_000_000, help="stop at this step")
    h3.add_argument("--total-steps", type=int, default=20_000, help="length of the lr schedule")
    h3.add_argument("--device", default="cpu", help="cpu or cuda")
    h3.add_argument(
        "--bf16",
        action="store_true",
        help="bf16 autocast of the head's training passes (CUDA; a CPU whose lscpu lists amx_bf16 "
        "or avx512_bf16: a step takes about 0.6 of its float32 time with AMX)",
    )
    h3.add_argument("--vocab", type=int, default=16384, help="draft vocabulary size V_d")
    h3.add_argument("--loss", choices=("kl", "tv", "lk"), default="tv")
    h3.add_argument("--kl-warmup", type=int, default=1000, help="KL steps before tv / lk")
    h3.add_argument("--depth", type=int, default=5, help="training-time-test depth")
    h3.add_argument("--batch", type=int, default=4096, help="padded positions per step")
    h3.add_argument("--lr", type=float, default=5e-4)
    h3.add_argument("--prompt-weight", type=float, default=0.1, help="loss weight of prompts")
    h3.add_argument("--eval-every", type=int, default=500, help="steps between held-out evals")
    h3.add_argument("--out", default=None, help="checkpoint and curve (default: head-eagle3)")
    h3.add_argument(
        "--init", default=None, help="without a checkpoint, start from the head exported here"
    )
    _shard_args(h3, ids_help, "train at once on a machine without the features: rebuild each "
                "shard's from its ids when training first reads it (regen --no-rescore then only "
                "generates)")  # fmt: skip
    ahead = sub.add_parser(
        "rescore-ahead",
        help="beside heads3 --rescore, on another core: rebuild the features of the shards it "
        "reads next, in its order (read from its checkpoint)",
    )
    ahead.add_argument("--batch", type=int, default=4096, help="heads3's --batch (sets its order)")
    ahead.add_argument("--out", default=None, help="heads3's --out (default: head-eagle3)")
    ahead.add_argument("--groups", type=int, default=64, help="groups of 8 shards looked ahead")
    ahead.add_argument("--hours", type=_hours, default=None, help="stop after this long")
    ahead.add_argument("--ids", default=None, help=ids_help)
    ahead.add_argument("--feats", default=None, help="folder of the feats shards (default: regen)")
    rp = sub.add_parser(
        "heads3-replay",
        help="on-policy replay: collect where a heads3 checkpoint's drafts are rejected, then "
        "train on from it with every N-th batch from those positions (--every 0: the control)",
    )
    rp.add_argument("--from", dest="source", default=None, help="heads3 folder (its ckpt.pt)")
    rp.add_argument("--out", required=True, help="the replay run's folder (resumable)")
    rp.add_argument("--steps", type=int, default=100, help="steps past the checkpoint's")
    rp.add_argument("--shards", type=int, default=16, help="training shards collected from")
    rp.add_argument("--every", type=int, default=2, help="every N-th step a replay batch")
    _shard_args(rp, ids_help, "rebuild a shard's missing features from its ids when it is first "
                "read (as heads3 --rescore; needed to go on from a checkpoint that trained that "
                "way)")  # fmt: skip
    score = sub.add_parser(
        "heads3-score",
        help="score exported EAGLE-3 heads on the held-out set the curve reads: a curve row each "
        "(JSON lines, in step order)",
    )
    score.add_argument("heads", nargs="+", help="folders of eagle3.safetensors + eagle3.json")
    _shard_args(score, ids_help, "rebuild the held-out shards' missing features from their ids")
    score.add_argument("--append", default=None, help="also append the rows to this curve.jsonl")
    every = sub.add_parser(
        "heads-all",
        help="the EAGLE-3 pipeline in one command: data, vocabulary, training, evaluation, "
        "export (e.g. --device cuda --minutes 10 on a GPU)",
    )
    every.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    every.add_argument("--minutes", type=float, default=10.0, help="the whole pipeline's budget")
    every.add_argument("--shards", type=int, default=200, help="regen shards 0..N-1 (64 prompts)")
    every.add_argument("--batch", type=int, default=64, help="rows the target answers at once")
    every.add_argument("--steps", type=int, default=4000, help="training steps at most")
    every.add_argument("--positions", type=int, default=8192, help="padded positions a step")
    every.add_argument("--vocab", type=int, default=16384, help="draft vocabulary size V_d")
    every.add_argument("--kl-warmup", type=int, default=300, help="KL steps before the TV loss")
    every.add_argument("--eval-every", type=int, default=500, help="steps between held-out evals")
    every.add_argument("--bf16", action="store_true", help="bf16 autocast of the head (CUDA)")
    every.add_argument(
        "--ids",
        default="data/heads/answers",
        help="ids folder, read and written (default: the answers shipped in the repository)",
    )
    every.add_argument("--out", default=None, help="default: work dir/heads-all")


def _shard_args(parser: argparse.ArgumentParser, ids_help: str, rescore_help: str) -> None:
    """--ids, --feats and --rescore: where a step reads the regen shards, and how it rebuilds
    their missing features."""
    parser.add_argument("--ids", default=None, help=ids_help)
    parser.add_argument("--feats", default=None, help="folder of the feats shards (default: regen)")
    parser.add_argument("--rescore", action="store_true", help=rescore_help)


def _run_eagle3(args: argparse.Namespace) -> None:
    """Run heads-vocab or heads3."""
    from specviz.train.common import work_dir
    from specviz.train.regen import regen_dir

    ids = Path(args.ids) if args.ids else regen_dir() / "ids"
    if args.step == "heads-vocab":
        from specviz.train.vocab import run_heads_vocab

        out = Path(args.out) if args.out else work_dir() / "head-eagle3" / "vocab.json"
        sizes = tuple(int(x) for x in args.sizes.split(","))
        run_heads_vocab(ids, out, sizes, args.reps, args.threads)
        return
    from specviz.heads.weights import RANKING
    from specviz.train.common import load_target
    from specviz.train.heads3 import Heads3Config, run_heads3
    from specviz.train.vocab import ranking

    cfg = Heads3Config(
        vocab=args.vocab, depth=args.depth, loss=args.loss, kl_warmup=args.kl_warmup,
        lr=args.lr, total_steps=args.total_steps, batch_positions=args.batch,
        prompt_weight=args.prompt_weight, eval_every=args.eval_every, device=args.device,
        bf16=args.bf16,
    )  # fmt: skip
    feats = Path(args.feats) if args.feats else regen_dir()
    out = Path(args.out) if args.out else work_dir() / "head-eagle3"
    target, tokenizer = load_target(args.threads)
    stream = cfg.stream(feats, ids, _rescore(args, target, tokenizer, ids, feats))
    init = Path(args.init) if args.init else None
    try:
        run_heads3(cfg, target, stream, out, args.steps, args.hours, ranking(RANKING), init=init)
    except ValueError as err:
        raise SystemExit(f"heads3: {err}") from None


def _rescore(
    args: argparse.Namespace, target: Any, tokenizer: Any, ids: Path, feats: Path
) -> Callable[[int], None] | None:
    """With --rescore, what rebuilds a shard's missing features from its ids (else None)."""
    from specviz.train.regen import rescorer

    return rescorer(target, int(tokenizer.eos_token_id), ids, feats) if args.rescore else None


def _run_score(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run heads3-score: each exported head's curve row on the held-out set, in step order."""
    from specviz.train.common import load_target
    from specviz.train.heads3 import Heads3Config
    from specviz.train.heldout import score_exported
    from specviz.train.regen import regen_dir

    ids = Path(args.ids) if args.ids else regen_dir() / "ids"
    feats = Path(args.feats) if args.feats else regen_dir()
    missing = [h for h in args.heads if not (Path(h) / "eagle3.json").is_file()]
    if missing:
        raise SystemExit(f"heads3-score: no eagle3.json in {', '.join(missing)}: give folders "
                         "that `heads-export eagle3 --out FOLDER` wrote")  # fmt: skip
    target, tokenizer = load_target(args.threads)
    stream = Heads3Config().stream(feats, ids, _rescore(args, target, tokenizer, ids, feats))
    try:
        rows = score_exported([Path(h) for h in args.heads], target, stream)
    except ValueError as err:
        raise SystemExit(f"heads3-score: {err}") from None
    rows.sort(key=lambda r: int(r["step"]))
    if args.append:
        with Path(args.append).open("a", encoding="utf-8") as handle:
            handle.writelines(json.dumps(r) + "\n" for r in rows)
    return rows


def _run_replay(args: argparse.Namespace) -> dict[str, Any]:
    """Run heads3-replay: copy the checkpoint, collect (once), train the steps with replay."""
    from specviz.train.common import load_target, work_dir
    from specviz.train.regen import regen_dir
    from specviz.train.replay import ReplayConfig, run_replay

    source = Path(args.source) if args.source else work_dir() / "head-eagle3"
    ids = Path(args.ids) if args.ids else regen_dir() / "ids"
    feats = Path(args.feats) if args.feats else regen_dir()
    cfg = ReplayConfig(shards=args.shards, every=args.every)
    if not (source / "ckpt.pt").is_file():
        raise SystemExit(f"heads3-replay: no checkpoint {source / 'ckpt.pt'}: train heads3 first")
    target, tokenizer = load_target(args.threads)
    rescore = _rescore(args, target, tokenizer, ids, feats)
    try:
        return run_replay(cfg, target, source, Path(args.out), ids, feats, args.steps, rescore)
    except ValueError as err:
        raise SystemExit(f"heads3-replay: {err}") from None


def _run_heads_all(args: argparse.Namespace) -> dict[str, Any]:
    """Run the whole EAGLE-3 pipeline on --device."""
    from specviz.heads.weights import RANKING
    from specviz.models.loading import check_device
    from specviz.train.common import load_target, work_dir
    from specviz.train.heads3 import Heads3Config
    from specviz.train.heads_all import HeadsAllConfig, run_heads_all
    from specviz.train.regen import RegenConfig
    from specviz.train.vocab import ranking

    cfg = HeadsAllConfig(
        shards=args.shards, steps=args.steps, minutes=args.minutes,
        regen=RegenConfig(batch=args.batch),
        heads3=Heads3Config(
            vocab=args.vocab, kl_warmup=args.kl_warmup, total_steps=args.steps,
            warmup=min(100, args.steps // 10), batch_positions=args.positions,
            eval_every=args.eval_every, device=args.device, bf16=args.bf16,
        ),
    )  # fmt: skip
    check_device(args.device)
    target, tokenizer = load_target(args.threads)
    out = Path(args.out) if args.out else work_dir() / "heads-all"
    return run_heads_all(
        cfg, target.to(args.device), tokenizer, Path(args.ids), out, fill=ranking(RANKING)
    )


def _run_heads_export(args: argparse.Namespace) -> dict[str, Any]:
    """Export a head into the package: eagle3 from a heads3 checkpoint, the others as trained."""
    if args.which != "eagle3":
        if args.from_checkpoint is not None or args.out is not None or args.vocab is not None:
            raise SystemExit(
                "--from-checkpoint, --out and --vocab apply to heads-export eagle3 (heads3)"
            )
        from specviz.train.heads_export import run_heads_export

        return run_heads_export(args.which)
    from specviz.heads.lookup import ASSETS
    from specviz.train.common import work_dir
    from specviz.train.heads3_export import run_heads3_export

    folder = Path(args.from_checkpoint) if args.from_checkpoint else work_dir() / "head-eagle3"
    if args.vocab is not None and args.vocab < 1:
        raise SystemExit(f"heads-export eagle3: --vocab must be >= 1 (got {args.vocab})")
    try:
        out = Path(args.out) if args.out else ASSETS
        return run_heads3_export(folder, Path(args.ids), args.threads, out, args.vocab)
    except ValueError as err:
        raise SystemExit(f"heads-export eagle3: {err}") from None


def main(argv: Sequence[str] | None = None) -> None:
    """Run one step."""
    args = build_parser().parse_args(argv)
    setup_logging(args.step)
    if args.step == "corpus":
        from specviz.train.corpus import build_corpus

        print(build_corpus())
    elif args.step == "teacher":
        from specviz.train.teacher import TeacherConfig, run_teacher

        run_teacher(TeacherConfig(), args.jobs, args.hours, args.threads)
    elif args.step == "features":
        from specviz.train.features import FeatureConfig, run_features

        k, n = (int(x) for x in args.worker.split("/"))
        run_features(FeatureConfig(), range(k, args.jobs, n), args.hours, args.threads)
    elif args.step == "regen":
        from specviz.train.regen import RegenConfig, regen_dir, run_regen

        k, n = (int(x) for x in args.worker.split("/"))
        ids_dir = Path(args.ids) if args.ids else regen_dir() / "ids"
        regen_cfg = RegenConfig(batch=args.batch)
        run_regen(regen_cfg, range(k, args.shards, n), ids_dir, args.hours, args.threads,
                  rescore=not args.no_rescore)  # fmt: skip
    elif args.step == "heads":
        from specviz.train.heads import HeadConfig, run_heads

        cfg = HeadConfig(which=args.which, total_steps=args.total_steps, batch_positions=args.batch)
        print(run_heads(cfg, args.steps, args.hours, args.threads))
    elif args.step in ("heads-vocab", "heads3"):
        _run_eagle3(args)
    elif args.step == "rescore-ahead":
        from specviz.train.ahead import run_rescore_ahead
        from specviz.train.common import work_dir
        from specviz.train.regen import regen_dir

        print(run_rescore_ahead(
            ids=Path(args.ids) if args.ids else regen_dir() / "ids",
            feats=Path(args.feats) if args.feats else regen_dir(),
            run_dir=Path(args.out) if args.out else work_dir() / "head-eagle3",
            batch_positions=args.batch, groups=args.groups, seconds=args.hours,
            threads=args.threads,
        ))  # fmt: skip
    elif args.step == "heads3-replay":
        print(_run_replay(args))
    elif args.step == "heads-all":
        print(_run_heads_all(args))
    elif args.step == "heads3-score":
        print("\n".join(json.dumps(r) for r in _run_score(args)))
    elif args.step == "heads-eval":
        from specviz.train.heads_eval import run_heads_eval

        print(run_heads_eval(args.which, args.heads, args.prompts, args.threads))
    elif args.step == "heads-export":
        print(_run_heads_export(args))
    elif args.step == "student":
        from specviz.train.student import StudentConfig, run_student

        run_student(
            StudentConfig(total_steps=args.total_steps),
            args.steps,
            args.hours,
            args.threads,
            args.wait,
        )
    elif args.step == "evaluate":
        from specviz.train.evaluate import run_evaluate

        print(run_evaluate(args.draft, args.prompts, args.threads))
    elif args.step == "export":
        from specviz.train.export import run_export

        print(run_export(args.out))


if __name__ == "__main__":
    main()
