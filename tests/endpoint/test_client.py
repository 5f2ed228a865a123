"""The client's parsing of OpenAI-compatible replies, against a stand-in server on 127.0.0.1.

The stand-in only replays recorded reply shapes (it is no engine): the end-to-end test against a
real server is test_llama_server.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from specviz.endpoint.client import Endpoint, EndpointError, Job, base_url, body, send, served_model
from specviz.endpoint.sweep import with_usage

# One chunk carries three tokens (as when a verification accepts several): n comes from usage.
CHUNKS = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
    {"choices": [{"index": 0, "delta": {"content": "def add(a, b):"}}]},
    {"choices": [{"index": 0, "delta": {"content": " return"}, "finish_reason": "length"}]},
    {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 9, "total_tokens": 16},
     "metrics": {"speculative_decoding": {"draft_acceptance_rate": 0.5}}},
]  # fmt: skip
WHOLE = {
    "choices": [{"index": 0, "text": "whole text", "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}


def _handler(usage_in_stream: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        seen: ClassVar[list[dict[str, Any]]] = []

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            data = json.dumps({"data": [{"id": "served-model"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            Handler.seen.append(request)
            if request["max_tokens"] == 0:
                self.send_response(400)
                self.end_headers()
                self.wfile.write(b'{"error": "max_tokens must be at least 1"}')
                return
            self.send_response(200)
            self.end_headers()
            if not request["stream"]:
                self.wfile.write(json.dumps(WHOLE).encode())
                return
            chunks = CHUNKS if usage_in_stream else [c for c in CHUNKS if "usage" not in c]
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

    return Handler


@pytest.fixture(params=[True, False], ids=["usage-streamed", "no-usage-streamed"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, type]]:
    handler = _handler(request.param)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1/", handler
    httpd.shutdown()
    httpd.server_close()


JOB = Job(request="r", category="code", prompt="p", max_tokens=9, temperature=0.0, seed=3)


def test_streamed_reply_counts_tokens_from_usage_not_chunks(server: tuple[str, type]) -> None:
    url, handler = server
    endpoint = Endpoint(url=base_url(url), model=served_model(base_url(url)), chat=True)
    assert endpoint.model == "served-model"
    reply = send(endpoint, JOB)
    assert reply.text == "def add(a, b): return"
    assert reply.ttft is not None and 0 < reply.ttft <= reply.e2e
    assert handler.seen[-1]["stream_options"] == {"include_usage": True}
    if reply.completion_tokens is None:  # this server's stream has no usage: ask unstreamed
        assert reply.chunks == 3
        fixed = with_usage(endpoint, JOB)
        assert fixed.stream is False
        whole = send(fixed, JOB)
        assert (whole.completion_tokens, whole.ttft, whole.text) == (2, None, "whole text")
    else:
        assert (reply.completion_tokens, reply.chunks) == (9, 4)  # 9 tokens in 4 chunks
        assert reply.engine == {"vllm.draft_acceptance_rate": 0.5}
        assert with_usage(endpoint, JOB).stream is True


def test_server_errors_and_bad_urls_say_what_happened(server: tuple[str, type]) -> None:
    url, _ = server
    endpoint = Endpoint(url=base_url(url), model="m", chat=False)
    with pytest.raises(EndpointError, match=r"400.*max_tokens"):
        send(endpoint, Job(request="r", category="c", prompt="p", max_tokens=0, temperature=0,
                           seed=0))  # fmt: skip
    with pytest.raises(ValueError, match="http"):
        base_url("127.0.0.1:8000")
    with pytest.raises(EndpointError, match=r"127\.0\.0\.1:9"):
        served_model("http://127.0.0.1:9")


def test_request_body_is_one_user_turn_or_the_raw_prompt() -> None:
    chat = body(Endpoint(url="http://h", model="m", chat=True, extra=(("top_p", 0.9),)), JOB)
    assert chat["messages"] == [{"role": "user", "content": "p"}] and chat["top_p"] == 0.9
    raw = body(Endpoint(url="http://h", model="m", chat=False, stream=False), JOB)
    assert raw["prompt"] == "p" and "stream_options" not in raw and raw["seed"] == 3
