"""Loading a (target, draft, tokenizer) pair: the bundled default, local folders or hub ids."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import constants, get_session
from transformers import AutoModelForCausalLM, AutoTokenizer

from specviz.drafters.names import CROSS_TOKENIZER_DRAFTERS
from specviz.fast.packed import pack_linears
from specviz.models import bundled, gemma  # nothing is fetched until a model is asked for
from specviz.models.gemma import GEMMA

BUNDLED = "bundled"  # the bundled pair: SmolLM2-135M-Instruct as target, the distilled draft
SMOLLM2 = "smollm2-135m"  # the bundled target, SmolLM2-135M-Instruct, in either role
NAMED_MODELS = (BUNDLED, SMOLLM2, GEMMA)  # model specs that name a model specviz provides
MODEL_SPEC_HELP = f"local folder, hub id, or one of {', '.join(map(repr, NAMED_MODELS))}"
# A hub id as the hub client takes it: 'name' (a model without an organisation, such as 'gpt2')
# or 'org/name', each part of letters, digits, '-', '_' and '.', at most 96 characters.
HUB_ID = re.compile(r"(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}")
HUB_TIMEOUT_SECONDS = 5.0  # how long the hub may take to answer before it counts as unreachable
_REACHED: dict[str, float] = {}  # hub endpoint -> when it last answered (time.monotonic)
DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


class ModelLoadError(ValueError):
    """A model or tokenizer could not be loaded; the message says what to do."""


CROSS_DRAFTER = "cross"  # what load_pair picks for a draft with a tokenizer of its own


@dataclass(frozen=True, kw_only=True)
class ModelPair:
    """A ready target and draft (eval mode, same device) and their tokenizers.

    tokenizer: the target's; draft_tokenizer: the draft's (None without a draft);
    drafter: the drafter asked of load_pair, or CROSS_DRAFTER where it picked one for a draft
    whose tokenizer differs from the target's (None: not asked, same tokenizer).
    """

    target: Any
    draft: Any
    tokenizer: Any
    draft_tokenizer: Any = None
    drafter: str | None = None

    @cached_property
    def same_tokenizer(self) -> bool:
        """True unless the draft has a tokenizer of its own (compared once: two vocabularies of
        49k entries cost milliseconds, and every request of the pair asks)."""
        return self.draft_tokenizer is None or tokenizers_match(
            self.tokenizer, self.draft_tokenizer
        )


def parse_dtype(name: str) -> torch.dtype:
    """'float32' | 'float16' | 'bfloat16' | 'float64' → torch dtype."""
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)} (got {name!r})")
    return DTYPES[name]


def resolve(spec: str, role: str, progress: Callable[[str], None]) -> str:
    """Turn a named model (NAMED_MODELS), a local folder or a hub id into something
    from_pretrained accepts.

    'bundled' is the bundled target in the target's role and the distilled draft in the draft's;
    'smollm2-135m' is the bundled target in either; 'gemma3-270m' is Gemma 3 270M from its
    optional package (specviz.models.gemma).
    """
    if spec in (BUNDLED, SMOLLM2):
        try:
            if role == "target" or spec == SMOLLM2:
                return str(bundled.ensure_bundled_target(progress))
            return str(bundled.bundled_draft_dir())
        except bundled.BundledModelError as err:
            raise ModelLoadError(f"{spec} {role}: {err}") from err
    if spec == GEMMA:
        try:
            return str(gemma.ensure_gemma(progress))
        except gemma.GemmaModelError as err:
            raise ModelLoadError(f"{spec} {role}: {err}") from err
    path = Path(spec).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelLoadError(
                f"{role} folder {path} has no config.json: save it with save_pretrained"
            )
        return str(path)
    if not is_hub_id(spec):
        raise ModelLoadError(
            f"{role} {spec!r} is neither an existing folder nor a hub id like 'org/name' or "
            f"'gpt2' nor one of {', '.join(map(repr, NAMED_MODELS))}"
        )
    return spec


def is_hub_id(spec: str) -> bool:
    """True when spec reads as a hub id: 'org/name', or a bare 'name' such as 'gpt2'."""
    return HUB_ID.fullmatch(spec) is not None and ".." not in spec and "--" not in spec


def _offline() -> bool:
    """True when HF_HUB_OFFLINE asks the hub client not to touch the network."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def hub_endpoint() -> str:
    """The hub the hub client talks to (HF_ENDPOINT, else huggingface.co)."""
    return str(constants.ENDPOINT)


def hub_problem(endpoint: str | None = None, timeout: float | None = None) -> str | None:
    """None when the hub answers at all (any HTTP status) within timeout seconds (default
    HUB_TIMEOUT_SECONDS), else why not.

    One request, no retries, through the hub client's own session (its proxies and
    certificates); an answer is remembered for a minute.
    """
    url = endpoint or hub_endpoint()
    if time.monotonic() - _REACHED.get(url, -1e9) < 60:
        return None
    try:
        get_session().head(url, timeout=HUB_TIMEOUT_SECONDS if timeout is None else timeout)
    except Exception as err:  # whatever the transport raises: the hub cannot be reached
        return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    _REACHED[url] = time.monotonic()
    return None


@contextlib.contextmanager
def quiet_torchao() -> Iterator[None]:
    """Silence torchao's import-time warnings (GPU kernels it cannot load on a CPU machine;
    transformers imports torchao whenever it is installed), restoring each level afterwards."""
    names = ("torchao", "torch.utils._pytree")
    before = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.ERROR)
    try:
        yield
    finally:
        for n, level in before.items():
            logging.getLogger(n).setLevel(level)


# transformers' from_pretrained swaps class-level methods (PreTrainedModel.init_weights and
# tie_weights) for no-ops while it loads, and puts back what it found: two loads at once in one
# process (a server loading two pairs) can leave the no-ops in place for good, and every model
# loaded after that has an untied, uninitialized head. Models load one at a time here.
MODEL_LOADS = threading.Lock()


def _from_pretrained(loader: Any, source: str, role: str, **kwargs: Any) -> Any:
    """loader.from_pretrained with errors turned into a ModelLoadError that says what to do.

    A hub id is fetched only when the hub answers (hub_problem); when it does not, the local
    cache alone is tried, so that an unreachable hub fails within seconds instead of after the
    hub client's retries.
    """
    is_local = Path(source).exists()
    unreachable = None if is_local or _offline() else hub_problem()
    try:
        with quiet_torchao():
            return loader.from_pretrained(
                source, local_files_only=is_local or _offline() or unreachable is not None, **kwargs
            )
    except (OSError, ValueError) as err:
        if unreachable is not None:
            hint = (
                f"the hub ({hub_endpoint()}) cannot be reached ({unreachable}) and it is not in "
                "the local cache: check the network connection (or HTTPS_PROXY, HF_ENDPOINT), or "
                "pass a local folder"
            )
        elif not is_local and _offline():
            hint = (
                "the hub is offline (HF_HUB_OFFLINE=1) and it is not in the local cache: pass a "
                "local folder, or unset HF_HUB_OFFLINE on a machine with internet"
            )
        else:
            hint = f"{err}"
        if not is_local and "/" not in source:  # a bare name may have meant a folder here
            hint += f" (there is no folder {source!r} here either)"
        raise ModelLoadError(f"could not load {role} {source!r}: {hint}") from err


def load_model(
    spec: str,
    *,
    role: str = "model",
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
    pack: bool = False,
    progress: Callable[[str], None] = lambda _m: None,
) -> Any:
    """One causal LM in eval mode with gradients off; pack=True pre-packs its CPU weights."""
    source = resolve(spec, role, progress)
    with MODEL_LOADS:
        model = _from_pretrained(AutoModelForCausalLM, source, role, dtype=dtype)
    model.requires_grad_(False)
    model = model.to(device).eval()
    if pack:
        pack_linears(model)  # a no-op off CPU (see specviz.fast.packed)
    return model


def load_tokenizer(
    spec: str, *, role: str = "target", progress: Callable[[str], None] = lambda _m: None
) -> Any:
    """The tokenizer stored with a model."""
    return _from_pretrained(AutoTokenizer, resolve(spec, role, progress), f"{role} tokenizer")


def tokenizers_match(target_tok: Any, draft_tok: Any) -> bool:
    """True when both tokenizers map the same strings to the same ids, specials included."""
    return bool(
        target_tok.get_vocab() == draft_tok.get_vocab()
        and target_tok.all_special_tokens == draft_tok.all_special_tokens
    )


def check_tokenizers(target_tok: Any, draft_tok: Any) -> None:
    """Raise ModelLoadError unless both tokenizers map the same strings to the same ids."""
    if target_tok.get_vocab() != draft_tok.get_vocab():
        raise ModelLoadError(
            "draft and target tokenizers differ (different vocabularies): speculative decoding "
            "needs a draft trained with the target's tokenizer, or a drafter that translates "
            f"between tokenizers ({', '.join(CROSS_TOKENIZER_DRAFTERS)})"
        )
    if target_tok.all_special_tokens != draft_tok.all_special_tokens:
        raise ModelLoadError(
            f"draft and target tokenizers have different special tokens "
            f"({draft_tok.all_special_tokens} vs {target_tok.all_special_tokens})"
        )


def load_pair(
    target: str = BUNDLED,
    draft: str | None = BUNDLED,
    *,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
    pack: bool = True,
    progress: Callable[[str], None] = lambda _m: None,
    drafter: str | None = None,
    target_model: Any = None,
) -> ModelPair:
    """Load target, draft and tokenizers; compares the tokenizers before loading weights.

    draft=None loads no draft model (for drafters that need none, such as n-gram lookup).
    pack=True runs both on pre-packed oneDNN weights on CPU (specviz.fast.packed): inference only.
    drafter: the registered drafter the pair is for. Where the draft's tokenizer differs from
    the target's, a cross-tokenizer drafter (CROSS_TOKENIZER_DRAFTERS) is needed: None picks
    CROSS_DRAFTER (ModelPair.drafter, and progress says so); another drafter is refused
    (ModelLoadError), before any weights are loaded. target_model: the target, loaded already
    (loaded as load_pair would load it: a server adding a draft to a target it holds).
    """
    check_device(device)
    tokenizer = load_tokenizer(target, role="target", progress=progress)
    draft_tokenizer = None if draft is None else load_tokenizer(draft, role="draft")
    chosen = drafter
    if draft_tokenizer is not None and not tokenizers_match(tokenizer, draft_tokenizer):
        if drafter is None:
            chosen = CROSS_DRAFTER
            progress(
                f"the draft's tokenizer differs from the target's: drafting with {CROSS_DRAFTER} "
                "(sampling over the tokens both share)"
            )
        elif drafter not in CROSS_TOKENIZER_DRAFTERS:
            check_tokenizers(tokenizer, draft_tokenizer)
            raise ModelLoadError(
                f"draft and target tokenizers have different special tokens "
                f"({draft_tokenizer.all_special_tokens} vs {tokenizer.all_special_tokens}): "
                f"the {drafter} drafter needs the target's tokenizer; use a drafter that "
                f"translates between tokenizers ({', '.join(CROSS_TOKENIZER_DRAFTERS)})"
            )
    progress(f"loading target {target!r} and draft {draft!r} ({dtype}, {device})")
    options: dict[str, Any] = dict(dtype=dtype, device=device, pack=pack, progress=progress)
    return ModelPair(
        target=target_model
        if target_model is not None
        else load_model(target, role="target", **options),
        draft=None if draft is None else load_model(draft, role="draft", **options),
        tokenizer=tokenizer,
        draft_tokenizer=draft_tokenizer,
        drafter=chosen,
    )


def check_device(device: str) -> None:
    """Raise ValueError unless `device` names a torch device that this machine has."""
    try:
        parsed = torch.device(device)
    except RuntimeError:
        raise ValueError(
            f"device {device!r} is not a torch device: give cpu, cuda or cuda:N"
        ) from None
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(
                f"device {device!r}: this torch ({torch.__version__}) sees no CUDA GPU here; "
                "use cpu, or install a CUDA build of torch on a machine with a GPU"
            )
        if parsed.index is not None and parsed.index >= count:
            raise ValueError(
                f"device {device!r}: this machine has {count} CUDA GPU(s), "
                f"cuda:0 to cuda:{count - 1}"
            )
    if parsed.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device!r}: MPS is not available here; use cpu")
