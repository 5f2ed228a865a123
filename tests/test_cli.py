"""The `specviz generate` command on tiny local model folders, offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from specviz.api import autoregressive_generate
from specviz.cli import main
from specviz.core.config import SamplingConfig
from specviz.core.events import Accepted, read_jsonl
from specviz.drafters.trimmed import save_ranking

from .conftest import VOCAB, PairFactory


@pytest.fixture(scope="module")
def folders(pair: PairFactory, tokenizer, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("models")
    target, draft = pair("llama")
    for name, model in (("target", target), ("draft", draft)):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    save_ranking(torch.arange(VOCAB).flip(0), root / "draft")  # for --drafter model-trimmed
    return root / "target", root / "draft"


def test_generate_prints_json_summary_and_writes_events(
    folders, pair, tokenizer, tmp_path, capsys
) -> None:
    target_dir, draft_dir = folders
    events = tmp_path / "events.jsonl"
    argv = [
        "generate",
        "--target",
        str(target_dir),
        "--draft",
        str(draft_dir),
        "--prompt",
        "the cat",
    ]
    argv += ["--gamma", "3", "--temperature", "0", "--max-new-tokens", "12", "--dtype", "float64"]
    assert main([*argv, "--events", str(events), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    plain = autoregressive_generate(
        pair("llama")[0],
        tokenizer,
        "the cat",
        sampling=SamplingConfig(temperature=0),
        max_new_tokens=12,
    )
    assert summary["tokens"] == list(plain.tokens) and summary["text"] == plain.text
    logged = list(read_jsonl(events))
    assert summary["accepted"] == sum(isinstance(e, Accepted) for e in logged)
    assert [r["accepted"] for r in summary["per_round"]] and summary["rounds"] == len(
        summary["per_round"]
    )


def test_generate_text_report(folders, capsys) -> None:
    target_dir, draft_dir = folders
    argv = ["generate", "--target", str(target_dir), "--draft", str(draft_dir), "--prompt", "hello"]
    assert (
        main([*argv, "--max-new-tokens", "10", "--seed", "4", "--top-k", "10", "--top-p", "0.9"])
        == 0
    )
    out = capsys.readouterr().out
    assert "round   0: accepted" in out and "acceptance rate" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--gamma", "0"], "gamma must be an integer >= 1 (got 0)"),
        (["--temperature", "-1"], "temperature must be a finite number >= 0"),
        (["--top-p", "2"], "top_p must be in (0, 1]"),
        (["--prompt", " "], "--prompt is empty"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(
    folders, capsys, extra: list[str], message: str
) -> None:
    target_dir, draft_dir = folders
    argv = [
        "generate",
        "--target",
        str(target_dir),
        "--draft",
        str(draft_dir),
        "--prompt",
        "hi",
        *extra,
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_unknown_hub_id_fails_fast_offline(folders, capsys, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = [
        "generate",
        "--target",
        "nobody/no-such-model",
        "--draft",
        str(folders[1]),
        "--prompt",
        "hi",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        "could not load target tokenizer 'nobody/no-such-model'" in err and "HF_HUB_OFFLINE" in err
    )


def test_missing_folder_and_non_model_folder(folders, tmp_path, capsys) -> None:
    assert main(["generate", "--target", "./nope/not/here", "--prompt", "hi"]) == 2
    assert "neither an existing folder nor a hub id" in capsys.readouterr().err
    assert main(["generate", "--target", str(tmp_path), "--prompt", "hi"]) == 2
    assert "has no config.json" in capsys.readouterr().err


def test_python_dash_m_entry_point(folders) -> None:
    target_dir, draft_dir = folders
    argv = ["generate", "--target", str(target_dir), "--draft", str(draft_dir), "--prompt", "ab"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "specviz", *argv, "--max-new-tokens", "5", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["new_tokens"] <= 5


def test_verify_passes_the_real_sampler_and_rejects_a_mutant(tmp_path, capsys) -> None:
    out = tmp_path / "verify.json"
    assert main(["verify", "--settings", "quick", "--n", "200", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "0 of" in printed and "p (Holm)" in printed and "TV bound" in printed
    assert json.loads(out.read_text())["results"]
    assert main(["verify", "--settings", "quick", "--n", "200", "--mutant", "accept_all"]) == 1
    assert "REJECT" in capsys.readouterr().out
    quick = ["verify", "--settings", "quick", "--n", "200", "--drafter", "ngram+model"]
    assert main(quick) == 0
    assert main([*quick, "--mutant", "accept_all"]) == 1


def test_verify_rejects_bad_arguments(capsys) -> None:
    assert main(["verify", "--n", "3"]) == 2
    assert "--n must be at least 10" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra",
    [
        ["--drafter", "ngram", "--ngram-max", "2"],
        ["--drafter", "model-trimmed"],
        ["--drafter", "ngram+model-trimmed", "--gamma", "3"],
        ["--gamma-policy", "heuristic", "--confidence", "0.3"],
        ["--lean-target"],
        ["--lean-target", "--plain"],
        ["--drafter", "ngram+model", "--gamma", "6", "--model-gamma", "2"],
    ],
)
def test_generate_with_other_drafters_and_policies(folders, pair, tokenizer, capsys, extra) -> None:
    target_dir, draft_dir = folders
    argv = ["generate", "--target", str(target_dir), "--draft", str(draft_dir), "--prompt", "abab"]
    argv += ["--temperature", "0", "--max-new-tokens", "12", "--dtype", "float64", "--json", *extra]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    plain = autoregressive_generate(
        pair("llama")[0],
        tokenizer,
        "abab",
        sampling=SamplingConfig(temperature=0),
        max_new_tokens=12,
    )
    assert summary["tokens"] == list(plain.tokens)


def test_trimmed_drafter_without_a_ranking_exits_2(folders, capsys) -> None:
    target_dir = str(folders[0])  # a folder with a model but no token ranking
    argv = ["generate", "--target", target_dir, "--draft", target_dir, "--prompt", "ab"]
    assert main([*argv, "--drafter", "model-trimmed"]) == 2
    assert "needs token_ranking.safetensors in the draft folder" in capsys.readouterr().err


def test_lean_target_with_the_shared_early_exit_exits_2(folders, capsys) -> None:
    argv = ["generate", "--target", str(folders[0]), "--draft", str(folders[1]), "--prompt", "ab"]
    assert main([*argv, "--drafter", "early-exit-shared", "--lean-target"]) == 2
    assert "--lean-target does not apply to --drafter early-exit-shared" in capsys.readouterr().err


def test_model_gamma_needs_a_lookup_then_model_drafter(folders, capsys) -> None:
    argv = ["generate", "--target", str(folders[0]), "--draft", str(folders[1]), "--prompt", "ab"]
    assert main([*argv, "--model-gamma", "2"]) == 2  # the default drafter: the model alone
    assert "use --drafter ngram+..." in capsys.readouterr().err
    assert main([*argv, "--drafter", "ngram+model", "--model-gamma", "0"]) == 2
    assert "--model-gamma must be >= 1" in capsys.readouterr().err


def test_bad_ngram_range_exits_2(folders, capsys) -> None:
    argv = ["generate", "--target", str(folders[0]), "--draft", str(folders[1]), "--prompt", "ab"]
    for drafter in ("ngram", "ngram+model"):
        assert main([*argv, "--drafter", drafter, "--ngram-min", "3", "--ngram-max", "2"]) == 2
        assert "1 <= min_ngram <= max_ngram" in capsys.readouterr().err
