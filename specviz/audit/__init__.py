"""`specviz audit`: a statistical audit of any engine's speculative decoding (docs/exactness.md).

An audit draws the first tokens of many seeded requests with speculation on and off and tests
that their laws agree, with its power stated before sampling. The pieces:

settings  what both sides are asked (temperature, top-k, top-p, penalties) and one sample
power     the least-favourable power of the two-sample test and the N it needs
compare   the two-sample tests of the first k tokens and the check against reported logprobs
sequential  the looks at the data: alpha and beta spent so the audit may stop early
sources   the engines audited: an OpenAI-compatible endpoint, transformers, specviz drafters
greedy    identity of the greedy outputs at temperature 0, ties told from bugs
runner    the audit loop: budget, progress events, resume, verdict
proxy     a planted-fault HTTP proxy, the audit's negative control
"""
