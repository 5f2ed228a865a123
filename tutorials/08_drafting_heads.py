# %% [markdown]
# # 8. Drafting heads: drafting from what the target already computed
#
# **The question.** Every draft so far has guessed the next tokens from the tokens alone: the
# distilled draft model of notebooks 3-5 reads the text and runs its own three small layers,
# the n-gram lookup copies text, the early exit reruns the target's first layers. But by the
# time a round starts, the target has already run all of its layers over every committed
# token, and its last hidden state at each position is a summary of the text made for exactly
# one purpose: predicting what comes next. Can a small **drafting head** that reads those
# hidden states draft better than a separate model, at the same cost? And does it matter
# whether the head also sees the tokens it has just drafted?
#
# We compare three drafters for the bundled target (SmolLM2-135M-Instruct): the bundled 9M-parameter
# distilled draft model; an **EAGLE-3** head, one decoder layer that reads three of the target's
# layers at the position before and the token in between, and predicts the next token directly; and
# **Medusa** heads, one small block per draft position, each guessing a token further ahead from the
# target's last hidden state. We measure how often each one's draft at position $j$ of a round would
# be kept, what one draft step costs, and check end to end that decoding with a head is still
# exactly the target's decoding. Every number is computed by the cell that prints it.

# %%
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")

import statistics
import time

import matplotlib.pyplot as plt
import torch
from transformers.utils import logging as hf_logging

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.drafters.registry import build_drafter
from specviz.fast.lean import draft_cache
from specviz.heads.build import head_cache
from specviz.heads.lookup import head_path
from specviz.heads.tap import FeatureCache, feature_cache, fused_feature_cache
from specviz.models.loading import load_pair
from specviz.train.data.teacher import chat_ids, sample_batch
from specviz.train.draft.evaluate import HELD_OUT_CHAT, HELD_OUT_CODE
from specviz.train.heads.evaluate import drafted_laws, target_pass

torch.set_num_threads(1)  # batch-1 steps of small models: a second thread mostly adds noise
hf_logging.disable_progress_bar()
t_start = time.perf_counter()
pair = load_pair()  # the bundled target and its distilled draft model
target, draft, tokenizer = pair.target, pair.draft, pair.tokenizer
eagle = head_cache("eagle3", target)  # the heads shipped for this target
medusa = head_cache("medusa", target)
print("head weights:", [head_path(kind).name for kind in ("eagle3", "medusa")])

# %% [markdown]
# ## 1. The target's feature
#
# A decoder-only transformer turns token $x_i$ into a vector, refines it layer by layer
# (attending to everything before it), and applies a final RMS norm. Call the result the
# **feature** $f_i \in \mathbb{R}^D$ ($D = 576$ here). The output head is one matrix
# $W \in \mathbb{R}^{V \times D}$, and the target's next-token distribution is nothing but
#
# $$p(x_{i+1} \mid x_{\le i}) = \operatorname{softmax}(W f_i).$$
#
# So $f_i$ holds everything the target knows about the next token, and, since it is the
# product of every layer's reading of the text so far, a good deal about where the text is going.
# `FeatureCache` is the target's ordinary cached forward that also keeps $f_i$ for every position
# it has scored (`FusedFeatureCache` keeps what EAGLE-3 reads instead, three layers' hidden
# states); the drafting heads read their input from it, and verification passes fill it, so
# the heads cost the target no extra pass. First a check that the features really are what
# the output head reads: the logits of a plain `transformers` forward are exactly $W f_i$.

# %%
prompt_ids = chat_ids(tokenizer, HELD_OUT_CODE[0], 256)  # a held-out prompt, in chat format
cache = FeatureCache(target)
cache.forward(torch.tensor(prompt_ids))
features = cache.features.rows  # (L, D): one feature per position
with torch.no_grad():
    plain_logits = target(input_ids=torch.tensor([prompt_ids])).logits[0]  # (L, V)
    head_logits = target.get_output_embeddings()(features)  # W f_i for every i
assert torch.equal(plain_logits, head_logits)
print(f"features {tuple(features.shape)}; logits {tuple(plain_logits.shape)} = W f, exactly")

# %% [markdown]
# ### Three ways to draft the tokens after $x_i$
#
# At the start of a round the committed text ends with $x_i$, the token the last verification
# pass emitted. The target has not scored $x_i$ yet (that happens in this round's pass), so the
# newest feature is $f_{i-1}$, and the token $x_i$ is known. Each drafter then proposes
# $x_{i+1}, x_{i+2}, \dots$ with a law $q_j$ for draft position $j$:
#
# - **The draft model** reads the tokens $x_{\le i}$ and its own drafts, nothing of the target.
#   With a few narrow layers (sizes below) it has to recompute, from the tokens alone, what the
#   target's deep, wide stack worked out, and it can only do a rough job of it.
# - **EAGLE** (Li et al. 2024) started from the target's feature too. Its first design
#   predicted the *feature*: from $[\,e(x_i) ; f_{i-1}\,]$, the target's embedding of the token
#   and the feature before it, one Llama decoder layer computed $\hat f_i \approx f_i$, and the
#   target's own output head turned that into $q_1 = \operatorname{softmax}(W \hat f_i)$; the next
#   draft went in with $\hat f_i$. **EAGLE-3** (Li et al. 2025), the head used here, drops the
#   feature regression. It reads three of the target's layers at position $i - 1$ (a low, a
#   middle and a high one, $g_{i-1} \in \mathbb{R}^{3D}$), fuses them into $u_{i-1} \in
#   \mathbb{R}^D$, and one decoder layer (attending to the head's own cache of earlier
#   positions) turns $[\,e(x_i) ; u_{i-1}\,]$ into a hidden state $h_i$ that its own output
#   matrix reads as $q_1$ directly. The next draft goes in with $h_i$ in the place of $u_i$: the
#   head drafts autoregressively, with the target's real layers for every committed position and
#   its own hidden states after that. It starts from what the target computed and only has to
#   carry it one position further, a much easier job than recomputing it.
# - **Medusa** (Cai et al. 2024) has one residual block per draft position:
#   $g_j = f_{i-1} + \operatorname{SiLU}(A_j f_{i-1} + b_j)$ and
#   $q_j = \operatorname{softmax}(W g_j)$ guesses $x_{i+j}$ directly. All heads read the same
#   $f_{i-1}$ and no token after it: head 1 must guess $x_{i+1}$ without seeing $x_i$, and
#   head $j$ without seeing the $j$ tokens in between. Where the text could continue in several
#   ways, a guess two or more tokens ahead has to cover all of them at once, so we expect
#   Medusa to fall behind EAGLE-3, more so the further ahead it guesses.
#
# Neither head scores all $V = 49152$ tokens. Medusa scores $|S| = 8192$ *head tokens* $S$ (the
# tokens that carry most of the target's probability) with their rows of $W$; EAGLE-3 scores its own
# *draft vocabulary*, the tokens the target writes most often. Off that set a head's logits are
# $-\infty$, so $q_j(x) = 0$ there. That is not an approximation of anything. The acceptance rule
# only needs the true law each draft was drawn from, and $q = 0$ off $S$ *is* that law. A token $x$
# outside $S$ is never drafted; after a rejection (probability $1 - \alpha$) the residual
# $\operatorname{norm}(\max(0, p - q))$ gives it $p(x)/(1 - \alpha)$, so it is emitted with
# probability exactly $p(x)$, as notebook 2 showed for any $q$.
#
# The heads add few weights of their own (the embeddings and output head are the target's,
# shared, not copied):

# %%
sizes = {
    "draft model": sum(p.numel() for p in draft.parameters()),
    "EAGLE-3 head": sum(p.numel() for p in eagle.head.parameters()),
    "Medusa heads": sum(p.numel() for p in medusa.heads.parameters()),
}
for name, n in sizes.items():
    print(f"{name:12s}: {n / 1e6:4.1f} M parameters")
print(f"Medusa has {medusa.heads.k} heads over {len(medusa.head_tokens)} head tokens; EAGLE-3's")
print(f"draft vocabulary holds {len(eagle.head_tokens)} tokens")
for name, model in (("target", target), ("draft model", draft)):
    cfg = model.config
    print(
        f"{name}: {cfg.num_hidden_layers} layers of width {cfg.hidden_size}, V = {cfg.vocab_size}"
    )

# %% [markdown]
# Most of the draft model's 9M parameters are its embedding table (shared with its output
# head): its transformer proper is small. The EAGLE-3 head's weights are its fusion, its one
# decoder layer and its output matrix over the draft vocabulary, all spent on carrying the
# target's reading of the text one position forward.
#
# ## 2. How often each draft would be kept
#
# The chance that a draft is kept is $\alpha = \sum_x \min(p(x), q(x))$ (notebook 2). It depends
# on where in the round the draft is, so we measure it per **draft position** $j$, on text the
# target itself wrote: three held-out code prompts and three held-out chat prompts (written
# for evaluation, never seen in training), each continued by the target for up to 48 tokens at
# $T = 1$ with a seeded generator.
#
# The measurement is **teacher-forced**. At every position $i$ of a continuation we draft
# $j = 1, \dots, 4$ tokens ahead *along the target's actual tokens*, and score draft $j$ with
#
# $$\alpha_j = \operatorname{mean}_i \sum_x \min\big(p(x \mid x_{< i+j}),\; q_j(x)\big),$$
#
# (approximately) the probability that draft $j$ is kept given that the drafts before it were
# kept. For the heads, `specviz.train.heads.evaluate.drafted_laws` does this: EAGLE-3 gets the
# target's real layers up to $g_{i-1}$ and its own hidden states $h$ after that (as when
# drafting), Medusa head $j$ gets $f_{i-1}$. A separate draft model conditioned on the true
# tokens is simply at its next-token prediction at every $j$: its only input is the tokens, and
# those are the true ones. So its $\alpha_j$ is the same at every position (up to which
# positions enter the mean), while a head's $\alpha_j$ can fall with $j$ because what it feeds
# on, its own hidden state or a feature ever further behind, drifts away from what the target
# would compute.

# %%
PROMPTS = {"code": HELD_OUT_CODE[:3], "chat": HELD_OUT_CHAT[:3]}
NEW, DEPTH = 48, 4
gen = torch.Generator().manual_seed(2024)
kinds = [kind for kind, prompts in PROMPTS.items() for _ in prompts]
ids = [chat_ids(tokenizer, p, 256) for prompts in PROMPTS.values() for p in prompts]
rows = sample_batch(target, ids, tokenizer.eos_token_id, NEW, 1.0, 1, gen)  # one batch of 6
continuations = {kind: [] for kind in PROMPTS}  # kind -> [(prompt length, prompt + text (L,))]
for kind, p, r in zip(kinds, ids, rows, strict=True):
    continuations[kind].append((len(p), r["tokens"].long()))
for kind, (n, tokens) in ((k, v[0]) for k, v in continuations.items()):
    print(f"{kind}: {tokenizer.decode(tokens[n:])[:100]!r} ...")


@torch.inference_mode()
def alphas(kind):
    """α_j (j = 1..DEPTH) of the draft model, EAGLE-3 and Medusa over one kind's continuations."""
    sums = {name: torch.zeros(DEPTH) for name in ("draft model", "EAGLE-3", "Medusa")}
    counts = torch.zeros(DEPTH)
    for prompt_len, tokens in continuations[kind]:
        feats, p = target_pass(target, tokens)  # f (L, D), p (L, V): row t is p(x_{t+1} | x_<=t)
        layers, _ = target_pass(target, tokens, fused=True)  # g (L, 3D): what EAGLE-3 reads
        q_model = torch.softmax(draft(input_ids=tokens[None]).logits[0].float(), -1)  # (L, V)
        start = prompt_len - 1  # drafts start after the last prompt token
        laws = {
            "EAGLE-3": drafted_laws(eagle, layers, tokens, start, DEPTH),  # (n, DEPTH, V)
            "Medusa": drafted_laws(medusa, feats, tokens, start, DEPTH),
        }
        for j in range(1, DEPTH + 1):
            i = torch.arange(start, tokens.shape[0] - j)  # rounds starting at i that reach x_{i+j}
            p_j = p[i + j - 1]  # the target's law of x_{i+j} given the true prefix
            sums["draft model"][j - 1] += torch.minimum(p_j, q_model[i + j - 1]).sum()
            for name, law in laws.items():
                sums[name][j - 1] += torch.minimum(p_j, law[i - start, j - 1]).sum()
            counts[j - 1] += len(i)
    return {name: (s / counts).tolist() for name, s in sums.items()}, int(counts[0])


alpha = {}
for kind in PROMPTS:
    alpha[kind], positions = alphas(kind)
    print(f"\n{kind} ({positions} positions), alpha_j at T = 1:")
    print(f"  {'draft position j':16s}" + "".join(f"{j:>8d}" for j in range(1, DEPTH + 1)))
    for name, values in alpha[kind].items():
        print(f"  {name:16s}" + "".join(f"{v:8.3f}" for v in values))

# %%
colors = {"draft model": "#999999", "EAGLE-3": "#0072B2", "Medusa": "#E69F00"}
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
bar = 0.8 / len(colors)
for ax, kind in zip(axes, PROMPTS, strict=True):
    for k, (name, color) in enumerate(colors.items()):
        xs = [j + (k - 1) * bar for j in range(1, DEPTH + 1)]
        ax.bar(xs, alpha[kind][name], bar, color=color, label=name)
    ax.set_xticks(range(1, DEPTH + 1))
    ax.set_xlabel("draft position j in the round")
    ax.set_title(f"held-out {kind} prompts, T = 1, teacher-forced")
top = max(v for by_name in alpha.values() for values in by_name.values() for v in values)
axes[0].set_ylim(0, 1.25 * top)  # room for the legend
axes[0].set_ylabel(r"$\alpha_j$ = mean $\sum_x \min(p, q_j)$")
axes[0].legend(fontsize=8, ncol=3, loc="upper left")
fig.tight_layout()
plt.show()
for kind in PROMPTS:
    best = [max(alpha[kind], key=lambda n: alpha[kind][n][j]) for j in range(DEPTH)]
    print(f"{kind}: highest alpha at j = 1..{DEPTH}: {best}")
    for name in ("EAGLE-3", "Medusa"):
        a_j = alpha[kind][name]
        print(f"  {name}: alpha_{DEPTH} / alpha_1 = {a_j[-1] / a_j[0]:.2f}")

# %% [markdown]
# Read the chart position by position. The draft model's bars are nearly level, as argued
# above (they differ only in which positions enter each mean). The heads' bars are what their
# training bought, and the argument of section 1 says what shape to expect. At $j = 1$ both
# heads see the target's reading of the text one step back, and EAGLE-3 also sees $x_i$: it
# only has to move the target's own summary of the text one position forward, which is where
# reading the target should pay most. Medusa's head 1 has the last feature but not the token
# $x_i$, so it has to guess past a token it cannot see. As $j$ grows, EAGLE-3 feeds on its own
# hidden states, whose small errors compound, and Medusa's heads guess ever further past tokens
# they cannot see: both should fall, Medusa faster, because EAGLE-3 at least gets every drafted
# token's embedding (here, the true one) while Medusa gets nothing new after $f_{i-1}$. A head
# beats the draft model only once it has learned to use what it reads, so the lines above say
# where the shipped heads stand: which drafter leads at each position, and how much each head
# keeps of its first position's $\alpha$ by the fourth.
#
# The α that matters for a round is not one number: a round of $\gamma$ drafts keeps draft $j$
# only if drafts $1..j-1$ were kept, so the expected number of kept drafts is
# $\sum_{j=1}^{\gamma} \alpha_1 \alpha_2 \cdots \alpha_j$ (exercise 2), and a high $\alpha_1$
# counts in every term.
#
# ## 3. What one draft step costs
#
# Notebook 5's other number is the cost ratio $c$: the time of one draft step over one target
# step. We time each with twenty single-token steps after the same prompt, interleaved so
# that a busy machine slows them alike, and take medians. The draft model runs on
# `specviz.fast.lean`'s forward, as its drafter does; the target on the feature-recording lean
# forward the EAGLE-3 drafters verify with; an EAGLE-3 step is one forward of its cache for one
# token (`fc`, one decoder layer, then its output matrix over the draft vocabulary); a Medusa
# step one residual block and 8192 rows of the target's output head.


# %%
@torch.inference_mode()
def step_times(steps=20):
    """Median seconds of one draft-model, EAGLE-3, Medusa and target step after prompt_ids."""
    prompt = torch.tensor(prompt_ids)
    last, n = prompt[-1:], len(prompt_ids)
    target_cache = eagle.attach(target, fused_feature_cache)  # records the layers EAGLE-3 reads
    target_cache.forward(prompt[:-1])
    eagle.forward(prompt[:-1], keep=1)  # the head's cache: prompt positions, real layers
    model_cache = draft_cache(draft)
    model_cache.forward(prompt[:-1])
    medusa_input = feature_cache(target)  # the last feature, which Medusa reads
    medusa_input.forward(prompt[:-1])
    f_last = medusa_input.features.rows[-1]

    def model_step():
        model_cache.forward(last, keep=1)
        model_cache.crop(n - 1)

    def eagle_step():
        eagle.forward(last, keep=1)
        eagle.crop(n - 1)

    def medusa_step():
        medusa.logits(medusa.heads.one(1, f_last)[None])

    def target_step():
        target_cache.forward(last, keep=1)
        target_cache.crop(n - 1)

    runs = {"draft model": model_step, "EAGLE-3": eagle_step, "Medusa": medusa_step}
    runs["target"] = target_step
    times = {name: [] for name in runs}
    for _ in range(steps + 1):  # the first round warms up
        for name, step in runs.items():
            began = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - began)
    return {name: statistics.median(t[1:]) for name, t in times.items()}


seconds = step_times()
cost = {name: s / seconds["target"] for name, s in seconds.items() if name != "target"}
for name, s in seconds.items():
    c_text = f"c = {cost[name]:.3f}" if name in cost else "(c = 1 by definition)"
    print(f"{name:12s}: {1e3 * s:6.2f} ms per step  {c_text}")

# %% [markdown]
# Both the draft model and the EAGLE-3 head are small next to the target, and at this size
# much of what they cost is an output head: most of the draft model's step is its
# $160 \times 49152$ head over the whole vocabulary, a good part of the EAGLE-3 head's step its
# $576$-wide output matrix over the draft vocabulary (the rest is its decoder layer). So EAGLE-3
# pays for reading the target's layers with a step of the same order as the draft model's
# (which of the two is cheaper on a given machine is for the timing above to say). Medusa's
# guesses are cheaper still, one residual block and the same slice per head, and all of them
# could be computed at once, since none waits for the token before it.
#
# ## 4. End to end: still exactly the target's output
#
# The drafters are registered like the others: `build_drafter("eagle", ...)` drafts a chain with
# the EAGLE-3 head, `"tree-eagle"` grows EAGLE-2-style trees with it (the nodes of highest
# cumulative draft probability, top-$k$ children, notebook 7); `"medusa"` and `"tree-medusa"` do
# the same with the Medusa heads. They share the target's cache: the decoder verifies through the
# drafter's feature-recording forward, so each verification pass also hands the head the real
# features (or layers) of everything it accepted. The first round drafts nothing (the target has
# scored no position yet). At $T = 0$ the acceptance rule keeps a draft exactly when it is the
# target's argmax, so the output must be the plain greedy output, token for token.

# %%
greedy = SamplingConfig(temperature=0.0)
code_ids = chat_ids(tokenizer, HELD_OUT_CODE[3], 256)  # another held-out code prompt
E2E_NEW = 48
plain = autoregressive_generate(
    target, tokenizer, code_ids, sampling=greedy, max_new_tokens=E2E_NEW
)
print(repr(plain.text[:120]), "...")
runs = {}
for name in ("model", "eagle", "tree-eagle"):
    drafter = build_drafter(name, target=target, draft=draft, sampling=greedy)
    runs[name] = run = speculative_generate(
        target,
        drafter,
        tokenizer,
        code_ids,
        sampling=greedy,
        speculation=SpeculationConfig(gamma=4, max_new_tokens=E2E_NEW),
    )
    same = run.tokens == plain.tokens
    print(
        f"{name:10s}: {len(run.tokens)} tokens in {run.target_calls:2d} target passes "
        f"({len(run.tokens) / run.target_calls:.2f} per pass), {run.accepted:2d}/{run.proposed:3d} "
        f"drafts kept, identical to plain greedy: {same}"
    )
assert runs["eagle"].tokens == plain.tokens and runs["tree-eagle"].tokens == plain.tokens

# %% [markdown]
# Identical outputs, in fewer target passes than plain decoding's one per token. Tokens per
# target pass is what a higher $\alpha_j$ buys. A tree can keep more per pass than a chain:
# where the head's top guess is wrong, its second or third may be right. Its passes are wider
# (up to `tree_nodes` + 1 positions instead of $\gamma + 1$), and whether more tokens per pass
# become more tokens per second depends on what a wider pass costs on the hardware (notebook 1;
# `specviz bench --drafters eagle,tree-eagle,model` times them).

# %%
print(f"notebook ran in {time.perf_counter() - t_start:.1f} s")

# %% [markdown]
# ## Exercises
#
# ### Exercise 1
#
# Before looking at the table again: which Medusa head should have the lowest $\alpha$, and
# why? Check it on both prompt kinds, and compare it with EAGLE-3's draft at the same position.

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# for kind in PROMPTS:
#     m, e = alpha[kind]["Medusa"], alpha[kind]["EAGLE-3"]
#     print(kind, "worst Medusa head:", 1 + m.index(min(m)), [f"{a:.3f}" for a in m])
#     print(kind, "EAGLE-3 at j = 4 vs Medusa head 4:", f"{e[3]:.3f} vs {m[3]:.3f}")
# ```
#
# Head 4, the last one, should be (on this few positions a neighbour can come out level). It guesses
# $x_{i+4}$ from $f_{i-1}$ alone, without the four tokens in between. Where those tokens could be
# several things, the right $x_{i+4}$ depends on which, so the best the head can do is a mixture
# over every way the text might go, and a mixture overlaps only partly with the one $p$ that the
# actual tokens lead to. EAGLE-3's fourth draft has the embeddings of the three tokens before it
# (the true ones, teacher-forced), so it loses only through its own hidden states standing in for
# the target's, and a head trained as well as Medusa's should keep more there (the second printed
# line shows whether the shipped one does). </details>

# %% [markdown]
# ### Exercise 2
#
# Use the measured $\alpha_j$ and $c$ to predict, for each drafter on the code prompts, the
# expected tokens per target pass $1 + \sum_{j=1}^{\gamma} \prod_{k \le j} \alpha_k$ for
# $\gamma = 1, \dots, 4$, and the speedup bound of notebook 5 with a flat verification cost
# (a round costs $\gamma c + 1$ target steps). Which $\gamma$ is best for each?

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# import math
#
# for name in ("draft model", "EAGLE-3", "Medusa"):
#     a = alpha["code"][name]
#     per_pass = [1 + sum(math.prod(a[:j]) for j in range(1, g + 1)) for g in range(1, 5)]
#     speedup = [t / (g * cost[name] + 1) for g, t in zip(range(1, 5), per_pass)]
#     best = 1 + speedup.index(max(speedup))
#     print(f"{name:12s} tokens/pass {[round(t, 2) for t in per_pass]}, "
#           f"speedup {[round(s, 2) for s in speedup]}, best gamma {best}")
# ```
#
# Each extra draft adds $\prod_{k \le \gamma} \alpha_k$ tokens and costs $c$: it pays while
# that product exceeds about $c$ times the tokens per pass so far. A drafter whose $\alpha_j$
# falls fast (Medusa) gains little from long rounds even when its steps are cheap. These are
# $T = 1$ numbers: at $T = 0$ the keep probability is the greedy agreement instead, so the
# measured tokens per pass of section 4 need not match them. (Treating the teacher-forced
# $\alpha_j$ as the keep probability given the earlier drafts were kept is itself an
# approximation: a kept draft is distributed as $\min(p, q)/\alpha$, not as $p$.)
# </details>

# %% [markdown]
# ### Exercise 3
#
# The Medusa heads' $q$ is zero off the 8192 head tokens. (a) What is the largest $\alpha$ a
# head can reach at a position, given $p$ there? Measure that bound on the code continuations.
# (b) Suppose a head sampled its draft from $q$ over the head tokens but reported to the
# verifier the softmax of its logits over the full vocabulary, $q'$ (nonzero everywhere).
# Would the output still follow the target's law?

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# in_head = torch.zeros(target.config.vocab_size, dtype=torch.bool)
# in_head[medusa.head_tokens] = True
# mass = [target_pass(target, t)[1][n - 1 : -1][:, in_head].sum(-1)
#         for n, t in continuations["code"]]
# print(f"mean p(S) = {float(torch.cat(mass).mean()):.4f}; Medusa alpha_1 = "
#       f"{alpha['code']['Medusa'][0]:.3f}")
# ```
#
# (a) $\sum_x \min(p(x), q(x)) \le \sum_{x \in S} p(x) = p(S)$, reached when $q$ is $p$
# renormalised over $S$. On this text the head tokens carry most of the target's mass, so the
# cap is loose; exactness never depended on it.
#
# (b) No. The rule keeps $x$ with $\min(1, p(x)/q'(x))$ and corrects with
# $\operatorname{norm}(\max(0, p - q'))$, a correction made for drafts drawn from $q'$. Drawn
# from $q = q'/q'(S)$ instead, head tokens are proposed more often than it allows for. A
# six-token example, with the last two tokens outside $S$:
#
# ```python
# from specviz.core.acceptance import residual
#
# p6 = torch.tensor([0.3, 0.2, 0.1, 0.1, 0.2, 0.1], dtype=torch.float64)
# logits6 = torch.tensor([1.0, 0.5, 0.2, 0.0, 0.3, -0.2], dtype=torch.float64)
# in_s = torch.tensor([True, True, True, True, False, False])
# q_told = torch.softmax(logits6, -1)  # q': what the verifier is told
# q_drawn = torch.softmax(logits6.masked_fill(~in_s, float("-inf")), -1)  # q: what was sampled
#
# def emitted(drawn, told):
#     kept = drawn * torch.clamp(p6 / told, max=1.0)  # P(draft x and keep it)
#     return kept + (1 - kept.sum()) * residual(p6, told)
#
# for told in (q_drawn, q_told):
#     law = emitted(q_drawn, told)
#     print(law, "TV to p:", 0.5 * float((law - p6).abs().sum()))
# ```
#
# Told the truth ($q$, zeros included), the law is $p$ to rounding error; told $q'$, the
# output leans toward the head tokens and the two tokens outside $S$ are emitted far less
# often than $p$ says. The $q$ handed to the verifier must be the law the draft was drawn from.
# </details>
