"""Greedy identity of a model pair: at T = 0 a speculative decode gives the target's own tokens.

At temperature 0 the target's law puts all its mass on its argmax, so an exact speculative
decoder must emit exactly the tokens of the target's own greedy decoding, whatever the draft
proposes. This checks it on real models, against two references: specviz's plain decoding and
transformers' generate() (do_sample=False, stopping at the same end-of-sequence ids). Command:

    specviz bench identity --target gemma3-270m --draft bundled

decodes each prompt with every cross-tokenizer drafter (or --drafters), prints one line per
decode and exits with status 1 when any output differs from either reference.

Floating point can break a tie. Where the target's two best logits after some prefix are
nearly equal, two exact decoders that sum the same products in another order (a prompt split
at another point, a tree's masked pass, another thread count) may pick either token; from then
on they write different texts, both the target's greedy choice up to rounding. `divergence`
tells such a place from a real difference: it scores the first differing position once more
and reports how far each decoder's token lies below the best logit there (the gap). A gap
within TIE_TOLERANCE, well above float32's rounding of a logit and far below the margin at
almost every position, is a tie; any larger gap is a decoding error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from specviz.api import autoregressive_generate, speculative_generate, stop_ids
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.cross_vocab import cross_tokenizers
from specviz.drafters.names import CROSS_TOKENIZER_DRAFTERS, drafter_spec
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.fast.prefix import common_prefix
from specviz.models.chat import prompt_ids
from specviz.models.generate import generate
from specviz.models.loading import MODEL_SPEC_HELP, ModelLoadError, ModelPair, load_pair
from specviz.runtime import add_threads_argument, set_threads

GREEDY = SamplingConfig(temperature=0.0)
TIE_TOLERANCE = 1e-3  # logits this close to the best are a tie rounding may break either way
PROMPTS = (
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, there was",
    "Water boils at",
)


@dataclass(frozen=True, kw_only=True)
class IdentityRow:
    """One greedy speculative decode against the two references.

    prompt: the prompt's text; drafter: the registered drafter; tokens: how many it emitted;
    plain / generate: whether its tokens equal specviz's plain greedy decoding / transformers'
    generate(); diverges: the index of the first differing token (None when identical to both);
    accepted / proposed: the draft tokens the target kept / was shown; gap: where it differs,
    the gap below the best logit there (divergence(), against the reference it differs from).
    """

    prompt: str
    drafter: str
    tokens: int
    plain: bool
    generate: bool
    diverges: int | None
    accepted: int
    proposed: int
    gap: float | None = None

    @property
    def identical(self) -> bool:
        """True when the decode equals both references."""
        return self.plain and self.generate

    @property
    def tie(self) -> bool:
        """True when it differs only where a rounding tie was broken the other way."""
        return not self.identical and self.gap is not None and self.gap <= TIE_TOLERANCE


@dataclass(frozen=True, kw_only=True)
class Divergence:
    """Where two greedy decodes of one prompt first differ.

    position: the index of the first differing new token; tokens: the reference's and the
    other's token there (None where that decode had already ended); gap: the best logit of the
    target after the prompt and the shared tokens, less the lower of the two tokens' logits
    (inf where a decode had ended).
    """

    position: int
    tokens: tuple[int | None, int | None]
    gap: float

    @property
    def tie(self) -> bool:
        """True when both tokens are within TIE_TOLERANCE of the best logit."""
        return self.gap <= TIE_TOLERANCE


def divergence(
    target: Any, prompt: Sequence[int], reference: Sequence[int], other: Sequence[int]
) -> Divergence | None:
    """Where other first differs from reference (both greedy decodes of prompt by target), and
    the gap there, from one forward of the target (None when the two are identical)."""
    if list(reference) == list(other):
        return None
    n = common_prefix(reference, other)
    pair = tuple(s[n] if n < len(s) else None for s in (reference, other))
    if None in pair:
        return Divergence(position=n, tokens=(pair[0], pair[1]), gap=float("inf"))
    ids = torch.tensor([*prompt, *reference[:n]], device=target.device)
    logits = KVCache(target).forward(ids, keep=1)[-1].double()  # (V,)
    gap = float(logits.max() - torch.min(logits[[pair[0], pair[1]]]))
    return Divergence(position=n, tokens=(pair[0], pair[1]), gap=gap)


def greedy_identity(
    pair: ModelPair,
    prompts: Sequence[str],
    drafters: Sequence[str],
    *,
    gamma: int = 4,
    max_new_tokens: int = 32,
    raw: bool = True,
) -> list[IdentityRow]:
    """Each prompt decoded greedily by each drafter on pair, against both references.

    raw=True sends each prompt as plain text (False: through the target's chat template).
    The shared tokens of the two tokenizers are found once, for every cross-tokenizer drafter.
    """
    translation = None
    if any(d in CROSS_TOKENIZER_DRAFTERS for d in drafters):
        translation = cross_tokenizers(
            pair.tokenizer,
            pair.draft_tokenizer or pair.tokenizer,
            target_vocab=int(pair.target.config.vocab_size),
            draft_vocab=int(pair.draft.config.vocab_size),
        )
    options = DrafterOptions(
        tokenizer=pair.tokenizer, draft_tokenizer=pair.draft_tokenizer, translation=translation
    )
    stop = set(stop_ids(pair.target, pair.tokenizer))
    rows = []
    for text in prompts:
        ids = prompt_ids(pair.tokenizer, text, raw=raw)
        plain = autoregressive_generate(
            pair.target, pair.tokenizer, ids, sampling=GREEDY, max_new_tokens=max_new_tokens
        )
        reference = list(plain.tokens)
        _, generated = generate(pair.target, ids, max_new_tokens, 0.0, stop=stop)
        for name in drafters:
            drafter = build_drafter(
                name, target=pair.target, draft=pair.draft, sampling=GREEDY, options=options
            )
            spec = speculative_generate(
                pair.target,
                drafter,
                pair.tokenizer,
                ids,
                sampling=GREEDY,
                speculation=SpeculationConfig(gamma=gamma, max_new_tokens=max_new_tokens),
            )
            tokens = list(spec.tokens)
            same = tokens == reference and tokens == generated
            other = reference if tokens != reference else generated
            split = None if same else divergence(pair.target, ids, other, tokens)
            rows.append(
                IdentityRow(
                    prompt=text,
                    drafter=name,
                    tokens=len(tokens),
                    plain=tokens == reference,
                    generate=tokens == generated,
                    diverges=None
                    if same
                    else min(common_prefix(tokens, reference), common_prefix(tokens, generated)),
                    accepted=spec.accepted,
                    proposed=spec.proposed,
                    gap=None if split is None else split.gap,
                )
            )
    return rows


def row_line(row: IdentityRow) -> str:
    """One decode in a line: identical or where it diverged, and its acceptance."""
    verdict = "identical" if row.identical else f"DIFFERS from token {row.diverges}"
    verdict += f" (a rounding tie: gap {row.gap:.1e})" if row.tie else ""
    refs = f"plain {'=' if row.plain else '!='}, generate() {'=' if row.generate else '!='}"
    return (
        f"{row.drafter:10s} {row.prompt[:32]!r:36s} {row.tokens:3d} tokens: {verdict} ({refs}); "
        f"accepted {row.accepted}/{row.proposed}"
    )


def build_parser() -> argparse.ArgumentParser:
    """The command's flags."""
    parser = argparse.ArgumentParser(
        prog="specviz bench identity", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--target", default="gemma3-270m", help=f"target: {MODEL_SPEC_HELP}")
    parser.add_argument("--draft", default="bundled", help=f"draft: {MODEL_SPEC_HELP}")
    parser.add_argument(
        "--drafters",
        default=",".join(CROSS_TOKENIZER_DRAFTERS),
        help="comma list of registered drafters (default: the cross-tokenizer ones)",
    )
    parser.add_argument("--prompt", action="append", help="a prompt (repeat; default: four)")
    parser.add_argument("--gamma", type=int, default=4, help="draft tokens per round")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="tokens per decode")
    parser.add_argument(
        "--chat", action="store_true", help="send prompts through the chat template, if any"
    )
    add_threads_argument(parser)
    return parser


def identity_command(argv: Sequence[str] | None = None) -> int:
    """Run the check; 0 when every decode is identical to both references or differs only at a
    rounding tie, 1 otherwise, 2 for bad input."""
    args = build_parser().parse_args(argv)
    drafters = [d.strip() for d in args.drafters.split(",") if d.strip()]
    try:
        for name in drafters or [""]:
            drafter_spec(name)  # a one-line error naming the close ones
        if args.gamma < 1 or args.max_new_tokens < 1:
            raise ValueError("--gamma and --max-new-tokens must be >= 1")
        set_threads(args.threads)
        pair = load_pair(
            args.target,
            args.draft,
            drafter=drafters[0],
            progress=lambda m: print(m, file=sys.stderr),
        )
        rows = greedy_identity(
            pair,
            args.prompt or PROMPTS,
            drafters,
            gamma=args.gamma,
            max_new_tokens=args.max_new_tokens,
            raw=not args.chat,
        )
    except (ValueError, ModelLoadError) as err:
        print(f"identity: error: {err}", file=sys.stderr)
        return 2
    for row in rows:
        print(row_line(row))
    same, ties = sum(r.identical for r in rows), sum(r.tie for r in rows)
    print(
        f"{same} of {len(rows)} greedy decodes identical to the target's own"
        + (f", {ties} more up to a rounding tie" if ties else "")
    )
    return 0 if same + ties == len(rows) else 1
