"""The target's own answers with what a head reads: generated features equal teacher-forced ones."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import torch

from specviz.heads.eagle import fused_layers
from specviz.train.data.regen import RegenConfig, shard_temperature
from specviz.train.data.shards import _write_ids, read_ids
from specviz.train.data.sources import debian_packages, man_page
from specviz.train.data.target_passes import answer_batch, score_batch
from tests.conftest import EOS, tiny_model

CFG = RegenConfig(max_new=12, topk=5, batch=3)


def _model() -> object:
    """A 6-layer tiny Llama (fused layers 2, 3, 3), float32 like the real target."""
    return tiny_model("llama", seed=5, num_hidden_layers=6).to(torch.float32)


def test_fused_layers_low_middle_high() -> None:
    assert fused_layers(30) == (2, 15, 27)
    assert fused_layers(6) == (2, 3, 3)
    assert fused_layers(3) == (1, 1, 2) and fused_layers(2) == (1, 1, 1)
    with pytest.raises(ValueError, match="too shallow"):
        fused_layers(1)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_generated_features_equal_teacher_forced(temperature: float) -> None:
    """What the generating passes saved is what one teacher-forced pass computes."""
    model = _model()
    prompts = [[3, 4, 5], [7, 8, 9, 10, 11, 12], [2]]  # different lengths: left padding matters
    gen = torch.Generator().manual_seed(1)
    records = answer_batch(
        model,
        prompts,
        EOS,
        temperature,
        gen,
        max_new=CFG.max_new,
        topk=CFG.topk,
    )
    forced = score_batch(model, [r["tokens"].tolist() for r in records], EOS, CFG.topk)
    width = 3 * int(model.config.hidden_size)  # type: ignore[attr-defined]
    for prompt, rec, ref in zip(prompts, records, forced, strict=True):
        tokens = rec["tokens"]
        assert tokens[: len(prompt)].tolist() == prompt and rec["start"] == len(prompt)
        assert len(tokens) > len(prompt)
        assert EOS not in tokens[len(prompt) : -1].tolist()  # an answer ends at its first eos
        assert rec["hidden"].shape == (len(tokens) - 1, width)
        assert rec["hidden"].dtype == torch.bfloat16
        assert rec["top_ids"].shape == rec["top_logp"].shape == (len(tokens) - 1, CFG.topk)
        torch.testing.assert_close(
            rec["hidden"].float(), ref["hidden"].float(), atol=0.05, rtol=0.02
        )
        assert torch.equal(rec["top_ids"], ref["top_ids"])
        torch.testing.assert_close(rec["top_logp"], ref["top_logp"], atol=2e-3, rtol=1e-3)
        if temperature == 0.0:  # greedy answers follow the argmax of the saved soft labels
            answer = slice(len(prompt) - 1, len(tokens) - 1)
            assert torch.equal(rec["top_ids"][answer, 0], tokens[len(prompt) :])


def test_soft_labels_are_normalised_log_probs() -> None:
    model = _model()
    rec = answer_batch(
        model,
        [[4, 5, 6]],
        EOS,
        1.0,
        torch.Generator().manual_seed(2),
        max_new=CFG.max_new,
        topk=CFG.topk,
    )[0]
    mass = rec["top_logp"].float().exp().sum(-1)
    assert bool((mass <= 1.0 + 1e-3).all()) and bool((mass > 0.0).all())
    assert bool((rec["top_logp"][:, :-1] >= rec["top_logp"][:, 1:]).all())  # sorted


def test_same_seed_same_answers_and_greedy_shards() -> None:
    model = _model()
    a = answer_batch(
        model,
        [[4, 5]],
        EOS,
        1.0,
        torch.Generator().manual_seed(3),
        max_new=CFG.max_new,
        topk=CFG.topk,
    )
    b = answer_batch(
        model,
        [[4, 5]],
        EOS,
        1.0,
        torch.Generator().manual_seed(3),
        max_new=CFG.max_new,
        topk=CFG.topk,
    )
    assert torch.equal(a[0]["tokens"], b[0]["tokens"])
    assert [shard_temperature(i, CFG) for i in range(4)] == [1.0, 0.0, 1.0, 1.0]


def test_ids_files_round_trip_byte_identical(tmp_path: Path) -> None:
    data = {"index": 3, "tokens": [[1, 2, 3]], "start": [2], "source": ["man"]}
    _write_ids(tmp_path / "a.json.gz", data)
    _write_ids(tmp_path / "b.json.gz", data)
    assert (tmp_path / "a.json.gz").read_bytes() == (tmp_path / "b.json.gz").read_bytes()
    assert read_ids(tmp_path / "a.json.gz") == data


def test_man_page_and_package_sources(tmp_path: Path) -> None:
    page = tmp_path / "frob.1.gz"
    roff = (
        ".TH FROB 1\n.SH NAME\nfrob \\- frobnicate the \\fBwidgets\\fR\n.SH SYNOPSIS\n.B frob\n"
        ".SH DESCRIPTION\n.PP\nThe \\fIfrob\\fR command turns widgets\ninto gadgets.\n.PP\n"
        "It reads \\-\\-input.\n.SH OPTIONS\n.TP\n\\-x\nignored\n"
    )
    page.write_bytes(gzip.compress(roff.encode()))
    text = "The frob command turns widgets into gadgets. It reads --input."
    assert man_page(page) == ("frob", "frobnicate the widgets", text)
    status = tmp_path / "status"
    status.write_text(
        "Package: frob\nVersion: 1\nDescription: widget frobnicator\n long text\n\n"
        "Package: glue\nDescription: sticks things\n"
    )
    assert debian_packages(status, tmp_path / "absent") == {
        "frob": "widget frobnicator",
        "glue": "sticks things",
    }


def test_the_pool_takes_equal_shares_then_what_the_larger_sources_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from specviz.train.data import regen

    sources = {"man": [f"man {i}" for i in range(30)], "debian": [f"deb {i}" for i in range(12)],
               "info": ["info 0", "info 1", "man 3"]}  # fmt: skip
    monkeypatch.setattr(regen, "load_docs", lambda: None)
    monkeypatch.setattr(
        regen, "source_prompts", lambda gen: {k: list(v) for k, v in sources.items()}
    )
    monkeypatch.setattr(regen, "training_prompts", lambda gen: [f"tpl {i}" for i in range(6)])
    monkeypatch.setattr(regen, "workload_style_prompts", lambda docs, gen: ["wl 0", "wl 1"])
    pool = regen.prompt_pool(regen.RegenConfig(prompts=40))  # 5 sources: shares of 8
    first = pool[: 8 + 8 + 3 + 6 + 2]  # every source gave its share or all it had
    assert {s for s, _ in first} == {"man", "debian", "info", "templates+stdlib", "workload-style"}
    assert sum(s == "man" for s, _ in first) == 8 and sum(s == "debian" for s, _ in first) == 8
    more = pool[len(first) :]
    assert len(pool) == 40 and {s for s, _ in more} <= {"man", "debian"}  # the larger ones
    texts = [t for _, t in more]
    assert len(set(texts)) == len(texts) and not set(texts) & {t for _, t in first}
    assert regen.prompt_pool(regen.RegenConfig(prompts=40)) == pool  # deterministic
