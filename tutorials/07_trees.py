# %% [markdown]
# # 7. Trees: verifying several continuations in one pass
#
# **The question.** A chain of $\gamma$ draft tokens is all or nothing after its first mistake:
# one rejection ends the round, and everything drafted behind it is thrown away. If the draft
# had offered *several* candidates for each position, one of them might have been kept. A
# **token tree** does that: each node has a few children, and the target scores every node in
# one forward pass. Does a tree really keep more tokens per target pass, how can one pass score
# many branches at once, and which rule for choosing among siblings keeps the output
# distributed *exactly* as the target's?
#
# This notebook answers with exact enumeration on toy distributions, a tiny random transformer
# built offline, and then the tree drafters of `specviz` end to end. Nothing is downloaded.

# %%
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")

import itertools
import math
import time
from functools import cache

import matplotlib.pyplot as plt
import torch
from transformers import AutoModelForCausalLM, LlamaConfig
from transformers.utils import logging as hf_logging

from specviz.api import autoregressive_generate, speculative_generate
from specviz.core.acceptance import (
    TYPICAL_DELTA,
    TYPICAL_EPSILON,
    deterministic_step,
    sampled_step,
    typical_step,
)
from specviz.core.cache import KVCache, additive_mask, forward_kwargs
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import TreeVerified
from specviz.core.sampling import logits_to_probs, sample
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.tree.decoding import tree_inputs
from specviz.tree.proposal import TokenTree
from specviz.tree.verify import EXACT_TREE, TYPICAL, verify_tree

torch.set_num_threads(1)  # tiny models and 6-word vectors: threads would only add overhead
torch.set_printoptions(precision=4, sci_mode=False)
hf_logging.disable_progress_bar()
t_start = time.perf_counter()

# %% [markdown]
# ## 1. Why a tree keeps more
#
# Take the six-word target $p$ and draft $q$ of notebook 2. With one drafted token the target
# keeps it with probability $\alpha = \sum_x \min(p(x), q(x))$. With $k$ candidates for the
# same position, the target tries them one after the other, each against a **working
# distribution** $r$ (at first $r = p$): a *step* returns the probability of keeping the child
# and the $r$ to try the next child with if it is rejected. Section 3 derives the two exact
# steps; for now we only count. Two kinds of children:
#
# - **sampled**: $k$ i.i.d. draws from $q$ (SpecInfer), tried with `sampled_step`;
# - **deterministic**: the draft's top $k$ tokens (EAGLE-2; n-gram branches are of this kind
#   too), tried with `deterministic_step`.
#
# The function below walks one sibling set for given children, and `sibling_law` averages it
# over every way the children can come out. The result is split in two: the probability that
# child token $x$ is kept, and the law of the token drawn from what is left of $r$ when every
# child is rejected. Their sum is the law of the first emitted token.

# %%
words = ["the", "a", "cat", "dog", "sat", "ran"]
V = len(words)
plain = SamplingConfig(temperature=1.0)
p = logits_to_probs(torch.tensor([2.0, 1.2, 1.5, 0.8, 0.3, -0.5], dtype=torch.float64), plain)
q = logits_to_probs(torch.tensor([3.0, 1.0, -4.0, 1.0, 0.5, -0.5], dtype=torch.float64), plain)


def try_siblings(r, q, children, step):
    """Try children in order against r (V,): P(kept child is x) (V,), P(all rejected) * r_last."""
    kept = torch.zeros_like(r)  # (V,)
    none = torch.ones((), dtype=r.dtype)  # P(every child so far rejected)
    for x in children:
        keep, after = step(r, q, x)
        kept[x] += none * keep
        none = none * (1 - keep)
        r = after
    return kept, none * r


def sibling_sets(q, k, sampled):
    """Every way k children can come out, with its probability: i.i.d. from q, or q's top k."""
    if not sampled:
        return [(q.topk(k).indices.tolist(), 1.0)]
    tuples = itertools.product(range(q.shape[0]), repeat=k)
    return [(c, float(q[list(c)].prod())) for c in tuples]


def sibling_law(p, q, k, *, sampled, step=None):
    """(P(kept child is x), P(no child kept and x drawn)) over every sibling set of size k."""
    step = step or (sampled_step if sampled else deterministic_step)
    kept, drawn = torch.zeros_like(p), torch.zeros_like(p)
    for children, weight in sibling_sets(q, k, sampled):
        a, b = try_siblings(p, q, children, step)
        kept, drawn = kept + weight * a, drawn + weight * b
    return kept, drawn


widths = (1, 2, 3, 4)
keep_any = {
    kind: [float(sibling_law(p, q, k, sampled=kind == "sampled")[0].sum()) for k in widths]
    for kind in ("sampled", "top-k")
}
print(f"alpha = sum min(p, q) = {float(torch.minimum(p, q).sum()):.4f}")
for kind, values in keep_any.items():
    print(f"P(some child kept), {kind:7s} children, k = 1..4:", [round(v, 4) for v in values])

# %% [markdown]
# With one sampled child the keep probability is $\alpha$, as in notebook 2. Every extra
# sampled child is a second chance against what the first left over, so the probability rises
# with $k$. Top-$k$ children keep child $x$ with probability $p(x)$ (derived below), so they
# keep *some* child with probability $\sum_{x \in \text{top-}k(q)} p(x)$: here the draft's top
# guesses miss "cat", which the target likes, and sampled children win at every $k$ shown. That
# order is not a law: it turns around in the toy language below, and at low temperature in
# section 5.
#
# Now whole trees. Let $p$ and $q$ depend on the previous word (a toy language; each table
# row is a next-word distribution), and compare full trees of depth 3 and width $w$ with the
# chain of the same depth ($w = 1$). Below a kept child the walk continues in that child's
# subtree, which is again a full tree, so the expected number of kept tokens obeys
#
# $$E(c, d) = \sum_x P(\text{the kept child of } c \text{ is } x)\,\big(1 + E(x, d - 1)\big),
#   \qquad E(c, 0) = 0,$$
#
# computed exactly from `sibling_law`. A round emits one more token than it keeps (the bonus,
# or the draw from what is left), so tokens per target pass $= E + 1$.

# %%
gen = torch.Generator().manual_seed(7)
table_p = torch.softmax(2.0 * torch.randn(V, V, generator=gen, dtype=torch.float64), -1)
table_q = torch.softmax(
    torch.log(table_p) + 1.0 * torch.randn(V, V, generator=gen, dtype=torch.float64), -1
)  # (V, V): row c is the next-word law after word c; the draft is the target plus noise


@cache
def expected_kept(context, depth, width, sampled):
    """Expected tokens kept from a full tree of this depth and width below word `context`."""
    if depth == 0:
        return 0.0
    kept, _ = sibling_law(table_p[context], table_q[context], width, sampled=sampled)
    return sum(float(kept[x]) * (1 + expected_kept(x, depth - 1, width, sampled)) for x in range(V))


DEPTH, ROOT = 3, 0
rows = []
for width in (1, 2, 3, 4):
    nodes = sum(width**d for d in range(1, DEPTH + 1))
    for sampled in (True, False):
        rows.append((width, nodes, sampled, expected_kept(ROOT, DEPTH, width, sampled)))
for width, nodes, sampled, e in rows:
    kind = "sampled" if sampled else "top-k  "
    print(
        f"width {width} ({nodes:3d} nodes), {kind} children: expected kept {e:.3f}, "
        f"tokens per target pass {1 + e:.3f}"
    )

fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
for kind, marker in (("sampled", "o-"), ("top-k", "s--")):
    axes[0].plot(widths, keep_any[kind], marker, label=f"{kind} children")
axes[0].set_xticks(widths)
axes[0].set_xlabel("children per node k")
axes[0].set_ylabel("P(some child kept)")
axes[0].set_title("one position, notebook 2's p and q")
axes[0].legend()
for sampled, marker in ((True, "o-"), (False, "s--")):
    es = [1 + e for w, _, s, e in rows if s == sampled]
    axes[1].plot(widths, es, marker, label="sampled children" if sampled else "top-k children")
axes[1].set_xticks(widths)
axes[1].set_xlabel("tree width w (w = 1: a chain)")
axes[1].set_ylabel("tokens per target pass")
axes[1].set_title(f"full trees of depth {DEPTH}, toy Markov p and q")
axes[1].legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# Two things to read off. First, every extra child helps, but the number of nodes (the width of
# the target's pass) grows like $w^d$, so the tokens gained per node fall fast. That is why
# practical tree drafters spend a node *budget* where it is most likely to pay (EAGLE-2 keeps
# the nodes of highest cumulative draft probability) rather than growing full trees. Second, the
# order of the two kinds is not the one of the single position above. With one child, a sampled
# chain keeps more (a top-1 child is kept with only $p(x)$). From two children on, top-$k$ wins
# here: in this toy language the draft's ranking is mostly right, so its top two or three words
# usually contain the target's choice, and top-$k$ children are distinct by construction,
# whereas i.i.d. samples from a confident $q$ often repeat its favourite word, and a repeated
# child adds little. In notebook 2's example the draft ranked "cat" last, and sampling did
# better. Neither kind wins everywhere.
#
# The recursion is a statement about the algorithm; the decoder runs
# `specviz.tree.verify.verify_tree`. A Monte-Carlo run of it on sampled width-2 trees drawn
# with one seeded generator should land within a few standard errors of the exact value.


# %%
def full_tree(root, width, depth, generator):
    """A full tree of i.i.d. sampled children, and the target's p at the root and every node."""
    tokens, parents, frontier = [], [], [(-1, root)]
    for _ in range(depth):
        level = []
        for node, word in frontier:
            for _ in range(width):
                tokens.append(sample(table_q[word], generator))
                parents.append(node)
                level.append((len(tokens) - 1, tokens[-1]))
        frontier = level
    words_at = [root, *tokens]
    tree = TokenTree(
        tokens=torch.tensor(tokens),
        parents=tuple(parents),
        q_draft=table_q[words_at],  # (N+1, V): q at the root, then after every node
        sampled=(True,) * len(tokens),
        forward_calls=depth,
    )
    return tree, table_p[words_at]  # p_target (N+1, V)


gen = torch.Generator().manual_seed(0)
ROUNDS = 1500
kept = torch.tensor(
    [
        len(verify_tree(p_target, tree, gen).path)
        for tree, p_target in (full_tree(ROOT, 2, DEPTH, gen) for _ in range(ROUNDS))
    ],
    dtype=torch.float64,
)
se = float(kept.std()) / math.sqrt(ROUNDS)
exact = expected_kept(ROOT, DEPTH, 2, True)
print(f"verify_tree, {ROUNDS} rounds: mean kept {float(kept.mean()):.3f} ± {se:.3f} (1 s.e.)")
print(f"exact recursion: {exact:.3f}  ({(float(kept.mean()) - exact) / se:+.2f} s.e.)")

# %% [markdown]
# ## 2. One pass for the whole tree: positions and the mask
#
# The target must score every node as if it had run on that node's own path: prefix, then the
# node's ancestors, then the node. All nodes go into one forward pass after the prefix, so two
# things replace the causal defaults:
#
# - **positions**: a node at depth $d$ sits at position (root's position) $+ d$, where the root
#   is the last committed token. Siblings share a position: they are alternatives for the same
#   slot in the text, not consecutive tokens.
# - **visibility**: node $i$ may attend to the whole prefix and to its ancestors and itself,
#   nothing else; `TokenTree.visible()` is that ancestors-or-self matrix, and
#   `tree_inputs` puts it next to the prefix's causal block.
#
# A small tree over token ids of a random model (the ids mean nothing): two branches at the
# root, a fork below node 0.

# %%
tree = TokenTree(
    tokens=torch.tensor([11, 4, 20, 7, 9, 15]),
    parents=(-1, -1, 0, 0, 1, 2),
    q_draft=torch.zeros(7, 33),  # not needed to score the tree
    sampled=(True,) * 6,
    forward_calls=0,
)
prefix = [3, 7, 1, 4, 9]
print("depths:", tree.depths, " path to node 5:", tree.path(5))
print("visible (node i may attend to node j):")
print(tree.visible().int())
positions, visible = tree_inputs(tree, fresh=len(prefix), cached=0, start=0)
print("positions (prefix, then nodes):", positions.tolist())

fig, ax = plt.subplots(figsize=(5.2, 4.2))
ax.imshow(visible.int(), cmap="Blues")
labels = [f"p{i}" for i in range(len(prefix))] + [f"n{i}" for i in range(len(tree.parents))]
ax.set_xticks(range(len(labels)), labels)
ax.set_yticks(
    range(len(labels)), [f"{s} @{pos}" for s, pos in zip(labels, positions.tolist(), strict=True)]
)
ax.axvline(len(prefix) - 0.5, color="#D55E00")
ax.axhline(len(prefix) - 0.5, color="#D55E00")
ax.set_title("who may attend to whom (query rows, key columns)")
fig.tight_layout()
plt.show()

# %% [markdown]
# The boolean matrix goes into the model as an **additive** float mask: attention computes
# $\operatorname{softmax}(QK^\top/\sqrt{d} + M)$, so $M = 0$ where a key is visible and
# $M = -\infty$ where it is not, and $e^{-\infty} = 0$ removes that key from the softmax
# (`specviz.core.cache.additive_mask`). A float mask of 1 and 0 would be *added* as well: it
# adds 1 to the visible scores and 0 to the hidden ones, which reweights the keys but hides
# none (a boolean mask handed to eager attention is added as 1/0 the same way).
#
# Now a real check. A 2-layer Llama with random weights over 33 tokens, built from a config in
# float64, scores the prefix and the tree in one pass through `KVCache.forward`; each node's
# row must equal the logits of a separate plain forward over prefix + that node's path.


# %%
def tiny_llama(seed, scale=3.0):
    """A random 2-layer Llama over 33 tokens in float64 (weights drawn from a seeded generator)."""
    config = LlamaConfig(
        vocab_size=33, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        eos_token_id=0, bos_token_id=0, attn_implementation="eager",
    )  # fmt: skip
    model = AutoModelForCausalLM.from_config(config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() > 1:  # sharper than the default init: random models are near-uniform
                param.copy_(
                    torch.randn(param.shape, generator=gen) * scale / param.shape[-1] ** 0.5
                )
    return model.to(torch.float64).eval()


def plain_logits(model, ids):
    """Next-token logits after ids, by one ordinary forward pass without a cache."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0, -1]


def tree_pass(model):
    """A fresh cache holding the prefix and the tree, and the logits at the root and each node."""
    cache = KVCache(model)
    tokens = torch.cat([torch.tensor(prefix), tree.tokens])
    logits = cache.forward(tokens, keep=len(tree.parents) + 1, positions=positions, visible=visible)
    return cache, logits  # logits (N+1, V): row 0 after the root, row i + 1 after node i


target = tiny_llama(seed=1)
cache, logits = tree_pass(target)
path_ids = {i: prefix + tree.tokens[tree.path(i)].tolist() for i in range(len(tree.parents))}
errors = [float((logits[0] - plain_logits(target, prefix)).abs().max())]
errors += [float((logits[i + 1] - plain_logits(target, path_ids[i])).abs().max()) for i in path_ids]
print("max |tree-pass logits - separate forward| at root, n0..n5:", [f"{e:.1e}" for e in errors])
print("the mask's first node row:", additive_mask(visible, target)[0, 0, len(prefix)].tolist())

ones_zeros = visible.to(torch.float64)[None, None]  # the wrong mask: 1 / 0, added to the scores
with torch.no_grad():
    wrong = target(
        input_ids=torch.cat([torch.tensor(prefix), tree.tokens])[None],
        position_ids=positions[None],
        attention_mask=ones_zeros,
        use_cache=True,
        **{forward_kwargs(target)[0]: KVCache(target).kv},
    ).logits[0, -1]
print(f"with a 1/0 mask, node 5's logits are off by {float((wrong - logits[-1]).abs().max()):.2f}")

# %% [markdown]
# Agreement to rounding error: one pass, six paths. (`sdpa` attention takes the same float
# mask; `specviz` refuses backends that would ignore a custom mask.)
#
# ### Keeping only the kept path
#
# After the verdict the cache holds the prefix and *all* nodes, but the text continues from one
# path. `TreeDecoder` compacts the cache with `KVCache.keep_only(indices)`, a per-layer gather
# along the sequence axis that keeps the prefix and the kept path's nodes and drops the rest.
# Two tempting shortcuts are wrong. Leaving the rejected nodes in place lets the next token
# attend to branches that were never emitted. Zeroing their keys and values does not remove
# them either: a zero key gives the score $q \cdot 0 = 0$, and $e^0 = 1$ is a full-weight
# entry in the softmax's denominator. Here is one attention row by hand:

# %%
scores = torch.tensor([1.2, 0.3, -0.4], dtype=torch.float64)
zeroed = torch.cat([scores, torch.zeros(2, dtype=torch.float64)])  # two rejected keys zeroed
print("weights, keys removed:", torch.softmax(scores, -1))
print("weights, keys zeroed: ", torch.softmax(zeroed, -1)[:3], "+", torch.softmax(zeroed, -1)[3:])

# %% [markdown]
# With zero values the two ghost entries add nothing to the numerator, but they take their
# share of the weight: the real values are scaled down. In the model, with node 5's path
# (n0, n2, n5) kept and one more token fed:

# %%
keep_path = tree.path(5)
base = len(prefix)
after = [*path_ids[5], 2]  # the kept path, then one new token
want = plain_logits(target, after)
at = torch.tensor([len(after) - 1])  # the new token's position


def next_logits(cache):
    return cache.forward(torch.tensor([2]), positions=at)[-1]


compacted, _ = tree_pass(target)
compacted.keep_only(torch.tensor([*range(base), *(base + i for i in keep_path)]))
stale, _ = tree_pass(target)
ghost, _ = tree_pass(target)
rejected = [base + i for i in range(len(tree.parents)) if i not in keep_path]
for layer in ghost.kv.layers:  # keys and values (batch, heads, positions, head_dim)
    layer.keys[:, :, rejected] = 0.0
    layer.values[:, :, rejected] = 0.0
for name, c in (("keep_only (gathered)", compacted), ("left in place", stale), ("zeroed", ghost)):
    error = float((next_logits(c) - want).abs().max())
    print(f"{name:21s}: {len(c):2d} cached positions, max |logit error| {error:.1e}")

# %% [markdown]
# ## 3. The exact sibling rules
#
# The chain rule of notebook 2 has two parts: keep $x \sim q$ with $\min(1, p(x)/q(x))$, and
# on rejection draw from $\operatorname{norm}(\max(0, p - q))$. The proof showed more than we
# used: *whatever* distribution $r$ we are aiming at, "keep $x \sim q$ with
# $\min(1, r(x)/q(x))$, otherwise produce a draw from $r' = \operatorname{norm}(\max(0, r -
# q))$" emits exactly $r$. Nothing requires the replacement to be drawn *immediately*: any
# procedure that produces a draw from $r'$ will do.
#
# **Sampled children** (recursive rejection sampling, SpecInfer). Children $x_1, \dots, x_k$
# are i.i.d. from $q$. Claim: trying them in order, each against the current $r$ with the
# rule above and $r \leftarrow \operatorname{norm}(\max(0, r - q))$ after each rejection, and
# drawing from the final $r$ if all are rejected, emits exactly $r_1 = p$. By induction on
# $k$: with $k = 0$ we draw from $r$. For $k \ge 1$, the first child is tried by the one-draft
# rule, and on rejection the remaining $k - 1$ children, independent of $x_1$ and of its
# uniform, run the same procedure against $r_2$, which by induction produces a draw from $r_2$:
# exactly the replacement the one-draft rule needs. So the output is $r_1 = p$. The two
# conditions are visible in the proof: the children must be *independent* draws from the *q
# they are tried against* (no deduplication, no top-k), and each needs a fresh uniform.
#
# **Deterministic children** (top-$k$ of $q$, n-gram branches). Nothing was sampled, so the
# honest "$q$" of a chosen token $x$ is the point mass $\mathbb{1}_x$ (notebook 6). The
# one-draft rule with $q = \mathbb{1}_x$ keeps $x$ with $\min(1, r(x)/1) = r(x)$ and leaves
# $\operatorname{norm}(\max(0, r - \mathbb{1}_x))$: $r$ with $x$ zeroed, renormalised. The
# same induction applies (the next child is fixed in advance, so independent of the verdict):
#
# $$P(\text{emit } x_1) = r(x_1), \qquad
#   P(\text{emit } y \ne x_1) = (1 - r(x_1))\,\frac{r(y)}{1 - r(x_1)} = r(y).$$
#
# Below a kept node the walk repeats at that node with the target's $p$ there, so each level
# follows the target's conditional law given the tokens before it, and the emitted sequence
# follows the target's joint law (the chain argument of notebook 4, level by level).
#
# First, `deterministic_step` is `sampled_step` with a one-hot $q$:

# %%
for x in range(V):
    onehot = torch.nn.functional.one_hot(torch.tensor(x), V).to(p)
    keep_d, after_d = deterministic_step(p, q, x)
    keep_s, after_s = sampled_step(p, onehot, x)
    assert torch.allclose(keep_d, keep_s) and torch.allclose(after_d, after_s)
print("deterministic_step(r, q, x) == sampled_step(r, one-hot(x), x) for every x")

# %% [markdown]
# Then the law of the first emitted token, by exact enumeration over every sibling set, for
# both kinds of children, $k = 1, \dots, 4$, and two drafts: notebook 2's $q$ and a draft that
# is wrong about almost everything.

# %%
bad_q = logits_to_probs(torch.tensor([-3.0, 0.0, -3.0, 2.5, 2.5, 3.0], dtype=torch.float64), plain)
worst = 0.0
for draft_q, name in ((q, "notebook 2's q"), (bad_q, "a bad q")):
    for sampled in (True, False):
        errs = []
        for k in widths:
            kept_k, drawn_k = sibling_law(p, draft_q, k, sampled=sampled)
            errs.append(float((kept_k + drawn_k - p).abs().max()))
        worst = max(worst, *errs)
        kind = "sampled" if sampled else "top-k  "
        print(f"{name:14s} {kind}: max |law - p| for k = 1..4:", [f"{e:.0e}" for e in errs])
print(f"worst: {worst:.1e} (below 1e-12: {worst < 1e-12})")

# %% [markdown]
# ## 4. A lossy rule, caught
#
# Medusa's **typical acceptance** keeps a child $x$ whenever the target finds it plausible
# enough, $p(x) > \min(\varepsilon, \delta\, e^{-H(p)})$ with the entropy $H(p)$
# ($\varepsilon = 0.3$, $\delta = 0.09$), tries the next child otherwise, and falls back to a
# draw from $p$ when none passes. There is no residual, so nothing compensates for what the
# threshold lets through. It keeps many children, which is its purpose, but the emitted law
# is no longer $p$. `specviz` has it as `specviz.tree.verify.TYPICAL` (step:
# `typical_step`), labelled `exact=False`. The same enumeration gives its law:

# %%
entropy = float(-(p * p.log()).sum())
threshold = min(TYPICAL_EPSILON, TYPICAL_DELTA * math.exp(-entropy))
print(f"H(p) = {entropy:.3f}; threshold = {threshold:.4f}; smallest p(x) = {float(p.min()):.4f}")
K = 3
laws = {"target p": p}
for sampled in (True, False):
    kind = "sampled" if sampled else "top-3"
    kept_e, drawn_e = sibling_law(p, q, K, sampled=sampled)
    kept_t, drawn_t = sibling_law(p, q, K, sampled=sampled, step=typical_step)
    laws[f"exact, {kind}"] = kept_e + drawn_e
    laws[f"typical, {kind}"] = kept_t + drawn_t
for name, law in laws.items():
    tv = 0.5 * float((law - p).abs().sum())
    print(f"{name:17s}: TV to p {tv:.4f}  law {[round(v, 3) for v in law.tolist()]}")

fig, ax = plt.subplots(figsize=(9, 3.4))
bar = 0.8 / len(laws)
colors = ("#0072B2", "#009E73", "#D55E00", "#56B4E9", "#E69F00")
for i, ((name, law), color) in enumerate(zip(laws.items(), colors, strict=True)):
    offsets = [x + (i - 2) * bar for x in range(V)]
    ax.bar(offsets, law.tolist(), bar, label=name, color=color, hatch="//" if "typ" in name else "")
ax.set_xticks(range(V), words)
ax.set_ylabel("P(first emitted token)")
ax.set_title(f"first emitted token, {K} children: exact rules vs typical acceptance")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# This $p$ is flat enough that every word clears the threshold, so the first child is always
# kept: with sampled children the output law is the draft's $q$, with top-$k$ children it is
# always the draft's favourite word. On sharper distributions the threshold bites more often
# and the error is smaller, but it is zero only by accident. The equivalence suite of
# notebook 4 sees it as it sees any other bug: `specviz verify --drafter tree-model --mutant
# tree_typical` runs a tree decode with this rule and rejects it. When you do run it (it is
# never the default), every `TreeVerified` event and the result are marked `exact=False`.
#
# ## 5. End to end: tree drafters against a chain
#
# Now the real decoder, through the one-call API. The target is the tiny Llama above; the
# draft is a copy with a little relative noise on every weight, so the two agree only partly.
# `build_drafter("tree-model", ...)` grows a tree with the draft model, one draft pass per
# level, keeping the `tree_nodes` nodes of highest cumulative draft log-probability (top-$k$,
# deterministic children); `"tree-model:sampled"` draws `tree_width` children per node from $q$
# until the node budget is used up. The chain is the ordinary `"model"` drafter with
# $\gamma$ equal to the tree depth. We count **tokens per target pass**, the quantity the tree
# is meant to raise; each tree pass is wider (up to 9 tokens instead of 4), and what a wider
# pass costs depends on the hardware, so no timings here.


# %%
def noisy_copy(model, seed, noise):
    """The model with relative Gaussian noise on every weight matrix (a partly agreeing draft)."""
    draft = tiny_llama(seed=0)
    draft.load_state_dict(model.state_dict())
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in draft.parameters():
            if param.dim() > 1:
                param.add_(
                    noise * param.std() * torch.randn(param.shape, generator=gen, dtype=param.dtype)
                )
    return draft


draft = noisy_copy(target, seed=2, noise=0.05)
options = DrafterOptions(tree_nodes=8, tree_depth=3, tree_width=3)
prompts = ([3, 7, 1, 4, 9], [5, 5, 2], [11, 20, 8, 1])
NEW = 100


def run(name, temperature, rule=EXACT_TREE):
    """Tokens per target pass over the prompts, drafted tokens per round, and the results."""
    results = []
    for seed, prompt in enumerate(prompts):
        sampling = SamplingConfig(temperature=temperature, seed=seed)
        drafter = build_drafter(
            name, target=target, draft=draft, sampling=sampling, options=options
        )
        result = speculative_generate(
            target, drafter, None, prompt, sampling=sampling, stop=(),
            speculation=SpeculationConfig(gamma=options.tree_depth, max_new_tokens=NEW),
            tree_rule=rule,
        )  # fmt: skip
        results.append(result)
    tokens, passes = sum(len(r.tokens) for r in results), sum(r.target_calls for r in results)
    drafted = sum(r.proposed for r in results) / sum(len(r.rounds) for r in results)
    return tokens / passes, drafted, results


temperatures = (0.0, 0.7, 1.0)
drafters = {
    "chain (model, γ = 3)": "model",
    "tree-model (top-k)": "tree-model",
    "tree-model:sampled": "tree-model:sampled",
}
table = {}
for temperature in temperatures:
    for label, name in drafters.items():
        per_pass, drafted, results = run(name, temperature)
        table[label, temperature] = per_pass
        print(
            f"T = {temperature:.1f}  {label:21s}: {per_pass:.2f} tokens per target pass "
            f"({drafted:.1f} drafted tokens per round)"
        )
        if temperature == 0.0:
            same = all(
                r.tokens == autoregressive_generate(
                    target, None, prompt, sampling=SamplingConfig(temperature=0.0),
                    max_new_tokens=NEW, stop=(),
                ).tokens
                for r, prompt in zip(results, prompts, strict=True)
            )  # fmt: skip
            print(f"          identical to plain greedy decoding: {same}")

fig, ax = plt.subplots(figsize=(8, 3.6))
bar = 0.8 / len(drafters)
for i, (label, color) in enumerate(zip(drafters, ("#999999", "#0072B2", "#009E73"), strict=True)):
    xs = [t + (i - 1) * bar for t in range(len(temperatures))]
    ax.bar(xs, [table[label, t] for t in temperatures], bar, label=label, color=color)
ax.set_xticks(range(len(temperatures)), [f"T = {t}" for t in temperatures])
ax.set_ylim(0, 1.3 * max(table.values()))
ax.set_ylabel("tokens per target pass")
ax.set_title(f"tiny Llama pair, depth 3, {options.tree_nodes}-node trees, {NEW} tokens × 3")
ax.legend(fontsize=8, ncol=3, loc="upper left")
fig.tight_layout()
plt.show()

# %% [markdown]
# Read the bars with section 1 in mind. At $T = 0$ the target's $p$ is one-hot: a top-$k$
# child is kept exactly when it is the target's argmax, so three guesses per level beat one,
# and the output is still the plain greedy output token for token. A sampled tree gains
# nothing there: every draw from a one-hot $q$ is the same token, so the drafter proposes one
# child per node and the tree *is* the chain (3 drafted tokens per round). As the temperature
# rises, a top-$k$ child is kept with only $p(x)$, while a sampled child is kept with
# $\min(1, p(x)/q(x))$, close to 1 for a draft this close to the target, and its siblings get
# second chances against the residual. So in this run the sampled tree leads at $T = 1$, and
# the top-$k$ tree falls behind even the chain there: its first child is kept less often than
# the chain's single draft, and more candidates do not make up for it. Which tree to use
# depends on the temperature and on how close the draft is; which one is worth its wider pass
# on given hardware is a question for the benchmarks.
#
# Finally, the lossy rule through the same API: typical acceptance on the top-$k$ tree at
# $T = 1$ keeps more tokens per pass, and says so in every round's verdict.

# %%
per_pass, _, results = run("tree-model", 1.0, rule=TYPICAL)
verdicts = {(e.rule, e.exact) for r in results for e in r.events if isinstance(e, TreeVerified)}
print(f"typical acceptance: {per_pass:.2f} tokens per target pass; verdicts (rule, exact):")
print(f"  {verdicts}; result.exact = {[r.exact for r in results]}")

# %%
print(f"notebook ran in {time.perf_counter() - t_start:.1f} s")

# %% [markdown]
# ## Exercises
#
# ### Exercise 1
#
# For sampled children the rejection updates do not depend on which token was drafted, so
# $P(\text{all } k \text{ rejected}) = \prod_{j=1}^{k} \beta_j$ with
# $\beta_j = 1 - \sum_x \min(r_j(x), q(x))$ and $r_{j+1} = \operatorname{norm}(\max(0, r_j -
# q))$. Compute this product for $k = 1..4$ with `specviz.core.acceptance.residual` and check
# it against `keep_any["sampled"]`. What happens as $k \to \infty$?

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# from specviz.core.acceptance import residual
#
# r, none = p, 1.0
# for k in widths:
#     none *= 1 - float(torch.minimum(r, q).sum())
#     r = residual(r, q)
#     print(k, 1 - none, keep_any["sampled"][k - 1])
# ```
#
# The two columns agree to rounding error. Each $\beta_j < 1$ as long as $r_j$ and $q$
# overlap, so the keep probability tends to 1 when $q$ covers the support of $p$; where $q$
# puts no mass (a word the draft cannot produce), no number of samples will ever propose it,
# and the residual ends up concentrated there.
# </details>

# %% [markdown]
# ### Exercise 2
#
# A drafter takes the top 3 tokens of $q$ but labels them `sampled=True`, so they are tried
# with `sampled_step` against $q$. Compute the first-token law by enumeration and its TV
# distance from $p$.

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# top3 = q.topk(3).indices.tolist()
# kept_m, drawn_m = try_siblings(p, q, top3, sampled_step)
# law = kept_m + drawn_m
# print(law, 0.5 * float((law - p).abs().sum()))
# ```
#
# The law is not $p$: `sampled_step` assumes each child was a fresh draw from $q$, and
# credits the rejection branch with the mass $q$ would have spent on *other* tokens. Top-$k$
# children were not drawn from $q$ at all; their honest law is one-hot, which is what
# `deterministic_step` uses.
# </details>

# %% [markdown]
# ### Exercise 3
#
# A drafter samples 3 children from $q$ and drops duplicates before verification (why verify
# "the" twice?), still using the sampled rule. Is the first-token law still $p$? Enumerate:
# for every 3-tuple, keep the first occurrence of each token, and weight by the tuple's
# probability.

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# law = torch.zeros_like(p)
# for children, weight in sibling_sets(q, 3, sampled=True):
#     distinct = list(dict.fromkeys(children))
#     kept_d, drawn_d = try_siblings(p, q, distinct, sampled_step)
#     law += weight * (kept_d + drawn_d)
# print(law, 0.5 * float((law - p).abs().sum()))
# ```
#
# It is not: the TV distance is clearly above rounding error. After a rejection the proof
# needs the next child to be an independent draw from $q$, but once duplicates are dropped
# the second child is a draw from $q$ *conditioned on differing from the first*, and the
# residual no longer compensates for the right thing. A duplicate of a rejected child is
# always rejected again (a child is rejected only where $r(x) < q(x)$, and there the
# residual puts $r'(x) = 0$), yet trying it is not wasted: its rejection moves $r$ one more
# step, to what the remaining children and the final draw must make up for.
# </details>
