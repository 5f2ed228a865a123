"""Command line: `specviz generate` decodes and reports; `specviz verify` runs the suite;
`specviz bench` measures; `specviz tune` profiles this machine for a pair; `specviz app` serves
the app."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from specviz.api import GenerationResult, autoregressive_generate, speculative_generate
from specviz.audit import cli as audit_cli
from specviz.batch.api import batch_prompts
from specviz.batch.cli import (
    add_batch_argument,
    check_batch_flags,
    read_prompts,
    report,
    run_batches,
)
from specviz.bench import cli as bench_cli
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.registry import (
    CROSS_TOKENIZER_DRAFTERS,
    DEFAULT_CONFIG,
    DRAFTER_NAMES,
    HEAD_DRAFTERS,
    MEMORY_DRAFTERS,
    REGISTRY,
    WORKLOAD_CONFIGS,
    DrafterOptions,
    build_drafter,
    drafter_spec,
)
from specviz.drafters.suffix_memory import SuffixMemory
from specviz.drafters.trimmed import load_head_tokens, ranking_path
from specviz.fast.lean import lean_target_cache
from specviz.gamma.policies import POLICY_NAMES, make_policy
from specviz.heads.lookup import check_heads, head_forward
from specviz.jsonl import write_jsonl
from specviz.models.chat import PromptFormat, prompt_format, prompt_ids
from specviz.models.loading import (
    BUNDLED,
    CROSS_DRAFTER,
    DTYPES,
    MODEL_SPEC_HELP,
    SMOLLM2,
    ModelLoadError,
    load_pair,
    load_tokenizer,
    parse_dtype,
    resolve,
    tokenizers_match,
)
from specviz.runtime import HelpFormatter, add_threads_argument, set_threads, utf8_text
from specviz.stats import cli as verify_cli
from specviz.tree.verify import EXACT_TREE, TYPICAL
from specviz.tune import cli as tune_cli
from specviz.tune.defaults import SHIPPED, Defaults, lean_applies, resolve_defaults
from specviz.tune.profile import profiles_dir

PROFILE_NOTE = "the tuned profile of this machine and the pair, where `specviz tune` saved one"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for all subcommands."""
    parser = argparse.ArgumentParser(prog="specviz", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser(
        "generate",
        help="decode a prompt speculatively and report each round",
        description="Decode a prompt speculatively and report each round. The target's forward "
        "(--lean-target, --no-pack) and --threads default to "
        f"{PROFILE_NOTE} (in {profiles_dir()}), else to {SHIPPED}'s.",
        formatter_class=HelpFormatter,
    )
    gen.add_argument("--target", default=BUNDLED, help=MODEL_SPEC_HELP)
    gen.add_argument("--draft", default=BUNDLED, help=MODEL_SPEC_HELP)
    given = gen.add_mutually_exclusive_group(required=True)
    given.add_argument("--prompt", help="the prompt: a request, or with --raw text to continue")
    given.add_argument(
        "--prompt-file",
        metavar="PATH",
        help="read the prompt from a UTF-8 text file, as is ('-': standard input)",
    )
    gen.add_argument(
        "--raw",
        action="store_true",
        help="send the prompt as plain text to continue; by default it goes through the "
        "tokenizer's chat template (one user turn) where the tokenizer has one",
    )
    gen.add_argument(
        "--preset",
        choices=list(WORKLOAD_CONFIGS),
        help="the benchmark's fastest exact setting for this kind of request (its drafter, "
        "gamma, gamma policy and temperature, where no flag sets them); default: code's, "
        + "; ".join(f"{k}: {c.drafter} γ={c.gamma}" for k, c in WORKLOAD_CONFIGS.items()),
    )
    gen.add_argument(
        "--gamma",
        type=int,
        help=f"draft tokens per round (>= 1) (default: {DEFAULT_CONFIG.gamma}, or the preset's)",
    )
    gen.add_argument(
        "--temperature",
        type=float,
        help=f"0 for greedy (default: {DEFAULT_CONFIG.temperature:g}, or the preset's)",
    )
    gen.add_argument("--top-k", type=int, default=0, help="keep the k likeliest tokens; 0 disables")
    gen.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass; 1.0 disables")
    gen.add_argument("--max-new-tokens", type=int, default=64, help="stop after this many tokens")
    gen.add_argument("--seed", type=int, default=0, help="random seed of the sampler")
    gen.add_argument(
        "--dtype", default="float32", choices=sorted(DTYPES), help="weights' and compute dtype"
    )
    gen.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    add_threads_argument(
        gen,
        default="the tuned profile's, where `specviz tune` saved one for this machine and the "
        "pair, else OMP_NUM_THREADS where set, else 1",
    )
    gen.add_argument(
        "--no-pack",
        action="store_true",
        help=f"no oneDNN weight pre-packing on CPU (default: packing, unless {PROFILE_NOTE} "
        "chose transformers' forward on unpacked weights)",
    )
    gen.add_argument(
        "--lean-target",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the target through specviz.fast.lean's forward (packed Llama targets; else "
        f"as is); default: the forward of {PROFILE_NOTE}, else {DEFAULT_CONFIG.forward}'s, "
        "where the drafter takes it",
    )
    gen.add_argument("--plain", action="store_true", help="plain target decoding (no draft)")
    gen.add_argument(
        "--drafter",
        choices=DRAFTER_NAMES,
        help=f"default: {DEFAULT_CONFIG.drafter} ({DEFAULT_CONFIG.batch_drafter} with --batch), "
        "the benchmark's fastest exact choice; "
        + "; ".join(f"{s.name}: {s.description}" for s in REGISTRY.values()),
    )
    gen.add_argument("--exit-layer", type=int, default=8, help="layers used by early-exit")
    gen.add_argument(
        "--heads",
        metavar="DIR",
        help="head drafters (eagle, eagle3, medusa and their trees): the folder of "
        "eagle.safetensors / eagle3.safetensors / medusa.safetensors trained for --target "
        "(default: the heads shipped for the bundled target)",
    )
    gen.add_argument("--ngram-max", type=int, default=3, help="longest n-gram to match (ngram)")
    gen.add_argument(
        "--ngram-min", type=int, help="shortest n-gram to match (default 1; 2 for ngram+...)"
    )
    gen.add_argument(
        "--confidence", type=float, default=0.0, help="stop drafting below this top-q (model)"
    )
    gen.add_argument(
        "--model-gamma",
        type=int,
        help="at most this many draft-model tokens a round; copies still run to --gamma "
        "(ngram+model, ngram+model-trimmed, suffix+model, suffix+model-trimmed; default: no cap)",
    )
    gen.add_argument(
        "--memory",
        metavar="FILE",
        help="suffix drafters: the memory of earlier requests, a JSON file read if it exists "
        "and written after the decode (specviz.drafters.suffix_memory)",
    )
    gen.add_argument(
        "--suffix-factor",
        type=float,
        default=DrafterOptions().suffix_factor,
        help="suffix drafters: draft at most this many tokens per matched token",
    )
    gen.add_argument(
        "--suffix-min-prob",
        type=float,
        default=DrafterOptions().suffix_min_prob,
        help="suffix drafters: stop where a draft's frequency in memory falls below this",
    )
    gen.add_argument(
        "--suffix-min-score",
        type=float,
        default=DrafterOptions().suffix_min_score,
        help="suffix+model, suffix+eagle3: the suffix chain drafts when its score (expected "
        "accepted tokens) reaches this, else the draft model (or head)",
    )
    gen.add_argument(
        "--model-min-alpha",
        type=float,
        default=DrafterOptions().model_min_alpha,
        help="suffix+model, suffix+eagle3: the model (head) drafts while the target keeps at least "
        "this share of its tokens (counted across the requests in --memory; 0: always); below "
        "it, the weak suffix chain or none",
    )
    gen.add_argument(
        "--tree-nodes",
        type=int,
        default=DrafterOptions().tree_nodes,
        help="tree drafters: at most this many nodes",
    )
    gen.add_argument(
        "--tree-depth",
        type=int,
        default=DrafterOptions().tree_depth,
        help="tree drafters: at most this many levels (a tree's depth replaces --gamma)",
    )
    gen.add_argument(
        "--tree-width",
        type=int,
        default=DrafterOptions().tree_width,
        help="tree drafters but tree-ngram: children per node",
    )
    gen.add_argument(
        "--tree-rule",
        choices=["exact", "typical"],
        default="exact",
        help="tree drafters: exact verification, or typical: Medusa's typical acceptance, "
        "LOSSY (its output does not follow the target's law; for comparison only)",
    )
    gen.add_argument(
        "--gamma-policy",
        choices=list(POLICY_NAMES),
        help="gamma per round: fixed, transformers' +2/-1 heuristic, or the theory optimum "
        f"(default: {DEFAULT_CONFIG.policy}, or the preset's)",
    )
    add_batch_argument(gen)
    gen.add_argument("--events", metavar="FILE", help="write every event as JSON lines")
    gen.add_argument("--json", action="store_true", help="print a JSON summary instead of text")
    verify_cli.add_parser(sub)
    audit_cli.add_parser(sub)
    bench_cli.add_parser(sub)
    sub.add_parser(
        "app",
        add_help=False,  # `specviz app --help` is the app's own (specviz.app.main)
        help="the app: watch speculative decoding token by token, and saved bench results "
        "(`specviz app --help`; `python app.py` is the same)",
    )
    tune_cli.add_parser(sub)
    return parser


def read_prompt_file(path: str) -> str:
    """The text of a UTF-8 file, as is ('-': standard input); ValueError saying what to change
    when it cannot be read or is not UTF-8."""
    name = "standard input" if path == "-" else path
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as err:
        reason = err.strerror or str(err)
        raise ValueError(f"--prompt-file {name}: cannot read it ({reason})") from None
    try:
        return data.decode("utf-8").removeprefix("\ufeff")  # without a byte order mark
    except UnicodeDecodeError as err:
        raise ValueError(
            f"--prompt-file {name} is not UTF-8 text (byte 0x{data[err.start]:02x} at offset "
            f"{err.start}): save it as UTF-8"
        ) from None


def prompt_text(args: argparse.Namespace) -> str:
    """The prompt of --prompt or --prompt-file, checked to be non-empty UTF-8 text."""
    if args.prompt_file is not None:
        text, where = read_prompt_file(args.prompt_file), f"--prompt-file {args.prompt_file}"
    else:
        where, instead = "--prompt", ", or save it as UTF-8 and pass --prompt-file"
        text = utf8_text(args.prompt, where, instead=instead)
    if not text.strip():
        raise ValueError(f"{where} is empty: give some text to continue")
    return text


def summary(result: GenerationResult, fmt: PromptFormat = "raw") -> dict[str, object]:
    """The numbers a user wants after a decode; fmt: how the prompt was formatted."""
    return {
        "text": result.text,
        "prompt_format": fmt,
        "prompt_tokens": len(result.prompt_ids),
        "tokens": list(result.tokens),
        "new_tokens": len(result.tokens),
        "finish_reason": result.finish_reason,
        "seconds": result.seconds,
        "rounds": len(result.rounds),
        "proposed": result.proposed,
        "accepted": result.accepted,
        "acceptance_rate": result.acceptance_rate if result.proposed else None,
        "exact": result.exact,
        "target_calls": result.target_calls,
        "per_round": [
            {"round": r.round, "proposed": r.proposed, "accepted": r.accepted, "emitted": r.emitted}
            for r in result.rounds
        ],
    }


def render_text(result: GenerationResult, fmt: PromptFormat = "raw") -> str:
    """Human-readable report: the text, one line per round, the acceptance rate, and how the
    prompt was formatted (fmt)."""
    lines = [result.text, ""]
    lines += [
        f"round {r.round:3d}: accepted {r.accepted}/{r.proposed}, emitted {r.emitted}"
        for r in result.rounds
    ]
    rate = f"{result.acceptance_rate:.3f}" if result.proposed else "n/a"
    lines.append(
        f"{len(result.tokens)} tokens in {result.seconds:.2f} s, {result.target_calls} target "
        f"calls, acceptance rate {rate} ({result.accepted}/{result.proposed}), "
        f"stopped by {result.finish_reason}"
    )
    how = "through the chat template" if fmt == "chat" else "as raw text"
    lines.append(f"prompt: {len(result.prompt_ids)} tokens, {how}")
    if not result.exact:
        lines.append(LOSSY_NOTE)
    return "\n".join(lines)


LOSSY_NOTE = (
    "LOSSY: typical acceptance chose these tokens; they do not follow the target's law "
    "(use --tree-rule exact for exact output)"
)


def drafter_options(args: argparse.Namespace) -> DrafterOptions:
    """The registry's drafter options as the flags set them.

    A head drafter verifies through the target forward plain decoding runs on: specviz.fast.lean's
    with --lean-target, else transformers' (specviz.bench.heads.head_forward).
    """
    head = args.drafter in HEAD_DRAFTERS
    return DrafterOptions(
        exit_layer=args.exit_layer,
        ngram_max=args.ngram_max,
        ngram_min=args.ngram_min,
        min_confidence=args.confidence,
        model_gamma=args.model_gamma,
        tree_nodes=args.tree_nodes,
        tree_depth=args.tree_depth,
        tree_width=args.tree_width,
        make_cache=head_forward(args.lean_target) if head else None,
        heads=args.heads,
        suffix_factor=args.suffix_factor,
        suffix_min_prob=args.suffix_min_prob,
        suffix_min_score=args.suffix_min_score,
        model_min_alpha=args.model_min_alpha,
    )


def _ranked(draft: str) -> bool:
    """Whether the draft folder holds the token ranking a trimmed head reads."""
    try:
        return ranking_path(resolve(draft, "draft", lambda _m: None)).is_file()
    except ModelLoadError:
        return False  # the load reports it, with its own message


def _other_tokenizer(args: argparse.Namespace) -> bool:
    """Whether --draft's tokenizer differs from --target's (False where one cannot be loaded:
    loading the pair then says why)."""
    if {args.target, args.draft} <= {BUNDLED, SMOLLM2}:
        return False  # the bundled pair: both SmolLM2's tokenizer
    try:
        draft = load_tokenizer(args.draft, role="draft", progress=_stderr)
        return not tokenizers_match(load_tokenizer(args.target, progress=_stderr), draft)
    except ModelLoadError:
        return False


def _stderr(message: str) -> None:
    """A progress message, on standard error."""
    print(message, file=sys.stderr)


def generate_defaults(args: argparse.Namespace) -> Defaults:
    """The forward path and threads of this run where its flags do not choose: the tuned
    profile's for this machine and pair, else the shipped DEFAULT_CONFIG's
    (specviz.tune.defaults.resolve_defaults; an unusable profile is ignored with a message)."""
    defaults = resolve_defaults(
        args.target, args.draft, args.dtype, plain=args.plain, device=args.device, warn=_warn
    )
    if defaults.path is not None:
        _stderr(
            f"specviz: defaults from {defaults.source}: the {defaults.forward} forward on "
            f"{defaults.threads} thread(s), where no flag chooses"
        )
    return defaults


def _warn(message: str) -> None:
    """A warning on standard error."""
    _stderr(f"specviz: {message}")


def apply_defaults(args: argparse.Namespace, defaults: Defaults | None = None) -> None:
    """Fill what the flags leave unset from the registry's WORKLOAD_CONFIGS[--preset] (without
    one, DEFAULT_CONFIG): gamma, temperature, the gamma policy and the drafter (DEFAULT_CONFIG's
    batched drafter under --batch; a cross-tokenizer drafter, CROSS_DRAFTER, for a draft whose
    tokenizer differs from the target's); and from defaults (None: generate_defaults(args)),
    the target's forward where neither --[no-]lean-target nor --no-pack chooses it: lean where
    the drafter takes it (specviz.tune.defaults.lean_applies; never a batched decode), unpacked
    weights for the "transformers" path."""
    defaults = defaults or generate_defaults(args)
    preset = WORKLOAD_CONFIGS[args.preset] if args.preset else DEFAULT_CONFIG
    for flag, value in {"gamma": preset.gamma, "temperature": preset.temperature}.items():
        if getattr(args, flag) is None:
            setattr(args, flag, value)
    if args.gamma_policy is None:
        args.gamma_policy = preset.policy
    if args.drafter is None and not args.plain and args.batch is None and _other_tokenizer(args):
        print(
            f"specviz: the draft's tokenizer differs from the target's: drafting with "
            f"{CROSS_DRAFTER} (choose one of {', '.join(CROSS_TOKENIZER_DRAFTERS)} with --drafter)",
            file=sys.stderr,
        )
        args.drafter = CROSS_DRAFTER
    if args.drafter is None:
        batched = args.batch is not None
        name = DEFAULT_CONFIG.batch_drafter if batched else preset.drafter
        spec = drafter_spec(name)
        if spec.untrimmed is not None and not args.plain and not _ranked(args.draft):
            print(
                f"specviz: the draft has no token ranking for the default drafter {name}; "
                f"drafting with {spec.untrimmed} (choose one with --drafter)",
                file=sys.stderr,
            )
            name = spec.untrimmed
        args.drafter = name
    if args.lean_target is None and not args.no_pack:
        args.no_pack = not defaults.pack
    if args.lean_target is None:
        takes = args.batch is None and (args.plain or lean_applies(args.drafter))
        args.lean_target = defaults.lean and takes


def load_memory(args: argparse.Namespace) -> SuffixMemory | None:
    """The suffix memory of --memory (a fresh one where the file does not exist yet), None
    without the flag; ValueError saying what to change for a bad file or a drafter without
    memory."""
    if args.memory is None:
        return None
    if args.plain or args.drafter not in MEMORY_DRAFTERS:
        raise ValueError(
            f"--memory feeds the suffix drafters ({', '.join(MEMORY_DRAFTERS)}): pick one with "
            "--drafter, or drop --memory"
        )
    path = Path(args.memory)
    if path.exists():
        return SuffixMemory.load(path)
    if not path.parent.is_dir():
        raise ValueError(f"--memory {path}: no folder {path.parent} to write it in")
    return SuffixMemory()


def check_tree_flags(args: argparse.Namespace) -> None:
    """Refuse flag combinations a tree drafter (or a chain one) cannot take, before loading."""
    tree = drafter_spec(args.drafter).tree and not args.plain
    if args.tree_rule != "exact" and not tree:
        raise ValueError("--tree-rule applies to tree drafters: use --drafter tree-...")
    if tree and args.gamma_policy != "fixed":
        raise ValueError(
            f"--drafter {args.drafter} drafts a tree of fixed depth: use --tree-depth, not "
            "--gamma-policy"
        )
    if tree and args.lean_target and args.drafter not in HEAD_DRAFTERS:
        raise ValueError(
            f"--drafter {args.drafter} verifies a tree through transformers' forward with a 4D "
            "mask: drop --lean-target (the head trees take it: eagle-tree, medusa-tree, ...)"
        )


def run_generate(args: argparse.Namespace, defaults: Defaults | None = None) -> int:
    """Validate, load, decode, report (defaults: the forward where no flag chooses; None:
    generate_defaults(args))."""
    text = prompt_text(args)
    apply_defaults(args, defaults)
    sampling = SamplingConfig(
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed
    )
    speculation = SpeculationConfig(gamma=args.gamma, max_new_tokens=args.max_new_tokens)
    policy = make_policy(args.gamma_policy, speculation.gamma)  # validated before loading
    if args.lean_target and args.drafter == "early-exit-shared" and not args.plain:
        raise ValueError(
            "--lean-target does not apply to --drafter early-exit-shared, which verifies through "
            "its own forward of the target: drop one of the two"
        )
    make_cache = lean_target_cache if args.lean_target else KVCache
    hybrid = args.drafter.startswith(("ngram+", "suffix+"))
    if args.model_gamma is not None and (args.plain or not hybrid):
        raise ValueError(
            "--model-gamma caps the draft model after lookup: use --drafter ngram+... or suffix+..."
        )
    if args.model_gamma is not None and args.model_gamma < 1:
        raise ValueError(f"--model-gamma must be >= 1 (got {args.model_gamma})")
    memory = load_memory(args)  # before loading anything
    options = replace(drafter_options(args), memory=memory)  # validated before loading anything
    check_tree_flags(args)
    check_heads([] if args.plain else [args.drafter], args.heads)  # before loading weights
    if args.drafter.endswith("model-trimmed") and not args.plain:
        load_head_tokens(resolve(args.draft, "draft", lambda _m: None))  # before loading weights
    if args.batch is not None:
        check_batch_flags(args)
        texts = read_prompts(text, f"--prompt-file {args.prompt_file}")
    pair = load_pair(
        args.target,
        args.draft if drafter_spec(args.drafter).uses_draft_model and not args.plain else None,
        dtype=parse_dtype(args.dtype),
        device=args.device,
        pack=not args.no_pack,
        progress=_stderr,
        drafter=None if args.plain else args.drafter,
    )
    if args.drafter in CROSS_TOKENIZER_DRAFTERS:
        options = replace(options, tokenizer=pair.tokenizer, draft_tokenizer=pair.draft_tokenizer)
    fmt = prompt_format(pair.tokenizer, raw=args.raw)
    if args.batch is not None:
        rows = [prompt_ids(pair.tokenizer, t, raw=args.raw) for t in texts]
        drafts = [] if pair.draft is None else [pair.draft]
        batch_prompts(pair.target, pair.tokenizer, rows, speculation.max_new_tokens, *drafts)
        report(args, run_batches(args, pair, rows, sampling, speculation), fmt)
        return 0
    ids = prompt_ids(pair.tokenizer, text, raw=args.raw)
    shares = args.drafter in HEAD_DRAFTERS  # verifies through its own forward of the target
    if args.plain:
        result = autoregressive_generate(
            pair.target,
            pair.tokenizer,
            ids,
            sampling=sampling,
            max_new_tokens=speculation.max_new_tokens,
            make_cache=make_cache,
        )
    else:
        result = speculative_generate(
            pair.target,
            build_drafter(
                args.drafter,
                target=pair.target,
                draft=pair.draft,
                sampling=sampling,
                options=options,
            ),
            pair.tokenizer,
            ids,
            sampling=sampling,
            speculation=speculation,
            policy=None if drafter_spec(args.drafter).tree else policy,
            make_cache=make_cache if args.lean_target and not shares else None,
            tree_rule=TYPICAL if args.tree_rule == "typical" else EXACT_TREE,
        )
    if memory is not None:
        memory.save(args.memory)
    if args.events:
        write_jsonl(result.events, args.events)
    print(json.dumps(summary(result, fmt)) if args.json else render_text(result, fmt))
    return 0


def run_app(argv: Sequence[str]) -> int:
    """`specviz app`: the app (specviz.app.main), its Benchmark results tab showing saved results
    through the benchmark's own view of them."""
    from specviz.app.main import main as app_main  # gradio and the app load for it alone

    return app_main(argv, view=bench_cli.load_result_view)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `specviz` command; bad input exits 2 with a one-line message."""
    given = sys.argv[1:] if argv is None else list(argv)
    if given[:1] == ["app"]:
        return run_app(given[1:])
    command = bench_cli.command(given)  # `specviz bench replay ...`: a parser of its own
    try:
        if command is not None:
            return command()
        args = build_parser().parse_args(bench_cli.study_argv(given))
        defaults = generate_defaults(args) if args.command == "generate" else None
        threads = getattr(args, "threads", None)  # tune sets its own, per measurement
        if threads is None and defaults is not None:
            threads = defaults.threads
        set_threads(threads)  # once, for the whole process (specviz.runtime)
        if args.command == "bench":
            return bench_cli.run_bench(args)
        if args.command == "tune":
            return tune_cli.run_tune(args)
        if args.command == "audit":
            return audit_cli.run(args)
        if args.command == "verify":
            return verify_cli.run_verify(args)
        return run_generate(args, defaults)
    except (ValueError, ModelLoadError) as err:
        print(f"specviz: error: {err}", file=sys.stderr)
        return 2
