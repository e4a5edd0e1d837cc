"""Roots and RFC 9162 proofs of a store's Merkle tree, in O(log n) reads of stored nodes.

The tree math is braidlog/tree.py; a store answers ``tree_hashes(nodes)`` with the hashes of
complete subtrees (nodes are immutable once written, so reads need no common snapshot).
"""

from __future__ import annotations

from typing import Any

import msgspec

from .. import tree as merkle
from ..errors import IntegrityError, ValidationError
from ..store import FullStore, OnDisk

__all__ = ["InclusionProof", "ConsistencyProof", "root", "inclusion_proof", "consistency_proof",
           "check_tree_extends"]


class InclusionProof(msgspec.Struct, frozen=True):
    """Record ``seq`` is leaf ``seq - 1`` of the tree of ``tree_size`` leaves with ``root``."""

    seq: int
    tree_size: int
    leaf_hash: bytes
    path: list[bytes]
    root: bytes

    def to_json(self) -> dict[str, Any]:
        """The form ``braidlog prove inclusion --json`` prints: hashes in lowercase hex."""
        return {"seq": self.seq, "tree_size": self.tree_size, "leaf_hash": self.leaf_hash.hex(),
                "path": [p.hex() for p in self.path], "root": self.root.hex()}


class ConsistencyProof(msgspec.Struct, frozen=True):
    """The tree of ``new_size`` leaves extends the tree of ``old_size`` leaves."""

    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    path: list[bytes]

    def to_json(self) -> dict[str, Any]:
        """The form ``braidlog prove consistency --json`` prints: hashes in lowercase hex."""
        return {"old_size": self.old_size, "new_size": self.new_size,
                "tree_size": self.new_size, "old_root": self.old_root.hex(),
                "new_root": self.new_root.hex(), "path": [p.hex() for p in self.path]}


def store_arg(store: Any, field: str = "store") -> FullStore:
    """``store`` when it is a log store (a MemoryLog, an LmdbLog, a view of one), else ValidationError."""
    if not all(callable(getattr(store, m, None)) for m in ("head", "tree_hashes")):
        raise ValidationError(field, f"must be a log store (an LmdbLog, a MemoryLog, braid.log), not "
                              f"{type(store).__name__}")
    return store


def _size(store: FullStore, size: int | None, field: str) -> int:
    head = store_arg(store).head().seq
    if size is None:
        return head
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= head:
        raise ValidationError(field, f"must be a tree size from 0 to the head ({head}), got {size!r}")
    return size


def _resolve(store: FullStore, ranges: list[tuple[int, int]]) -> list[bytes]:
    try:
        return merkle.resolve(ranges, store.tree_hashes)
    except IndexError as e:  # the store shrank under us: only a damaged store does that
        raise IntegrityError(f"the Merkle tree lacks a node below the head ({e})") from None


def root(store: FullStore, size: int | None = None) -> bytes:
    """The RFC 9162 root of the first ``size`` records (default: the head); O(log n) reads."""
    size = _size(store, size, "size")
    return _resolve(store, [(0, size)])[0] if size else merkle.EMPTY_ROOT


def inclusion_proof(store: FullStore, seq: int, size: int | None = None) -> InclusionProof:
    """The RFC 9162 inclusion proof of record ``seq`` in the tree of ``size`` (default: the head)."""
    size = _size(store, size, "size")
    if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= size:
        raise ValidationError("seq", f"must be a seq from 1 to the tree size ({size}), got {seq!r}")
    ranges = merkle.inclusion_ranges(seq - 1, size)
    hashes = _resolve(store, [(seq - 1, seq), *ranges, (0, size)])
    return InclusionProof(seq, size, hashes[0], hashes[1:-1], hashes[-1])


def consistency_proof(store: FullStore, old_size: int, new_size: int | None = None
                      ) -> ConsistencyProof:
    """The RFC 9162 consistency proof from size ``old_size`` to ``new_size`` (default: the head)."""
    new_size = _size(store, new_size, "new_size")
    if isinstance(old_size, bool) or not isinstance(old_size, int) or not 1 <= old_size <= new_size:
        raise ValidationError("old_size", f"must be from 1 to the new size ({new_size}), "
                              f"got {old_size!r}")
    ranges = merkle.consistency_ranges(old_size, new_size)
    hashes = _resolve(store, [(0, old_size), *ranges, (0, new_size)])
    return ConsistencyProof(old_size, new_size, hashes[0], hashes[-1], hashes[1:-1])


def check_tree_extends(store: FullStore, size: int, expected_root: bytes, what: str) -> None:
    """IntegrityError unless the log still holds ``size`` records whose root is ``expected_root``."""
    head = store_arg(store).head().seq
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValidationError("size", f"must be a tree size, a whole number, not {size!r}"[:120])
    if size > head:
        raise IntegrityError(f"{what} covers {size} records but the log holds {head}: records "
                             "were lost", seq=head + 1)
    found = root(store, size)
    if found != expected_root:
        upgrade = before_upgrade(store, size, root=expected_root)
        if upgrade is not None:
            raise IntegrityError(
                f"{what} was {upgrade}: it signs the root {expected_root.hex()} of the earlier "
                f"BLAKE3 tree, which the RFC 6962 SHA-256 tree (root {found.hex()} at that size) "
                "replaced. Its records are unchanged, but no proof can be checked against it "
                "now: use a checkpoint signed after the upgrade "
                "(docs/operations.md#upgrading-a-store)", seq=size, expected=expected_root,
                found=found)
        raise IntegrityError(f"{what}: the log's first {size} records have root {found.hex()}, "
                             f"not {expected_root.hex()}: the log was rewritten",
                             seq=size, expected=expected_root, found=found)


def before_upgrade(store: FullStore, size: int, *, hash: bytes | None = None,
                   root: bytes | None = None) -> str | None:
    """When the chain ``hash`` or tree ``root`` of the first ``size`` records is what they had
    before the store was upgraded to format 4 (re-chained over the committed forms, the tree
    rebuilt in SHA-256), a phrase saying so, else None. The records are recomputed the old way
    and must also still give the head recorded at the upgrade (O(records before it))."""
    if not isinstance(store, OnDisk):
        return None
    before = store.upgraded()
    if before is None or size > before.seq:
        return None
    got = store.before_hashes(size, before.seq)
    if got[before.seq][0] != before.hash:
        return None
    old_hash, old_root = got[size]
    if (hash is not None and old_hash == hash) or (root is not None and old_root == root):
        return (f"issued before this store was upgraded to braidlog's format 4 (at seq "
                f"{before.seq}, head {before.seq}:{before.hash.hex()} before it)")
    return None
