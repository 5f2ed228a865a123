"""The learning curve's stop rule (specviz.train.data.curve) and its report table and figure."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from specviz.train.data.curve import comparable, per_doubling, plateau, read_curve
from tools.report.curve import curve_figure, heads_curve, heads_gpu, heads_replay
from tools.report.saved import Saved


def _row(step: int, hours: float, alpha: float, held_out: int = 100) -> dict[str, Any]:
    row = {"step": step, "positions": 1000 * step, "hours": hours, "loss": "tv"}
    row |= {"eval_positions": held_out, "train_loss": 1.0}
    return row | {f"alpha_{d}": alpha - 0.01 * d for d in range(1, 6)}


def test_the_rule_waits_for_three_evaluations_an_hour_apart() -> None:
    rows = [_row(s, 0.4 * s, 0.5) for s in range(1, 6)]  # 0.4 h to 2.0 h
    assert plateau(rows) is None  # 2.0, then 0.8 (at least 1 h before); nothing 1 h before that
    rows.append(_row(6, 2.4, 0.5))
    assert plateau(rows) is None  # 2.4, then 1.2; 0.4 is only 0.8 h before 1.2
    rows.append(_row(7, 2.8, 0.5))
    verdict = plateau(rows)  # 2.8, then 1.6, then 0.4
    assert verdict is not None and [r["step"] for r in verdict.rows] == [1, 4, 7]


def test_a_flat_curve_stops_and_a_rising_one_does_not() -> None:
    flat = [_row(s, float(s), 0.40 + 0.003 * s) for s in range(1, 6)]
    verdict = plateau(flat)
    assert verdict is not None and verdict.flat and verdict.gain == pytest.approx(0.006)
    rising = [_row(s, float(s), 0.40 + 0.006 * s) for s in range(1, 6)]  # negative control
    verdict = plateau(rising)
    assert verdict is not None and not verdict.flat and verdict.gain == pytest.approx(0.012)
    noisy = [*flat[:4], _row(5, 5.0, 0.40)]  # a rise in the middle still counts
    bumped = [*noisy[:3], _row(4, 4.0, 0.43), noisy[4]]
    assert plateau(noisy).flat and not plateau(bumped).flat  # type: ignore[union-attr]


def test_only_rows_on_the_newest_held_out_set_compare() -> None:
    old = [_row(s, float(s), 0.9, held_out=50) for s in range(1, 4)]  # a higher α on a smaller set
    new = [_row(s, float(s), 0.4 + 0.01 * s) for s in range(4, 7)]
    assert comparable(old + new) == new and comparable([]) == []
    verdict = plateau(old + new)
    assert verdict is not None and [r["step"] for r in verdict.rows] == [4, 5, 6]
    assert not verdict.flat  # +0.02 on the new set; the old set's 0.9 would have read as a fall


def test_the_trend_is_the_gain_per_doubling_over_the_last_doubling() -> None:
    def row(positions: int, alpha: float, held_out: int = 100) -> dict[str, Any]:
        return _row(1, 1.0, alpha, held_out) | {"positions": positions}

    # 0.05 per doubling from 1 k to 64 k positions: the last doubling's rows (32 k, 48 k, 64 k)
    steady = [row(1000 * 2**k, 0.3 + 0.05 * k) for k in range(7)]
    steady.insert(-1, row(48000, 0.3 + 0.05 * math.log2(48)))
    assert per_doubling(steady) == pytest.approx(0.05)
    # earlier rows outside the last doubling do not count: a steep start changes nothing
    steep = [row(500, 0.0), *steady]
    assert per_doubling(steep) == pytest.approx(0.05)
    # a flat last doubling reads 0 (negative control), and too few rows read None
    flat = [*steady[:-3], *(row(p, 0.6) for p in (32000, 48000, 64000))]
    assert per_doubling(flat) == pytest.approx(0.0)
    assert per_doubling(steady[-2:]) is None and per_doubling([]) is None
    # only the newest held-out set compares
    assert per_doubling([*steady, row(70000, 0.9, held_out=50)]) is None


def test_the_report_shows_the_curve_the_rule_and_the_figure(tmp_path: Path) -> None:
    path = tmp_path / "curve.jsonl"
    rows = [_row(s, float(s), 0.40 + 0.006 * s) for s in range(1, 6)]
    rows[-1] |= {"vocab": 4096}  # a row names its draft vocabulary; older ones are 16,384
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_curve(path) == rows
    saved = Saved(tmp_path)
    text = "\n".join(heads_curve(saved, path))
    assert "| 4 | 4,000 | 4.00 | tv | 16,384 | 100 | 0.414 |" in text
    assert "| 5 | 5,000 | 5.00 | tv | 4,096 | 100 | 0.420 | 0.410 |" in text
    assert "+0.0120, still rising" in text and "eagle3-curve.png" in text
    assert "Trend: +0.016 of α₁ per doubling of positions, over the last doubling." in text
    figure = curve_figure(saved, path)
    assert figure == tmp_path / "eagle3-curve.png" and figure.read_bytes().startswith(b"\x89PNG")
    missing = tmp_path / "none.jsonl"
    assert "not there yet" in "\n".join(heads_curve(saved, missing))
    assert curve_figure(saved, missing) is None


def test_the_replay_table_compares_the_arms_at_their_last_shared_step(tmp_path: Path) -> None:
    saved = Saved(tmp_path)
    assert "not there yet" in "\n".join(heads_replay(saved, tmp_path / "replay"))
    folder = tmp_path / "replay"
    folder.mkdir()
    on = [_row(s, float(s), 0.40 + 0.01 * s) for s in (5, 10, 15)]
    off = [_row(s, float(s), 0.40 + 0.005 * s) for s in (5, 10)]  # the control stopped earlier
    for name, rows in (("on", on), ("off", off)):
        (folder / f"{name}-curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    meta = {"start": 0, "every": 2, "shards": 16, "rejected": 1234, "seconds": 60.0}
    (folder / "collected.json").write_text(json.dumps(meta))
    text = "\n".join(heads_replay(saved, folder))
    assert "| replay | 1 batch in 2 | 10 | 100 | 0.4900 |" in text
    assert "| control | none | 10 | 100 | 0.4400 |" in text
    assert "1,234 rejected positions collected from 16 training shards" in text
    assert "at step 10, α₁…α₅: +0.0500, +0.0500" in text
    (folder / "off-curve.jsonl").write_text(json.dumps(_row(7, 7.0, 0.4)) + "\n")
    assert "share no evaluated step" in "\n".join(heads_replay(saved, folder))


def test_the_gpu_table_pairs_the_heads_request_by_request(tmp_path: Path) -> None:
    saved = Saved(tmp_path)
    assert "not there yet" in "\n".join(heads_gpu(saved, tmp_path / "gpu"))
    folder = tmp_path / "gpu"
    folder.mkdir()
    (folder / "curve.jsonl").write_text(json.dumps(_row(500, 0.01, 0.36)) + "\n")
    summary = {"data": {"shards": 3, "positions": 900, "seconds": 5.0}, "seconds": 9.0}
    summary["training"] = {"step": 500, "elapsed": 4.0}
    (folder / "summary.json").write_text(json.dumps(summary))
    rows = {"shipped": _row(900, 2.0, 0.40), "gpu": _row(500, 0.01, 0.36)}
    scored = {"pipeline": "PIPE", "machine": "GPU", "command": "SCORE", "rows": rows}
    (folder / "scored.json").write_text(json.dumps(scored))
    runs = [((4, 2), (6, 2)), ((4, 2), (2, 2)), ((3, 3), (6, 3))]  # +1, -1, +1 tokens a round
    decode = {"command": "BENCH", "rows": []}
    for i, (a, b) in enumerate(runs):
        run = {"request": f"r{i}", "drafter": "eagle", "temperature": 0.0}
        run |= {
            "shipped": {"tokens": a[0], "rounds": a[1]},
            "gpu": {"tokens": b[0], "rounds": b[1]},
        }
        decode["rows"].append(run)
    (folder / "decode.json").write_text(json.dumps(decode))
    text = "\n".join(heads_gpu(saved, folder))
    assert "| **shipped**, scored again | 900 |" in text and "| GPU run, step 500 | 500 |" in text
    assert "`PIPE` on GPU: 3 shards rescored (900 positions) in 5 s, 500 steps in 4 s" in text
    assert "| eagle | 0 | 3 | 1.571 | 2.000 | 2 | 1 |" in text  # 11/7 against 14/7
    assert "+0.333 ± 0.667 (mean ± standard error, 3 requests)" in text


def test_a_bad_row_is_named(tmp_path: Path) -> None:
    path = tmp_path / "curve.jsonl"
    path.write_text(json.dumps(_row(1, 1.0, 0.4)) + '\n{"step": 2}\n')
    with pytest.raises(ValueError, match=r"curve.jsonl:2 lacks positions, hours"):
        read_curve(path)
    path.write_text("{not json\n")
    with pytest.raises(ValueError, match=r"curve.jsonl:1 is not JSON"):
        read_curve(path)


def test_the_heads_page_shows_what_the_saved_curve_renders_to() -> None:
    from tools.report.documents import HEADS_REPORT, marked_tables, refreshed
    from tools.report.saved import RESULTS_DIR

    text = HEADS_REPORT.read_text(encoding="utf-8")
    assert "heads-curve" in dict(marked_tables(text))
    assert refreshed(text, Saved(RESULTS_DIR)) == text
