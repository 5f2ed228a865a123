"""Step ``draft evaluate``: acceptance rate, greedy agreement and decode cost on held-out prompts.

The held-out prompts below were written for evaluation only; no training template or corpus file
produces them. For each prompt the target samples one continuation at T=1 and one greedily
(cached in ``work_dir()/eval/reference.pt``); then, teacher-forced along those continuations:
``alpha = mean over positions of sum_v min(p_v, q_v)`` (T=1, full vocabulary) and
``greedy agreement = mean [argmax q == argmax p]`` along the greedy continuation.
"""

from __future__ import annotations

import copy
import logging
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from specviz.drafters.trimmed import load_head_tokens, ranking_path, trim_head
from specviz.train.common import load_target, save_atomic, work_dir, write_json_atomic
from specviz.train.data.teacher import chat_ids, sample_batch
from specviz.train.draft.student import student_dir

LOG = logging.getLogger("specviz.train.draft.evaluate")
HELD_OUT_CODE = (
    "Write a Python class for a bank account with deposit and withdraw methods.",
    "Create a function in Python to compute the dot product of two vectors.",
    "I need Python code to read a text file and print the ten most common words.",
    "Write a function `chunk(lst, n)` that splits a list into pieces of size n.",
    "Please write a Python generator that yields the squares of even numbers up to n.",
    "Code a simple command line calculator in Python.",
    "Write a Python function to convert a Roman numeral to an integer.",
    "How can I sort a dictionary by its values in Python? Show code.",
    "Write a recursive Python function that sums the digits of a number.",
    "Give me Python code that checks whether a year is a leap year.",
    "Write a SQL query that returns the five most expensive products.",
    "Implement bubble sort in Python and explain its complexity.",
    "Write a Python function that returns the intersection of two lists.",
    "Show how to use a with statement to write lines to a file in Python.",
    "Write a Python function that counts how many times each character appears in a string.",
    "Write a Python decorator that prints how long a function takes to run.",
)
HELD_OUT_CHAT = (
    "What are some good ways to stay focused while studying?",
    "Can you explain how a rainbow forms?",
    "Write a friendly email inviting my neighbours to a barbecue.",
    "What is the difference between weather and climate?",
    "Suggest a name for a small bakery and explain why.",
    "How do plants get water from the soil to their leaves?",
    "Give me a simple recipe for pancakes.",
    "Why do we have seasons on Earth?",
    "What should I pack for a weekend camping trip?",
    "Describe the main causes of the First World War.",
    "How can I be a better listener?",
    "Tell me a short story about a lost umbrella.",
    "What is a good way to start learning to draw?",
    "Explain what a budget is and why it helps.",
    "What are the benefits of walking every day?",
    "How does a refrigerator keep food cold?",
)


def reference_path() -> Path:
    """Where the target's reference continuations are cached."""
    return work_dir("eval") / "reference.pt"


def build_reference(target: Any, tokenizer: Any, per_kind: int) -> dict[str, Any]:
    """Target continuations (T=1 sampled and greedy, <=128 new tokens) for the held-out prompts."""
    path = reference_path()
    if path.exists():
        cached: dict[str, Any] = torch.load(path, weights_only=False)
        if cached["per_kind"] >= per_kind:
            return cached
    gen = torch.Generator().manual_seed(2024)
    ref: dict[str, Any] = {"per_kind": per_kind}
    eos = int(tokenizer.eos_token_id)
    for kind, prompts in (("code", HELD_OUT_CODE), ("chat", HELD_OUT_CHAT)):
        ids = [chat_ids(tokenizer, p, 256) for p in prompts[:per_kind]]
        for mode, temperature in (("sampled", 1.0), ("greedy", 0.0)):
            rows = sample_batch(target, ids, eos, 128, temperature, 1, gen)
            ref[f"{kind}/{mode}"] = [(len(p), r["tokens"]) for p, r in zip(ids, rows, strict=True)]
    save_atomic(ref, path)
    return ref


@torch.inference_mode()
def score_pair(
    target: Any, draft: Any, prompt_len: int, tokens: torch.Tensor, head: torch.Tensor | None
) -> dict[str, Any]:
    """Per-position overlap and argmax agreement [n] over the continuation of ``tokens`` [L].

    With ``head`` (S,), also for the draft trimmed to those tokens (q renormalised over them).
    """
    ids = tokens.long()[None]
    p = torch.softmax(target(input_ids=ids).logits[0, prompt_len - 1 : -1].float(), dim=-1)
    logits = draft(input_ids=ids).logits[0, prompt_len - 1 : -1].float()  # (n, V)
    out = {"": torch.softmax(logits, dim=-1)}
    if head is not None:
        out["_trimmed"] = torch.zeros_like(logits).index_copy_(
            1, head, torch.softmax(logits[:, head], dim=-1)
        )
    scores = {f"overlap{k}": torch.minimum(p, q).sum(-1) for k, q in out.items()}
    return scores | {f"agree{k}": p.argmax(-1) == q.argmax(-1) for k, q in out.items()}


def quality(target: Any, draft: Any, ref: dict[str, Any], head: Any = None) -> dict[str, float]:
    """alpha (T=1, sampled continuations) and greedy agreement per prompt kind."""
    out: dict[str, float] = {}
    for kind in ("code", "chat"):
        sampled = [score_pair(target, draft, n, t, head) for n, t in ref[f"{kind}/sampled"]]
        greedy = [score_pair(target, draft, n, t, head) for n, t in ref[f"{kind}/greedy"]]
        for suffix in ("", "_trimmed") if head is not None else ("",):
            alpha = torch.cat([x[f"overlap{suffix}"] for x in sampled]).mean()
            agree = torch.cat([x[f"agree{suffix}"] for x in greedy]).float().mean()
            out[f"alpha_{kind}{suffix}"] = float(alpha)
            out[f"greedy_agreement_{kind}{suffix}"] = float(agree)
        out[f"positions_{kind}"] = float(sum(len(x["overlap"]) for x in sampled))
    out["alpha"] = (out["alpha_code"] + out["alpha_chat"]) / 2
    out["greedy_agreement"] = (out["greedy_agreement_code"] + out["greedy_agreement_chat"]) / 2
    return out


@torch.inference_mode()
def decode_ms(model: Any, prompt: torch.Tensor, steps: int = 48, repeats: int = 3) -> float:
    """Median per-token greedy decode time in ms (batch 1, KV cache) after prompt [1, P]."""
    times = []
    for _ in range(repeats):
        out = model(input_ids=prompt, use_cache=True)
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        began = time.perf_counter()
        for _ in range(steps):
            out = model(input_ids=token, cache=out.cache, use_cache=True)
            token = out.logits[:, -1].argmax(-1, keepdim=True)
        times.append((time.perf_counter() - began) / steps * 1000)
    return statistics.median(times)


def timings(
    target: Any, draft: Any, tokenizer: Any, head: Any, rounds: int = 3
) -> dict[str, float]:
    """Median decode ms/token of target (fp32) and draft (fp32, bf16, trimmed), interleaved; c."""
    prompt = torch.tensor([chat_ids(tokenizer, HELD_OUT_CODE[0], 256)])
    models = {"target": target, "draft_fp32": draft}
    models["draft_bf16"] = copy.deepcopy(draft).to(torch.bfloat16)
    if head is not None:
        models["draft_trimmed_fp32"] = trim_head(draft, head)
    runs: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(rounds):
        for name, model in models.items():
            runs[name].append(decode_ms(model, prompt, repeats=1))
    out = {f"{name}_ms_per_token": statistics.median(v) for name, v in runs.items()}
    for name in list(models)[1:]:
        out[f"c_{name.removeprefix('draft_')}_draft"] = (
            out[f"{name}_ms_per_token"] / out["target_ms_per_token"]
        )
    return out


def load_draft(folder: str | None) -> Any:
    """A draft from an HF folder, or from the student checkpoint when ``folder`` is None."""

    if folder is not None:
        loaded: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        return loaded.eval()
    ckpt = torch.load(student_dir() / "ckpt.pt", weights_only=False)
    model: Any = LlamaForCausalLM(LlamaConfig.from_dict(ckpt["config"]))
    model.load_state_dict(ckpt["model"])
    model.tie_weights()
    return model.eval()


def run_evaluate(folder: str | None, per_kind: int, threads: int) -> dict[str, Any]:
    """Measure the draft in ``folder`` (or the latest checkpoint); write ``eval/results.json``."""
    target, tokenizer = load_target(threads)
    draft = load_draft(folder)
    head = load_head_tokens(folder) if folder and ranking_path(folder).is_file() else None
    ref = build_reference(target, tokenizer, per_kind)
    results: dict[str, Any] = {"draft": folder or "checkpoint", **quality(target, draft, ref, head)}
    results.update(timings(target, draft, tokenizer, head))
    results["threads"] = torch.get_num_threads()
    results["draft_parameters"] = sum(p.numel() for p in draft.parameters())
    write_json_atomic(work_dir() / "eval" / "results.json", results)
    LOG.info("%s", results)
    return results
