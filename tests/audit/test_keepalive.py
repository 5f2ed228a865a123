"""Kept-alive connections: one connection serves a thread's requests, and a connection the
server closed between two requests is replaced without an error."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from specviz.audit.keepalive import Connections


class CountingHandler(BaseHTTPRequestHandler):
    """Echoes each request's number; records the client port of each; closes the connection
    silently (no header) after every third answer when `drop` is set."""

    protocol_version = "HTTP/1.1"
    ports: ClassVar[list[int]] = []
    drop = False

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).ports.append(self.client_address[1])
        data = json.dumps({"n": body["n"]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = self.drop and len(self.ports) % 3 == 0


@pytest.fixture
def server() -> Iterator[str]:
    CountingHandler.ports = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), CountingHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_one_connection_serves_a_threads_requests(server: str) -> None:
    connections = Connections()
    assert [connections.post(server, "/x", {"n": n})["n"] for n in range(10)] == list(range(10))
    assert len(set(CountingHandler.ports)) == 1


def test_a_connection_closed_by_the_server_is_replaced(server: str) -> None:
    CountingHandler.drop = True
    try:
        connections = Connections()
        answers = [connections.post(server, "/x", {"n": n})["n"] for n in range(10)]
    finally:
        CountingHandler.drop = False
    assert answers == list(range(10))
    assert len(set(CountingHandler.ports)) == 4  # a new connection after every third answer


def test_nothing_listening_is_one_line(server: str) -> None:
    with pytest.raises(ValueError, match=r"cannot reach http://127\.0\.0\.1:9/x"):
        Connections().post("http://127.0.0.1:9", "/x", {"n": 0})
