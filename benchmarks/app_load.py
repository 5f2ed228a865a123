"""The app under a classroom's load: U users at once, each sending requests one after another.

    python benchmarks/app_load.py                      # 1, 2, 4 and 8 users, the bundled pair
    python benchmarks/app_load.py --users 2 --requests 2 --target DIR --draft DIR --out F.json

For each number of torch threads (`specviz app --threads`: 1, the default, and 2, both cores
of the 2-core machine) it runs the app in two modes, each in a process of its own (as an app
runs; a second app's models loaded in the same process slow the first's decode at 2 threads),
one after the other, every number of users in turn: with shared batches (the app's default
admission) and one request at a time, every request decoded alone (`specviz app --rows 1
--queue 16 --no-batch`: the app before it shared batches, which queued 16 requests).
Each request goes through the Generate handler, the page's views included, as a browser's
would. The requests are mixed: 16 or 64 new tokens; the default drafter, the trimmed draft
model, n-gram lookup, and suffix decoding (its rows read the app's one memory); T = 0, 0.7 with
top-p 0.9, or 1 with a seed; and one in four is invalid (top-p 0), which must come back with its
message. Each greedy request's text is compared with the text the same settings give decoded
alone (the Step path): the count of identical ones is saved. (A sampled request's tokens are
the solo decode's where the batch pass rounds as the solo pass does; on float32 models the two
round differently in the last bits, and the law, not each token, is what stays the same:
docs/app.md.)

Per users × mode it saves p50 and p95 latency (submit to last token), p50 and p95 time to first
token, tokens/s served (all new tokens over the wall time), the process's RSS after the run,
and the counts of correct answers and messages: benchmarks/results/app/app-load.json, which
`python -m tools.report` renders into docs/app.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch

from specviz.app.main import SpecVizApp
from specviz.app.scheduler import Admission
from specviz.app.views.form import DEFAULTS, Settings, settings_from
from specviz.app.views.run import Run
from specviz.core.events import EMITTING
from specviz.drafters.names import DEFAULT_CONFIG
from specviz.workloads import load_requests

OUT = Path(__file__).parent / "results" / "app" / "app-load.json"
DRAFTERS = (DEFAULT_CONFIG.drafter, "model:trimmed", "ngram", DEFAULT_CONFIG.drafter, "suffix")
SAMPLING: tuple[dict[str, Any], ...] = (
    {"temperature": 0.0},
    {"temperature": 0.7, "top_p": 0.9},
    {"temperature": 1.0},
)


def requests_of(user: int, count: int, pair: dict[str, str]) -> list[dict[str, Any]]:
    """User's requests: the form's values, mixed as the module says (every fourth invalid)."""
    prompts = [r.prompt for r in load_requests("code")]
    asked = []
    for i in range(count):
        n = user * count + i
        values = {**DEFAULTS, **pair, "prompt": prompts[n % len(prompts)], "raw": True}
        values |= {"drafter": DRAFTERS[n % len(DRAFTERS)], "seed": n}
        values |= {"max_new": 16 if n % 2 else 64, **SAMPLING[n % len(SAMPLING)]}
        if n % 4 == 3:
            values["top_p"] = 0
        asked.append(values)
    return asked


def rss_mb() -> float:
    """This process's resident set, in MB."""
    with open(f"/proc/{os.getpid()}/statm") as f:
        resident = int(f.read().split()[1])
    return resident * os.sysconf("SC_PAGE_SIZE") / 2**20


def alone(app: SpecVizApp, s: Settings) -> str:
    """The text s gives decoded by itself (the Step path: no scheduler, no batch)."""
    pair = app.session.pair(s)
    run = app.decode.start(s, pair)
    run.finish()
    return run.text()


def one_request(app: SpecVizApp, values: dict[str, Any]) -> dict[str, Any]:
    """Send values through the Generate handler; its timings and its text, or its message."""
    try:
        s = settings_from(values)
    except ValueError as err:
        return {"message": str(err)}
    start, first, run = time.perf_counter(), None, None
    for out in app.decode.generate(s):
        if isinstance(out[0], Run):
            run = out[0]
            if first is None and any(isinstance(e, EMITTING) for e in run.log):
                first = time.perf_counter()
    end = time.perf_counter()
    if run is None or not run.done:
        return {"message": "no decode: " + str(out[2])}
    tokens = sum(isinstance(e, EMITTING) for e in run.log)
    ttft = (first or end) - start
    return {"latency": end - start, "ttft": ttft, "tokens": tokens, "text": run.text(), "s": s}


def run_users(app: SpecVizApp, users: int, count: int, pair: dict[str, str]) -> dict[str, Any]:
    """users threads, each sending its requests one after another; the figures of the run."""
    results: list[dict[str, Any]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(users)

    def user(u: int) -> None:
        barrier.wait()
        for values in requests_of(u, count, pair):
            outcome = one_request(app, values)
            with lock:
                results.append(outcome)

    wall = time.perf_counter()
    threads = [threading.Thread(target=user, args=(u,)) for u in range(users)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - wall
    answered = [r for r in results if "latency" in r]
    greedy = [r for r in answered if r["s"].sampling.greedy]
    same = sum(r["text"] == alone(app, r["s"]) for r in greedy)
    messages = [r["message"] for r in results if "message" in r]
    if any("top-p must be greater than 0" not in m for m in messages):
        raise SystemExit(f"an invalid request got another message: {messages}")
    return figures(answered, messages, wall) | {"greedy": len(greedy), "greedy_same": same}


def figures(answered: list[dict[str, Any]], messages: list[str], wall: float) -> dict[str, Any]:
    """The latency, time-to-first-token and throughput figures of one run."""
    latency = sorted(r["latency"] for r in answered)
    ttft = sorted(r["ttft"] for r in answered)
    return {
        "requests": len(answered) + len(messages),
        "answered": len(answered),
        "messages": len(messages),
        "p50": statistics.median(latency),
        "p95": percentile(latency, 0.95),
        "ttft_p50": statistics.median(ttft),
        "ttft_p95": percentile(ttft, 0.95),
        "tokens": sum(r["tokens"] for r in answered),
        "seconds": wall,
        "tokens_per_second": sum(r["tokens"] for r in answered) / wall,
        "rss_mb": rss_mb(),
    }


def percentile(values: list[float], q: float) -> float:
    """The q quantile of sorted values (nearest rank)."""
    return values[min(len(values) - 1, max(0, round(q * len(values) + 0.5) - 1))]


MODES = {  # the app's admission in each mode of the study
    "shared batches": Admission.of(),
    "one at a time": Admission.of(rows=1, queue=16, batch=False),  # the old app's queue
}


def measure(args: argparse.Namespace, threads: int, mode: str) -> list[dict[str, Any]]:
    """The app in `mode`, loaded and warmed in this process at `threads` torch threads; a row
    per users count."""
    torch.set_num_threads(threads)
    pair = {"target": args.target, "draft": args.draft, "dtype": "float32"}
    app = SpecVizApp(args.target, args.draft, admission=MODES[mode])
    one_request(app, requests_of(0, 1, pair)[0])  # load and warm: one request by itself
    rows = []
    for count in [int(u) for u in args.users.split(",")]:
        row = {"threads": threads, "users": count, "mode": mode}
        row["rows"] = app.session.scheduler.admission.rows
        rows.append(row | run_users(app, count, args.requests, pair))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def in_own_process(args: argparse.Namespace, threads: int, mode: str) -> list[dict[str, Any]]:
    """measure's rows at `threads` torch threads in `mode`, run by this script in a process of
    its own."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "part.json"
        argv = [sys.executable, __file__, "--users", args.users, "--requests", str(args.requests)]
        argv += ["--threads", str(threads), "--target", args.target, "--draft", args.draft]
        subprocess.run([*argv, "--modes", mode, "--out", str(out)], check=True)
        rows: list[dict[str, Any]] = json.loads(out.read_text())["rows"]
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--users", default="1,2,4,8", help="numbers of users (default: %(default)s)"
    )
    parser.add_argument("--requests", type=int, default=4, help="requests per user (default: 4)")
    parser.add_argument(
        "--threads", default="1,2", help="torch threads to run at (default: %(default)s)"
    )
    parser.add_argument("--target", default="bundled")
    parser.add_argument("--draft", default="bundled")
    parser.add_argument(
        "--modes", default=",".join(MODES), help="the app's modes (default: %(default)s)"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    modes = args.modes.split(",")
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"--modes: no mode {unknown[0]!r}; the modes are {', '.join(MODES)}")
    if len(threads) == 1 and len(modes) == 1:
        rows = measure(args, threads[0], modes[0])
    else:  # each in a process of its own, as an app runs: torch sizes its thread pool once,
        # and a second app's models loaded beside the first slow its decode at 2 threads
        rows = [row for n in threads for m in modes for row in in_own_process(args, n, m)]
    command = "python benchmarks/app_load.py " + " ".join(
        f"--{k} {v!r}" if " " in str(v) else f"--{k} {v}"
        for k, v in vars(args).items()
        if k != "out"
    )
    meta: dict[str, Any] = {"command": command}
    meta |= {"machine": platform.processor() or platform.machine()}
    meta |= {"cpus": os.cpu_count()}
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
