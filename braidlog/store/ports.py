"""The storage port, by role: what a store is asked for, named one role at a time.

- ``LogReader``: the reads a boundary check, a view and a fold need (head, read, get, seq_of,
  the scans, braid_head). ``ReadView`` (a store as of a seq) and ``BatchView`` (that, plus a
  batch being written) are readers and nothing more.
- ``LogStore(LogReader)``: adds the writes (append, append_batch, commit, commit_locked) and
  close.
- Each other capability is a small Protocol of its own, asked for with ``isinstance`` where it
  is optional, never with ``getattr``: ``Bodies`` (the records as stored and chained),
  ``Indexes`` (what the secondary indexes count), ``Checkpoints`` (projection state
  snapshots), ``SideTables`` (the projections a store is used with, issued checkpoint notes),
  ``MerkleTree`` (the RFC 6962 tree's nodes), ``Erasure`` (erase, apply_erasures), ``OnDisk``
  (a store kept in a directory).

A store asserts the ports it implements by naming them as its bases (``MemoryLog``,
``LmdbLog``, ``SyncLog``); ``FullStore`` names the set both shipped adapters implement, what
the facade (``Braid``) and the tools that move, prove and ship a log ask of a store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from os import PathLike
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar, cast, runtime_checkable

from msgspec import Struct

from ..chain import Row
from ..delta import GenericDelta
from ..errors import ValidationError
from ..kinds import Registry

__all__ = [
    "Head", "BraidHead", "Record", "Staged", "Progress", "Admit",
    "LogReader", "LogStore", "Bodies", "Indexes", "Checkpoints", "SideTables", "MerkleTree",
    "Erasure", "OnDisk", "FullStore", "CAPABILITIES", "Fronted", "store_of",
]

Progress = Callable[[int], None]
"""Called with the number of records done so far, for progress bars."""

Admit = Callable[["Head", "list[Staged]"], None]
"""A store's last check of a batch, called inside its write transaction with the head before
the batch and the records about to be written (the batch's new deltas, with their seqs; an
idempotent retry is not among them). Raising refuses the batch: nothing of it is written.
A store may call it again for the same batch when it retries the transaction (LMDB after growing
its map), so it must be idempotent. ``Braid`` passes one to run its projections' checks
(braidlog.projection); ``SyncLog`` publishes the batch from it (braidlog.replication.sync)."""


class Head(NamedTuple):
    """The log's head: the last seq and its chain hash. Write it down to prove the past later."""

    seq: int
    hash: bytes

    def __str__(self) -> str:
        return f"{self.seq}:{self.hash.hex()}"

    @classmethod
    def parse(cls, text: str) -> Head:
        """``SEQ:HASH`` (hash in hex) as printed by ``str(head)`` and ``braidlog head``."""
        seq, sep, hexhash = text.strip().partition(":")
        try:
            head = cls(int(seq), bytes.fromhex(hexhash))
        except ValueError:
            head = None
        if not sep or head is None or len(head.hash) != 32 or head.seq < 0:
            raise ValidationError("head", f"must be SEQ:HASH with a 64-digit hex hash, got {text!r}")
        return head


class BraidHead(NamedTuple):
    """A braid's version (how many deltas it holds) and the seq of its last delta (0 if none)."""

    version: int
    seq: int


class Record(Struct, frozen=True, gc=False):
    """A stored delta with its position and chain hash."""

    seq: int
    hash: bytes
    delta: GenericDelta


class Staged(NamedTuple):
    """A validated delta ready to be written at ``seq``: its chain hash, body (hw || delta
    bytes), delta, the ids it refers to, its committed form and its salt."""

    seq: int
    hash: bytes
    body: bytes
    delta: GenericDelta
    refs: frozenset[str]
    entry: bytes = b""
    salt: bytes = b""
    erased_by: int = 0


# -- the roles ---------------------------------------------------------------------------------
# Ranges are half-open [start, stop) over seq, as Python slices are.

@runtime_checkable
class LogReader(Protocol):
    """Reading the log: its head, a record by seq or delta id, the scans (by seq, braid, kind
    and referenced id) and a braid's version. Nothing here can write."""

    def head(self) -> Head: ...
    def read(self, seq: int) -> Record: ...
    def get(self, delta_id: str) -> Record | None: ...
    def seq_of(self, delta_id: str) -> int | None: ...
    def scan(self, start: int = 1, stop: int | None = None, *, reverse: bool = False,
             limit: int | None = None) -> Iterator[Record]: ...
    def scan_braid(self, braid_id: str, start: int = 1, stop: int | None = None, *,
                   reverse: bool = False, limit: int | None = None) -> Iterator[Record]: ...
    def scan_kind(self, kind: str, start: int = 1, stop: int | None = None, *,
                  reverse: bool = False, limit: int | None = None) -> Iterator[Record]: ...
    def scan_refs(self, entity_id: str, start: int = 1, stop: int | None = None, *,
                  reverse: bool = False, limit: int | None = None) -> Iterator[Record]: ...
    def braid_head(self, braid_id: str) -> BraidHead: ...


@runtime_checkable
class LogStore(LogReader, Protocol):
    """A log that can be written: appends (atomic per batch, idempotent per delta id, checked
    against ``expected_version`` and ``expected_head``), and closing it. ``registry``: the kinds
    it validates against (the process's and those declared in the log)."""

    registry: Registry
    readonly: bool  # appends and checkpoints are refused (StorageError)

    def append(self, delta: GenericDelta, *, expected_version: int | None = None) -> int: ...
    def append_batch(self, deltas: Iterable[GenericDelta], *,
                     expected_version: int | Mapping[str, int] | None = None,
                     expected_head: int | None = None, admit: Admit | None = None,
                     salts: Mapping[str, bytes] | None = None) -> list[int]: ...
    def commit(self, deltas: Iterable[GenericDelta], *,
               expected_version: int | Mapping[str, int] | None = None,
               expected_head: int | None = None, admit: Admit | None = None,
               salts: Mapping[str, bytes] | None = None) -> list[Record]: ...
    def commit_locked(self, prepare: Callable[[Head], Iterable[GenericDelta]], *,
                      expected_version: int | Mapping[str, int] | None = None,
                      admit: Admit | None = None) -> list[Record]: ...
    def close(self) -> None: ...


@runtime_checkable
class Bodies(Protocol):
    """The records as stored and chained: a record's body (``hw || canonical delta``), its
    committed form, the chain hash after it, the rows for export and replication, the time
    index over the high-water times, and ``verify``, which recomputes the chain over them."""

    def body(self, seq: int) -> bytes: ...
    def entry(self, seq: int) -> bytes: ...
    def hash_at(self, seq: int) -> bytes: ...
    def scan_bodies(self, start: int = 1, stop: int | None = None
                    ) -> Iterator[tuple[int, bytes, bytes]]: ...
    def scan_rows(self, start: int = 1, stop: int | None = None) -> Iterator[Row]: ...
    def seq_at(self, ts: datetime) -> int: ...
    def verify(self, start: int = 1, stop: int | None = None, *,
               progress: Progress | None = None) -> Head: ...


@runtime_checkable
class Indexes(Protocol):
    """What the secondary indexes count: every braid's head, deltas per key of an index, the
    vector spaces and their dimensions."""

    def braids(self) -> dict[str, BraidHead]: ...
    def counts(self, index: str) -> dict[str, int]: ...
    def spaces(self) -> dict[str, int]: ...


@runtime_checkable
class Checkpoints(Protocol):
    """Projection state snapshots, keyed by (projection name, version, seq)."""

    def put_checkpoint(self, name: str, version: int, seq: int, blob: bytes) -> None: ...
    def checkpoint_seqs(self, name: str, version: int) -> list[int]: ...
    def get_checkpoint(self, name: str, version: int, seq: int) -> bytes | None: ...
    def checkpoint_keys(self) -> list[tuple[str, int, int]]: ...


@runtime_checkable
class SideTables(Protocol):
    """The small tables kept beside the log: the projections the store is used with, and the
    checkpoint notes issued over its tree."""

    def projections_used(self) -> list[str]: ...
    def use_projections(self, names: Iterable[str]) -> None: ...
    def put_note(self, size: int, note: bytes) -> None: ...
    def notes(self, *, last: bool = False) -> list[tuple[int, bytes]]: ...


@runtime_checkable
class MerkleTree(Protocol):
    """The RFC 6962 tree over the committed forms, kept as the log grows (braidlog/tree.py)."""

    def tree_hashes(self, nodes: list[tuple[int, int]]) -> list[bytes]: ...


@runtime_checkable
class Erasure(Protocol):
    """Dropping records' payloads and keeping their commitments (braidlog.erasure)."""

    def erase(self, seqs: Iterable[int], delta: GenericDelta) -> tuple[Record, list[bytes]]: ...
    def apply_erasures(self, erase: Mapping[int, int], append: Callable[[Any], Any]
                       ) -> tuple[Any, list[bytes]]: ...


@runtime_checkable
class OnDisk(Protocol):
    """A store kept in a directory (``LmdbLog``). Its path and on-disk format, a cheap
    "written since?" stamp, its size, a consistent online copy, the file pages a reader that
    has copied what it read may let go, and what its chain and tree were before an upgrade
    re-chained it (``upgraded``, ``before_hashes``)."""

    path: Path
    format_version: int

    def last_commit(self) -> int: ...
    def release_pages(self) -> None: ...
    def stat(self) -> dict[str, int]: ...
    def copy(self, dest: str | PathLike[str], *, compact: bool = True) -> None: ...
    def upgraded(self) -> Any: ...
    def before_hashes(self, *sizes: int) -> dict[int, tuple[bytes, bytes]]: ...


@runtime_checkable
class FullStore(LogStore, Bodies, Indexes, Checkpoints, SideTables, MerkleTree, Erasure, Protocol):
    """Every role and capability ``MemoryLog`` and ``LmdbLog`` both implement (``OnDisk``
    aside): what a ``Braid`` embeds, and what export, import, proofs and replication use."""


#: The optional capabilities beside the two roles, each asked for with ``isinstance``.
CAPABILITIES: tuple[type, ...] = (Bodies, Indexes, Checkpoints, SideTables, MerkleTree, Erasure,
                                  OnDisk)


# -- the store behind a facade -------------------------------------------------------------------

S_co = TypeVar("S_co", covariant=True)
S = TypeVar("S")


@runtime_checkable
class Fronted(Protocol[S_co]):
    """Something with a store behind it: a ``Braid`` (its store) or a ``View`` (its store as of
    its seq, a ``ReadView``)."""

    @property
    def log(self) -> S_co: ...


def store_of(source: Fronted[S] | S) -> S:
    """The store behind ``source``: a Braid's store, a View's reader as of its seq, or
    ``source`` itself when it is a store. (An attribute lookup, not ``isinstance(source,
    Fronted)``, which costs some 50 µs on Python 3.11 for a protocol with a data member.)"""
    try:
        return cast("Fronted[S]", source).log
    except AttributeError:
        return cast(S, source)
