"""A planted-fault proxy: an OpenAI-compatible server in front of another that changes the law
of the first token by a known amount. The audit's negative control (docs/exactness.md).

    python -m specviz.audit.proxy --upstream http://127.0.0.1:8080 --port 8081 \\
        --fault first-token --tv 0.05

Faults (on /v1/completions answers; every other request passes through unchanged):
- pass: nothing changed (the positive control: the proxy itself adds no difference);
- replace: with probability tv the answer's text is replaced by FOREIGN, a string the model
  does not write: the law of every outcome the audit tests moves by TV tv exactly, and no
  logprobs are needed (the cheapest fault to serve);
- first-token: with probability s the first token is replaced by x, the least likely of the
  FAULT_TOP likeliest tokens the upstream reported there; s = tv / (1 - p(x)) makes the TV
  between the old and new first-token laws exactly tv (at temperature 1 with no filter, where
  the reported logprobs are the law);
- late-top-p: the first token is re-drawn as an engine that applies top-p after the residual
  would draw it: the likeliest token x stands as the draft, kept with probability p(x) under the
  unfiltered law, else a token from top-p of the residual norm(p without x). Exact speculation
  draws from top-p(p) instead; at top_p 1 the two agree, below they differ.

The proxy asks the upstream for logprobs (UPSTREAM_TOP of them) where the client did not, and
drops them from the answer again. A request for one token without logprobs needs no logprobs of
its own: the first token's law depends on the prompt and settings alone, not on the seed, so the
proxy asks for it once per prompt and settings (one request with logprobs), keeps it, and
forwards the request itself as it came (the answer's text is its one token). Random draws are
seeded by the request's seed, so a seeded request stays reproducible. GET /planted returns how
many answers were changed and the mean TV planted per request.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from specviz.audit.keepalive import Connections
from specviz.endpoint.client import get

FAULTS = ("pass", "replace", "first-token", "late-top-p")
FOREIGN = "\u2063planted\u2063"  # invisible separators around a word: no model writes it
LAWLESS = ("pass", "replace")  # the faults that need no logprobs
FAULT_TOP = 5  # first-token: x is the least likely of this many
UPSTREAM_TOP = 10  # logprobs asked of the upstream
PER_REQUEST = ("seed", "max_tokens", "logprobs")  # fields the first token's law does not hang on


class FaultProxy(ThreadingHTTPServer):
    """The proxy server: where it forwards, which fault it plants, and what it planted."""

    def __init__(self, port: int, upstream: str, fault: str, tv: float) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.upstream, self.fault, self.tv = upstream, fault, tv
        self.lock = threading.Lock()
        self.planted = {"requests": 0, "changed": 0, "tv_sum": 0.0}
        self.connections = Connections()
        self.first_laws: dict[str, dict[str, float]] = {}

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST body upstream (ValueError in one line on any failure)."""
        return self.connections.post(self.upstream, path, body)

    def first_law(self, path: str, body: dict[str, Any]) -> dict[str, float]:
        """The first token's top logprobs for body's prompt and settings, asked once."""
        key = json.dumps({k: v for k, v in body.items() if k not in PER_REQUEST}, sort_keys=True)
        if key not in self.first_laws:
            asked = self.post(path, body | {"max_tokens": 1, "logprobs": UPSTREAM_TOP})
            tops = (asked["choices"][0].get("logprobs") or {}).get("top_logprobs") or [{}]
            with self.lock:
                self.first_laws[key] = tops[0] or {}
        return self.first_laws[key]

    def record(self, changed: bool, tv: float) -> None:
        """Count one answer."""
        with self.lock:
            self.planted["requests"] += 1
            self.planted["changed"] += int(changed)
            self.planted["tv_sum"] += tv


class Handler(BaseHTTPRequestHandler):
    """Forwards GETs and POSTs; plants the fault in completion answers."""

    server: FaultProxy
    protocol_version = "HTTP/1.1"  # connections kept alive (every reply has its length)
    disable_nagle_algorithm = True  # a reply's body is not held back waiting for an ACK

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: no line per request."""

    def do_GET(self) -> None:
        if self.path == "/planted":
            stats = dict(self.server.planted)
            stats["mean_tv"] = stats["tv_sum"] / max(stats["requests"], 1)
            self._reply(200, json.dumps(stats))
            return
        try:
            status, text = get(self.server.upstream, self.path)
        except OSError as err:
            self._reply(502, json.dumps({"error": str(err)}))
            return
        self._reply(status, text)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        completion = self.path.endswith("/v1/completions")
        faulty = completion and self.server.fault not in LAWLESS
        asked = body.get("logprobs")
        one = faulty and asked is None and body.get("max_tokens") == 1  # the law kept serves
        if faulty and not one and (asked is None or asked < UPSTREAM_TOP):
            body["logprobs"] = UPSTREAM_TOP
        try:
            answer = self.server.post(self.path, body)
            if completion and self.server.fault == "replace":
                self._replace(answer, body)
            elif one:
                self._plant_one(answer, body)
            elif faulty:
                self._plant(answer, body, drop=asked is None)
            else:
                self.server.record(False, 0.0)
        except ValueError as err:
            self._reply(502, json.dumps({"error": str(err)}))
            return
        self._reply(200, json.dumps(answer))

    def _replace(self, answer: dict[str, Any], body: dict[str, Any]) -> None:
        rng = random.Random(int(body.get("seed") or 0) * 7919 + 17)
        changed = rng.random() < self.server.tv
        if changed:
            choice = answer["choices"][0]
            choice["text"] = FOREIGN
            if choice.get("logprobs"):
                choice["logprobs"] |= {"tokens": [FOREIGN], "top_logprobs": [{FOREIGN: 0.0}]}
        self.server.record(changed, self.server.tv)

    def _plant(self, answer: dict[str, Any], body: dict[str, Any], *, drop: bool) -> None:
        """Plant the fault in the first of the answer's tokens (its logprobs dropped again
        where the client asked none)."""
        choice = answer["choices"][0]
        logprobs = choice.get("logprobs") or {}
        tokens, tops = logprobs.get("tokens") or [], logprobs.get("top_logprobs") or []
        if not tokens or not tops or not tops[0]:
            self.server.record(False, 0.0)
            return
        tokens[0] = self._planted(tops[0], tokens[0], body)
        choice["text"] = "".join(tokens)
        if drop:
            choice["logprobs"] = None

    def _plant_one(self, answer: dict[str, Any], body: dict[str, Any]) -> None:
        """Plant the fault in a one-token answer, with the first token's law kept."""
        choice = answer["choices"][0]
        law = self.server.first_law(self.path, body)
        if not law:
            self.server.record(False, 0.0)
            return
        choice["text"] = self._planted(law, str(choice.get("text") or ""), body)

    def _planted(self, top: dict[str, float], token: str, body: dict[str, Any]) -> str:
        """The first token with the fault planted, from its reported top logprobs."""
        rng = random.Random(int(body.get("seed") or 0) * 7919 + 17)
        law = _law(top, float(body.get("temperature", 1.0)))
        if self.server.fault == "first-token":
            planted, tv = first_token(law, token, self.server.tv, rng)
        else:
            planted, tv = late_top_p(law, float(body.get("top_p", 1.0)), rng)
        self.server.record(planted != token, tv)
        return planted

    def _reply(self, status: int, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _law(top: dict[str, float], temperature: float) -> dict[str, float]:
    """The reported top tokens' probabilities, likeliest first: as reported at temperature 1
    (exact), else at the temperature and renormalised over them (an approximation)."""
    ranked = sorted(top.items(), key=lambda kv: -kv[1])
    if temperature == 1.0:
        return {t: math.exp(lp) for t, lp in ranked}
    scale = 1.0 / temperature if temperature > 0 else 1e6
    weights = {t: math.exp(lp * scale) for t, lp in ranked}
    total = sum(weights.values())
    return {t: w / total for t, w in weights.items()}


def first_token(
    law: dict[str, float], token: str, tv: float, rng: random.Random
) -> tuple[str, float]:
    """(the first token, the TV planted): token replaced by x with probability tv / (1-p(x))."""
    x = list(law)[:FAULT_TOP][-1]
    share = min(1.0, tv / max(1e-12, 1.0 - law[x]))
    return (x if rng.random() < share else token), share * (1.0 - law[x])


def top_p_law(law: dict[str, float], top_p: float) -> dict[str, float]:
    """law (likeliest first, absolute probabilities, perhaps only its top tokens) cut to its
    nucleus, the likeliest tokens whose mass reaches top_p, renormalised."""
    kept: dict[str, float] = {}
    for token, p in law.items():
        if sum(kept.values()) >= top_p:
            break
        kept[token] = p
    total = sum(kept.values())
    return {t: p / total for t, p in kept.items()}


def late_top_p_law(law: dict[str, float], top_p: float) -> dict[str, float]:
    """The first token's law where top-p is applied after the residual (draft: the likeliest)."""
    x = next(iter(law))
    residual = {t: p for t, p in law.items() if t != x}
    if not residual:
        return {x: 1.0}
    rest = top_p_law({t: p / (1 - law[x]) for t, p in residual.items()}, top_p)
    return {x: law[x]} | {t: (1 - law[x]) * p for t, p in rest.items()}


def late_top_p(law: dict[str, float], top_p: float, rng: random.Random) -> tuple[str, float]:
    """(a first token drawn from late_top_p_law, the TV between it and top-p of law)."""
    wrong, right = late_top_p_law(law, top_p), top_p_law(law, top_p)
    tv = 0.5 * sum(abs(wrong.get(t, 0.0) - right.get(t, 0.0)) for t in law)
    token = rng.choices(list(wrong), weights=list(wrong.values()))[0]
    return token, tv


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the proxy until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m specviz.audit.proxy", description=__doc__)
    parser.add_argument("--upstream", required=True, help="the real server's base URL")
    parser.add_argument("--port", type=int, required=True, help="the port to serve at")
    parser.add_argument("--fault", choices=FAULTS, default="pass")
    parser.add_argument("--tv", type=float, default=0.05, help="first-token: the TV planted")
    args = parser.parse_args(argv)
    proxy = FaultProxy(args.port, args.upstream, args.fault, args.tv)
    try:
        proxy.serve_forever()
    except KeyboardInterrupt:
        proxy.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
