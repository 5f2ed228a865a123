"""Reproducible distillation of the bundled draft from the bundled SmolLM2 target.

Steps (each resumable; state under ``specviz.models.bundled.cache_dir() / "train"``):
``corpus`` -> ``teacher`` -> ``student`` -> ``evaluate`` -> ``export``.
Run ``python -m specviz.train --help``.
"""
