"""The data room's building blocks on tiny models: sampled answers, features, prompts, and the
resumable loop that fills a folder with shards."""

from __future__ import annotations

import logging
from itertools import islice
from pathlib import Path
from typing import Any

import torch

from specviz.train.common import fill_shards
from specviz.train.data.corpus import stdlib_files
from specviz.train.data.features import target_features
from specviz.train.data.prompts import CODE_TASKS, TOPICS, _function_prompts
from specviz.train.data.teacher import sample_batch
from tests.conftest import EOS, VOCAB, tiny_model


def test_stdlib_files_are_python_sources() -> None:
    found = list(islice(stdlib_files(150_000), 3))
    assert len(found) == 3 and all(path.suffix == ".py" for _, path in found)


def test_function_prompts_ask_about_the_functions_of_a_source() -> None:
    doc = '    """Return the area of a width by height rectangle."""\n'
    source = f"def area(width, height):\n{doc}    return width * height\n\ndef _hidden():\n{doc}"
    prompts = _function_prompts(source)
    assert prompts == [
        "Write a Python function `area` that does this: Return the area of a width by height "
        "rectangle."
    ]  # a private function is not asked for
    assert TOPICS and CODE_TASKS


def test_target_features_are_its_final_states_and_normalisers() -> None:
    model = tiny_model("llama", seed=5, scale=3.0)
    seqs = [[1, 2, 3, 4], [5, 6]]
    rows = target_features(model, seqs, pad=EOS)
    for seq, row in zip(seqs, rows, strict=True):
        with torch.no_grad():
            hidden = model.model(input_ids=torch.tensor([seq])).last_hidden_state[0]
            logz = torch.logsumexp(model.lm_head(hidden).float(), -1)
        assert row["features"].dtype == torch.float16 and row["features"].shape == hidden.shape
        torch.testing.assert_close(row["features"].float(), hidden.half().float())
        torch.testing.assert_close(row["logz"], logz, rtol=1e-5, atol=1e-5)


def test_sampled_answers_keep_the_top_k_log_probs() -> None:
    model = tiny_model("llama", seed=5, scale=3.0)
    gen = torch.Generator().manual_seed(0)
    records: list[Any] = sample_batch(model, [[1, 2, 3], [4, 5]], EOS, 4, 1.0, 2, gen)
    assert len(records) == 2
    for record in records:
        tokens = record["tokens"]
        assert len(tokens) > 0 and int(tokens.max()) < VOCAB
        assert record["ids"].shape[-1] == record["logp"].shape[-1] == 2  # top-k = 2
        assert bool((record["logp"].float() <= 0).all())
    gen = torch.Generator().manual_seed(0)
    again = sample_batch(model, [[1, 2, 3], [4, 5]], EOS, 4, 1.0, 2, gen)
    assert [r["tokens"].tolist() for r in again] == [r["tokens"].tolist() for r in records]


def test_fill_shards_makes_only_the_missing_shards_and_saves_them(tmp_path: Path) -> None:
    (tmp_path / "1.pt").write_bytes(b"kept")
    made = list(
        fill_shards(
            range(3), lambda i: tmp_path / f"{i}.pt", lambda i: {"i": i}, None, logging.getLogger()
        )
    )
    assert [(index, shard) for index, shard, _ in made] == [(0, {"i": 0}), (2, {"i": 2})]
    assert (tmp_path / "1.pt").read_bytes() == b"kept"
    assert torch.load(tmp_path / "2.pt") == {"i": 2}


def test_fill_shards_stops_once_its_time_is_spent(tmp_path: Path) -> None:
    shards = fill_shards(
        range(3), lambda i: tmp_path / f"{i}.pt", lambda i: {"i": i}, 0.0, logging.getLogger()
    )
    assert list(shards) == []
    assert not any(tmp_path.iterdir())
