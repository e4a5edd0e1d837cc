"""The hash chain: pure blake3 functions, no I/O.

``h[seq] = blake3(h[seq-1] || seq as 8 bytes big-endian || stored bytes)``, with ``h[0]`` 32 zero
bytes. Changing, dropping or reordering any record changes every later hash, so the head
(seq, hash) written down at any time proves the whole prefix up to it.
"""

from __future__ import annotations

from collections.abc import Iterable

from blake3 import blake3

__all__ = ["GENESIS", "HASH_SIZE", "link", "links", "first_mismatch", "digest"]

HASH_SIZE = 32
GENESIS = bytes(HASH_SIZE)


def link(prev: bytes, seq: int, data: bytes) -> bytes:
    """The chain hash of record ``seq`` with stored bytes ``data`` after hash ``prev``."""
    return blake3(prev + seq.to_bytes(8, "big") + data).digest()


def links(prev: bytes, seq: int, bodies: Iterable[bytes]) -> list[bytes]:
    """The chain hashes of ``bodies`` stored at ``seq``, ``seq + 1`` … after hash ``prev``:
    ``link`` over a batch, with one hasher reset after each record (a third cheaper than a new
    hasher per record on the append path)."""
    hasher = blake3()
    update, digest_, reset = hasher.update, hasher.digest, hasher.reset
    out: list[bytes] = []
    for data in bodies:
        update(prev + seq.to_bytes(8, "big") + data)
        prev = digest_()
        reset()
        out.append(prev)
        seq += 1
    return out


def digest(data: bytes) -> bytes:
    """A plain blake3 digest (for checkpoints and derived artifacts)."""
    return blake3(data).digest()


def first_mismatch(prev: bytes, records: Iterable[tuple[int, bytes, bytes]]
                   ) -> tuple[int, bytes, bytes] | None:
    """Walk (seq, stored hash, stored bytes) in order from ``prev``; the first that does not chain.

    Returns (seq, expected hash, found hash), or None when every record chains.
    """
    for seq, found, data in records:
        expected = blake3(prev + seq.to_bytes(8, "big") + data).digest()
        if expected != found:
            return seq, expected, found
        prev = found
    return None
