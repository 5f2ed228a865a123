"""`specviz tune`: measure which target forward and thread count decode fastest on this machine
for a model pair, save them as a profile, and let the defaults read it.

profile: what a profile holds and where it lives (one JSON file per machine and pair);
measure: the timings behind it; defaults: the one resolver of the defaults `specviz generate`
and the app use (a profile where one exists, else the registry's DEFAULT_CONFIG); cli: the
subcommand. Nothing here runs at import time.
"""
