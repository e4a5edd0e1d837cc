"""The Merkle tree over the records: RFC 6962 (RFC 9162 section 2.1) with SHA-256. Pure, no I/O.

``leaf = SHA-256(0x00 || entry)`` where ``entry`` is record ``seq``'s committed form
(braidlog.delta.committed_form, what ``braidlog show SEQ --entry`` writes) and the leaf index is
``seq - 1``; ``node = SHA-256(0x01 || left || right)``; the hash of the empty tree is
``SHA-256()``. This is the tree C2SP's tlog-checkpoint, tlog-tiles and tlog-proof assume, so Go's
``golang.org/x/mod/sumdb/tlog`` and every transparency-log client check braidlog's proofs.

A store keeps the hash of every *complete* subtree: node ``(level, index)`` covers leaves
``[index << level, (index + 1) << level)``. Nodes are immutable once written; the leaf of seq
``(index + 1) << level`` completes the node, so a store keeps it with that record (an append
writes the nodes its leaves complete, ``Frontier.completed``). Level 0 is the leaf hash, which a
store computes from the record instead of storing it. Every tree hash RFC 9162 asks for,
``MTH(D[lo:hi])`` for a range of the RFC's tree, is a right fold of at most log2(n) complete
subtrees (``subtrees``), so the root of any size and every proof take O(log n) reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from hashlib import sha256

__all__ = [
    "EMPTY_ROOT", "leaf_hash", "node_hash", "Node", "peaks", "subtrees", "fold",
    "inclusion_ranges", "consistency_ranges", "Frontier",
]

Node = tuple[int, int]
"""A complete subtree: (level, index); it covers leaves [index << level, (index + 1) << level)."""

EMPTY_ROOT = sha256(b"").digest()


def leaf_hash(body: bytes) -> bytes:
    """RFC 6962 ``MTH({d}) = SHA-256(0x00 || d)`` for one record's committed form."""
    return sha256(b"\x00" + body).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 ``SHA-256(0x01 || left || right)``."""
    return sha256(b"\x01" + left + right).digest()


def subtrees(lo: int, hi: int) -> list[Node]:
    """The complete subtrees that make up leaves [lo, hi), left to right, largest first.

    For a range that is a node of RFC 9162's tree (``lo`` a multiple of the largest power of two
    below ``hi - lo``, or ``[0, n)``), ``MTH(D[lo:hi])`` is ``fold`` of their hashes.
    """
    out: list[Node] = []
    while lo < hi:
        level = (hi - lo).bit_length() - 1
        if lo:
            level = min(level, (lo & -lo).bit_length() - 1)
        out.append((level, lo >> level))
        lo += 1 << level
    return out


def peaks(size: int) -> list[Node]:
    """The complete subtrees of a tree of ``size`` leaves (one per set bit), left to right."""
    return subtrees(0, size)


def fold(hashes: Sequence[bytes]) -> bytes:
    """``MTH`` of a range from its complete subtrees' hashes: a right fold with ``node_hash``."""
    if not hashes:
        return EMPTY_ROOT
    h = hashes[-1]
    for left in reversed(hashes[:-1]):
        h = node_hash(left, h)
    return h


def _split(n: int) -> int:
    """RFC 9162's k: the largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The leaf ranges whose ``MTH`` make up ``PATH(index, D[size])`` (RFC 9162 2.1.3.1), in order."""
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is outside a tree of size {size}")
    out: list[tuple[int, int]] = []
    lo, hi = 0, size
    while hi - lo > 1:  # walk down; the RFC lists the deepest sibling first
        k = _split(hi - lo)
        if index < lo + k:
            out.append((lo + k, hi))
            hi = lo + k
        else:
            out.append((lo, lo + k))
            lo += k
    out.reverse()
    return out


def consistency_ranges(old: int, new: int) -> list[tuple[int, int]]:
    """The leaf ranges whose ``MTH`` make up ``PROOF(old, D[new])`` (RFC 9162 2.1.4.1), in order."""
    if not 0 < old <= new:
        raise ValueError(f"no consistency proof from size {old} to size {new}")
    out: list[tuple[int, int]] = []
    lo, hi, m, whole = 0, new, old, True
    while m != hi - lo:  # SUBPROOF(m, D[lo:hi], whole)
        k = _split(hi - lo)
        if m <= k:
            out.append((lo + k, hi))
            hi = lo + k
        else:
            out.append((lo, lo + k))
            lo, m, whole = lo + k, m - k, False
    if not whole:
        out.append((lo, hi))
    out.reverse()
    return out


class Frontier:
    """The peaks of a growing tree, extended leaf by leaf; reports each node it completes.

    ``Frontier(size, peak_hashes)`` starts from a tree of ``size`` leaves with the hashes of its
    ``peaks(size)``; ``push(leaf)`` appends one leaf hash and returns the (level, index, hash) of
    every node of level 1 or more that it completes (none for an even index, at most
    log2(size) otherwise).
    """

    __slots__ = ("size", "stack")

    def __init__(self, size: int = 0, peak_hashes: Iterable[bytes] = ()) -> None:
        self.size = size
        self.stack = list(peak_hashes)  # hashes of peaks(size), left to right
        if len(self.stack) != size.bit_count():
            raise ValueError(f"a tree of size {size} has {size.bit_count()} peaks, "
                             f"{len(self.stack)} given")

    def push(self, leaf: bytes) -> list[tuple[int, int, bytes]]:
        made: list[tuple[int, int, bytes]] = []
        index, h, level = self.size, leaf, 0
        stack = self.stack
        while index & 1:
            h = node_hash(stack.pop(), h)
            level += 1
            index >>= 1
            made.append((level, index, h))
        stack.append(h)
        self.size += 1
        return made

    def root(self) -> bytes:
        return fold(self.stack)

    def completed(self, bodies: Iterable[bytes]) -> list[bytes]:
        """Append a leaf for each record's committed form; for each, the hashes of the nodes of
        level 1 or more its leaf completes, lowest level first, joined (32 bytes a node; none for
        an even index): what a store keeps in that record's row.

        ``push`` with the leaf hashing inlined, for the append path."""
        stack, size = self.stack, self.size
        out: list[bytes] = []
        for body in bodies:
            h = sha256(b"\x00" + body).digest()
            index, made = size, b""
            while index & 1:
                h = sha256(b"\x01" + stack.pop() + h).digest()
                made += h
                index >>= 1
            out.append(made)
            stack.append(h)
            size += 1
        self.size = size
        return out


def hashes_for(ranges: Iterable[tuple[int, int]]) -> tuple[list[list[Node]], list[Node]]:
    """Each range's complete subtrees, and the distinct nodes of all of them (to read at once)."""
    parts = [subtrees(lo, hi) for lo, hi in ranges]
    wanted = list(dict.fromkeys(n for part in parts for n in part))
    return parts, wanted


def resolve(ranges: Sequence[tuple[int, int]],
            read: Callable[[list[Node]], list[bytes]]) -> list[bytes]:
    """``MTH`` of each range, reading every complete subtree they need with one ``read`` call."""
    parts, wanted = hashes_for(ranges)
    got = dict(zip(wanted, read(wanted), strict=False))
    return [fold([got[n] for n in part]) for part in parts]
