"""specviz: exact speculative decoding, made visible."""
