"""Translating between a target's and a draft's tokenizers (docs/tokenizers.md).

A *token's text* is what the tokenizer writes for it after an anchor: decode(anchor + [t])
with the anchor's text cut off, where the anchor is a short text ("\\n", ".", " " or "a")
that the tokenizer encodes and decodes unchanged. A token *round-trips* when encoding
anchor + its text gives back exactly anchor + [t]: byte-level markers ("Ġ", "Ċ") and
SentencePiece's "▁" become the spaces they stand for, and tokens that are partial UTF-8
characters, or that the tokenizer would never produce for their own text, do not round-trip.

The *shared tokens* are the pairs (draft id, target id) of round-tripping tokens with the same
text. Both drafters here need the committed text in the draft's tokens (re-encoded from the
target's text) and check the pair before any model work: each tokenizer must give back its
own text, and the two must share at least MIN_SHARED_TOKENS tokens.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch
from torch import Tensor
from transformers import AutoTokenizer

from specviz.core.cache import CachedForward
from specviz.fast.prefix import common_prefix, reusable_prefix

ANCHORS = ("\n", ".", " ", "a")  # tried in turn: the first a tokenizer keeps unchanged
MIN_SHARED_TOKENS = 8  # fewer shared tokens than this and the pair is refused


@dataclass(frozen=True, kw_only=True)
class TokenizerText:
    """One tokenizer's way between token ids and text (special tokens kept as their text).

    tokenizer: a Hugging Face tokenizer; anchor_text and anchor_ids: the anchor (see the
    module's docstring) and its ids; vocab: the width of the model's output over this
    tokenizer's ids (ids at or above it are never used); starts: the ids the tokenizer puts
    before every text it encodes (a SentencePiece model's <bos>; none for a byte-level BPE);
    specials: id -> text of its special tokens (control tokens such as <bos>, <|im_end|>).
    """

    tokenizer: Any
    anchor_text: str
    anchor_ids: tuple[int, ...]
    vocab: int
    starts: tuple[int, ...]
    specials: Mapping[int, str]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ids, special tokens written out, spaces as the tokenizer wrote them."""
        text: str = self.tokenizer.decode(
            list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        return text

    def encode(self, text: str) -> list[int]:
        """text → ids, without the special tokens the tokenizer adds around a text (BOS)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def encode_continuation(self, text: str) -> list[int]:
        """The ids of text as it follows other text: encoded after the anchor, the anchor's
        ids cut off (a SentencePiece tokenizer's leading-space handling then does not apply)."""
        ids = self.encode(self.anchor_text + text)
        n = len(self.anchor_ids)
        return ids[n:] if tuple(ids[:n]) == self.anchor_ids else self.encode(text)

    @property
    def eos(self) -> int | None:
        """The tokenizer's end-of-sequence id, when it has one inside the vocabulary."""
        eos = getattr(self.tokenizer, "eos_token_id", None)
        return eos if isinstance(eos, int) and 0 <= eos < self.vocab else None

    def token_texts(self) -> dict[int, str]:
        """id → text for every id below vocab that round-trips (see the module's docstring)."""
        ids = list(range(min(self.vocab, len(self.tokenizer))))
        anchor = list(self.anchor_ids)
        written = self.tokenizer.batch_decode(
            [[*anchor, t] for t in ids],
            skip_special_tokens=False,
            clean_up_tokenization_spaces=False,
        )
        texts = {
            t: w[len(self.anchor_text) :]
            for t, w in zip(ids, written, strict=True)
            if w.startswith(self.anchor_text) and len(w) > len(self.anchor_text)
        }
        candidates = list(texts)
        encoded = self.tokenizer(
            [self.anchor_text + texts[t] for t in candidates], add_special_tokens=False
        )["input_ids"]
        return {
            t: texts[t]
            for t, back in zip(candidates, encoded, strict=True)
            if list(back) == [*anchor, t]
        }


def special_tokens(tokenizer: Any) -> dict[int, str]:
    """id -> text of a tokenizer's special tokens: those it names (bos, eos, ...) and the added
    tokens it marks special (Gemma's <start_of_turn> and <unusedN>)."""
    named = dict(zip(tokenizer.all_special_ids, tokenizer.all_special_tokens, strict=True))
    added = getattr(tokenizer, "added_tokens_decoder", {})
    return named | {i: t.content for i, t in added.items() if getattr(t, "special", False)}


def start_ids(tokenizer: Any, text: str) -> tuple[int, ...]:
    """The ids a tokenizer puts before text when it adds its special tokens (its <bos>)."""
    plain = list(tokenizer.encode(text, add_special_tokens=False))
    full = list(tokenizer.encode(text, add_special_tokens=True))
    for at in range(len(full) - len(plain) + 1):
        if full[at : at + len(plain)] == plain:
            return tuple(full[:at])
    return ()


def tokenizer_text(tokenizer: Any, vocab: int, role: str) -> TokenizerText:
    """TokenizerText for tokenizer with the first anchor it keeps unchanged (ValueError if none).

    role: 'target' or 'draft', for the error message.
    """
    for anchor in ANCHORS:
        ids = list(tokenizer.encode(anchor, add_special_tokens=False))
        written = tokenizer.decode(
            ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        if ids and written == anchor:
            return TokenizerText(
                tokenizer=tokenizer,
                anchor_text=anchor,
                anchor_ids=tuple(ids),
                vocab=vocab,
                starts=start_ids(tokenizer, anchor),
                specials=MappingProxyType(special_tokens(tokenizer)),
            )
    raise ValueError(
        f"the {role} tokenizer gives back none of {list(ANCHORS)} unchanged after encoding "
        "it: translating between tokenizers needs one that keeps plain text as written; use "
        f"another {role} model"
    )


def check_round_trip(text: TokenizerText, role: str) -> None:
    """ValueError unless the tokenizer gives back its own text: the text of all its tokens in
    a row, encoded and decoded again, must come back unchanged (a normaliser that lowercases,
    strips accents or rewrites characters fails this)."""
    ids = [t for t in range(min(text.vocab, len(text.tokenizer)))]
    special = set(getattr(text.tokenizer, "all_special_ids", ()))
    written = text.decode([t for t in ids if t not in special])
    again = text.decode(text.encode(written))
    if again != written:
        at = max(0, common_prefix(written, again) - 10)
        raise ValueError(
            f"the {role} tokenizer does not give back its own text: encoding and decoding "
            f"turns {written[at : at + 20]!r} into {again[at : at + 20]!r}"
            " (it normalises text). Translating between tokenizers needs tokenizers that keep "
            f"text as written: use another {role} model, or its tokenizer without the normaliser"
        )


@dataclass(frozen=True, kw_only=True)
class VocabMap:
    """The shared tokens of two tokenizers: same text, both round-tripping (one to one).

    draft_ids (S,) and target_ids (S,): the S shared tokens' ids, pair by pair (long);
    to_target / to_draft: the same pairs as maps; the two end-of-sequence tokens are paired
    too when their texts differ (they mean the same thing).
    """

    draft_ids: Tensor
    target_ids: Tensor
    to_target: Mapping[int, int]
    to_draft: Mapping[int, int]

    @property
    def shared(self) -> int:
        """S, the number of shared tokens."""
        return len(self.to_target)


def vocab_map(target: TokenizerText, draft: TokenizerText) -> VocabMap:
    """The shared tokens of target and draft (see VocabMap)."""
    by_text = {text: t for t, text in target.token_texts().items()}
    to_target = {d: by_text[text] for d, text in draft.token_texts().items() if text in by_text}
    d_eos, t_eos = draft.eos, target.eos
    unpaired = d_eos not in to_target and t_eos not in to_target.values()
    if d_eos is not None and t_eos is not None and unpaired:
        to_target[d_eos] = t_eos
    pairs = sorted(to_target.items())
    return VocabMap(
        draft_ids=torch.tensor([d for d, _ in pairs], dtype=torch.long),
        target_ids=torch.tensor([t for _, t in pairs], dtype=torch.long),
        to_target=MappingProxyType(dict(pairs)),
        to_draft=MappingProxyType({t: d for d, t in pairs}),
    )


@dataclass(frozen=True, kw_only=True)
class CrossTokenizers:
    """A target's and a draft's tokenizers (checked) and their shared tokens.

    unread: the target's special tokens that the draft has no special token of the same text
    for; they are left out of the text the draft reads (see draft_ids).
    """

    target: TokenizerText
    draft: TokenizerText
    shared: VocabMap
    unread: frozenset[int] = frozenset()

    def draft_ids(self, target_ids: Sequence[int]) -> list[int]:
        """The committed target ids as the draft reads them: the ids the draft's tokenizer puts
        before a text (its <bos>) in place of the target's, then the ids' text encoded with the
        draft's tokenizer, the target's special tokens left out unless the draft has a special
        token of the same text (it would read a <bos> it does not know as '<', 'bos', '>')."""
        ids = list(target_ids)
        starts = self.target.starts
        if starts and tuple(ids[: len(starts)]) == starts:
            ids = ids[len(starts) :]
        kept = [t for t in ids if t not in self.unread]
        return [*self.draft.starts, *self.draft.encode(self.target.decode(kept))]


def cross_tokenizers(
    target_tokenizer: Any,
    draft_tokenizer: Any,
    *,
    target_vocab: int,
    draft_vocab: int,
    min_shared: int = MIN_SHARED_TOKENS,
) -> CrossTokenizers:
    """Check a pair of tokenizers and find their shared tokens; ValueError for a bad pair.

    target_vocab / draft_vocab: the width of each model's output (config.vocab_size).
    A pair is refused when a tokenizer does not give back its own text, or when they share
    fewer than min_shared tokens. Finding the shared tokens reads both vocabularies: a caller
    that builds many drafters for one pair computes this once and passes it to each
    (DrafterOptions.translation).
    """
    if min_shared < 1:
        raise ValueError(f"min_shared must be >= 1 (got {min_shared})")
    target = tokenizer_text(target_tokenizer, target_vocab, "target")
    draft = tokenizer_text(draft_tokenizer, draft_vocab, "draft")
    check_round_trip(target, "target")
    check_round_trip(draft, "draft")
    shared = vocab_map(target, draft)
    if shared.shared < min_shared:
        raise ValueError(
            f"the draft's and the target's tokenizers share {shared.shared} tokens (same text, "
            f"both round-tripping), fewer than {min_shared}: the draft cannot propose the "
            "target's tokens; pick a draft whose tokenizer writes the same kind of pieces "
            "(the same script, byte-level or not)"
        )
    known = set(draft.specials.values())
    unread = frozenset(t for t, text in target.specials.items() if text not in known)
    return CrossTokenizers(target=target, draft=draft, shared=shared, unread=unread)


def tokenizer_of(model: Any, given: Any, role: str) -> Any:
    """The tokenizer of model: given, else the one saved beside it (the folder or hub id it
    was loaded from, model.name_or_path, read from local files only); ValueError if neither."""
    if given is not None:
        return given
    source = str(getattr(model, "name_or_path", "") or "")
    if source:
        with contextlib.suppress(OSError, ValueError):
            return AutoTokenizer.from_pretrained(source, local_files_only=True)
    where = f" (none found at {source!r})" if source and Path(source).exists() else ""
    field = "tokenizer" if role == "target" else "draft_tokenizer"
    raise ValueError(
        f"the cross-tokenizer drafters need the {role}'s tokenizer and the {role} model has "
        f"none saved beside it{where}: pass DrafterOptions({field}=...)"
    )


class SyncedCache:
    """A draft model's KV cache kept equal to a sequence of draft ids.

    Asked for the logits after ids, it rolls its cache back to the longest common prefix of
    what it holds and ids (a re-encoded text may change its last tokens) and feeds the rest.
    """

    def __init__(self, cache: CachedForward, device: torch.device) -> None:
        """cache: the draft's cached forward, empty; device: where its inputs go."""
        self.cache, self.device = cache, device
        self.ids: list[int] = []  # the draft ids whose keys and values the cache holds

    def next_logits(self, ids: list[int]) -> Tensor:
        """The draft's logits (V_draft,) for the token after ids (at least one id)."""
        if not ids:
            raise ValueError("the draft needs at least one token of context")
        keep = min(reusable_prefix(self.ids, ids), len(self.cache))
        self.cache.crop(keep)
        logits = self.cache.forward(torch.tensor(ids[keep:], device=self.device), keep=1)[-1]
        self.ids = list(ids)
        return logits
