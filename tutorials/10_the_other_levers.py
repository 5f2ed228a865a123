# %% [markdown]
# # 10. Speculation beside the other levers: quantization and a smaller model
#
# **The question.** Speculative decoding is one way to make a model cheaper to run. Teams also
# quantize the weights (bf16, int8), and they replace the model with a smaller one. The first
# two change *how* the model computes, the last changes *which* model answers, and speculation
# changes neither: it only changes how quickly the target's tokens arrive. What does each lever
# cost in fidelity to the model you chose, what does it buy in speed, and what happens when they
# are combined?
#
# To compare them we need one ruler for "how far from the target", applied the same way to every
# configuration. We build it first (two distances, on the bundled fp32 target as the reference),
# use it on a quantized target, on the draft model alone and on speculation, and then read the
# frontier that `specviz bench levers` measured on the same pair: speed against distance.

# %%
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")

import json
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from transformers.utils import logging as hf_logging

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.models.chat import prompt_ids
from specviz.models.loading import load_pair
from specviz.quant import (
    greedy_agreement,
    load_at_precision,
    mean_total_variation,
    next_token_probs,
    total_variation,
    weight_bytes,
)
from specviz.results.lever_tables import lever_rows

torch.set_num_threads(1)  # a second thread on a shared 2-core machine mostly adds noise
hf_logging.disable_progress_bar()
t_start = time.perf_counter()
pair = load_pair()
target, draft, tokenizer = pair.target, pair.draft, pair.tokenizer
bf16 = load_at_precision("bundled", "bf16")
int8 = load_at_precision("bundled", "int8-weight")
for name, model in (("fp32", target), ("bf16", bf16), ("int8-weight", int8), ("draft", draft)):
    print(f"{name:12s} {weight_bytes(model) / 1e6:6.0f} MB of weights")

# %% [markdown]
# Halving the bytes of every weight (bf16) halves the model; int8 stores one byte per weight of
# every linear layer, plus a scale per output row. It does not reach a quarter of fp32 here:
# the input embedding is a lookup table, not a linear layer, and stays in fp32. The draft is a
# different, much smaller model (3 layers against 30).
#
# ## 1. Two ways to measure "how far from the target"
#
# **Greedy agreement.** Decode the prompt greedily ($T = 0$) with the reference and with the
# configuration, and count the positions where their tokens are equal; note where they first
# differ. It is what a user sees: does the answer change, and how soon? It is also coarse: once
# the two differ, each continues from a different prefix, so the later positions compare
# different questions.
#
# **Total variation along the reference's own text.** Let the reference sample a continuation
# $x_1, \dots, x_n$ at $T = 1$. At every position $i$ both models see the *same* prefix
# $x_{<i}$, and we compare their next-token laws $p$ (reference) and $q$ (configuration) with
#
# $$\mathrm{TV}(p, q) = \tfrac12 \sum_x |p(x) - q(x)| = \max_{A} |p(A) - q(A)|,$$
#
# the largest difference in probability the two give to any set $A$ of tokens: 0 for the same
# law, 1 for laws with no token in common. Averaging over the positions gives one number per
# configuration that does not depend on where a greedy decode happened to diverge.
#
# A hand-built check first: two laws over three tokens that share half their mass.

# %%
p = torch.tensor([0.5, 0.5, 0.0])
q = torch.tensor([0.0, 0.5, 0.5])
print("TV(p, q) =", float(total_variation(p, q)))
print("TV(p, p) =", float(total_variation(p, p)))

# %% [markdown]
# ## 2. Every lever against the fp32 target
#
# One code prompt, through the chat template as `specviz` sends it. The reference writes one
# sampled continuation; each model scores it, and we average TV over its positions.

# %%
NEW_TOKENS = 32
prompt = prompt_ids(tokenizer, "Write a Python function that reverses a string.")
sampled = autoregressive_generate(
    target, tokenizer, prompt, sampling=SamplingConfig(temperature=1.0, seed=0),
    max_new_tokens=NEW_TOKENS, stop=(),
).tokens  # fmt: skip
ids = [*prompt, *sampled]
tv = {
    name: mean_total_variation(target, model, ids, len(prompt))
    for name, model in (("fp32", target), ("bf16", bf16), ("int8-weight", int8), ("draft", draft))
}
for name, value in tv.items():
    print(f"mean TV from the fp32 target: {name:12s} {value:.3f}")

# %% [markdown]
# The fp32 target against itself is exactly 0: the ruler reads zero where it must. bf16 and int8
# move each next-token law a little (the rounding of every weight adds up over 30 layers), and
# the draft, a different model, moves it a lot: it is right about the easy tokens and far on
# the rest, which is exactly why it is a useful *drafter* and a poor replacement.
#
# Where along the continuation does a quantized target differ most? Per position:

# %%
p_ref = next_token_probs(target, ids, len(prompt))
per_position = {
    name: total_variation(p_ref, next_token_probs(model, ids, len(prompt))).numpy()
    for name, model in (("bf16", bf16), ("int8-weight", int8), ("draft", draft))
}
fig, ax = plt.subplots(figsize=(8, 3))
for name, values in per_position.items():
    ax.plot(values, marker="o", markersize=3, label=name)
ax.set_xlabel("position in the continuation")
ax.set_ylabel("TV from the fp32 target")
ax.set_yscale("log")
ax.legend()
ax.set_title("Per-token distance along the fp32 target's own sample")
plt.show()

# %% [markdown]
# Most positions are near-certain for every model (a closing bracket, a keyword), and there all
# of them agree; the distance lives in the few positions where the target itself hesitates.
#
# ## 3. Speculation moves nothing
#
# Speculative decoding's output law *is* its verifying target's (notebooks 2 to 4, and the
# statistical suite behind `specviz verify`): the draft only proposes, and every token passes the
# target's test. So its distance from the fp32 target is its verifying target's distance, whatever
# the draft. At $T = 0$ that is visible token by token: speculation with the fp32 target writes the
# fp32 target's greedy tokens, and speculation with the bf16 target writes the bf16 target's.

# %%
greedy = SamplingConfig(temperature=0.0)
speculation = SpeculationConfig(gamma=3, max_new_tokens=NEW_TOKENS)


def plain(model):
    return autoregressive_generate(
        model, tokenizer, prompt, sampling=greedy, max_new_tokens=NEW_TOKENS, stop=()
    ).tokens


def speculative(model):
    return speculative_generate(
        model, draft, tokenizer, prompt, sampling=greedy, speculation=speculation, stop=()
    ).tokens


ref_greedy, bf16_greedy = plain(target), plain(bf16)
for name, tokens in (
    ("bf16 target alone", bf16_greedy),
    ("draft alone", plain(draft)),
    ("speculation, fp32 target", speculative(target)),
    ("speculation, bf16 target", speculative(bf16)),
):
    a = greedy_agreement(ref_greedy, tokens)
    print(f"{name:26s} agreement with fp32 {a.rate:4.0%}, first divergence {a.first_divergence}")
print("speculation on bf16 == bf16 alone:", speculative(bf16) == bf16_greedy)

# %% [markdown]
# ## 4. Reading the frontier
#
# `specviz bench levers` (the `levers` part of `benchmarks/cpu_bench.sh`) runs every
# configuration on the same code, JSON and prose requests: the target in fp32, bf16 and int8
# (torchao, weight-only and with dynamic int8 activations), the draft alone, and speculation with
# each target and with an int8 draft. It times each one and measures both distances as above.
# We load its saved result and plot each configuration's speedup over the fp32 target against
# its mean TV: up and to the left is better.

# %%
RESULTS = Path("..", "benchmarks", "results")  # the saved bench results (cwd: tutorials/)
saved = json.loads((RESULTS / "levers.json").read_text(encoding="utf-8"))
rows = [r for r in lever_rows(saved["levers"], saved["meta"]["price_per_hour"])]
overall = [r for r in rows if r["workload"] == rows[-1]["workload"]]
colours = {"target": "#999999", "hf": "#009E73", "draft": "#E69F00", "spec": "#0072B2"}
fig, ax = plt.subplots(figsize=(8, 4.5))
for r in overall:
    kind = r["lever"].split("@")[0]
    ax.scatter(r["tv"] + 1e-3, r["speedup"], color=colours[kind], s=50)
    ax.annotate(r["lever"], (r["tv"] + 1e-3, r["speedup"]), fontsize=8, xytext=(4, 4),
                textcoords="offset points")  # fmt: skip
ax.axhline(1.0, color="#999999", linestyle=":")
ax.set_xscale("log")
ax.set_xlabel("mean TV from the fp32 target (+0.001, log scale)")
ax.set_ylabel("speedup over the fp32 target")
ax.set_title("Speed against distance (grey: target alone, green: transformers, orange: draft "
             "alone, blue: speculative)", fontsize=9)  # fmt: skip
plt.show()
for r in overall:
    print(f"{r['lever']:24s} speedup {r['speedup']:5.2f}  TV {r['tv']:.3f}  "
          f"greedy agreement {r['agreement']:4.0%}  weights {r['memory_mb']:5.0f} MB")  # fmt: skip

# %% [markdown]
# How to read it:
#
# - **Speculation sits on the vertical axis.** Its TV is its target's, so `spec@fp32/…` is at 0
#   whatever the draft, and the speed it adds is free in fidelity. An int8 *draft* costs nothing
#   in fidelity either; it only changes α and the draft's cost, so it moves the point up or down,
#   never sideways.
# - **Quantization moves right.** bf16 and int8 each pay some distance. Whether they also move
#   *up* depends on the machine's kernels: bf16 halves the bytes a pass reads, and this CPU has
#   bf16 arithmetic (AVX-512 BF16), so it also runs faster; torchao's int8 paths on a CPU, without
#   `torch.compile`, dequantize the weights on every call and run slower than fp32 while holding
#   half the bytes. That is a property of the kernels, which the measurement reports, not of int8
#   itself.
# - **The small model is far right.** It is the fastest point and the farthest: it answers as a
#   different model.
# - **Combining multiplies.** Speculation on a quantized target costs exactly the quantized
#   target's distance, and its speed is roughly the product of the two gains: the target passes
#   are cheaper by the quantization factor, and speculation then saves passes. Check it on the
#   saved numbers:

# %%
for workload in dict.fromkeys(r["workload"] for r in rows):
    by = {r["lever"]: r for r in rows if r["workload"] == workload}
    spec_alone = by["spec@fp32/fp32"]["speedup"]
    for q in ("bf16", "int8-weight", "int8-dynamic"):
        alone = by.get(f"target@{q}")
        together = next((r for name, r in by.items() if name.startswith(f"spec@{q}/")), None)
        if alone is None or together is None:
            continue
        product = alone["speedup"] * spec_alone
        print(
            f"{workload:6s} {q:12s} quantized {alone['speedup']:.2f} x speculative "
            f"{spec_alone:.2f} = {product:.2f}; together {together['speedup']:.2f}, "
            f"TV {alone['tv']:.3f} = {together['tv']:.3f}"
        )
print(f"notebook ran in {time.perf_counter() - t_start:.0f} s")

# %% [markdown]
# The product is an estimate, not an identity: a cheaper target also changes the cost ratio
# $c = t_{\text{draft}} / t_{\text{target}}$ of notebook 5 (the same draft now costs *more*
# relative to a faster target), and quantization changes the target's law, so α moves too.
#
# ## Exercises
#
# ### Exercise 1
#
# Measure TV between the bf16 target and the int8 target along the same continuation. Is it
# smaller than either one's distance from fp32? What does that say about the direction in
# which each rounding moves the law?

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# print(mean_total_variation(bf16, int8, ids, len(prompt)))
# ```
#
# TV is a distance, so the triangle inequality bounds it by the sum of the two distances from
# fp32. On this prompt it comes out larger than either of them: the two roundings are unrelated
# perturbations (bf16 rounds every weight and activation to 8 bits of mantissa, int8 rounds each
# weight row to 256 levels of its own scale), so they push the law in different directions
# instead of along one line away from fp32, and nothing cancels.
# </details>

# %% [markdown]
# ### Exercise 2
#
# A draft's quality shows up as α, not as distance. Compute the teacher-forced α of the draft
# against the fp32 target along `ids` ($\alpha = \sum_x \min(p, q)$ per position, averaged) and
# compare it with 1 − TV(target, draft). Why are they the same number?

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# q_draft = next_token_probs(draft, ids, len(prompt))
# alpha = torch.minimum(p_ref, q_draft).sum(-1).mean()
# print(float(alpha), 1 - tv["draft"])
# ```
#
# For two laws, $\sum_x \min(p, q) = 1 - \tfrac12 \sum_x |p - q|$: wherever $p > q$ the minimum
# is $q$ and the gap is $p - q$, and the two sides each carry half of $\sum |p - q|$. So the
# acceptance rate of a drafter is exactly one minus its TV from the target. A draft far from the
# target (large TV) is a poor drafter, and speculation still returns the target's law: the
# distance is paid in speed, never in output.
# </details>
