"""Distilling the bundled draft model from the target, and the early-exit adapter.

`student.py` trains the draft on the teacher's shards (specviz.train.data.teacher),
`evaluate.py` measures it on held-out prompts, `export.py` writes it into the package;
`early_exit.py` trains the early-exit drafter's adapter. `cli.py` is the `draft` command.
"""
