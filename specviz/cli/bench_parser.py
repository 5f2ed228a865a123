"""The `specviz bench` parser: the options every study reads, and a subcommand a study.

`specviz bench [STUDY] [OPTIONS]`: with no study named, the speedup study runs. The options every
local study reads (specviz.bench.sweep.check) may come before or after the study's name; a
study's own options (specviz.bench.sweeps) come after it. A flag that asked for a study before
the studies were subcommands (`--tree-sweep`, `--cross`), or a study's own option given to
another, is refused with the spelling to use instead. The commands with parsers of their own
(replay, passes, identity, markdown, saved) are specviz.cli.bench's.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from specviz.bench.sweep import Sweep, add_policy_arguments, add_tree_arguments, floats, ints
from specviz.bench.sweeps import studies
from specviz.bench.sweeps.batch import STEP_BATCH_SIZES
from specviz.models.loading import BUNDLED, DTYPES, MODEL_SPEC_HELP
from specviz.results.records import DEFAULT_PRICE_PER_HOUR
from specviz.runtime import HelpFormatter, add_threads_argument
from specviz.workloads import AGENT_WORKLOADS, WORKLOADS

DEFAULT_STUDY = "speedup"  # what `specviz bench` runs when no study is named
RETIRED = {  # the flags that asked for a study before the subcommands, and their spelling now
    "--tree-sweep": "specviz bench trees --nodes N,...",
    "--cross": "specviz bench cross --drafters DRAFTER,...",
}
STUDY_HELP = {  # each study's line in `specviz bench --help`
    "speedup": "the γ sweep and policies against plain decoding and transformers (the default)",
    "trees": "the tree drafters' node-budget sweep against their chain",
    "batch": "plain and speculative decoding of the same requests at each batch size",
    "levers": "speculation beside lower precision and the small model",
    "memory": "drafting from memory on the agent workloads, run in order",
    "cross": "a draft with another tokenizer: the cross-tokenizer drafters",
    "endpoint": "a served model, with speculation on and off",
    "heads": "the drafting heads beside the other drafters",
}
DESCRIPTION = (
    "Benchmark speculative decoding on workloads, interleaved with plain decoding and "
    "transformers' assisted generation; writes JSON and an HTML report. The first word names "
    "the study (each with --help): speedup (the default), trees (the tree drafters' "
    "node-budget sweep), batch (plain and speculative decoding of the same requests at each "
    "batch size), levers (speculation beside lower precision and the small model), memory "
    "(drafting from memory on the agent workloads, run in order), cross (a draft with another "
    "tokenizer: the cross-tokenizer drafters against transformers), endpoint (a served "
    "model), heads (the drafting heads beside the other drafters). With flags of their own: "
    "replay (γ policies replayed on recorded target passes), passes (a target pass against a "
    "1-token step, on both forwards), identity (a pair's greedy identity at T = 0), markdown "
    "(saved results' tables) and saved (a saved result's HTML report, rebuilt)."
)


class Refused(argparse.Action):
    """A flag this parser does not take here: given, it is an error naming the spelling to use."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self.spelling = str(kwargs.pop("spelling"))
        kwargs |= {"nargs": "?", "default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        parser.error(f"{option_string} is now spelled: {self.spelling}")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `specviz bench` and a subcommand for each study that reads the shared options."""
    b = sub.add_parser(
        "bench",
        help="benchmark speedup on workloads against plain and transformers",
        description=DESCRIPTION,
        formatter_class=HelpFormatter,
    )
    add_shared_arguments(b)
    local = [s for s in studies() if not s.own_flags]
    words = b.add_subparsers(dest="study", metavar="STUDY", title="studies")
    b.set_defaults(study=DEFAULT_STUDY)
    suppressed = argparse.ArgumentParser(add_help=False)
    add_shared_arguments(suppressed)  # given before the study's name, they stand
    for action in suppressed._actions:  # no default of theirs overrides one given before
        suppress_default(action)
    for study in local:
        p = words.add_parser(
            study.name,
            parents=[suppressed],
            help=STUDY_HELP[study.name],
            description=study.__doc__,
            formatter_class=HelpFormatter,
        )
        study.add_arguments(p)
        refuse_others(p, study, local)
    refuse_others(b, None, local)


def suppress_default(action: argparse.Action) -> None:
    """Give action no default (one given before the study's name stands), its help still
    saying the default the bench parser fills in."""
    shown = action.default
    action.default = argparse.SUPPRESS
    text = action.help or ""
    unshown = shown in (None, False, argparse.SUPPRESS) or text == argparse.SUPPRESS
    if text and not unshown and "default" not in text.lower():
        action.help = f"{text} (default: {str(shown).replace('%', '%%')})"


def refuse_others(parser: argparse.ArgumentParser, study: Sweep | None, local: list[Sweep]) -> None:
    """Refuse on parser each other study's own options, naming that study's subcommand."""
    for other in local:
        if other is not study:
            for flag in own_options(other):
                spelling = f"specviz bench {other.name} {flag} ..."
                parser.add_argument(flag, action=Refused, spelling=spelling)


def own_options(study: Sweep) -> list[str]:
    """The option strings of a study's own flags."""
    probe = argparse.ArgumentParser(add_help=False)
    study.add_arguments(probe)
    return [flag for action in probe._actions for flag in action.option_strings]


def add_shared_arguments(b: argparse.ArgumentParser) -> None:
    """Register the options every study reads: models, workloads, settings, output."""
    add_model_arguments(b)
    add_setting_arguments(b)
    add_run_arguments(b)
    for flag, spelling in RETIRED.items():
        b.add_argument(flag, action=Refused, spelling=spelling)


def add_model_arguments(b: argparse.ArgumentParser) -> None:
    """Register the target, the drafts, the workloads and how prompts reach the models."""
    b.add_argument("--target", default=BUNDLED, help=f"target: {MODEL_SPEC_HELP}")
    b.add_argument(
        "--draft",
        action="append",
        help=f"draft: {MODEL_SPEC_HELP}; repeat to compare drafts (default: {BUNDLED})",
    )
    b.add_argument(
        "--workloads",
        default=None,
        help=f"comma list of {(*WORKLOADS, *AGENT_WORKLOADS)} or JSONL paths (default: code; "
        "the memory study's: the agent workloads)",
    )
    b.add_argument(
        "--raw",
        action="store_true",
        help="send each prompt as plain text to continue; by default it goes through the "
        "target tokenizer's chat template (one user turn) where the tokenizer has one",
    )
    b.add_argument("--limit", type=int, default=0, help="first N prompts of each workload (0: all)")
    b.add_argument(
        "--heads",
        metavar="DIR",
        help="head drafters (eagle, medusa and their trees): the folder of "
        "eagle3.safetensors / medusa.safetensors trained for --target "
        "(default: the heads shipped for the bundled target); they verify through the target "
        "forward plain decoding runs on",
    )


def add_setting_arguments(b: argparse.ArgumentParser) -> None:
    """Register the settings: γs, temperatures, drafters, policies and the tree options."""
    b.add_argument("--gammas", type=ints, default="4", help="comma list, e.g. 1,2,3,4,6,8")
    b.add_argument(
        "--temperatures",
        type=floats,
        default=None,
        help="comma list, e.g. 0,1 (default: each prompt's own)",
    )
    b.add_argument(
        "--drafters",
        default=None,
        help="comma list of model, model:trimmed (head cut to 8,192 tokens), ngram, early-exit, "
        "early-exit:shared (the same layers drafting into the target's own KV cache), "
        "ngram+model, ngram+model:trimmed (n-gram lookup where the text repeats, else the "
        "draft), eagle, medusa (drafting heads on the target's own features: --heads), "
        "tree-model, tree-model:sampled, tree-ngram, tree-eagle, tree-medusa "
        "(token trees verified in one pass: --tree-nodes, --tree-depth, --tree-width; no "
        "transformers counterpart) (default: model; the trees, memory, cross and heads "
        "studies' own)",
    )
    add_policy_arguments(b)
    add_tree_arguments(b)


def add_run_arguments(b: argparse.ArgumentParser) -> None:
    """Register how the run goes: repetitions, price, dtype, device, forwards, output."""
    b.add_argument("--reps", type=int, default=3, help="timed repetitions after one warm-up")
    b.add_argument("--no-hf", action="store_true", help="skip transformers' assisted generation")
    b.add_argument(
        "--price-per-hour",
        type=float,
        default=DEFAULT_PRICE_PER_HOUR,
        help=f"USD per device-hour for the cost per 1k tokens (default {DEFAULT_PRICE_PER_HOUR}: "
        "a small cloud CPU instance; give your GPU's rate there)",
    )
    b.add_argument(
        "--dtype", default="float32", choices=sorted(DTYPES), help="weights' and compute dtype"
    )
    b.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    add_threads_argument(b)
    b.add_argument("--no-pack", action="store_true", help="no oneDNN weight pre-packing on CPU")
    b.add_argument(
        "--no-lean",
        action="store_true",
        help="draft through transformers' forward instead of specviz.fast.lean's "
        "(small Llama drafts; the drafting heads' target forward follows --lean-target)",
    )
    b.add_argument(
        "--lean-target",
        action="store_true",
        help="run the target (plain and speculative) through specviz.fast.lean's forward where "
        "it applies (packed Llama targets); transformers' own generation keeps its forward",
    )
    b.add_argument(
        "--step-batch-sizes",
        type=ints,
        default=STEP_BATCH_SIZES,
        metavar="B,...",
        help="comma list of batch sizes at which to time one plain decode step of the target",
    )
    b.add_argument("--out", default="bench.json", help="JSON results")
    b.add_argument(
        "--html", default=None, help="self-contained plotly report (default: beside --out, .html)"
    )
