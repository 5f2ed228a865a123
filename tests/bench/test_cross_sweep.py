"""`specviz bench cross`: its plan refuses what it cannot run, and on a tiny pair of two
tokenizers it saves one row per speculative run and renders the table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specviz.bench.sweeps.cross import DEFAULT_CROSS, cross_plan, render_cross
from specviz.cli import build_parser, main
from specviz.cli.bench import study_of
from specviz.results.schema import validate

from ..drafters.cross_pairs import char, char_bpe, tiny_llama


def _args(*argv: str) -> Any:
    """The flags of `specviz bench cross ARGV`, with the study's defaults."""
    args = build_parser().parse_args(["bench", "cross", *argv])
    return study_of(args).chosen(args)


def test_the_plan_runs_the_cross_drafters_at_each_gamma() -> None:
    plan = cross_plan(_args("--gammas", "2,4"), ["fixed"])
    assert plan.drafters == ("cross", "cross:text")
    assert plan.gammas == (2, 4) and DEFAULT_CROSS == "cross,cross:text"
    only = cross_plan(_args("--drafters", "cross:text"), ["fixed"])
    assert only.drafters == ("cross:text",)


@pytest.mark.parametrize(
    ("argv", "policies", "message"),
    [
        (["--drafters", "model"], ["fixed"], r"--drafters must list some of cross,cross:text"),
        (["--drafters", "cross,model"], ["fixed"], r"--drafters must list some of cross"),
        ([], ["fixed", "heuristic"], r"drop --policies"),
        (["--draft", "a", "--draft", "b"], ["fixed"], r"drop --draft twice"),
    ],
)
def test_the_plan_refuses_what_it_cannot_run(
    argv: list[str], policies: list[str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        cross_plan(_args(*argv), policies)


def _saved_pair(root: Path) -> tuple[str, str]:
    """A random Llama over one-character tokens (target) and one over a BPE of the same
    characters (draft), each saved with its tokenizer."""
    for name, tok, seed in (("t", char(), 1), ("d", char_bpe(), 2)):
        tiny_llama(len(tok), seed).save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return str(root / "t"), str(root / "d")


def test_a_tiny_pair_saves_a_row_per_run_and_renders_its_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target, draft = _saved_pair(tmp_path)
    workload = tmp_path / "tiny.jsonl"
    requests = [("a", "the cat sat on the", 0.0), ("b", "a dog and a cat", 0.0)]
    workload.write_text(
        "".join(
            json.dumps(
                {"id": i, "category": "tiny", "prompt": p, "max_new_tokens": 10, "temperature": t}
            )
            + "\n"
            for i, p, t in requests
        ),
        encoding="utf-8",
    )
    out = tmp_path / "cross.json"
    argv = ["bench", "cross", "--target", target, "--draft", draft, "--workloads", str(workload)]
    argv += ["--gammas", "2,3", "--reps", "2", "--dtype", "float64", "--step-batch-sizes", "1"]
    argv += ["--raw", "--out", str(out), "--html", str(tmp_path / "cross.html")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text(encoding="utf-8"))
    validate(result)
    section = result["cross"]
    assert len(section["runs"]) == 2 * 2 * 2 * 2  # requests x drafters x gammas x repetitions
    assert len(section["baselines"]) == 2 * 2 and len(result["records"]) == 16
    assert all(r["identical"] for r in section["runs"])  # T = 0: the target's own tokens
    assert all(r["speedup_assisted"] is not None for r in section["runs"])
    assert {r["drafter"] for r in section["runs"]} == {"cross:text", "cross"}
    plan = section["plan"]
    assert plan["shared_tokens"] > 0 and not plan["same_tokenizer"]
    assert plan["command"] == result["meta"]["command"]  # the command line that ran it
    table = render_cross(section)
    assert "| drafter | γ | T | runs | α | tokens / pass | c | × plain |" in table
    assert table.count("| cross") == 4 and "| 4/4 |" in table  # (drafter, γ) rows, 4 runs each
    assert table in printed
    assert main(["bench", "markdown", str(out)]) == 0
    assert table in capsys.readouterr().out


def test_a_malformed_cross_section_is_named() -> None:
    from specviz.results.sections import problems

    assert problems("cross", None) == []
    assert problems("cross", {"plan": {}, "runs": [{"request": "a"}], "baselines": []}) == [
        "cross's run 0 lacks some of request, category, temperature, rep, drafter, gamma, "
        "tokens, alpha, tokens_per_pass, c, speedup_plain, speedup_generate, "
        "speedup_assisted, identical"
    ]
