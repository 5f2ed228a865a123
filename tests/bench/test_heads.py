"""Drafting heads in the bench, the tree sweep and the replay, on tiny models (no timing asserts).

A head drafter verifies through its own forward of the target; the bench builds it on the one
plain decoding runs on in the same comparison, so that its speedup is not the lean forward's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

import specviz.bench.sweeps.replay as replay_module
from specviz.api import autoregressive_generate, encode, speculative_generate
from specviz.bench.runner import (
    _drafter,
    has_hf_counterpart,
    plain_cache,
    run_request,
    speculative_cache,
)
from specviz.bench.sweeps.heads import target_path
from specviz.bench.sweeps.replay import GREEDY, lookaheads, replay
from specviz.cli import main
from specviz.core.cache import KVCache
from specviz.core.config import SpeculationConfig
from specviz.core.drafter import Drafter, SharesTargetCache
from specviz.core.policy import FixedGamma
from specviz.drafters.names import DRAFTER_NAMES, HEAD_DRAFTERS, HEAD_KIND, TREE_DRAFTERS
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.fast.lean import LeanLlama
from specviz.gamma.policies import HeuristicGamma
from specviz.heads import lookup
from specviz.heads.eagle import fresh_head
from specviz.heads.medusa import MedusaHeads
from specviz.heads.tap import FeatureCache, FeatureLean
from specviz.heads.weights import save_eagle, save_head
from specviz.models.loading import ModelPair
from specviz.results.setting import BenchSetting
from specviz.tune.timing import PassCosts, measure_costs
from specviz.workloads import Request

from ..conftest import VOCAB, PairFactory, save_pair
from .random_heads import save_random_heads

COSTS = PassCosts(draft_step=0.1, verify=(1.0, 1.5, 1.75))
PROMPT = "the cat sat on the mat, the cat sat on the"


@pytest.fixture(scope="module")
def heads_dir(pair: PairFactory, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Random eagle3 and medusa (3 heads) weights for the tiny llama target."""
    folder = tmp_path_factory.mktemp("heads")
    return save_random_heads(pair("llama")[0], folder, seed=4, head_tokens=torch.arange(2, VOCAB))


@pytest.fixture(scope="module")
def fitted_dir(pair: PairFactory, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Heads that are right some of the time on PROMPT's greedy decode: a fresh EAGLE-3 head
    (it reads the target's output rows off the target's high layer, as initialised), and
    Medusa heads at their initial zero blocks (each guesses the last token again)."""
    target = pair("llama")[0]
    folder = tmp_path_factory.mktemp("fitted-heads")
    head_tokens = torch.arange(2, VOCAB)
    generator = torch.Generator().manual_seed(0)
    save_eagle(fresh_head(target, head_tokens, generator), target, 0, folder)
    save_head(MedusaHeads(int(target.config.hidden_size), 3), "medusa", head_tokens, target, {},
              folder)  # fmt: skip
    return folder


def _setting(drafter: str, gamma: int = 3) -> BenchSetting:
    tree = {"tree_nodes": 5, "tree_width": 2, "tree_rule": "exact"}
    return BenchSetting(
        drafter=drafter, gamma=gamma, temperature=0.0, **(tree if drafter in TREE_DRAFTERS else {})
    )


def test_every_registered_head_drafter_is_known_with_the_weights_it_reads() -> None:
    heads = {n for n in DRAFTER_NAMES if "eagle" in n or "medusa" in n}
    assert set(HEAD_DRAFTERS) == heads
    assert all(HEAD_KIND[n] == ("medusa" if "medusa" in n else "eagle3") for n in heads)


@pytest.mark.parametrize("drafter", HEAD_DRAFTERS)
@pytest.mark.parametrize("lean_target", [False, True])
def test_a_head_and_its_plain_baseline_run_on_the_same_target_forward(
    pair: PairFactory, heads_dir: Path, drafter: str, lean_target: bool
) -> None:
    """Without --lean-target both run on transformers' forward, with it both on the lean one;
    the registry's default (no make_cache: lean where it applies) would not be fair without."""
    target = pair("llama")[0]
    setting = _setting(drafter)
    plain = plain_cache(setting, lean_target)(target)
    built = _drafter(
        setting, target, None, GREEDY, lean=True, lean_target=lean_target, heads=str(heads_dir)
    )
    assert isinstance(built, SharesTargetCache) and speculative_cache(setting, lean_target) is None
    verify = built.target_cache(target)
    assert isinstance(plain, LeanLlama) is lean_target and isinstance(verify, FeatureLean) is (
        lean_target
    )
    assert isinstance(verify, FeatureCache) is (not lean_target) and (
        isinstance(plain, KVCache) is not lean_target
    )
    options = DrafterOptions(heads=str(heads_dir), tree_depth=3)
    default = build_drafter(drafter, target=target, sampling=GREEDY, options=options)
    assert isinstance(default, SharesTargetCache)
    assert isinstance(default.target_cache(target), FeatureLean)  # the control: lean by default
    assert not has_hf_counterpart(setting)


def test_a_head_run_keeps_the_target_s_greedy_tokens_on_either_forward(
    pair: PairFactory, tokenizer: Any, heads_dir: Path
) -> None:
    target = pair("llama")[0]
    request = Request(
        id="c-1", category="code", prompt="the cat the", max_new_tokens=10, temperature=0.0
    )
    for setting in (_setting("eagle"), _setting("tree-medusa")):
        records = [
            run_request(
                target,
                None,
                tokenizer,
                request,
                setting,
                repetitions=1,
                with_hf=True,
                lean_target=lean,
                heads=str(heads_dir),
            )
            for lean in (False, True)
        ]
        (slow,), (fast,) = records
        assert slow.metrics.tokens == fast.metrics.tokens > 0 and slow.hf_latency is None
        assert slow.metrics.proposed > 0 and fast.metrics.proposed > 0


def _bench(root: Path, pair: PairFactory, tokenizer: Any, *extra: str) -> dict[str, Any]:
    """`specviz bench` on the tiny pair and one short prompt; its saved result."""
    if not (root / "target").exists():
        save_pair(root, *pair("llama"), tokenizer)
        row = {"id": "c-1", "category": "code", "prompt": "abcabcab", "max_new_tokens": 8}
        (root / "w.jsonl").write_text(json.dumps(row | {"temperature": 0.0}))
    argv = ["bench", "--target", str(root / "target"), "--draft", str(root / "draft")]
    argv += ["--workloads", str(root / "w.jsonl"), "--reps", "1", "--step-batch-sizes", "1"]
    argv += ["--dtype", "float64", "--out", str(root / "b.json"), "--html", str(root / "b.html")]
    assert main([*argv, *extra]) == 0
    result: dict[str, Any] = json.loads((root / "b.json").read_text())
    return result


def test_the_bench_runs_every_head_drafter_without_a_confidence_policy(
    pair: PairFactory, tokenizer: Any, heads_dir: Path, tmp_path: Path
) -> None:
    extra = ["--drafters", ",".join(HEAD_DRAFTERS), "--heads", str(heads_dir), "--gammas", "2,3"]
    extra += ["--policies", "fixed,confidence", "--tree-depth", "3", "--tree-width", "2"]
    result = _bench(tmp_path, pair, tokenizer, *extra)
    ran = {(r["setting"]["drafter"], r["setting"]["policy"]) for r in result["records"]}
    assert {d for d, _ in ran} == set(HEAD_DRAFTERS) and {p for _, p in ran} == {"fixed"}
    assert all(r["hf_latency"] is None and r["metrics"]["tokens"] > 0 for r in result["records"])
    assert result["meta"]["heads"] == str(heads_dir)
    assert result["meta"]["target_forward"] == "transformers"
    lean = _bench(
        tmp_path,
        pair,
        tokenizer,
        "--drafters",
        "tree-eagle",
        "--heads",
        str(heads_dir),
        "--tree-depth",
        "3",
        "--lean-target",
    )
    assert lean["meta"]["target_forward"] == "lean (specviz.fast.lean)" and lean["records"]


def test_the_tree_sweep_compares_a_head_tree_with_the_head_s_chain(
    pair: PairFactory, tokenizer: Any, heads_dir: Path, tmp_path: Path
) -> None:
    extra = ["trees", "--nodes", "1,3", "--drafters", "tree-eagle", "--heads", str(heads_dir)]
    result = _bench(tmp_path, pair, tokenizer, *extra, "--tree-depth", "2", "--tree-width", "2")
    ran = {(r["setting"]["drafter"], r["setting"]["tree_nodes"]) for r in result["records"]}
    assert ran == {("eagle", None), ("tree-eagle", 3)}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--drafters", "model", "--heads", "."], "it applies to --drafters eagle, medusa"),
        (["--drafters", "model,medusa", "--heads", "/no/such"], "/no/such: no such folder"),
        (["--drafters", "tree-eagle"], "the tree-eagle drafter reads the eagle3 head shipped"),
        (["--drafters", "tree-model,tree-eagle", "--lean-target"], "tree-model verify their"),
        (
            ["trees", "--drafters", "tree-eagle", "--heads", "{heads}", "--lean-target"],
            "specviz bench trees runs the target on transformers' forward: drop --lean-target",
        ),
    ],
)
def test_head_flags_the_bench_cannot_run_are_refused_before_any_model_loads(
    flags: list[str],
    message: str,
    heads_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(lookup, "ASSETS", tmp_path)  # no shipped heads
    given = [flag.format(heads=heads_dir) for flag in flags]
    assert main(["bench", "--target", "/no/such/model", *given]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("policy", ["fixed", "heuristic"])
@pytest.mark.parametrize("drafter", ["eagle", "medusa", "ngram+eagle"])
def test_the_replay_makes_the_rounds_of_a_real_greedy_head_decode(
    pair: PairFactory, tokenizer: Any, fitted_dir: Path, drafter: str, policy: str
) -> None:
    """Policies that do not look at timings choose the same gammas, so rounds must match (the
    heuristic policy grows γ past Medusa's 3 heads: it drafts 3 at most)."""
    target = pair("llama")[0]
    prompt = encode(tokenizer, PROMPT)
    plain = autoregressive_generate(
        target, tokenizer, prompt, sampling=GREEDY, max_new_tokens=40, stop=()
    )

    def make() -> Drafter:
        built = build_drafter(
            drafter, target=target, sampling=GREEDY, options=DrafterOptions(heads=str(fitted_dir))
        )
        assert isinstance(built, Drafter)
        return built

    def gammas() -> FixedGamma | HeuristicGamma:
        return FixedGamma(3) if policy == "fixed" else HeuristicGamma(start=3)

    (look,) = lookaheads(make(), target_path(plain), draws=4, seed=0, target=target)
    assert max(look.kept) >= 2 and not all(look.kept[1:])  # kept past a guessed feature, not always
    real = speculative_generate(
        target,
        make(),
        tokenizer,
        prompt,
        sampling=GREEDY,
        speculation=SpeculationConfig(gamma=3, max_new_tokens=40),
        stop=(),
        policy=gammas(),
    )
    fields = ("gamma", "proposed", "accepted", "emitted")
    made = [[getattr(r, f) for f in fields] for r in real.rounds]
    assert [[getattr(r, f) for f in fields] for r in replay(look, gammas(), COSTS).rounds] == made
    if drafter != "ngram+eagle":  # lookup may copy from the prompt; a head needs features
        assert made[0][1] == 0


def test_a_head_is_timed_on_its_own_forward_and_needs_its_target(
    pair: PairFactory, tokenizer: Any, heads_dir: Path
) -> None:
    target = pair("llama")[0]
    drafter = build_drafter(
        "eagle",
        target=target,
        sampling=GREEDY,
        options=DrafterOptions(heads=str(heads_dir), make_cache=KVCache),
    )
    assert isinstance(drafter, Drafter)
    made: list[object] = []

    def forward(model: object) -> KVCache:
        made.append(model)
        return KVCache(model)

    costs = measure_costs(
        target, drafter, encode(tokenizer, "the cat sat"), widths=3, repeats=2, make_cache=forward
    )
    assert made == [] and len(costs.verify) == 3 and costs.draft_step > 0  # the head's forward
    path = target_path(
        autoregressive_generate(target, tokenizer, "ab", sampling=GREEDY, max_new_tokens=4)
    )
    with pytest.raises(ValueError, match="pass target"):
        lookaheads(drafter, path, draws=1, seed=0)


def test_the_replay_refuses_missing_heads_before_any_model_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_loading() -> None:
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(replay_module, "load_pair", no_loading)
    for flags, message in (
        (["--drafters", "medusa", "--heads", str(tmp_path)], "holds no medusa.safetensors"),
        (["--drafters", "model", "--heads", str(tmp_path)], "it applies to --drafters"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(["bench", "replay", *flags])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_a_head_tree_takes_no_target_forward_of_the_callers(
    pair: PairFactory, tokenizer: Any, heads_dir: Path
) -> None:
    target = pair("llama")[0]
    options = DrafterOptions(heads=str(heads_dir), tree_depth=3)
    drafter = build_drafter("tree-eagle", target=target, sampling=GREEDY, options=options)
    speculation = SpeculationConfig(gamma=3, max_new_tokens=4)
    with pytest.raises(ValueError, match="verifies through its own forward of the target"):
        speculative_generate(target, drafter, tokenizer, "ab", sampling=GREEDY,
                             speculation=speculation, make_cache=KVCache)  # fmt: skip


def test_the_replay_command_tables_the_heads(
    pair: PairFactory,
    tokenizer: Any,
    fitted_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target, draft = pair("llama")
    monkeypatch.setattr(
        replay_module,
        "load_pair",
        lambda: ModelPair(target=target, draft=draft, tokenizer=tokenizer),
    )
    work = tmp_path / "w.jsonl"
    row = {"id": "c-1", "category": "code", "prompt": PROMPT, "max_new_tokens": 40}
    work.write_text(json.dumps(row | {"temperature": 0.0}))
    argv = ["--workloads", str(work), "--drafters", "eagle,medusa,ngram+eagle"]
    assert main(["bench", "replay", *argv, "--gammas", "1,2", "--heads", str(fitted_dir)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {work}")]
    for name in ("eagle", "medusa", "ngram+eagle"):
        assert (
            sum(f"| {work}, {name}, T = 0" in row for row in rows) == 5
        )  # 2 γ, 2 policies, oracle
