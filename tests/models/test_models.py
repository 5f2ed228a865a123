"""Loading pairs: local folders (tokenizer compatibility, dtype, eval mode) and the hub's
reachability (a hub that cannot be reached fails within seconds)."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
import torch
from huggingface_hub import constants
from transformers import AutoTokenizer, PreTrainedModel

from specviz.models import loading
from specviz.models.loading import ModelLoadError, hub_problem, load_pair, parse_dtype

from ..conftest import PairFactory


def test_load_pair_from_folders(pair: PairFactory, tokenizer, tmp_path) -> None:
    target, draft = pair("llama")
    for name, model in (("t", target), ("d", draft)):
        model.save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
    loaded = load_pair(str(tmp_path / "t"), str(tmp_path / "d"), dtype=torch.bfloat16)
    for model in (loaded.target, loaded.draft):
        assert model.dtype == torch.bfloat16 and not model.training
        assert not any(p.requires_grad for p in model.parameters())
    assert loaded.tokenizer("the cat")["input_ids"] == tokenizer("the cat")["input_ids"]


def test_mismatched_tokenizers_are_refused(pair: PairFactory, tokenizer, tmp_path) -> None:
    target, draft = pair("gpt2")
    target.save_pretrained(tmp_path / "t")
    tokenizer.save_pretrained(tmp_path / "t")
    draft.save_pretrained(tmp_path / "d")
    other = AutoTokenizer.from_pretrained(tmp_path / "t")
    other.add_tokens(["<extra>"])
    other.save_pretrained(tmp_path / "d")
    with pytest.raises(ModelLoadError, match=r"tokenizers differ.*\(cross, cross:text\)"):
        load_pair(str(tmp_path / "t"), str(tmp_path / "d"), drafter="model")
    said: list[str] = []  # without a drafter named, the one that translates is picked
    assert load_pair(str(tmp_path / "t"), str(tmp_path / "d"), progress=said.append).drafter == (
        "cross"
    )
    assert any("drafting with cross" in m for m in said)


def test_parse_dtype() -> None:
    assert parse_dtype("bfloat16") is torch.bfloat16
    with pytest.raises(
        ValueError, match=r"dtype must be one of \['bfloat16', 'float16', 'float32', 'float64'\]"
    ):
        parse_dtype("int8")


@pytest.mark.parametrize("spec", ["gpt2", "distilgpt2", "EleutherAI/pythia-14m", "org/name"])
def test_hub_ids_with_or_without_an_organisation_go_to_the_hub(spec: str) -> None:
    assert loading.resolve(spec, "target", lambda _m: None) == spec


@pytest.mark.parametrize("spec", ["./nope", "/no/such", "a/b/c", "bad name", "a..b", "-x"])
def test_what_is_neither_a_folder_nor_a_hub_id_is_refused(spec: str) -> None:
    with pytest.raises(ModelLoadError, match="neither an existing folder nor a hub id"):
        loading.resolve(spec, "target", lambda _m: None)


def test_a_bare_hub_id_offline_and_not_cached_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # as the hub client read it
    monkeypatch.chdir(tmp_path)  # no folder of that name here
    with pytest.raises(ModelLoadError) as err:
        load_pair("specviz-no-such-model", None)
    assert str(err.value) == (
        "could not load target tokenizer 'specviz-no-such-model': the hub is offline "
        "(HF_HUB_OFFLINE=1) and it is not in the local cache: pass a local folder, or unset "
        "HF_HUB_OFFLINE on a machine with internet (there is no folder "
        "'specviz-no-such-model' here either)"
    )


UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens there


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a user's machine: HF_HUB_OFFLINE unset, nothing remembered about the hub."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # as the hub client read it
    monkeypatch.setattr(loading, "_REACHED", {})


def test_an_unreachable_hub_fails_within_seconds_saying_what_to_do(
    online: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constants, "ENDPOINT", UNREACHABLE)
    start = time.monotonic()
    with pytest.raises(ModelLoadError) as err:
        load_pair("nobody/no-such-model", "nobody/no-such-draft")
    assert time.monotonic() - start < 5
    message = str(err.value)
    assert f"could not load target tokenizer 'nobody/no-such-model': the hub ({UNREACHABLE})" in (
        message
    )
    assert "cannot be reached (Connect" in message and "pass a local folder" in message


def test_a_hub_that_does_not_answer_counts_as_unreachable_after_the_timeout(
    online: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as silent:  # accepts connections (backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        monkeypatch.setattr(loading, "HUB_TIMEOUT_SECONDS", 0.5)
        start = time.monotonic()
        problem = hub_problem(f"http://127.0.0.1:{silent.getsockname()[1]}")
    assert problem is not None and "Timeout" in problem and time.monotonic() - start < 3


class _Loader:
    """Records how from_pretrained was called; returns a marker or raises like a cache miss."""

    def __init__(self, cached: bool) -> None:
        self.cached, self.calls = cached, []  # type: list[dict[str, Any]]

    def from_pretrained(self, source: str, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        if not self.cached and kwargs.get("local_files_only"):
            raise OSError(f"{source} is not in the cache")
        return "loaded"


def test_an_unreachable_hub_still_loads_what_the_local_cache_has(
    online: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constants, "ENDPOINT", UNREACHABLE)
    loader = _Loader(cached=True)
    assert loading._from_pretrained(loader, "org/cached", "target") == "loaded"
    assert loader.calls == [{"local_files_only": True}]


def test_a_hub_that_answers_is_used(online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:  # any answer at all: the hub is there
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{server.server_port}")
        assert hub_problem() is None
        loader = _Loader(cached=False)
        assert loading._from_pretrained(loader, "org/name", "target") == "loaded"
        assert loader.calls == [{"local_files_only": False}]  # fetched from the hub
    finally:
        server.shutdown()
        server.server_close()


def test_the_command_line_fails_fast_without_retries_on_an_unreachable_hub(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env |= {"HF_ENDPOINT": UNREACHABLE, "HF_HOME": str(tmp_path / "hf")}
    argv = ["generate", "--target", "nobody/no-such-model", "--prompt", "hi", "--plain"]
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "specviz", *argv],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert time.monotonic() - start < 40  # mostly importing torch; the hub's retries took ~47 s
    assert done.returncode == 2
    assert "cannot be reached" in done.stderr and "Retrying" not in done.stderr
    assert "Traceback" not in done.stderr


def test_models_load_one_at_a_time_so_transformers_puts_its_methods_back(
    pair: PairFactory, tokenizer, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """transformers swaps PreTrainedModel.tie_weights and init_weights for no-ops while it
    loads: two overlapping loads could keep the no-ops for good. Loads from many threads run
    one at a time, and transformers' methods are its own again after them."""
    target, _ = pair("llama")
    target.save_pretrained(tmp_path / "t")
    tokenizer.save_pretrained(tmp_path / "t")
    real, inside, overlaps = loading._from_pretrained, [0], []
    methods = (PreTrainedModel.tie_weights, PreTrainedModel.init_weights)

    def counted(*args: Any, **kwargs: Any) -> Any:
        inside[0] += 1
        overlaps.append(inside[0])
        try:
            time.sleep(0.01)
            return real(*args, **kwargs)
        finally:
            inside[0] -= 1

    monkeypatch.setattr(loading, "_from_pretrained", counted)
    threads = [
        threading.Thread(target=loading.load_model, args=(str(tmp_path / "t"),)) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlaps == [1, 1, 1, 1]  # never two at once
    assert (PreTrainedModel.tie_weights, PreTrainedModel.init_weights) == methods
