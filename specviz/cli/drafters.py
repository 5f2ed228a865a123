"""`specviz drafters`: the drafter families, what each needs, whether it is exact, and what
`specviz tune` measured of it on this machine; then the two ways to combine them."""

from __future__ import annotations

import argparse

from specviz.drafters.families import FAMILIES, Family
from specviz.drafters.names import DEFAULT_CONFIG, LOOKUPS
from specviz.models.loading import BUNDLED
from specviz.tune.profile import Profile, ProfileError, load_profile, profile_path

COMBINING = (
    "Combine them (any family, no new names):",
    f"  LOOKUP+FAMILY    {' or '.join(LOOKUPS)} first, the family where it finds no good match "
    "(ngram+model:trimmed, suffix+eagle, ...)",
    "  tree-FAMILY      the family grows a tree of tokens, one target pass verifies it; "
    "--tree-nodes, --tree-depth, --tree-width set its budget",
    "",
    "Every drafter is exact: its output follows the target's law (`specviz verify` tests it).",
    "Only --tree-rule typical is lossy, and says so wherever it runs.",
    f"Default: {DEFAULT_CONFIG.drafter} with gamma {DEFAULT_CONFIG.gamma} (the fastest measured).",
)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the drafters subcommand."""
    sub.add_parser(
        "drafters",
        help="list the drafter families, what each needs, and how to combine them",
        description="The drafter families (--drafter FAMILY[:VARIANT]), what each needs, and "
        "the speed `specviz tune` measured on this machine for the bundled pair, where it saved "
        "a profile.",
    )


def run_drafters(_args: argparse.Namespace) -> int:
    """Print the table."""
    print(render(_bundled_profile()))
    return 0


def render(profile: Profile | None) -> str:
    """The families' table, then how to combine them."""
    header = ("family", "variants", "needs", "exact", "measured here")
    rows = [header, *(_row(f, profile) for f in FAMILIES.values())]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines = [lines[0], "  ".join("-" * w for w in widths), *lines[1:]]
    if profile is None:
        lines.append("measured here: none yet (`specviz tune` times this machine)")
    return "\n".join([*(line.rstrip() for line in lines), "", *COMBINING])


def _row(family: Family, profile: Profile | None) -> tuple[str, str, str, str, str]:
    """One family's cells."""
    variants = ", ".join(f":{v}" for v in family.variants if v) or "-"
    trees = " (trees)" if family.grows_trees else ""
    return family.name, variants + trees, family.needs, "yes", _measured(family, profile)


def _measured(family: Family, profile: Profile | None) -> str:
    """What the profile measured of this family: the draft step's cost c, in target steps, of
    the drafter the profile timed (the draft model), on the forward speculation chose."""
    if profile is None or profile.drafter.split("+")[-1].split(":")[0] != family.name:
        return "-"
    chosen = profile.speculative
    for m in profile.measurements:
        if (m.forward, m.threads) == (chosen.forward, chosen.threads):
            return f"draft step {m.c:.3f} of a target step ({m.forward}, {m.threads} thread(s))"
    return "-"


def _bundled_profile() -> Profile | None:
    """This machine's profile for the bundled pair in float32, where `specviz tune` saved one."""
    path = profile_path(BUNDLED, BUNDLED, "float32")
    if not path.is_file():
        return None
    try:
        return load_profile(path)
    except ProfileError:
        return None
