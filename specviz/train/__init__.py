"""Reproducible training of what specviz ships for the bundled SmolLM2 target: three pipelines.

* ``specviz.train.data``: the data the others read. ``corpus`` (offline Python source and
  documentation), ``teacher`` (the target's top-k log-probs over the corpus and its own sampled
  answers), ``features`` (the target's last hidden states, which the Medusa heads read) and
  ``regen`` (the target's answers to a prompt pool, with the layers the EAGLE-3 head reads),
  in resumable shards; the held-out set and learning curve with its stop rule.
* ``specviz.train.draft``: the distilled draft model. ``student`` distils a small Llama from the
  teacher's shards, ``evaluate`` measures it on held-out prompts, ``export`` writes it into the
  package; ``early_exit`` trains the early-exit drafter's adapter.
* ``specviz.train.heads``: the drafting heads. The EAGLE-3 head's ``vocab``, ``train``,
  ``replay``, ``score`` and ``all`` (the whole pipeline in one command); the Medusa heads'
  ``medusa``; ``eval`` and ``export`` for both.

Each step is resumable, with its state under ``specviz.models.bundled.cache_dir() / "train"``.
Run ``python -m specviz.train --help``, then ``python -m specviz.train ROOM --help``.
"""
