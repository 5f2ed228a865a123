"""Benchmark: speculative vs plain decoding vs transformers' assisted generation, against theory."""
