"""Step ``heads eval``: held-out α per draft position, greedy agreement and the cost ratio c.

On the held-out prompts of ``specviz.train.draft.evaluate`` (never used in training) the target's
own continuations (T = 1 sampled and greedy, cached by that step) are scored teacher-forced, as the
distilled draft's α is: at every position i of a continuation the head drafts j = 1..depth
tokens along the target's actual tokens, from the target's real features up to i - 1 and its
own predicted features after that (EAGLE-3: its own hidden state, with q zero off its draft
vocabulary), and

* α_j = mean over positions of Σ_x min(p_target(x), q_j(x)) at T = 1 (the probability that the
  j-th drafted token is kept, given the ones before it were the target's),
* greedy agreement_j = how often argmax q_j = argmax p_target on the greedy continuations.

c is the median time of one draft step over one target step (both batch 1, this machine).
"""

from __future__ import annotations

import logging
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from torch import Tensor

from specviz.heads.build import head_cache
from specviz.heads.cache import Eagle3Cache, HeadCache, MedusaCache
from specviz.heads.eagle_lean import LeanEagle3Cache
from specviz.heads.lookup import head_path
from specviz.heads.tap import FeatureCache, FusedFeatureCache, feature_cache, fused_feature_cache
from specviz.train.common import load_target, work_dir, write_json_atomic
from specviz.train.data.teacher import chat_ids
from specviz.train.draft.evaluate import HELD_OUT_CODE, build_reference

LOG = logging.getLogger("specviz.train.heads.evaluate")
KINDS = ("code", "chat")


@torch.inference_mode()
def target_pass(target: Any, tokens: Tensor, fused: bool = False) -> tuple[Tensor, Tensor]:
    """The target's features (L, D), or with fused its fused layers g (L, 3D) that EAGLE-3
    reads, and p_target (L, V) at T = 1 over tokens (L,)."""
    cache = FusedFeatureCache(target) if fused else FeatureCache(target)
    p = torch.softmax(cache.forward(tokens.long()).float(), -1)
    return cache.features.rows, p


@torch.inference_mode()
def drafted_laws(head: HeadCache, feats: Tensor, tokens: Tensor, start: int, depth: int) -> Tensor:
    """q_j (n, depth, V) for j-th drafts of x_{i+j} from every i in start..L-1-j (-1: padding).

    Row i holds the laws of tokens i+1..i+depth drafted from position i (its token is given).
    """
    n, vocab = tokens.shape[0], head.vocab_size
    out = torch.full((n - start, depth, vocab), -1.0)
    if isinstance(head, MedusaCache):
        for row, i in enumerate(range(start, n)):
            for j in range(1, min(depth, head.heads.k) + 1):
                if i + j < n:  # head j guesses x_{i+j} from f_{i-1}
                    logits = head.logits(head.heads.one(j, feats[i - 1])[None])[0]
                    out[row, j - 1] = torch.softmax(logits.float(), -1)
        return out
    assert isinstance(head, (Eagle3Cache, LeanEagle3Cache))
    head.reset()
    real = FeatureRows(feats)
    head.features = real  # type: ignore[assignment]
    for row, i in enumerate(range(start, n)):
        real.show(i)  # the target's features of positions < i are known
        head.crop(i)
        logits = head.forward(tokens[len(head) : i + 1].long(), keep=1)  # q_1 of x_{i+1}
        for j in range(1, depth + 1):
            if i + j >= n:
                break
            out[row, j - 1] = law(head, logits[-1])
            logits = head.forward(tokens[i + j : i + j + 1].long(), keep=1)
    return out


def law(head: HeadCache, logits: Tensor) -> Tensor:
    """q (V,) over the target's vocabulary from a head's logits (S,): zero off its draft
    vocabulary where the logits cover that only (EAGLE-3)."""
    q = torch.softmax(logits.float(), -1)
    if head.draft_vocab is None:
        return q
    return q.new_zeros(head.vocab_size).index_copy_(0, head.draft_vocab, q)


class FeatureRows:
    """A Features stand-in that shows only the first `visible` rows of fixed features."""

    def __init__(self, rows: Tensor) -> None:
        """All rows (L, D); none visible yet."""
        self.all, self.visible = rows, 0

    def show(self, n: int) -> None:
        """Make the first n rows visible."""
        self.visible = n

    @property
    def rows(self) -> Tensor:
        """The visible rows (n, D)."""
        return self.all[: self.visible]

    def __len__(self) -> int:
        """Visible rows."""
        return self.visible


def score(head: HeadCache, target: Any, ref: dict[str, Any], depth: int) -> dict[str, Any]:
    """α_j (T = 1) and greedy agreement_j per prompt kind, j = 1..depth."""
    out: dict[str, Any] = {}
    for kind in KINDS:
        for mode in ("sampled", "greedy"):
            sums, counts = torch.zeros(depth), torch.zeros(depth)
            for prompt_len, tokens in ref[f"{kind}/{mode}"]:
                feats, p = target_pass(target, tokens, isinstance(head, LeanEagle3Cache))
                laws = drafted_laws(head, feats, tokens, prompt_len - 1, depth)
                for j in range(depth):
                    rows = torch.arange(prompt_len - 1, tokens.shape[0] - j - 1)
                    q = laws[rows - (prompt_len - 1), j]  # (m, V), laws of x_{i+j+1}
                    pj = p[rows + j]  # p_target(x_{i+j+1} | true prefix)
                    if mode == "sampled":
                        sums[j] += torch.minimum(pj, q).sum(-1).sum()
                    else:
                        sums[j] += (pj.argmax(-1) == q.argmax(-1)).float().sum()
                    counts[j] += rows.shape[0]
            name = "alpha" if mode == "sampled" else "greedy_agreement"
            out[f"{name}_{kind}"] = [round(float(v), 4) for v in sums / counts]
        out[f"positions_{kind}"] = int(counts[0])
    return out


@torch.inference_mode()
def cost_ratio(head: HeadCache, target: Any, tokenizer: Any, steps: int = 48) -> dict[str, float]:
    """Median ms of one target step (lean forward where it applies) and one head step; c."""
    prompt = torch.tensor(chat_ids(tokenizer, HELD_OUT_CODE[0], 256))
    make = fused_feature_cache if isinstance(head, LeanEagle3Cache) else feature_cache
    target_ms, head_ms = [], []
    for _ in range(3):
        cache = head.attach(target, make)
        cache.forward(prompt)
        head.forward(prompt[: len(prompt)], keep=1)
        began = time.perf_counter()
        for _ in range(steps):
            cache.forward(prompt[-1:], keep=1)
        target_ms.append((time.perf_counter() - began) / steps * 1000)
        began = time.perf_counter()
        for _ in range(steps):
            head.forward(prompt[-1:], keep=1)
        head_ms.append((time.perf_counter() - began) / steps * 1000)
    t, h = statistics.median(target_ms), statistics.median(head_ms)
    return {
        "target_ms_per_step": round(t, 3),
        "head_ms_per_step": round(h, 3),
        "c": round(h / t, 4),
    }


def eval_path(kind: str) -> Path:
    """Where heads eval writes the measurements of the head `kind` (the exports read them)."""
    return work_dir() / "eval" / f"{kind}.json"


def trained_steps(kind: str, folder: str | None) -> dict[str, int]:
    """{"steps": N}: the training steps recorded in the weights' file, where it records them
    (the EAGLE-3 head's), so that an export attaches only its own evaluation."""
    path = Path(folder) / f"{kind}.safetensors" if folder else head_path(kind)
    with safe_open(str(path), "pt") as handle:
        meta = handle.metadata() or {}
    return {"steps": int(meta["steps"])} if "steps" in meta else {}


def run_heads_eval(kind: str, folder: str | None, per_kind: int, threads: int) -> dict[str, Any]:
    """Measure the head `kind` in folder (None: the shipped one); write eval/{kind}.json."""
    target, tokenizer = load_target(threads)
    head = head_cache(kind, target, folder)
    ref = build_reference(target, tokenizer, per_kind)
    depth = head.heads.k if isinstance(head, MedusaCache) else 5
    results: dict[str, Any] = {"head": kind, "folder": folder or "shipped"}
    results |= trained_steps(kind, folder)
    results.update(score(head, target, ref, depth))
    results.update(cost_ratio(head, target, tokenizer))
    results["threads"] = torch.get_num_threads()
    path = eval_path(kind)
    path.parent.mkdir(exist_ok=True)
    write_json_atomic(path, results)
    LOG.info("%s", results)
    return results
