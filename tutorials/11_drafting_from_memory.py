# %% [markdown]
# # 11. Drafting from memory
#
# **The question.** An agent sends a model request after request: a tool call, its result, the
# next call; a file, one change, the whole file again. Much of what the model writes at step
# $k$ it has already written at steps $0, \dots, k-1$. Can a drafter that simply *remembers*
# earlier requests (no draft model, no training) propose those repeats, how long should its
# guesses be, does the output stay exactly the target's, and does the speedup really grow as
# the memory fills?
#
# This notebook follows **SuffixDecoding** (Oliaro et al., arXiv 2411.04975) as implemented in
# `specviz/drafters/suffix/`: a counted suffix tree over earlier outputs and over the current
# request, the most frequent continuation of the longest matches, and a proposal length that
# adapts to how long the match is. It runs on the bundled target (SmolLM2-135M-Instruct) and on
# toy models, and every number is computed by the cell that prints it.

# %%
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")

import itertools
import statistics
import time

import matplotlib.pyplot as plt
import torch
from transformers.utils import logging as hf_logging

from specviz.api import autoregressive_generate, speculative_generate, stop_ids
from specviz.core.acceptance import acceptance_prob, residual
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import SuffixLookup
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix.drafter import SuffixConfig, SuffixDrafter
from specviz.drafters.suffix.memory import SuffixMemory
from specviz.drafters.suffix.speculate import speculate
from specviz.drafters.suffix.store import SuffixStore
from specviz.models.chat import prompt_ids
from specviz.models.loading import load_pair
from specviz.stats.suffix import FrequencyQ
from specviz.stats.suite import check_setting, default_settings, family_adjusted
from specviz.stats.testing import estimated_power
from specviz.stats.toy import random_pair
from specviz.workloads import AGENT_WORKLOADS, load_requests, tasks

torch.set_num_threads(1)  # small forward passes; a second thread mostly adds noise here
hf_logging.disable_progress_bar()
t_start = time.perf_counter()
pair = load_pair(draft=None)  # drafting from memory needs no draft model
target, tokenizer = pair.target, pair.tokenizer

# %% [markdown]
# ## 1. Why agents repeat themselves
#
# The agent workloads shipped with the benchmark (`specviz/workloads/agent-*.jsonl`) are
# tasks of several steps, in the order an agent sends them: a tool-calling loop (`agent-tools`:
# one JSON call a turn, a JSON observation back), a code-editing loop (`agent-code`: one small
# change a turn, the whole file returned each time) and an SQL agent (`agent-sql`: a query a
# turn, its result table back). Request $k$ of a task carries the conversation so far, so the
# prompt of step $k + 1$ is the prompt of step $k$ followed by the agent's reply at step $k$ and
# what came back. Cutting the reply out of that difference gives the text the agent *wrote* at
# each step (the workload's scripted replies, not the bundled model's).
#
# How new is that text? Count its **4-grams** (runs of 4 consecutive tokens, in the target's
# tokenizer) and ask, for each reply, which share of them occurred before it: in the request's
# own prompt (the conversation so far), or in the replies of earlier steps, this task's and
# earlier tasks' (what a memory of earlier outputs would hold).

# %%
N = 4  # n-gram length
ENDS = ("\nObservation:", "\n\nResult:", "\n\nUser:")  # where what came back begins


def ngrams(ids, n=N):
    """The set of n-grams (tuples of n consecutive token ids) in ids."""
    return {tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)}


def reply(request, following):
    """The agent's reply at `request`'s step: what the next step's prompt adds, up to the
    observation, result or user turn that follows it."""
    added = following.prompt[len(request.prompt) :]
    return added[: min((added.find(end) for end in ENDS if end in added), default=len(added))]


def encode_text(text):
    """Token ids of text with the target's tokenizer (no special tokens)."""
    return tokenizer(text, add_special_tokens=False)["input_ids"]


repeats = {}  # workload -> one row per reply: (task, step, share in prompt, in earlier replies)
for workload in AGENT_WORKLOADS:
    written, rows = set(), []  # the 4-grams of every earlier reply of the workload
    for task, steps in tasks(load_requests(workload)):
        for request, following in itertools.pairwise(steps):  # the last reply is not known
            grams = ngrams(encode_text(reply(request, following)))
            own = ngrams(encode_text(request.prompt))
            share = len(grams & own) / len(grams), len(grams & written) / len(grams)
            rows.append((task, request.step, *share))
            written |= grams
    repeats[workload] = rows

fig, axes = plt.subplots(1, len(AGENT_WORKLOADS), figsize=(13, 3.4), sharey=True)
for ax, (workload, rows) in zip(axes, repeats.items(), strict=True):
    x = range(len(rows))
    ax.plot(x, [r[2] for r in rows], "o-", ms=3, color="#0072B2", label="in its own prompt")
    ax.plot(x, [r[3] for r in rows], "s--", ms=3, color="#D55E00", label="in earlier replies")
    for i, row in enumerate(rows):
        if row[1] == 0:
            ax.axvline(i - 0.5, color="0.8", lw=1)
            ax.text(i, 1.04, row[0], fontsize=8)
    ax.set_title(workload, pad=14)
    ax.set_xlabel("reply, in the order the agent sends them")
axes[0].set_ylabel("share of its 4-grams seen before")
axes[0].legend(fontsize=8, loc="lower right")
fig.tight_layout()
plt.show()

for workload, rows in repeats.items():
    by_step = {}
    for _task, step, _in_prompt, in_replies in rows:
        by_step.setdefault(step, []).append(in_replies)
    means = [round(statistics.mean(v), 2) for _, v in sorted(by_step.items())]
    firsts = [round(r[3], 2) for r in rows if r[1] == 0]
    print(f"{workload:11s} in earlier replies, mean by step: {means}")
    print(f"{'':11s} at each task's first step: {firsts}")

# %% [markdown]
# Two things to read off. Within a task, a large share of most later replies occurred before:
# the code agent returns the same file with one change, the SQL agent repeats its joins and
# filters, the tool agent its JSON keys and argument values. And for the tool and SQL agents,
# the first reply of a later task already finds part of itself in *earlier tasks'* replies (the
# same JSON shape, the same schema), which the request's own prompt does not contain: only a memory
# that outlives the request can offer those. The conversation in the prompt covers much of a
# task's repetition (n-gram lookup over the prompt, notebook 6, would find it too); a memory
# adds the agent's earlier outputs, across turns and across tasks.
#
# ## 2. The suffix tree
#
# SuffixDecoding keeps every substring (up to a depth, 24 tokens by default) of the texts it
# remembers in a **suffix trie**: a tree whose root-to-node paths are the substrings, each node
# carrying a **count**, the number of times its substring occurs. It is built incrementally:
# appending a token extends each open suffix of the text by one node, so an update costs at most
# `max_depth` node visits whatever the trie holds. The plainest form, a Python object per node,
# is the reference the tests check the others against (`tests/drafters/suffix_oracle.py`). The
# drafter keeps the same counts over the current request in flat arrays (`RequestTrie`,
# `specviz/drafters/suffix/request.py`: no Python object per node, so the garbage collector has
# nothing to walk), and a `SuffixMemory` holds them over earlier requests in a compact form
# (`SuffixStore`, `specviz/drafters/suffix/store.py`: flat arrays, a path-compressed trie, a
# bounded number of bytes per token); all of them answer the same questions.
#
# A toy memory of four earlier "agent traces", one word per token:

# %%
texts = [
    "search flights then book flight then email plan",
    "search hotels then book hotel then email plan",
    "search flights then book flight then email plan",
    "search flights then compare prices then book flight",
]
words = sorted({w for t in texts for w in t.split()})
WORD_ID = {w: i for i, w in enumerate(words)}


def ids_of(text):
    """Token ids of a space-separated toy text."""
    return [WORD_ID[w] for w in text.split()]


def text_of(tokens):
    """The toy text of token ids."""
    return " ".join(words[t] for t in tokens)


trie = SuffixStore()  # substrings of up to 24 tokens
for text in texts:
    trie.add(ids_of(text))  # one more sequence, its substrings counted
print(f"{len(trie)} tokens in {len(texts)} texts")
for substring in ("then", "flight", "flights then"):
    node = trie.find(ids_of(substring))
    following = ", ".join(f"{words[t]} ({child.count})" for t, child in node.ranked())
    print(f"{substring!r:16s} occurs {node.count} times; followed by {following}")

# %% [markdown]
# A node's children need not add up to its own count: an occurrence at the very end of a text
# is followed by nothing. "flight" occurs 3 times but is followed only twice, since it ends the
# fourth text.
#
# To draft, the drafter takes the text written so far (the **context**) and looks up its last
# $m$ tokens for $m = 1, 2, \dots$: each suffix of the context that occurs in the trie is a
# **match** of length $m$, and the node it ends on lists what followed it, with counts.
# A longer match is rarer but more specific.

# %%
context = ids_of("plan search flights then")
for m, node in trie.matches(context):
    following = ", ".join(f"{words[t]} ({child.count})" for t, child in node.ranked())
    print(f"m = {m}: {text_of(context[-m:])!r:24s} {node.count} times, then {following}")

# %% [markdown]
# From a match the drafter follows the **most frequent continuation**. The probability of a
# child is its count over its parent's count, and along a path they multiply: the **path
# probability** of a node is the frequency, in memory, with which the match continues exactly
# that way. A **chain** follows the likeliest child at every step; a **tree** (`tree-suffix`)
# takes nodes best-first by path probability, so a strong second choice becomes a sibling. The
# **score** of a speculation is the sum of its path probabilities: were the frequencies the
# target's law, it would be the expected number of accepted tokens. `speculate`
# (`specviz/drafters/suffix/speculate.py`) grows a speculation from every match length of every
# trie it is given and keeps the best-scoring one (skipping candidates that provably cannot
# win).


# %%
def show(found, indent="  "):
    """A speculation as an indented tree: each node's word and path probability."""
    depth = {}
    for i, parent in enumerate(found.parents):
        depth[i] = 0 if parent < 0 else depth[parent] + 1
        print(f"{indent}{'  ' * depth[i]}{words[found.tokens[i]]} ({found.probs[i]:.3f})")
    print(f"{indent}score {found.score:.3f}, grown from the match of length {found.match_len}")


bounds = dict(max_tokens=8, factor=2.0, min_prob=0.1, vocab_size=len(words), stop_ids=())
print("chain:")
show(speculate([trie], context, **bounds))
print("tree:")
show(speculate([trie], context, **bounds, tree=True))

# %% [markdown]
# The chain copies the majority trace ("book flight then email plan", path probability 2/3
# throughout, since 2 of the 3 occurrences of the match went that way and the rest follows with
# certainty). The tree spends its sixth node on the minority branch, "compare", a child of the
# match itself (parent $-1$). Both stop at the end of the remembered text.
#
# ## 3. Adaptive length
#
# How many tokens should the drafter propose? A draft of a memory-based drafter costs nothing
# to make, but every proposed token widens the target's verification pass, and a guess grown
# from a one-token match is weak evidence: "then" has been followed by three different words.
# SuffixDecoding lets the *match length* set the budget: a match of $m$ tokens may propose at
# most $\lfloor \text{factor} \cdot m \rfloor$ tokens (`suffix_factor`, 2 by default, and
# never more than $\gamma$), and a path stops where its probability falls below `min_prob`
# (`suffix_min_prob`, 0.1 by default). A long match earns a long guess; a short one a short
# guess, and only while memory agrees on it.

# %%
for label, ctx in (("short match", ids_of("email then")), ("long match ", context)):
    for factor in (1.0, 2.0, 4.0):
        for min_prob in (0.1, 0.4):
            found = speculate(
                [trie], ctx, max_tokens=8, factor=factor, min_prob=min_prob,
                vocab_size=len(words), stop_ids=(),
            )  # fmt: skip
            probs = ", ".join(f"{p:.2f}" for p in found.probs)
            print(
                f"{label} {text_of(ctx)!r:28s} factor {factor:g} min_prob {min_prob}: "
                f"m = {found.match_len}, {text_of(found.tokens)!r:30s} [{probs}]"
            )

# %% [markdown]
# After "email then" only the last word matches ($m = 1$): factor 1 allows one token, "book"
# at probability 4/8; a larger factor lets the chain run on ("flight" at $4/8 \cdot 3/4$, and
# so on) as far as factor $\times\, m$ allows, and with `min_prob` 0.4 nothing after "book"
# survives ($0.375 < 0.4$). After "search flights then" the match is 3 tokens long, so even
# factor 1 allows 3 tokens, each at 2/3; factor 2 reaches the end of the remembered trace. The
# budget grows with the evidence.
#
# ## 4. Exactness
#
# A suffix drafter's proposal is a deterministic function of the committed text and the memory:
# nothing is sampled. As in notebook 6, the honest draft distribution of a chain token $x$ is
# then the point mass $q = \mathbb{1}_x$: the target keeps $x$ with probability $p(x)$ and after
# a rejection draws from $p$ with $x$ removed, which emits exactly $p$. A tree's children are
# verified by the deterministic-sibling rule of notebook 7 (each child tried with its one-hot
# $q$), which emits exactly $p$ as well.
#
# The tempting mistake is to treat the memory's frequencies as $q$: "memory says 'book' follows
# with probability 2/3, so $q(\text{book}) = 2/3$". But the drafter did not *draw* "book" with
# probability 2/3; it proposes it every time. `specviz.stats.suffix.FrequencyQ` is that bug: the
# real suffix drafter, reporting each token's continuation frequency as $q$ (the rest spread
# over the other tokens). On the toy pair of notebook 4 (6 tokens, an order-2 Markov target
# whose law is known exactly), the first token of a round has an exact law we can write down:
# keep $x$ with $\min(1, p(x)/q(x))$, else draw from $\operatorname{norm}(\max(0, p - q))$.

# %%
toy_target, _ = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
TOY_PROMPT = [1, 2, 3, 1, 2]
TOY_MEMORY = ([1, 2, 3, 4, 5], [2, 3, 1, 2, 4], [1, 2, 0, 3], [3, 1, 2, 3, 4, 1, 2])
toy_config = SuffixConfig(factor=4.0, min_prob=0.05)  # long chains, so the suite sees them


def toy_memory():
    """A fresh memory holding the toy traces."""
    memory = SuffixMemory()
    for seq in TOY_MEMORY:
        memory.add(seq)
    return memory


with torch.no_grad():
    logits = toy_target(input_ids=torch.tensor([TOY_PROMPT])).logits[0, -1]
p = torch.softmax(logits.double(), -1)  # (6,) the target's next-token law at T = 1
for cls in (SuffixDrafter, FrequencyQ):
    drafter = cls(6, memory=toy_memory(), config=toy_config)
    drafter.prefill(TOY_PROMPT[:-1])
    draft = drafter.propose(TOY_PROMPT, 4, torch.Generator().manual_seed(0), stop_ids=())
    x, q = int(draft.tokens[0]), draft.q_draft[0].double()  # (6,)
    keep = acceptance_prob(p[x], q[x])
    law = keep * torch.nn.functional.one_hot(torch.tensor(x), 6) + (1 - keep) * residual(p, q)
    tv = 0.5 * float((law - p).abs().sum())
    print(f"{cls.__name__}: proposes {draft.tokens.tolist()}")
    print(f"    q of its first token           {q.numpy().round(3)}")
    print(f"    law of the first emitted token {law.numpy().round(3)}")
    print(f"    target's p                     {p.numpy().round(3)}; total variation {tv:.3f}")

# %% [markdown]
# With the one-hot $q$ the law is $p$ to rounding. With the frequencies as $q$ the proposed
# token is kept with $\min(1, p(x)/q(x))$, more often than $p(x)$, so it comes out too often,
# and a token to which the made-up $q$ gives more than $p$ can never be drawn after a rejection
# ($\max(0, p - q) = 0$ there).
#
# The equivalence suite of notebook 4 checks whole decodes, not one position: it draws $n$
# seeded decodes and compares the joint law of their first 3 tokens with the target's exact law
# (G-test) and with $n$ plain samples (chi-square), each position's marginal, and the
# distribution of the target's log-probability (Kolmogorov-Smirnov). Each test runs at
# significance level $\alpha = 0.01$, Holm-adjusted across one setting's family. We keep
# $n = 400$ to fit the notebook's time budget; `tests/drafters/test_suffix.py` runs more
# settings with more samples, and asserts the mutant's rejection with estimated power
# $\ge 0.99$.

# %%
ALPHA, N_SAMPLES = 0.01, 400
settings = {s.name: s for s in default_settings(stop_id=0)}
makers = {
    "suffix": lambda s: build_drafter(
        "suffix",
        target=toy_target,
        sampling=s,
        options=DrafterOptions(memory=toy_memory(), suffix_factor=4.0, suffix_min_prob=0.05),
    ),
    "FrequencyQ (mutant)": lambda s: FrequencyQ(6, memory=toy_memory(), config=toy_config),
}
for label, setting_name in (
    ("suffix", "gamma=4 T=1"),
    ("suffix", "gamma=2 T=0.7 top_p=0.8"),
    ("FrequencyQ (mutant)", "gamma=4 T=1"),
):
    results = family_adjusted(
        check_setting(
            toy_target, None, TOY_PROMPT, settings[setting_name], n=N_SAMPLES, alpha=ALPHA,
            make_drafter=makers[label],
        )
    )  # fmt: skip
    print(f"{label}, {setting_name}: {'REJECTED' if any(r.reject for r in results) else 'passes'}")
    for r in results:
        power = ""
        if r.reject and r.df > 0:  # the chance to reject a bug this large at this n
            power = f"estimated power {estimated_power(r, ALPHA / len(results)):.2f}"
        print(
            f"    {r.name.split(': ', 1)[1]:34s} p (Holm) {r.p_value:6.3f}  "
            f"{'REJECT' if r.reject else 'ok':6s} {power}"
        )

# %% [markdown]
# The suffix drafter passes in both settings; the mutant is rejected by every test but one
# position's marginal, and the joint test against the exact law has an estimated power near 1
# at this $n$ (the power of a chi-square test at the strictest Holm level, its noncentrality
# estimated from the observed statistic, as in notebook 4). The tree drafter and its own mutant
# (children marked as sampled from the frequencies, `SampledSiblings`) get the same treatment in
# the tests.
#
# ## 5. The speedup, step by step
#
# Now the bundled target on one agent task: the first steps of the `refund` task of
# `agent-tools`, each prompt sent as one user turn through the chat template (the way
# `specviz bench` sends it), greedy, at most 32 new tokens a step to fit the notebook's time
# budget.
# One `SuffixMemory` serves the whole task: empty at step 0, handed to every step's drafter
# through `DrafterOptions(memory=...)`. Nobody feeds it by hand: when a decode runs to its end,
# `specviz.api` gives the finished request to the drafter, which adds the output to the memory
# (`SuffixMemory(prompts=True)` would add the prompt too). A decode abandoned before it finishes
# (a stream its caller stops reading) is not remembered.
#
# At each step we run plain greedy decoding and the suffix drafter ($\gamma = 16$, the most
# tokens it may propose a round; factor 2 and `min_prob` 0.1 bound it further) and count
# **tokens per target pass**. How much of that is the memory's doing, and how much the
# request's own trie (its prompt already holds the conversation)? At $T = 0$ there is a free
# way to tell: a round keeps its drafts up to the first one that differs from the target's
# greedy output and then adds the target's own next token, so the rounds of *any*
# deterministic drafter can be **replayed** along the plain decode's tokens without running
# the target. We replay a drafter without memory (the request's own text only), and, as a
# check of the replay, one that reads the shared memory before the real run feeds it.

# %%
greedy = SamplingConfig(temperature=0.0)
TASK, STEPS, NEW, GAMMA = "refund", 3, 32, 16
steps = dict(tasks(load_requests("agent-tools")))[TASK][:STEPS]
stops = stop_ids(target, tokenizer)
memory = SuffixMemory()  # one memory for the whole task, empty now


def replay(drafter, prompt, path):
    """Target passes a greedy speculative decode with drafter makes, read off the greedy
    output `path` (token ids) instead of running the target: each round keeps the drafts
    that equal path and adds path's next token."""
    drafter.prefill(prompt[:-1])
    ids, passes = list(prompt), 0
    while (done := len(ids) - len(prompt)) < len(path):
        budget = min(GAMMA, NEW - done - 1)  # the decoder's cap: never past max_new_tokens
        proposal = drafter.speculation(ids, budget, stops).tokens if budget > 0 else ()
        kept = 0  # drafts equal to the greedy tokens, up to the first that differs
        while kept < min(len(proposal), len(path) - done) and proposal[kept] == path[done + kept]:
            kept += 1
        ids += path[done : done + kept + 1]
        passes += 1
    return passes


def suffix_drafter(shared, explain=False):
    """The registered suffix drafter reading (and, after a decode, feeding) the memory shared."""
    options = DrafterOptions(memory=shared, explain=explain)
    return build_drafter("suffix", target=target, sampling=greedy, options=options)


autoregressive_generate(target, tokenizer, [1, 2, 3], sampling=greedy, max_new_tokens=2)  # warm-up
rows = []
for request in steps:
    ids = prompt_ids(tokenizer, request.prompt)  # one user turn, through the chat template
    remembered = len(memory)
    plain = autoregressive_generate(target, tokenizer, ids, sampling=greedy, max_new_tokens=NEW)
    path = list(plain.tokens)
    alone = replay(suffix_drafter(SuffixMemory()), ids, path)  # a fresh, empty memory
    expected = replay(suffix_drafter(memory), ids, path)  # reads the memory, does not feed it
    run = speculative_generate(
        target, suffix_drafter(memory, explain=True), tokenizer, ids, sampling=greedy,
        speculation=SpeculationConfig(gamma=GAMMA, max_new_tokens=NEW),
    )  # fmt: skip
    rows.append(
        dict(
            step=request.step, prompt=len(ids), remembered=remembered, tokens=len(run.tokens),
            per_pass=len(run.tokens) / run.target_calls, alone=len(path) / alone,
            replayed=expected == run.target_calls, speedup=plain.seconds / run.seconds,
            identical=run.tokens == plain.tokens, run=run, text=plain.text,
        )
    )  # fmt: skip
    r = rows[-1]
    print(
        f"step {r['step']}: prompt {r['prompt']:3d} tokens, memory {r['remembered']:3d} tokens; "
        f"{r['tokens']} new tokens, {r['per_pass']:.2f} per target pass with memory "
        f"({r['alone']:.2f} without), replay agrees: {r['replayed']}; speedup "
        f"{r['speedup']:.2f}x; identical to plain greedy: {r['identical']}"
    )
    print(f"        {r['text'][:90]!r}")
print(f"memory now: {len(memory)} tokens in {len(memory.requests)} requests")

fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
x = [r["step"] for r in rows]
axes[0].plot(x, [r["per_pass"] for r in rows], "o-", color="#0072B2", label="memory shared")
axes[0].plot(x, [r["alone"] for r in rows], "s--", color="#999999", label="no memory (replayed)")
axes[0].set_ylim(1.0, None)  # a plain decode makes one token a pass
axes[0].set_ylabel("tokens per target pass")
axes[0].legend()
axes[1].bar(x, [r["speedup"] for r in rows], color="#009E73")
axes[1].axhline(1.0, color="k", lw=1)
axes[1].set_ylabel("speedup over plain decoding (time)")
for ax in axes:
    ax.set_xticks(x)
    ax.set_xlabel(f"step of the {TASK!r} task")
fig.suptitle(f"suffix drafter, γ = {GAMMA}, greedy, {NEW} new tokens a step (bundled target)")
fig.tight_layout()
plt.show()

# %% [markdown]
# Step 0 starts with an empty memory: only the request's own text can be copied, and the two
# curves coincide. From step 1 on, the model's own earlier answers are in memory. The bundled
# 135M model does not follow the tool-calling format well: it answers each turn in a way of its
# own (the printed openings), much the same from turn to turn, and the conversation in the
# prompt does not contain those answers (it holds the workload's scripted replies), so only the
# memory can propose them. The growth is not guaranteed: a step whose answer is new gets little
# from memory (exercise 2). Every step's tokens equal plain greedy decoding's, and the replay
# reproduces the real run's target passes exactly, as it must at $T = 0$.
#
# Tokens per target pass are counts; the speedup is a ratio of two timings, and timings in a
# notebook are noisy (other processes, the first pass at a new width, the long prefill of the
# prompt that both runs pay). For measured numbers run the benchmark's memory study,
# `specviz bench memory` (`specviz bench memory --help`): it runs every step of the agent
# workloads in order, one memory per drafter and workload, with repetitions and a paired plain
# decode per request, and reports cold (first step of a task) and warm speedups, tokens per
# target pass, greedy identity, the speedup by step, and the memory's bytes and update time per
# token. For example:
#
# ```
# specviz bench memory --workloads agent-tools,agent-code \
#     --drafters suffix,tree-suffix,suffix+model:trimmed
# ```
#
# The study's results on the agent workloads, and how to reproduce them, are on the page
# `benchmarks/MEMORY.md`.
#
# ## 6. When it pays, and the hybrid
#
# Drafting from memory pays where requests repeat one another: agents (tool calls, file edits,
# queries over one schema), templated output (the same report, form or JSON shape with other
# values), and requests that quote earlier answers. A proposal costs a lookup in two tries, no
# forward pass, so when memory is right whole stretches are accepted in one target pass. It
# does not pay on fresh text: an open-ended story shares little more than common phrases with
# anything remembered, the matches are short, the adaptive budget keeps the proposals short,
# and most rounds become a plain target step (a little wider). Nothing is lost in exactness
# either way; only the proposals' usefulness changes.
#
# Between the two, most requests mix copied stretches with new text. `suffix+model` and
# `suffix+model:trimmed` (`specviz/drafters/suffix/hybrid.py`) use the suffix chain where its
# score (the expected accepted tokens by memory's frequencies) reaches `suffix_min_score`
# (1 by default), and let the draft model propose elsewhere (`-trimmed`: the draft model
# scoring only its top-ranked tokens, cheaper per step) while it pays: once the target keeps
# less than `model_min_alpha` (0.2) of the model's drafts, weak matches are proposed instead,
# the model trying again every 8th round. The share is counted across requests: the memory
# keeps it (`SuffixMemory.shares`), so a request whose first drafts miss does not shut the
# model out where it has paid before. The choice depends only on what happened before the
# round (the committed text, the memory, earlier rounds' and requests' outcomes), never
# on the round's own draws, and each proposal carries its own $q$ (one-hot for a copy, the
# draft's law for a model draft), so the output stays exact.
#
# The runs of section 5 were built with `DrafterOptions(explain=True)`, so each round emitted a
# `SuffixLookup` event: where its match was found ("memory", or "request" for the request's own
# text, which wins when both propose the same), and the speculation's score. They show where
# the proposals came from, and how many rounds a hybrid would have handed to its draft model
# (its own rounds would fall at other positions, so this is an indication, not a count):

# %%
MIN_SCORE = DrafterOptions().suffix_min_score
for r in rows:
    looks = [e for e in r["run"].events if isinstance(e, SuffixLookup)]
    weak = sum(e.score < MIN_SCORE for e in looks)
    sources = {s: sum(e.source == s for e in looks) for s in ("memory", "request", "")}
    print(
        f"step {r['step']}: {len(looks)} rounds: drafted from memory {sources['memory']}, from "
        f"the request's own text {sources['request']}, nothing matched {sources['']}; "
        f"{weak} scored below {MIN_SCORE:g} (suffix+model's draft model would draft those)"
    )

# %%
print(f"notebook ran in {time.perf_counter() - t_start:.1f} s")

# %% [markdown]
# ## Exercises
#
# ### Exercise 1
#
# A `SuffixMemory` holds at most `max_tokens` tokens and forgets the oldest requests first.
# Put the four toy traces of section 2 into `SuffixMemory(max_tokens=20)`. Which traces
# remain, and what does `speculate` propose after "plan search flights then" now (factor 2,
# `min_prob` 0.1)?

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# small = SuffixMemory(max_tokens=20)
# for text in texts:
#     small.add(ids_of(text))
# print([text_of(r) for r in small.requests])
# show(speculate([small.store], context, **bounds))
# ```
#
# Each trace has 8 tokens, so only the last two fit in 20 tokens: the third trace (a flight
# search that books) and the fourth (one that compares prices first). "search flights then"
# now occurred twice, once followed by "book" and once by "compare", so the speculation from
# the long match starts at probability 1/2, and the tie between the two children goes to the
# smaller token id. Forgetting changes the frequencies, never the exactness: whatever the
# memory holds, the proposal is deterministic and verified with a one-hot $q$.
# </details>

# %% [markdown]
# ### Exercise 2
#
# Set `STEPS = 4` and run section 5 again. What happens at step 3, and why does the memory not
# help there?

# %% [markdown]
# <details><summary>Solution</summary>
#
# Step 3's answer is a short sentence unlike the earlier answers, and it ends the turn. Neither
# the memory nor the request's own text holds anything like it, so the matches are short, the
# proposals few and mostly rejected: tokens per target pass fall to near 1 with or without
# memory, and the speedup to about 1 (a rejected round still costs a slightly wider pass than a
# plain step). Drafting from memory speeds up the repeats and leaves the rest at plain speed.
# </details>

# %% [markdown]
# ### Exercise 3
#
# Replay is free, so try other bounds without running the target: replay the last step's
# greedy output with `suffix_factor` 1, 2 and 4. Careful: the shared memory already holds that
# step's own output (its decode fed it), which a fair replay must not see.

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# last = steps[-1]
# ids = prompt_ids(tokenizer, last.prompt)
# path = list(rows[-1]["run"].tokens)
# before = memory.requests[:-1]  # what the memory held before the last step
# for factor in (1.0, 2.0, 4.0):
#     fair = SuffixMemory()
#     for request in before:
#         fair.add(request)
#     options = DrafterOptions(memory=fair, suffix_factor=factor)
#     drafter = build_drafter("suffix", target=target, sampling=greedy, options=options)
#     passes = replay(drafter, ids, path)
#     print(factor, passes, len(path) / passes)
# ```
#
# With `memory` itself the replay would find the whole answer in memory and copy it in a few
# rounds, a result no real decode could reach. A larger factor lets a match propose more
# tokens: fewer passes where memory is right, wider passes where it is not. At $T = 0$ the
# count of passes is exact, but a wider pass costs more, and only a timed run says how much
# (`specviz bench memory` with its `--suffix-gamma`).
# </details>

# %% [markdown]
# ### Exercise 4
#
# Run the hybrid `suffix+model:trimmed` on the same steps with a fresh memory and the bundled
# draft (`load_model(BUNDLED, role="draft", pack=True)` from `specviz.models.loading`, and
# `DrafterOptions(memory=..., model_gamma=3)`). In how many rounds of each step did the draft
# model draft, and how do tokens per target pass compare with the suffix drafter alone?

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# from specviz.models.loading import BUNDLED, load_model
#
# draft = load_model(BUNDLED, role="draft", pack=True)
# options = DrafterOptions(memory=SuffixMemory(), model_gamma=3)
# for request, r in zip(steps, rows):
#     drafter = build_drafter(
#         "suffix+model:trimmed", target=target, draft=draft, sampling=greedy, options=options
#     )
#     run = speculative_generate(
#         target, drafter, tokenizer, prompt_ids(tokenizer, request.prompt), sampling=greedy,
#         speculation=SpeculationConfig(gamma=GAMMA, max_new_tokens=NEW),
#     )
#     by_model = sum(1 for s in run.rounds if s.draft_forward_calls)
#     print(request.step, len(run.rounds), by_model, len(run.tokens) / run.target_calls,
#           r["per_pass"], run.tokens == r["run"].tokens)
# ```
#
# The draft model takes the rounds where memory has no confident guess: most of them at step
# 0, whose memory is empty, and fewer as the memory fills. Tokens per target pass rise where it
# drafts; where memory copies, both drafters propose the same chains. The tokens stay the plain
# greedy ones. Whether the draft model's steps pay for themselves in time is notebook 5's
# question: its cost ratio $c$ against what it gets accepted.
# </details>
