"""What the suffix drafters remember across requests: earlier requests' tokens, in a trie.

A SuffixMemory is an ordinary object the caller owns: build one, hand it to every suffix
drafter that should share it (DrafterOptions.memory), save it to a file and load it again.
When a decode ends, the drafter gives it the request's output (and, with prompts=True, its
prompt too: prompt and output as one sequence). It holds at most max_tokens tokens: adding a
request past that budget forgets the oldest requests first, and a single request longer than
the budget keeps only its last max_tokens tokens. Adding or forgetting n tokens costs at most
n * max_depth trie node visits. The trie is a SuffixStore (specviz.drafters.suffix.store): flat
arrays of a fixed number of slots per node, at most two nodes per token remembered, so its
bytes grow in proportion to the tokens it holds (nbytes() reports them).

It also carries what the suffix hybrids learn about their fallback drafter from request to
request: shares[name] = (kept, drafted), the tokens of the drafter registered as name (a draft
model or a head) that the target kept, and that it drafted, in the rounds where memory was too
weak (specviz.drafters.suffix.hybrid). A new request's hybrid starts from them, so its gate
does not start blind each time.

File format (JSON, UTF-8): {"format": "specviz-suffix-memory", "version": 1, "max_tokens": int,
"max_depth": int, "prompts": bool, "requests": [[token id, ...], ...], "shares": {name: [kept,
drafted], ...}}, requests oldest first ("shares" may be absent: none yet); loading rebuilds the
trie from the requests.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specviz.drafters.suffix.nodes import DEFAULT_DEPTH
from specviz.drafters.suffix.store import TOKEN_LIMIT, SuffixStore

FORMAT = "specviz-suffix-memory"
VERSION = 1
# Tokens remembered by default. Each costs a bounded number of array slots, so the bytes stay
# small at this size; what bounds it is loading: a file is rebuilt by adding every token again,
# so a full memory loads in the time its tokens took to add, which should stay a short wait.
DEFAULT_BUDGET = 1 << 18


class SuffixMemory:
    """Earlier requests' tokens (oldest first) and the suffix trie over them (store, a
    SuffixStore holding both)."""

    def __init__(
        self,
        *,
        max_tokens: int = DEFAULT_BUDGET,
        max_depth: int = DEFAULT_DEPTH,
        prompts: bool = False,
    ) -> None:
        """An empty memory of at most max_tokens tokens, with substrings up to max_depth long;
        prompts: remember each request's prompt with its output (else the output alone)."""
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be an integer >= 1 (got {max_tokens!r})")
        self.max_tokens, self.prompts = max_tokens, bool(prompts)
        self.store = SuffixStore(max_depth=max_depth)
        self.shares: dict[str, tuple[int, int]] = {}

    @property
    def max_depth(self) -> int:
        """The longest substring the trie holds."""
        return self.store.max_depth

    def __len__(self) -> int:
        """Tokens remembered now."""
        return len(self.store)

    @property
    def requests(self) -> tuple[tuple[int, ...], ...]:
        """The remembered sequences, oldest first."""
        return self.store.sequences()

    def nbytes(self) -> int:
        """Bytes the memory holds in its trie and token arrays (SuffixStore.nbytes: their
        allocated buffers), which grow with the tokens remembered; small fixed-size fields of
        the objects themselves are not counted."""
        return self.store.nbytes()

    def add(self, tokens: Sequence[int]) -> None:
        """Remember one sequence (its last max_tokens tokens), forgetting the oldest to fit."""
        kept = [int(t) for t in tokens[max(0, len(tokens) - self.max_tokens) :]]
        if any(not 0 <= t < TOKEN_LIMIT for t in kept):
            raise ValueError("token ids must be integers in [0, 2**32)")
        if not kept:
            return
        while self.store.num_sequences and len(self.store) + len(kept) > self.max_tokens:
            self.store.evict()
        self.store.add(kept)

    def add_request(self, ids: Sequence[int], prompt_len: int) -> None:
        """Remember a finished request: ids is its prompt (prompt_len tokens), then its output."""
        if not 0 <= prompt_len <= len(ids):
            raise ValueError(f"prompt_len must be in [0, {len(ids)}] (got {prompt_len})")
        self.add(ids if self.prompts else ids[prompt_len:])

    def to_json(self) -> dict[str, Any]:
        """The memory as the documented JSON object."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "max_tokens": self.max_tokens,
            "max_depth": self.max_depth,
            "prompts": self.prompts,
            "requests": [list(tokens) for tokens in self.requests],
            "shares": {name: list(share) for name, share in self.shares.items()},
        }

    def save(self, path: str | Path) -> None:
        """Write the memory to path as JSON."""
        Path(path).write_text(json.dumps(self.to_json()), encoding="utf-8")

    @classmethod
    def from_json(cls, data: object, where: str = "memory") -> SuffixMemory:
        """A memory rebuilt from the JSON object; ValueError saying what is wrong with it."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f'{where} is not a suffix memory (no "format": "{FORMAT}")')
        if data.get("version") != VERSION:
            raise ValueError(
                f"{where}: suffix memory version {data.get('version')!r} is not supported "
                f"(this version reads {VERSION})"
            )
        shares = data.get("shares", {})
        if not isinstance(shares, dict) or not all(_share(s) for s in shares.values()):
            raise ValueError(
                f'{where}: "shares" must map drafter names to [kept, drafted] integer pairs '
                "with 0 <= kept <= drafted and drafted >= 1"
            )
        requests = data.get("requests")
        if not isinstance(requests, list) or not all(
            isinstance(r, list) and all(_token(t) for t in r) for r in requests
        ):
            raise ValueError(
                f'{where}: "requests" must be a list of lists of token ids in [0, 2**32)'
            )
        try:
            memory = cls(
                max_tokens=data.get("max_tokens", DEFAULT_BUDGET),
                max_depth=data.get("max_depth", DEFAULT_DEPTH),
                prompts=data.get("prompts") is True,
            )
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        for tokens in requests:
            memory.add(tokens)
        memory.shares = {str(name): (share[0], share[1]) for name, share in shares.items()}
        return memory

    @classmethod
    def load(cls, path: str | Path) -> SuffixMemory:
        """The memory saved at path; ValueError naming the file when it cannot be read."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            reason = getattr(err, "strerror", None) or str(err)
            raise ValueError(f"suffix memory {path}: cannot read it ({reason})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"suffix memory {path} is not JSON ({err})") from None
        return cls.from_json(data, where=f"suffix memory {path}")


def _token(value: object) -> bool:
    """True for a token id: an int in [0, 2**32) (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < TOKEN_LIMIT


def _share(value: object) -> bool:
    """True for a [kept, drafted] pair of ints with 0 <= kept <= drafted, drafted >= 1."""
    if not isinstance(value, list) or len(value) != 2:
        return False
    kept, drafted = value
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    return ints and 0 <= kept <= drafted and drafted >= 1


def replayed_size(memory: SuffixMemory) -> dict[str, float]:
    """A memory's tokens, and a fresh replay of its requests: bytes kept (tracemalloc) and
    seconds of updates, per stored token."""
    requests = memory.requests
    tokens = sum(len(r) for r in requests)
    fresh = SuffixMemory(max_tokens=memory.max_tokens, max_depth=memory.max_depth)
    start = time.perf_counter()
    for tokens_of in requests:
        fresh.add(tokens_of)
    seconds = time.perf_counter() - start
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = SuffixMemory(max_tokens=memory.max_tokens, max_depth=memory.max_depth)
        for tokens_of in requests:
            kept.add(tokens_of)
        size = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    per = max(tokens, 1)
    return {
        "tokens": tokens,
        "bytes_per_token": size / per,
        "update_seconds_per_token": seconds / per,
    }
