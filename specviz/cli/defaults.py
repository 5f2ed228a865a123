"""What `specviz generate`'s flags leave unset, filled in: the preset's drafter, gamma and
temperature, the target's forward and threads (a tuned profile's, else the shipped ones); and
the drafter options the flags set."""

from __future__ import annotations

import argparse
import sys

from specviz.drafters.names import (
    CROSS_TOKENIZER_DRAFTERS,
    DEFAULT_CONFIG,
    RAW_WORKLOADS,
    WORKLOAD_CONFIGS,
    drafter_spec,
)
from specviz.drafters.options import DrafterOptions
from specviz.drafters.trimmed import ranking_path
from specviz.heads.build import head_forward
from specviz.models.loading import (
    BUNDLED,
    CROSS_DRAFTER,
    SMOLLM2,
    ModelLoadError,
    load_tokenizer,
    resolve,
    tokenizers_match,
)
from specviz.tune.defaults import Defaults, lean_applies, resolve_defaults


def drafter_options(args: argparse.Namespace) -> DrafterOptions:
    """The registry's drafter options as the flags set them.

    A head drafter verifies through the target forward plain decoding runs on: specviz.fast.lean's
    with --lean-target, else transformers' (specviz.bench.heads.head_forward).
    """
    head = drafter_spec(args.drafter).head is not None
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
        draft = load_tokenizer(args.draft, role="draft", progress=stderr)
        return not tokenizers_match(load_tokenizer(args.target, progress=stderr), draft)
    except ModelLoadError:
        return False


def stderr(message: str) -> None:
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
        stderr(
            f"specviz: defaults from {defaults.source}: the {defaults.forward} forward on "
            f"{defaults.threads} thread(s), where no flag chooses"
        )
    return defaults


def _warn(message: str) -> None:
    """A warning on standard error."""
    stderr(f"specviz: {message}")


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
    if args.raw is None:
        args.raw = args.preset in RAW_WORKLOADS
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
    args.drafter = drafter_spec(args.drafter).name  # canonical; a one-line error names near ones
    if args.lean_target is None and not args.no_pack:
        args.no_pack = not defaults.pack
    if args.lean_target is None:
        takes = args.batch is None and (args.plain or lean_applies(args.drafter))
        args.lean_target = defaults.lean and takes
