"""One default, chosen by measurement: the registry's DEFAULT_CONFIG is the saved report's
fastest exact configuration, and the CLI and the app's first preset both run it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specviz.app.views.form import PRESETS
from specviz.batch.gamma import best_gammas
from specviz.batch.sweep import knee
from specviz.cli import build_parser, main
from specviz.cli.defaults import apply_defaults
from specviz.drafters.names import DEFAULT_CONFIG, REGISTRY, WORKLOAD_CONFIGS
from specviz.tune.profile import Choice, profiles_dir
from tools.report.headline import Pick
from tools.report.saved import RESULTS_DIR, Saved

from .tune.profiles import make_profile, write_profile


def test_default_is_the_reports_fastest_exact_setting_for_code() -> None:
    saved = Saved(RESULTS_DIR)
    pick = Pick("code", 0.0)  # the README headline's first row
    setting = pick.row(saved)["setting"]
    assert setting["drafter"] == DEFAULT_CONFIG.drafter
    assert setting["gamma"] == DEFAULT_CONFIG.gamma
    assert setting["policy"] == DEFAULT_CONFIG.policy
    assert setting["temperature"] == DEFAULT_CONFIG.temperature
    forward = saved.load(pick.part(saved))["meta"].get("target_forward", "transformers")
    assert forward.split()[0] == DEFAULT_CONFIG.forward
    sweep = saved.load("batch-sweep")["batch_sweep"]
    assert sweep["plan"]["drafters"] == [DEFAULT_CONFIG.batch_drafter]
    greedy = [b for b in sweep["best"] if b["temperature"] == 0.0]
    assert DEFAULT_CONFIG.batch_rows == knee(greedy)
    assert DEFAULT_CONFIG.batch_gammas == best_gammas(greedy)


def test_the_knee_is_where_served_tokens_stop_growing() -> None:
    def entry(size: int, served: float) -> dict[str, Any]:
        return {"batch_size": size, "speculative": {"tokens_per_second": served}}

    assert knee([entry(1, 30), entry(2, 50), entry(4, 70), entry(8, 72)]) == 4
    assert knee([entry(4, 70), entry(1, 30), entry(2, 20)]) == 1  # 2 serves less than 1
    with pytest.raises(ValueError, match="no entries"):
        knee([])


@pytest.mark.parametrize("kind", list(WORKLOAD_CONFIGS))
def test_each_preset_is_the_reports_fastest_exact_setting_for_its_kind(kind: str) -> None:
    saved = Saved(RESULTS_DIR)
    config = WORKLOAD_CONFIGS[kind]
    setting = Pick(kind, config.temperature).row(saved)["setting"]
    chosen = {"drafter": config.drafter, "gamma": config.gamma, "policy": config.policy}
    assert {k: setting[k] for k in chosen} == chosen
    assert config.forward == DEFAULT_CONFIG.forward  # the forward stays the machine's
    assert WORKLOAD_CONFIGS["code"] == DEFAULT_CONFIG


def test_a_preset_fills_what_the_flags_leave_unset() -> None:
    json = WORKLOAD_CONFIGS["json"]
    got = _defaults("--preset", "json")
    assert (got["drafter"], got["gamma"], got["temperature"]) == (
        json.drafter, json.gamma, json.temperature
    )  # fmt: skip
    assert _defaults("--preset", "repeat")["gamma"] == WORKLOAD_CONFIGS["repeat"].gamma
    flags = ("--preset", "repeat", "--drafter", "ngram", "--gamma", "5", "--temperature", "1")
    assert _defaults(*flags)["drafter"] == "ngram"  # a flag beats the preset
    assert (_defaults(*flags)["gamma"], _defaults(*flags)["temperature"]) == (5, 1.0)
    preset_names = [n for n in PRESETS if "for structured JSON" in n]
    assert [PRESETS[n]["drafter"] for n in preset_names] == [json.drafter]  # the app's preset


def _defaults(*flags: str) -> dict[str, object]:
    args = build_parser().parse_args(["generate", "--prompt", "def f():", *flags])
    apply_defaults(args)
    keys = ("drafter", "gamma", "temperature", "gamma_policy", "lean_target", "no_pack")
    return {k: getattr(args, k) for k in keys}


def test_generate_with_no_flags_runs_the_default_which_is_the_apps_first_preset() -> None:
    first = next(iter(PRESETS.values()))
    assert _defaults() == {
        "drafter": first["drafter"], "gamma": first["gamma"],
        "temperature": first["temperature"], "gamma_policy": first["policy"],
        "lean_target": DEFAULT_CONFIG.forward == "lean", "no_pack": False,
    }  # fmt: skip
    assert first["drafter"] == DEFAULT_CONFIG.drafter and first["gamma"] == DEFAULT_CONFIG.gamma


def test_the_lean_default_only_where_the_drafter_takes_it() -> None:
    lean = DEFAULT_CONFIG.forward == "lean"
    assert _defaults("--drafter", "tree-model")["lean_target"] is False  # 4D mask: transformers'
    assert _defaults("--drafter", "early-exit:shared")["lean_target"] is False  # its own forward
    assert _defaults("--drafter", "tree-eagle")["lean_target"] is lean
    assert _defaults("--no-lean-target")["lean_target"] is False
    assert _defaults("--batch", "4")["drafter"] == DEFAULT_CONFIG.batch_drafter


def test_help_names_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"default: {DEFAULT_CONFIG.drafter}" in text
    assert f"(default: {DEFAULT_CONFIG.gamma}, or the preset's)" in text
    assert f"json: {WORKLOAD_CONFIGS['json'].drafter}" in text


def test_a_draft_without_a_ranking_gets_the_untrimmed_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["generate", "--prompt", "x", "--draft", str(tmp_path)])
    apply_defaults(args)
    assert args.drafter == REGISTRY[DEFAULT_CONFIG.drafter].untrimmed == "ngram+model"
    assert "no token ranking" in capsys.readouterr().err
    args = build_parser().parse_args(["generate", "--prompt", "x"])  # the bundled draft has one
    apply_defaults(args)
    assert args.drafter == DEFAULT_CONFIG.drafter


def test_a_tuned_profile_chooses_the_forward_where_no_flag_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SPECVIZ_PROFILES", str(tmp_path))
    plain, speculative = (
        Choice(forward="lean", threads=2),
        Choice(forward="transformers", threads=1),
    )
    profile = make_profile("bundled", "bundled", plain=plain, speculative=speculative)
    path = write_profile(tmp_path, profile)
    assert _defaults()["lean_target"] is False and _defaults()["no_pack"] is True
    assert f"defaults from the tuned profile {path}" in capsys.readouterr().err
    assert (_defaults("--plain")["lean_target"], _defaults("--plain")["no_pack"]) == (True, False)
    assert _defaults("--plain", "--drafter", "tree-model")["lean_target"] is True  # plain: takes it
    assert _defaults("--lean-target")["no_pack"] is False  # a forward flag: the profile steps back
    assert _defaults("--no-pack")["lean_target"] is False
    assert _defaults("--dtype", "bfloat16")["no_pack"] is False  # no profile for that pair
    write_profile(tmp_path, make_profile("bundled", "bundled", speculative=plain))
    assert _defaults()["lean_target"] is True and _defaults()["no_pack"] is False
    assert _defaults("--no-lean-target")["lean_target"] is False


def test_help_says_where_the_forward_and_threads_come_from(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the tuned profile of this machine and the pair, where `specviz tune` saved one" in text
    assert "else to the shipped DEFAULT_CONFIG's" in text
    assert f"(in {profiles_dir()})" in text.replace("- ", "-")  # help wraps after hyphens
    assert "--threads N CPU threads for torch's operators (default: the tuned profile's" in text


class _Parts:
    """Saved parts in memory: name → (meta, records), for Pick's choice of a part."""

    def __init__(self, parts: dict[str, tuple[dict[str, str], int]]) -> None:
        self.parts = parts

    def parts_in_order(self) -> list[str]:
        return list(self.parts)

    def meta(self, part: str) -> dict[str, str]:
        return self.parts[part][0]

    def load(self, part: str) -> dict[str, object]:
        setting = {"temperature": 0.0}
        records = [{"category": "code", "setting": setting, "request_id": i, "repetition": 0}
                   for i in range(self.parts[part][1])]  # fmt: skip
        return {"records": records}


def test_the_headline_takes_the_widest_part_then_lean_then_the_chat_template() -> None:
    lean_raw = {"target_forward": "lean", "prompt_format": "raw"}
    lean_chat = {"target_forward": "lean", "prompt_format": "chat"}
    chat = {"prompt_format": "chat"}
    pick = Pick("code", 0.0)
    assert pick.part(_Parts({"a": (lean_raw, 4), "b": (lean_chat, 4)})) == "b"
    assert pick.part(_Parts({"a": (lean_raw, 5), "b": (lean_chat, 4)})) == "a"
    assert pick.part(_Parts({"a": (lean_raw, 4), "b": (chat, 4)})) == "a"


def test_the_code_preset_sends_raw_completion_unless_told_otherwise() -> None:
    """Through the chat template a code prompt is answered in prose: --preset code continues it
    as written; without a preset the prompt is a chat request; --raw / --no-raw decide."""

    def raw(*flags: str) -> object:
        args = build_parser().parse_args(["generate", "--prompt", "def f(n):", *flags])
        apply_defaults(args)
        return args.raw

    assert raw("--preset", "code") is True and raw() is False and raw("--preset", "json") is False
    assert raw("--preset", "code", "--no-raw") is False and raw("--raw") is True
