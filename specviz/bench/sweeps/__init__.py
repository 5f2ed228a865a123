"""The `specviz bench` studies, one file each, every one a specviz.bench.sweep.Sweep."""
