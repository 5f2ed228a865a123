"""`specviz bench cross`: a draft with another tokenizer than the target's,
each cross-tokenizer drafter at each γ, against plain decoding, transformers' generate() and
transformers' own assisted generation with the same draft (Universal Assisted Generation).

Per request and repetition, after one untimed warm-up, it runs in turn: specviz's plain
decoding, transformers' generate() of the target alone, transformers' assisted generation
(`assistant_model` with `tokenizer` and `assistant_tokenizer`; skipped with --no-hf), then each
drafter at each γ. Its section, saved under `cross`, holds one row per speculative run; the
table gives medians over the requests and repetitions of each drafter and γ:

- α: accepted / verified draft tokens (tokens after a rejection are not verified);
- tokens / pass: tokens emitted per target pass (the bonus or corrected token counted);
- c: draft seconds per round (the text translation included) over target seconds per
  verification pass, both without the prompt's share;
- × plain, × generate(), × assisted: the speculative decode's speed over specviz's plain
  decoding, transformers' generate() and transformers' assisted generation, pair by pair
  (seconds per token of the other over seconds per token of this one);
- identical: at T = 0, how many decodes gave exactly the target's own greedy tokens (both
  specviz's plain decoding and generate()); "-" at T > 0, where they are samples.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from specviz.api import GenerationResult, autoregressive_generate, speculative_generate
from specviz.bench.runner import assistant_settings, record
from specviz.bench.sweep import Context, Outcome, by_temperature, with_flags
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.cross_vocab import CrossTokenizers, cross_tokenizers
from specviz.drafters.names import CROSS_TOKENIZER_DRAFTERS
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.fast.lean import lean_target_cache
from specviz.models.generate import generate
from specviz.results.records import Record, grouped, request_metrics
from specviz.results.setting import BenchSetting
from specviz.results.table import Column, column_table, number_cell
from specviz.workloads import Request, checked_prompt_ids

DEFAULT_CROSS = ",".join(CROSS_TOKENIZER_DRAFTERS)


@dataclass(frozen=True, kw_only=True)
class CrossPlan:
    """The drafters and γs each request runs, and the command that asked for them."""

    drafters: tuple[str, ...]
    gammas: tuple[int, ...]
    command: str


def cross_plan(args: argparse.Namespace, policies: Sequence[str]) -> CrossPlan:
    """The study of --drafters (the cross-tokenizer drafters: by default every one); ValueError,
    saying what to change, for what it cannot run. No model is loaded."""
    drafters = tuple(d.strip() for d in args.drafters.split(",") if d.strip())
    unknown = [d for d in drafters if d not in CROSS_TOKENIZER_DRAFTERS]
    if not drafters or unknown:
        raise ValueError(
            f"specviz bench cross runs the drafters that translate between tokenizers: "
            f"--drafters must list some of {DEFAULT_CROSS} (got {args.drafters!r})"
        )
    for flag, clash in (
        ("--policies", list(policies) != ["fixed"]),
        ("--draft twice", len(args.draft or []) > 1),
    ):
        if clash:
            raise ValueError(
                f"specviz bench cross runs its drafters at fixed gammas on one --draft: drop {flag}"
            )
    command = shlex.join(["specviz", *sys.argv[1:]])
    return CrossPlan(drafters=drafters, gammas=tuple(args.gammas), command=command)


def transformers_run(
    pair: Any, ids: list[int], new_tokens: int, temperature: float, assistant: dict[str, Any]
) -> tuple[float, list[int]]:
    """Seconds and new tokens of transformers' generate() on the target; with assistant
    (assistant_settings of a setting), its assisted generation with the pair's draft, given
    both tokenizers where they differ (Universal Assisted Generation)."""
    if not assistant:
        return generate(pair.target, ids, new_tokens, temperature)
    both = None if pair.same_tokenizer else (pair.tokenizer, pair.draft_tokenizer)
    return generate(
        pair.target,
        ids,
        new_tokens,
        temperature,
        assistant=pair.draft,
        schedule=assistant,
        tokenizers=both,
    )


def per_token(seconds: float, tokens: int) -> float:
    """Seconds per generated token (one token at least)."""
    return seconds / max(tokens, 1)


def run_row(
    request: Request,
    setting: BenchSetting,
    rep: int,
    spec: GenerationResult,
    plain: GenerationResult,
    generate: tuple[float, list[int]],
    assisted: tuple[float, list[int]] | None,
) -> dict[str, Any]:
    """One speculative run of the section, against its references."""
    m = request_metrics(spec, plain)
    tokens = list(spec.tokens)
    mine = per_token(spec.seconds, len(tokens))
    greedy = setting.temperature == 0
    return {
        "request": request.id,
        "category": request.category,
        "temperature": setting.temperature,
        "rep": rep,
        "drafter": setting.drafter,
        "gamma": setting.gamma,
        "tokens": len(tokens),
        "rounds": m.rounds,
        "proposed": m.proposed,
        "accepted": m.accepted,
        "alpha": m.alpha,
        "tokens_per_pass": m.tokens_per_round,
        "draft_seconds": m.draft_seconds,
        "target_seconds": m.target_seconds,
        "c": m.draft_seconds / m.target_seconds if m.target_seconds else None,
        "seconds": spec.seconds,
        "speedup_plain": per_token(plain.seconds, len(plain.tokens)) / mine,
        "speedup_generate": per_token(generate[0], len(generate[1])) / mine,
        "speedup_assisted": None
        if assisted is None
        else per_token(assisted[0], len(assisted[1])) / mine,
        "identical": tokens == list(plain.tokens) == generate[1] if greedy else None,
    }


def run_cross(plan: CrossPlan, context: Context) -> Outcome:
    """Every request at each temperature, each repetition after a warm-up: the records of the
    speculative runs (against transformers' assisted generation) and the section."""
    args, pair = context.args, context.pair
    translation = cross_tokenizers(
        pair.tokenizer,
        pair.draft_tokenizer or pair.tokenizer,
        target_vocab=int(pair.target.config.vocab_size),
        draft_vocab=int(pair.draft.config.vocab_size),
    )
    options = DrafterOptions(
        tokenizer=pair.tokenizer, draft_tokenizer=pair.draft_tokenizer, translation=translation
    )
    make_cache = lean_target_cache if args.lean_target else KVCache
    records: list[Record] = []
    rows: list[dict[str, Any]] = []
    baselines: list[dict[str, Any]] = []
    picked = [(t, r) for t, subset in by_temperature(args, context.requests) for r in subset]
    for i, (temperature, request) in enumerate(picked):
        context.progress(i, len(picked), f"{request.id} T={temperature}")
        n = request.max_new_tokens
        ids = checked_prompt_ids(pair.tokenizer, request, n, [pair.target], raw=args.raw)
        for rep in range(-1, args.reps):  # rep -1 is the untimed warm-up
            sampling = SamplingConfig(temperature=temperature, seed=max(rep, 0))
            plain = autoregressive_generate(
                pair.target,
                pair.tokenizer,
                ids,
                sampling=sampling,
                max_new_tokens=n,
                make_cache=make_cache,
            )
            alone = transformers_run(pair, ids, n, temperature, {})
            for drafter in plan.drafters:
                for gamma in plan.gammas:
                    setting = BenchSetting(
                        drafter=drafter,
                        gamma=gamma,
                        temperature=temperature,
                        draft_name=context.draft,
                    )
                    schedule = assistant_settings(setting)
                    assisted = (
                        None
                        if args.no_hf
                        else transformers_run(pair, ids, n, temperature, schedule)
                    )
                    built = build_drafter(
                        drafter,
                        target=pair.target,
                        draft=pair.draft,
                        sampling=sampling,
                        options=options,
                    )
                    spec = speculative_generate(
                        pair.target,
                        built,
                        pair.tokenizer,
                        ids,
                        sampling=sampling,
                        speculation=SpeculationConfig(gamma=gamma, max_new_tokens=n),
                        make_cache=make_cache,
                    )
                    if rep < 0:
                        continue
                    hf = (None, None) if assisted is None else assisted
                    records.append(record(request, setting, rep, spec, plain, *hf))
                    rows.append(run_row(request, setting, rep, spec, plain, alone, assisted))
            if rep >= 0:
                baselines.append(baseline_row(request, temperature, rep, plain, alone))
    context.progress(len(picked), len(picked), "done")
    facts = pair_facts(args, context.draft, pair, translation)
    section = {"plan": asdict(plan) | facts, "runs": rows, "baselines": baselines}
    return Outcome(records=tuple(records), section=section)


def baseline_row(
    request: Request,
    temperature: float,
    rep: int,
    plain: GenerationResult,
    generate: tuple[float, list[int]],
) -> dict[str, Any]:
    """specviz's plain decoding against transformers' generate() in one repetition."""
    return {
        "request": request.id,
        "temperature": temperature,
        "rep": rep,
        "plain_seconds": plain.seconds,
        "plain_tokens": len(plain.tokens),
        "generate_seconds": generate[0],
        "generate_tokens": len(generate[1]),
    }


def pair_facts(
    args: argparse.Namespace, draft: str, pair: Any, translation: CrossTokenizers
) -> dict[str, Any]:
    """What the section says of the pair: the models as given, their vocabularies, the tokens
    they share and whether their tokenizers differ."""
    return {
        "target": args.target,
        "draft": draft,
        "target_vocab": translation.target.vocab,
        "draft_vocab": translation.draft.vocab,
        "shared_tokens": translation.shared.shared,
        "same_tokenizer": bool(pair.same_tokenizer),
    }


def _median(values: Sequence[float | None]) -> float | None:
    """Median of the values measured (None where none was)."""
    kept = [v for v in values if v is not None and v == v]
    return statistics.median(kept) if kept else None


def cross_rows(section: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (drafter, γ, T): the medians over its requests and repetitions."""
    out = []
    by = grouped(section["runs"], lambda r: (r["drafter"], r["gamma"], r["temperature"]))
    for (drafter, gamma, temperature), runs in by.items():
        judged = [r["identical"] for r in runs if r["identical"] is not None]
        out.append(
            {"drafter": drafter, "gamma": gamma, "temperature": temperature, "runs": len(runs)}
            | {
                k: _median([r[k] for r in runs])
                for k in ("alpha", "tokens_per_pass", "c", "speedup_plain", "speedup_generate")
            }
            | {"speedup_assisted": _median([r["speedup_assisted"] for r in runs])}
            | {"identical": f"{sum(judged)}/{len(judged)}" if judged else "-"}
        )
    return out


def _number(title: str, key: str, fmt: str = ".2f") -> Column:
    """A column of a cross row's median under key ("-" where none was measured)."""
    return title, lambda r: number_cell(r[key], fmt, none="-")


COLUMNS = (
    ("drafter", lambda r: r["drafter"]),
    ("γ", lambda r: str(r["gamma"])),
    ("T", lambda r: f"{r['temperature']:g}"),
    ("runs", lambda r: str(r["runs"])),
    _number("α", "alpha"),
    _number("tokens / pass", "tokens_per_pass"),
    _number("c", "c", ".3f"),
    _number("× plain", "speedup_plain"),
    _number("× generate()", "speedup_generate"),
    _number("× assisted", "speedup_assisted"),
    ("identical", lambda r: r["identical"]),
)


def render_cross(section: dict[str, Any]) -> str:
    """The pair, the table and what plain decoding costs against transformers' generate()."""
    plan = section["plan"]
    kind = "the same tokenizer" if plan["same_tokenizer"] else "two tokenizers"
    lines = [
        f"Target {plan['target']} ({plan['target_vocab']} tokens), draft {plan['draft']} "
        f"({plan['draft_vocab']} tokens): {kind}, {plan['shared_tokens']} shared tokens.",
        "",
    ]
    lines += column_table(COLUMNS, cross_rows(section))
    ratio = _median(
        [
            per_token(b["generate_seconds"], b["generate_tokens"])
            / per_token(b["plain_seconds"], b["plain_tokens"])
            for b in section["baselines"]
        ]
    )
    lines += [
        "",
        f"specviz's plain decoding runs at {number_cell(ratio, none='-')}× transformers' "
        "generate() (median over the same requests and repetitions).",
        f"Command: `{plan['command']}`",
    ]
    return "\n".join(lines)


@dataclass(frozen=True, kw_only=True)
class Cross:
    """The cross-tokenizer study: it runs on the loaded pair; its section is saved under
    cross."""

    name: str = "cross"
    key: str | None = "cross"
    per_draft: bool = True
    own_flags: bool = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """None of its own: it runs the cross-tokenizer drafters of --drafters."""

    def chosen(self, args: argparse.Namespace) -> argparse.Namespace:
        return with_flags(args, drafters=args.drafters or DEFAULT_CROSS)

    def plan(
        self,
        args: argparse.Namespace,
        drafters: Sequence[str],
        policies: Sequence[str],
        requests: Sequence[Request],
    ) -> CrossPlan:
        return cross_plan(args, policies)

    def run(self, plan: CrossPlan, context: Context) -> Outcome:
        return run_cross(plan, context)

    def render(self, section: dict[str, Any], price_per_hour: float) -> str:
        return render_cross(section)
