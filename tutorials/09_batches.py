# %% [markdown]
# # 9. Batches: does speculation still pay when many requests share the target?
#
# **The question.** Every notebook so far decoded one request at a time. A server does not: it
# decodes many requests together, one forward pass for all of them, because a pass over B rows
# costs far less than B passes over one. Speculative decoding lives off the same spare capacity
# (notebooks 1 and 5): verifying $\gamma + 1$ tokens costs about as much as scoring one. So what
# happens when both want it? Does speculation still speed up a batch, by how much, with which
# $\gamma$, and does batching change *what* each request writes?
#
# We first build a cost model of a batched step from the line the benchmark measured on a CPU,
# put it into notebook 5's speedup formula, and read off how the gain and the best $\gamma$
# shrink as the batch grows. Then we decode a real batch with `specviz.batch`, on the toy
# Markov pair of notebook 4 so that it runs in a second, and check two things: every row keeps
# its own number of drafts each round, and every row writes exactly what that prompt decoded
# alone writes.

# %%
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")

import time

import matplotlib.pyplot as plt
import numpy as np
import torch

from specviz import (
    SamplingConfig,
    SpeculationConfig,
    speculative_generate,
    speculative_generate_batch,
)
from specviz.core.events import Finished, RoundSummary
from specviz.gamma import theory
from specviz.stats.toy import random_pair

torch.set_num_threads(1)  # the toy models do many tiny passes: a thread pool only adds noise
t_start = time.perf_counter()

# %% [markdown]
# ## 1. Why batching helps plain decoding
#
# One plain decode step of a B-row batch runs every weight matrix of the target over B token
# vectors. Reading the weights costs the same whatever B is; the arithmetic grows with B. While
# the reading dominates, the step is **weight-bound**, and its time is close to a line
#
# $$t(n) = a + b\,n,$$
#
# with a large fixed cost $a$ (reading the weights, the Python around the pass) and a small cost
# $b$ per token vector fed through. `specviz bench` times one plain decode step of the bundled
# target at several batch sizes and fits this line; on the 2-core CPU of
# `benchmarks/RESULTS.md` (section *Batch size*) it measured $a \approx 41$ ms and
# $b \approx 1.45$ ms per row. The two parts are equal at $a / b \approx 28$ rows: below that an
# extra row costs a small fraction of the first one; above it the step grows nearly in proportion
# to the rows, and batching stops being a bargain.

# %%
A_SECONDS, B_SECONDS = 41e-3, 1.45e-3  # the benchmark's fitted line (benchmarks/RESULTS.md)


def t_target(n):
    """Seconds of one target pass over n token vectors (rows, or drafts of several rows)."""
    return A_SECONDS + B_SECONDS * n


print(f"weight-bound up to about {A_SECONDS / B_SECONDS:.0f} token vectors a pass")
rows = np.array([1, 2, 4, 8, 16, 32, 64, 128])
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
ax1.plot(rows, t_target(rows) * 1e3, "o-", label="t(B) = a + bB")
ax1.plot(rows, rows * t_target(1) * 1e3, ":", color="grey", label="B separate 1-row steps")
ax1.set_ylim(0, 1.2 * t_target(rows[-1]) * 1e3)
ax1.set_ylabel("ms per step")
ax1.set_title("One plain step of a B-row batch")
ax2.plot(rows, t_target(rows) / rows * 1e3, "s-")
ax2.set_ylabel("ms per generated token")
ax2.set_title("Cost per token: falls until the step turns arithmetic-bound")
for ax in (ax1, ax2):
    ax.set_xscale("log", base=2)
    ax.set_xticks(rows, [str(b) for b in rows])
    ax.axvline(A_SECONDS / B_SECONDS, color="black", lw=0.8, ls="--")
    ax.set_xlabel("rows B (dashed: a / b)")
ax1.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 2. Why speculation's gain shrinks with the batch
#
# A speculative **batch round** drafts $\gamma$ tokens for every row (γ draft steps, each over
# the B rows), then runs *one* target pass over every row's last token and its drafts:
# $B(\gamma + 1)$ token vectors. Each row then keeps its own drafts, on average
# $E(\alpha, \gamma) = (1 - \alpha^{\gamma+1}) / (1 - \alpha)$ tokens a round (notebook 5).
# Plain decoding writes one token per row per step of $t(B)$. So the speedup of the batch is
#
# $$S(B) = \frac{E(\alpha, \gamma)\; t(B)}
# {\gamma\, t_{\text{draft}}(B) + t\big(B(\gamma + 1)\big)}.$$
#
# At $B = 1$ this is notebook 5's refined $S' = E / (\gamma c + r)$ with
# $r = t(\gamma + 1) / t(1)$. The trouble is the verification pass: it feeds $B(\gamma + 1)$ token
# vectors, so it leaves the weight-bound region once $B(\gamma + 1) \approx a / b \approx 28$, at
# $B \approx 28 / (\gamma + 1)$ rows, long before a plain step of $B$ rows does. Past that point
# each rejected draft costs real arithmetic. For very large $B$ both times are nearly $b \times$
# (token vectors) and $S \to E / (\gamma (1 + c) + 1) < 1$ (exercise 2): speculation *loses*.
#
# For the draft we assume a line of the same shape, $c$ times the target's,
# $t_{\text{draft}}(n) = c\, t(n)$, with the trimmed draft's measured batch-1 cost ratio
# $c \approx 0.035$ (`benchmarks/RESULTS.md`, section *Drafters*). That is an assumption about
# the draft at larger batches, not a measurement; the conclusion below hardly depends on it,
# because the target's verification pass dominates. The cell tabulates $S(B)$ at
# $\alpha = 0.7$ for a few $\gamma$, with `specviz.gamma.theory` for $E(\alpha, \gamma)$.

# %%
C_DRAFT = 0.035  # the trimmed draft's batch-1 cost ratio (benchmarks/RESULTS.md, Drafters)


def t_draft(n):
    """Seconds of one draft step over n rows: assumed c times the target's line."""
    return C_DRAFT * t_target(n)


def predicted_speedup(alpha, gamma, batch):
    """E(alpha, gamma) t(B) / (gamma t_draft(B) + t(B (gamma + 1))); gamma 0 is plain (1)."""
    if gamma == 0:
        return 1.0
    tokens = theory.expected_tokens_per_round(alpha, gamma)
    return tokens * t_target(batch) / (gamma * t_draft(batch) + t_target(batch * (gamma + 1)))


ALPHA = 0.7
GAMMAS = (1, 2, 4, 8)
print(f"predicted speedup over plain batched decoding, alpha = {ALPHA}, c = {C_DRAFT}")
print("rows B   " + "".join(f"{b:>7d}" for b in rows))
for gamma in GAMMAS:
    cells = "".join(f"{predicted_speedup(ALPHA, gamma, b):7.2f}" for b in rows)
    leaves = A_SECONDS / B_SECONDS / (gamma + 1)
    print(f"gamma {gamma:<3d}" + cells + f"   verify pass leaves the line at B ~ {leaves:.0f}")

# %% [markdown]
# Read a column, then a row. At $B = 1$ long rounds pay, as in notebook 5. As $B$ grows every
# $\gamma$ loses ground, and the long rounds lose fastest: their verification pass is
# $\gamma + 1$ times as wide, so it turns arithmetic-bound first, and it spends that arithmetic
# on drafts that are mostly rejected at the far end of the round. At some batch size each
# $\gamma$ falls below 1, the larger ones first. So the best $\gamma$ shrinks as the batch grows,
# down to $\gamma = 0$ (no speculation) once no $\gamma$ beats plain decoding. The figure shows
# the best $\gamma$ and what it is worth, for three drafts of different quality.

# %%
alphas = (0.5, 0.7, 0.9)
batches = np.unique(np.round(np.logspace(0, 7, 36, base=2)).astype(int))
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
for alpha in alphas:
    best = [max(range(17), key=lambda g: predicted_speedup(alpha, g, b)) for b in batches]
    ax1.step(batches, best, where="mid", label=f"α = {alpha}")
    ax2.plot(
        batches,
        [predicted_speedup(alpha, g, b) for g, b in zip(best, batches, strict=True)],
        label=f"α = {alpha}",
    )
    print(
        f"alpha {alpha}: best gamma at B = 1, 8, 32, 128: "
        + ", ".join(str(best[list(batches).index(b)]) for b in (1, 8, 32, 128))
    )
for ax in (ax1, ax2):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("rows B")
    ax.legend()
ax1.set_ylabel("best γ (0 = plain decoding)")
ax1.set_title("The best γ shrinks as the batch grows")
ax2.axhline(1, color="black", lw=0.8)
ax2.set_ylabel("predicted speedup at the best γ")
ax2.set_title("and so does what it buys")
plt.tight_layout()
plt.show()

# %% [markdown]
# A better draft (higher $\alpha$) keeps speculation worth it to larger batches, because fewer of
# the verified drafts are wasted. None of this changes what is written: the speedup model only
# prices the passes. Measured numbers, rather than this model's, come from
# `specviz bench batch --batch-sizes 1,2,4,8,16,32`, whose report has a *Batch* section; on a
# GPU the weight-bound region is far wider (a pass reads gigabytes of weights to do little
# arithmetic at small batches), so the same shape appears at much larger $B$.
#
# ## 3. A batch, decoded: each row on its own
#
# `specviz.batch` decodes B requests together. Each round every live row drafts (its own
# $\gamma$, fewer when it is close to its token budget), one target pass scores every row's
# drafts, and each row is verified **alone**: its own uniforms, its own accepted count, its own
# resampled or bonus token. Then each row's caches are cropped back to that row's committed
# tokens, so the rows fall out of step: one row may have kept four drafts and another none, and
# the next round goes on from where each one stands. A row that reaches its end of sequence
# or `max_new_tokens` leaves the batch.
#
# We decode five prompts of different lengths on the toy pair (12 tokens; its KV cache holds the
# token ids, so a rollback bug would change what it sees), sampling at $T = 1$. Each row draws
# from its own `torch.Generator`, seeded `sampling.seed + r` for row r.

# %%
target, draft = random_pair(12, seed=0, sharpness=2.0, draft_noise=0.5)
prompts = [[1, 2, 3], [4, 5], [6, 7, 8, 9, 10], [2, 2], [11, 3, 5, 7]]
sampling = SamplingConfig(temperature=1.0, seed=7)
speculation = SpeculationConfig(gamma=4, max_new_tokens=24)
batch = speculative_generate_batch(
    target, draft, None, prompts, sampling=sampling, speculation=speculation, stop=()
)
rounds = [e for e in batch.events if isinstance(e, RoundSummary)]
kept = {r: [e.accepted for e in rounds if e.row == r] for r in range(len(prompts))}
print("drafts kept by each row, round by round (gamma = 4):")
for r, counts in kept.items():
    result = batch.rows[r]
    print(
        f"row {r}: {' '.join(str(k) for k in counts):<30s} "
        f"{len(counts):2d} rounds, {len(result.tokens)} tokens, "
        f"alpha {result.accepted / result.proposed:.2f}"
    )
finished = {e.row: e.seconds for e in batch.events if isinstance(e, Finished)}
print("rows in the order they finished:", sorted(finished, key=finished.get))

# %%
most = max(len(counts) for counts in kept.values())
grid = np.full((len(prompts), most), np.nan)  # nan: the row has left the batch
for r, counts in kept.items():
    grid[r, : len(counts)] = counts
fig, ax = plt.subplots(figsize=(8, 3.2))
image = ax.imshow(grid, cmap="Blues", vmin=0, vmax=speculation.gamma, aspect="auto")
for (r, k), value in np.ndenumerate(grid):
    if not np.isnan(value):
        ax.text(
            k, r, f"{value:.0f}", ha="center", va="center", color="black" if value < 3 else "white"
        )
ax.set_xticks(range(most))
ax.set_yticks(range(len(prompts)), [f"row {r}" for r in range(len(prompts))])
ax.set_xlabel("batch round (blank: the row has finished and left the batch)")
ax.set_title("Drafts kept of γ = 4, per row and round: one batch, five counts a round")
fig.colorbar(image, ax=ax, label="drafts kept")
plt.tight_layout()
plt.show()

# %% [markdown]
# The rows keep different numbers of drafts in the same round, so they need different numbers
# of rounds for the same 24 tokens; a row that needs fewer leaves the batch early, and the last
# rounds run on fewer rows.
#
# ## 4. Batching does not change what a row writes
#
# Row r draws its uniforms and its resampled and bonus tokens from its own generator, in the
# same order as a decode of prompt r alone would, and sees exactly the target's and the draft's
# distributions for its own prefix. So row r must write, **token for token**, what
# `speculative_generate` writes for prompt r with seed `sampling.seed + r`, and hence follow the
# target's law for that prompt (notebook 4). The check below compares every row; as a negative
# control it also decodes each prompt with the batch's seed itself, which must differ for the
# rows whose seed is not that one.

# %%
for r, prompt in enumerate(prompts):
    alone = speculative_generate(
        target,
        draft,
        None,
        prompt,
        sampling=SamplingConfig(temperature=1.0, seed=sampling.seed + r),
        speculation=speculation,
        stop=(),
    )
    control = speculative_generate(
        target, draft, None, prompt, sampling=sampling, speculation=speculation, stop=()
    )
    same, differs = batch.rows[r].tokens == alone.tokens, batch.rows[r].tokens != control.tokens
    control_text = f"differs from prompt {r} alone with seed {sampling.seed}: {differs}"
    print(
        f"row {r}: equals prompt {r} alone with seed {sampling.seed + r}: {same}; "
        + (control_text if r else f"(row 0's own seed is {sampling.seed})")
    )
    assert same and (differs or r == 0)

# %% [markdown]
# Exactness is per row, and it needs nothing from the other rows: batching is a way of
# *scheduling* the passes, not a change to the sampler. The only thing the batch changes is the
# time, and section 2 said how much: the app's **Batch** tab (`python app.py`) decodes a few
# prompts of your own this way on the bundled pair, with each row's tokens coloured by how they
# were emitted and the batch's tokens per second.

# %%
print(f"notebook ran in {time.perf_counter() - t_start:.1f} s")

# %% [markdown]
# ## Exercises
#
# ### Exercise 1
#
# With the cost model above, at $\alpha = 0.7$ and $\gamma = 4$, from how many rows on does
# speculation stop paying ($S(B) < 1$)? And what is the largest batch at which *some* $\gamma$
# still pays?

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# first_loss = next(b for b in range(1, 1025) if predicted_speedup(0.7, 4, b) < 1)
# last_gain = max(
#     b for b in range(1, 1025)
#     if max(predicted_speedup(0.7, g, b) for g in range(1, 17)) > 1
# )
# print(first_loss, last_gain)
# ```
#
# In this model $\gamma = 4$ stops paying at about 20 rows, well past where its verification
# pass leaves the line ($B(\gamma + 1) \approx 28$, about 6 rows): up to there the fixed cost
# $a$ still hides much of the wider pass. Some $\gamma$ pays up to about 56 rows, and it is
# $\gamma = 1$, whose pass is only twice as wide: the best $\gamma$ falls to 1 before
# speculation stops paying altogether.
# </details>

# %% [markdown]
# ### Exercise 2
#
# Show that for a very large batch $S(B) \to E(\alpha, \gamma) / (\gamma(1 + c) + 1)$, that this
# is below 1 for every $\alpha < 1$ and $\gamma \ge 1$, and check it numerically at
# $B = 10^6$.

# %% [markdown]
# <details><summary>Solution</summary>
#
# With $t(n) = a + bn$ and $t_{\text{draft}}(n) = c\,t(n)$, dividing the numerator and the
# denominator of $S(B)$ by $bB$ and letting $B \to \infty$ leaves
# $E / (\gamma c + \gamma + 1)$. Since $E = 1 + \alpha + \dots + \alpha^\gamma < \gamma + 1$ for
# $\alpha < 1$, the limit is below 1 even for a free draft ($c = 0$): each row pays for
# $\gamma + 1$ token vectors of arithmetic and gets fewer than $\gamma + 1$ tokens back.
#
# ```python
# for gamma in (1, 2, 4):
#     limit = theory.expected_tokens_per_round(0.7, gamma) / (gamma * (1 + C_DRAFT) + 1)
#     print(gamma, round(predicted_speedup(0.7, gamma, 10**6), 4), round(limit, 4))
# ```
# </details>

# %% [markdown]
# ### Exercise 3
#
# `speculative_generate_batch` also takes `seeds=`, one per prompt. Decode the five prompts in
# the reverse order, each with the seed it had above (`seeds=`), and check that every prompt
# writes what it wrote above. What does that say about a row's neighbours in the batch?

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# order = [4, 3, 2, 1, 0]
# reversed_batch = speculative_generate_batch(
#     target, draft, None, [prompts[i] for i in order], sampling=sampling,
#     speculation=speculation, stop=(), seeds=[sampling.seed + i for i in order],
# )
# print(all(reversed_batch.rows[k].tokens == batch.rows[i].tokens for k, i in enumerate(order)))
# ```
#
# A row's tokens are a function of its prompt and its seed alone. Its place in the batch, the
# other prompts, and when they finish and leave the batch change the shape of each pass (how
# many rows, how far each is padded) but not a single number the row's sampler sees.
# </details>
