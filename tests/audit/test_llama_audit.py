"""End to end against llama.cpp's OpenAI-compatible server (llama-cpp-python) serving the
bundled SmolLM2 GGUF on the CPU: prompt lookup on at one server, off at another, a planted-fault
proxy (specviz.audit.proxy) in front of the first; and the bad inputs refused before sampling.

Bounded to a few minutes: one prompt, N 90 a side and k, 20 logprob requests.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from specviz.audit.power import power
from specviz.audit.proxy import FaultProxy
from specviz.cli import main
from specviz.models.bundled import ensure_bundled_gguf

from ..endpoint.test_llama_server import _free_port, _server_or_skip, _start

pytestmark = pytest.mark.integration
PROMPT = "The list: apple, banana, cherry, apple, banana, cherry, apple,"
N = 90
PLANTED_TV = 0.5


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    _server_or_skip()
    gguf = ensure_bundled_gguf()
    logs = tmp_path_factory.mktemp("llama")
    started = {name: _start(gguf, logs / f"{name}.log", name == "on") for name in ("on", "off")}
    proxies = {
        fault: FaultProxy(_free_port(), started["on"][1], fault, PLANTED_TV)
        for fault in ("pass", "first-token")
    }
    for proxy in proxies.values():
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
    urls = {name: url for name, (_, url) in started.items()}
    yield urls | {f: f"http://127.0.0.1:{p.server_address[1]}" for f, p in proxies.items()}
    for proxy in proxies.values():
        proxy.shutdown()
        proxy.server_close()
    for process, _ in started.values():
        process.terminate()
        process.wait(timeout=30)


def audit(tmp_path: Path, spec: str, plain: str, *flags: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "audit.json"
    code = main(
        [
            "audit",
            "--endpoint",
            spec,
            "--plain-endpoint",
            plain,
            "--api",
            "llama.cpp",
            "--prompt",
            PROMPT,
            "--n",
            str(N),
            "--logprob-samples",
            "30",
            "--json",
            str(out),
            *flags,
        ]
    )
    return code, json.loads(out.read_text())


def test_pass_through_is_not_flagged(servers: dict[str, str], tmp_path: Path) -> None:
    code, result = audit(tmp_path, servers["pass"], servers["off"])
    assert result["verdict"] != "not exact" and code in (0, 3), result["tests"]
    assert result["logprob_check"]["applies"] and not result["logprob_check"]["reject"]
    assert result["command"].startswith("specviz audit --endpoint")


def test_a_planted_first_token_fault_is_flagged(servers: dict[str, str], tmp_path: Path) -> None:
    assert power(PLANTED_TV, N, N, 7, 0.007 / 2) > 0.99  # last look, Holm's level, 2 tests
    code, result = audit(tmp_path, servers["first-token"], servers["off"])
    assert (code, result["verdict"]) == (1, "not exact"), result["tests"]


def test_greedy_outputs_agree_or_tie(servers: dict[str, str], tmp_path: Path) -> None:
    code, result = audit(
        tmp_path, servers["on"], servers["off"], "--temperature", "0", "--greedy-tokens", "24"
    )
    assert result["verdict"] == "exact" and code == 0, result["cases"]


class SeedlessHandler(BaseHTTPRequestHandler):
    """An OpenAI-like server that answers every completion differently, whatever its seed."""

    answers = iter(range(10**9))

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._send({"data": [{"id": "stub"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self._send(
            {"choices": [{"text": f"answer {next(self.answers)}", "finish_reason": "length"}]}
        )

    def _send(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def seedless() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), SeedlessHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one-line error of a refused audit (exit 2, nothing sampled)."""
    assert main(["audit", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("specviz: error: ") and "\n" not in err
    return err


def test_bad_inputs_are_refused_in_one_line(
    servers: dict[str, str], seedless: str, capsys: pytest.CaptureFixture[str]
) -> None:
    off = servers["off"]
    dead = f"http://127.0.0.1:{_free_port()}"
    assert "cannot reach" in refused(capsys, "--endpoint", dead, "--plain-endpoint", off)
    assert "does not serve model 'nope'" in refused(
        capsys, "--endpoint", servers["on"], "--plain-endpoint", off, "--model", "nope"
    )
    assert "cannot apply --top-k 5" in refused(
        capsys, "--endpoint", servers["on"], "--plain-endpoint", off, "--top-k", "5"
    )
    assert "ignores `seed`" in refused(capsys, "--endpoint", seedless, "--plain-fields", "{}")
    assert "needs its plain side" in refused(capsys, "--endpoint", servers["on"])
    assert "--k takes numbers 1 to 4" in refused(
        capsys, "--endpoint", servers["on"], "--plain-endpoint", off, "--k", "7"
    )
