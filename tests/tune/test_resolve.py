"""The one resolver of the defaults: a tuned profile's choice where one applies, else the
shipped DEFAULT_CONFIG; an unusable profile is ignored with a message."""

from __future__ import annotations

from pathlib import Path

import pytest

from specviz.drafters.names import DEFAULT_CONFIG
from specviz.tune.defaults import SHIPPED, lean_applies, resolve_defaults, shipped_defaults
from specviz.tune.profile import Choice, profile_path, save_profile

from .profiles import elsewhere, make_profile, write_profile

PAIR = ("bundled", "bundled", "float32")


def _resolve(folder: Path, *, plain: bool = False, device: str = "cpu") -> tuple[object, list[str]]:
    said: list[str] = []
    found = resolve_defaults(*PAIR, plain=plain, device=device, folder=folder, warn=said.append)
    return found, said


def test_without_a_profile_the_shipped_default_applies(tmp_path: Path) -> None:
    found, said = _resolve(tmp_path)
    assert found == shipped_defaults() and said == []
    shipped = shipped_defaults()
    assert shipped.forward == ("lean" if DEFAULT_CONFIG.forward == "lean" else "packed")
    assert shipped.threads == DEFAULT_CONFIG.threads and shipped.path is None
    assert shipped.meta() is None and shipped.source == SHIPPED


def test_the_profiles_choice_wins_over_the_shipped_default(tmp_path: Path) -> None:
    plain = Choice(forward="transformers", threads=2)
    speculative = Choice(forward="packed", threads=1)
    profile = make_profile(*PAIR, plain=plain, speculative=speculative)
    path = write_profile(tmp_path, profile)
    spec = resolve_defaults(*PAIR, folder=tmp_path)
    assert (spec.forward, spec.threads, spec.path) == ("packed", 1, path)
    assert spec.pack and not spec.lean and str(path) in spec.source
    assert spec.meta() == {"path": str(path), "content": profile.to_json()}
    alone = resolve_defaults(*PAIR, plain=True, folder=tmp_path)
    assert (alone.forward, alone.threads) == ("transformers", 2) and not alone.pack
    found, said = _resolve(tmp_path, device="cuda:0")  # a profile times CPU threads
    assert found == shipped_defaults() and said == []
    other = resolve_defaults("bundled", "bundled", "bfloat16", folder=tmp_path)
    assert other == shipped_defaults()  # another dtype: another pair, not profiled


def test_the_profiles_folder_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    speculative = Choice(forward="transformers", threads=2)
    path = write_profile(tmp_path, make_profile(*PAIR, speculative=speculative))
    monkeypatch.setenv("SPECVIZ_PROFILES", str(tmp_path))
    found = resolve_defaults(*PAIR)
    assert (found.forward, found.threads, found.path) == ("transformers", 2, path)


def test_a_profile_from_another_machine_is_ignored_with_a_message(tmp_path: Path) -> None:
    copied = make_profile(*PAIR, machine=elsewhere(), plain=Choice(forward="lean", threads=2))
    save_profile(copied, profile_path(*PAIR, folder=tmp_path))  # under this machine's name
    found, said = _resolve(tmp_path)
    assert found == shipped_defaults()
    (message,) = said
    assert "another machine" in message and "run `specviz tune` here" in message
    assert f"{SHIPPED} applies" in message


def test_a_profile_of_another_pair_is_ignored_with_a_message(tmp_path: Path) -> None:
    other = make_profile("bundled", "smollm2-135m", "float32")
    save_profile(other, profile_path(*PAIR, folder=tmp_path))  # renamed by hand
    found, said = _resolve(tmp_path)
    assert found == shipped_defaults()
    (message,) = said
    assert "another pair (bundled+smollm2-135m-float32, not bundled+bundled-float32)" in message


def test_a_corrupt_profile_is_ignored_with_a_message(tmp_path: Path) -> None:
    path = profile_path(*PAIR, folder=tmp_path)
    path.write_text('{"format": "specviz-profile", "version": 1}', encoding="utf-8")
    found, said = _resolve(tmp_path)
    assert found == shipped_defaults()
    (message,) = said
    assert message.startswith("ignoring a profile: profile ") and "is damaged" in message
    assert str(path) in message


@pytest.mark.parametrize(
    ("drafter", "takes"),
    [
        (None, True),  # plain decoding
        ("model", True),
        ("ngram+model:trimmed", True),
        ("tree-eagle", True),  # a head's tree verifies through its own lean-capable forward
        ("tree-model", False),  # transformers' 4D mask
        ("early-exit:shared", False),  # its own forward of the target
    ],
)
def test_the_lean_forward_applies_where_the_decode_takes_it(
    drafter: str | None, takes: bool
) -> None:
    assert lean_applies(drafter) is takes
