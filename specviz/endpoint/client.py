"""One request to an OpenAI-compatible server, timed: text, TTFT, E2E and the server's `usage`.

Terms. TTFT (time to first token): seconds from sending the request to the first streamed chunk
that carries text. E2E: seconds from sending to the end of the response. n: the completion
tokens the server counted (`usage.completion_tokens`). A chunk may carry several tokens (an
engine streams all the tokens one verification accepted at once), so the count of chunks is
recorded but never used as n. A streamed response carries `usage` when the server honours
`stream_options.include_usage`; a server that does not (llama-cpp-python's) is asked without
streaming, where `usage` comes whole but TTFT does not exist (None, reported absent).

Only the standard library: http.client, one connection per request.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from specviz.endpoint.engine import request_acceptance

TIMEOUT_S = 600.0  # one request, connection to last byte


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """A server: its base URL (scheme://host:port, no /v1), the model name it serves, and whether
    requests go to /v1/chat/completions (chat) or /v1/completions (raw text)."""

    url: str
    model: str
    chat: bool
    stream: bool = True  # False where its streamed responses carry no usage
    extra: tuple[tuple[str, Any], ...] = ()  # more JSON fields sent in every request


@dataclass(frozen=True, kw_only=True)
class Job:
    """What one request asks: its prompt, budget and sampling (seed: the server's, if it takes
    one)."""

    request: str
    category: str
    prompt: str
    max_tokens: int
    temperature: float
    seed: int


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One answered request, timed (seconds; ttft None without streaming)."""

    text: str
    e2e: float
    ttft: float | None
    completion_tokens: int | None  # usage.completion_tokens; None when the server sent none
    prompt_tokens: int | None
    chunks: int
    finish_reason: str | None
    engine: dict[str, float] = field(default_factory=dict)  # per-request acceptance, if any


class EndpointError(RuntimeError):
    """A server that cannot be reached or answered with an error."""


def base_url(url: str) -> str:
    """'http://host:8000/v1/' → 'http://host:8000'; ValueError for what is not an http URL."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"an endpoint is an http(s) URL such as http://127.0.0.1:8000 (got {url!r})"
        )
    path = parts.path.rstrip("/")
    path = path[: -len("/v1")] if path.endswith("/v1") else path
    return f"{parts.scheme}://{parts.netloc}{path}"


def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    """A connection to url's host and the path prefix of the URL."""
    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return kind(parts.netloc, timeout=timeout), parts.path


def get(url: str, path: str, timeout: float = 10.0) -> tuple[int, str]:
    """GET url + path: (status, body); EndpointError when nothing answers."""
    conn, prefix = _connection(url, timeout)
    try:
        conn.request("GET", prefix + path)
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    except OSError as err:
        raise EndpointError(f"{url}{path}: {err}") from None
    finally:
        conn.close()


def served_model(url: str) -> str:
    """The first model id the server lists at /v1/models; EndpointError, saying what to check,
    when the server does not answer or lists none."""
    status, body = get(url, "/v1/models")
    if status != 200:
        raise EndpointError(
            f"{url}/v1/models answered {status}: is this an OpenAI-compatible server?"
        )
    try:
        models = [m["id"] for m in json.loads(body)["data"]]
    except (ValueError, KeyError, TypeError):
        raise EndpointError(f"{url}/v1/models is not an OpenAI model list") from None
    if not models:
        raise EndpointError(f"{url}/v1/models lists no model: give --endpoint-model")
    return str(models[0])


def body(endpoint: Endpoint, job: Job) -> dict[str, Any]:
    """The JSON a job sends: one user turn (chat) or the raw prompt; streamed with usage."""
    out: dict[str, Any] = {
        "model": endpoint.model,
        "max_tokens": job.max_tokens,
        "temperature": job.temperature,
        "seed": job.seed,
        "stream": endpoint.stream,
        **dict(endpoint.extra),
    }
    if endpoint.stream:
        out["stream_options"] = {"include_usage": True}
    if endpoint.chat:
        return out | {"messages": [{"role": "user", "content": job.prompt}]}
    return out | {"prompt": job.prompt}


def _events(response: http.client.HTTPResponse) -> Iterator[tuple[float, dict[str, Any]]]:
    """The JSON objects of a server-sent event stream, each with its arrival time (perf_counter
    seconds), up to `data: [DONE]`."""
    while line := response.readline():
        text = line.decode("utf-8", "replace").strip()
        if not text.startswith("data:"):
            continue
        data = text[len("data:") :].strip()
        if data == "[DONE]":
            return
        try:
            yield time.perf_counter(), json.loads(data)
        except ValueError:
            raise EndpointError(f"a streamed event is not JSON: {data[:200]!r}") from None


def _piece(choice: dict[str, Any]) -> str:
    """The text one choice carries: a chat delta's content or a completion's text."""
    if "delta" in choice:
        return str((choice.get("delta") or {}).get("content") or "")
    if "message" in choice:
        return str((choice.get("message") or {}).get("content") or "")
    return str(choice.get("text") or "")


def send(endpoint: Endpoint, job: Job, timeout: float = TIMEOUT_S) -> Reply:
    """Send one job and time it (EndpointError when the server fails it)."""
    path = "/v1/chat/completions" if endpoint.chat else "/v1/completions"
    conn, prefix = _connection(endpoint.url, timeout)
    payload = json.dumps(body(endpoint, job)).encode()
    start = time.perf_counter()
    try:
        conn.request("POST", prefix + path, payload, {"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            detail = response.read().decode("utf-8", "replace")[:300]
            raise EndpointError(f"{endpoint.url}{path} answered {response.status}: {detail}")
        if endpoint.stream:
            chunks = list(_events(response))
        else:
            whole = json.loads(response.read())
            chunks = [(time.perf_counter(), whole)]
        return _reply(chunks, start, time.perf_counter(), endpoint.stream)
    except ValueError:
        raise EndpointError(f"{endpoint.url}{path} answered with what is not JSON") from None
    except OSError as err:
        raise EndpointError(f"{endpoint.url}{path}: {err}") from None
    finally:
        conn.close()


def _reply(
    chunks: list[tuple[float, dict[str, Any]]], start: float, end: float, streamed: bool
) -> Reply:
    """A Reply from a response's JSON chunks (one, unstreamed) with their arrival times."""
    texts: list[str] = []
    usage: dict[str, Any] | None = None
    finish: str | None = None
    engine: dict[str, float] = {}
    ttft = None
    for arrived, chunk in chunks:
        for choice in chunk.get("choices") or []:
            piece = _piece(choice)
            if piece and ttft is None and streamed:
                ttft = arrived - start
            texts.append(piece)
            finish = choice.get("finish_reason") or finish
        usage = chunk.get("usage") or usage
        engine |= request_acceptance(chunk)
    return Reply(
        text="".join(texts),
        e2e=end - start,
        ttft=ttft,
        completion_tokens=_count(usage, "completion_tokens"),
        prompt_tokens=_count(usage, "prompt_tokens"),
        chunks=len(chunks),
        finish_reason=finish,
        engine=engine,
    )


def _count(usage: dict[str, Any] | None, key: str) -> int | None:
    """An integer usage field, None where the server sent none."""
    value = (usage or {}).get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
