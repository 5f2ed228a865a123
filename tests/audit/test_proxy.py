"""The planted-fault proxy in front of a stub server: the replace fault changes the stated share
of answers, reproducibly per seed; pass changes none; /planted counts them."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from specviz.audit.keepalive import post
from specviz.audit.proxy import FOREIGN, FaultProxy
from specviz.endpoint.client import get


class EchoHandler(BaseHTTPRequestHandler):
    """Answers each completion with its seed as text."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._send({"data": [{"id": "stub"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._send({"choices": [{"text": f"seed {body['seed']}", "finish_reason": "length"}]})

    def _send(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def serve(upstream: str, fault: str, tv: float) -> tuple[FaultProxy, str]:
    proxy = FaultProxy(0, upstream, fault, tv)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    return proxy, f"http://127.0.0.1:{proxy.server_address[1]}"


def texts(url: str, seeds: range) -> list[str]:
    return [
        post(url, "/v1/completions", {"prompt": "x", "seed": s})["choices"][0]["text"]
        for s in seeds
    ]


@pytest.mark.parametrize(("fault", "tv"), [("replace", 0.3), ("pass", 0.0)])
def test_the_stated_share_is_replaced_reproducibly(upstream: str, fault: str, tv: float) -> None:
    proxy, url = serve(upstream, fault, tv)
    try:
        first = texts(url, range(600))
        assert texts(url, range(600)) == first  # a seed's answer stays the same
        share = sum(t == FOREIGN for t in first) / len(first)
        assert share == pytest.approx(tv, abs=0.06)  # about three standard errors at 0.3
        assert all(t == f"seed {s}" for s, t in enumerate(first) if t != FOREIGN)
        status, text = get(url, "/planted")
        planted = json.loads(text)
        assert status == 200 and planted["requests"] == 1200
        assert planted["changed"] == 2 * sum(t == FOREIGN for t in first)
        assert json.loads(get(url, "/v1/models")[1])["data"][0]["id"] == "stub"
    finally:
        proxy.shutdown()
        proxy.server_close()
