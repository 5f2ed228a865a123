"""The `specviz generate` command on tiny local model folders, offline."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from specviz.api import autoregressive_generate
from specviz.cli import build_parser, main
from specviz.cli.defaults import drafter_options
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig
from specviz.core.events import Accepted, Prefill
from specviz.heads import lookup
from specviz.jsonl import read_jsonl
from specviz.runtime import DEFAULT_THREADS, set_threads
from specviz.tune.profile import Choice

from .bench.random_heads import save_random_heads
from .conftest import VOCAB, PairFactory, save_pair, tiny_model
from .templated import as_chat, templated_tokenizer
from .tune.profiles import make_profile, write_profile


@pytest.fixture(scope="module")
def folders(pair: PairFactory, tokenizer, tmp_path_factory) -> tuple[Path, Path]:
    return save_pair(tmp_path_factory.mktemp("models"), *pair("llama"), tokenizer)


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
        ["--drafter", "model:trimmed"],
        ["--drafter", "ngram+model:trimmed", "--gamma", "3"],
        ["--gamma-policy", "heuristic", "--confidence", "0.3"],
        ["--lean-target"],
        ["--lean-target", "--plain"],
        ["--drafter", "ngram+model", "--gamma", "6", "--model-gamma", "2"],
        ["--drafter", "tree-model", "--tree-nodes", "8", "--tree-depth", "3"],
        ["--drafter", "tree-model:sampled", "--tree-width", "2"],
        ["--drafter", "tree-ngram", "--tree-depth", "2"],
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


def test_the_typical_tree_rule_is_labelled_lossy(folders, capsys) -> None:
    argv = ["generate", "--target", str(folders[0]), "--draft", str(folders[1]), "--prompt", "ab"]
    argv += ["--drafter", "tree-model", "--max-new-tokens", "8", "--dtype", "float64"]
    assert main([*argv, "--tree-rule", "typical"]) == 0
    assert "LOSSY: typical acceptance" in capsys.readouterr().out
    assert main([*argv, "--tree-rule", "typical", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["exact"] is False
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["exact"] is True


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tree-rule", "typical"], "--tree-rule applies to tree drafters"),
        (["--drafter", "tree-model", "--gamma-policy", "heuristic"], "not --gamma-policy"),
        (["--drafter", "tree-ngram", "--lean-target"], "drop --lean-target"),
        (["--drafter", "tree-model", "--tree-nodes", "0"], "tree_nodes must be an integer >= 1"),
    ],
)
def test_tree_flags_that_do_not_fit_exit_2(folders, capsys, extra, message) -> None:
    argv = ["generate", "--target", str(folders[0]), "--draft", str(folders[1]), "--prompt", "ab"]
    assert main([*argv, *extra]) == 2
    assert message in capsys.readouterr().err


def test_trimmed_drafter_without_a_ranking_exits_2(folders, capsys) -> None:
    target_dir = str(folders[0])  # a folder with a model but no token ranking
    argv = ["generate", "--target", target_dir, "--draft", target_dir, "--prompt", "ab"]
    assert main([*argv, "--drafter", "model:trimmed"]) == 2
    assert "needs token_ranking.safetensors in the draft folder" in capsys.readouterr().err


def test_lean_target_with_the_shared_early_exit_exits_2(folders, capsys) -> None:
    argv = ["generate", "--target", str(folders[0]), "--draft", str(folders[1]), "--prompt", "ab"]
    assert main([*argv, "--drafter", "early-exit:shared", "--lean-target"]) == 2
    assert "--lean-target does not apply to --drafter early-exit:shared" in capsys.readouterr().err


def test_model_gamma_needs_a_lookup_then_model_drafter(folders, capsys) -> None:
    argv = ["generate", "--target", str(folders[0]), "--draft", str(folders[1]), "--prompt", "ab"]
    assert main([*argv, "--drafter", "model", "--model-gamma", "2"]) == 2  # the model alone
    assert "use --drafter ngram+FAMILY" in capsys.readouterr().err
    assert main([*argv, "--drafter", "ngram+model", "--model-gamma", "0"]) == 2
    assert "--model-gamma must be >= 1" in capsys.readouterr().err


def test_bad_ngram_range_exits_2(folders, capsys) -> None:
    argv = ["generate", "--target", str(folders[0]), "--draft", str(folders[1]), "--prompt", "ab"]
    for drafter in ("ngram", "ngram+model"):
        assert main([*argv, "--drafter", drafter, "--ngram-min", "3", "--ngram-max", "2"]) == 2
        assert "1 <= min_ngram <= max_ngram" in capsys.readouterr().err


def _generate(folders: tuple[Path, Path], *extra: str) -> list[str]:
    """A `specviz generate` command line on folders (flags after it as given)."""
    return ["generate", "--target", str(folders[0]), "--draft", str(folders[1]), *extra]


GREEDY = ("--temperature", "0", "--max-new-tokens", "8", "--dtype", "float64", "--json")


def _clean_env() -> dict[str, str]:
    """The environment of a subprocess: offline, UTF-8."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}


def test_a_prompt_that_is_not_utf8_exits_2_with_what_to_change(folders) -> None:
    argv = [sys.executable, "-m", "specviz", *_generate(folders), "--prompt"]
    done = subprocess.run(
        [*map(os.fsencode, argv), b"caf\xe9"],
        capture_output=True,
        env=_clean_env(),
        check=False,
    )
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "--prompt is not valid UTF-8 (byte 0xe9 at character 4)" in err
    assert "LANG=C.UTF-8" in err and "--prompt-file" in err


def test_a_prompt_with_undecodable_bytes_is_refused_by_main_too(folders, capsys) -> None:
    assert main(_generate(folders, "--prompt", "caf\udce9")) == 2  # how Python keeps 0xe9
    err = capsys.readouterr().err
    assert "--prompt is not valid UTF-8 (byte 0xe9" in err and "Traceback" not in err


def test_prompt_file_and_standard_input_give_what_prompt_gives(
    folders, tmp_path, capsys, monkeypatch
) -> None:
    assert main(_generate(folders, "--prompt", "the cat", *GREEDY)) == 0
    expected = json.loads(capsys.readouterr().out)
    path = tmp_path / "prompt.txt"
    path.write_bytes(b"the cat")
    assert main(_generate(folders, "--prompt-file", str(path), *GREEDY)) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == expected["tokens"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"the cat")))
    assert main(_generate(folders, "--prompt-file", "-", *GREEDY)) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == expected["tokens"]


def test_prompt_file_dash_reads_standard_input_in_a_real_process(folders) -> None:
    argv = [sys.executable, "-m", "specviz", *_generate(folders, "--prompt-file", "-", *GREEDY)]
    done = subprocess.run(argv, input=b"abab", capture_output=True, env=_clean_env(), check=False)
    assert done.returncode == 0, done.stderr.decode()
    summary = json.loads(done.stdout)
    assert summary["prompt_tokens"] == 4 and summary["new_tokens"] <= 8


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "--prompt-file {path}: cannot read it (No such file or directory)"),
        ("dir", "--prompt-file {path}: cannot read it (Is a directory)"),
        (b"caf\xe9", "--prompt-file {path} is not UTF-8 text (byte 0xe9 at offset 3): save it"),
        (b" \n", "--prompt-file {path} is empty"),
    ],
)
def test_a_prompt_file_that_cannot_be_used_exits_2_with_a_message(
    folders, tmp_path, capsys, content: bytes | str | None, message: str
) -> None:
    path = tmp_path / "p.txt"
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    assert main(_generate(folders, "--prompt-file", str(path))) == 2
    err = capsys.readouterr().err
    assert message.format(path=path) in err and "Traceback" not in err


def test_prompt_and_prompt_file_exclude_each_other_and_one_is_needed(folders, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(_generate(folders, "--prompt", "a", "--prompt-file", "-"))
    assert exit_.value.code == 2
    assert "not allowed with argument --prompt" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(_generate(folders))
    assert exit_.value.code == 2
    assert "one of the arguments --prompt --prompt-file is required" in capsys.readouterr().err


@pytest.fixture(scope="module")
def chat_folders(pair: PairFactory, tmp_path_factory) -> tuple[Path, Path]:
    """The tiny pair with a tokenizer that has a chat template."""
    root = tmp_path_factory.mktemp("chat-models")
    target, draft = pair("llama")
    for name, model in (("target", target), ("draft", draft)):
        model.save_pretrained(root / name)
        templated_tokenizer().save_pretrained(root / name)
    return root / "target", root / "draft"


def test_the_chat_template_is_applied_by_default_and_not_with_raw(
    chat_folders, pair, tokenizer, tmp_path, capsys
) -> None:
    events = tmp_path / "events.jsonl"
    greedy = SamplingConfig(temperature=0)
    for extra, text, fmt in (([], as_chat("ab"), "chat"), (["--raw"], "ab", "raw")):
        argv = _generate(chat_folders, "--prompt", "ab", *GREEDY, "--events", str(events), *extra)
        assert main(argv) == 0
        summary = json.loads(capsys.readouterr().out)
        ids = tokenizer(text)["input_ids"]
        plain = autoregressive_generate(
            pair("llama")[0], tokenizer, ids, sampling=greedy, max_new_tokens=8
        )
        assert summary["prompt_format"] == fmt and summary["prompt_tokens"] == len(ids)
        assert summary["tokens"] == list(plain.tokens)
        (prefill,) = [e for e in read_jsonl(events) if isinstance(e, Prefill)]
        assert prefill.prompt_tokens == len(ids)  # what the models were given
    assert (
        main([*_generate(chat_folders, "--prompt", "ab"), "--plain", "--max-new-tokens", "4"]) == 0
    )
    assert "prompt: 5 tokens, through the chat template" in capsys.readouterr().out


def test_without_a_chat_template_the_prompt_goes_as_raw_text(folders, capsys) -> None:
    assert main(_generate(folders, "--prompt", "ab", *GREEDY)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["prompt_format"] == "raw" and summary["prompt_tokens"] == 2


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_threads_must_be_a_positive_integer(folders, capsys, value: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(_generate(folders, "--prompt", "ab", "--threads", value))
    assert exit_.value.code == 2
    assert "argument --threads: must be an integer >= 1" in capsys.readouterr().err


def test_threads_is_applied_once_by_the_entry_point(folders) -> None:
    """In a process of its own: the thread count is the whole process's."""
    script = (
        "import sys, torch\n"
        "before = torch.get_num_threads()\n"
        "from specviz.cli import main\n"
        "assert torch.get_num_threads() == before  # importing specviz changes nothing\n"
        "assert main(sys.argv[1:]) == 0\n"
        "print(torch.get_num_threads())\n"
    )
    env = {k: v for k, v in _clean_env().items() if k != "OMP_NUM_THREADS"}
    seen = {}
    for extra, omp in (
        ([], None),
        ([], "2"),
        (["--threads", "3"], None),
        (["--threads", "3"], "2"),
    ):
        argv = [*_generate(folders, "--prompt", "ab", "--max-new-tokens", "2", *extra)]
        done = subprocess.run(
            [sys.executable, "-c", script, *argv],
            capture_output=True,
            text=True,
            env=env | ({"OMP_NUM_THREADS": omp} if omp else {}),
            check=False,
        )
        assert done.returncode == 0, done.stderr
        seen[(*extra, omp)] = int(done.stdout.split()[-1])
    assert seen == {
        (None,): DEFAULT_THREADS,  # one thread: safe where other processes share the cores
        ("2",): 2,  # OMP_NUM_THREADS, where set, is the default
        ("--threads", "3", None): 3,
        ("--threads", "3", "2"): 3,
    }


def test_generate_takes_its_threads_from_a_tuned_profile(folders, tmp_path) -> None:
    """In a process of its own: with no --threads, the profile of this machine and the pair
    sets the threads (and says so); --threads still wins."""
    speculative = Choice(forward="packed", threads=2)
    write_profile(tmp_path, make_profile(*map(str, folders), "float32", speculative=speculative))
    script = (
        "import sys, torch\n"
        "from specviz.cli import main\n"
        "assert main(sys.argv[1:]) == 0\n"
        "print(torch.get_num_threads())\n"
    )
    env = {k: v for k, v in _clean_env().items() if k != "OMP_NUM_THREADS"}
    seen, said = {}, {}
    for extra in ([], ["--threads", "3"]):
        argv = [*_generate(folders, "--prompt", "ab", "--max-new-tokens", "2", *extra)]
        done = subprocess.run(
            [sys.executable, "-c", script, *argv],
            capture_output=True,
            text=True,
            env=env | {"SPECVIZ_PROFILES": str(tmp_path)},
            check=False,
        )
        assert done.returncode == 0, done.stderr
        seen[len(extra)], said[len(extra)] = int(done.stdout.split()[-1]), done.stderr
    assert seen == {0: 2, 2: 3}
    assert "defaults from the tuned profile" in said[0] and "packed forward on 2" in said[0]


def test_set_threads_validates_and_defaults(monkeypatch) -> None:
    before = torch.get_num_threads()
    try:
        assert set_threads(2) == 2 and torch.get_num_threads() == 2
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert set_threads(None) == DEFAULT_THREADS == torch.get_num_threads()
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        assert set_threads(None) == 3 == torch.get_num_threads()
        monkeypatch.setenv("OMP_NUM_THREADS", "many")  # not a count: the default
        assert set_threads(None) == DEFAULT_THREADS
        for bad in (0, -1, True, 1.5):
            with pytest.raises(ValueError, match="threads must be an integer >= 1"):
                set_threads(bad)  # type: ignore[arg-type]
    finally:
        torch.set_num_threads(before)


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _parser(command: str) -> argparse.ArgumentParser:
    """The parser of a subcommand ("bench trees": a study of `specviz bench`)."""
    parser = _subparsers()[command.split()[0]]
    for word in command.split()[1:]:
        (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = action.choices[word]
    return parser


@pytest.mark.parametrize(
    "command", ["generate", "verify", "bench", "bench trees", "bench batch", "bench endpoint"]
)
def test_help_gives_every_option_a_text_and_shows_its_default(command: str) -> None:
    parser = _parser(command)
    formatter = parser._get_formatter()
    for action in parser._actions:
        hidden = action.help == argparse.SUPPRESS  # a flag refused with its spelling now
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction) or hidden:
            continue  # help itself, the study's name (each study its own help), hidden flags
        flag = action.option_strings[0]
        assert action.help, f"{command} {flag} has no help"
        default = action.default
        if default is not None and default is not False and default != argparse.SUPPRESS:
            shown = formatter._get_help_string(action) or ""
            assert "default" in shown, f"{command} {flag}: its help does not show its default"


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("generate", ["(default: 3", "(default: 64)", "(default: bundled)", "where set, else 1)"]),
        ("verify", ["(default: 1500)", "(default: full)", "(default: bundled)"]),
        ("bench", ["(default: 1,2,4,8,16)", "(default: 4)", "(default: bundled)"]),
    ],
)
def test_help_shows_the_defaults(command: str, shown: list[str], capsys) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(s in text for s in shown), [s for s in shown if s not in text]


@pytest.mark.parametrize(
    "extra",
    [["--target", "x"], ["--draft", "bundled"], ["--prompt", "hi"], ["--raw"]],
)
def test_verify_refuses_models_flags_with_the_toy_pair(extra: list[str], capsys) -> None:
    assert main(["verify", "--settings", "quick", "--n", "10", *extra]) == 2
    err = capsys.readouterr().err
    assert f"{extra[0]} applies to --pair models only" in err and "add --pair models" in err


def test_verify_names_every_models_flag_given_with_the_toy_pair(capsys) -> None:
    assert main(["verify", "--pair", "toy", "--target", "x", "--draft", "y"]) == 2
    assert "--target, --draft apply to --pair models only" in capsys.readouterr().err


def test_verify_with_models_sends_its_prompt_through_the_chat_template(
    chat_folders, tmp_path, capsys
) -> None:
    out = tmp_path / "verify.json"
    argv = ["verify", "--pair", "models", "--target", str(chat_folders[0])]
    argv += ["--draft", str(chat_folders[1]), "--prompt", "ab", "--settings", "quick"]
    argv += ["--n", "10", "--json", str(out)]
    for extra, fmt, printed in (
        ([], "chat", "prompt: 5 tokens, through the chat template"),
        (["--raw"], "raw", "prompt: 2 tokens, as raw text"),
    ):
        assert main([*argv, *extra]) in (0, 1)  # 10 samples: only the format is checked here
        assert printed in capsys.readouterr().out
        assert json.loads(out.read_text())["prompt_format"] == fmt


@pytest.fixture(scope="module")
def heads_dir(pair: PairFactory, tmp_path_factory) -> Path:
    """Random eagle3 and medusa (3 heads) weights for the tiny target of `folders`."""
    folder = tmp_path_factory.mktemp("heads")
    return save_random_heads(pair("llama")[0], folder, seed=4, head_tokens=torch.arange(2, VOCAB))


HEAD_RUNS = [
    ["--drafter", "medusa", "--gamma", "3"],
    ["--drafter", "tree-medusa", "--tree-depth", "3", "--tree-nodes", "5"],
    ["--drafter", "medusa", "--lean-target"],
    ["--drafter", "tree-medusa", "--tree-depth", "3", "--lean-target"],  # a head tree takes it
    ["--drafter", "eagle"],
    ["--drafter", "ngram+eagle"],
    ["--drafter", "tree-eagle", "--tree-depth", "3"],
    ["--drafter", "eagle", "--lean-target"],
    ["--drafter", "tree-eagle", "--tree-depth", "3", "--lean-target"],
]


@pytest.mark.parametrize("extra", HEAD_RUNS, ids=" ".join)
def test_head_drafters_decode_as_plain_greedy_decoding(
    folders, heads_dir, pair, tokenizer, capsys, extra
) -> None:
    argv = _generate(folders, "--prompt", "abab", "--heads", str(heads_dir), *GREEDY, *extra)
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    plain = autoregressive_generate(
        pair("llama")[0], tokenizer, "abab", sampling=SamplingConfig(temperature=0),
        max_new_tokens=8,
    )  # fmt: skip
    assert summary["tokens"] == list(plain.tokens) and summary["proposed"] > 0
    if not extra[1].startswith("ngram+"):  # lookup copies from the prompt; a head needs features
        assert summary["per_round"][0]["proposed"] == 0


@pytest.mark.parametrize(
    ("drafter", "lean_target", "made"),
    [
        *(("eagle", False, KVCache), ("eagle", True, None), ("tree-medusa", False, KVCache)),
        *(("tree-medusa", True, None), ("model", False, None), ("model", True, None)),
    ],
)
def test_a_head_verifies_through_the_target_forward_plain_decoding_uses(
    drafter: str, lean_target: bool, made: object
) -> None:
    """--lean-target decides the heads' target forward (None: specviz.fast.lean's, as the plain
    run's with it); a draft model's forward stays the registry's either way."""
    flags = ["--lean-target"] if lean_target else []
    args = build_parser().parse_args(["generate", "--prompt", "a", "--drafter", drafter, *flags])
    assert drafter_options(args).make_cache is made


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--heads", "{heads}"], "--heads gives the drafting heads' weights: it applies to"),
        (["--heads", "{heads}", "--plain", "--drafter", "eagle"], "it applies to --drafter"),
        (["--heads", "/no/such/heads", "--drafter", "eagle"], "/no/such/heads: no such folder"),
        (["--heads", "{empty}", "--drafter", "tree-medusa"], "holds no medusa.safetensors"),
        (["--drafter", "tree-eagle"], "the tree-eagle drafter reads the eagle3 head shipped"),
        (["--drafter", "tree-model", "--lean-target"], "drop --lean-target (the head trees"),
    ],
)
def test_head_flags_that_do_not_fit_exit_2_before_any_model_loads(
    heads_dir, tmp_path, capsys, monkeypatch, extra: list[str], message: str
) -> None:
    monkeypatch.setattr(lookup, "ASSETS", tmp_path / "none")  # no shipped heads
    given = [a.format(heads=heads_dir, empty=tmp_path) for a in extra]
    assert main(["generate", "--target", "/no/such/model", "--prompt", "ab", *given]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_heads_trained_for_another_target_are_refused(folders, pair, tmp_path, capsys) -> None:
    other = tiny_model("llama", seed=9, scale=3.0)  # same shapes, other weights
    save_random_heads(other, tmp_path, seed=4, head_tokens=torch.arange(2, VOCAB))
    argv = _generate(folders, "--prompt", "ab", "--heads", str(tmp_path), *GREEDY)
    assert main([*argv, "--drafter", "medusa"]) == 2
    err = capsys.readouterr().err
    assert "the medusa drafter cannot draft for this target" in err
    assert "this head was trained on the features of" in err and "Traceback" not in err
    assert main([*argv, "--drafter", "tree-eagle"]) == 2
    err = capsys.readouterr().err
    assert "the eagle drafters cannot draft for this target" in err
    assert "this EAGLE-3 head was trained on the features of" in err and "Traceback" not in err


@pytest.mark.parametrize("json_mode", [False, True])
def test_a_run_says_which_drafter_gamma_and_forward_ran_and_how_fast(
    folders, capsys, json_mode: bool
) -> None:
    """One line after the report (on stderr in --json mode, so stdout stays one JSON)."""
    argv = _generate(folders, "--prompt", "the cat", "--drafter", "ngram+model", "--gamma", "2")
    argv += ["--temperature", "0", "--max-new-tokens", "6", "--dtype", "float64"]
    assert main([*argv, *(["--json"] if json_mode else [])]) == 0
    out, err = capsys.readouterr()
    line = (err if json_mode else out).strip().splitlines()[-1]
    assert re.fullmatch(
        r"specviz: drafter ngram\+model, γ=2, target forward (lean|transformers'), 1 thread\(s\): "
        r"\d+ tokens in [\d.]+ s, [\d.]+ tok/s",
        line,
    ), line
    if json_mode:
        assert json.loads(out)["new_tokens"] > 0 and "specviz: drafter" not in out


def test_a_mistyped_drafter_gets_one_line_naming_the_close_ones(folders, capsys) -> None:
    argv = _generate(folders, "--prompt", "the cat", "--drafter", "ngram+modle")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean ngram+model" in err
