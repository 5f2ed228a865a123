"""`specviz verify`: run the equivalence suite on a model pair and print a table."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import torch

from specviz.checks import vocab_size
from specviz.console import progress_bar, say
from specviz.core.config import SamplingConfig
from specviz.drafters.cross_vocab import cross_tokenizers
from specviz.drafters.names import (
    CHAIN_DRAFTERS,
    CROSS_TOKENIZER_DRAFTERS,
    HEAD_DRAFTERS,
    TREE_DRAFTERS,
    drafter_spec,
)
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.heads.build import head_cache
from specviz.heads.cache import MedusaCache
from specviz.models.chat import PromptFormat, prompt_format, prompt_ids
from specviz.models.loading import BUNDLED, MODEL_SPEC_HELP, load_pair
from specviz.runtime import HelpFormatter, add_threads_argument, utf8_text
from specviz.stats.laws import EXACT_VARIANT, AnyDrafter, Variant
from specviz.stats.mutants import MUTANTS, TREE_MUTANTS
from specviz.stats.report import table, to_json
from specviz.stats.suite import Setting, default_settings, run_suite, tree_settings
from specviz.stats.toy import REPEATING_PROMPT, random_pair


def toy_unsupported(name: str) -> str | None:
    """What the toy pair lacks that the drafter called name needs (None: it runs on it)."""
    spec = drafter_spec(name)
    for lacks, needs in (
        ("no output head to trim", spec.trims_head),
        ("no layers to exit from", spec.reads_exit_layer),
        ("no hidden states for a drafting head", spec.head is not None),
        ("no tokenizers to translate between", spec.cross_tokenizer),
    ):
        if needs:
            return lacks
    return None


def mutant_stand_in(name: str) -> str | None:
    """For a drafter sharing the target's cache, the one to swap mutants into instead."""
    spec = drafter_spec(name)
    if not spec.shares_target_cache:
        return None
    return "early-exit" if spec.reads_exit_layer else "model"


QUICK = ("gamma=1 T=1", "gamma=4 T=1", "gamma=4 T=0.5", "gamma=2 T=0.7 top_p=0.8")
TREE_QUICK = ("tree T=1", "tree T=0.7 top_p=0.8")
TREE_FLAGS = ("tree_nodes", "tree_depth", "tree_width")  # DrafterOptions fields, as flags


MODELS_ONLY = ("--target", "--draft", "--prompt", "--raw")  # flags of --pair models alone
DEFAULT_PROMPT = "def add(a, b):"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the verify subcommand."""
    ver = sub.add_parser(
        "verify",
        help="statistical equivalence suite: speculative vs target law",
        description="Statistical equivalence suite: does speculative sampling draw from the "
        "target's law? Exits 1 when a test rejects equality.",
        formatter_class=HelpFormatter,
    )
    ver.add_argument(
        "--pair",
        choices=["toy", "models"],
        default="toy",
        help="toy: a random 6-token pair, fast and exact; models: a real target and draft",
    )
    ver.add_argument("--target", help=f"with --pair models: {MODEL_SPEC_HELP} (default: {BUNDLED})")
    ver.add_argument("--draft", help=f"with --pair models: {MODEL_SPEC_HELP} (default: {BUNDLED})")
    ver.add_argument(
        "--prompt",
        help=f"with --pair models: the context the next tokens are drawn after "
        f"(default: {DEFAULT_PROMPT!r})",
    )
    ver.add_argument(
        "--raw",
        action="store_true",
        help="with --pair models: the prompt as plain text, not through the chat template",
    )
    ver.add_argument(
        "--n", type=int, default=1500, help="samples drawn by each sampler in each setting"
    )
    ver.add_argument("--alpha", type=float, default=0.01, help="family-wise significance level")
    ver.add_argument(
        "--settings",
        choices=["quick", "full"],
        default="full",
        help=f"full: the whole grid of gamma, temperature, top-k and top-p settings; quick: "
        f"{len(QUICK)} of them (tree drafters: {len(tree_settings())} tree settings, quick: "
        f"{len(TREE_QUICK)})",
    )
    ver.add_argument(
        "--drafter",
        metavar="NAME",
        default="model",
        help="the drafter to verify (`specviz drafters` lists them)",
    )
    ver.add_argument(
        "--exit-layer",
        type=int,
        default=8,
        help="early-exit drafters: the target's layers that draft",
    )
    defaults = DrafterOptions()
    for field, what in zip(TREE_FLAGS, ("nodes", "levels", "children per node"), strict=True):
        ver.add_argument(
            f"--{field.replace('_', '-')}",
            type=int,
            help=f"tree drafters: at most this many {what} (default: {getattr(defaults, field)})",
        )
    ver.add_argument(
        "--heads",
        metavar="DIR",
        help="drafting-head drafters: the folder with eagle3.safetensors / "
        "medusa.safetensors trained for --target (default: the heads shipped for the bundled "
        "target)",
    )
    ver.add_argument(
        "--mutant",
        choices=[m.name for m in (*MUTANTS, *TREE_MUTANTS)],
        help=f"swap in a known bug (chain drafters: {', '.join(m.name for m in MUTANTS)}; tree "
        f"drafters: {', '.join(m.name for m in TREE_MUTANTS)})",
    )
    ver.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    add_threads_argument(ver)


def _settings(choice: str, tree_depth: int | None, *, late: bool = False) -> list[Setting]:
    """The chosen subset of the default grid, or of the tree grid for a tree of that depth.

    late: the drafter drafts nothing in the first round (a drafting head waits for the
    target's features), so each setting writes one token more for its drafting round to
    have the whole gamma (or depth).
    """
    if tree_depth is not None:
        grid = [s for s in tree_settings(tree_depth) if choice == "full" or s.name in TREE_QUICK]
    else:
        grid = [s for s in default_settings() if choice == "full" or s.name in QUICK]
    return [_one_more(s) for s in grid] if late else grid


def _one_more(setting: Setting) -> Setting:
    """setting writing one token more (a max_new_tokens in its name follows)."""
    limit = setting.speculation.max_new_tokens
    return replace(
        setting,
        name=setting.name.replace(f"max_new_tokens={limit}", f"max_new_tokens={limit + 1}"),
        speculation=replace(setting.speculation, max_new_tokens=limit + 1),
    )


def _check_tree_flags(args: argparse.Namespace, tree: bool) -> DrafterOptions:
    """The tree flags as drafter options; ValueError where a chain drafter is given them."""
    given = {
        field: getattr(args, field) for field in TREE_FLAGS if getattr(args, field) is not None
    }
    for field, value in given.items():
        if value < 1:
            raise ValueError(f"--{field.replace('_', '-')} must be >= 1 (got {value})")
    if given and not tree:
        flags = ", ".join(f"--{field.replace('_', '-')}" for field in given)
        verb = "shapes" if len(given) == 1 else "shape"
        raise ValueError(
            f"{flags} {verb} the trees of tree drafters ({', '.join(TREE_DRAFTERS)}): pick one "
            f"with --drafter, or drop {flags}"
        )
    return DrafterOptions(**given)


def _check_mutant(variant: Variant, drafter: str, tree: bool) -> None:
    """ValueError when the mutant swaps a piece the drafter's kind of speculation lacks."""
    if variant.swaps_tree and not tree:
        raise ValueError(
            f"mutant {variant.name} is a bug of tree speculation: it applies to the tree "
            f"drafters ({', '.join(TREE_DRAFTERS)}), not to --drafter {drafter}"
        )
    if variant.swaps_chain and tree:
        raise ValueError(
            f"mutant {variant.name} is a bug of chain speculation: it applies to the chain "
            f"drafters ({', '.join(CHAIN_DRAFTERS)}), not to --drafter {drafter}"
        )


def _check_swaps(variant: Variant, drafter: str) -> None:
    """ValueError when the mutant swaps the draft model's drafter or cache and drafter shares
    the target's cache (early-exit:shared, the drafting heads): it has neither to swap; or
    when it swaps the draft model's drafter and drafter translates between tokenizers (it
    builds a drafter of its own, with bugs of its own: the cross mutants of the test suite)."""
    if variant.drafter_cls is not EXACT_VARIANT.drafter_cls and drafter in CROSS_TOKENIZER_DRAFTERS:
        raise ValueError(
            f"mutant {variant.name} swaps the draft-model drafter, and --drafter {drafter} "
            "builds a drafter of its own (it translates between tokenizers): verify the mutant "
            "with --drafter model"
        )
    swaps = variant.drafter_cls is not EXACT_VARIANT.drafter_cls or variant.make_cache is not None
    if swaps and mutant_stand_in(drafter) is not None:
        raise ValueError(
            f"mutant {variant.name} swaps the draft model's drafter or cache, which --drafter "
            f"{drafter} does not use (it drafts through the target's own cache): verify it "
            f"with --drafter {mutant_stand_in(drafter)}"
        )


def _check_heads(folder: str, drafter: str) -> None:
    """ValueError unless --heads DIR is a folder and drafter is a drafting head."""
    if drafter not in HEAD_DRAFTERS:
        raise ValueError(
            f"--heads gives the weights of the drafting-head drafters ({', '.join(HEAD_DRAFTERS)})"
            f": pick one with --drafter, or drop --heads"
        )
    if not Path(folder).is_dir():
        raise ValueError(f"--heads {folder}: no such folder")


def _medusa_depth(options: DrafterOptions, target: object, *, given: bool) -> DrafterOptions:
    """options with a tree no deeper than the Medusa heads reach (ValueError if --tree-depth
    asks for more); the default depth is cut to the number of heads."""
    cache = head_cache("medusa", target, options.heads)
    assert isinstance(cache, MedusaCache)
    reach = cache.heads.k
    if options.tree_depth <= reach:
        return options
    if given:
        raise ValueError(
            f"--tree-depth {options.tree_depth}: the Medusa heads guess at most {reach} "
            f"tokens ahead; pass --tree-depth {reach} or less"
        )
    return replace(options, tree_depth=reach)


def run_verify(args: argparse.Namespace) -> int:
    """Validate, build the pair, run the suite with a progress line, print the table."""
    if args.n < 10:
        raise ValueError(f"--n must be at least 10 samples (got {args.n})")
    if not 0 < args.alpha < 1:
        raise ValueError(f"--alpha must be in (0, 1) (got {args.alpha})")
    given = [flag for flag in MODELS_ONLY if getattr(args, flag[2:]) not in (None, False)]
    if args.pair == "toy" and given:
        raise ValueError(
            f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to --pair models "
            "only (the toy pair has no models, tokenizer or prompt): add --pair models, or drop "
            f"{'it' if len(given) == 1 else 'them'}"
        )
    args.drafter = drafter_spec(args.drafter).name  # a one-line error names the near ones
    lacks = toy_unsupported(args.drafter)
    if args.pair == "toy" and lacks is not None:
        raise ValueError(
            f"the toy pair has {lacks}: use --pair models for --drafter {args.drafter}"
        )
    tree = drafter_spec(args.drafter).tree
    shape = _check_tree_flags(args, tree)
    variant = next((m for m in (*MUTANTS, *TREE_MUTANTS) if m.name == args.mutant), EXACT_VARIANT)
    _check_mutant(variant, args.drafter, tree)
    _check_swaps(variant, args.drafter)
    if args.heads is not None:
        _check_heads(args.heads, args.drafter)
    options = replace(
        shape,
        exit_layer=args.exit_layer,
        model_cls=variant.drafter_cls,
        make_cache=variant.make_cache,
        heads=args.heads,
    )
    fmt: PromptFormat | None = None  # how the models' prompt was formatted
    if args.pair == "toy":
        target, draft = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
        context = list(REPEATING_PROMPT) if tree else [1, 2]
    else:
        spec = drafter_spec(args.drafter)
        draft_spec = (args.draft or BUNDLED) if spec.uses_draft_model else None
        pair = load_pair(
            args.target or BUNDLED,
            draft_spec,
            dtype=torch.float32,
            progress=say,
            drafter=args.drafter if spec.uses_draft_model else None,
        )
        target, draft = pair.target, pair.draft
        if args.drafter in CROSS_TOKENIZER_DRAFTERS:
            translation = cross_tokenizers(  # once for the many drafters the suite builds
                pair.tokenizer,
                pair.draft_tokenizer,
                target_vocab=vocab_size(target),
                draft_vocab=vocab_size(draft),
            )
            options = replace(
                options,
                tokenizer=pair.tokenizer,
                draft_tokenizer=pair.draft_tokenizer,
                translation=translation,
            )
        prompt = DEFAULT_PROMPT if args.prompt is None else utf8_text(args.prompt, "--prompt")
        context = prompt_ids(pair.tokenizer, prompt, raw=args.raw)
        fmt = prompt_format(pair.tokenizer, raw=args.raw)
    if args.drafter == "tree-medusa":
        options = _medusa_depth(options, target, given=args.tree_depth is not None)

    def make_drafter(sampling: SamplingConfig) -> AnyDrafter:
        return build_drafter(
            args.drafter, target=target, draft=draft, sampling=sampling, options=options
        )

    make_drafter(SamplingConfig())  # bad weights or options fail here, before the first sample
    late = args.drafter in HEAD_DRAFTERS
    with torch.inference_mode():
        results = run_suite(
            target,
            draft,
            context,
            _settings(args.settings, options.tree_depth if tree else None, late=late),
            n=args.n,
            alpha=args.alpha,
            variant=variant,
            progress=progress_bar,
            make_drafter=make_drafter,
        )
    print(f"sampler: {variant.name} ({variant.description}); family-wise alpha {args.alpha} (Holm)")
    if fmt is not None:
        how = "through the chat template" if fmt == "chat" else "as raw text"
        print(f"prompt: {len(context)} tokens, {how}")
    print(table(results))
    rejected = sum(r.reject for r in results)
    print(f"{rejected} of {len(results)} tests reject equality in law")
    if args.json:
        meta: dict[str, object] = {
            "pair": args.pair,
            "variant": variant.name,
            "n": args.n,
            "alpha": args.alpha,
        }
        if fmt is not None:
            meta["prompt_format"] = fmt
        if args.heads is not None:
            meta["heads"] = args.heads
        Path(args.json).write_text(to_json(results, meta), encoding="utf-8")
    return 1 if rejected else 0
