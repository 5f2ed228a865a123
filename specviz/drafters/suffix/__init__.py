"""Suffix decoding: drafting from the request's own text and a memory of earlier requests.

Read in this order: drafter (the drafters and what a round does), speculate (a chain or a
tree grown from the best match), trie (what speculate reads of a trie), request and store (the
two counted suffix tries it reads: the request's own, and the memory's compact one over node
tables, nodes), memory (the memory a caller owns, saves and loads), hybrid (suffix first, a
draft model or head where memory is unsure) and explain (what a round matched, for the app).
"""
