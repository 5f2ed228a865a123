"""`specviz generate --prompt-file FILE --batch N` on tiny local model folders, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specviz.api import speculative_generate
from specviz.cli import main
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import Finished
from specviz.jsonl import read_jsonl

from ..conftest import PairFactory, save_pair

PROMPTS = ["the cat", "a dog sat", '"two\\nlines"', "", "hello there, friend"]


@pytest.fixture(scope="module")
def folders(pair: PairFactory, tokenizer, tmp_path_factory) -> tuple[Path, Path]:
    return save_pair(tmp_path_factory.mktemp("models"), *pair("llama"), tokenizer)


def generate(folders, prompt_file: Path, *extra: str) -> int:
    """Run specviz generate on the tiny folders (float64, 10 tokens, raw prompts)."""
    target_dir, draft_dir = folders
    argv = ["generate", "--target", str(target_dir), "--draft", str(draft_dir), "--raw"]
    argv += ["--prompt-file", str(prompt_file), "--max-new-tokens", "10", "--dtype", "float64"]
    return main([*argv, *extra])


@pytest.mark.parametrize("batch", ["2", "4"])
def test_each_request_is_its_single_decode_seeded_seed_plus_its_rank(
    folders, pair, tokenizer, tmp_path, capsys, batch
) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    events = tmp_path / "events.jsonl"
    argv = ["--batch", batch, "--drafter", "model", "--gamma", "3", "--seed", "5"]
    argv += ["--temperature", "1", "--json", "--events", str(events)]
    assert generate(folders, prompts, *argv) == 0
    out = json.loads(capsys.readouterr().out)
    texts = ["the cat", "a dog sat", "two\nlines", "hello there, friend"]  # the empty line skipped
    assert [r["prompt_tokens"] for r in out["requests"]] == [len(t) for t in texts]
    target, draft = pair("llama")
    for i, text in enumerate(texts):
        alone = speculative_generate(
            target,
            draft,
            tokenizer,
            text,
            sampling=SamplingConfig(seed=5 + i),
            speculation=SpeculationConfig(gamma=3, max_new_tokens=10),
        )
        assert out["requests"][i]["tokens"] == list(alone.tokens), i
    finished = [e for e in read_jsonl(events) if isinstance(e, Finished)]
    assert sorted(e.row for e in finished) == [0, 1, 2, 3]  # rows numbered over the whole file
    assert out["total"]["new_tokens"] == sum(r["new_tokens"] for r in out["requests"])


def test_plain_batch_and_the_text_report(folders, tmp_path, capsys) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the cat\na dog\n", encoding="utf-8")
    assert generate(folders, prompts, "--batch", "2", "--plain", "--temperature", "0") == 0
    out = capsys.readouterr().out
    assert "[request 0]" in out and "[request 1]" in out
    assert "2 requests, 2 at a time" in out and "tokens/s" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--batch", "0"], "--batch must be between 1 and"),
        (["--batch", "2", "--drafter", "eagle"], "has no batched form: use one of model"),
        (["--batch", "2", "--lean-target"], "--lean-target does not apply to a batched decode"),
        (["--batch", "2", "--gamma-policy", "theory"], "--gamma-policy does not apply"),
        (["--batch", "2", "--preset", "json"], "--preset does not apply to a batched decode"),
    ],
)
def test_bad_batch_flags_exit_2_before_loading(folders, tmp_path, capsys, extra, message) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the cat\n", encoding="utf-8")
    assert generate(folders, prompts, *extra) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bad_prompt_files_name_the_line(folders, tmp_path, capsys) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text('the cat\n"not closed\n', encoding="utf-8")
    assert generate(folders, prompts, "--batch", "2") == 2
    assert "line 2 starts with '\"' but is not one JSON string" in capsys.readouterr().err
    prompts.write_text("\n  \n", encoding="utf-8")
    assert generate(folders, prompts, "--batch", "2") == 2
    assert "is empty: give some text to continue" in capsys.readouterr().err
    prompts.write_text('the cat\n""\n', encoding="utf-8")
    assert generate(folders, prompts, "--batch", "2") == 2
    assert "line 2: the JSON string is empty" in capsys.readouterr().err
    long = tmp_path / "long.txt"
    long.write_text("the cat\n" + "a" * 5000 + "\n", encoding="utf-8")
    assert generate(folders, long, "--batch", "2") == 2
    assert "prompt 1: prompt is" in capsys.readouterr().err


def test_batch_needs_a_prompt_file(folders, capsys) -> None:
    target_dir, draft_dir = folders
    argv = ["generate", "--target", str(target_dir), "--draft", str(draft_dir), "--prompt", "hi"]
    assert main([*argv, "--batch", "2"]) == 2
    assert "--batch decodes the prompts of --prompt-file" in capsys.readouterr().err
