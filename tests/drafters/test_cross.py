"""The cross-tokenizer drafters: greedy identity on pairs whose tokenizers really differ, the
shared tokens, the stable prefix, the draft's cache kept in sync, and bad pairs refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.cross_text import CrossTextDrafter
from specviz.drafters.cross_tli import CrossTLIDrafter
from specviz.drafters.cross_vocab import SyncedCache, cross_tokenizers
from specviz.drafters.names import CROSS_TOKENIZER_DRAFTERS, REGISTRY
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.models.loading import ModelLoadError, load_pair

from .cross_pairs import (
    TOKENIZERS,
    byte_bpe,
    char,
    char_bpe,
    digits,
    lowercasing,
    spiece,
    tiny_llama,
)

GREEDY = SamplingConfig(temperature=0)
PAIRS = [("char", "char_bpe"), ("char_bpe", "char"), ("bundled", "byte_bpe")]
PAIRS += [("spiece", "byte_bpe"), ("byte_bpe", "spiece")]  # "▁" spaces and a <bos>, as Gemma


def models(target_name: str, draft_name: str) -> tuple[Any, Any, Any, Any]:
    """(target, draft, target tokenizer, draft tokenizer): random Llamas over each vocab."""
    tt, dt = TOKENIZERS[target_name](), TOKENIZERS[draft_name]()
    hidden = 16 if "bundled" in (target_name, draft_name) else 32
    return tiny_llama(len(tt), 1, hidden=hidden), tiny_llama(len(dt), 2, hidden=hidden), tt, dt


def options(tt: Any, dt: Any) -> DrafterOptions:
    return DrafterOptions(tokenizer=tt, draft_tokenizer=dt)


@pytest.mark.parametrize("names", PAIRS, ids="-".join)
@pytest.mark.parametrize("drafter", CROSS_TOKENIZER_DRAFTERS)
def test_greedy_output_is_the_targets_own(names: tuple[str, str], drafter: str) -> None:
    target, draft, tt, dt = models(*names)
    built = build_drafter(
        drafter, target=target, draft=draft, sampling=GREEDY, options=options(tt, dt)
    )
    spec = speculative_generate(
        target, built, tt, "the cat sat", sampling=GREEDY,
        speculation=SpeculationConfig(gamma=4, max_new_tokens=24), stop=(),
    )  # fmt: skip
    plain = autoregressive_generate(
        target, tt, "the cat sat", sampling=GREEDY, max_new_tokens=24, stop=()
    )
    assert list(spec.tokens) == list(plain.tokens)
    assert spec.proposed > 0


@pytest.mark.parametrize("drafter", CROSS_TOKENIZER_DRAFTERS)
def test_a_draft_that_is_the_target_is_accepted_throughout(drafter: str) -> None:
    """Same tokenizer, same model: every shared token is the target's, every draft accepted."""
    target = tiny_llama(len(char()), 1)
    built = build_drafter(
        drafter, target=target, draft=target, sampling=GREEDY, options=options(char(), char())
    )
    spec = speculative_generate(
        target, built, char(), "the cat", sampling=GREEDY,
        speculation=SpeculationConfig(gamma=4, max_new_tokens=25), stop=(),
    )  # fmt: skip
    assert spec.accepted >= 0.75 * spec.proposed and spec.proposed >= 16


def test_tli_proposes_shared_tokens_with_their_renormalised_law() -> None:
    _target, draft, tt, dt = models("char", "char_bpe")
    pair = cross_tokenizers(tt, dt, target_vocab=len(tt), draft_vocab=len(dt))
    shared = set(pair.shared.target_ids.tolist())
    assert len(shared) == len(char()) and pair.shared.shared < len(char_bpe())  # merges are not
    drafter = CrossTLIDrafter(draft, SamplingConfig(temperature=0.7, top_p=0.9), pair)
    out = drafter.propose(tt.encode("the c"), 4, torch.Generator().manual_seed(0), ())
    assert out.q_draft.shape == (4, len(tt))
    assert torch.allclose(out.q_draft.sum(-1), torch.ones(4, dtype=out.q_draft.dtype))
    outside = torch.ones(len(tt), dtype=torch.bool)
    outside[list(shared)] = False
    assert out.q_draft[:, outside].abs().sum() == 0
    assert set(out.tokens.tolist()) <= shared
    assert all(float(out.q_draft[i, t]) > 0 for i, t in enumerate(out.tokens.tolist()))


def test_shared_tokens_are_matched_by_text_not_by_marker() -> None:
    """Byte-level 'Ġthe' and ' the' of another tokenizer are the same text; partial UTF-8
    tokens (which decode to U+FFFD alone) are never shared."""
    from .cross_pairs import bundled

    pair = cross_tokenizers(
        bundled(), byte_bpe(), target_vocab=len(bundled()), draft_vocab=len(byte_bpe())
    )
    the_target = bundled().convert_tokens_to_ids("Ġthe")
    the_draft = byte_bpe().convert_tokens_to_ids("Ġthe")
    assert pair.shared.to_target[the_draft] == the_target
    partial = byte_bpe().convert_tokens_to_ids("Ã")  # byte 0xC3: the start of a 2-byte character
    assert partial not in pair.shared.to_target
    endoftext = bundled().convert_tokens_to_ids("<|endoftext|>")  # not its EOS: same text wins
    assert pair.shared.to_target[byte_bpe().eos_token_id] == endoftext


def test_cross_text_proposes_only_the_stable_target_tokens() -> None:
    """The draft's text ' the cat' encodes as 'Ġthe', 'Ġcat' but without its last character
    as 'Ġthe', 'Ġ', 'c', 'a': only 'Ġthe' is stable ('Ġcat' might still grow)."""
    tt, dt = byte_bpe(), char()
    draft = tiny_llama(len(dt), 2)
    pair = cross_tokenizers(tt, dt, target_vocab=len(tt), draft_vocab=len(dt))
    drafter = CrossTextDrafter(draft, pair)
    context, written = dt.encode("a"), dt.encode(" the cat")
    full = pair.target.encode_continuation(" the cat")
    assert tt.convert_ids_to_tokens(full) == ["Ġthe", "Ġcat"]
    assert drafter._stable("a", context, written, ended=False) == full[:1]
    assert drafter._stable("a", context, written, ended=True) == [*full, tt.eos_token_id]
    assert drafter._stable("a", context, dt.encode(" the "), ended=False) == full[:1]


def test_the_draft_reads_its_own_bos_and_no_special_token_it_lacks() -> None:
    """A Gemma-like target writes <bos> first: a byte-level draft that has no such token reads
    the text alone, not the characters '<', 'bos', '>'. A draft whose tokenizer starts every
    text with <bos> reads it first, as it was trained. A special token both tokenizers have
    (by text) is read once, as the draft's own."""
    to_byte = cross_tokenizers(spiece(), byte_bpe(), target_vocab=72, draft_vocab=len(byte_bpe()))
    assert to_byte.draft_ids(spiece().encode("the cat")) == byte_bpe().encode("the cat")
    assert to_byte.draft_ids(spiece().encode("the<start_of_turn> cat")) == byte_bpe().encode(
        "the cat"
    )
    to_spiece = cross_tokenizers(byte_bpe(), spiece(), target_vocab=len(byte_bpe()), draft_vocab=72)
    bos = spiece().bos_token_id
    assert to_spiece.draft_ids(byte_bpe().encode("the cat")) == spiece().encode("the cat")
    assert to_spiece.draft_ids(byte_bpe().encode("the cat"))[0] == bos
    same = cross_tokenizers(spiece(), spiece(), target_vocab=72, draft_vocab=72)
    ids = spiece().encode("<start_of_turn>the cat")
    assert ids[:2] == [bos, spiece().convert_tokens_to_ids("<start_of_turn>")]
    assert same.draft_ids(ids) == ids  # one <bos>, the shared control token kept


def test_cross_text_drafts_after_a_text_the_draft_writes_differently() -> None:
    """A "▁" in the committed text comes back from a Gemma-like draft as a space: the draft's
    continuation is read after its own writing of the context, so it still proposes."""
    tt, dt = byte_bpe(), spiece()
    pair = cross_tokenizers(tt, dt, target_vocab=len(tt), draft_vocab=len(dt))
    drafter = CrossTextDrafter(tiny_llama(len(dt), 2), pair)
    ids = tt.encode("the cat▁sat on the mat. the dog")
    assert dt.decode(pair.draft_ids(ids), skip_special_tokens=True) != tt.decode(ids)
    out = drafter.propose(ids, 4, torch.Generator().manual_seed(0), ())
    assert len(out.tokens) > 0 and out.forward_calls > 0


def test_the_drafts_cache_follows_the_longest_common_prefix() -> None:
    draft = tiny_llama(len(char_bpe()), 2)
    synced = SyncedCache(KVCache(draft), draft.device)
    first, second = [5, 6, 7, 8, 9], [5, 6, 11, 12]
    synced.next_logits(first)
    after = synced.next_logits(second)
    fresh = KVCache(draft).forward(torch.tensor(second), keep=1)[-1]
    assert torch.allclose(after, fresh) and len(synced.cache) == len(second)
    assert torch.allclose(synced.next_logits(second), fresh)  # the same ids: the last fed again


def test_the_registry_labels_say_what_they_are() -> None:
    for name in CROSS_TOKENIZER_DRAFTERS:
        spec = REGISTRY[name]
        assert "another tokenizer" in spec.label and spec.uses_draft_model and not spec.tree


def test_no_shared_tokens_is_refused_before_any_model_work() -> None:
    target, draft = tiny_llama(len(char()), 1), tiny_llama(len(digits()), 2)
    for name in CROSS_TOKENIZER_DRAFTERS:
        with pytest.raises(ValueError, match=r"share 0 tokens .*fewer than 8"):
            build_drafter(
                name, target=target, draft=draft, sampling=GREEDY, options=options(char(), digits())
            )


def test_a_tokenizer_that_does_not_give_back_its_text_is_refused() -> None:
    target, draft = tiny_llama(len(char()), 1), tiny_llama(len(lowercasing()), 2)
    with pytest.raises(ValueError, match=r"draft tokenizer does not give back its own text"):
        build_drafter(
            "cross",
            target=target,
            draft=draft,
            sampling=GREEDY,
            options=options(char(), lowercasing()),
        )


def test_other_drafters_refuse_another_tokenizer_and_name_the_cross_drafters() -> None:
    target, draft, tt, _dt = models("char", "char_bpe")
    with pytest.raises(ValueError, match=r"different vocabularies .*\(cross, cross:text\)"):
        build_drafter("model", target=target, draft=draft, sampling=GREEDY)
    same_size = tiny_llama(len(tt), 2)
    with pytest.raises(ValueError, match=r"tokenizers differ.*\(cross, cross:text\)"):
        build_drafter(
            "model",
            target=target,
            draft=same_size,
            sampling=GREEDY,
            options=options(tt, char_bpe(len(tt))),
        )


def test_a_model_without_a_saved_tokenizer_needs_one_in_the_options() -> None:
    target, draft, _tt, _dt = models("char", "char_bpe")
    with pytest.raises(ValueError, match=r"pass DrafterOptions\(tokenizer=\.\.\.\)"):
        build_drafter("cross", target=target, draft=draft, sampling=GREEDY)


def _save(root: Path, target_name: str, draft_name: str) -> tuple[str, str]:
    target, draft, tt, dt = models(target_name, draft_name)
    for name, model, tok in (("t", target, tt), ("d", draft, dt)):
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return str(root / "t"), str(root / "d")


def test_load_pair_picks_the_cross_drafter_for_two_tokenizers(tmp_path: Path) -> None:
    folders = _save(tmp_path, "char", "char_bpe")
    said: list[str] = []
    pair = load_pair(*folders, progress=said.append, pack=False)
    assert pair.drafter == "cross" and not pair.same_tokenizer
    assert any("drafting with cross" in m for m in said)
    with pytest.raises(ModelLoadError, match=r"tokenizers differ.*\(cross, cross:text\)"):
        load_pair(*folders, drafter="model", pack=False)
    built = build_drafter("cross:text", target=pair.target, draft=pair.draft, sampling=GREEDY)
    assert isinstance(built, CrossTextDrafter)  # the tokenizers saved beside the models


@pytest.mark.parametrize("drafter", CROSS_TOKENIZER_DRAFTERS)
def test_generate_and_verify_run_a_pair_of_two_tokenizers(
    tmp_path: Path, capsys: Any, drafter: str
) -> None:
    import json

    from specviz.cli import main

    target_dir, draft_dir = _save(tmp_path, "char", "char_bpe")
    models = ["--target", target_dir, "--draft", draft_dir]
    argv = ["generate", *models, "--prompt", "the cat", "--temperature", "0"]
    argv += ["--max-new-tokens", "12", "--dtype", "float64", "--json", "--drafter", drafter]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    target, _draft, tt, _dt = models_of(target_dir)
    plain = autoregressive_generate(target, tt, "the cat", sampling=GREEDY, max_new_tokens=12)
    assert summary["tokens"] == list(plain.tokens)
    verify = ["verify", "--pair", "models", *models, "--prompt", "the c", "--raw"]
    assert main([*verify, "--settings", "quick", "--n", "20", "--drafter", drafter]) == 0
    assert "0 of" in capsys.readouterr().out
    assert main([*verify, "--drafter", "model", "--n", "20"]) == 2
    assert "(cross, cross:text)" in capsys.readouterr().err


def models_of(target_dir: str) -> tuple[Any, Any, Any, Any]:
    """The saved target and its tokenizer, as loaded from its folder (float64)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float64).eval()
    return target, None, AutoTokenizer.from_pretrained(target_dir), None


def test_generate_without_a_drafter_picks_a_cross_drafter_for_two_tokenizers(
    tmp_path: Path, capsys: Any
) -> None:
    import json

    from specviz.cli import main

    target_dir, draft_dir = _save(tmp_path, "char", "char_bpe")
    argv = ["generate", "--target", target_dir, "--draft", draft_dir, "--prompt", "the cat"]
    argv += ["--temperature", "0", "--max-new-tokens", "12", "--dtype", "float64", "--json"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "drafting with cross (choose one of cross, cross:text" in err
    assert "no token ranking" not in err  # not the same-tokenizer default's fallback
    target, _draft, tt, _dt = models_of(target_dir)
    plain = autoregressive_generate(target, tt, "the cat", sampling=GREEDY, max_new_tokens=12)
    assert json.loads(out)["tokens"] == list(plain.tokens)
