"""The planted-fault proxy in front of a stub server: the replace fault changes the stated share
of answers, reproducibly per seed; pass changes none; /planted counts them."""

from __future__ import annotations

import json
import math
import random
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


LAW = {"a": 0.5, "b": 0.2, "c": 0.15, "d": 0.1, "e": 0.05}


class LawHandler(EchoHandler):
    """Draws one token from LAW by the request's seed; reports LAW's logprobs when asked, and
    counts the requests that asked."""

    with_logprobs = 0

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        token = random.Random(body["seed"]).choices(list(LAW), weights=list(LAW.values()))[0]
        choice: dict[str, Any] = {"text": token, "finish_reason": "length"}
        if body.get("logprobs"):
            type(self).with_logprobs += 1
            top = {t: math.log(p) for t, p in LAW.items()}
            choice["logprobs"] = {"tokens": [token], "top_logprobs": [top]}
        self._send({"choices": [choice]})


def test_one_token_requests_get_the_fault_from_the_law_asked_once() -> None:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), LawHandler)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    proxy, url = serve(f"http://127.0.0.1:{upstream.server_address[1]}", "first-token", 0.1)
    try:
        body = {"prompt": "x", "max_tokens": 1, "temperature": 1.0}
        answers = [
            post(url, "/v1/completions", body | {"seed": s})["choices"][0] for s in range(4000)
        ]
        assert LawHandler.with_logprobs == 1  # the law, asked once for every seed
        assert all(a.get("logprobs") is None for a in answers)
        share = sum(a["text"] == "e" for a in answers) / len(answers)
        assert share == pytest.approx(0.05 + 0.1, abs=0.02)  # e: the 5th likeliest, + TV 0.1
        assert json.loads(get(url, "/planted")[1])["mean_tv"] == pytest.approx(0.1)
    finally:
        for server in (proxy, upstream):
            server.shutdown()
            server.server_close()
