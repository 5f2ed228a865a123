"""`specviz generate`: decode a prompt speculatively (or plainly) and report each round."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

from specviz.api import GenerationResult, autoregressive_generate, speculative_generate
from specviz.batch.api import batch_prompts
from specviz.cli.batch import (
    add_batch_argument,
    check_batch_flags,
    read_prompts,
    report,
    run_batches,
)
from specviz.cli.defaults import apply_defaults, drafter_options, stderr
from specviz.cli.prompts import prompt_text
from specviz.cli.report import render_text, run_line, summary
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.names import DEFAULT_CONFIG, RAW_WORKLOADS, WORKLOAD_CONFIGS, drafter_spec
from specviz.drafters.options import DrafterOptions, DrafterSpec
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix.memory import SuffixMemory
from specviz.drafters.trimmed import load_head_tokens
from specviz.fast.lean import lean_target_cache
from specviz.gamma.policies import POLICY_NAMES, make_policy
from specviz.heads.lookup import check_heads
from specviz.jsonl import write_jsonl
from specviz.models.chat import prompt_format, prompt_ids
from specviz.models.loading import (
    BUNDLED,
    DTYPES,
    MODEL_SPEC_HELP,
    ModelPair,
    load_pair,
    parse_dtype,
    resolve,
)
from specviz.runtime import HelpFormatter, add_threads_argument
from specviz.tree.verify import EXACT_TREE, TYPICAL
from specviz.tune.defaults import SHIPPED, Defaults
from specviz.tune.profile import profiles_dir

PROFILE_NOTE = "the tuned profile of this machine and the pair, where `specviz tune` saved one"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the generate subcommand: the prompt, sampling and model flags here, the
    drafter's in _drafter_flags."""
    gen = sub.add_parser(
        "generate",
        help="decode a prompt speculatively and report each round",
        usage="specviz generate (--prompt TEXT | --prompt-file PATH) [options]",
        description="Decode a prompt speculatively and report each round. The target's forward "
        f"and --threads default to {PROFILE_NOTE} (in {profiles_dir()}), else to {SHIPPED}'s.",
        formatter_class=HelpFormatter,
    )
    gen.add_argument("--target", default=BUNDLED, metavar="MODEL", help=MODEL_SPEC_HELP)
    gen.add_argument("--draft", default=BUNDLED, metavar="MODEL", help=MODEL_SPEC_HELP)
    given = gen.add_mutually_exclusive_group(required=True)
    given.add_argument("--prompt", metavar="TEXT", help="a request, or with --raw text to continue")
    given.add_argument(
        "--prompt-file", metavar="PATH", help="the prompt from a UTF-8 file, as is ('-': stdin)"
    )
    gen.add_argument(
        "--raw",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the prompt as plain text to continue (code), not through the chat template "
        f"(default: raw for --preset {', '.join(RAW_WORKLOADS)}, else the chat template)",
    )
    gen.add_argument(
        "--preset",
        choices=list(WORKLOAD_CONFIGS),
        help="the fastest exact drafter, gamma and temperature measured for this kind of request: "
        + "; ".join(f"{k}: {c.drafter} γ={c.gamma}" for k, c in WORKLOAD_CONFIGS.items()),
    )
    gen.add_argument(
        "--gamma",
        type=int,
        metavar="N",
        help=f"draft tokens per round (default: {DEFAULT_CONFIG.gamma}, or the preset's)",
    )
    gen.add_argument(
        "--temperature",
        type=float,
        metavar="T",
        help=f"0 for greedy (default: {DEFAULT_CONFIG.temperature:g}, or the preset's)",
    )
    gen.add_argument("--top-k", type=int, default=0, metavar="K", help="0 disables")
    gen.add_argument("--top-p", type=float, default=1.0, metavar="P", help="1.0 disables")
    gen.add_argument("--max-new-tokens", type=int, default=64, metavar="N", help="at most")
    gen.add_argument("--seed", type=int, default=0, metavar="N", help="the sampler's seed")
    gen.add_argument("--dtype", default="float32", choices=sorted(DTYPES), help="of the weights")
    gen.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    add_threads_argument(gen, default="the tuned profile's, else OMP_NUM_THREADS where set, else 1")
    gen.add_argument("--no-pack", action="store_true", help="no oneDNN weight pre-packing")
    gen.add_argument(
        "--lean-target",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the target through specviz.fast.lean's forward (default: the profile's, else "
        f"{DEFAULT_CONFIG.forward}'s where the drafter takes it)",
    )
    gen.add_argument("--plain", action="store_true", help="plain target decoding (no draft)")
    gen.add_argument(
        "--gamma-policy", choices=list(POLICY_NAMES), help="gamma per round (default: fixed)"
    )
    add_batch_argument(gen)
    gen.add_argument("--events", metavar="FILE", help="write every event as JSON lines")
    gen.add_argument("--json", action="store_true", help="a JSON summary instead of text")
    _drafter_flags(gen)


def _drafter_flags(gen: argparse.ArgumentParser) -> None:
    """The drafter and what configures its family (`specviz drafters` lists the families)."""
    o = DrafterOptions()
    flags = gen.add_argument_group("drafter (`specviz drafters` lists the families)")
    flags.add_argument(
        "--drafter",
        metavar="NAME",
        help="FAMILY[:VARIANT], LOOKUP+FAMILY or tree-FAMILY (default: "
        f"{DEFAULT_CONFIG.drafter}; {DEFAULT_CONFIG.batch_drafter} with --batch)",
    )
    flags.add_argument("--exit-layer", type=int, default=8, metavar="K", help="early-exit: layers")
    flags.add_argument("--heads", metavar="DIR", help="eagle, medusa: weights (default: shipped)")
    flags.add_argument("--ngram-max", type=int, default=3, metavar="N", help="ngram: longest")
    flags.add_argument("--ngram-min", type=int, metavar="N", help="ngram: shortest (1; 2 first)")
    flags.add_argument("--confidence", type=float, default=0.0, metavar="Q", help="model: stop q")
    flags.add_argument("--model-gamma", type=int, metavar="N", help="LOOKUP+FAMILY: family's cap")
    flags.add_argument("--memory", metavar="FILE", help="suffix: memory file, read and written")
    for flag, value, what in (
        ("--suffix-factor", o.suffix_factor, "suffix: tokens per matched token"),
        ("--suffix-min-prob", o.suffix_min_prob, "suffix: least path frequency"),
        ("--suffix-min-score", o.suffix_min_score, "suffix+FAMILY: score to draft first"),
        ("--model-min-alpha", o.model_min_alpha, "suffix+FAMILY: family's least kept share"),
    ):
        flags.add_argument(flag, type=float, default=value, metavar="X", help=what)
    for flag, value, what in (
        ("--tree-nodes", o.tree_nodes, "tree: at most this many nodes"),
        ("--tree-depth", o.tree_depth, "tree: levels (replaces --gamma)"),
        ("--tree-width", o.tree_width, "tree: children per node"),
    ):
        flags.add_argument(flag, type=int, default=value, metavar="N", help=what)
    flags.add_argument(
        "--tree-rule",
        choices=["exact", "typical"],
        default="exact",
        help="typical: Medusa's, LOSSY (for comparison only)",
    )


def load_memory(args: argparse.Namespace, spec: DrafterSpec) -> SuffixMemory | None:
    """The suffix memory of --memory (a fresh one where the file does not exist yet), None
    without the flag; ValueError saying what to change for a bad file or a drafter without
    memory."""
    if args.memory is None:
        return None
    if args.plain or not spec.remembers:
        raise ValueError(
            "--memory feeds the suffix drafters (suffix, suffix+FAMILY, tree-suffix): pick "
            "one with --drafter, or drop --memory"
        )
    path = Path(args.memory)
    if path.exists():
        return SuffixMemory.load(path)
    if not path.parent.is_dir():
        raise ValueError(f"--memory {path}: no folder {path.parent} to write it in")
    return SuffixMemory()


def check_flags(args: argparse.Namespace, spec: DrafterSpec) -> None:
    """Refuse flag combinations the drafter cannot take, before loading anything."""
    tree = spec.tree and not args.plain
    if args.tree_rule != "exact" and not tree:
        raise ValueError("--tree-rule applies to tree drafters: use --drafter tree-FAMILY")
    if tree and args.gamma_policy != "fixed":
        raise ValueError(
            f"--drafter {spec.name} drafts a tree of fixed depth: use --tree-depth, not "
            "--gamma-policy"
        )
    if tree and args.lean_target and spec.head is None:
        raise ValueError(
            f"--drafter {spec.name} verifies a tree through transformers' forward with a 4D "
            "mask: drop --lean-target (the head trees take it: tree-eagle, tree-medusa)"
        )
    own_forward = spec.shares_target_cache and spec.head is None  # the shared early exit
    if args.lean_target and own_forward and not args.plain:
        raise ValueError(
            f"--lean-target does not apply to --drafter {spec.name}, which verifies through "
            "its own forward of the target: drop one of the two"
        )
    if args.model_gamma is not None and (args.plain or not spec.hybrid):
        raise ValueError(
            "--model-gamma caps the drafter after lookup: use --drafter ngram+FAMILY or "
            "suffix+FAMILY"
        )
    if args.model_gamma is not None and args.model_gamma < 1:
        raise ValueError(f"--model-gamma must be >= 1 (got {args.model_gamma})")


def run_generate(args: argparse.Namespace, defaults: Defaults | None = None) -> int:
    """Validate, load, decode, report (defaults: the forward where no flag chooses; None:
    generate_defaults(args))."""
    text = prompt_text(args)
    apply_defaults(args, defaults)
    spec = drafter_spec(args.drafter)
    sampling = SamplingConfig(
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed
    )
    speculation = SpeculationConfig(gamma=args.gamma, max_new_tokens=args.max_new_tokens)
    make_policy(args.gamma_policy, speculation.gamma)  # validated before loading
    check_flags(args, spec)
    memory = load_memory(args, spec)  # before loading anything
    options = replace(drafter_options(args), memory=memory)  # validated before loading anything
    check_heads([] if args.plain else [spec.name], args.heads)  # before loading weights
    if spec.trims_head and not args.plain:
        load_head_tokens(resolve(args.draft, "draft", lambda _m: None))  # before loading weights
    texts = None if args.batch is None else _batch_prompts(args, text)
    pair = _load(args, spec)
    if spec.cross_tokenizer:
        options = replace(options, tokenizer=pair.tokenizer, draft_tokenizer=pair.draft_tokenizer)
    fmt = prompt_format(pair.tokenizer, raw=args.raw)
    if texts is not None:
        rows = [prompt_ids(pair.tokenizer, t, raw=args.raw) for t in texts]
        drafts = [] if pair.draft is None else [pair.draft]
        batch_prompts(pair.target, pair.tokenizer, rows, speculation.max_new_tokens, *drafts)
        report(args, run_batches(args, pair, rows, sampling, speculation), fmt)
        return 0
    ids = prompt_ids(pair.tokenizer, text, raw=args.raw)
    result = _decode(args, spec, pair, ids, sampling, speculation, options)
    if memory is not None:
        memory.save(args.memory)
    if args.events:
        write_jsonl(result.events, args.events)
    print(json.dumps(summary(result, fmt)) if args.json else render_text(result, fmt))
    line = run_line(args, result, torch.get_num_threads())
    print(line, file=sys.stderr if args.json else sys.stdout)
    return 0


def _batch_prompts(args: argparse.Namespace, text: str) -> list[str]:
    """The --batch prompts, its flags checked first."""
    check_batch_flags(args)
    return read_prompts(text, f"--prompt-file {args.prompt_file}")


def _load(args: argparse.Namespace, spec: DrafterSpec) -> ModelPair:
    """The target, and the draft where the drafter uses one."""
    return load_pair(
        args.target,
        args.draft if spec.uses_draft_model and not args.plain else None,
        dtype=parse_dtype(args.dtype),
        device=args.device,
        pack=not args.no_pack,
        progress=stderr,
        drafter=None if args.plain else spec.name,
    )


def _decode(
    args: argparse.Namespace,
    spec: DrafterSpec,
    pair: ModelPair,
    ids: list[int],
    sampling: SamplingConfig,
    speculation: SpeculationConfig,
    options: DrafterOptions,
) -> GenerationResult:
    """Plain decoding with --plain, else speculative decoding with the drafter."""
    make_cache = lean_target_cache if args.lean_target else KVCache
    if args.plain:
        return autoregressive_generate(
            pair.target,
            pair.tokenizer,
            ids,
            sampling=sampling,
            max_new_tokens=speculation.max_new_tokens,
            make_cache=make_cache,
        )
    drafter = build_drafter(
        spec.name, target=pair.target, draft=pair.draft, sampling=sampling, options=options
    )
    return speculative_generate(
        pair.target,
        drafter,
        pair.tokenizer,
        ids,
        sampling=sampling,
        speculation=speculation,
        policy=None if spec.tree else make_policy(args.gamma_policy, speculation.gamma),
        make_cache=make_cache if args.lean_target and spec.head is None else None,
        tree_rule=TYPICAL if args.tree_rule == "typical" else EXACT_TREE,
    )
