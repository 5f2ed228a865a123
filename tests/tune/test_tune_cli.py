"""`specviz tune --quick` on a tiny pair: a profile of every path and thread count, which the
defaults then read. No timing is asserted: only what was measured and where it went."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from specviz.cli import main
from specviz.drafters.names import DEFAULT_CONFIG
from specviz.tune.defaults import resolve_defaults
from specviz.tune.measure import QUICK_REPEATS, widths
from specviz.tune.profile import FORWARDS, RATIO_TOKENS, load_profile, profile_path

from ..conftest import PairFactory, save_pair


@pytest.fixture(scope="module")
def folders(
    pair: PairFactory, tokenizer: object, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, str]:
    target, draft = save_pair(tmp_path_factory.mktemp("tune"), *pair("llama"), tokenizer)
    return str(target), str(draft)


def test_tune_quick_writes_a_profile_of_every_path_and_thread_count(
    folders: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target, draft = folders
    out = tmp_path / "profile.json"
    before = torch.get_num_threads()
    assert main(["tune", "--quick", "--target", target, "--draft", draft, "--out", str(out)]) == 0
    assert torch.get_num_threads() == before  # the measurement leaves torch's threads as it was
    profile = load_profile(out)
    cores = os.cpu_count() or 1
    measured = {(m.forward, m.threads) for m in profile.measurements}
    assert measured == {(f, t) for f in FORWARDS for t in range(1, cores + 1)}
    assert len(profile.measurements) == len(measured) and profile.skipped == {}
    assert profile.quick and profile.repeats == QUICK_REPEATS
    assert profile.drafter == DEFAULT_CONFIG.drafter and profile.gamma == DEFAULT_CONFIG.gamma
    for m in profile.measurements:
        assert set(m.pass_seconds) == set(widths(profile.gamma))
        assert all(s > 0 for s in m.pass_seconds.values()) and m.draft_seconds > 0
        assert all(m.ratio(k) > 0 for k in RATIO_TOKENS)
    best_plain = min(profile.measurements, key=lambda m: m.step_seconds)
    assert (profile.plain.forward, profile.plain.threads) == (
        best_plain.forward,
        best_plain.threads,
    )
    best = min(profile.measurements, key=lambda m: m.round_seconds(profile.gamma))
    assert (profile.speculative.forward, profile.speculative.threads) == (
        best.forward,
        best.threads,
    )
    shown = capsys.readouterr().out
    assert f"wrote {out}" in shown and "plain decoding: the " in shown
    assert (
        "r(1)" in shown and "r(8)" in shown and "speculation (ngram+model:trimmed, γ = 3)" in shown
    )
    assert (
        "r(k): a target pass scoring k + 1 tokens" in shown and "c: one draft-model step" in shown
    )
    rows = [line for line in shown.splitlines() if line.split()[:1] in ([f] for f in FORWARDS)]
    assert len(rows) == len(measured)


def test_tune_saves_where_generate_reads_it(
    folders: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, draft = folders
    monkeypatch.setenv("SPECVIZ_PROFILES", str(tmp_path))
    argv = ["tune", "--quick", "--threads-max", "1", "--target", target, "--draft", draft]
    assert main(argv) == 0
    path = profile_path(target, draft, "float32")
    assert path.is_file()
    profile = load_profile(path)
    assert {m.threads for m in profile.measurements} == {1}
    found = resolve_defaults(target, draft, "float32")
    assert found.path == path and found.forward == profile.speculative.forward
    assert found.threads == 1


def test_a_thread_count_the_machine_lacks_is_refused_before_loading(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cores = os.cpu_count() or 1
    argv = ["tune", "--target", "/no/such/folder", "--threads-max", str(cores + 1)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--threads-max must be a whole number from 1 to {cores}" in err
    with pytest.raises(SystemExit):
        main(["tune", "--threads-max", "0"])
    assert "argument --threads-max: must be an integer >= 1" in capsys.readouterr().err
