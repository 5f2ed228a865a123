"""`specviz tune`: time the forward paths and thread counts, save the profile, print a table."""

from __future__ import annotations

import argparse

from specviz.console import say
from specviz.models.loading import BUNDLED, DTYPES, MODEL_SPEC_HELP
from specviz.runtime import HelpFormatter, threads_type
from specviz.tune.measure import QUICK_REPEATS, REPEATS, plan_tune, tune
from specviz.tune.profile import (
    FORWARDS,
    PROFILES_ENV,
    RATIO_TOKENS,
    Profile,
    profile_path,
    save_profile,
)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the tune subcommand."""
    t = sub.add_parser(
        "tune",
        help="measure this machine's fastest target forward and thread count for a pair",
        description="Time each target forward path (" + ", ".join(FORWARDS) + ") at each "
        "thread count from 1 to the machine's cores: the plain decode step, the pass ratio "
        "r(k) for k = " + ", ".join(map(str, RATIO_TOKENS)) + ", and the default drafter's "
        "cost ratio c. Saves the fastest choice for plain decoding and for speculation as a "
        "profile of this machine and pair, which `specviz generate` and the app then use "
        "where no flag chooses.",
        formatter_class=HelpFormatter,
    )
    t.add_argument("--target", default=BUNDLED, help=MODEL_SPEC_HELP)
    t.add_argument("--draft", default=BUNDLED, help=MODEL_SPEC_HELP)
    t.add_argument(
        "--dtype", default="float32", choices=sorted(DTYPES), help="weights' and compute dtype"
    )
    t.add_argument(
        "--threads-max",
        type=threads_type,
        metavar="N",
        help="time thread counts 1 to N only (default: every core)",
    )
    t.add_argument(
        "--quick",
        action="store_true",
        help=f"a short run: {QUICK_REPEATS} timed rounds per path and thread count, not {REPEATS}",
    )
    t.add_argument(
        "--out",
        metavar="FILE",
        help="write the profile here (default: <machine>-<pair>.json in $"
        f"{PROFILES_ENV}, else ~/.cache/specviz/profiles, where the defaults read it)",
    )


def run_tune(args: argparse.Namespace) -> int:
    """Check the flags, measure, save the profile and print what was measured and chosen."""
    plan = plan_tune(
        args.target, args.draft, args.dtype, threads_max=args.threads_max, quick=args.quick
    )
    out = args.out or profile_path(args.target, args.draft, args.dtype)
    profile = tune(plan, progress=say)
    path = save_profile(profile, out)
    print("\n".join(render(profile)))
    print(f"wrote {path}")
    return 0


LEGEND = (
    "step ms: one plain decode step (a 1-token target pass); r(k): a target pass scoring k + 1 "
    "tokens, in steps (verifying k drafts);",
    "c: one draft-model step, in steps; round ms: γ draft steps and the pass verifying them.",
)


def render(profile: Profile) -> list[str]:
    """The profile as a table of what was measured (a row per path and thread count, the
    chosen ones marked) and the lines naming what was chosen and what was skipped."""
    ks = list(RATIO_TOKENS)
    head = ["forward", "threads", "step ms", *(f"r({k})" for k in ks), "c"]
    head.append(f"round ms (γ={profile.gamma})")
    head.append("chosen for")
    rows = [head]
    for m in profile.measurements:
        chosen = [
            name
            for name, choice in (("plain", profile.plain), ("speculation", profile.speculative))
            if (choice.forward, choice.threads) == (m.forward, m.threads)
        ]
        rows.append(
            [
                m.forward,
                str(m.threads),
                f"{m.step_seconds * 1e3:.2f}",
                *(f"{m.ratio(k):.2f}" for k in ks),
                f"{m.c:.3f}",
                f"{m.round_seconds(profile.gamma) * 1e3:.2f}",
                ", ".join(chosen),
            ]
        )
    width = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(r, width, strict=True)).rstrip() for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in width))
    lines += LEGEND
    kind = "quick run" if profile.quick else "full run"
    lines.insert(0, f"{profile.machine.id}, {profile.pair} ({kind}, {profile.repeats} rounds each)")
    lines += [f"skipped {f}: {why}" for f, why in profile.skipped.items()]
    lines.append(f"plain decoding: {_choice(profile.plain.forward, profile.plain.threads)}")
    lines.append(
        f"speculation ({profile.drafter}, γ = {profile.gamma}): "
        + _choice(profile.speculative.forward, profile.speculative.threads)
    )
    return lines


def _choice(forward: str, threads: int) -> str:
    return f"the {forward} forward on {threads} thread{'s' if threads > 1 else ''}"
