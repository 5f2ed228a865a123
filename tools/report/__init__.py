"""The tables of README.md, benchmarks/RESULTS.md and benchmarks/MEMORY.md, rendered from the
saved bench results in benchmarks/results/ (`python -m tools.report`; see tools.report.documents).

Modules: saved (the saved results, read once each), text (number formats), headline (the
headline and the rows it picks), studies (one table per study part), sections (the sweep parts'
tables and the memory figure), tables (every table by name), documents (the marked tables in
the documents, and the command that rewrites them).
"""
