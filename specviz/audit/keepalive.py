"""JSON POSTs over kept-alive HTTP connections: one connection per server and thread, reused
from one request to the next (an audit sends thousands of small requests to the same server).

A server may close an idle connection between two requests; a request that finds its reused
connection closed before any answer is sent once more on a new one. An audit's requests are
seeded, so sending one twice asks for the same answer.
"""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any
from urllib.parse import urlsplit

from specviz.endpoint.client import base_url

TIMEOUT_S = 600.0  # a loaded server computing logprobs can take minutes
STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


class Connections:
    """Kept-alive connections, one per server and thread: use one object from any threads."""

    def __init__(self) -> None:
        self._local = threading.local()

    def post(self, url: str, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST payload as JSON to url + path; the JSON answer (ValueError in one line on any
        failure)."""
        parts = urlsplit(base_url(url))
        data = json.dumps(payload)
        conn, reused = self._connection(parts.scheme, parts.netloc)
        try:
            status, text = _exchange(conn, parts.path + path, data)
        except STALE:
            if not reused:
                raise ValueError(
                    f"cannot reach {url}{path}: the server closed the connection"
                ) from None
            conn.close()
            status, text = self._retry(parts.scheme, parts.netloc, url, parts.path + path, data)
        except OSError as err:
            conn.close()
            raise ValueError(f"cannot reach {url}{path}: {err}") from None
        return _answer(status, text, url, path)

    def _connection(self, scheme: str, netloc: str) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection to netloc, and whether it served a request before."""
        pool: dict[str, http.client.HTTPConnection] = self._local.__dict__.setdefault("pool", {})
        reused = netloc in pool
        if not reused:
            kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
            pool[netloc] = kind(netloc, timeout=TIMEOUT_S)
        return pool[netloc], reused

    def _retry(self, scheme: str, netloc: str, url: str, path: str, data: str) -> tuple[int, str]:
        """Send once more on a new connection."""
        self._local.pool.pop(netloc)
        conn, _ = self._connection(scheme, netloc)
        try:
            return _exchange(conn, path, data)
        except OSError as err:
            conn.close()
            raise ValueError(f"cannot reach {url}: {err}") from None


def _exchange(conn: http.client.HTTPConnection, path: str, data: str) -> tuple[int, str]:
    """One request and its whole answer: (status, text)."""
    conn.request("POST", path, data, {"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read().decode("utf-8", "replace")


def _answer(status: int, text: str, url: str, path: str) -> dict[str, Any]:
    """The JSON of a 200 answer; ValueError in one line otherwise."""
    if status != 200:
        raise ValueError(f"{url}{path} answered {status}: {text[:200]}")
    try:
        answer: dict[str, Any] = json.loads(text)
    except ValueError:
        raise ValueError(f"{url}{path} answered with no JSON: {text[:200]}") from None
    return answer


def post(url: str, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """One POST on a connection of its own (ValueError in one line on any failure)."""
    return Connections().post(url, path, payload)
