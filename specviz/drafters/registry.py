"""Build any drafter by its name (specviz.drafters.names says what names there are).

The command line (generate, verify, bench, replay), the app and the tutorials all build drafters
through `build_drafter`, so a name means the same drafter everywhere. The fast paths plug in
where the builders are (specviz.drafters.builders): a model drafter drafts through
specviz.fast.lean's forward unless options say otherwise.
"""

from __future__ import annotations

from typing import Any

from specviz.core.config import SamplingConfig
from specviz.core.drafter import Drafter
from specviz.drafters.builders import build
from specviz.drafters.names import parse
from specviz.drafters.options import DrafterOptions
from specviz.tree.drafter import TreeDrafter


def build_drafter(
    name: str,
    *,
    target: Any,
    draft: Any = None,
    sampling: SamplingConfig,
    options: DrafterOptions | None = None,
) -> Drafter | TreeDrafter:
    """A fresh drafter called name for target (draft: the draft model, where one is used).

    specviz.drafters.names.DEFAULT_CONFIG names the default: the benchmark's fastest exact
    drafter, with its gamma, temperature and target forward (what `specviz generate` runs when
    no flag chooses). Tree drafters (tree-FAMILY) return a TreeDrafter, which
    specviz.tree.decoding's TreeDecoder (and the one-call API) verify a whole tree at a time.
    """
    return build(parse(name), target, draft, sampling, options or DrafterOptions())
