# %% [markdown]
# # 3. Building the loop
#
# **The question.** Notebook 1 showed that the target can score several tokens for about the
# price of one; notebook 2 showed how to accept or replace one drafted token so that the output
# follows $p$ exactly. How do these pieces become a decoding *loop* — with two KV caches that
# must stay in step with the text, a single verification pass per round, a rollback after every
# rejection and a free bonus token when everything is accepted?
#
# We build the loop by hand from specviz's parts (`KVCache`, `logits_to_probs`, `sample`,
# `verify`), check that it produces **the same tokens** as the library's
# `speculative_generate` with the same seed, and then walk through the library's event log of
# one real generation on the bundled pair, round by round. The prompt is a chat-formatted coding
# request, the kind of text the bundled draft was distilled on (see its model card), sampled at
# temperature 0.7 with $\gamma = 4$.

# %%
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Patch
from transformers.utils import logging as hf_logging

from specviz.api import speculative_generate
from specviz.core.acceptance import verify
from specviz.core.cache import KVCache
from specviz.core.config import SamplingConfig, SpeculationConfig
from specviz.core.events import Accepted, Bonus, Proposed, Rejected, Resampled, RoundSummary
from specviz.core.sampling import logits_to_probs, sample
from specviz.gamma import theory
from specviz.models.loading import load_pair

hf_logging.disable_progress_bar()  # no weight-loading bars in the notebook
pair = load_pair()
target, draft, tokenizer = pair.target, pair.draft, pair.tokenizer
V = target.config.vocab_size

REQUEST = "Write a Python function that returns the n-th Fibonacci number."
PROMPT = tokenizer.apply_chat_template(
    [{"role": "user", "content": REQUEST}], add_generation_prompt=True, tokenize=False
)
SAMPLING = SamplingConfig(temperature=0.7, seed=0)
GAMMA, MAX_NEW = 4, 32
prompt_ids = tokenizer(PROMPT)["input_ids"]
print(PROMPT)
print(f"prompt: {len(prompt_ids)} tokens; gamma = {GAMMA}; {MAX_NEW} new tokens; {SAMPLING}")

# %% [markdown]
# ## The state between rounds
#
# The loop keeps a list `ids` of committed tokens (prompt plus everything emitted) and two KV
# caches. The invariant is that **each cache holds every committed token except the last**:
# the last one is fed at the start of the next round, because its forward pass is what
# produces the distribution of the token after it. The prefill establishes the invariant by
# running `ids[:-1]` through both models. (specviz's `SpeculativeDecoder` saves one target
# call: it prefills only the draft and lets the target's first verification pass take the
# whole prompt together with the first drafts, as transformers does. The invariant then holds
# from the end of the first round; the tokens are the same.)
#
# A round then has four steps.
#
# 1. **Draft.** Feed the draft the tokens its cache lacks (usually just the last committed
#    one), take $q_1 = $ `logits_to_probs` of its last logits, draw $x_1 \sim q_1$; feed $x_1$,
#    draw $x_2 \sim q_2$; and so on, $\gamma$ times. Thanks to the draft's KV cache each step
#    is a one-token pass.
# 2. **Verify in one pass.** Feed the target the tokens its cache lacks *plus all $\gamma$
#    drafts*, in a single forward. The last $\gamma + 1$ rows of logits are
#    $p_1, \dots, p_\gamma$ (the target's distributions at the drafted positions) and
#    $p_{\gamma+1}$ (the distribution after the last draft).
# 3. **Accept, resample or take the bonus.** `verify` draws $u_i \sim U[0, 1)$ and keeps
#    drafts while $u_i < \min(1, p_i(x_i)/q_i(x_i))$. At the first rejection, at index $n$,
#    it draws the replacement from $\operatorname{norm}(\max(0, p_{n+1} - q_{n+1}))$; if all
#    $\gamma$ survive it draws a **bonus** token from $p_{\gamma+1}$, which the verification
#    pass computed anyway. Either way a round emits $n + 1$ tokens, between $1$ and
#    $\gamma + 1$.
# 4. **Roll back.** Both caches now hold keys and values for drafted tokens that may have been
#    rejected. Crop each back to `len(ids) - 1` positions to restore the invariant.
#
# One subtlety in step 1: the draft never fed its own last draft $x_\gamma$ (it had nothing
# left to predict), so after a round in which everything was accepted its cache is *two*
# tokens behind: $x_\gamma$ and the bonus. `ids[len(cache):]` feeds whatever is missing.
#
# Here is the whole algorithm, about forty lines.


# %%
def draft_round(draft_cache, ids, gamma, generator):
    """Step 1: gamma draft tokens (gamma,) and the distributions q (gamma, V) they came from."""
    tokens, q_rows = [], []
    pending = ids[len(draft_cache) :]  # 1 token, or 2 after a round that was fully accepted
    for _ in range(gamma):
        logits = draft_cache.forward(torch.tensor(pending))[-1]  # (V,)
        q = logits_to_probs(logits[:V], SAMPLING)
        token = sample(q, generator)
        tokens.append(token)
        q_rows.append(q)
        pending = [token]
    q_draft = torch.stack(q_rows) if q_rows else torch.empty(0, V)
    return torch.tensor(tokens, dtype=torch.long), q_draft


def speculative_by_hand(prompt_ids, gamma, max_new):
    """The loop, built from specviz's parts; returns the new tokens and per-round counts."""
    generator = torch.Generator().manual_seed(SAMPLING.seed)
    ids = list(prompt_ids)
    target_cache, draft_cache = KVCache(target), KVCache(draft)
    target_cache.forward(torch.tensor(ids[:-1]))  # prefill: every token but the last
    draft_cache.forward(torch.tensor(ids[:-1]))
    rounds = []
    while (remaining := max_new - (len(ids) - len(prompt_ids))) > 0:
        g = min(gamma, remaining - 1)  # the round may emit g + 1 tokens: never overshoot
        drafts, q_draft = draft_round(draft_cache, ids, g, generator)  # 1. draft
        fresh = torch.tensor(ids[len(target_cache) :], dtype=torch.long)
        logits = target_cache.forward(torch.cat([fresh, drafts]))  # 2. one target pass
        p_target = logits_to_probs(logits[-(g + 1) :], SAMPLING)  # (g + 1, V)
        verdict = verify(p_target, q_draft, drafts, generator)  # 3. accept / resample / bonus
        ids.extend(drafts[: verdict.n_accepted].tolist())  # the kept drafts ...
        ids.append(verdict.next_token)  # ... and the resampled or bonus token
        target_cache.crop(len(ids) - 1)  # 4. roll both caches back to the invariant
        draft_cache.crop(len(ids) - 1)
        rounds.append((g, verdict.n_accepted, verdict.is_bonus))
    return ids[len(prompt_ids) :], rounds


hand_tokens, hand_rounds = speculative_by_hand(prompt_ids, GAMMA, MAX_NEW)
print(repr(tokenizer.decode(hand_tokens)))
print(f"{len(hand_tokens)} tokens in {len(hand_rounds)} rounds (= target forward passes)")

# %% [markdown]
# Now the library, with the same prompt, seed and settings. `stop=()` switches off stopping at
# the end-of-sequence token, which our hand-made loop does not implement (the library also
# ends a round early when a draft *is* the EOS token, and stops the decode there).

# %%
result = speculative_generate(
    target,
    draft,
    tokenizer,
    prompt_ids,
    sampling=SAMPLING,
    speculation=SpeculationConfig(gamma=GAMMA, max_new_tokens=MAX_NEW),
    stop=(),
)
print(repr(result.text))
print("same tokens as the hand-made loop:", list(result.tokens) == hand_tokens)
assert list(result.tokens) == hand_tokens
print(
    f"{len(result.tokens)} tokens, {len(result.rounds)} rounds, "
    f"acceptance rate {result.acceptance_rate:.2f}"
)

# %% [markdown]
# Identical, token for token: both loops consume the same seeded generator in the same order
# (the draws of the drafts, then the uniforms, then the replacement or bonus), so they make
# the same decisions. The library adds what a real decoder needs around this core — input
# validation, EOS handling, timings, pluggable drafters and $\gamma$ policies — and it logs
# **events** as it goes.
#
# ## The event log, round by round
#
# Every round produces `Proposed` events (the draft tokens and $q(x)$), one verdict per
# examined draft (`Accepted` or `Rejected`, with $p(x)$, $q(x)$, $\min(1, p/q)$ and the
# uniform $u$ that decided), then either `Resampled` (after a rejection, with the residual's
# probability of the chosen token and the residual mass $1 - \alpha$ at that position) or
# `Bonus`, and finally a `RoundSummary`. Drafts after the first rejection are never examined:
# they were conditioned on a token that is no longer in the text.


# %%
def show(token):
    return repr(tokenizer.decode([token]))


current = None
for event in result.events:
    if getattr(event, "round", current) != current:  # a new round starts
        current = event.round
        print(f"round {current}")
    if isinstance(event, Proposed):
        print(f"   drafted   {show(event.token):>14}   q = {event.q_x:.3f}")
    elif isinstance(event, Accepted | Rejected):
        mark = "accepted" if isinstance(event, Accepted) else "REJECTED"
        print(
            f"   {mark:9} {show(event.token):>14}   p = {event.p_x:.3f}  q = {event.q_x:.3f}  "
            f"min(1, p/q) = {event.accept_prob:.3f}  u = {event.u:.3f}"
        )
    elif isinstance(event, Resampled):
        print(
            f"   resampled {show(event.token):>14}   from the residual: r = {event.residual_x:.3f}"
            f"  (residual mass {event.residual_mass:.3f}; p = {event.p_x:.3f}, q = {event.q_x:.3f})"
        )
    elif isinstance(event, Bonus):
        print(f"   bonus     {show(event.token):>14}   p = {event.p_x:.3f} (all drafts kept)")
    elif isinstance(event, RoundSummary):
        print(f"   -> emitted {event.emitted} of up to {event.gamma + 1} tokens")

# %% [markdown]
# Read a few rounds. A draft is kept whenever $u$ falls below $\min(1, p/q)$; when the target
# likes a token at least as much as the draft does ($p \ge q$) the threshold is 1 and it is
# always kept. A rejected draft's replacement comes from the residual, which puts no mass on
# the rejected token itself when the draft over-proposed it. Every round costs exactly one
# target pass, and emits one token more than it accepted.
#
# ## Tokens per round

# %%
summaries = result.rounds
rounds_x = [r.round for r in summaries]
accepted = [r.accepted for r in summaries]
bonus_rounds = {e.round for e in result.events if isinstance(e, Bonus)}
extra = [1 for _ in summaries]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
ax1.bar(rounds_x, accepted, color="#009E73")
ax1.bar(
    rounds_x,
    extra,
    bottom=accepted,
    color=["#0072B2" if r in bonus_rounds else "#D55E00" for r in rounds_x],
)
limit = ax1.step(
    [x - 0.5 for x in rounds_x] + [rounds_x[-1] + 0.5],
    [r.gamma + 1 for r in summaries] + [summaries[-1].gamma + 1],
    where="post",
    color="k",
    lw=1,
)
handles = [
    Patch(color="#009E73", label="accepted drafts"),
    Patch(color="#D55E00", label="resampled token"),
    Patch(color="#0072B2", label="bonus token"),
    limit[0],
]
ax1.legend(
    handles,
    [*(h.get_label() for h in handles[:3]), "γ + 1 (most a round can emit)"],
    fontsize=8,
    loc="upper right",
    ncol=2,
)
ax1.set_ylim(0, GAMMA + 3)
ax1.set_xlabel("round (= target forward pass)")
ax1.set_ylabel("tokens emitted")
ax1.set_title("what each verification pass bought")

emitted_cum = torch.tensor([r.emitted for r in summaries]).cumsum(0).tolist()
calls = list(range(1, len(summaries) + 1))
ax2.plot([0, *calls], [0, *emitted_cum], "o-", label="speculative")
ax2.plot([0, *calls], [0, *calls], "--", color="grey", label="plain decoding (1 per pass)")
ax2.set_xlabel("target forward passes")
ax2.set_ylabel("tokens generated")
ax2.set_title("tokens per target pass")
ax2.legend()
fig.tight_layout()
plt.show()

alpha_hat = result.acceptance_rate
mean_tokens = len(result.tokens) / len(summaries)
full_rounds = [r for r in summaries if r.gamma == GAMMA]
print(f"measured acceptance rate alpha = {alpha_hat:.3f}")
print(f"mean tokens per round: {mean_tokens:.2f} (all rounds)")
print(
    f"theory (1 - alpha^(gamma+1)) / (1 - alpha) at the measured alpha: "
    f"{theory.expected_tokens_per_round(alpha_hat, GAMMA):.2f} "
    f"(assumes every draft survives independently with the same alpha)"
)

# %% [markdown]
# The theory line is a rough guide, not a prediction for one short generation: real drafts are
# accepted in bursts (easy stretches of code, then a hard token), and near the end the rounds are
# shortened ($\gamma \le$ tokens left $- 1$) so as not to overshoot `max_new_tokens`. Notebook 5
# compares the formula with measurements over many prompts.
#
# ## Rollback is exact
#
# Step 4 is where implementations go wrong most quietly: a cache rolled back one position too
# few or too many still produces plausible text. The check is simple. Take a cache that has
# seen a prefix plus four drafted tokens, crop it back to the prefix, feed a *different*
# token, and compare the logits with a fresh cache that only ever saw the prefix and that
# token. (Keys and values of earlier positions do not depend on later tokens in a causal
# model, so cropping must give back exactly the state before the drafts.)

# %%
prefix = torch.tensor(prompt_ids + hand_tokens[:8])
wrong = torch.tensor(hand_tokens[8:12])  # four tokens that will be "rejected"
correct = torch.tensor([tokenizer(" banana")["input_ids"][0]])  # a different continuation

rolled = KVCache(target)
rolled.forward(prefix)
rolled.forward(wrong)
print("cache length with the drafts:", len(rolled))
rolled.crop(len(prefix))
print("cache length after crop:     ", len(rolled))
after_rollback = rolled.forward(correct)[-1]

fresh = KVCache(target)
fresh.forward(prefix)
from_scratch = fresh.forward(correct)[-1]
diff = float((after_rollback - from_scratch).abs().max())
print(
    f"max |logits difference| = {diff:.2e} "
    f"(the logits themselves have a standard deviation of {float(from_scratch.std()):.1f})"
)
same_top = int(after_rollback.argmax()) == int(from_scratch.argmax())
print("same most likely next token:", same_top)

# %% [markdown] The difference is zero, or at worst at the level of float32 rounding (the two paths
# can batch the matrix products differently), while a cache off by one position would change the
# logits by amounts of the order of the logits themselves. The test suite
# (`tests/core/test_decoding.py`) checks exactly this after full accepts and rejections, and
# `specviz verify` includes mutants whose rollback is one token too short or too long.
#
# ### Exercise 1
#
# Count, from `result.rounds`, how many draft-model forward passes the generation made
# (`draft_forward_calls`) and how many target passes, and compare with plain decoding of the
# same number of tokens. Which rounds were fully accepted?
#
# <details><summary>Solution</summary>
#
# ```python
# draft_calls = sum(r.draft_forward_calls for r in result.rounds)
# print(draft_calls, "draft passes,", len(result.rounds), "target passes,",
#       len(result.tokens), "target passes for plain decoding")
# full = [r.round for r in result.rounds if r.proposed and r.accepted == r.proposed]
# print("fully accepted rounds:", full)
# ```
#
# Each round is one target pass and up to $\gamma$ draft passes; plain decoding needs one
# target pass per token. Speculation wins when the target passes saved are worth more than
# the draft passes added (notebook 5).
# </details>
#
# ### Exercise 2
#
# Break the rollback: change `target_cache.crop(len(ids) - 1)` in `speculative_by_hand` to
# `target_cache.crop(len(ids))` and rerun it. Does it crash right away? What does the target
# condition on in the round after a rejection?
#
# <details><summary>Solution</summary>
#
# ```python
# import inspect
#
# source = inspect.getsource(speculative_by_hand).replace(
#     "target_cache.crop(len(ids) - 1)", "target_cache.crop(len(ids))"
# )
# namespace = dict(globals())
# exec(source, namespace)
# try:
#     broken, _ = namespace["speculative_by_hand"](prompt_ids, GAMMA, MAX_NEW)
#     print("finished; same tokens:", broken == hand_tokens, repr(tokenizer.decode(broken)))
# except (IndexError, RuntimeError) as err:
#     print("crashed:", type(err).__name__, err)
# ```
#
# After a rejection at draft index $n$, the target's cache still holds the keys and values of
# the *rejected* draft $x_{n+1}$ at the position where the replacement token now stands, and
# the replacement itself is never fed. From then on the target conditions on text that was
# never emitted, so the output law is no longer the target's, yet nothing fails: the loop
# keeps producing fluent-looking tokens. It only trips over its own shapes later, in a round
# with nothing new to feed: the verification pass returns one row too few, so a fully
# accepted round asks `verify` for a bonus row that is missing, and the final zero-draft round
# feeds the model zero tokens. A library that pads over such shape errors would emit wrong
# text without any error at all; only checks like the rollback test above, or a statistical
# test of the output law (notebook 4), catch it.
# </details>
#
# ### Exercise 3
#
# Run the library at temperature 0 (greedy) and check that speculative decoding returns
# exactly the target's own greedy continuation, whatever the draft proposes.
#
# <details><summary>Solution</summary>
#
# ```python
# from specviz.api import autoregressive_generate
#
# greedy = SamplingConfig(temperature=0.0, seed=0)
# spec = speculative_generate(target, draft, tokenizer, prompt_ids, sampling=greedy,
#                             speculation=SpeculationConfig(gamma=GAMMA, max_new_tokens=MAX_NEW),
#                             stop=())
# plain = autoregressive_generate(target, tokenizer, prompt_ids, sampling=greedy,
#                                 max_new_tokens=MAX_NEW, stop=())
# print(spec.tokens == plain.tokens, spec.acceptance_rate)
# ```
#
# With one-hot $p$ and $q$, a draft is kept exactly when it is the target's argmax and the
# replacement is the target's argmax (notebook 2), so every emitted token is the target's
# greedy choice.
# </details>
