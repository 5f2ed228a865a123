"""Drafting heads built into the target: EAGLE-3 and Medusa heads on its own features.

`eagle.py` and `medusa.py` are the heads, `tap.py` and `cache.py` the target forward that keeps
the features they read, `drafters.py` and `build.py` the drafters the registry builds from them,
`weights.py` their files and `lookup.py` where a drafter finds them.
"""
