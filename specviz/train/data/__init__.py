"""The training data every pipeline reads: corpus, prompt pools, the target's answers.

`corpus.py`, `prompts.py` and `sources.py` build the text and prompts; `teacher.py` caches the
target's top-k log-probs (the draft model's labels), `features.py` its last hidden states (the
Medusa heads'), `regen.py` its own answers with the layers the EAGLE-3 head reads (the three
share `batching.py`'s padded batches, draws and top-k log-probs); `stream.py` serves the regen
shards as batches, `heldout.py` the held-out set, `curve.py` the learning curve and its stop
rule. `cli.py` is the `data` command.
"""
