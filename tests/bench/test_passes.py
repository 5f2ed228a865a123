"""The pass-cost table: both forwards timed, r against the 1-token step, a tree verification's
r(N), bad flags refused."""

from __future__ import annotations

import pytest

from specviz.bench.passes import passes_table
from specviz.cli import main
from specviz.core.cache import KVCache
from specviz.fast.lean import lean_target_cache
from specviz.tune.timing import binary_tree, causal_pass_seconds, tree_verify_seconds

from ..conftest import PairFactory


def test_pass_seconds_times_every_width_on_both_forwards(pair: PairFactory) -> None:
    target = pair("llama")[0]
    for make in (KVCache, lean_target_cache):
        seconds = causal_pass_seconds(make, target, [3, 17, 9], widths=[1, 2, 5], repeats=5)
        assert sorted(seconds) == [1, 2, 5] and all(s > 0 for s in seconds.values())
    with pytest.raises(ValueError, match="positive"):
        causal_pass_seconds(KVCache, target, [3, 17, 9], widths=[0, 2], repeats=5)
    with pytest.raises(ValueError, match="warm-up"):
        causal_pass_seconds(KVCache, target, [3, 17, 9], widths=[1], repeats=3)


def test_table_reports_r_against_the_same_forwards_one_token_step() -> None:
    rows = passes_table({"a": {1: 0.040, 4: 0.044}, "b": {1: 0.030, 4: 0.036}})
    assert rows[0] == "| tokens | a: ms (r) | b: ms (r) |"
    assert rows[3] == "| 4 | 44.0 (1.100) | 36.0 (1.200) |"


def test_main_prints_both_forwards(pair: PairFactory, tokenizer, tmp_path, capsys) -> None:
    target = pair("llama")[0]
    target.save_pretrained(tmp_path / "t")
    tokenizer.save_pretrained(tmp_path / "t")
    passes = ["bench", "passes", "--target", str(tmp_path / "t")]
    assert main([*passes, "--widths", "2,30", "--repeats", "4"]) == 0
    out = capsys.readouterr().out
    assert "| tokens | transformers: ms (r) | specviz.fast.lean: ms (r) |" in out
    assert "| 1 | " in out and "| 30 | " in out  # the 1-token step is always measured
    with pytest.raises(SystemExit):
        main([*passes, "--widths", "x"])
    with pytest.raises(SystemExit):
        main([*passes, "--repeats", "2"])
    assert "warm-up" in capsys.readouterr().err


def test_a_tree_verification_is_timed_on_every_forward(pair: PairFactory) -> None:
    tree = binary_tree(8)
    assert tree.parents == (-1, -1, 0, 0, 1, 1, 2, 2) and max(tree.depths) == 3
    target = pair("llama")[0]
    for make in (KVCache, lean_target_cache):
        one, verify = tree_verify_seconds(make, target, [3, 17, 9], 8, 5)
        assert one > 0 and verify > 0
    with pytest.raises(ValueError, match="warm-up"):
        tree_verify_seconds(KVCache, target, [3, 17, 9], 8, 3)


def test_main_prints_the_tree_row(pair: PairFactory, tokenizer, tmp_path, capsys) -> None:
    target = pair("llama")[0]
    target.save_pretrained(tmp_path / "t")
    tokenizer.save_pretrained(tmp_path / "t")
    argv = ["bench", "passes", "--target", str(tmp_path / "t"), "--widths", "2", "--repeats", "4"]
    assert main([*argv, "--tree-nodes", "8"]) == 0
    out = capsys.readouterr().out
    assert "| forward | 1 token: ms | root + 8 tree nodes, kept path: ms | r(8) |" in out
    assert "| specviz.fast.lean, fused layers | " in out
