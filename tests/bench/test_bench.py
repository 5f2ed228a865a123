"""The benchmark runs end to end on tiny models, and its arithmetic is right (no timing asserts)."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from specviz.api import GenerationResult, encode, speculative_generate
from specviz.bench import runner
from specviz.bench.report import load_result_view, render, resummarized
from specviz.bench.runner import (
    _drafter,
    has_hf_counterpart,
    hf_generate,
    plain_cache,
    run_request,
    speculative_cache,
)
from specviz.bench.summary import (
    faster_pairs,
    gamma_curves,
    policies_vs_best_fixed,
    priced_speedups,
    summarize,
)
from specviz.bench.sweep import check
from specviz.bench.sweeps import speedup
from specviz.bench.sweeps.speedup import LATENCY
from specviz.cli import build_parser, main
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import Finished, Prefill, RoundSummary, Sampled
from specviz.drafters.hybrid import LookupThenModelDrafter
from specviz.drafters.shared_exit import TargetView
from specviz.drafters.trimmed import save_ranking
from specviz.fast.lean import LeanLlama
from specviz.gamma.theory import speedup_bound
from specviz.results.records import (
    Record,
    RequestMetrics,
    cost_per_1k_tokens,
    request_metrics,
    spread,
)
from specviz.results.schema import SCHEMA
from specviz.results.setting import BenchSetting, drafter_label
from specviz.results.table import column_table
from specviz.workloads import PROMPT_FORMAT, WORKLOADS, Request, load_requests, workload_path

from ..conftest import VOCAB, PairFactory
from ..templated import as_chat, templated_tokenizer


def _metrics(**overrides: float) -> RequestMetrics:
    fields = dict(
        latency=2.0,
        plain_latency=5.0,
        tokens=50,
        rounds=20,
        proposed=80,
        accepted=30,
        rejected=15,
        draft_seconds=0.8,
        draft_calls=80,
        target_seconds=1.0,
    )
    fields.update(overrides)
    return RequestMetrics(**fields)


def test_request_arithmetic() -> None:
    m = _metrics()
    assert m.alpha == pytest.approx(30 / 45)
    assert m.speedup == pytest.approx(2.5)
    assert m.cost_ratio == pytest.approx((0.8 / 80) / (5.0 / 50))
    assert m.tokens_per_round == pytest.approx(2.5) and m.accepted_per_round == pytest.approx(1.5)
    assert m.target_calls_per_token == pytest.approx(20 / 50)
    assert m.mean_gamma == pytest.approx(4.0)  # 80 drafts in 20 rounds
    assert m.bound() == pytest.approx(speedup_bound(30 / 45, 4, 0.1))
    assert m.efficiency() == pytest.approx(2.5 / speedup_bound(30 / 45, 4, 0.1))
    r = (1.0 / 20) / (5.0 / 50)  # seconds per verification pass / seconds per plain step
    assert m.verify_ratio == pytest.approx(r)
    refined = speedup_bound(30 / 45, 4, 0.1) * (4 * 0.1 + 1) / (4 * 0.1 + r)
    assert m.refined_bound() == pytest.approx(refined)
    assert m.loop_efficiency() == pytest.approx(2.5 / refined)
    # short rounds (n-gram misses, dynamic gamma, the last rounds): the mean drafted length
    short = _metrics(proposed=50)
    assert short.bound() == pytest.approx(speedup_bound(30 / 45, 2.5, 0.1))


def test_decode_phase_arithmetic() -> None:
    """The prompt pass, about equal in both runs, is left out of the decode-phase ratios."""
    m = _metrics(prefill_seconds=0.2, plain_decode_seconds=4.8)
    step = 4.8 / 50  # plain seconds per decode step, its prompt pass left out
    assert m.step_seconds == pytest.approx(step)
    assert m.cost_ratio == pytest.approx((0.8 / 80) / step)
    assert m.verify_ratio == pytest.approx((1.0 / 20) / step)
    assert m.speedup == pytest.approx(2.5)  # end to end, unchanged
    assert m.decode_speedup == pytest.approx(4.8 / 1.8)
    assert m.decode_efficiency() == pytest.approx((4.8 / 1.8) / m.bound())
    assert m.loop_efficiency() == pytest.approx((4.8 / 1.8) / m.refined_bound())
    assert _metrics().decode_speedup != _metrics().decode_speedup  # not recorded: nan


def _result(events: list[object], seconds: float, tokens: int) -> GenerationResult:
    log = (Prefill(prompt_tokens=30, target_seconds=0.0, draft_seconds=0.02), *events)
    done = Finished(reason="max_new_tokens", new_tokens=tokens, seconds=seconds)
    return GenerationResult(
        prompt_ids=(1,) * 30,
        tokens=(5,) * tokens,
        text="",
        events=(*log, done),
        finish_reason="max_new_tokens",
        seconds=seconds,
    )


def test_the_prompt_share_of_the_first_pass_counts_as_prompt_time() -> None:
    """Both runs score the prompt in their first pass; its excess over later passes of the
    same width is prompt time, the rest decoding."""
    widths = [3, 3, 1, 3, 2]  # gamma per round: 2, 2, 0, 2, 1
    pass_s = [0.09, 0.05, 0.04, 0.06, 0.07]  # the first also scored 29 prompt tokens
    rounds = [
        RoundSummary(
            round=i,
            gamma=w - 1,
            proposed=w - 1,
            accepted=w - 1,
            emitted=w,
            draft_seconds=0.01 * (w - 1),
            target_seconds=t,
            draft_forward_calls=w - 1,
            prompt_tokens=29 if i == 0 else 0,
        )
        for i, (w, t) in enumerate(zip(widths, pass_s, strict=True))
    ]
    spec = _result(rounds, seconds=0.5, tokens=12)
    steps = [0.08, 0.05, 0.04, 0.06] + [0.05] * 8  # the first step scored the prompt
    plain = _result(
        [Sampled(position=i, token=5, p_x=1.0, target_seconds=t) for i, t in enumerate(steps)],
        seconds=0.9,
        tokens=12,
    )
    m = request_metrics(spec, plain)
    spec_prompt = 0.09 - 0.055  # beyond the median of the other 3-token passes (0.05, 0.06)
    assert m.prefill_seconds == pytest.approx(0.02 + spec_prompt)  # drafter's prefill too
    assert m.pass_seconds[0] == pytest.approx(0.055) and m.widths == tuple(widths)
    assert m.target_seconds == pytest.approx(sum(pass_s) - spec_prompt)
    assert m.plain_decode_seconds == pytest.approx(0.9 - (0.08 - 0.05))
    assert m.decode_speedup == pytest.approx((0.9 - 0.03) / (0.5 - 0.02 - spec_prompt))


def _record(gamma: int, policy: str, widths: tuple[int, ...], slow: float = 1.0) -> Record:
    """A request whose verification passes cost 50 ms at any width and draft steps 5 ms, with
    the speculative run's timings multiplied by `slow` (a noisy moment)."""
    calls = sum(widths) - len(widths)
    metrics = _metrics(
        latency=0.1 + (0.005 * calls + 0.05 * len(widths)) * slow,
        plain_latency=0.1 + 0.055 * 40,
        tokens=40,
        rounds=len(widths),
        proposed=calls,
        draft_calls=calls,
        draft_seconds=0.005 * calls * slow,
        target_seconds=0.05 * len(widths) * slow,
        widths=widths,
        pass_seconds=tuple(0.05 * slow for _ in widths),
        plain_decode_seconds=0.055 * 40,  # plain steps cost a little more than a pass
        prefill_seconds=0.1,
    )
    setting = BenchSetting(drafter="model", gamma=gamma, temperature=0.0, policy=policy)
    return Record(
        request_id="r",
        category="code",
        setting=setting,
        repetition=0,
        metrics=metrics,
        hf_latency=None,
        hf_tokens=None,
        hf_identical=None,
    )


def test_priced_speedup_prices_the_same_work_the_same() -> None:
    steady = _record(2, "fixed", (3,) * 16)
    noisy = _record(2, "fixed", (3,) * 16, slow=2.0)  # the same work timed at a slow moment
    dynamic = _record(4, "theory", (5, 1, 3, 2) * 4)
    priced = priced_speedups([steady, noisy, dynamic])
    assert noisy.metrics.speedup < steady.metrics.speedup  # measured: the noise shows
    assert priced[0] == pytest.approx(priced[1])  # priced: it is gone
    step = 0.055  # median plain step; passes 50 ms at any width, draft steps 5 ms (medians)
    assert priced[0] == pytest.approx(40 * step / (32 * 0.005 + 16 * 0.05))
    assert priced[2] == pytest.approx(40 * step / (28 * 0.005 + 16 * 0.05))
    rows = summarize([steady, noisy, dynamic], price_per_hour=1.0)
    versus = policies_vs_best_fixed(rows)[0]
    assert versus["priced_ratio"] == pytest.approx(priced[2] / priced[0])
    assert versus["best_fixed_priced_gamma"] == 2


def test_priced_speedup_prices_every_pass_of_the_sweep() -> None:
    """Not only the latest passes of a width: a slow run priced last must not set the price."""
    fast = [_record(2, "fixed", (3,) * 300) for _ in range(2)]
    slow = _record(2, "fixed", (3,) * 300, slow=2.0)
    priced = priced_speedups([*fast, slow])
    assert priced[2] == pytest.approx(priced[0])
    assert priced[0] == pytest.approx(40 * 0.055 / (600 * 0.005 + 300 * 0.05))


def test_summary_reports_each_runs_latency_and_throughput_per_request() -> None:
    fixed = replace(_record(2, "fixed", (3,)), metrics=_metrics())  # 50 tokens: 5.0 s, 2.0 s
    with_hf = replace(fixed, hf_latency=4.0, hf_tokens=44)
    (row,) = summarize([fixed, with_hf], price_per_hour=1.0)
    assert row["latency"]["median"] == 2.0 and row["plain_latency"]["median"] == 5.0
    assert row["tokens_per_second"]["median"] == 25.0
    assert row["plain_tokens_per_second"]["median"] == 10.0
    assert row["hf_latency"] == {"median": 4.0, "low": 4.0, "high": 4.0}  # only the run it had
    assert row["hf_tokens_per_second"]["median"] == 11.0
    md = "\n".join(column_table(LATENCY, [row]))
    assert "γ=2 | 50 | 5.00 (5.00–5.00) | 2.00 (2.00–2.00) | 4.00 (4.00–4.00) |" in md
    assert "| 10.0 (10.0–10.0) | 25.0 (25.0–25.0) | 11.0 (11.0–11.0) | 1.50 | 2.50 |" in md
    assert summarize([fixed], price_per_hour=1.0)[0]["hf_latency"] is None


def test_faster_pairs_counts_wins_and_runs_a_one_sided_sign_test() -> None:
    # P(X >= 2) for X ~ Binomial(3, 1/2) = 4/8; a tie (1.0) is not a win
    assert faster_pairs([0.9, 0.95, 1.1]) == {"faster": 2, "pairs": 3, "p_value": 0.5}
    assert faster_pairs([0.9, 1.0, 1.1])["faster"] == 1
    many = faster_pairs([0.99] * 22 + [1.01] * 8)  # 22 of 30: P(X >= 22) = 0.0081
    assert many["p_value"] == pytest.approx(0.00806, abs=1e-4)
    assert faster_pairs([1.01] * 30)["p_value"] == 1.0


def test_cost_and_spread() -> None:
    assert cost_per_1k_tokens(seconds=36.0, tokens=100, price_per_hour=1.0) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="at least one generated token"):
        cost_per_1k_tokens(1.0, 0, 1.0)
    s = spread([3.0, 1.0, 2.0])
    assert (s.median, s.low, s.high) == (2.0, 1.0, 3.0)


def test_shipped_workloads_have_at_least_20_prompts_each() -> None:
    for name in WORKLOADS:
        requests = load_requests(name)
        assert len(requests) >= 20 and all(r.category == name and r.prompt for r in requests)
        assert len({r.id for r in requests}) == len(requests)


def test_bench_runs_end_to_end(pair: PairFactory, tokenizer, tmp_path, capsys) -> None:
    target, draft = pair("llama")
    for name, model in (("t", target), ("d", draft)):
        model.save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
    save_ranking(torch.arange(VOCAB).flip(0), tmp_path / "d")
    work = tmp_path / "w.jsonl"
    rows = [
        {
            "id": "c-1",
            "category": "code",
            "prompt": "abcabcab",
            "max_new_tokens": 12,
            "temperature": 0.0,
        },
        {
            "id": "c-2",
            "category": "code",
            "prompt": "the cat the",
            "max_new_tokens": 12,
            "temperature": 0.0,
        },
    ]
    work.write_text("\n".join(json.dumps(r) for r in rows))
    out, html = tmp_path / "b.json", tmp_path / "b.html"
    argv = [
        "bench",
        "--target",
        str(tmp_path / "t"),
        "--draft",
        str(tmp_path / "d"),
        "--workloads",
        str(work),
    ]
    argv += [
        "--gammas",
        "1,3",
        "--drafters",
        "model,model:trimmed,ngram",
        "--reps",
        "1",
        "--step-batch-sizes",
        "1,2",
    ]
    argv += ["--dtype", "float64", "--out", str(out), "--html", str(html)]
    argv += ["--policies", "fixed,heuristic,confidence", "--start-gamma", "2"]
    assert main(argv) == 0
    result = json.loads(out.read_text())
    # prompts x (model and model:trimmed: 2 fixed gammas + heuristic + confidence; ngram: 2 fixed
    # + heuristic)
    assert len(result["records"]) == 2 * (4 + 4 + 3)
    policies = {(r["setting"]["drafter"], r["setting"]["policy"]) for r in result["records"]}
    assert ("ngram", "confidence") not in policies and ("model", "confidence") in policies
    assert all(r["hf_identical"] for r in result["records"])  # T = 0: same tokens as transformers
    for row in result["summary"]:
        assert row["speedup"]["low"] <= row["speedup"]["median"] <= row["speedup"]["high"]
        assert row["cost_per_1k_tokens"]["plain"] > 0
    assert {c["drafter"] for c in result["gamma_curves"]} == {"model", "model:trimmed", "ngram"}
    dynamic = result["policies_vs_best_fixed"]
    assert len(dynamic) == 5  # model(-trimmed) heuristic and confidence, ngram heuristic
    assert {d["start_gamma"] for d in dynamic} == {2}
    for d in dynamic:
        assert d["ratio"] == pytest.approx(d["speedup"] / d["best_fixed_speedup"])
        priced = d["priced_speedup"] / d["best_fixed_priced_speedup"]
        assert d["priced_ratio"] == pytest.approx(priced)
    assert result["schema"] == SCHEMA and list(result["drafts"]) == [str(tmp_path / "d")]
    assert result["meta"]["prompt_format"] == "raw"  # the char tokenizer has no chat template
    assert [b for b, _ in result["drafts"][str(tmp_path / "d")]["batch_step_seconds"]] == [1, 2]
    assert "plotly" in html.read_text()[:5_000_000] and "speedup" in capsys.readouterr().out
    again = resummarized(result)  # the raw records alone rebuild every summary
    assert again["summary"] == result["summary"] and again["gamma_curves"] == result["gamma_curves"]
    figs, tables = load_result_view(out)  # what the app's "Benchmark results" tab shows
    assert len(figs) == 5 and tables.startswith("## b")
    rebuilt = tmp_path / "rebuilt.html"  # the report again, from the JSON alone
    assert main(["bench", "saved", str(out), str(rebuilt)]) == 0
    divs = [f.read_text().count('class="plotly-graph-div"') for f in (html, rebuilt)]
    assert divs == [5, 5]
    md = render(result, "tiny")
    assert result["meta"]["command"] in md and md.count("\n| code |") >= len(result["summary"])


def test_a_file_that_is_not_a_result_is_refused_readably(tmp_path) -> None:
    with pytest.raises(ValueError, match="no such file"):
        load_result_view(tmp_path / "nope.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"x\.json is not JSON"):
        load_result_view(tmp_path / "x.json")
    (tmp_path / "y.json").write_text('{"meta": {}}')
    with pytest.raises(ValueError, match=r"not a specviz bench result \(missing summary, records"):
        load_result_view(tmp_path / "y.json")
    assert main(["bench", "saved", str(tmp_path / "y.json"), str(tmp_path / "y.html")]) == 2
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "saved", str(tmp_path / "y.json")])
    assert exit_.value.code == 2 and not (tmp_path / "y.html").exists()


def test_bench_rejects_bad_flags(capsys) -> None:
    assert main(["bench", "--drafters", "magic"]) == 2
    err = capsys.readouterr().err
    assert "unknown drafter 'magic'" in err and len(err.strip().splitlines()) == 1
    assert main(["bench", "--policies", "greedy"]) == 2
    assert "--policies must list some of ('fixed', 'heuristic'" in capsys.readouterr().err
    assert main(["bench", "--workloads", "/nope.jsonl", "--no-hf"]) == 2
    assert "no workload file" in capsys.readouterr().err


def test_transformers_assisted_generation_drafts_the_settings_gamma(
    pair: PairFactory, tokenizer
) -> None:
    target, draft = pair("llama")
    prompt = encode(tokenizer, "the cat the")
    saved, counts = draft.generation_config, {"draft": 0, "target": 0}
    hooks = [
        m.register_forward_hook(lambda *_a, name=n: counts.__setitem__(name, counts[name] + 1))
        for n, m in (("draft", draft), ("target", target))
    ]
    try:
        for gamma in (1, 3):
            counts.update(draft=0, target=0)
            setting = BenchSetting(drafter="model", gamma=gamma, temperature=0.0)
            _, tokens = hf_generate(target, draft, prompt, setting, max_new_tokens=12)
            rounds = counts["target"]  # one verification pass per round
            assert 2 <= rounds <= len(tokens)
            # gamma draft steps a round (the last round may be cut by max_new_tokens), not
            # transformers' defaults (20 tokens, stopping at confidence 0.4)
            assert gamma * (rounds - 1) < counts["draft"] <= gamma * rounds
            # ours makes the same target calls: the prompt rides in the first pass, as there
            counts.update(target=0)
            spec = speculative_generate(
                target,
                draft,
                tokenizer,
                prompt,
                sampling=SamplingConfig(temperature=0),
                speculation=SpeculationConfig(gamma=gamma, max_new_tokens=12),
            )
            assert list(spec.tokens) == tokens
            assert counts["target"] == len(spec.rounds) == spec.target_calls == rounds
    finally:
        for h in hooks:
            h.remove()
    assert draft.generation_config is saved  # restored after each call


def test_early_exit_drafters_run_and_the_shared_one_is_timed_against_its_own_forward(
    pair: PairFactory, tokenizer
) -> None:
    target = pair("llama")[0]
    request = Request(
        id="c-1", category="code", prompt="the cat the", max_new_tokens=10, temperature=0.0
    )
    for drafter, cache in (("early-exit", KVCache), ("early-exit:shared", TargetView)):
        setting = BenchSetting(drafter=drafter, gamma=2, temperature=0.0, exit_layer=1)
        assert isinstance(plain_cache(setting, False)(target), cache) and not has_hf_counterpart(
            setting
        )
        (record,) = run_request(
            target, None, tokenizer, request, setting, repetitions=1, with_hf=True
        )
        assert 0 < record.metrics.tokens <= 10 and record.metrics.draft_calls > 0
        assert record.hf_latency is None  # transformers has no early-exit drafter


def test_lookup_then_model_drafter_runs_in_the_bench_without_a_transformers_counterpart(
    pair: PairFactory, tokenizer
) -> None:
    target, draft = pair("llama")
    request = Request(
        id="c-1", category="code", prompt="the cat the cat the", max_new_tokens=12, temperature=0.0
    )
    setting = BenchSetting(drafter="ngram+model", gamma=3, temperature=0.0)
    assert not has_hf_counterpart(setting)
    (record,) = run_request(target, draft, tokenizer, request, setting, repetitions=1, with_hf=True)
    assert 0 < record.metrics.tokens <= 12 and record.metrics.proposed > 0
    assert record.hf_latency is None


def test_the_draft_models_cap_reaches_the_hybrid_drafter_and_splits_settings_and_curves(
    pair: PairFactory,
) -> None:
    argv = ["bench", "--drafters", "model,ngram+model", "--model-gamma", "none,2"]
    args = build_parser().parse_args([*argv, "--gammas", "3,4"])
    drafters, policies = check(args)
    settings = speedup.settings(drafters, policies, args, "bundled", 0.0)
    caps = sorted((s.drafter, s.model_gamma or 0, s.gamma) for s in settings)
    assert caps == [("model", 0, 3), ("model", 0, 4)] + [
        ("ngram+model", k, g) for k in (0, 2) for g in (3, 4)
    ]
    target, draft = pair("llama")
    capped = next(s for s in settings if s.model_gamma == 2)
    drafter = _drafter(capped, target, draft, SamplingConfig(temperature=0.0), lean=True)
    assert isinstance(drafter, LookupThenModelDrafter) and drafter.model_gamma == 2
    assert drafter_label(asdict(capped)) == "ngram+model (model ≤ 2)"
    assert drafter_label(asdict(settings[0])) == "model"
    rows = [
        {"workload": "code", "setting": asdict(s), "speedup": {"median": 1.0}}
        | {"alpha": {"median": 0.5}, "cost_ratio": {"median": 0.1}}
        for s in settings
    ]
    curves = {(c["drafter"], c["model_gamma"]) for c in gamma_curves(rows)}
    assert curves == {("model", None), ("ngram+model", None), ("ngram+model", 2)}


def test_a_cap_without_a_hybrid_drafter_or_below_one_is_refused(capsys) -> None:
    assert main(["bench", "--drafters", "model", "--model-gamma", "2"]) == 2
    assert "--model-gamma caps the draft model after lookup: add one of" in capsys.readouterr().err
    assert main(["bench", "--drafters", "ngram+model", "--model-gamma", "none,0"]) == 2
    assert "--model-gamma must be integers >= 1 or 'none'" in capsys.readouterr().err


def test_lean_target_runs_plain_and_speculative_decoding_on_the_same_lean_forward(
    pair: PairFactory, tokenizer
) -> None:
    target, draft = pair("llama")
    request = Request(
        id="c-1", category="code", prompt="the cat the cat", max_new_tokens=12, temperature=0.0
    )
    setting = BenchSetting(drafter="model", gamma=3, temperature=0.0)
    assert isinstance(plain_cache(setting, True)(target), LeanLlama)
    assert speculative_cache(setting, True) is plain_cache(setting, True)
    shared = BenchSetting(drafter="early-exit:shared", gamma=2, temperature=0.0, exit_layer=1)
    assert speculative_cache(shared, True) is None  # the drafter shares the target's forward
    runs = {
        lean_target: run_request(
            target,
            draft,
            tokenizer,
            request,
            setting,
            repetitions=1,
            with_hf=True,
            lean_target=lean_target,
        )
        for lean_target in (False, True)
    }
    (lean_record,), (hf_forward_record,) = runs[True], runs[False]
    assert lean_record.hf_identical  # T = 0: the same tokens as transformers' generation
    assert lean_record.metrics.tokens == hf_forward_record.metrics.tokens > 0


def test_the_committed_tables_are_what_the_saved_results_render_to() -> None:
    """benchmarks/results/tables.md comes from the saved JSON (RESULTS.md's tables: test_docs)."""
    from specviz.results.saved import saved_results
    from tools.report.saved import RESULTS_DIR

    tables = (RESULTS_DIR / "tables.md").read_text(encoding="utf-8")
    names = re.findall(r"^## (\S+)$", tables, flags=re.M)
    shown = {Path(p).stem for p in saved_results(RESULTS_DIR)}
    assert set(names) == shown  # every saved result is shown
    rendered = "".join(
        render(resummarized(json.loads((RESULTS_DIR / f"{n}.json").read_text())), n) + "\n"
        for n in names
    )
    assert rendered == tables
    for name in names[:2]:  # what the app's "Benchmark results" tab shows for them
        figs, _ = load_result_view(RESULTS_DIR / f"{name}.json")
        assert len(figs) == 5


def test_the_bench_sends_prompts_through_the_chat_template_unless_raw(
    pair: PairFactory, monkeypatch
) -> None:
    target, draft = pair("llama")
    tok = templated_tokenizer()
    request = Request(id="c-1", category="code", prompt="ab", max_new_tokens=6, temperature=0.0)
    setting = BenchSetting(drafter="model", gamma=2, temperature=0.0)
    seen: list[list[int]] = []
    real = runner.autoregressive_generate

    def spy(model, tokenizer, prompt, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(list(prompt))
        return real(model, tokenizer, prompt, **kwargs)

    monkeypatch.setattr(runner, "autoregressive_generate", spy)
    for raw, text in ((False, as_chat("ab")), (True, "ab")):
        seen.clear()
        (record,) = run_request(
            target, draft, tok, request, setting, repetitions=1, with_hf=True, raw=raw
        )
        assert len(seen) == 2 and all(ids == tok(text)["input_ids"] for ids in seen)
        assert record.hf_identical  # transformers was given the same ids


def test_a_bench_result_records_and_reports_its_prompt_format(
    pair: PairFactory, tmp_path, capsys
) -> None:
    target, draft = pair("llama")
    for name, model in (("t", target), ("d", draft)):
        model.save_pretrained(tmp_path / name)
        templated_tokenizer().save_pretrained(tmp_path / name)
    work = tmp_path / "w.jsonl"
    row = {"id": "c-1", "category": "code", "prompt": "abcab", "max_new_tokens": 6}
    work.write_text(json.dumps(row | {"temperature": 0.0}))
    out, html = tmp_path / "b.json", tmp_path / "b.html"
    argv = ["bench", "--target", str(tmp_path / "t"), "--draft", str(tmp_path / "d")]
    argv += ["--workloads", str(work), "--gammas", "2", "--reps", "1", "--no-hf"]
    argv += ["--step-batch-sizes", "1", "--dtype", "float64"]
    argv += ["--out", str(out), "--html", str(html)]
    for extra, fmt, words in (
        ([], "chat", "through the chat template"),
        (["--raw"], "raw", "as raw text"),
    ):
        assert main([*argv, *extra]) == 0
        assert json.loads(out.read_text())["meta"]["prompt_format"] == fmt
        assert f"prompts {words}; wrote" in capsys.readouterr().out
        assert f"<title>specviz benchmark (prompts {words})</title>" in html.read_text()


def test_the_workloads_state_the_format_their_prompts_are_meant_for() -> None:
    assert PROMPT_FORMAT == "chat"
    readme = (Path(workload_path("code")).parent / "README.md").read_text(encoding="utf-8")
    assert "Prompt format: **chat**" in readme and "--raw" in readme
