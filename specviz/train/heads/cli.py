"""``python -m specviz.train heads STEP``: the drafting heads on the target's own features.

The EAGLE-3 head: vocab (its draft vocabulary), train (on the regen shards), ahead (rebuild the
shards' features ahead of a training run), replay (on-policy replay), score (exported heads on
the held-out set), all (the whole pipeline in one command). The Medusa heads: medusa (train
them on the features shards). Both: eval (held-out α, agreement, cost), export (into
specviz/assets/heads).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specviz.heads.lookup import ASSETS
from specviz.heads.weights import KINDS as HEAD_KINDS
from specviz.heads.weights import RANKING
from specviz.models.loading import check_device
from specviz.train.common import hours, load_target, work_dir
from specviz.train.data.regen import RegenConfig, regen_dir, rescorer
from specviz.train.heads.ahead import run_rescore_ahead
from specviz.train.heads.eagle import EagleConfig, run_eagle
from specviz.train.heads.evaluate import run_heads_eval
from specviz.train.heads.export import run_eagle_export, run_medusa_export
from specviz.train.heads.medusa import MedusaConfig, run_medusa
from specviz.train.heads.pipeline import PipelineConfig, run_pipeline
from specviz.train.heads.replay import ReplayConfig, run_replay
from specviz.train.heads.score import score_exported
from specviz.train.heads.vocab import ranking, run_heads_vocab

IDS_HELP = "folder of the regen ids shards (default: the work dir's regen/ids)"


def add_parser(rooms: Any) -> None:
    """The `heads` room and its steps."""
    room = rooms.add_parser("heads", help="the drafting heads: EAGLE-3 and Medusa")
    sub = room.add_subparsers(dest="step", required=True)
    _medusa_parser(sub)
    _vocab_parser(sub)
    _train_parser(sub)
    _ahead_parser(sub)
    _replay_parser(sub)
    _score_parser(sub)
    _all_parser(sub)
    _eval_parser(sub)
    _export_parser(sub)


def _medusa_parser(sub: Any) -> None:
    medusa = sub.add_parser("medusa", help="train the Medusa heads on the features (resumable)")
    medusa.add_argument("--hours", type=hours, default=None, help="stop after this long")
    medusa.add_argument("--steps", type=int, default=1_000_000, help="stop at this step")
    medusa.add_argument("--total-steps", type=int, default=2000, help="length of the lr schedule")
    medusa.add_argument("--batch", type=int, default=2048, help="trained positions per step")


def _vocab_parser(sub: Any) -> None:
    vocab = sub.add_parser("vocab", help="EAGLE-3 draft vocabulary: coverage, cost per size")
    vocab.add_argument("--ids", default=None, help=IDS_HELP)
    vocab.add_argument("--sizes", default="4096,8192,16384,32768", help="comma-separated V_d")
    vocab.add_argument("--reps", type=int, default=300, help="timed head steps per size")
    vocab.add_argument(
        "--out", default=None, help="JSON (default: work dir/head-eagle3/vocab.json)"
    )


def _train_parser(sub: Any) -> None:
    train = sub.add_parser("train", help="train the EAGLE-3 head on the regen shards (resumable)")
    train.add_argument("--hours", type=hours, default=None, help="stop after this long")
    train.add_argument("--steps", type=int, default=1_000_000, help="stop at this step")
    train.add_argument("--total-steps", type=int, default=20_000, help="length of the lr schedule")
    train.add_argument("--device", default="cpu", help="cpu or cuda")
    train.add_argument(
        "--bf16",
        action="store_true",
        help="bf16 autocast of the head's training passes (CUDA; a CPU whose lscpu lists amx_bf16 "
        "or avx512_bf16: a step takes about 0.6 of its float32 time with AMX)",
    )
    train.add_argument("--vocab", type=int, default=16384, help="draft vocabulary size V_d")
    train.add_argument("--loss", choices=("kl", "tv", "lk"), default="tv")
    train.add_argument("--kl-warmup", type=int, default=1000, help="KL steps before tv / lk")
    train.add_argument("--depth", type=int, default=5, help="training-time-test depth")
    train.add_argument("--batch", type=int, default=4096, help="padded positions per step")
    train.add_argument("--lr", type=float, default=5e-4)
    train.add_argument("--prompt-weight", type=float, default=0.1, help="loss weight of prompts")
    train.add_argument("--eval-every", type=int, default=500, help="steps between held-out evals")
    train.add_argument("--out", default=None, help="checkpoint and curve (default: head-eagle3)")
    train.add_argument(
        "--init", default=None, help="without a checkpoint, start from the head exported here"
    )
    _shard_args(
        train,
        "train at once on a machine without the features: rebuild each shard's "
        "from its ids when training first reads it (data regen --no-rescore then only "
        "generates)",
    )


def _ahead_parser(sub: Any) -> None:
    ahead = sub.add_parser(
        "ahead",
        help="beside heads train --rescore, on another core: rebuild the features of the shards "
        "it reads next, in its order (read from its checkpoint)",
    )
    ahead.add_argument("--batch", type=int, default=4096, help="heads train's --batch (its order)")
    ahead.add_argument("--out", default=None, help="heads train's --out (default: head-eagle3)")
    ahead.add_argument("--groups", type=int, default=64, help="groups of 8 shards looked ahead")
    ahead.add_argument("--hours", type=hours, default=None, help="stop after this long")
    ahead.add_argument("--ids", default=None, help=IDS_HELP)
    ahead.add_argument("--feats", default=None, help="folder of the feats shards (default: regen)")


def _replay_parser(sub: Any) -> None:
    rp = sub.add_parser(
        "replay",
        help="on-policy replay: collect where a heads train checkpoint's drafts are rejected, "
        "then train on from it with every N-th batch from those positions (--every 0: the "
        "control)",
    )
    rp.add_argument("--from", dest="source", default=None, help="heads train folder (ckpt.pt)")
    rp.add_argument("--out", required=True, help="the replay run's folder (resumable)")
    rp.add_argument("--steps", type=int, default=100, help="steps past the checkpoint's")
    rp.add_argument("--shards", type=int, default=16, help="training shards collected from")
    rp.add_argument("--every", type=int, default=2, help="every N-th step a replay batch")
    _shard_args(
        rp,
        "rebuild a shard's missing features from its ids when it is first read (as "
        "heads train --rescore; needed to go on from a checkpoint that trained that "
        "way)",
    )


def _score_parser(sub: Any) -> None:
    score = sub.add_parser(
        "score",
        help="score exported EAGLE-3 heads on the held-out set the curve reads: a curve row each "
        "(JSON lines, in step order)",
    )
    score.add_argument("heads", nargs="+", help="folders of eagle3.safetensors + eagle3.json")
    _shard_args(score, "rebuild the held-out shards' missing features from their ids")
    score.add_argument("--append", default=None, help="also append the rows to this curve.jsonl")


def _all_parser(sub: Any) -> None:
    every = sub.add_parser(
        "all",
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


def _eval_parser(sub: Any) -> None:
    heval = sub.add_parser("eval", help="held-out alpha per draft position, agreement, c")
    heval.add_argument("which", choices=HEAD_KINDS)
    heval.add_argument("--heads", default=None, help="folder of the weights (default: shipped)")
    heval.add_argument("--prompts", type=int, default=16, help="held-out prompts per kind")


def _export_parser(sub: Any) -> None:
    hexport = sub.add_parser("export", help="copy a trained head into specviz/assets/heads")
    hexport.add_argument("which", choices=HEAD_KINDS)
    hexport.add_argument(
        "--from-checkpoint",
        default=None,
        help="eagle3: the heads train folder with ckpt.pt and curve.jsonl, a copy if it still "
        "trains (default: the work dir's head-eagle3)",
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


def _shard_args(parser: argparse.ArgumentParser, rescore_help: str) -> None:
    """--ids, --feats and --rescore: where a step reads the regen shards, and how it rebuilds
    their missing features."""
    parser.add_argument("--ids", default=None, help=IDS_HELP)
    parser.add_argument("--feats", default=None, help="folder of the feats shards (default: regen)")
    parser.add_argument("--rescore", action="store_true", help=rescore_help)


def _ids(args: argparse.Namespace) -> Path:
    """--ids, else the work dir's regen ids."""
    return Path(args.ids) if args.ids else regen_dir() / "ids"


def _feats(args: argparse.Namespace) -> Path:
    """--feats, else the work dir's regen folder."""
    return Path(args.feats) if args.feats else regen_dir()


def _run_dir(folder: str | None) -> Path:
    """A heads train folder: the one given, else the work dir's head-eagle3."""
    return Path(folder) if folder else work_dir() / "head-eagle3"


def _rescore(args: argparse.Namespace, target: Any, tokenizer: Any) -> Callable[[int], None] | None:
    """With --rescore, what rebuilds a shard's missing features from its ids (else None)."""
    if not args.rescore:
        return None
    return rescorer(target, int(tokenizer.eos_token_id), _ids(args), _feats(args))


def run_vocab(args: argparse.Namespace) -> None:
    """heads vocab: coverage and cost per draft vocabulary size."""
    out = Path(args.out) if args.out else work_dir() / "head-eagle3" / "vocab.json"
    sizes = tuple(int(x) for x in args.sizes.split(","))
    run_heads_vocab(_ids(args), out, sizes, args.reps, args.threads)


def run_train(args: argparse.Namespace) -> None:
    """heads train: the EAGLE-3 head on the regen shards."""
    cfg = EagleConfig(
        vocab=args.vocab,
        depth=args.depth,
        loss=args.loss,
        kl_warmup=args.kl_warmup,
        lr=args.lr,
        total_steps=args.total_steps,
        batch_positions=args.batch,
        prompt_weight=args.prompt_weight,
        eval_every=args.eval_every,
        device=args.device,
        bf16=args.bf16,
    )
    target, tokenizer = load_target(args.threads)
    stream = cfg.stream(_feats(args), _ids(args), _rescore(args, target, tokenizer))
    init = Path(args.init) if args.init else None
    try:
        run_eagle(
            cfg,
            target,
            stream,
            _run_dir(args.out),
            args.steps,
            args.hours,
            ranking(RANKING),
            init=init,
        )
    except ValueError as err:
        raise SystemExit(f"heads train: {err}") from None


def run_score(args: argparse.Namespace) -> list[dict[str, Any]]:
    """heads score: each exported head's curve row on the held-out set, in step order."""
    missing = [h for h in args.heads if not (Path(h) / "eagle3.json").is_file()]
    if missing:
        raise SystemExit(
            f"heads score: no eagle3.json in {', '.join(missing)}: give folders "
            "that `heads export eagle3 --out FOLDER` wrote"
        )
    target, tokenizer = load_target(args.threads)
    stream = EagleConfig().stream(_feats(args), _ids(args), _rescore(args, target, tokenizer))
    try:
        rows = score_exported([Path(h) for h in args.heads], target, stream)
    except ValueError as err:
        raise SystemExit(f"heads score: {err}") from None
    rows.sort(key=lambda r: int(r["step"]))
    if args.append:
        with Path(args.append).open("a", encoding="utf-8") as handle:
            handle.writelines(json.dumps(r) + "\n" for r in rows)
    return rows


def run_replay_step(args: argparse.Namespace) -> dict[str, Any]:
    """heads replay: copy the checkpoint, collect (once), train the steps with replay."""
    source = _run_dir(args.source)
    if not (source / "ckpt.pt").is_file():
        raise SystemExit(f"heads replay: no checkpoint {source / 'ckpt.pt'}: run heads train first")
    cfg = ReplayConfig(shards=args.shards, every=args.every)
    target, tokenizer = load_target(args.threads)
    rescore = _rescore(args, target, tokenizer)
    try:
        return run_replay(
            cfg, target, source, Path(args.out), _ids(args), _feats(args), args.steps, rescore
        )
    except ValueError as err:
        raise SystemExit(f"heads replay: {err}") from None


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    """heads all: the whole EAGLE-3 pipeline on --device."""
    cfg = PipelineConfig(
        shards=args.shards,
        steps=args.steps,
        minutes=args.minutes,
        regen=RegenConfig(batch=args.batch),
        eagle=EagleConfig(
            vocab=args.vocab,
            kl_warmup=args.kl_warmup,
            total_steps=args.steps,
            warmup=min(100, args.steps // 10),
            batch_positions=args.positions,
            eval_every=args.eval_every,
            device=args.device,
            bf16=args.bf16,
        ),
    )
    check_device(args.device)
    target, tokenizer = load_target(args.threads)
    out = Path(args.out) if args.out else work_dir() / "heads-all"
    try:
        return run_pipeline(
            cfg, target.to(args.device), tokenizer, Path(args.ids), out, fill=ranking(RANKING)
        )
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"heads all: {err}") from None


def run_export(args: argparse.Namespace) -> dict[str, Any]:
    """heads export: eagle3 from a heads train checkpoint, medusa as trained."""
    if args.which != "eagle3":
        if args.from_checkpoint is not None or args.out is not None or args.vocab is not None:
            raise SystemExit("--from-checkpoint, --out and --vocab apply to heads export eagle3")
        return run_medusa_export(args.which)
    if args.vocab is not None and args.vocab < 1:
        raise SystemExit(f"heads export eagle3: --vocab must be >= 1 (got {args.vocab})")
    out = Path(args.out) if args.out else ASSETS
    try:
        return run_eagle_export(
            _run_dir(args.from_checkpoint), Path(args.ids), args.threads, out, args.vocab
        )
    except ValueError as err:
        raise SystemExit(f"heads export eagle3: {err}") from None


def run_ahead(args: argparse.Namespace) -> Any:
    """heads ahead: rebuild the features a heads train --rescore run reads next."""
    return run_rescore_ahead(
        ids=_ids(args),
        feats=_feats(args),
        run_dir=_run_dir(args.out),
        batch_positions=args.batch,
        groups=args.groups,
        seconds=args.hours,
        threads=args.threads,
    )


def run(args: argparse.Namespace) -> None:
    """Run one heads step."""
    if args.step == "medusa":
        cfg = MedusaConfig(total_steps=args.total_steps, batch_positions=args.batch)
        print(run_medusa(cfg, args.steps, args.hours, args.threads))
    elif args.step == "vocab":
        run_vocab(args)
    elif args.step == "train":
        run_train(args)
    elif args.step == "ahead":
        print(run_ahead(args))
    elif args.step == "replay":
        print(run_replay_step(args))
    elif args.step == "score":
        print("\n".join(json.dumps(r) for r in run_score(args)))
    elif args.step == "all":
        print(run_all(args))
    elif args.step == "eval":
        print(run_heads_eval(args.which, args.heads, args.prompts, args.threads))
    elif args.step == "export":
        print(run_export(args))
