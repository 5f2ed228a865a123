"""Speculative decoding of a batch of requests: each row accepts, and rolls back, alone."""
