"""End to end: `specviz bench endpoint` against llama.cpp's OpenAI-compatible server
(llama-cpp-python), serving the bundled SmolLM2 GGUF on the CPU at 127.0.0.1, with its prompt
lookup speculation on and off.

Skipped where llama-cpp-python's server is not installed, except under CI=true, where that is a
failure. Bounded: 3 requests of at most 24 tokens, concurrency 1 and 2, one repetition.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from specviz.bench.report import load_result_view
from specviz.cli import main
from specviz.endpoint.client import EndpointError, served_model
from specviz.endpoint.table import endpoint_rows
from specviz.models.bundled import ensure_bundled_gguf
from specviz.results.schema import read_result

pytestmark = pytest.mark.integration
MAX_TOKENS = 24
REQUESTS = [  # two greedy, one sampled; each long enough to repeat its prompt's words
    {"id": "code-a", "category": "code", "prompt": 'def add(a, b):\n    """Return a + b."""\n',
     "max_new_tokens": MAX_TOKENS, "temperature": 0.0},
    {"id": "json-a", "category": "json", "prompt": "Write a JSON object with keys name and age.",
     "max_new_tokens": MAX_TOKENS, "temperature": 0.0},
    {"id": "prose-a", "category": "prose", "prompt": "Tell a short story about a cat.",
     "max_new_tokens": MAX_TOKENS, "temperature": 1.0},
]  # fmt: skip


def _server_or_skip() -> None:
    """A skip (a failure under CI=true) when llama-cpp-python's server cannot run here."""
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError as err:
        reason = f"llama-cpp-python[server] is not installed ({err})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(gguf: Path, log: Path, lookup: bool) -> tuple[subprocess.Popen[bytes], str]:
    """A llama.cpp server on 127.0.0.1 (prompt lookup on or off), once it lists its model."""
    port = _free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host",
               "127.0.0.1", "--port", str(port), "--n_threads", "1", "--n_ctx", "1024",
               "--model_alias", "smollm2", "--verbose", "False"]  # fmt: skip
    if lookup:
        command += ["--draft_model", "prompt-lookup-decoding", "--draft_model_num_pred_tokens", "4"]
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the llama.cpp server exited: {log.read_text()[-2000:]}")
        try:
            served_model(url)
            _first_prompt(process, url)
            return process, url
        except EndpointError:
            time.sleep(0.5)
    process.kill()
    pytest.fail(f"the llama.cpp server did not answer in 90 s: {log.read_text()[-2000:]}")


def _first_prompt(process: subprocess.Popen[bytes], url: str) -> None:
    """One short chat completion; a server that dies on it fails the test, saying why."""
    body = {"model": "smollm2", "max_tokens": 1,
            "messages": [{"role": "user", "content": "Say hello to the world."}]}  # fmt: skip
    request = urllib.request.Request(
        f"{url}/v1/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    try:
        urllib.request.urlopen(request, timeout=60).read()
    except OSError:
        time.sleep(1.0)
        if process.poll() is None:
            raise
        pytest.fail(
            f"the llama.cpp server died on its first prompt (exit {process.returncode}); a "
            "llama.cpp built for a host with AMX does: reinstall it with CMAKE_ARGS="
            '"-DGGML_NATIVE=OFF" pip install --force-reinstall --no-cache-dir llama-cpp-python'
        )


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    _server_or_skip()
    gguf = ensure_bundled_gguf()
    logs = tmp_path_factory.mktemp("llama")
    started = {name: _start(gguf, logs / f"{name}.log", name == "on") for name in ("on", "off")}
    yield {name: url for name, (_, url) in started.items()}
    for process, _ in started.values():
        process.terminate()
        process.wait(timeout=30)


def _bench(tmp_path: Path, name: str, *flags: str) -> Path:
    workload = tmp_path / "requests.jsonl"
    workload.write_text("\n".join(json.dumps(r) for r in REQUESTS) + "\n")
    out = tmp_path / f"{name}.json"
    argv = ["bench", "endpoint", "--workloads", str(workload), "--concurrency", "1,2"]
    argv += ["--reps", "1", "--warmup", "1", "--out", str(out)]
    code = main([*argv, "--html", str(tmp_path / f"{name}.html"), *flags])
    assert code == 0
    return out


def _check(section: dict[str, object], out: Path) -> None:
    """Both sides answered every request, with tokens from usage; greedy texts compared."""
    runs = section["runs"]
    assert isinstance(runs, list)
    for side in ("spec", "base"):
        mine = [r for r in runs if r["side"] == side]
        # every request at concurrency 1 and 2; the lone sampled one sent twice at 2 (copies)
        assert len(mine) == len(REQUESTS) + len(REQUESTS) + 1
        assert sorted({r["copy"] for r in mine if r["temperature"] == 1}) == [0, 1]
        for r in mine:
            assert isinstance(r["tokens"], int) and 1 <= r["tokens"] <= MAX_TOKENS
            if r["finish_reason"] == "length":  # usage says it ran to the budget
                assert r["tokens"] == MAX_TOKENS
            assert r["text"]
    rows = endpoint_rows(section, 0.1)  # type: ignore[arg-type]
    greedy = [r for r in rows if r["temperature"] == 0]
    assert [r["pairs"] for r in greedy] == [2, 2]
    assert all(0 <= r["identical"] <= 2 for r in greedy)
    assert all(r["paired_speedup"] > 0 and r["throughput_ratio"] > 0 for r in rows)
    assert all(r["engine"]["rate"] is None for r in rows)  # llama.cpp exposes no acceptance
    figs, tables = load_result_view(out)
    assert len(figs) == 5 and "paired speedup" in tables and "absent" in tables
    assert out.with_suffix(".html").stat().st_size > 10_000


def test_lookup_on_and_off_against_a_second_server(servers: dict[str, str], tmp_path: Path) -> None:
    out = _bench(tmp_path, "pair", "--endpoint", servers["on"], "--baseline-endpoint",
                 servers["off"])  # fmt: skip
    result = read_result(out)
    section = result["endpoint"]
    assert section["plan"]["baseline"].startswith("a second server")
    assert section["endpoints"]["spec"]["model"] == "smollm2"
    # llama-cpp-python streams no usage: both sides were asked unstreamed, and TTFT is absent
    assert not section["endpoints"]["spec"]["stream"]
    assert all(r["ttft"] is None for r in section["runs"])
    _check(section, out)


def test_baseline_from_an_earlier_run_of_the_same_requests(
    servers: dict[str, str], tmp_path: Path
) -> None:
    earlier = _bench(tmp_path, "base", "--baseline-endpoint", servers["off"])
    assert {r["side"] for r in read_result(earlier)["endpoint"]["runs"]} == {"base"}
    out = _bench(tmp_path, "joined", "--endpoint", servers["on"], "--baseline-result", str(earlier))
    section = read_result(out)["endpoint"]
    assert "restarted" in section["plan"]["baseline"]
    _check(section, out)
