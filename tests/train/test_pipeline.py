"""`python -m specviz.train heads all`: the EAGLE-3 pipeline in one command, dry-run on the CPU
with a tiny target (the same code runs on CUDA with --device cuda)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from specviz.train.data.regen import RegenConfig, rescorer, run_regen
from specviz.train.data.shards import prompt_key, read_ids, shard_prompts
from specviz.train.heads.eagle import EagleConfig
from specviz.train.heads.pipeline import PipelineConfig, run_pipeline
from tests.conftest import char_tokenizer, tiny_model

POOL = [("toy", f"{a} {b}") for a in "abcdefgh" for b in ("cat", "dog", "mat", "sat")]


def test_the_pipeline_makes_data_trains_evaluates_and_exports(tmp_path: Path) -> None:
    target = tiny_model("llama", seed=5, scale=3.0, num_hidden_layers=6).to(torch.float32)
    tokenizer = char_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    cfg = PipelineConfig(
        shards=8, steps=6, minutes=5.0,
        regen=RegenConfig(prompts=32, batch=2, per_shard=2, max_new=5, topk=6),
        eagle=EagleConfig(vocab=12, kl_warmup=3, warmup=2, total_steps=6, batch_positions=32,
                            max_len=16, group=2, eval_every=4, eval_sequences=2),
    )  # fmt: skip
    ids = tmp_path / "ids"
    ids.mkdir()
    summary = run_pipeline(cfg, target, tokenizer, ids, tmp_path / "out", pool=POOL)
    assert summary["data"]["shards"] == 8 and summary["data"]["answer_tokens"] > 0
    assert sorted(p.name for p in ids.iterdir()) == [f"ids_{i:05d}.json.gz" for i in range(8)]
    assert read_ids(ids / "ids_00007.json.gz")["tokens"]  # the held-out shard
    assert summary["training"]["step"] == 6
    rows = [json.loads(r) for r in (tmp_path / "out" / "head" / "curve.jsonl").open()]
    assert [r["step"] for r in rows] == [4, 6]  # every 4 steps, and at the end
    assert summary["held_out"] == rows[-1] and 0 <= rows[-1]["alpha_1"] <= 1
    assert Path(summary["weights"]).is_file()
    again = run_pipeline(cfg, target, tokenizer, ids, tmp_path / "out", pool=POOL)
    assert again["training"]["step"] == 6  # resumed: already done, nothing more to make
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == again
    assert (tmp_path / "out" / "head" / "curve.jsonl").read_text().count("\n") == 2  # no repeat


def test_a_short_budget_makes_a_held_out_and_a_training_shard_first() -> None:
    order = PipelineConfig(shards=90).order()
    assert order[:4] == [7, 0, 47, 87] and sorted(order) == list(range(90))
    assert order[4:] == [i for i in range(1, 90) if i % 40 != 7]


def test_bad_sizes_say_what_to_change() -> None:
    with pytest.raises(ValueError, match="no held-out shard"):
        PipelineConfig(shards=5)
    with pytest.raises(ValueError, match="minutes must be > 0"):
        PipelineConfig(minutes=0)


def test_regen_without_rescoring_generates_new_shards_only(tmp_path: Path) -> None:
    """`data regen --no-rescore` on a machine with the ids but no features makes the new shards and
    leaves the others to training (heads train --rescore), recording those training rebuilt."""
    target = tiny_model("llama", seed=5, scale=3.0, num_hidden_layers=6).to(torch.float32)
    tokenizer = char_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    cfg = RegenConfig(prompts=32, batch=2, per_shard=2, max_new=5, topk=6)
    ids = tmp_path / "ids"
    ids.mkdir()
    first = run_regen(cfg, range(2), ids, None, 0, loaded=(target, tokenizer),
                      out_dir=tmp_path / "old", pool=POOL)  # fmt: skip
    fresh = tmp_path / "fresh"  # the ids were kept, the features were not
    again = run_regen(cfg, range(3), ids, None, 0, loaded=(target, tokenizer), out_dir=fresh,
                      pool=POOL, rescore=False)  # fmt: skip
    assert sorted(again["shards"]) == ["2"] and again["shards"]["2"]["made"] == "generated"
    assert sorted(p.name for p in fresh.glob("feats_*.pt")) == ["feats_00002.pt"]
    rescorer(target, int(tokenizer.eos_token_id), ids, fresh, cfg)(0)  # as training does
    assert torch.load(fresh / "feats_00000.pt", weights_only=False)["layers"] == [2, 3, 3]
    after = run_regen(cfg, range(3), ids, None, 0, loaded=(target, tokenizer), out_dir=fresh,
                      pool=POOL, rescore=False)  # fmt: skip
    assert sorted(after["shards"]) == ["0", "2"]
    row = after["shards"]["0"]
    assert row["made"] == "rescored in training" and row["ids"] == first["shards"]["0"]["ids"]
    assert row["positions"] == first["shards"]["0"]["positions"]


def test_regen_answers_a_prompt_once(tmp_path: Path) -> None:
    """A prompt that a shard already holds is left out of the shards made after it (pools made
    on two machines can meet), so a held-out prompt is never trained on."""
    target = tiny_model("llama", seed=5, scale=3.0, num_hidden_layers=6).to(torch.float32)
    tokenizer = char_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    cfg = RegenConfig(prompts=6, batch=2, per_shard=3, max_new=5, topk=6)
    pool = [("toy", t) for t in ("the cat", "a dog sat", "the mat", "a dog sat", "on it", "hi")]
    ids = tmp_path / "ids"
    ids.mkdir()
    run_regen(cfg, range(2), ids, None, 0, loaded=(target, tokenizer), out_dir=tmp_path / "f",
              pool=pool)  # fmt: skip
    first, second = (read_ids(ids / f"ids_{i:05d}.json.gz") for i in (0, 1))
    assert sorted(first["prompt_index"]) == [0, 1, 2]  # the control: a new shard keeps them all
    assert sorted(second["prompt_index"]) == [4, 5]  # pool[3] repeats pool[1]: answered
    prompts = [prompt_key(t, s) for d in (first, second)
               for t, s in zip(d["tokens"], d["start"], strict=True)]  # fmt: skip
    assert len(set(prompts)) == len(prompts) == 5
    assert shard_prompts(ids, [0, 1]) == set(prompts)
