# %% [markdown]
# # 5. When does it pay?
#
# **The question.** Speculative decoding never changes *what* the target writes (notebook 4),
# only how long it takes. But it is not free: every round runs the draft $\gamma$ times, and
# every rejected draft token is wasted work. So when is it actually faster than plain decoding,
# by how much, and with which $\gamma$?
#
# We first derive the answer on paper (Leviathan et al. 2023, section 3), then measure the two
# quantities the answer depends on, the acceptance rate $\alpha$ and the cost ratio $c$, on the
# bundled pair, *predict* the speedup, and only then race plain against speculative decoding to
# see how good the prediction was. Every number below is computed by the cell that prints it,
# on the machine that runs the notebook; a busy machine makes the timings noisy.

# %%
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")

import statistics
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from transformers.utils import logging as hf_logging

from specviz.api import autoregressive_generate, encode, speculative_generate
from specviz.bench.sweeps.heads import (
    draft_probabilities,
    keep_probabilities,
    model_lookahead,
    target_path,
)
from specviz.bench.sweeps.replay import PassCosts, replay
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.policy import FixedGamma
from specviz.core.sampling import logits_to_probs
from specviz.drafters.model import ModelDrafter
from specviz.fast.lean import draft_cache
from specviz.gamma import theory
from specviz.gamma.policies import TheoryGamma
from specviz.models.loading import load_pair
from specviz.results.records import request_metrics
from specviz.tune.timing import step_times
from specviz.workloads import load_requests

# One thread: the timings below compare forward passes with each other, and a second thread on
# a shared 2-core machine mostly adds noise.
torch.set_num_threads(1)
hf_logging.disable_progress_bar()
t_start = time.perf_counter()
pair = load_pair()
target, draft, tokenizer = pair.target, pair.draft, pair.tokenizer
print(f"target: {target.config.num_hidden_layers} layers; draft: {draft.config.num_hidden_layers}")

# %% [markdown]
# ## The theory
#
# Model each draft token as accepted independently with probability $\alpha$ (for one position,
# $\alpha = \sum_x \min(p(x), q(x)) = 1 - \mathrm{TV}(p, q)$). A round proposes $\gamma$ tokens
# and stops at the first rejection; it always emits one more token than it accepts (a resampled
# token after a rejection, or the bonus token after a full accept). The number of accepted
# tokens is a truncated geometric variable, so the expected number of tokens per round is
#
# $$\mathbb{E}[\text{tokens per round}] = 1 + \alpha + \alpha^2 + \dots + \alpha^\gamma =
# \frac{1 - \alpha^{\gamma + 1}}{1 - \alpha}.$$
#
# A round costs one target pass plus $\gamma$ draft passes. Measured in target passes, with
# $c = $ (time of a draft step) / (time of a target step), that is $\gamma c + 1$, *if* a target
# pass over $\gamma + 1$ tokens costs the same as a pass over one (true on memory-bound
# hardware, notebook 1). Plain decoding emits one token per target pass, so the expected
# speedup is
#
# $$S(\alpha, \gamma, c) = \frac{1 - \alpha^{\gamma+1}}{(1 - \alpha)(\gamma c + 1)}.$$
#
# Drafting more tokens helps while the next one is likely to be kept, and hurts once
# $\alpha^{\gamma+1}$ is small, since we pay $c$ for each draft anyway: there is an optimal
# $\gamma$, and speculation pays at all only if $S > 1$ for some $\gamma$.

# %%
gammas = np.arange(1, 13)
alphas = (0.3, 0.5, 0.7, 0.9)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
for a in alphas:
    ax1.plot(gammas, [theory.expected_tokens_per_round(a, g) for g in gammas], "o-", label=f"α={a}")
    ax1.axhline(1 / (1 - a), color="grey", lw=0.5, ls=":")
    s = [theory.speedup_bound(a, g, 0.1) for g in gammas]
    (line,) = ax2.plot(gammas, s, "o-", label=f"α={a}")
    best = theory.optimal_gamma(a, 0.1)
    ax2.plot(best, theory.speedup_bound(a, best, 0.1), "*", ms=16, color=line.get_color())
ax1.set_xlabel("γ (draft tokens per round)")
ax1.set_ylabel("expected tokens per round")
ax1.set_title("(1 − α^(γ+1)) / (1 − α); dotted: the limit 1/(1 − α)")
ax1.legend()
ax2.axhline(1, color="black", lw=0.8)
ax2.set_xlabel("γ")
ax2.set_ylabel("speedup bound S")
ax2.set_title("S(α, γ, c = 0.1); star = optimal γ")
ax2.legend()
plt.tight_layout()
plt.show()

print("optimal gamma (and its bound) for each alpha and cost ratio c:")
print("alpha " + "".join(f"   c={c:<9}" for c in (0.02, 0.05, 0.1, 0.2, 0.5)))
for a in (0.3, 0.5, 0.6, 0.7, 0.8, 0.9):
    cells = []
    for c in (0.02, 0.05, 0.1, 0.2, 0.5):
        g = theory.optimal_gamma(a, c)
        cells.append(f"{g:2d} ({theory.speedup_bound(a, g, c):4.2f}x)")
    print(f"{a:5.1f} " + "  ".join(cells))

# %% [markdown]
# Two rules of thumb fall out. Expected tokens per round saturate at $1/(1 - \alpha)$: with
# $\alpha = 0.5$ no $\gamma$ gives more than 2 tokens per target pass. And the optimal $\gamma$ is
# small unless the draft is both good *and* cheap; when $\alpha$ is low the best bound sits near
# 1, and for a low enough $\alpha$ no $\gamma$ reaches 1: speculation loses.
#
# ## Measure α and c on the bundled pair
#
# We take one prompt from each of three benchmark workloads (`specviz/workloads/`): code
# completion (greedy), prose (sampled at $T = 1$) and repeat-the-prompt (greedy; the answer
# copies text from the prompt). For each we first decode plainly. That run gives the
# continuation the target actually writes and the plain time per token.
#
# **α without running speculation.** At every position $t$ of that continuation, one forward
# pass of each model over prompt + continuation gives $p_t$ and $q_t$, and
# $\alpha_t = \sum_x \min(p_t(x), q_t(x))$ is exactly the probability that a draft token at $t$
# would be accepted. Their mean is our $\alpha$ (at $T = 0$ both distributions are one-hot and
# $\alpha_t$ is 1 when the argmaxes agree, else 0).
#
# **c and the verification cost.** We time one cached decode step of the draft and of the
# target, and also a target pass over $\gamma + 1 = 5$ new tokens: the theory assumed that costs
# the same as one token. With the packed weights `load_pair` uses on a CPU it nearly does
# (notebook 1); with PyTorch's default CPU kernels it costs 1.5–2 times as much. Either way we
# keep the ratio $r = t_{\text{target}}(\gamma + 1) / t_{\text{target}}(1)$ for a refined
# prediction $S' = \mathbb{E}[\text{tokens}] / (\gamma c + r)$.

# %%
GAMMA = 4
NEW_TOKENS = 20
REQUESTS = [load_requests(w)[0] for w in ("code", "prose", "repeat")]


@torch.no_grad()
def continuation_logits(prompt_ids, continuation):
    """Target and draft logits (n, V) that predict each continuation token, one pass each."""
    ids = torch.tensor([prompt_ids + continuation])
    start = len(prompt_ids) - 1  # the logits that predict the first continuation token
    rows = slice(start, start + len(continuation))
    return target(input_ids=ids).logits[0, rows], draft(input_ids=ids).logits[0, rows]


def teacher_forced_alpha(logits, temperature):
    """Mean over positions of sum_x min(p_t, q_t), both warped at `temperature`."""
    sampling = SamplingConfig(temperature=temperature)
    p, q = (logits_to_probs(x, sampling) for x in logits)
    return float(theory.alpha(p, q).mean())


@torch.no_grad()
def step_seconds(model, prompt_ids, new_tokens, repeats=5, make_cache=KVCache):
    """Median seconds of a cached forward pass over `new_tokens` tokens after the prompt."""
    cache = make_cache(model)
    cache.forward(torch.tensor(prompt_ids[:-1]))
    fresh = torch.tensor(prompt_ids[-1:] + [prompt_ids[-1]] * (new_tokens - 1))
    times = []
    for _ in range(repeats + 1):  # the first pass warms up and is dropped
        start = time.perf_counter()
        cache.forward(fresh)
        times.append(time.perf_counter() - start)
        cache.crop(len(prompt_ids) - 1)
    return statistics.median(times[1:])


# warm up both models once (first calls allocate and are slow)
warm_ids = encode(tokenizer, REQUESTS[0].prompt)
autoregressive_generate(target, tokenizer, warm_ids, max_new_tokens=2)
speculative_generate(
    target, draft, tokenizer, warm_ids, speculation=SpeculationConfig(gamma=2, max_new_tokens=3)
)

# c and r hardly depend on the prompt at these lengths: time them once, on the code prompt
t_draft = step_seconds(draft, warm_ids, 1, make_cache=draft_cache)  # as ModelDrafter runs it
t_target = step_seconds(target, warm_ids, 1)
t_verify = step_seconds(target, warm_ids, GAMMA + 1)
print(
    f"draft step {t_draft * 1e3:.1f} ms, target step {t_target * 1e3:.1f} ms, "
    f"target pass over {GAMMA + 1} tokens {t_verify * 1e3:.1f} ms"
)

plain_runs, logits, measured = {}, {}, {}
for req in REQUESTS:
    ids = encode(tokenizer, req.prompt)
    sampling = SamplingConfig(temperature=req.temperature, seed=0)
    plain = autoregressive_generate(
        target, tokenizer, ids, sampling=sampling, max_new_tokens=NEW_TOKENS
    )
    plain_runs[req.category] = plain
    logits[req.category] = continuation_logits(ids, list(plain.tokens))
    measured[req.category] = dict(
        alpha=teacher_forced_alpha(logits[req.category], req.temperature),
        c=t_draft / t_target,
        r=t_verify / t_target,
        plain_per_token=plain.seconds / len(plain.tokens),
    )

print(f"gamma = {GAMMA}, {NEW_TOKENS} new tokens per request")
print(
    f"{'workload':9s} {'T':>4s} {'alpha':>6s} {'c':>6s} {'r':>5s} {'bound S':>8s} {'refined':>8s}"
)
for req in REQUESTS:
    m = measured[req.category]
    m["bound"] = theory.speedup_bound(m["alpha"], GAMMA, m["c"])
    m["refined"] = theory.expected_tokens_per_round(m["alpha"], GAMMA) / (GAMMA * m["c"] + m["r"])
    print(
        f"{req.category:9s} {req.temperature:4.1f} {m['alpha']:6.3f} {m['c']:6.3f} {m['r']:5.2f} "
        f"{m['bound']:7.2f}x {m['refined']:7.2f}x"
    )

# %% [markdown]
# ## Now race
#
# With the predictions written down, we run speculative decoding on the same requests (same
# seeds, same length) and compare with the plain runs above. (A proper benchmark, `specviz
# bench`, interleaves plain and speculative runs several times and reports medians; one run
# each keeps this notebook short.) `request_metrics` pairs each speculative run with its plain
# run and recomputes $\alpha$ (accepted / verified draft tokens) and $c$ from the logged round
# timings.

# %%
rows = []
for req in REQUESTS:
    ids = encode(tokenizer, req.prompt)
    sampling = SamplingConfig(temperature=req.temperature, seed=0)
    spec = speculative_generate(
        target,
        draft,
        tokenizer,
        ids,
        sampling=sampling,
        speculation=SpeculationConfig(gamma=GAMMA, max_new_tokens=NEW_TOKENS),
    )
    plain = plain_runs[req.category]  # decoded a few seconds earlier, same seed and length
    metrics = request_metrics(spec, plain)
    rows.append((req, spec, metrics))
    if req.temperature == 0:  # greedy: the same tokens as plain decoding (up to float ties)
        print(f"{req.category}: greedy output identical to plain: {spec.tokens == plain.tokens}")

print(
    f"{'workload':9s} {'alpha run':>9s} {'tok/round':>9s} {'predicted':>9s} {'refined':>8s} "
    f"{'measured':>9s}  {'target calls/token':>18s}"
)
for req, _spec, m in rows:
    pred = measured[req.category]
    print(
        f"{req.category:9s} {m.alpha:9.3f} {m.tokens_per_round:9.2f} {pred['bound']:8.2f}x "
        f"{pred['refined']:7.2f}x {m.speedup:8.2f}x  {m.target_calls_per_token:18.2f}"
    )
print("\nrepeat-the-prompt continuation:", repr(rows[2][1].text[:120]))

fig, ax = plt.subplots(figsize=(7, 3.5))
x = np.arange(len(rows))
ax.bar(x - 0.27, [measured[r.category]["bound"] for r, _, _ in rows], 0.27, label="bound S")
ax.bar(x, [measured[r.category]["refined"] for r, _, _ in rows], 0.27, label="refined S'")
ax.bar(x + 0.27, [m.speedup for _, _, m in rows], 0.27, label="measured", hatch="//")
ax.axhline(1, color="black", lw=0.8)
ax.set_xticks(x, [f"{r.category} (T={r.temperature:g})" for r, _, _ in rows])
ax.set_ylabel("speedup over plain decoding")
ax.set_title(f"Predicted vs measured speedup, γ = {GAMMA}, {NEW_TOKENS} tokens")
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# How to read this. The bound $S$ is an *upper* estimate: it ignores everything but forward
# passes (Python overhead, sampling, cache rollback) and assumes verification is free. If the
# target pass over $\gamma + 1$ tokens costs more than a pass over one token (the factor $r$
# above), the refined $S'$ charges for it, and is the column to compare with the measurement.
# Timings from a short run of a few rounds on a shared machine are noisy, and so is the run's
# own $\alpha$ (compare it with the teacher-forced one): rerun with another seed or more tokens
# before trusting the second digit.
#
# The workloads differ mostly in $\alpha$. Code is predictable, and a small draft agrees with
# the target often. Open prose at $T = 1$ is not. Look at the repeat-the-prompt row: the target
# copies the paragraph from the prompt, yet a 3-layer draft is poor at copying, because copying
# needs attention heads that find the earlier occurrence and read what followed it ("induction
# heads"), which a tiny distilled model barely has. Notebook 6 drafts by copying directly. A
# speedup below 1 is a real outcome, not a bug: speculation *loses* when $\alpha$ is too low
# for the price of drafting.
#
# ## Temperature
#
# Sampling temperature changes $p$ and $q$ together. At $T \to 0$ both become one-hot and
# $\alpha_t \in \{0, 1\}$: the draft either has the same argmax or is useless at that position.
# As $T$ grows both flatten, which can raise their overlap where the draft was wrong with
# confidence and lower it where it was right; and a *sampled* continuation also gets harder to
# predict than a greedy one. We can see the first effect without decoding anything: recompute
# the teacher-forced $\alpha$ of each continuation at several temperatures. (How strongly
# $\alpha$ moves with $T$ depends on the pair; read it off the figure rather than assuming it.)

# %%
temperatures = (0.0, 0.3, 0.6, 1.0, 1.5)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
for req in REQUESTS:
    a_t = [teacher_forced_alpha(logits[req.category], t) for t in temperatures]
    c = measured[req.category]["c"]
    s_t = [theory.speedup_bound(a, theory.optimal_gamma(a, c), c) for a in a_t]
    ax1.plot(temperatures, a_t, "o-", label=req.category)
    ax2.plot(temperatures, s_t, "o-", label=req.category)
    print(f"{req.category:7s} alpha at T={temperatures}: " + ", ".join(f"{a:.2f}" for a in a_t))
ax1.set_xlabel("temperature T")
ax1.set_ylabel("teacher-forced α")
ax1.set_title("α on the same continuation, warped at T")
ax1.legend()
ax2.axhline(1, color="black", lw=0.8)
ax2.set_xlabel("temperature T")
ax2.set_ylabel("bound at the optimal γ")
ax2.set_title("What that α is worth (measured c)")
ax2.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Rounds in law, without a clock
#
# Comparing γ settings or γ policies by timing them is hard on a busy machine: two runs of the
# same work differ by several per cent, and at $T > 0$ every run writes different text. There
# is a way to compare them on the *same* randomness, free of timing noise, and it follows from
# the acceptance rule itself.
#
# At a drafted position the draft samples $x \sim q$ and keeps it when $u < p(x)/q(x)$; then
# the output is $y = x$. Otherwise $y$ is drawn from $\mathrm{norm}(\max(0, p - q))$. So
#
# $$P(\text{kept},\, y = v) = q(v)\,\min\!\Big(1, \frac{p(v)}{q(v)}\Big) = \min(p(v), q(v)),
# \qquad P(y = v) = p(v),$$
#
# and **given the token the target wrote, the draft there was kept with probability
# $\min(1, q(y)/p(y))$**. That does not depend on anything earlier: neither on earlier verdicts
# nor on the γ the policy picked. (Summed over $v \sim p$ it gives back
# $\alpha_t = \sum_v \min(p_t(v), q_t(v))$.) While drafts are kept the draft sees the target's own
# prefix; after a rejection the round ends. So one plain decode $y$, the draft's $q(y_t)$ along it,
# and one coin per position with that bias give the rounds of any policy that picks γ before it
# drafts. They are not an approximation: they have exactly the law of real speculative sampling.
# `tests/bench/test_replay.py` checks this against real decodes with a two-sample test, and checks
# that it rejects two broken keep rules. The same coins serve every policy, so the comparison
# between policies has no noise of its own.
#
# Below: one plain decode of the code prompt at $T = 1$, then 500 sets of coins. Each fixed γ,
# and the theory-driven policy, is replayed on the same coins. Passes are priced at the step
# times measured above, with the verification cost interpolated between one token and
# $\gamma + 1 = 5$.

# %%
t1 = SamplingConfig(temperature=1.0, seed=1)
code_ids = encode(tokenizer, REQUESTS[0].prompt)
sampled = autoregressive_generate(target, tokenizer, code_ids, sampling=t1, max_new_tokens=48)
path = target_path(sampled)  # the tokens y and their probabilities p(y)
q_y = draft_probabilities(ModelDrafter(draft, t1, int(target.config.vocab_size)), path)
keeps = keep_probabilities(q_y, path.p_tokens)  # min(1, q(y)/p(y)) per position
slope = (t_verify - t_target) / GAMMA  # seconds per extra token in a verification pass
costs = PassCosts(draft_step=t_draft, verify=tuple(t_target + slope * k for k in range(10)))
coins = torch.Generator().manual_seed(0)
looks = [model_lookahead(keeps, coins) for _ in range(500)]

alpha_path = statistics.mean(keeps)
c_path = t_draft / t_target
print(f"{len(keeps)} tokens, mean keep probability (alpha) {alpha_path:.2f}, c = {c_path:.3f}")
print(f"{'gamma':>6s} {'tokens/round':>13s} {'theory E':>9s} {'speedup':>8s} {'bound with r':>13s}")
replayed = {}
for gamma in range(1, 7):
    runs = [replay(look, FixedGamma(gamma), costs) for look in looks]
    per_round = statistics.mean(len(keeps) / len(run.rounds) for run in runs)
    replayed[gamma] = statistics.mean(run.speedup for run in runs)
    e_theory = theory.expected_tokens_per_round(alpha_path, gamma)
    r_gamma = costs.target(gamma + 1) / costs.target(1)
    print(
        f"{gamma:6d} {per_round:13.2f} {e_theory:9.2f} {replayed[gamma]:7.2f}x "
        f"{e_theory / (gamma * c_path + r_gamma):12.2f}x"
    )
policy_speed = statistics.mean(replay(look, TheoryGamma(start=4), costs).speedup for look in looks)
best = max(replayed, key=replayed.__getitem__)
print(
    f"theory policy: {policy_speed:.2f}x, best fixed gamma {best}: {replayed[best]:.2f}x "
    f"(ratio {policy_speed / replayed[best]:.3f})"
)

# %% [markdown]
# On this sampled path the replayed tokens per round agree with $E(\alpha, \gamma)$ at the path's
# mean keep probability closely: at $T = 1$ the verdicts behave like coins
# of about one bias, which is what the closed form assumes. (At $T = 0$ they do not: agreement
# comes in stretches, see notebook 6.) The replayed speedup follows the bound with the measured
# verification cost, and the theory-driven policy, which sees only verdicts and pass times,
# lands close to the best fixed γ without being told it (the ratio printed above).
# `specviz bench replay --temperature 1` does the same for every prompt of a workload
# and every policy, with pass costs measured per width (`benchmarks/RESULTS.md`).

# %% [markdown]
# ## Draft size
#
# A bigger draft agrees with the target more often (higher $\alpha$) but costs more per step
# (higher $c$). The best achievable speedup $\max_\gamma S(\alpha, \gamma, c)$ as a function of
# both shows the trade: the contours below are lines of equal speedup, and the measured points
# of our draft sit on them. To move up one contour, a draft twice as expensive must buy a
# considerably higher $\alpha$; the cell computes how much.

# %%
grid_a = np.linspace(0.05, 0.97, 60)
grid_c = np.linspace(0.01, 0.6, 60)
best = np.array(
    [[theory.speedup_bound(a, theory.optimal_gamma(a, c), c) for a in grid_a] for c in grid_c]
)
fig, ax = plt.subplots(figsize=(7, 4.5))
cs = ax.contour(grid_a, grid_c, best, levels=[0.8, 1.0, 1.25, 1.5, 2, 3, 4], cmap="viridis")
ax.clabel(cs, fmt="%.2gx")
for req in REQUESTS:
    m = measured[req.category]
    ax.plot(m["alpha"], m["c"], "o", ms=9, label=f"bundled draft, {req.category}")
ax.set_xlabel("α")
ax.set_ylabel("cost ratio c")
ax.set_title("Best speedup bound over γ")
ax.legend(loc="upper left")
plt.tight_layout()
plt.show()


# How much better must a dearer draft be? The best bound rises with α at any fixed c, so the
# least α that reaches a given speedup is found by bisection: theory.alpha_to_match.
m = measured["code"]
now = theory.speedup_bound(m["alpha"], theory.optimal_gamma(m["alpha"], m["c"]), m["c"])
print(f"code: alpha {m['alpha']:.2f}, c {m['c']:.3f} -> best bound {now:.2f}x")
for factor in (0.5, 2, 4):
    need = theory.alpha_to_match(now, factor * m["c"])
    print(
        f"a draft {factor}x as expensive (c = {factor * m['c']:.3f}) needs "
        + (f"alpha >= {need:.3f}" if need == need else "more than any alpha < 1 gives")
        + " for the same bound"
    )
even = theory.alpha_to_match(1.0, m["c"])
print(f"break-even (bound = 1) at c = {m['c']:.3f} needs alpha >= {even:.3f}")

# %% [markdown]
# ## Batch size
#
# Everything above assumed batch size 1, where a decode step reads all the weights to do very
# little arithmetic, so the spare capacity to verify $\gamma + 1$ tokens is almost free. A
# server decoding many requests together fills that capacity with other users' tokens. Below we
# time one plain decode step (one new token per row, 32 tokens of context) for batches of 1 to
# 16 rows.

# %%
batch_sizes = (1, 2, 4, 8, 16)
times = step_times(target, batch_sizes, context=32, steps=4)
per_step = np.array([t for _, t in times])
fig, ax = plt.subplots(figsize=(7, 3.8))
ax.plot(batch_sizes, per_step * 1e3, "o-", label="seconds per step (ms)")
ax.plot(batch_sizes, per_step / np.array(batch_sizes) * 1e3, "s--", label="ms per generated token")
ax.set_xscale("log", base=2)
ax.set_xticks(batch_sizes, [str(b) for b in batch_sizes])
ax.set_xlabel("batch size (rows decoded together)")
ax.set_ylabel("milliseconds")
ax.set_title("One plain decode step of the target vs batch size")
ax.legend()
plt.tight_layout()
plt.show()
for b, t in times:
    print(
        f"batch {b:2d}: {t * 1e3:7.1f} ms per step, {t / b * 1e3:6.1f} ms per token, "
        f"{t / times[0][1]:5.2f}x the batch-1 step"
    )

# %% [markdown]
# A step over $b$ rows costs much less than $b$ single steps while the pass is limited by
# reading the weights, and grows roughly linearly once it is limited by arithmetic. Speculative
# decoding lives off the same slack: verifying $\gamma + 1$ tokens of one request is, to the
# hardware, much like a batch of $\gamma + 1$ rows. If the batch already uses that slack, each
# verification costs nearly $\gamma + 1$ target steps, rejected drafts become expensive, and
# the speedup shrinks toward (and below) 1. In terms of our refined formula: $r$ grows from about
# 1 toward $\gamma + 1$ as the batch grows. On a CPU the slack runs out after a few rows (and
# without packed weights the default kernels waste most of it, notebook 1); on a GPU at batch 1
# it is large.

# %%
print(f"notebook ran in {time.perf_counter() - t_start:.1f} s")

# %% [markdown]
# ## Exercises
#
# ### Exercise 1
#
# Using the measured $\alpha$ and $c$ of the code workload, which $\gamma$ does the theory
# recommend? Race speculative decoding at that $\gamma$ against the measured speedup at
# $\gamma = 4$.

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# m = measured["code"]
# g = theory.optimal_gamma(m["alpha"], m["c"])
# req = REQUESTS[0]
# ids = encode(tokenizer, req.prompt)
# spec = speculative_generate(
#     target, draft, tokenizer, ids,
#     sampling=SamplingConfig(temperature=0.0),
#     speculation=SpeculationConfig(gamma=g, max_new_tokens=NEW_TOKENS),
# )
# print(g, request_metrics(spec, plain_runs["code"]).speedup, rows[0][2].speedup)
# ```
#
# With so few tokens the difference between neighbouring $\gamma$ is within timing noise; the
# bound is flat near its optimum (see the first figure), so getting $\gamma$ roughly right
# matters much more than getting it exactly right.
# </details>

# %% [markdown]
# ### Exercise 2
#
# Show that speculation can only pay if $\alpha > c$ (take $\gamma = 1$ as a hint: when does
# $S(\alpha, 1, c) > 1$?), and check it numerically with `theory.alpha_to_match(1.0, c)` for a
# few $c$.

# %% [markdown]
# <details><summary>Solution</summary>
#
# $S(\alpha, 1, c) = (1 + \alpha)/(1 + c) > 1 \iff \alpha > c$. Larger $\gamma$ cannot do better
# when $\gamma = 1$ already fails: each extra draft adds $\alpha^{j}$ tokens for a price of $c$
# target steps, and $\alpha^j \le \alpha$. So the break-even $\alpha$ equals $c$:
#
# ```python
# for c in (0.05, 0.1, 0.2, 0.4):
#     print(c, theory.alpha_to_match(1.0, c))
# ```
# </details>

# %% [markdown]
# ### Exercise 3
#
# Using the batch timings, estimate the verification factor $r$ for $\gamma + 1 = 5$ tokens at
# batch size 1 as if the 5 tokens were 5 rows, compare it with the $r$ measured directly above,
# and recompute the refined speedup of the code workload with it.

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# t = dict(times)
# r_rows = np.interp(5, [4, 8], [t[4], t[8]]) / t[1]
# m = measured["code"]
# print(r_rows, m["r"])
# print(theory.expected_tokens_per_round(m["alpha"], GAMMA) / (GAMMA * m["c"] + r_rows))
# ```
#
# The two are similar but not equal: 5 tokens of one row share one KV cache and attend to
# each other, 5 rows have 5 caches; both feed 5 token vectors through every weight matrix,
# which is what dominates at this size.
# </details>
