# %% [markdown]
# # 1. Why generation is slow
#
# **The question.** A language model reads a whole prompt in one forward pass, but writes its
# answer one forward pass per token. Both run the very same network, and on most hardware a
# pass over many tokens costs little more than a pass over one. So why is writing so slow, and
# what would it take to write faster *without changing a single output token*?
#
# This notebook measures the answer on the bundled model pair (the SmolLM2-135M-Instruct target
# and our 3-layer distilled draft). Every number printed below is computed by the cells that
# print it, on the machine that runs the notebook. A busy machine gives noisier numbers; since
# other processes can only ever *add* time to a measurement, we report the fastest of a few
# repeats.

# %%
import warnings

# tqdm warns once on import when ipywidgets is missing; the notebook has no progress bars
warnings.filterwarnings("ignore", message="IProgress not found")

import statistics
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from transformers.utils import logging as hf_logging

from specviz.api import autoregressive_generate
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig
from specviz.core.events import Sampled
from specviz.fast.lean import draft_cache, lean_target_cache
from specviz.gamma import theory
from specviz.models.loading import load_pair

hf_logging.disable_progress_bar()  # no weight-loading bars in the notebook
pair = load_pair()  # bundled target + draft, float32 on the CPU
target, draft, tokenizer = pair.target, pair.draft, pair.tokenizer


def n_params(model):
    return sum(p.numel() for p in model.parameters())


print(
    f"target: {n_params(target) / 1e6:.1f} M parameters, {target.config.num_hidden_layers} layers"
)
print(f"draft:  {n_params(draft) / 1e6:.1f} M parameters, {draft.config.num_hidden_layers} layers")
print(f"torch uses {torch.get_num_threads()} CPU threads")

# %% [markdown]
# ## Autoregressive decoding is a chain
#
# A causal language model factorises the probability of a sequence left to right,
#
# $$p(x_1, \dots, x_n \mid \text{prompt}) = \prod_{t=1}^{n} p(x_t \mid \text{prompt}, x_{<t}),$$
#
# and one forward pass gives the next-token distribution $p(\cdot \mid x_{<t})$ at *every*
# position it is shown. Reading a prompt is therefore one big parallel pass. Writing is not:
# we cannot compute $p(x_{t+1} \mid x_{\le t})$ before we have drawn $x_t$, so $n$ new tokens
# cost $n$ forward passes, one after the other.
#
# The **KV cache** makes each of those passes small: the keys and values of attention for
# every token already seen are stored, so step $t$ only feeds the one new token through the
# network. But "small" is not "cheap": every step still multiplies that one token's
# activations by *every weight matrix of the model*.
#
# Let us time plain decoding. `autoregressive_generate` logs one `Sampled` event per token,
# with the seconds its forward pass took.

# %%
prompt = "The three most important ideas in computer science are"
plain = autoregressive_generate(
    target,
    tokenizer,
    prompt,
    sampling=SamplingConfig(temperature=0.0, seed=0),
    max_new_tokens=8,
)
step_ms = [1000 * e.target_seconds for e in plain.events if isinstance(e, Sampled)]
print(repr(plain.text))
print("per-token forward passes (ms):", " ".join(f"{t:.0f}" for t in step_ms))
print(f"median {statistics.median(step_ms):.0f} ms per generated token")

# %% [markdown]
# ## One forward over 1, 2, 4, ... tokens
#
# Now the key experiment. We fill the target's KV cache with a prompt, then time one forward
# pass that feeds $k$ new tokens at once, for $k = 1, 2, 4, 8, 16$, rolling the cache back with
# `KVCache.crop` after each pass so every measurement starts from the same state. The sizes are
# interleaved within each repeat, so a burst of load from another process hits all of them
# alike, and we keep the fastest of four repeats. The draft runs the way the drafter runs it:
# through `specviz.fast.lean`'s forward (`draft_cache`), explained at the end of the next section.

# %%
SIZES = [1, 2, 4, 8, 16]


def time_forwards(model, prompt_ids, sizes, repeats=4, make_cache=KVCache):
    """Fastest seconds of one cached forward over k new tokens, for each k in sizes."""
    cache = make_cache(model)
    cache.forward(prompt_ids)
    base = len(cache)
    new = torch.randint(0, 10_000, (max(sizes),), generator=torch.Generator().manual_seed(0))
    for k in sizes:  # warm-up: first calls allocate buffers
        cache.forward(new[:k])
        cache.crop(base)
    times = {k: [] for k in sizes}
    for _ in range(repeats):
        for k in sizes:
            start = time.perf_counter()
            cache.forward(new[:k])
            times[k].append(time.perf_counter() - start)
            cache.crop(base)
    return {k: min(ts) for k, ts in times.items()}


prompt_ids = torch.tensor(tokenizer(prompt)["input_ids"])
t_target = time_forwards(target, prompt_ids, SIZES)
t_draft = time_forwards(draft, prompt_ids, SIZES, make_cache=draft_cache)
print(" k   target ms   per token   draft ms")
for k in SIZES:
    print(
        f"{k:2d}   {1000 * t_target[k]:8.1f}   {1000 * t_target[k] / k:8.1f}   "
        f"{1000 * t_draft[k]:7.1f}"
    )

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
ks = SIZES
ax1.plot(ks, [1000 * t_target[k] for k in ks], "o-", label="target (30 layers)")
ax1.plot(ks, [1000 * t_draft[k] for k in ks], "s-", label="draft (3 layers)")
ax1.set_xscale("log", base=2)
ax1.set_xticks(ks, [str(k) for k in ks])
ax1.set_xlabel("new tokens fed in one forward pass (k)")
ax1.set_ylabel("ms per forward pass")
ax1.set_ylim(bottom=0)
ax1.set_title("one pass over k tokens")
ax1.legend()
ax2.plot(ks, [1000 * t_target[k] / k for k in ks], "o-", label="target")
ax2.plot(ks, [1000 * t_draft[k] / k for k in ks], "s-", label="draft")
ax2.set_xscale("log", base=2)
ax2.set_yscale("log")
ax2.set_xticks(ks, [str(k) for k in ks])
ax2.set_xlabel("k")
ax2.set_ylabel("ms per token")
ax2.set_title("cost per token falls as k grows")
ax2.legend()
fig.tight_layout()
plt.show()

ratio16 = t_target[16] / t_target[1]
print(
    f"target: one pass over 16 tokens costs {ratio16:.1f}x one pass over 1 token, "
    f"i.e. {16 / ratio16:.1f}x more tokens per second of compute"
)

# %% [markdown]
# Read the left panel from left to right. Feeding 16 tokens does 16 times the arithmetic of
# feeding one, yet the pass costs only a small multiple of the single-token pass (the ratio is
# printed under the figure). On a GPU the curve is almost flat up to dozens of tokens; on a CPU,
# which has far fewer floating-point operations per byte of memory bandwidth, it starts to climb
# sooner, and on a busy CPU the small sizes are noisier. Either way the per-token cost on the
# right falls steeply with $k$. What matters for speculation is the cost of a pass over
# $\gamma + 1$ tokens relative to one, the $v$ computed at the end of this notebook.
#
# ## The matrix kernel matters: pre-packed weights
#
# `load_pair` loaded these models with `pack=True`: on a CPU, every `nn.Linear` runs on a
# weight re-laid-out once for oneDNN (`specviz/fast/packed.py`; it is what `torch.compile`'s CPU
# freezing does). PyTorch's default float32 matrix product goes through a general GEMM that, for
# 2 to 8 rows, costs nearly as much per extra row as for the first: it re-packs the weight
# on every call, so the "free" extra tokens are not free. Let us time the same passes on an
# unpacked copy of the target, interleaved with the packed one.

# %%
unpacked = load_pair(draft=None, pack=False).target
both = {"packed": target, "unpacked": unpacked}
t_both = {name: {k: [] for k in SIZES} for name in both}
for _ in range(2):  # alternate the two models so that machine load hits both alike
    for name, model in both.items():
        for k, seconds in time_forwards(model, prompt_ids, SIZES, repeats=2).items():
            t_both[name][k].append(seconds)
fastest = {name: {k: 1000 * min(v) for k, v in t.items()} for name, t in t_both.items()}
print(" k   unpacked ms   packed ms")
for k in SIZES:
    print(f"{k:2d}   {fastest['unpacked'][k]:9.1f}   {fastest['packed'][k]:9.1f}")
for name, ms in fastest.items():
    print(f"{name:>8}: a 4-token pass costs {ms[4] / ms[1]:.2f}x a 1-token pass")
del unpacked

# %% [markdown]
# The products agree to about $10^{-4}$ in the logits (the same sums in a different order);
# only the speed changes, and mostly for the small widths that speculative decoding verifies.
# Plain decoding gets faster too, so every speedup measured in this project is against a plain
# baseline that uses the same packed weights. On a GPU, `pack_linears` does nothing.
#
# ## A tiny model's step is overhead: the lean draft forward
#
# The draft has 3 layers of width 160: about a million multiply-adds per layer, microseconds of
# arithmetic. Yet a step through transformers' `model(...)` takes milliseconds, spent in Python and
# in dozens of small framework calls (cache objects, masks, hooks, dispatch). For the target that
# overhead hides behind 30 layers of weight reads; for the draft it *is* the cost, and the draft's
# cost ratio $c$ is what speculative decoding pays per proposed token. `specviz/fast/lean.py` writes
# the same Llama forward out in a few tensor calls (q/k/v and gate/up fused, keys and values in
# preallocated tensors, rollback by moving a pointer). The registry's draft-model drafters use it
# for small Llama-family drafts; the logits agree with transformers' (`tests/fast/test_lean.py`),
# and exactness would not depend on them anyway: the verifier only needs the q the drafter actually
# sampled from.

# %%
t_hf_draft = time_forwards(draft, prompt_ids, [1], repeats=8)[1]
t_lean_draft = time_forwards(draft, prompt_ids, [1], repeats=8, make_cache=draft_cache)[1]
print(
    f"draft step: transformers' forward {t_hf_draft * 1e3:.2f} ms, "
    f"lean forward {t_lean_draft * 1e3:.2f} ms ({t_hf_draft / t_lean_draft:.1f}x)"
)

# %% [markdown]
# The target pays the same overhead, a smaller share of its step, and a pass over several
# tokens adds a little more of it (the attention mask, more elements through each small call).
# `lean_target_cache` runs the target through the same lean forward, its wide q/k/v and gate/up
# products fused and packed for oneDNN. Its logits are transformers' here too; what changes is
# the cost of a step and the ratio of a 4-token pass (γ = 3 verified) to a 1-token step. We
# alternate the two forwards so that machine load hits both alike.

# %%
forwards = {"transformers": KVCache, "specviz.fast.lean": lean_target_cache}
t_fw = {name: {1: [], 4: []} for name in forwards}
for _ in range(2):
    for name, make in forwards.items():
        for k, seconds in time_forwards(target, prompt_ids, [1, 4], 3, make).items():
            t_fw[name][k].append(seconds)
for name, t in t_fw.items():
    one, four = 1e3 * min(t[1]), 1e3 * min(t[4])  # ms
    print(f"{name:>12}: 1 token {one:.1f} ms, 4 tokens {four:.1f} ms, r = {four / one:.2f}")

# %% [markdown]
# A cheaper step makes plain decoding faster; a smaller ratio makes speculation pay more. The
# benchmark keeps the target on transformers' forward unless asked (`specviz bench
# --lean-target`, which then runs plain and speculative decoding on it alike), and
# `benchmarks/RESULTS.md` measures both: on the Intel machine r falls from about 1.11 to 1.07,
# and the best code speedup rises from 1.69× to 1.76×.

# %% [markdown]
# ## Memory bandwidth versus compute
#
# Why is one token so expensive? Count what a forward pass over $k$ tokens has to do, for a
# model with $N$ parameters stored in $b$ bytes each:
#
# * **move** every weight from memory to the arithmetic units once: about $N b$ bytes,
#   whatever $k$ is;
# * **compute** about $2 N k$ floating-point operations (one multiply and one add per weight
#   per token; attention over a short context adds little).
#
# The ratio, $2Nk / (Nb) = 2k/b$ FLOP per byte, is the pass's **arithmetic intensity**. A
# machine can do $F$ FLOP/s and move $B$ bytes/s; when the intensity is below its balance
# point $F/B$, the arithmetic units sit idle waiting for weights, and the pass takes about
# $Nb/B$ seconds no matter how small $k$ is. With float32 weights ($b = 4$) and $k = 1$ the
# intensity is $0.5$ FLOP/byte, far below any modern processor's balance point.
#
# Let us put numbers on it: the effective bandwidth the model achieves (weight bytes per
# second of a pass) and the FLOP rate, from the measurements above, against this machine's
# raw copy bandwidth and matmul throughput, measured right here.

# %%
weight_bytes = sum(p.numel() * p.element_size() for p in target.parameters())
N = n_params(target)


def machine_balance(repeats=3):
    """Measured copy bandwidth (bytes/s) and matmul throughput (FLOP/s) of this machine."""
    a = torch.ones(64 * 2**20)  # 256 MiB of float32: far larger than any CPU cache
    b = torch.empty_like(a)
    m = torch.randn(1024, 1024, generator=torch.Generator().manual_seed(0))
    copies, matmuls = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        b.copy_(a)
        copies.append(time.perf_counter() - start)
        start = time.perf_counter()
        m @ m
        matmuls.append(time.perf_counter() - start)
    bandwidth = 2 * a.numel() * a.element_size() / min(copies)  # read + write
    flops = 2 * 1024**3 / min(matmuls)
    return bandwidth, flops


bandwidth, flops = machine_balance()
print(f"weights: {weight_bytes / 1e6:.0f} MB ({N / 1e6:.0f} M float32 parameters)")
print(
    f"machine: copy bandwidth ~{bandwidth / 1e9:.1f} GB/s, matmul ~{flops / 1e9:.0f} GFLOP/s, "
    f"balance ~{flops / bandwidth:.0f} FLOP/byte"
)
print()
print(" k   intensity   weight GB/s   GFLOP/s")
for k in SIZES:
    print(
        f"{k:2d}   {2 * k / 4:6.1f}      {weight_bytes / t_target[k] / 1e9:8.1f}   "
        f"{2 * N * k / t_target[k] / 1e9:8.1f}"
    )
print()
print(
    f"k = 1: weights streamed at {weight_bytes / t_target[1] / bandwidth:.0%} of the copy "
    f"bandwidth, arithmetic at {2 * N / t_target[1] / flops:.0%} of the matmul rate"
)
print(
    f"streaming the weights once takes at least {1000 * weight_bytes / bandwidth:.0f} ms; "
    f"the k = 1 pass took {1000 * t_target[1]:.0f} ms"
)

# %% [markdown]
# Compare the $k = 1$ row with the machine line. A single-token pass does so little arithmetic per
# byte that its FLOP rate is a small fraction of what the matmul achieves. It can never be faster
# than the time it takes to stream its weights once ($Nb/B$, printed last), and for a model this
# small on a CPU, per-layer overheads (dispatching hundreds of small operations, synchronising
# threads) that do not grow with $k$ either come on top. As $k$ grows the bytes stay the same and
# the FLOP/s climb: the extra tokens ride along almost for free until the intensity reaches the
# balance point. This machine's balance point is printed above; a CPU's is typically a few to a
# few tens of FLOP per byte, so the curve bends after a handful of tokens; a GPU's is in the
# hundreds.
#
# Published datasheet figures make the same point for a data-centre GPU: an H100 SXM is rated
# at about 989 TFLOP/s of dense bf16 and 3.35 TB/s of memory bandwidth, a balance of about
# 295 FLOP/byte, while decoding one token at a time in bf16 has intensity about 1.
#
# ## What speculative decoding spends
#
# So a target forward pass has spare arithmetic: it could score several tokens for roughly
# the price of one, *if only we knew which tokens to score*. Speculative decoding gets them
# from a cheap guesser:
#
# 1. a small **draft** model proposes $\gamma$ tokens, one at a time (cheap: its passes cost a
#    fraction $c$ of the target's);
# 2. the **target** scores all $\gamma$ proposals plus one more position in **one** forward
#    over $\gamma + 1$ tokens — the cheap direction of the curve above;
# 3. an acceptance rule (notebook 2) keeps a prefix of the proposals and fixes the first
#    mistake, so the output is distributed exactly as the target's own samples.
#
# If each proposal survives with probability $\alpha$, a round emits on average
# $(1 - \alpha^{\gamma+1}) / (1 - \alpha)$ tokens (`theory.expected_tokens_per_round`). The
# round costs $\gamma c + v$ target-step equivalents, where $v = t(\gamma+1)/t(1)$ is the price
# of the wide verification pass. Leviathan et al. assume $v = 1$ (`theory.speedup_bound`); we
# can plug in the $v$ we just measured.

# %%
gamma = 4
c = t_draft[1] / t_target[1]
v = float(np.interp(gamma + 1, SIZES, [t_target[k] for k in SIZES])) / t_target[1]
print(f"measured: draft step c = {c:.3f} target steps; verifying {gamma + 1} tokens v = {v:.2f}")

alphas = [i / 100 for i in range(0, 100, 2)]
ideal = [theory.speedup_bound(a, gamma, c) for a in alphas]
measured = [theory.expected_tokens_per_round(a, gamma) / (gamma * c + v) for a in alphas]
fig, ax = plt.subplots(figsize=(6, 3.8))
ax.plot(alphas, ideal, label="Leviathan bound (verification costs 1 step)")
ax.plot(alphas, measured, label=f"with the measured verification cost v = {v:.2f}")
ax.axhline(1.0, color="grey", lw=0.8, ls="--")
ax.set_xlabel("acceptance probability α")
ax.set_ylabel("expected speedup over plain decoding")
ax.set_title(f"γ = {gamma}, c = {c:.3f} (measured)")
ax.legend()
fig.tight_layout()
plt.show()
breakeven = next((a for a, s in zip(alphas, measured, strict=True) if s > 1), None)
if breakeven is None:
    print("with these costs, speculation would not pay at any α below 1")
else:
    print(f"with these costs, speculation pays once α exceeds about {breakeven:.2f}")

# %% [markdown]
# That is the whole trade: speculative decoding spends the arithmetic that memory-bound
# decoding leaves idle, plus a few cheap draft passes, to buy several tokens per expensive
# target pass. It wins when the draft is cheap ($c$ small), the wide pass is nearly free
# ($v \approx 1$) and the draft agrees with the target often ($\alpha$ large). Notebook 2
# derives the acceptance rule that keeps the output exact; notebook 5 asks when the trade
# pays on real workloads.
#
# ### Exercise 1
#
# Redo the intensity argument for bfloat16 weights ($b = 2$). How many tokens $k$ must one pass
# feed before an H100 (989 TFLOP/s, 3.35 TB/s, the datasheet figures above) stops being
# memory-bound?
#
# <details><summary>Solution</summary>
#
# The intensity is $2Nk / (2N) = k$ FLOP per byte; the balance point is
# $989 \times 10^{12} / 3.35 \times 10^{12} \approx 295$ FLOP/byte. So until $k \approx 300$
# tokens per pass (summed over the batch), the pass is limited by reading the weights, and
# verifying $\gamma + 1 = 5$ tokens costs essentially the same as generating one.
#
# ```python
# print(989e12 / 3.35e12)  # ~295 tokens per pass at b = 2 bytes
# ```
# </details>
#
# ### Exercise 2
#
# The KV cache is memory too, and it is read at every step. Compute from the target's config
# how many bytes of keys and values one token adds to the cache, and how large the cache is at
# 2048 tokens compared with the weights.
#
# <details><summary>Solution</summary>
#
# Each layer stores a key and a value vector per key-value head:
# $2 \times \text{layers} \times \text{kv heads} \times \text{head dim} \times b$ bytes per token.
#
# ```python
# cfg = target.config
# head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
# per_token = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim * 4  # float32
# print(per_token, "bytes per token;", 2048 * per_token / weight_bytes, "x the weights at 2048")
# ```
#
# For SmolLM2-135M (30 layers, 3 KV heads of size 64) that is 46 KB per token, about 94 MB at
# 2048 tokens: about a sixth of the weights. For long contexts and big batches the cache, not the
# weights, becomes the traffic to worry about.
# </details>
#
# ### Exercise 3
#
# Use `time_forwards` on the draft to find its own cost ratio $c$ at $k = 1$ and the largest
# $\gamma$ for which $\gamma c < 1$ (drafting costs less than one target step). Then ask
# `theory.optimal_gamma` which $\gamma$ maximises the bound at $\alpha = 0.7$.
#
# <details><summary>Solution</summary>
#
# ```python
# c = t_draft[1] / t_target[1]
# print("c =", c, "; gamma with gamma * c < 1:", int((1 - 1e-9) // c))
# print("optimal gamma at alpha 0.7:", theory.optimal_gamma(0.7, c))
# ```
#
# The cheaper the draft, the longer the drafts worth making; `optimal_gamma` balances the
# falling chance $\alpha^\gamma$ that a long draft survives against its cost $\gamma c$.
# </details>
