"""Training the drafting heads (specviz.heads) on the target's own features.

EAGLE-3: `vocab.py` picks the draft vocabulary, `eagle.py` trains the head on the regen shards
with `unroll.py`'s training-time drafting and `accept.py`'s losses, `ahead.py` rebuilds shards'
features ahead of a run, `replay.py` trains on where drafts are rejected, `score.py` scores
exported heads, `pipeline.py` runs all of it in one command. Medusa: `medusa.py`. Both:
`evaluate.py` (held-out α, agreement, cost) and `export.py` (into the package). `cli.py` is
the `heads` command.
"""
