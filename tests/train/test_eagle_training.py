"""The EAGLE-3 head's training: losses, draft vocabulary, streaming, checkpoint and resume."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from specviz.heads.eagle import EagleShape
from specviz.train.data.regen import RegenConfig, rescorer
from specviz.train.data.shards import _write_ids
from specviz.train.data.stream import (
    RegenStream,
    StreamConfig,
    collate,
    load_shard,
    ready_shards,
)
from specviz.train.data.target_passes import score_batch
from specviz.train.heads.accept import alpha, draft_index, position_loss, soft_labels
from specviz.train.heads.eagle import EagleConfig, EagleTrainer, curve_row, run_eagle
from specviz.train.heads.vocab import (
    answer_counts,
    coverage,
    draft_vocab,
    head_step_ms,
    training_ids,
    trim_head,
    vocab_rows,
)
from tests.conftest import EOS, VOCAB, tiny_model


def test_tv_loss_is_one_minus_the_overlap() -> None:
    p = torch.tensor([[0.5, 0.3, 0.2, 0.0], [0.1, 0.1, 0.1, 0.6]])
    q = torch.tensor([[0.25, 0.25, 0.25, 0.25], [0.1, 0.1, 0.1, 0.7]])
    tv = position_loss("tv", p, q.log())
    torch.testing.assert_close(tv, torch.tensor([1 - (0.25 + 0.25 + 0.2), 1 - 0.9]))
    torch.testing.assert_close(alpha(p, q.log()), 1 - tv)
    kl = position_loss("kl", p, q.log())
    torch.testing.assert_close(kl, -(p * q.log()).sum(-1))
    torch.testing.assert_close(position_loss("lk", p, q.log(), 0.3), 0.3 * kl + 0.7 * tv)
    with pytest.raises(ValueError, match="unknown loss"):
        position_loss("l2", p, q.log())


def test_tv_gradient_moves_q_toward_p() -> None:
    p = torch.tensor([[0.6, 0.3, 0.1, 0.0]])
    logits = torch.zeros(1, 4, requires_grad=True)
    overlaps = [float(alpha(p, torch.log_softmax(logits.detach(), -1)))]
    distance = float((torch.softmax(logits.detach(), -1) - p).abs().sum())
    for _ in range(60):
        loss = position_loss("tv", p, torch.log_softmax(logits, -1)).sum()
        (grad,) = torch.autograd.grad(loss, logits)
        assert float(grad[0, 0]) < 0 < float(grad[0, 3]) or overlaps[-1] > 0.9  # q up where q < p
        with torch.no_grad():
            logits -= 0.5 * grad
        overlaps.append(float(alpha(p, torch.log_softmax(logits.detach(), -1))))
    assert overlaps[1] > overlaps[0] and overlaps[-1] > 0.9
    assert float((torch.softmax(logits.detach(), -1) - p).abs().sum()) < distance / 2


def test_a_curve_row_carries_the_progress_the_callers_keys_and_rounded_alphas() -> None:
    state = {"positions": 10, "answer_positions": 6, "step": 3, "elapsed": 5400.0, "lr": 1.0}
    row = curve_row(state, "tv", 40, [0.123456, 0.5], {"scored_from": "export"})
    assert row == {
        "positions": 10, "answer_positions": 6, "step": 3, "hours": 1.5, "loss": "tv",
        "scored_from": "export", "eval_positions": 40, "alpha_1": 0.12346, "alpha_2": 0.5,
    }  # fmt: skip


def test_a_head_cut_to_its_likeliest_tokens_keeps_their_rows_and_the_rest() -> None:
    from specviz.heads.eagle import fresh_head

    head = fresh_head(_model(), torch.tensor([5, 3, 8]), torch.Generator().manual_seed(0))
    counts = torch.zeros(VOCAB, dtype=torch.long)
    counts[[3, 5, 8]] = torch.tensor([9, 2, 2])  # 3 first; 5 and 8 tie: the head's order
    cut = trim_head(head, counts, 2)
    assert cut.vocab.tolist() == [3, 5]
    torch.testing.assert_close(cut.lm, head.lm[[1, 0]], rtol=0, atol=0)
    kept, old = cut.state_dict(), head.state_dict()  # every other weight as it was
    assert all(torch.equal(kept[k], old[k]) for k in set(old) - {"vocab", "lm"})
    with pytest.raises(ValueError, match="cannot cut a draft vocabulary of 3 tokens to 4"):
        trim_head(head, counts, 4)


def test_soft_labels_keep_the_draft_vocabulary_only() -> None:
    vocab = torch.tensor([4, 1, 7])
    t2d = draft_index(vocab, 10)
    assert t2d.tolist() == [3, 1, 3, 3, 0, 3, 3, 2, 3, 3]
    top_ids = torch.tensor([[1, 5, 7], [4, 9, 1]])
    top_logp = torch.tensor([[0.5, 0.3, 0.2], [0.7, 0.2, 0.1]]).log()
    p = soft_labels(top_ids, top_logp, t2d, 3)
    torch.testing.assert_close(p, torch.tensor([[0.0, 0.5, 0.2], [0.7, 0.1, 0.0]]))


def _ids(tokens: list[list[int]], start: list[int], index: int) -> dict[str, Any]:
    return {"index": index, "tokens": tokens, "start": start, "source": ["t"] * len(tokens),
            "temperature": 1.0}  # fmt: skip


def test_vocabulary_by_answer_coverage(tmp_path: Path) -> None:
    _write_ids(tmp_path / "ids_00000.json.gz", _ids([[9, 9, 3, 3, 3, 5], [9, 5, 5]], [2, 1], 0))
    _write_ids(tmp_path / "ids_00001.json.gz", _ids([[8, 3, 6]], [1], 1))
    _write_ids(tmp_path / "ids_00007.json.gz", _ids([[1, 1, 1, 1]], [0], 7))  # held out
    paths = training_ids(tmp_path)
    assert [p.name for p in paths] == ["ids_00000.json.gz", "ids_00001.json.gz"]
    counts = answer_counts(paths, 10)  # answers: 3 3 3 5 | 5 5 | 3 6 (prompts not counted)
    assert counts.tolist() == [0, 0, 0, 4, 0, 3, 1, 0, 0, 0]
    assert draft_vocab(counts, 2).tolist() == [3, 5]
    assert coverage(counts, draft_vocab(counts, 2)) == pytest.approx(7 / 8)
    assert coverage(counts, draft_vocab(counts, 1)) == pytest.approx(4 / 8)
    fill = torch.tensor([9, 8, 7, 6, 5, 4, 3, 2, 1, 0])
    assert draft_vocab(counts, 5, fill).tolist() == [3, 5, 6, 9, 8]  # unseen ones in fill order
    assert draft_vocab(counts, 4).tolist() == [3, 5, 6, 0]
    shape = EagleShape(width=16, heads=2, kv_heads=1, head_dim=8, intermediate=32,
                       rope_theta=1e4, eps=1e-6)  # fmt: skip
    assert head_step_ms(shape, 8, reps=5, past=4) > 0
    held = answer_counts(training_ids(tmp_path, held_out=True), 10)
    assert held.tolist() == [0, 4, 0, 0, 0, 0, 0, 0, 0, 0]
    rows = vocab_rows(counts, shape, (1, 2), reps=3, held_out=held)
    assert [r["size"] for r in rows] == [1, 2, 10]
    assert [r["coverage"] for r in rows] == [0.5, 0.875, 1.0]
    assert [r["held_out_coverage"] for r in rows] == [0.0, 0.0, 1.0]


def _model() -> Any:
    """A 6-layer tiny Llama (fused layers 2, 3, 3), float32."""
    return tiny_model("llama", seed=5, scale=3.0, num_hidden_layers=6).to(torch.float32)


def write_shards(model: Any, root: Path, shards: range, per_shard: int = 4) -> StreamConfig:
    """Synthetic regen shards (random prompts and answers, the model's own features)."""
    gen = torch.Generator().manual_seed(0)
    for index in shards:
        lengths = torch.randint(8, 20, (per_shard,), generator=gen).tolist()
        seqs = [torch.randint(1, VOCAB, (n,), generator=gen).tolist() for n in lengths]
        starts = [int(torch.randint(2, 6, (1,), generator=gen)) for _ in seqs]
        feats = score_batch(model, seqs, EOS, topk=6)
        torch.save({"index": index, "layers": [2, 3, 3], "seqs": feats},
                   root / f"feats_{index:05d}.pt")  # fmt: skip
        _write_ids(root / f"ids_{index:05d}.json.gz", _ids(seqs, starts, index))
    return StreamConfig(feats_dir=root, ids_dir=root, batch_positions=48, max_len=16, group=2)


def test_stream_batches_every_sequence_once_an_epoch(tmp_path: Path) -> None:
    cfg = write_shards(_model(), tmp_path, range(8))
    assert ready_shards(cfg) == ([0, 1, 2, 3, 4, 5, 6], [7])
    stream = RegenStream(cfg)
    seen: list[tuple[int, int]] = []
    while True:
        batch_seqs = stream.next_batch()
        if stream.epoch > 0:
            break
        assert len(batch_seqs) == len(stream.plan[stream.cursor - 1])
        seen += stream.plan[stream.cursor - 1]
    assert sorted(seen) == [(s, j) for s in range(7) for j in range(4)]
    batch = collate(stream.next_batch(), cfg.max_len, 0.25)
    assert batch["first"].shape[-1] == 3 * 32
    assert bool((batch["first"][:, 0] == 0).all())
    assert set(batch["weight"].flatten().tolist()) <= {0.0, 0.25, 1.0}
    assert bool((batch["weight"][batch["answer"]] == 1.0).all())


CFG = EagleConfig(vocab=20, depth=5, kl_warmup=8, lr=1e-2, warmup=2, total_steps=20,
                   batch_positions=48, max_len=16, group=2, eval_every=5, eval_sequences=4,
                   log_every=100)  # fmt: skip


def test_training_lowers_the_loss_and_resumes_exactly(tmp_path: Path) -> None:
    model = _model()
    (tmp_path / "data").mkdir()
    stream = write_shards(model, tmp_path / "data", range(8))
    frozen = {k: v.clone() for k, v in model.state_dict().items()}
    whole = run_eagle(CFG, model, stream, tmp_path / "whole", 20, None)
    assert all(torch.equal(v, frozen[k]) for k, v in model.state_dict().items())  # target frozen
    assert whole["step"] == 20 and whole["positions"] > 0
    assert (tmp_path / "whole" / "eagle3.safetensors").is_file()
    rows = [json.loads(line) for line in (tmp_path / "whole" / "curve.jsonl").open()]
    assert [r["step"] for r in rows] == [5, 10, 15, 20]
    assert [r["loss"] for r in rows] == ["kl", "tv", "tv", "tv"]
    assert all(0 <= r[f"alpha_{d}"] <= 1 and r["vocab"] == 20 for r in rows for d in range(1, 6))
    run_eagle(CFG, model, stream, tmp_path / "split", 7, None)
    with (tmp_path / "split" / "curve.jsonl").open("a") as curve:  # a row past the checkpoint,
        curve.write(json.dumps(rows[1] | {"alpha_1": -1.0}) + "\n")  # as a killed run leaves
    split = run_eagle(CFG, model, stream, tmp_path / "split", 20, None)
    again = [json.loads(line) for line in (tmp_path / "split" / "curve.jsonl").open()]
    drop = ("hours",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in again] == [
        {k: v for k, v in r.items() if k not in drop} for r in rows
    ]  # measured again after the resume, once
    a = torch.load(tmp_path / "whole" / "ckpt.pt", weights_only=False)
    b = torch.load(tmp_path / "split" / "ckpt.pt", weights_only=False)
    assert split["step"] == 20 and split["positions"] == whole["positions"]
    for key in ("plan", "cursor", "epoch", "queue"):
        assert a["stream"][key] == b["stream"][key], key
    for name, value in a["head"].items():
        assert torch.equal(value, b["head"][name]), name
    fresh = EagleTrainer(CFG, model, a["head"]["vocab"])
    trained = EagleTrainer(CFG, model, a["head"]["vocab"])
    trained.head.load_state_dict(a["head"])
    batches = [collate(RegenStream(stream).next_batch(), CFG.max_len, 0.1) for _ in range(3)]
    for kind in ("kl", "tv"):
        before = sum(float(fresh.loss(x, kind)[0].detach()) for x in batches)
        after = sum(float(trained.loss(x, kind)[0].detach()) for x in batches)
        assert after < before, kind
    assert trained.evaluate(batches)[0][0] > fresh.evaluate(batches)[0][0]


def test_the_training_cli_parses_the_eagle3_steps() -> None:
    from specviz.train.__main__ import build_parser

    args = build_parser().parse_args(
        ["heads", "train", "--loss", "lk", "--device", "cuda", "--vocab", "8192", "--steps", "5"]
    )
    assert (args.room, args.step, args.loss, args.device, args.vocab, args.steps) == (
        "heads", "train", "lk", "cuda", 8192, 5
    )  # fmt: skip
    args = build_parser().parse_args(["heads", "vocab", "--sizes", "4096,8192"])
    assert (args.step, args.sizes, args.reps) == ("vocab", "4096,8192", 300)


def test_export_ships_a_checkpoints_head_with_its_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specviz.heads.eagle import fresh_head
    from specviz.heads.weights import load_eagle
    from specviz.train.__main__ import main
    from specviz.train.heads import export

    model = _model()
    ids = tmp_path / "ids"
    ids.mkdir()
    _write_ids(ids / "ids_00000.json.gz", _ids([[9, 9, 3, 3, 3, 5], [9, 5, 5]], [2, 1], 0))
    _write_ids(ids / "ids_00001.json.gz", _ids([[8, 3, 6]], [1], 1))
    _write_ids(ids / "ids_00007.json.gz", _ids([[1, 1, 5, 6]], [0], 7))  # held out
    head = fresh_head(model, torch.tensor([3, 5]), torch.Generator().manual_seed(0))
    run = tmp_path / "run"
    run.mkdir()
    state = {"step": 12, "positions": 300, "answer_positions": 200, "elapsed": 1800.0}
    torch.save({"head": head.state_dict(), "state": state, "config": {"vocab": 2}}, run / "ckpt.pt")
    rows = [{"step": s, "alpha_1": 0.1 * s} for s in (5, 10, 15)]  # 15: after the checkpoint
    (run / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(export, "load_target", lambda threads: (model, None))
    monkeypatch.setenv("SPECVIZ_TRAIN_DIR", str(tmp_path / "work"))  # the command's logs
    out = tmp_path / "out"
    out.mkdir()
    summary = export.run_eagle_export(run, ids, threads=1, out=out)
    assert summary == json.loads((out / "eagle3.json").read_text())
    assert (summary["steps"], summary["hours"], summary["trained_positions"]) == (12, 0.5, 300)
    assert summary["parameters"] == sum(p.numel() for p in head.parameters())
    assert summary["weights_bytes"] == (out / "eagle3.safetensors").stat().st_size
    assert [r["step"] for r in summary["held_out"]] == [5, 10]
    assert "heads_eval" not in summary  # no evaluation yet
    evaluated = tmp_path / "work" / "eval"
    evaluated.mkdir(parents=True)
    (evaluated / "eagle3.json").write_text(json.dumps({"steps": 11, "alpha_code": [0.1]}))
    stale = export.run_eagle_export(run, ids, threads=1, out=out)
    assert "heads_eval" not in stale  # measured on other weights: left out
    (evaluated / "eagle3.json").write_text(json.dumps({"steps": 12, "alpha_code": [0.2]}))
    own = export.run_eagle_export(run, ids, threads=1, out=out)
    assert own["heads_eval"] == {"steps": 12, "alpha_code": [0.2]}
    from specviz.train.heads.evaluate import trained_steps

    assert trained_steps("eagle3", str(out)) == {"steps": 12}
    vocab = summary["draft_vocab"]  # answers 3 3 3 5 | 5 5 | 3 6; held out 1 1 5 6
    assert (vocab["size"], vocab["coverage"], vocab["held_out_coverage"]) == (2, 0.875, 0.25)
    loaded = load_eagle(model, out / "eagle3.safetensors")
    for name, value in head.state_dict().items():
        expected = value if name == "vocab" else value.to(torch.bfloat16).to(value.dtype)
        torch.testing.assert_close(loaded.state_dict()[name], expected, rtol=0, atol=0)
    cut = export.run_eagle_export(run, ids, threads=1, out=out, vocab=1)
    vocab = cut["draft_vocab"]  # 3 is the likelier answer token (4 of 8 against 5's 3)
    assert (vocab["size"], vocab["trained_size"], vocab["coverage"]) == (1, 2, 0.5)
    assert load_eagle(model, out / "eagle3.safetensors").vocab.tolist() == [3]
    with pytest.raises(ValueError, match="give at most the 2 tokens it trained on"):
        export.run_eagle_export(run, ids, threads=1, out=out, vocab=3)
    with pytest.raises(SystemExit, match="apply to heads export eagle3"):
        main(["heads", "export", "medusa", "--vocab", "8"])
    with pytest.raises(SystemExit, match="--vocab must be >= 1"):
        main(["heads", "export", "eagle3", "--from-checkpoint", str(run), "--vocab", "0"])
    with pytest.raises(SystemExit, match="no heads train checkpoint"):
        main(["heads", "export", "eagle3", "--from-checkpoint", str(tmp_path / "none")])


def trained_and_exported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, StreamConfig, dict[str, Any]]:
    """A tiny target, its shards in tmp_path/data, a 10-step heads3 run in tmp_path/first and
    its head exported to tmp_path/exported: (target, stream, the export's summary)."""
    from specviz.train.heads import export

    model = _model()
    (tmp_path / "data").mkdir()
    stream = write_shards(model, tmp_path / "data", range(8))
    run_eagle(CFG, model, stream, tmp_path / "first", 10, None)
    monkeypatch.setattr(export, "load_target", lambda threads: (model, None))
    exported = tmp_path / "exported"
    return model, stream, export.run_eagle_export(tmp_path / "first", tmp_path / "data",
                                                          1, exported)  # fmt: skip


def test_a_run_without_checkpoint_starts_from_an_exported_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specviz.train.__main__ import main

    model, stream, summary = trained_and_exported(tmp_path, monkeypatch)
    exported = tmp_path / "exported"
    warm = tmp_path / "warm"
    start = run_eagle(CFG, model, stream, warm, 10, None, init=exported)  # no step to train
    assert (start["step"], start["positions"], start["warm_start"]) == (10, summary[
        "trained_positions"], 10)  # fmt: skip
    shipped = torch.load(warm / "ckpt.pt", weights_only=False)["head"]
    first = torch.load(tmp_path / "first" / "ckpt.pt", weights_only=False)["head"]
    for name, value in first.items():  # the exported (bf16) weights, as trained
        expected = value if name == "vocab" else value.to(torch.bfloat16).to(value.dtype)
        torch.testing.assert_close(shipped[name], expected, rtol=0, atol=0)
    rows = [json.loads(line) for line in (warm / "curve.jsonl").open()]
    assert rows == summary["held_out"] and [r["step"] for r in rows] == [5, 10]
    on = run_eagle(CFG, model, stream, warm, 15, None, init=exported)  # resumes its checkpoint
    rows = [json.loads(line) for line in (warm / "curve.jsonl").open()]
    assert on["step"] == 15 and [(r["step"], r.get("warm_start")) for r in rows] == [
        (5, None), (10, None), (15, 10)
    ]  # fmt: skip
    assert heads3_rewarmed(11) == 1.0 and heads3_rewarmed(10) == 0.5
    monkeypatch.setattr("specviz.train.heads.cli.load_target", lambda threads: (model, None))
    monkeypatch.setenv("SPECVIZ_TRAIN_DIR", str(tmp_path / "work"))  # the command's logs
    with pytest.raises(SystemExit, match="no exported EAGLE-3 head"):
        main(["heads", "train", "--init", str(tmp_path / "none"), "--out", str(tmp_path / "other"),
              "--ids", str(tmp_path / "data"), "--feats", str(tmp_path / "data")])  # fmt: skip


def test_a_longer_schedule_warms_the_learning_rate_up_again(tmp_path: Path) -> None:
    from specviz.train.common import learning_rate
    from specviz.train.heads.eagle import rewarmed

    model = _model()
    (tmp_path / "data").mkdir()
    stream = write_shards(model, tmp_path / "data", range(8))
    run_eagle(CFG, model, stream, tmp_path / "run", 10, None)
    same = run_eagle(CFG, model, stream, tmp_path / "run", 12, None)  # the control: no change
    assert "schedule_start" not in same
    longer = replace(CFG, total_steps=60)
    on = run_eagle(longer, model, stream, tmp_path / "run", 16, None)
    assert on["schedule_start"] == 12
    rows = [json.loads(line) for line in (tmp_path / "run" / "curve.jsonl").open()]
    assert [(r["step"], r.get("schedule_start")) for r in rows] == [
        (5, None), (10, None), (15, 12)
    ]  # fmt: skip
    again = run_eagle(longer, model, stream, tmp_path / "run", 18, None)  # the same schedule
    assert again["schedule_start"] == 12
    # from step 12 the rate climbs from a warm-up step's share toward the longer cosine, which
    # stands above the old one's floor there
    assert rewarmed(longer, on, 12) == 0.5 and rewarmed(longer, on, 13) == 1.0
    assert learning_rate(longer, 13) > learning_rate(CFG, 13)
    shorter = replace(CFG, total_steps=30)  # an earlier anneal is a new schedule too
    late = run_eagle(shorter, model, stream, tmp_path / "run", 20, None)
    assert late["schedule_start"] == 18
    assert learning_rate(shorter, 19) < learning_rate(longer, 19)


def heads3_rewarmed(step: int) -> float:
    """The learning rate's factor at step after a warm start at step 10 (CFG.warmup = 2)."""
    from specviz.train.heads.eagle import rewarmed

    return rewarmed(CFG, {"warm_start": 10}, step)


def test_a_stream_that_rescores_reads_the_batches_of_one_with_features(tmp_path: Path) -> None:
    """On a machine with only the ids, training rebuilds each shard's features when it first
    reads it (regen.rescorer) and reads the same batches as with the features made first."""
    model = _model()
    (tmp_path / "made").mkdir()
    (tmp_path / "ids").mkdir()
    made = write_shards(model, tmp_path / "made", range(8))
    for path in (tmp_path / "made").glob("ids_*.json.gz"):
        (tmp_path / "ids" / path.name).write_bytes(path.read_bytes())
    bare = StreamConfig(feats_dir=tmp_path / "feats", ids_dir=tmp_path / "ids",
                        batch_positions=48, max_len=16, group=2)  # fmt: skip
    assert ready_shards(bare) == ([], [])  # no features: nothing is ready
    rescore = rescorer(model, EOS, tmp_path / "ids", tmp_path / "feats", RegenConfig(topk=6))
    lazy = replace(bare, rescore=rescore)
    assert ready_shards(lazy) == ready_shards(made) == ([0, 1, 2, 3, 4, 5, 6], [7])
    ours, theirs = RegenStream(lazy), RegenStream(made)
    for _ in range(3):
        a = collate(ours.next_batch(), 16, 0.1)
        b = collate(theirs.next_batch(), 16, 0.1)
        for key in ("tokens", "top_ids", "answer", "weight"):
            assert torch.equal(a[key], b[key]), key
        torch.testing.assert_close(a["first"], b["first"], atol=0.05, rtol=0.02)
        torch.testing.assert_close(a["top_logp"], b["top_logp"], atol=2e-3, rtol=1e-3)
    built = sorted(p.name for p in (tmp_path / "feats").iterdir())
    assert built == [f"feats_{i:05d}.pt" for i in sorted(ours.seen)]  # only the shards read
    assert len(built) < 7
    unread = next(i for i in range(7) if i not in ours.seen)
    with pytest.raises(ValueError, match=rf"shard {unread} has no features in .*--rescore"):
        load_shard(bare, unread)  # a stream that does not rescore names the way out
