"""The nodes of a compact counted trie, in flat arrays: children ordered by count, found by hash.

Terms. A node is an integer id, an index into parallel columns (array.array): its depth (the
length of the string it stands for), pos (where in the token text one occurrence of that
string starts: a position modulo 2**32, kept by the store that owns the text), parent, label
(the token by which it hangs from its parent) and its place among its parent's children. The
root is node 0. A node's count lives in its bucket: the children of one parent that share a
count form a run, and each run has one bucket (count, head, tail); the root's count is
bucket 0.

A parent's children form one doubly linked list (first, next, prev; the first child's prev is
the last child, the last child's next is NIL) ordered by count, most frequent first. A count
changes by one in constant time: the child moves to the edge of its run and joins the
neighbouring run, or a run of its own. Children of equal count come in no particular order,
so readers sort a run by label. A hash table of node ids keyed by (parent, label) (open
addressing, linear probing, at most three quarters full) finds a child in expected constant
time. Freed node and bucket ids go on free lists and are reused first, so the columns only
grow to the largest number of nodes held at once.
"""

from __future__ import annotations

import sys
from array import array

DEFAULT_DEPTH = 24  # deepest substring stored (vLLM's default for suffix decoding)
NIL = -1
ROOT = 0
_MIX = 0x9E3779B97F4A7C15  # Fibonacci hashing: the top bits of key * _MIX mod 2**64
_WORD = (1 << 64) - 1


def depth_code(max_depth: int) -> str:
    """The smallest unsigned array typecode holding depths up to max_depth."""
    return "B" if max_depth < 1 << 8 else "H" if max_depth < 1 << 16 else "I"


class NodeTable:
    """The node columns, their count buckets and the child hash of one trie."""

    def __init__(self, max_depth: int) -> None:
        """A table holding the root alone (count 0), for depths up to max_depth."""
        self.depth = array(depth_code(max_depth), [0])
        self.pos = array("I", [0])
        self.parent = array("i", [NIL])
        self.label = array("I", [0])
        self.first = array("i", [NIL])
        self.next = array("i", [NIL])
        self.prev = array("i", [NIL])
        self.bucket = array("i", [0])
        self.bcount = array("I", [0])
        self.bhead = array("i", [NIL])
        self.btail = array("i", [NIL])
        self.live = 1  # nodes in use, the root included
        self._free_node = NIL  # free ids chained through `next`
        self._free_bucket = NIL  # free buckets chained through `bhead`
        self._slots = array("i", [NIL]) * 16
        self._shift = 64 - 4
        self._used = 0

    def count(self, node: int) -> int:
        """How many times node's string occurs."""
        return self.bcount[self.bucket[node]]

    def nbytes(self) -> int:
        """Bytes held by the columns and the hash table (their allocated buffers)."""
        columns = (
            self.depth,
            self.pos,
            self.parent,
            self.label,
            self.first,
            self.next,
            self.prev,
            self.bucket,
            self.bcount,
            self.bhead,
            self.btail,
            self._slots,
        )
        return sum(sys.getsizeof(column) for column in columns)

    @property
    def slots(self) -> int:
        """Node ids allocated so far (in use or free)."""
        return len(self.depth)

    # -- the child hash -------------------------------------------------------------------

    def _home(self, parent: int, label: int) -> int:
        """The first slot probed for (parent, label)."""
        return (((parent << 32) | label) * _MIX & _WORD) >> self._shift

    def child(self, parent: int, label: int) -> int:
        """The child of parent under label, or NIL (the most frequent child is tried first)."""
        first = self.first[parent]
        if first != NIL and self.label[first] == label:
            return first
        slots, par, lab = self._slots, self.parent, self.label
        mask = len(slots) - 1
        at = (((parent << 32) | label) * _MIX & _WORD) >> self._shift  # _home, inlined
        while True:
            node = slots[at]
            if node == NIL or (par[node] == parent and lab[node] == label):
                return node
            at = (at + 1) & mask

    def _hash_add(self, node: int) -> None:
        """Enter node under its (parent, label)."""
        if 4 * (self._used + 1) > 3 * len(self._slots):
            self._rehash(2 * len(self._slots))
        slots = self._slots
        mask = len(slots) - 1
        at = self._home(self.parent[node], self.label[node])
        while slots[at] != NIL:
            at = (at + 1) & mask
        slots[at] = node
        self._used += 1

    def _hash_remove(self, node: int) -> None:
        """Take node out (before its parent or label change), shifting its cluster back."""
        slots, par, lab, shift = self._slots, self.parent, self.label, self._shift
        mask = len(slots) - 1
        hole = self._home(par[node], lab[node])
        while slots[hole] != node:
            hole = (hole + 1) & mask
        at = hole
        while True:
            at = (at + 1) & mask
            other = slots[at]
            if other == NIL:
                break
            home = (((par[other] << 32) | lab[other]) * _MIX & _WORD) >> shift  # _home, inlined
            if (at - home) & mask >= (at - hole) & mask:  # the hole lies on other's probe path
                slots[hole] = other
                hole = at
        slots[hole] = NIL
        self._used -= 1

    def _rehash(self, size: int) -> None:
        """Rebuild the hash table with size (a power of two) slots."""
        old = self._slots
        self._slots = array("i", [NIL]) * size
        self._shift = 64 - (size.bit_length() - 1)
        self._used = 0
        for node in old:
            if node != NIL:
                self._hash_add(node)

    # -- allocation -----------------------------------------------------------------------

    def _new_node(self, parent: int, label: int, depth: int, pos: int) -> int:
        """A fresh childless node (not yet linked, hashed or counted)."""
        node = self._free_node
        if node == NIL:
            node = len(self.depth)
            for column in (self.parent, self.first, self.next, self.prev, self.bucket):
                column.append(NIL)
            self.depth.append(depth)
            self.pos.append(pos)
            self.label.append(label)
        else:
            self._free_node = self.next[node]
            self.depth[node], self.pos[node], self.label[node] = depth, pos, label
            self.first[node] = NIL
        self.parent[node] = parent
        self.live += 1
        return node

    def _release_node(self, node: int) -> None:
        """Put node on the free list."""
        self.parent[node] = NIL
        self.next[node] = self._free_node
        self._free_node = node
        self.live -= 1

    def _new_bucket(self, count: int, node: int) -> int:
        """A bucket of count whose run is node alone."""
        bucket = self._free_bucket
        if bucket == NIL:
            bucket = len(self.bcount)
            self.bcount.append(count)
            self.bhead.append(node)
            self.btail.append(node)
        else:
            self._free_bucket = self.bhead[bucket]
            self.bcount[bucket], self.bhead[bucket], self.btail[bucket] = count, node, node
        return bucket

    def _release_bucket(self, bucket: int) -> None:
        """Put bucket on the free list."""
        self.bhead[bucket] = self._free_bucket
        self._free_bucket = bucket

    # -- the child lists ------------------------------------------------------------------

    def _unlink(self, node: int) -> None:
        """Take node out of its parent's list (its bucket is the caller's business)."""
        first, nxt, prv = self.first, self.next, self.prev
        parent = self.parent[node]
        before, after = prv[node], nxt[node]
        if first[parent] == node:
            first[parent] = after
        else:
            nxt[before] = after
        if after != NIL:
            prv[after] = before
        elif first[parent] != NIL:
            prv[first[parent]] = before

    def _insert_before(self, node: int, other: int) -> None:
        """Put node just before other in their parent's list."""
        parent = self.parent[node]
        before = self.prev[other]
        self.prev[node], self.next[node], self.prev[other] = before, other, node
        if self.first[parent] == other:
            self.first[parent] = node
        else:
            self.next[before] = node

    def _insert_after(self, node: int, other: int) -> None:
        """Put node just after other in their parent's list."""
        after = self.next[other]
        self.next[other], self.prev[node], self.next[node] = node, other, after
        if after != NIL:
            self.prev[after] = node
        else:
            self.prev[self.first[self.parent[node]]] = node

    def _replace(self, old: int, new: int) -> None:
        """Put new (parent already set, in no list) where old is: list place and bucket."""
        first, nxt, prv = self.first, self.next, self.prev
        parent = self.parent[old]
        before, after = prv[old], nxt[old]
        if first[parent] == old:
            first[parent] = new
        else:
            nxt[before] = new
        if after != NIL:
            prv[after] = new
        else:
            prv[first[parent]] = new
        prv[new] = new if before == old else before
        nxt[new] = after
        bucket = self.bucket[new] = self.bucket[old]
        if self.bhead[bucket] == old:
            self.bhead[bucket] = new
        if self.btail[bucket] == old:
            self.btail[bucket] = new

    # -- what the trie does ---------------------------------------------------------------

    def add_child(self, parent: int, label: int, depth: int, pos: int) -> int:
        """A new child of parent, seen once: last in its list, in the run of count 1."""
        node = self._new_node(parent, label, depth, pos)
        head = self.first[parent]
        last = self.prev[head] if head != NIL else NIL
        if last != NIL and self.bcount[self.bucket[last]] == 1:
            self.bucket[node] = self.bucket[last]
            self.btail[self.bucket[last]] = node
        else:
            self.bucket[node] = self._new_bucket(1, node)
        if head == NIL:
            self.first[parent], self.prev[node], self.next[node] = node, node, NIL
        else:
            self._insert_after(node, last)
        self._hash_add(node)
        return node

    def remove_leaf(self, node: int) -> None:
        """Free a childless node seen once."""
        bucket = self.bucket[node]
        head, tail = self.bhead[bucket], self.btail[bucket]
        if head == node and tail == node:
            self._release_bucket(bucket)
        elif head == node:
            self.bhead[bucket] = self.next[node]
        elif tail == node:
            self.btail[bucket] = self.prev[node]
        self._hash_remove(node)
        self._unlink(node)
        self._release_node(node)

    def increment(self, node: int) -> None:
        """Count node once more, moving it before the rest of its run."""
        bucket = self.bucket[node]
        count, head = self.bcount[bucket], self.bhead[bucket]
        before = self.prev[head] if self.first[self.parent[node]] != head else NIL
        target = self.bucket[before] if before != NIL else NIL
        if target != NIL and self.bcount[target] != count + 1:
            target = NIL
        if node == head:
            if node == self.btail[bucket]:
                if target == NIL:
                    self.bcount[bucket] = count + 1
                    return
                self._release_bucket(bucket)
            else:
                self.bhead[bucket] = self.next[node]
        else:
            if node == self.btail[bucket]:
                self.btail[bucket] = self.prev[node]
            self._unlink(node)
            self._insert_before(node, head)
        if target != NIL:
            self.bucket[node] = target
            self.btail[target] = node
        else:
            self.bucket[node] = self._new_bucket(count + 1, node)

    def decrement(self, node: int) -> None:
        """Count node once less (it stays >= 1), moving it after the rest of its run."""
        bucket = self.bucket[node]
        count, tail = self.bcount[bucket], self.btail[bucket]
        after = self.next[tail]
        target = self.bucket[after] if after != NIL else NIL
        if target != NIL and self.bcount[target] != count - 1:
            target = NIL
        if node == tail:
            if node == self.bhead[bucket]:
                if target == NIL:
                    self.bcount[bucket] = count - 1
                    return
                self._release_bucket(bucket)
            else:
                self.btail[bucket] = self.prev[node]
        else:
            if node == self.bhead[bucket]:
                self.bhead[bucket] = self.next[node]
            self._unlink(node)
            self._insert_after(node, tail)
        if target != NIL:
            self.bucket[node] = target
            self.bhead[target] = node
        else:
            self.bucket[node] = self._new_bucket(count - 1, node)

    def split(self, node: int, depth: int, pos: int, label_below: int) -> int:
        """A new node of that depth between node and its parent, with node's count and place;
        node hangs below it under label_below."""
        self._hash_remove(node)
        above = self._new_node(self.parent[node], self.label[node], depth, pos)
        self._replace(node, above)
        self.parent[node], self.label[node] = above, label_below
        self.first[above], self.prev[node], self.next[node] = node, node, NIL
        self.bucket[node] = self._new_bucket(self.bcount[self.bucket[above]], node)
        self._hash_add(above)
        self._hash_add(node)
        return above

    def redundant(self, node: int) -> bool:
        """True when node (not the root) has one child and every occurrence continues to it."""
        child = self.first[node]
        return (
            node != ROOT
            and child != NIL
            and self.next[child] == NIL
            and self.bcount[self.bucket[child]] == self.bcount[self.bucket[node]]
        )

    def merge(self, node: int) -> None:
        """Free a redundant node: its only child takes its place, label and bucket."""
        child = self.first[node]
        self._hash_remove(child)
        self._hash_remove(node)
        self._release_bucket(self.bucket[child])
        self.parent[child], self.label[child] = self.parent[node], self.label[node]
        self._replace(node, child)
        self._release_node(node)
        self._hash_add(child)
