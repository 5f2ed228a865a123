"""Which requests serve each test's samples, and how many tokens each request asks for.

An audit tests the law of the first k tokens for each k it names, with N_k samples per side and
prompt. Request i of a side has its own seed (draw.Drawer.seed), whatever it asks.

- Where a source's outcome is its token sequence (`token_outcomes`), one request of m tokens
  serves the test of every k <= m, so the tests share requests. With N = max N_k requests, the
  test of k uses N_k of them spread evenly: request i when floor((i + 1) N_k / N) >
  floor(i N_k / N). Request i asks for the longest k whose test uses it. A look that tests the
  first fraction of each N_k then draws about that fraction of the N requests, and only N_k of
  them ask for k tokens: with N_1 much larger than N_3 most requests ask for one token, where
  asking every request for the longest k would cost each the extra tokens.
- Elsewhere (text outcomes, one per request) the test of k uses requests 0 .. N_k - 1 of k
  tokens each.

Both sides draw the same requests, so a test compares like with like: under exactness each
side's samples of a test are i.i.d. from one law, whichever lengths served them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

Slot = tuple[int, int]  # (tokens asked, request index)


@dataclass(frozen=True)
class Layout:
    """For each k, the requests its test reads, in the order the test reads them."""

    slots: dict[int, tuple[Slot, ...]]

    def test(self, k: int, count: int) -> tuple[Slot, ...]:
        """The requests behind the first `count` samples of the test of k."""
        return self.slots[k][:count]

    def requests(self, counts: dict[int, int]) -> list[Slot]:
        """The distinct requests that the tests need for counts[k] samples of each k, by index."""
        needed = {slot for k, count in counts.items() for slot in self.test(k, count)}
        return sorted(needed, key=lambda slot: (slot[1], slot[0]))

    def lengths(self, counts: dict[int, int]) -> Counter[int]:
        """How many of those requests ask for each number of tokens."""
        return Counter(tokens for tokens, _ in self.requests(counts))


def layout(sizes: dict[int, int], *, shared: bool) -> Layout:
    """The layout of tests of N_k = sizes[k] samples; shared: one request serves every k up to
    its length (token outcomes)."""
    if not shared:
        return Layout({k: tuple((k, i) for i in range(n)) for k, n in sizes.items()})
    total = max(sizes.values())
    used = {k: spread(n, total) for k, n in sizes.items()}
    longest: dict[int, int] = {}
    for k, indices in used.items():
        for i in indices:
            longest[i] = max(longest.get(i, 0), k)
    return Layout({k: tuple((longest[i], i) for i in indices) for k, indices in used.items()})


def spread(n: int, total: int) -> list[int]:
    """n of the indices 0 .. total - 1 (n <= total), evenly spread; all of them when n = total."""
    return [i for i in range(total) if (i + 1) * n // total > i * n // total]
