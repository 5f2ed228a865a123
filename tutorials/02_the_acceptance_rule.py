# %% [markdown]
# # 2. The acceptance rule
#
# **The question.** A cheap draft model has proposed a token $x$, drawn from its distribution
# $q$. The target model, had we asked it, would have drawn from its own distribution $p$. Can
# we *keep* $x$ most of the time, *replace* it otherwise, and still output a token that is
# distributed **exactly** as $p$ — not approximately, exactly?
#
# Yes, and the rule that does it is short: keep $x$ with probability
# $\min\!\big(1, p(x)/q(x)\big)$; if it is rejected, draw a replacement from the **residual**
# $\operatorname{norm}\big(\max(0, p - q)\big)$. This notebook derives that rule, checks it
# exactly on toy distributions, and then checks the real implementation
# (`specviz.core.acceptance`) by Monte Carlo. No model is loaded: everything here is a few vectors.

# %%
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets

import matplotlib.pyplot as plt
import torch
from scipy import stats

from specviz.core.acceptance import acceptance_prob, residual, verify
from specviz.core.config import SamplingConfig
from specviz.core.sampling import logits_to_probs, sample
from specviz.gamma import theory

torch.set_printoptions(precision=4, sci_mode=False)

# %% [markdown]
# ## Two toy distributions
#
# Take a vocabulary of six words and two sets of logits: the target's and a draft's that
# mostly agrees but is overconfident about "the" and blind to "cat". `logits_to_probs` applies
# the same warping (temperature, top-k, top-p) that the decoder uses; at temperature 1 with no
# filters it is a plain softmax.

# %%
words = ["the", "a", "cat", "dog", "sat", "ran"]
V = len(words)
target_logits = torch.tensor([2.0, 1.2, 1.5, 0.8, 0.3, -0.5], dtype=torch.float64)
draft_logits = torch.tensor([3.0, 1.0, -4.0, 1.0, 0.5, -0.5], dtype=torch.float64)
plain = SamplingConfig(temperature=1.0)
p = logits_to_probs(target_logits, plain)
q = logits_to_probs(draft_logits, plain)
print("p =", p)
print("q =", q)


def bars(ax, values, title, color, ymax):
    ax.bar(words, values.tolist(), color=color)
    ax.set_title(title)
    ax.set_ylim(0, ymax)
    for i, v in enumerate(values.tolist()):
        ax.text(i, v + 0.01, f"{v:.2f}", ha="center", fontsize=8)


ymax = 1.15 * float(torch.maximum(p, q).max())
fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
bars(axes[0], p, "target p", "#0072B2", ymax)
bars(axes[1], q, "draft q", "#E69F00", ymax)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Deriving the rule
#
# Draw $x \sim q$, keep it with some probability $a(x)$, and otherwise draw a replacement from
# some distribution $r$. The output is $x$ either because $x$ was drafted and kept, or because
# the draft was rejected (whatever it was) and $r$ produced $x$:
#
# $$P(\text{out} = x) = q(x)\,a(x) + \beta\, r(x), \qquad
#   \beta = \sum_y q(y)\,\big(1 - a(y)\big) \text{ (the rejection probability).}$$
#
# We want this to equal $p(x)$ for every $x$, while keeping drafts as often as possible.
# Since $\beta\,r(x) \ge 0$, the kept path can contribute at most $p(x)$:
# $q(x)\,a(x) \le p(x)$, and of course $a(x) \le 1$. The largest choice that respects both is
#
# $$a(x) = \min\!\Big(1, \frac{p(x)}{q(x)}\Big), \qquad q(x)\,a(x) = \min\big(p(x), q(x)\big).$$
#
# Where the draft under-proposes ($q(x) < p(x)$) every draft of $x$ is kept; where it
# over-proposes ($q(x) > p(x)$) it is kept only in proportion $p(x)/q(x)$. What is still
# missing from each $p(x)$ is $p(x) - \min(p(x), q(x)) = \max(0, p(x) - q(x))$, and the
# rejection branch must supply exactly that: $\beta\, r(x) = \max(0, p(x) - q(x))$. Summing
# over $x$ gives $\beta = \sum_x \max(0, p(x) - q(x))$, so
#
# $$r = \frac{\max(0, p - q)}{\sum_y \max(0, p(y) - q(y))} = \operatorname{norm}(\max(0, p - q)).$$
#
# The probability of keeping the draft is
#
# $$\alpha = \sum_x q(x)\,a(x) = \sum_x \min(p(x), q(x)) = 1 - \operatorname{TV}(p, q),
#   \qquad \operatorname{TV}(p, q) = \tfrac12 \sum_x |p(x) - q(x)|,$$
#
# using $\min(a, b) = \tfrac12(a + b - |a - b|)$. So the acceptance rate is *exactly* one
# minus the total variation distance between draft and target: the closer the draft, the more
# drafts survive. And $\beta = 1 - \alpha$, the mass of the residual before normalising.
#
# ## The pieces, computed by `specviz.core.acceptance`

# %%
accept = acceptance_prob(p, q)  # min(1, p/q) for every token
res = residual(p, q)  # norm(max(0, p - q))
overlap = torch.minimum(p, q)
alpha = float(theory.alpha(p, q))
tv = 0.5 * float((p - q).abs().sum())
print("min(1, p/q) =", accept)
print("residual    =", res)
print(f"alpha = sum min(p, q) = {alpha:.6f};  1 - TV(p, q) = {1 - tv:.6f}")

fig, axes = plt.subplots(1, 4, figsize=(14, 3.2), sharey=True)
bars(axes[0], p, "target p", "#0072B2", ymax)
bars(axes[1], q, "draft q", "#E69F00", ymax)
bars(axes[2], overlap, f"min(p, q): kept drafts (sum α = {alpha:.2f})", "#009E73", ymax)
bars(axes[3], (1 - alpha) * res, f"(1 − α) · residual (sum {1 - alpha:.2f})", "#D55E00", ymax)
fig.tight_layout()
plt.show()

# %% [markdown]
# Stack the green bars on the red ones and you get the blue ones. "cat", which the draft
# almost never proposes, comes almost entirely from the residual; "the", which the draft
# over-proposes, comes only from kept drafts, and the residual puts no mass on it at all.
#
# ## The output law is p, exactly
#
# Now the same sum, computed rather than drawn: the law of the emitted token is
# $q \cdot a + (1 - \alpha)\, r$.

# %%
law = q * accept + (1 - alpha) * res
print("output law =", law)
print("target p   =", p)
print(f"max |law - p| = {float((law - p).abs().max()):.2e}")

fig, ax = plt.subplots(figsize=(7, 3.4))
ax.bar(words, overlap.tolist(), color="#009E73", label="draft kept: q·min(1, p/q) = min(p, q)")
ax.bar(
    words,
    ((1 - alpha) * res).tolist(),
    bottom=overlap.tolist(),
    color="#D55E00",
    label="draft rejected, residual drawn: (1 − α)·r",
)
ax.plot(words, p.tolist(), "k_", markersize=30, mew=2, label="target p")
ax.set_ylim(0, 1.25 * float(p.max()))
ax.set_ylabel("probability")
ax.set_title("the two ways to emit each word add up to p")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Monte Carlo with the real `verify`
#
# The algebra is about the formulas; the decoder runs `specviz.core.acceptance.verify`. Here it is
# on a one-token draft ($\gamma = 1$): `verify` takes the target's distributions at the draft
# position and at the position after it (shape $(\gamma + 1, V)$), the draft's distributions
# (shape $(\gamma, V)$), the drafted tokens and a `torch.Generator`. If the draft is kept,
# `next_token` is the **bonus** token from the second row of `p_target`; if it is rejected,
# `next_token` is the residual draw. Either way the first emitted token should follow $p$. We
# draw $N$ rounds with one seeded generator and compare the counts with $p$ (chi-square test)
# and the keep rate with $\alpha$.

# %%
N = 6000
generator = torch.Generator().manual_seed(0)
p_after = torch.full((V,), 1.0 / V, dtype=torch.float64)  # target's next distribution (bonus)
p_target = torch.stack([p, p_after])  # (gamma + 1, V)
q_draft = q[None]  # (gamma, V)
counts = torch.zeros(V)
kept = 0
for _ in range(N):
    drafted = torch.tensor([sample(q, generator)])
    verdict = verify(p_target, q_draft, drafted, generator)
    first = int(drafted[0]) if verdict.n_accepted == 1 else verdict.next_token
    counts[first] += 1
    kept += verdict.n_accepted
freq = counts / N
chi2 = stats.chisquare(counts.numpy(), (N * p).numpy())
print(f"kept {kept} of {N} drafts: rate {kept / N:.4f} vs alpha {alpha:.4f}")
print(f"chi-square vs p: statistic {chi2.statistic:.2f}, p-value {chi2.pvalue:.3f}")

se = (p * (1 - p) / N).sqrt()
fig, ax = plt.subplots(figsize=(7, 3.2))
x = torch.arange(V)
ax.bar(x - 0.2, p.tolist(), width=0.4, color="#0072B2", label="target p")
ax.bar(x + 0.2, freq.tolist(), width=0.4, color="#999999", label=f"verify(), N = {N}")
ax.errorbar(x + 0.2, freq.tolist(), yerr=(2 * se).tolist(), fmt="none", ecolor="k", capsize=3)
ax.set_xticks(x.tolist(), words)
ax.set_title("first emitted token: empirical frequencies (±2 s.e.) vs p")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# A large p-value means the counts are what draws from $p$ would look like; the error bars
# cover $p$. (Notebook 4 turns this into a proper equivalence suite with power calculations,
# over whole sequences and real models.)
#
# ## Greedy decoding is a special case
#
# At temperature 0, `logits_to_probs` returns one-hot distributions on the argmax. Then
# $\min(1, p(x)/q(x))$ is 1 if the draft's argmax is the target's and 0 otherwise, and the
# residual is the target's one-hot: speculative greedy decoding keeps exactly the drafts that
# match the target's greedy choices and replaces the first mismatch by the target's token.
# That is why greedy speculative output is token-identical to greedy target output.

# %%
greedy = SamplingConfig(temperature=0.0)
p0, q0 = logits_to_probs(target_logits, greedy), logits_to_probs(draft_logits, greedy)
print("greedy p:", p0.tolist(), " greedy q:", q0.tolist())
print("alpha =", float(theory.alpha(p0, q0)), " residual:", residual(p0, q0).tolist())
mismatched = logits_to_probs(torch.tensor([0.0, 3.0, 0, 0, 0, 0], dtype=torch.float64), greedy)
print("draft argmax 'a' instead of 'the': alpha =", float(theory.alpha(p0, mismatched)))
print("residual:", residual(p0, mismatched).tolist(), "(all mass on the target's 'the')")

# %% [markdown]
# ## When the draft has another tokenizer
#
# Everything above assumed that $p$ and $q$ are distributions over **one** vocabulary. A draft
# from another model family splits text into other tokens, so its $q$ is over other ids. Two
# exact ways across (`docs/tokenizers.md` derives both; Timor et al., "Accelerating LLM
# Inference with Lossless Speculative Decoding Algorithms for Heterogeneous Vocabularies",
# ICML 2025):
#
# - **Token-level intersection** (`--drafter cross`): the draft's distribution is
#   restricted to the tokens both tokenizers write as the same string and **renormalised**;
#   the draft samples from that law, and the verifier is told exactly that law, mapped onto
#   the target's ids (0 on every target token the draft cannot write). The acceptance rule
#   holds for *any* $q$, so the output is still exactly $p$. What the draft cannot say, the
#   residual supplies.
# - **String-level** (`--drafter cross:text`): the draft writes text greedily, the text is
#   re-encoded with the target's tokenizer, and only the target tokens that can no longer
#   change are proposed. The target then verifies its own tokens.
#
# Take the six words again, and a draft whose tokenizer knows "the", "a", "dog" and "ran" but
# writes "cat" and "sat" in pieces ("c" + "at", "s" + "at"). The shared tokens are the four
# whole words. We compute the emitted token's law exactly, as above, for the rule done right
# and for a draft that samples from the renormalised law but tells the verifier the
# restricted, *un*-renormalised probabilities (one of the mutants `specviz verify` rejects).

# %%
draft_words = ["the", "a", "c", "at", "dog", "s", "ran"]
draft_logits_own = torch.tensor([3.0, 1.0, 0.5, 0.2, 1.0, 0.4, -0.5], dtype=torch.float64)
q_own = logits_to_probs(draft_logits_own, plain)  # the draft's law over its own tokens
shared = {d: words.index(w) for d, w in enumerate(draft_words) if w in words}  # draft → target
print("shared tokens:", {draft_words[d]: words[t] for d, t in shared.items()})


def on_target(values):
    """A vector over the draft's tokens → over the target's (0 where the draft has none)."""
    out = torch.zeros(V, dtype=torch.float64)
    for d, t in shared.items():
        out[t] = values[d]
    return out


restricted = on_target(q_own)  # q restricted to the shared tokens: sums to less than 1
q_tli = restricted / restricted.sum()  # renormalised: the law the draft samples from


def emitted_law(q_sampled, q_told):
    """Law of the emitted token: drafts drawn from q_sampled, verified against q_told."""
    keep = q_sampled * torch.where(q_told > 0, torch.clamp(p / q_told, max=1.0), 1.0)
    return keep + (1 - keep.sum()) * residual(p, q_told)


for name, q_told in [("renormalised (exact)", q_tli), ("not renormalised", restricted)]:
    law = emitted_law(q_tli, q_told)
    print(f"{name:22s} TV(law, p) = {0.5 * float((law - p).abs().sum()):.2e}")
print(f"alpha over the shared tokens = {float(torch.minimum(p, q_tli).sum()):.3f}")

# %% [markdown]
# Renormalised, the law is $p$ to rounding; told the restricted probabilities instead, the
# verifier keeps shared words too often (it thinks the draft proposes them rarely) and the
# law drifts from $p$. $\alpha$ is the overlap of $p$ with the *restricted* draft, so a draft
# whose mass sits on tokens the target cannot share pays less.
#
# The string-level way has its own trap: the last target token of a re-encoded text may still
# change when the draft writes more. The bundled tokenizer shows it:

# %%
from transformers import AutoTokenizer

from specviz.models.bundled import bundled_draft_dir

tokenizer = AutoTokenizer.from_pretrained(bundled_draft_dir())
for text in ["for item in ite", "for item in items:"]:
    ids = tokenizer.encode(text)
    print(f"{text!r:22s} → {[tokenizer.decode([i]) for i in ids]}")

# %% [markdown]
# Proposing " it" after the first text would propose a token the target's tokenizer would not
# write once the draft finishes the word: `cross:text` proposes only the prefix of target
# tokens that stays the same whatever the draft writes next (`specviz.drafters.cross_text`), so
# greedy output is token-identical to the target's own greedy decoding. At $T > 0$ it stays
# exact too: nothing is sampled, so each proposal is a function of the committed text and its
# $q$ is one-hot, the law it came from, and the rule keeps it with probability $p(x)$, as for
# n-gram lookup. `cross`, which tells the verifier the draft's whole law, usually keeps more.
#
# One caution the derivation makes plain: $p$ and $q$ must be the distributions the tokens are
# *actually* drawn from. The decoder warps the target's and the draft's logits with the same
# `SamplingConfig`; computing $q$ from unwarped logits while sampling the draft from warped
# ones is one of the real-world bugs `specviz verify` catches (see notebook 4).
#
# ### Exercise 1
#
# A tempting shortcut: on rejection, draw the replacement from $p$ instead of the residual.
# Compute the output law of this broken rule exactly for our $p$ and $q$, and its total
# variation distance from $p$. Which words does it over-produce?
#
# <details><summary>Solution</summary>
#
# The kept path still contributes $\min(p, q)$; the rejection branch now adds
# $(1 - \alpha)\,p$.
#
# ```python
# broken = q * acceptance_prob(p, q) + (1 - alpha) * p
# print(broken, 0.5 * float((broken - p).abs().sum()))
# print([w for w, b, t in zip(words, broken.tolist(), p.tolist()) if b > t])
# ```
#
# The law is $\min(p, q) + (1 - \alpha)p$, which differs from $p$ unless $q = p$. A word
# comes out too often when $\min(p(x), q(x)) > \alpha\, p(x)$, i.e. when the draft proposes it
# at more than $\alpha$ times the target's rate, and too rarely otherwise: here "cat" and "a",
# the words the draft neglects, are starved, because the residual existed precisely to top
# them up. This is the "residual replaced by p" mutant in `specviz/stats/mutants.py`.
# </details>
#
# ### Exercise 2
#
# Which draft $q$ maximises $\alpha$ for a given $p$, and what is $\alpha$ for a uniform draft
# over the six words? Check with `theory.alpha`.
#
# <details><summary>Solution</summary>
#
# $\alpha = 1 - \operatorname{TV}(p, q)$ is 1 exactly when $q = p$: a perfect draft is never
# rejected. For the uniform draft, $\alpha = \sum_x \min(p(x), 1/6)$.
#
# ```python
# print(float(theory.alpha(p, p)))  # 1.0
# uniform_q = torch.full((V,), 1 / V, dtype=torch.float64)
# print(float(theory.alpha(p, uniform_q)), float(torch.clamp(p, max=1 / V).sum()))
# ```
# </details>
#
# ### Exercise 3
#
# Show that rejection never happens where the draft under-proposes: if $q(x) \le p(x)$, a
# drafted $x$ is always kept. Then rerun the Monte-Carlo cell at temperature 0.5 for both
# models (`SamplingConfig(temperature=0.5)`) and compare the keep rate with $\alpha$.
#
# <details><summary>Solution</summary>
#
# If $q(x) \le p(x)$ then $p(x)/q(x) \ge 1$, so $\min(1, p(x)/q(x)) = 1$ and the uniform
# $u < 1$ always passes. At temperature 0.5 both distributions sharpen and $\alpha$ changes
# (both pile onto "the", but the draft's neglect of "cat" now costs more); the keep rate
# follows $\alpha$ whichever way it moves:
#
# ```python
# warm = SamplingConfig(temperature=0.5)
# p5, q5 = logits_to_probs(target_logits, warm), logits_to_probs(draft_logits, warm)
# gen = torch.Generator().manual_seed(1)
# keep = sum(
#     verify(torch.stack([p5, p_after]), q5[None], torch.tensor([sample(q5, gen)]), gen).n_accepted
#     for _ in range(3000)
# )
# print(keep / 3000, float(theory.alpha(p5, q5)))
# ```
# </details>
