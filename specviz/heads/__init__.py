"""Drafting heads built into the target: EAGLE-3 and Medusa heads on its own features.

`eagle.py` (the EAGLE-3 head and the target layers it fuses) and `medusa.py` are the heads;
`eagle_lean.py` runs the EAGLE-3 head's drafting forward in few calls. `tap.py` is the target
forward that keeps the features they read, `cache.py` the heads as a draft's cached forward,
`drafters.py` and `build.py` the drafters the registry builds from them, `weights.py` their
files and `lookup.py` where a drafter finds them.
"""
