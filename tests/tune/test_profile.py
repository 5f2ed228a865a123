"""A tuned profile: its file round-trips, its names are stable, and damage is named clearly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specviz.tune.profile import (
    RATIO_TOKENS,
    Choice,
    ProfileError,
    fastest_plain,
    fastest_speculative,
    load_profile,
    pair_id,
    profile_path,
    profiles_dir,
    save_profile,
    this_machine,
)

from .profiles import make_profile, measurement


def test_a_profile_round_trips_through_its_file(tmp_path: Path) -> None:
    profile = make_profile("bundled", "bundled", plain=Choice(forward="packed", threads=2))
    path = save_profile(profile, tmp_path / "deep" / "p.json")  # folders made
    assert load_profile(path) == profile
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["pair"]["id"] == pair_id("bundled", "bundled", "float32")
    assert data["machine"]["id"] == this_machine().id
    row = data["measurements"][0]
    m = profile.measurements[0]
    assert set(row["r"]) == {str(k) for k in RATIO_TOKENS}
    assert row["r"]["2"] == m.pass_seconds[3] / m.pass_seconds[1]
    assert row["c"] == m.draft_seconds / m.pass_seconds[1]
    assert (
        row["round_seconds"] == profile.gamma * m.draft_seconds + m.pass_seconds[profile.gamma + 1]
    )


def test_the_file_name_is_the_machine_and_the_pair(tmp_path: Path) -> None:
    here = this_machine()
    assert here.id == this_machine().id and here.id.endswith(f"-{here.cores}c")
    path = profile_path("bundled", "bundled", "bfloat16", folder=tmp_path)
    assert path == tmp_path / f"{here.id}-bundled+bundled-bfloat16.json"
    assert pair_id("HuggingFaceTB/SmolLM2-360M", "bundled", "float32") == (
        "huggingfacetb-smollm2-360m+bundled-float32"
    )
    one, two = tmp_path / "a" / "model", tmp_path / "b" / "model"
    one.mkdir(parents=True), two.mkdir(parents=True)
    assert pair_id(str(one), "bundled", "float32") != pair_id(str(two), "bundled", "float32")
    assert pair_id(str(one), "bundled", "float32").startswith("model-")


def test_the_profiles_folder_is_an_argument_else_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert profiles_dir(tmp_path / "given") == tmp_path / "given"
    monkeypatch.setenv("SPECVIZ_PROFILES", str(tmp_path / "env"))
    assert profiles_dir() == tmp_path / "env"
    monkeypatch.delenv("SPECVIZ_PROFILES")
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    assert profiles_dir() == tmp_path / "cache" / "profiles"


def test_plain_and_speculation_can_choose_differently() -> None:
    slow_step_cheap_passes = measurement("lean", 1, step=0.010, extra=0.0001, draft=0.001)
    fast_step_dear_passes = measurement("packed", 2, step=0.009, extra=0.004, draft=0.001)
    found = (slow_step_cheap_passes, fast_step_dear_passes)
    assert fastest_plain(found) == Choice(forward="packed", threads=2)
    assert fastest_speculative(found, gamma=3) == Choice(forward="lean", threads=1)


def _damaged(data: dict[str, Any]) -> dict[str, Any]:
    del data["measurements"][0]["pass_seconds"]["1"]
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: [1, 2], "is not a specviz profile"),
        (lambda d: d | {"version": 99}, "has version 99; this specviz reads version 1"),
        (lambda d: {k: v for k, v in d.items() if k != "plain"}, "is damaged (KeyError"),
        (lambda d: d | {"speculative": {"forward": "fast", "threads": 1}}, "forward must be one"),
        (lambda d: d | {"plain": {"forward": "lean", "threads": 0}}, "threads must be an integer"),
        (_damaged, "lacks the 1-token pass"),
    ],
)
def test_a_damaged_profile_is_refused_with_what_to_do(
    tmp_path: Path, change: Any, message: str
) -> None:
    path = save_profile(make_profile("bundled", "bundled"), tmp_path / "p.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(change(data)), encoding="utf-8")
    with pytest.raises(ProfileError, match="run `specviz tune` again") as err:
        load_profile(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_a_file_that_is_not_json_or_not_there_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(b"{not json")
    with pytest.raises(ProfileError, match="is not JSON"):
        load_profile(path)
    with pytest.raises(ProfileError, match="cannot read it"):
        load_profile(tmp_path / "missing.json")
