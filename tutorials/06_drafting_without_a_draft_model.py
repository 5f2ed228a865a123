# %% [markdown]
# # 6. Drafting without a draft model
#
# **The question.** Speculative decoding needs *some* cheap guess of the next few tokens, and
# the acceptance rule keeps the output exact whatever the guess is, as long as we know the
# distribution $q$ the guess was drawn from. So do we need a second, separately trained model at
# all? This notebook tries two drafters that need none: **n-gram prompt lookup** (copy what
# followed the same words earlier in the text) and **self-speculation** (let the target's own
# first $k$ layers guess). Then it lets the number of drafted tokens $\gamma$ change from round
# to round.
#
# Everything runs on the bundled target (SmolLM2-135M-Instruct) or on toy models, and every
# number is computed by the cell that prints it.

# %%
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")

import statistics
import time

import matplotlib.pyplot as plt
import torch
from transformers.utils import logging as hf_logging

from specviz.api import autoregressive_generate, encode, speculative_generate
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import Proposed, RoundSummary
from specviz.core.policy import FixedGamma
from specviz.core.sampling import logits_to_probs
from specviz.drafters.early_exit import ADAPTERS, build_early_exit
from specviz.drafters.ngram import lookup
from specviz.drafters.options import DrafterOptions
from specviz.drafters.registry import build_drafter
from specviz.gamma import theory
from specviz.gamma.policies import HeuristicGamma, TheoryGamma
from specviz.models.loading import BUNDLED, load_model, load_pair
from specviz.stats.suite import check_setting, default_settings, family_adjusted
from specviz.stats.toy import random_pair
from specviz.workloads import load_requests

torch.set_num_threads(1)  # small forward passes; a second thread mostly adds noise here
hf_logging.disable_progress_bar()
t_start = time.perf_counter()
pair = load_pair(draft=None)  # no draft model: that is the point
target, tokenizer = pair.target, pair.tokenizer
VOCAB = int(target.config.vocab_size)

# %% [markdown]
# ## N-gram prompt lookup
#
# Many requests ask the model to repeat text it was given: fix the typos, change the tense,
# reformat, quote the code back with one line changed. The cheapest possible drafter exploits
# that: take the last $n$ tokens written, find their latest earlier occurrence in prompt +
# output, and propose the $\gamma$ tokens that followed it (longest $n$ first, from `max_ngram`
# down to `min_ngram`; nothing at all if there is no match).

# %%
ids = tokenizer("the cat sat on the mat . the cat")["input_ids"]
print("text so far:", [tokenizer.decode([t]) for t in ids])
proposal = lookup(ids, gamma=4, max_ngram=3, min_ngram=1)
print("proposal:   ", [tokenizer.decode([t]) for t in proposal])

# %% [markdown]
# On the repeat-the-prompt workload (rewrite a paragraph in the past tense), let us watch the
# first rounds: what the lookup proposed, how much of it the target kept, and the target's own
# token that ends the round (the bonus or the resampled token). Greedy decoding, $\gamma = 6$.

# %%
repeat = load_requests("repeat")[0]
repeat_ids = encode(tokenizer, repeat.prompt)
NEW = 40
greedy = SamplingConfig(temperature=0.0)
autoregressive_generate(target, tokenizer, repeat_ids[:8], max_new_tokens=2)  # warm-up

ngram_run = speculative_generate(
    target,
    build_drafter("ngram", target=target, sampling=greedy),
    tokenizer,
    repeat_ids,
    sampling=greedy,
    speculation=SpeculationConfig(gamma=6, max_new_tokens=NEW),
)
plain_run = autoregressive_generate(
    target, tokenizer, repeat_ids, sampling=greedy, max_new_tokens=NEW
)


def show_rounds(result, limit=8):
    """One line per round: proposed tokens, how many were kept, the token that closes it."""
    events = list(result.events)
    for summary in [e for e in events if isinstance(e, RoundSummary)][:limit]:
        r = summary.round
        proposed = [e.token for e in events if isinstance(e, Proposed) and e.round == r]
        kept = summary.accepted
        closing = result.tokens[sum(s.emitted for s in result.rounds[:r]) + summary.emitted - 1]
        print(
            f"round {r:2d}: proposed {tokenizer.decode(proposed)!r:42.42} kept {kept}/"
            f"{len(proposed)}, then {tokenizer.decode([closing])!r}"
        )


show_rounds(ngram_run)
print("\noutput:", repr(ngram_run.text))
print(f"identical to plain greedy: {ngram_run.tokens == plain_run.tokens}")
print(
    f"acceptance {ngram_run.acceptance_rate:.2f}; {len(ngram_run.tokens)} tokens in "
    f"{ngram_run.target_calls} target calls ({len(ngram_run.tokens) / ngram_run.target_calls:.2f} "
    f"tokens per call); time {ngram_run.seconds:.2f} s vs plain {plain_run.seconds:.2f} s "
    f"({plain_run.seconds / ngram_run.seconds:.2f}x)"
)

# %% [markdown]
# The drafter costs nothing to run ($c \approx 0$: a list search, no forward pass), so a round
# is one target pass, and every accepted token is a target pass saved. When the output copies
# the prompt, whole phrases are accepted at once; when the model departs from the text (the
# tense change), the lookup either finds nothing or proposes the old wording and is rejected
# at the first changed token, and the round degenerates to one plain step. A rejection costs
# little here, only the extra width of the verification pass.
#
# The same drafter on the other workloads, where the text does not repeat itself as much:

# %%
fig, ax = plt.subplots(figsize=(9, 3.5))
ax.bar(
    [s.round for s in ngram_run.rounds],
    [s.emitted for s in ngram_run.rounds],
    color="#0072B2",
    label="emitted per round (repeat)",
)
ax.plot(
    [s.round for s in ngram_run.rounds],
    [s.proposed for s in ngram_run.rounds],
    "k_",
    ms=14,
    mew=2,
    label="proposed",
)
ax.set_xlabel("round")
ax.set_ylabel("tokens")
ax.set_title("N-gram lookup on the repeat-the-prompt request (γ = 6, greedy)")
ax.legend()
plt.tight_layout()
plt.show()

for workload in ("code", "prose"):
    req = load_requests(workload)[0]
    run = speculative_generate(
        target,
        build_drafter("ngram", target=target, sampling=SamplingConfig(temperature=req.temperature)),
        tokenizer,
        req.prompt,
        sampling=SamplingConfig(temperature=req.temperature, seed=0),
        speculation=SpeculationConfig(gamma=6, max_new_tokens=24),
    )
    print(
        f"{workload:6s} T={req.temperature:g}: proposed {run.proposed:3d}, accepted "
        f"{run.accepted:3d}, {len(run.tokens) / run.target_calls:.2f} tokens per target call"
    )

# %% [markdown]
# ## Why it stays exact when sampling
#
# The lookup is deterministic, so the "draft distribution" is a point mass:
# $q = \mathbb{1}_x$. The acceptance rule then keeps $x$ with probability
# $\min(1, p(x)/1) = p(x)$, and after a rejection draws from
# $\operatorname{norm}(\max(0, p - \mathbb{1}_x))$, which is $p$ with $x$ removed and
# renormalised: $p(y)/(1 - p(x))$ for $y \ne x$. So
#
# $$P(\text{emit } x) = p(x), \qquad
# P(\text{emit } y) = (1 - p(x)) \cdot \frac{p(y)}{1 - p(x)} = p(y),$$
#
# exactly the target's law, at any temperature. (A drafter that proposes a fixed token but
# reports some *other* $q$ would break this; the one-hot $q$ is not an approximation, it is the
# truth about how the token was chosen.)
#
# We check it with the equivalence suite of notebook 4, on the toy pair with a repetitive
# prompt so the lookup has something to find, and with the n-gram drafter swapped in through
# `make_drafter`.

# %%
toy_target, _ = random_pair(6, seed=0, sharpness=1.0, draft_noise=1.0)
settings = {s.name: s for s in default_settings(stop_id=0)}
results = []
for name in ("gamma=4 T=1", "gamma=2 T=0.7 top_p=0.8"):
    results += check_setting(
        toy_target,
        None,
        [1, 2, 3, 1, 2],
        settings[name],
        n=400,
        alpha=0.01,
        make_drafter=lambda s: build_drafter("ngram", target=toy_target, sampling=s),
    )
for r in family_adjusted(results):
    print(f"{r.name:56s} p (Holm) {r.p_value:6.3f}  {'REJECT' if r.reject else 'ok'}")

# %% [markdown]
# ## Self-speculation: the target's first layers as the draft
#
# A transformer refines one residual stream layer by layer, and the final norm and output head
# can be applied to the stream after *any* layer $k$. That gives a draft for free: the first
# $k$ of the target's layers plus its head (LayerSkip, Draft & Verify). It shares all weights
# and the tokenizer with the target; its cost per step is roughly $c \approx k/L$ of a target
# step for an $L$-layer target. The catch is $\alpha$: intermediate layers were never trained
# to be read out, so an *untrained* early exit can be a poor predictor. A small adapter trained
# to match the target's output (`python -m specviz.train.draft.early_exit`) fixes part of that.
# `build_early_exit` uses an adapter shipped for exit $k$ when there is one and the plain exit
# otherwise; the first line of output says which. We measure whatever we get, as it is.

# %%
L = target.config.num_hidden_layers
shipped = sorted(p.name for p in ADAPTERS.glob("adapter_k*.safetensors"))
print(f"trained early-exit adapters shipped in {ADAPTERS.name}/: {shipped or 'none'}")

code = load_requests("code")[0]
code_ids = encode(tokenizer, code.prompt)
code_plain = autoregressive_generate(
    target, tokenizer, code_ids, sampling=greedy, max_new_tokens=24
)
seq = torch.tensor([code_ids + list(code_plain.tokens)])
rows = slice(len(code_ids) - 1, len(code_ids) - 1 + len(code_plain.tokens))


@torch.no_grad()
def step_seconds(model, prompt_ids, repeats=5):
    """Median seconds of one cached single-token decode step."""
    cache = KVCache(model)
    cache.forward(torch.tensor(prompt_ids[:-1]))
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        cache.forward(torch.tensor(prompt_ids[-1:]))
        times.append(time.perf_counter() - start)
        cache.crop(len(prompt_ids) - 1)
    return statistics.median(times[1:])


with torch.no_grad():
    target_logits = target(input_ids=seq).logits[0, rows]
t_target = step_seconds(target, code_ids)
exits = (2, 4, 8, 12, 18, 24)
exit_stats = {}
for k in exits:
    exit_model, adapter_file = build_early_exit(target, k)  # the shipped adapter for k, if any
    with torch.no_grad():
        exit_logits = exit_model(input_ids=seq).logits[0, rows]
    alpha = {}
    for temp in (0.0, 1.0):
        s = SamplingConfig(temperature=temp)
        p, q = logits_to_probs(target_logits, s), logits_to_probs(exit_logits, s)
        alpha[temp] = float(theory.alpha(p, q).mean())
    c = step_seconds(exit_model, code_ids) / t_target
    g = theory.optimal_gamma(alpha[0.0], c)
    exit_stats[k] = dict(alpha0=alpha[0.0], alpha1=alpha[1.0], c=c, gamma=g)
    kind = "adapter" if adapter_file else "plain exit"
    print(
        f"exit after layer {k:2d}/{L} ({kind}): alpha greedy {alpha[0.0]:.2f}, "
        f"T=1 {alpha[1.0]:.2f}; "
        f"c {c:.2f}; best bound {theory.speedup_bound(alpha[0.0], g, c):.2f}x at gamma {g}"
    )

fig, ax = plt.subplots(figsize=(7, 3.8))
ax.plot(exits, [exit_stats[k]["alpha0"] for k in exits], "o-", label="α (greedy)")
ax.plot(exits, [exit_stats[k]["alpha1"] for k in exits], "s-", label="α (T = 1)")
ax.plot(exits, [exit_stats[k]["c"] for k in exits], "^--", label="c (measured)")
ax.plot(exits, [k / L for k in exits], ":", color="grey", label="k / L")
ax.set_xlabel(f"exit layer k (of {L})")
ax.set_ylabel("α or c")
ax.set_title("Early exit on a code continuation" + (" (some with adapters)" if shipped else ""))
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# Read the table with the break-even rule of notebook 5 in mind: speculation can only pay if
# $\alpha > c$. Without an adapter the shallow exits are cheap but rarely agree with the target;
# the deep ones agree more but cost nearly a full target step. Note also that $c$ stays well
# above $k/L$ for small $k$: the embedding and the output head (a $576 \times 49152$ matrix,
# about a fifth of this model's parameters) are paid in full by every exit, so a shallow exit of
# a small model is not as cheap as its layer count suggests. The exit is only worth using where
# its bound is above 1, and an adapter is the lever that moves $\alpha$ up at fixed $c$.
#
# We now run self-speculation once, at the exit with the best bound (even if that bound is
# below 1, in which case expect it to be slower than plain decoding), and check that the output
# is the target's own greedy output.

# %%
best_k = max(
    exits,
    key=lambda k: theory.speedup_bound(
        exit_stats[k]["alpha0"], exit_stats[k]["gamma"], exit_stats[k]["c"]
    ),
)
self_spec = speculative_generate(
    target,
    build_drafter(
        "early-exit", target=target, sampling=greedy, options=DrafterOptions(exit_layer=best_k)
    ),
    tokenizer,
    code_ids,
    sampling=greedy,
    speculation=SpeculationConfig(gamma=exit_stats[best_k]["gamma"], max_new_tokens=12),
)
plain_12 = code_plain.tokens[:12]
print(
    f"self-speculation, exit {best_k}, gamma {exit_stats[best_k]['gamma']}: "
    f"acceptance {self_spec.acceptance_rate:.2f}, "
    f"{len(self_spec.tokens) / self_spec.target_calls:.2f} tokens per target call, "
    f"{self_spec.seconds:.2f} s for 12 tokens vs plain {code_plain.seconds / 2:.2f} s "
    "(half of the plain 24-token run)"
)
print(f"identical to plain greedy: {self_spec.tokens == plain_12}")

# %% [markdown]
# ### Sharing the target's KV cache
#
# The run above drafts through a *separate* k-layer model with a cache of its own, so the
# verification pass runs all $L$ layers again, the first $k$ included, over tokens the draft
# has just run through those very layers. But the draft's first $k$ layers *are* the target's:
# for the same token at the same position they write the same keys and values and reach the
# same hidden state. `specviz.drafters.shared_exit` keeps one cache for all $L$ layers with two
# views of it: the drafter fills layers $[0, k)$, and the verifier starts each pass at layer $k$
# from the hidden states the drafter left, running the first $k$ layers itself only for positions
# the drafter never fed (the prompt, the round's last draft, which is proposed but not fed back).
# The verifier still computes its own $p$ for every position, so the acceptance rule and the
# output law are untouched; the equivalence suite runs this drafter too, with a mutant that
# reuses one position too many.
#
# We count the positions that go through the layers below and above the exit in both runs
# (a hook on one norm of each kind of layer) and check the output.


# %%
def count_positions(share):
    """self_speculate(share), and the positions it ran through layer 0 and layer best_k."""
    seen = {"below": 0, "above": 0}
    blocks = {"below": 0, "above": best_k}
    hooks = [
        target.model.layers[i].input_layernorm.register_forward_hook(
            lambda _m, args, _out, key=key: seen.__setitem__(key, seen[key] + args[0].shape[-2])
        )
        for key, i in blocks.items()
    ]
    try:
        return self_speculate(share), seen
    finally:
        for hook in hooks:
            hook.remove()


def self_speculate(share):
    """12 greedy tokens by self-speculation at best_k, with or without a shared cache."""
    name = "early-exit:shared" if share else "early-exit"
    options = DrafterOptions(exit_layer=best_k)
    drafter = build_drafter(name, target=target, sampling=greedy, options=options)
    speculation = SpeculationConfig(gamma=exit_stats[best_k]["gamma"], max_new_tokens=12)
    return speculative_generate(
        target,
        drafter,
        tokenizer,
        code_ids,
        sampling=greedy,
        speculation=speculation,
    )


for share in (False, True):
    result, seen = count_positions(share)
    print(
        f"{'shared' if share else 'separate'} cache: positions through layers < {best_k}: "
        f"{seen['below']}, through layers >= {best_k}: {seen['above']}; "
        f"{result.seconds:.2f} s; identical to plain greedy: {result.tokens == plain_12}"
    )

# %% [markdown]
# Sharing removes the verifier's second trip through the lower layers for every position the
# drafter already computed (the prompt is run once instead of twice, too), and the tokens stay
# the target's greedy ones. Whether that saves *time* depends on the machine. On a
# bandwidth-bound device a forward pass costs about what reading its weights costs, whatever
# the number of tokens: a verification pass that still runs the first $k$ layers for one
# position (the round's last draft) reads their weights all the same, so it costs nearly a full
# pass. The benchmark (`--drafter early-exit:shared`, `benchmarks/RESULTS.md`) measures
# exactly that on this CPU. Sharing pays in full only where the skipped layers are
# compute-bound (long prompts, large batches) or where the verifier can skip them altogether.

# %% [markdown]
# ## Lookup first, the draft model otherwise
#
# N-gram lookup costs nothing but helps only where the text repeats itself; a draft model costs a
# little at every position. Structured output and code have both kinds of stretch: keys, identifiers
# and whole lines recur, and between them is new text. `LookupThenModelDrafter`
# (`specviz/drafters/hybrid.py`) tries the lookup first, with $n \ge 2$ so that one common token (a
# space, a bracket) does not trigger a copy, and lets the draft model propose when the lookup finds
# nothing. Which of the two drafts a round depends only on the tokens so far, and each proposal
# carries the $q$ it was drawn from (one-hot for a copy), so the verifier's guarantee is untouched:
# `tests/drafters/test_hybrid.py` runs the equivalence suite on it, and rejects a mutant that labels
# its copies with a uniform $q$. The draft model's cache falls behind during lookup rounds and
# catches up in one forward over the copied tokens when it next drafts.

# %%
draft = load_model(BUNDLED, role="draft", pack=True)  # the distilled draft of notebooks 3-5
json_ids = encode(tokenizer, load_requests("json")[0].prompt)  # a structured-output request
drafters = {
    "draft model": build_drafter("model", target=target, draft=draft, sampling=greedy),
    "lookup, else draft": build_drafter("ngram+model", target=target, draft=draft, sampling=greedy),
}
mixed_runs = {}
for name, drafter in drafters.items():
    mixed_runs[name] = run = speculative_generate(
        target,
        drafter,
        tokenizer,
        json_ids,
        sampling=greedy,
        speculation=SpeculationConfig(gamma=3, max_new_tokens=48),
    )
    copied = sum(1 for r in run.rounds if r.proposed and not r.draft_forward_calls)
    print(
        f"{name:18s}: {len(run.rounds)} rounds ({copied} copied by lookup), "
        f"{run.accepted}/{run.proposed} drafts kept, "
        f"{sum(r.draft_forward_calls for r in run.rounds)} draft forwards"
    )
same = mixed_runs["draft model"].tokens == mixed_runs["lookup, else draft"].tokens
print("identical greedy output:", same)

# %% [markdown]
# Fewer rounds for the same tokens means fewer target passes. Whether the mix pays depends on
# the request: where a copy is wrong but the draft would have been right, it costs a round.
# Replayed over every prompt of the benchmark's workloads at $T = 0$ (`benchmarks/RESULTS.md`),
# the mix is ahead on average on JSON and code, behind on some prompts, and behind lookup alone on
# the repeat-the-prompt requests, where the draft model's proposals between copies cost more
# than they keep.
#
# That last loss comes from using one $\gamma$ for two drafters. A copy is free and, where the
# text repeats, long: it wants a large $\gamma$. A model draft costs a step per token and is kept
# with probability $\alpha \approx 0.5$: by notebook 5's bound it wants $\gamma \approx 3$.
# `LookupThenModelDrafter(model, model_gamma=2)` caps the draft model's share of a round while
# copies still run to $\gamma$, so one large $\gamma$ serves both. The cap changes only how many
# tokens are proposed, never how they are verified, so the output is again the greedy one.

# %%
repeat_ids = encode(tokenizer, load_requests("repeat")[3].prompt)  # "repeat/edit the prompt"
capped_runs = {}
for cap in (None, 2):
    options = DrafterOptions(model_gamma=cap)
    capped = build_drafter(
        "ngram+model", target=target, draft=draft, sampling=greedy, options=options
    )
    capped_runs[cap] = run = speculative_generate(
        target,
        capped,
        tokenizer,
        repeat_ids,
        sampling=greedy,
        speculation=SpeculationConfig(gamma=8, max_new_tokens=64),
    )
    print(
        f"model_gamma={cap}: {len(run.rounds)} rounds, {run.accepted}/{run.proposed} drafts kept, "
        f"{sum(r.draft_forward_calls for r in run.rounds)} draft forwards"
    )
print("identical greedy output:", capped_runs[None].tokens == capped_runs[2].tokens)

# %% [markdown]
# On this request the copies carry the output: both runs take the same rounds and keep the same
# drafts, but without the cap the draft model spends four times the forwards on proposals
# between copies that the target mostly rejects.
#
# Timed on six repeat prompts at $\gamma = 8$ (`specviz bench --model-gamma none,2`, the
# hybrid-cap table in `benchmarks/RESULTS.md`), the cap takes the mix from 2.14× to 2.47×, past
# lookup alone (2.33×), and on JSON prompts from 1.19× to 1.46× at the same $\gamma$.

# %% [markdown]
# ## Dynamic γ
#
# With a free drafter, how many tokens should we draft? Notebook 5's bound says: more when
# $\alpha$ is high, and a copy-heavy request alternates between stretches where everything is
# accepted and stretches where nothing is. A **policy** picks $\gamma$ before each round from
# what it has seen (`specviz.gamma.policies`):
#
# - `FixedGamma(g)`: always $g$.
# - `HeuristicGamma(start)`: transformers' schedule, $\gamma + 2$ after a round whose drafts were
#   all kept, $\gamma - 1$ otherwise.
# - `TheoryGamma(start)`: after every round re-estimates $\alpha$ (accepted / verified, with a
#   weak prior, each verdict's weight halving every 32 verified tokens so that the estimate
#   follows a request whose agreement changes), the seconds per draft step $t_d$, and the
#   seconds $T_v(k)$ of a target pass over $k$ tokens. Single passes are noisy (10-25 % here,
#   and the first pass at a new width pays a one-off kernel setup), so $T_v$ is a straight line
#   fitted through the per-width medians, and each measured width moves from the line toward
#   its own median as its passes accumulate ($n/(n + 4)$ of the way). That still learns an
#   uneven profile (with PyTorch's default CPU kernels a 2- or 3-token pass can cost more than a
#   5-token one; notebook 1 shows why and how packed weights flatten it) without letting one
#   unlucky pass rule a width out for good.
#   It then picks the $\gamma$ with the most predicted tokens per second,
#   $$\gamma^* = \arg\max_{\gamma \ge 0}
#     \frac{1 + \sum_{j=1}^{\gamma} a_1 a_2 \cdots a_j}{\gamma\, t_d + T_v(\gamma + 1)},$$
#   which is the bound of notebook 5 with its $r = 1$ assumption replaced by measured costs
#   ($T_v$ is nearly flat on a bandwidth-bound GPU or with packed CPU weights, steep with the
#   default CPU kernels), and with one more assumption dropped: that every draft is kept
#   independently with the same $\alpha$. Agreement comes in stretches (a verbatim copy is
#   kept whole or fails at its first token; a draft model that got the first token of a round
#   right is more often right about the second), so $a_j$ is measured per position in the round:
#   the fraction of rounds that reached draft $j$ and kept it (`specviz.gamma.survival`), each
#   shrunk toward $a_{j-1}$ so that a position with no data yet inherits the one before. With
#   independent verdicts every $a_j$ is $\alpha$ and the numerator is notebook 5's
#   $(1 - \alpha^{\gamma+1})/(1 - \alpha)$. $\gamma = 0$ is a plain target step, chosen when
#   not even the best draft length is predicted to pay with every $a_j$ raised by one standard
#   error of $\alpha$ (optimism that keeps a few early rejections from talking it out of
#   drafting). Now and then a probe round tries the
#   other side (a plain step, or a draft when it has been decoding plainly) so that $\alpha$ and
#   the costs stay measured.
#   While it drafts, the first probe comes after 8 rounds, then after twice as many each time
#   a probe confirms the choice, and after 8 again when one overturns it, so a settled request
#   spends little on probing. While it steps plainly it probes every 8 rounds: a drafting probe
#   costs only its draft steps (its verification pass still emits a token) and is its only news
#   about $\alpha$, which may recover after a stretch the draft got wrong.
#
# A policy sees only counts and timings, never token values, so it cannot change the output
# law, only the speed. Each round records its $\gamma$ in its `RoundSummary`.

# %%
policies = {
    "fixed 4": FixedGamma(4),
    "heuristic": HeuristicGamma(start=4, max_gamma=16),
    "theory": TheoryGamma(start=4, max_gamma=16),
}
policy_runs = {}
for name, policy in policies.items():
    policy_runs[name] = speculative_generate(
        target,
        build_drafter("ngram", target=target, sampling=greedy),
        tokenizer,
        repeat_ids,
        sampling=greedy,
        speculation=SpeculationConfig(gamma=4, max_new_tokens=NEW),
        policy=policy,
    )

fig, ax = plt.subplots(figsize=(9, 3.8))
for (name, run), marker in zip(policy_runs.items(), "os^", strict=True):
    ax.step(
        [s.round for s in run.rounds],
        [s.gamma for s in run.rounds],
        where="mid",
        marker=marker,
        label=name,
    )
ax.set_xlabel("round")
ax.set_ylabel("γ used in the round")
ax.set_title("γ per round on the repeat request, n-gram drafter (from RoundSummary events)")
ax.legend()
plt.tight_layout()
plt.show()

for name, run in policy_runs.items():
    same = run.tokens == plain_run.tokens
    print(
        f"{name:9s}: {len(run.rounds):2d} rounds, proposed {run.proposed:3d}, accepted "
        f"{run.accepted:3d}, {len(run.tokens) / run.target_calls:.2f} tokens/call, "
        f"{run.seconds:.2f} s, identical to plain: {same}"
    )

# %% [markdown]
# The heuristic climbs while whole drafts are kept and backs off one step per miss. With a free
# drafter ($t_d = 0$) the $r = 1$ bound $S = (1 - \alpha^{\gamma+1})/(1 - \alpha)$ grows with
# $\gamma$ for any $\alpha > 0$, so a policy that believed it would always draft the maximum.
# The theory policy instead measures what a wide verification pass costs here (below) and drafts
# one more token only while that token's expected output is worth its time.
# On this request nearly every copied token is kept, so long drafts still pay. How close does it
# come to the best fixed $\gamma$ over many requests? Timed runs are too noisy to resolve a few
# per cent, so `specviz bench replay` replays every policy at $T = 0$ on what the
# drafter would propose along the target's greedy output (the same rounds a real run makes,
# priced at pass costs measured once): on all of the benchmark's repeat, code and JSON prompts
# the theory policy comes within a few per cent of the best fixed $\gamma$
# (`benchmarks/RESULTS.md`). At $T > 0$ it replays rounds with the law of real ones, all
# settings on the same random draws (notebook 5 derives why that is possible).

# %%
fit = policies["theory"]
print(
    f"theory policy: alpha {fit.alpha:.2f}, one-token pass {1e3 * fit.verify_seconds(1):.0f} ms, "
    f"+{1e3 * fit.verify_seconds.slope():.1f} ms per extra token on average "
    f"(r at gamma 4 = {fit.verify_ratio(4):.2f}), now choosing gamma {fit.next_gamma()}"
)
widths = sorted(fit.verify_seconds.by_k)
print("median pass times:", {k: f"{1e3 * fit.verify_seconds.median(k):.0f} ms" for k in widths})

# %%
print(f"notebook ran in {time.perf_counter() - t_start:.1f} s")

# %% [markdown]
# ## Exercises
#
# ### Exercise 1
#
# Run the n-gram drafter with `min_ngram=2` instead of 1 on the repeat request. What happens to
# the number of proposed and accepted tokens, and why might a larger minimum help on text that
# repeats common words but not phrases?

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# run = speculative_generate(
#     target, None, tokenizer, repeat_ids, sampling=greedy,
#     speculation=SpeculationConfig(gamma=6, max_new_tokens=NEW),
#     drafter=NgramDrafter(VOCAB, max_ngram=3, min_ngram=2),
# )
# print(run.proposed, run.accepted, ngram_run.proposed, ngram_run.accepted)
# ```
#
# Requiring a 2-token match proposes less often: single common tokens (" the", ",") no longer
# trigger a copy of whatever followed their last occurrence, which was usually wrong. Fewer
# proposals with a higher acceptance rate mean narrower verification passes for the same
# accepted tokens, which matters where verification is not free.
# </details>

# %% [markdown]
# ### Exercise 2
#
# Give the `TheoryGamma` policy a drafter with a real cost: the early exit at `best_k`, on the
# code prompt. Plot its $\gamma$ per round. Where does it settle, and does that agree with
# `theory.optimal_gamma` at the exit's measured $\alpha$ and $c$?

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# policy = TheoryGamma(start=4, max_gamma=16)
# run = speculative_generate(
#     target, None, tokenizer, code_ids, sampling=greedy,
#     speculation=SpeculationConfig(gamma=4, max_new_tokens=24),
#     drafter=ModelDrafter(build_early_exit(target, best_k)[0], greedy, VOCAB),
#     policy=policy,
# )
# plt.step([s.round for s in run.rounds], [s.gamma for s in run.rounds], where="mid")
# plt.show()
# print(policy.alpha, policy.cost_ratio, exit_stats[best_k])
# ```
#
# The policy's $\alpha$ starts from a prior of 0.5. Its first pass also scores the prompt, so it
# is no cost sample; the second round is a plain step and the third drafts again, which gives
# two points of the verification-cost line. After a few rounds it
# settles near `exit_stats[best_k]["gamma"]`, or at $\gamma = 0$ (plain steps, with a probe every
# 8 rounds) when the exit's $\alpha$ is too low for any draft length to pay: that is
# the policy concluding, from measurements alone, that this drafter does not help on this
# machine.
# </details>

# %% [markdown]
# ### Exercise 3
#
# Check the exactness argument numerically for one position: take $p$ = the target's next-token
# distribution after the repeat prompt at $T = 1$, a proposed token $x$, and compute
# $p(x)\cdot 1 + (1 - p(x))\,\operatorname{residual}(p, \mathbb{1}_x)$ with
# `specviz.core.acceptance.residual`. It should equal $p$.

# %% [markdown]
# <details><summary>Solution</summary>
#
# ```python
# from specviz.core.acceptance import residual
#
# with torch.no_grad():
#     p = logits_to_probs(target(input_ids=torch.tensor([repeat_ids])).logits[0, -1],
#                         SamplingConfig(temperature=1.0)).double()
# x = int(p.argmax())
# onehot = torch.zeros_like(p)
# onehot[x] = 1.0
# emitted = p[x] * onehot + (1 - p[x]) * residual(p, onehot)
# print(float((emitted - p).abs().max()))  # ~1e-16
# ```
# </details>
