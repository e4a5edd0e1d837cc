"""A brute-force RFC 6962 (RFC 9162 section 2.1) Merkle tree with SHA-256, written from the RFC's text.

It shares no code with braidlog: MTH, PATH and PROOF are the RFC's recursive definitions over a
list of leaf inputs. ``Reference(leaves)`` memoises MTH by range so that thousands of proofs over
one leaf list stay fast; that changes no result.
"""

from __future__ import annotations

from functools import lru_cache
from hashlib import sha256


def HASH(data: bytes) -> bytes:
    return sha256(data).digest()


def largest_power_of_two_below(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


class Reference:
    """MTH, PATH and PROOF of RFC 9162 over ``leaf_hashes`` (``HASH(0x00 || d)`` of each input)."""

    def __init__(self, leaf_hashes: list[bytes]) -> None:
        self.leaves = leaf_hashes
        self.mth = lru_cache(maxsize=None)(self._mth)

    @classmethod
    def of_inputs(cls, inputs: list[bytes]) -> Reference:
        return cls([HASH(b"\x00" + d) for d in inputs])

    def _mth(self, lo: int, hi: int) -> bytes:
        n = hi - lo
        if n == 0:
            return HASH(b"")
        if n == 1:
            return self.leaves[lo]
        k = largest_power_of_two_below(n)
        return HASH(b"\x01" + self.mth(lo, lo + k) + self.mth(lo + k, hi))

    def root(self, n: int) -> bytes:
        return self.mth(0, n)

    def path(self, m: int, lo: int, hi: int) -> list[bytes]:
        """PATH(m, D[lo:hi]) with m relative to lo."""
        n = hi - lo
        if n == 1:
            return []
        k = largest_power_of_two_below(n)
        if m < k:
            return self.path(m, lo, lo + k) + [self.mth(lo + k, hi)]
        return self.path(m - k, lo + k, hi) + [self.mth(lo, lo + k)]

    def inclusion(self, m: int, n: int) -> list[bytes]:
        return self.path(m, 0, n)

    def subproof(self, m: int, lo: int, hi: int, b: bool) -> list[bytes]:
        n = hi - lo
        if m == n:
            return [] if b else [self.mth(lo, hi)]
        k = largest_power_of_two_below(n)
        if m <= k:
            return self.subproof(m, lo, lo + k, b) + [self.mth(lo + k, hi)]
        return self.subproof(m - k, lo + k, hi, False) + [self.mth(lo, lo + k)]

    def consistency(self, m: int, n: int) -> list[bytes]:
        return self.subproof(m, 0, n, True)
