"""Benchmark: speculative vs plain decoding vs transformers' assisted generation, against theory.

`specviz bench` (cli) runs one study of sweeps/, one file each, every one a Sweep (sweep: its
flags, plan, run, saved section and Markdown). What they share: sweep (the protocol, the flags
every study reads and their check), runner (a request run interleaved: plain, speculative and
transformers'), summary (the per-setting rows of the records) and report (the figures, the HTML
page, and a saved result's view). A saved result's format lives in specviz.results.
"""
