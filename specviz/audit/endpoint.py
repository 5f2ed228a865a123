"""An OpenAI-compatible server as an audit source: speculation on at one URL, off at a second
URL or at the same one with extra request fields (e.g. an engine's per-request switch).

A law request asks for exactly k tokens (max_tokens k) and its outcome is the answer's text and
finish reason: no logprobs needed, so any server will do, and a test of the text's law is a test
of the tokens' (the text is a function of them). A logprob request (the greedy check, the check
against the engine's own distribution) reads the tokens and top logprobs at each position.
Flavours name the request fields beyond the OpenAI ones: 'openai' has no top-k and no
repetition penalty; 'llama.cpp' (llama-server and llama-cpp-python) and 'vllm' have both, and
llama.cpp also gets min_p 0 (its servers default to 0.05, a filter the audit would not name).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from specviz.audit.keepalive import Connections
from specviz.audit.settings import Sample, Settings
from specviz.audit.sources import Side, refuse
from specviz.endpoint.client import EndpointError, base_url, get

Flavour = Literal["openai", "llama.cpp", "vllm"]
FLAVOURS: tuple[Flavour, ...] = ("openai", "llama.cpp", "vllm")
FIELDS: dict[Flavour, dict[str, str | None]] = {  # setting → the request field, None: none
    "openai": {"top_k": None, "repetition_penalty": None},
    "llama.cpp": {"top_k": "top_k", "repetition_penalty": "repeat_penalty"},
    "vllm": {"top_k": "top_k", "repetition_penalty": "repetition_penalty"},
}
FLAGS = {"top_k": "--top-k", "repetition_penalty": "--repetition-penalty"}
ALWAYS: dict[Flavour, dict[str, Any]] = {"openai": {}, "llama.cpp": {"min_p": 0.0}, "vllm": {}}
TOP_LOGPROBS = 10


@dataclass(frozen=True, kw_only=True)
class Server:
    """One side's server: base URL, the model asked for, and extra JSON fields it is sent."""

    url: str
    model: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class EndpointSource:
    """Speculation on at `spec`, off at `plain` (another URL, or the same with other fields)."""

    spec: Server
    plain: Server
    flavour: Flavour = "openai"
    chat: bool = False
    token_outcomes: bool = False  # read every outcome's tokens from logprobs (costlier)
    connections: Connections = field(default_factory=Connections, compare=False, repr=False)

    @property
    def name(self) -> str:
        """'<model> at <url>' with how the plain side is reached."""
        how = "same server" if self.spec.url == self.plain.url else f"plain at {self.plain.url}"
        return f"{self.flavour} {self.spec.model} at {self.spec.url} ({how})"

    @property
    def sides_at_once(self) -> bool:
        """Two servers: each side's requests on a thread of its own (one server: one request
        at a time, as a server batching them might round a request differently)."""
        return self.spec.url != self.plain.url

    def check(self, settings: Settings) -> None:
        """Refuse a setting the flavour's API has no field for."""
        missing = {k: FLAGS[k] for k, v in FIELDS[self.flavour].items() if v is None}
        refuse(settings, missing, f"an API of flavour {self.flavour}")

    def preflight(self) -> None:
        """Each server answers, serves its model, and honours `seed` (ValueError otherwise)."""
        sides: tuple[tuple[Side, Server], ...] = (("spec", self.spec), ("plain", self.plain))
        for side, server in sides:
            served = served_models(server.url)
            if server.model not in served:
                raise ValueError(
                    f"{server.url} does not serve model {server.model!r} (it serves "
                    f"{', '.join(served)}): give --model one of those"
                )
            self._check_seed(side, server)

    def _check_seed(self, side: Side, server: Server) -> None:
        """Two requests with one seed at temperature 1 must give the same tokens."""
        probe = Settings(temperature=1.0)
        twice = [
            self.sample(side, SEED_PROMPT, probe, seed=1234, tokens=8, top=False) for _ in range(2)
        ]
        if twice[0].tokens != twice[1].tokens:
            raise ValueError(
                f"{server.url} ignores `seed`: one seeded request at temperature 1 gave two "
                "different answers; the audit needs seeded, reproducible requests (start the "
                "server so that it honours the request's seed)"
            )

    def sample(
        self, side: Side, prompt: str, settings: Settings, *, seed: int, tokens: int, top: bool
    ) -> Sample:
        """One request on a side. top: the tokens and top logprobs its answer reports; else the
        outcome is (text, finish reason), which needs no logprobs (much cheaper on some
        servers: llama-cpp-python sorts the whole vocabulary for each token's logprobs)."""
        server = self.spec if side == "spec" else self.plain
        tokenwise = top or self.token_outcomes
        answer = self.connections.post(
            server.url, self._path, self.body(server, prompt, settings, seed, tokens, top=tokenwise)
        )
        return parse(answer, chat=self.chat) if tokenwise else text_outcome(answer, chat=self.chat)

    @property
    def _path(self) -> str:
        return "/v1/chat/completions" if self.chat else "/v1/completions"

    def body(
        self, server: Server, prompt: str, settings: Settings, seed: int, tokens: int, *, top: bool
    ) -> dict[str, Any]:
        """The JSON one request sends: the settings in this flavour's fields, then the side's."""
        out: dict[str, Any] = {"model": server.model, "max_tokens": tokens, "seed": seed}
        out |= {"temperature": settings.temperature, "stream": False, **ALWAYS[self.flavour]}
        out |= _sampling_fields(settings, self.flavour)
        if self.chat:
            out["messages"] = [{"role": "user", "content": prompt}]
            out |= {"logprobs": True, "top_logprobs": TOP_LOGPROBS} if top else {}
        else:
            out |= {"prompt": prompt} | ({"logprobs": TOP_LOGPROBS} if top else {})
        return out | server.fields


SEED_PROMPT = "Once upon a time"


def _sampling_fields(settings: Settings, flavour: Flavour) -> dict[str, Any]:
    """The settings that are not left to the server, in the flavour's field names."""
    names = {"top_p": "top_p", "frequency_penalty": "frequency_penalty", **FIELDS[flavour]}
    return {
        str(name): getattr(settings, key)
        for key, name in names.items()
        if name is not None and getattr(settings, key) is not None
    }


def served_models(url: str) -> list[str]:
    """The model ids at url/v1/models; ValueError in one line when nothing answers there."""
    try:
        status, text = get(base_url(url), "/v1/models")
    except EndpointError as err:
        raise ValueError(f"cannot reach {url}: {err}; is the server running?") from None
    try:
        return [str(m["id"]) for m in json.loads(text)["data"]]
    except (ValueError, KeyError, TypeError):
        raise ValueError(
            f"{url}/v1/models answered {status} without a model list: is this an "
            "OpenAI-compatible server?"
        ) from None


def text_outcome(answer: dict[str, Any], *, chat: bool) -> Sample:
    """The outcome (text, finish reason) of an answer without logprobs."""
    choice = (answer.get("choices") or [{}])[0]
    text = (choice.get("message") or {}).get("content") if chat else choice.get("text")
    return Sample(tokens=(str(text or ""), str(choice.get("finish_reason"))))


def parse(answer: dict[str, Any], *, chat: bool) -> Sample:
    """The tokens and top logprobs of a completion (legacy `logprobs`) or chat answer."""
    logprobs = (answer.get("choices") or [{}])[0].get("logprobs")
    if not logprobs:
        raise ValueError(
            "the server returned no per-token logprobs: the audit reads token boundaries from "
            "them (use an engine that honours `logprobs`, or its chat/completions variant)"
        )
    if chat:
        content = logprobs.get("content") or []
        tokens = tuple(str(c["token"]) for c in content)
        top = tuple(
            {str(t["token"]): float(t["logprob"]) for t in c["top_logprobs"]} for c in content
        )
        return Sample(tokens=tokens, top=top)
    tops = logprobs.get("top_logprobs") or []
    return Sample(
        tokens=tuple(str(t) for t in logprobs["tokens"]),
        top=tuple({str(k): float(v) for k, v in (t or {}).items()} for t in tops) or None,
    )
