"""The app's resident memory over many requests from several sessions, measured in a process of
its own: `python -m tests.app.memory_probe TARGET DRAFT [--requests N] [--users U] [--leak]`.

Users send mixed requests (batched drafters at two γ, a drafter decoding alone, greedy and
sampled, different lengths) through the /complete handler at once; the probe prints JSON: the
RSS in MB after the first request, at the end, and its largest value on the way. --leak keeps
every decode and 4 MB beside it, as a server that kept each request's state would: the negative
control the memory test must catch.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from typing import Any

import torch

from specviz.app.main import SpecVizApp
from specviz.app.scheduler import Admission
from specviz.app.tabs.decode import DecodeTab
from specviz.fast.lean import lean_target_cache

MIXED: list[dict[str, Any]] = [
    {"drafter": "model", "gamma": 3, "temperature": 0.0, "max_new_tokens": 16},
    {"drafter": "model", "gamma": 3, "temperature": 1.0, "max_new_tokens": 24},
    {"drafter": "ngram+model", "gamma": 4, "temperature": 0.7, "top_p": 0.9},
    {"drafter": "ngram", "gamma": 4, "temperature": 0.0, "max_new_tokens": 12},
    {"drafter": "suffix", "gamma": 3, "temperature": 1.0, "max_new_tokens": 8},
]
PROMPTS = ["the cat sat", "a dog ran far", "one fish two fish", "the bird sang"]


def rss_mb() -> float:
    """This process's resident set, in MB."""
    with open(f"/proc/{os.getpid()}/statm") as f:
        resident = int(f.read().split()[1])
    return resident * os.sysconf("SC_PAGE_SIZE") / 2**20


def leak_on_purpose(tab: DecodeTab) -> None:
    """Keep every run the tab makes, with 4 MB beside it (the negative control)."""
    kept: list[Any] = []
    make = tab.run_of

    def run_of(*args: Any) -> Any:
        run = make(*args)
        kept.append((run, torch.ones(2**20)))
        return run

    tab.run_of = run_of  # type: ignore[method-assign]


def fuse_per_request(app: SpecVizApp) -> None:
    """Fuse the target's lean weights for every request again (as the app did before it
    shared them per loaded pair)."""
    app.session.lean_target = lambda pair: lean_target_cache  # type: ignore[method-assign,assignment,return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("target")
    parser.add_argument("draft")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--leak", action="store_true")
    parser.add_argument("--fuse-per-request", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    app = SpecVizApp(args.target, args.draft, admission=Admission.of(rows=4))
    if args.leak:
        leak_on_purpose(app.decode)
    if args.fuse_per_request:
        fuse_per_request(app)
    app.preload().join()  # as the app does when it starts serving
    app.completion.complete(PROMPTS[0], **MIXED[0])
    first = peak = rss_mb()
    lock = threading.Lock()

    def user(u: int) -> None:
        nonlocal peak
        for i in range(u, args.requests, args.users):
            app.completion.complete(PROMPTS[i % len(PROMPTS)], seed=i, **MIXED[i % len(MIXED)])
            with lock:
                peak = max(peak, rss_mb())

    threads = [threading.Thread(target=user, args=(u,)) for u in range(args.users)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    app.session.scheduler.stop()
    print(json.dumps({"first": first, "last": rss_mb(), "peak": peak}))


if __name__ == "__main__":
    main()
