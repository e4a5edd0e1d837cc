"""The ``LogStore`` protocol, the rules every store shares, and ``MemoryLog``, the reference.

``MemoryLog`` is the specification in executable form: plain lists and dicts, no cleverness.
``LmdbLog`` must behave exactly like it; ``tests/store_contract.py`` runs one suite against both.

The log's invariants (docs/requirements.md numbers them):

- A store assigns ``seq`` 1, 2, 3 … with no gaps; an append of one delta or a batch is atomic.
- Record ``seq`` is stored with its chain hash, ``hw`` (the highest ``ts``, microseconds since
  the epoch, of deltas ``1..seq``), its committed form ``entry`` (delta.committed_form: the
  envelope and a salted commitment to the canonical delta bytes), its ``salt`` and its canonical
  delta bytes; ``hash = chain.link(hash[seq-1], seq, entry)`` and the Merkle tree's leaf
  ``seq - 1`` is ``entry``. ``body`` is ``hw`` (8 bytes big-endian) followed by the delta bytes.
- A delta id is stored once. Appending it again with identical canonical bytes returns the stored
  seq and writes nothing; with other bytes it is a ConflictError.
- ``expected_version`` (the number of deltas a braid holds) is checked before anything is written.
- There is no update and no delete.
"""

from __future__ import annotations

import bisect
import numbers
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from os import PathLike
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

import msgspec
from msgspec import Struct

from . import tree as merkle
from .chain import GENESIS, Row, checked_rows, digest, link, links, tree_checked, ts_micros
from .delta import (
    SALT_SIZE,
    GenericDelta,
    _shown,
    check_entry_size,
    committed_form,
    encode,
    referenced_ids,
    validate_typed,
)
from .erasure import ERASED, erased_delta, erased_entry, payload_refs, reproduced
from .errors import ConflictError, IntegrityError, StaleHead, ValidationError
from .kind_schema import KIND_DECLARED, admit_declaration, store_kinds
from .kind_schema import sync as sync_kinds
from .kinds import REGISTRY, Registry

__all__ = [
    "HW_SIZE",
    "Head",
    "BraidHead",
    "Record",
    "LogStore",
    "OnDisk",
    "MemoryLog",
    "IndexScans",
    "Staged",
    "Row",
    "Checked",
    "check_batch",
    "stage",
    "ts_micros",
    "resolve_point",
    "Progress",
    "Admit",
]

MAX_REF_BYTES = 480  # an index key must stay under LMDB's 511-byte limit

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


def id_key(delta_id: str) -> str:
    """The stored form of a delta id: ULIDs are case-insensitive and stored upper-case."""
    return delta_id.upper()


def resolve_point(store: LogStore, point: int | str | datetime, field: str = "point") -> int:
    """The seq a point names in ``store``: a seq (0 to the head), a delta id, or a timezone-aware
    datetime (the last seq up to which every delta has ``ts`` at or before it). A bad point is a
    ValidationError naming ``field``."""
    head = store.head().seq
    if isinstance(point, bool):
        raise ValidationError(field, "must be a seq, a delta id or a datetime")
    if isinstance(point, numbers.Integral):  # numpy integers too
        if not 0 <= point <= head:
            raise ValidationError(field, f"seq {point} is outside the log (0..{head})")
        return int(point)
    if isinstance(point, datetime):
        if point.tzinfo is None:
            raise ValidationError(field, "a datetime must be timezone-aware")
        return store.seq_at(point)
    if isinstance(point, str):
        seq = store.seq_of(point)
        if seq is None:
            raise ValidationError(field, f"no delta with id {point!r}")
        return seq
    raise ValidationError(field, f"must be a seq, a delta id or a datetime, not {type(point).__name__}")


#: A record's body is its high-water time (u64, big-endian microseconds), then the delta's bytes.
HW_SIZE = 8


def hw_of(body: bytes) -> int:
    """The high-water time a record's body starts with (microseconds since the epoch)."""
    return int.from_bytes(body[:HW_SIZE], "big")


# -- the rule that a record continues the log ----------------------------------------------------
# ``stage`` builds each record by it; import (transfer.py) and a replica (replication/replica.py)
# check records written elsewhere by it.

def next_hw(hw: int, ts_us: int) -> int:
    """The high-water time of a record: the highest delta time so far, its own included."""
    return ts_us if ts_us > hw else hw


def hw_fault(prev_hw: int | None, body: bytes, ts_us: int) -> int | None:
    """The high-water time ``body`` should start with after a record of high-water ``prev_hw``
    (None: not known, then at least its delta's time ``ts_us``), when it does not; else None."""
    want = ts_us if prev_hw is None else next_hw(prev_hw, ts_us)
    found = hw_of(body)
    return None if found == want or (prev_hw is None and found >= ts_us) else want


def chain_fault(prev: bytes, seq: int, entry: bytes, found: bytes) -> bytes | None:
    """The chain hash record ``seq`` (committed form ``entry``) should have after a record of
    hash ``prev``, when ``found`` is not it; else None."""
    expected = link(prev, seq, entry)
    return None if expected == found else expected


@runtime_checkable
class LogStore(Protocol):
    """What every store offers. Ranges are half-open [start, stop) over seq.

    A store asserts the ports it implements by naming them as its bases (``MemoryLog(LogStore)``,
    ``LmdbLog(LogStore, OnDisk)``); code that can use an optional capability asks
    ``isinstance(store, OnDisk)``, never for an attribute."""

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
    def read(self, seq: int) -> Record: ...
    def get(self, delta_id: str) -> Record | None: ...
    def seq_of(self, delta_id: str) -> int | None: ...
    def body(self, seq: int) -> bytes: ...
    def scan(self, start: int = 1, stop: int | None = None, *, reverse: bool = False,
             limit: int | None = None) -> Iterator[Record]: ...
    def scan_bodies(self, start: int = 1, stop: int | None = None
                    ) -> Iterator[tuple[int, bytes, bytes]]: ...
    def entry(self, seq: int) -> bytes: ...
    def scan_rows(self, start: int = 1, stop: int | None = None) -> Iterator[Row]: ...
    def scan_braid(self, braid_id: str, start: int = 1, stop: int | None = None, *,
                   reverse: bool = False, limit: int | None = None) -> Iterator[Record]: ...
    def scan_kind(self, kind: str, start: int = 1, stop: int | None = None, *,
                  reverse: bool = False, limit: int | None = None) -> Iterator[Record]: ...
    def scan_refs(self, entity_id: str, start: int = 1, stop: int | None = None, *,
                  reverse: bool = False, limit: int | None = None) -> Iterator[Record]: ...
    def head(self) -> Head: ...
    def hash_at(self, seq: int) -> bytes: ...
    def braid_head(self, braid_id: str) -> BraidHead: ...
    def braids(self) -> dict[str, BraidHead]: ...
    def counts(self, index: str) -> dict[str, int]: ...
    def spaces(self) -> dict[str, int]: ...
    def seq_at(self, ts: datetime) -> int: ...
    def verify(self, start: int = 1, stop: int | None = None, *,
               progress: Progress | None = None) -> Head: ...
    def erase(self, seqs: Iterable[int], delta: GenericDelta) -> tuple[Record, list[bytes]]: ...
    def apply_erasures(self, erase: Mapping[int, int], append: Callable[[Any], Any]
                       ) -> tuple[Any, list[bytes]]: ...
    def put_checkpoint(self, name: str, version: int, seq: int, blob: bytes) -> None: ...
    def checkpoint_seqs(self, name: str, version: int) -> list[int]: ...
    def get_checkpoint(self, name: str, version: int, seq: int) -> bytes | None: ...
    def checkpoint_keys(self) -> list[tuple[str, int, int]]: ...
    def projections_used(self) -> list[str]: ...
    def use_projections(self, names: Iterable[str]) -> None: ...
    def tree_hashes(self, nodes: list[tuple[int, int]]) -> list[bytes]: ...
    def put_note(self, size: int, note: bytes) -> None: ...
    def notes(self, *, last: bool = False) -> list[tuple[int, bytes]]: ...
    def close(self) -> None: ...


@runtime_checkable
class OnDisk(Protocol):
    """An optional capability: a store kept in a directory (``LmdbLog``). Its path and on-disk
    format, a cheap "written since?" stamp, its size, a consistent online copy, the file
    pages a reader that has copied what it read may let go, and what its chain and tree were
    before an upgrade re-chained it (``upgraded``, ``before_hashes``)."""

    path: Path
    format_version: int

    def last_commit(self) -> int: ...
    def release_pages(self) -> None: ...
    def stat(self) -> dict[str, int]: ...
    def copy(self, dest: str | PathLike[str], *, compact: bool = True) -> None: ...
    def upgraded(self) -> Any: ...
    def before_hashes(self, *sizes: int) -> dict[int, tuple[bytes, bytes]]: ...


class Checked(NamedTuple):
    """A delta that passed every envelope and payload rule, with its canonical bytes (an
    erased record reproduced: its erased form, no bytes, and ``erased_by``)."""

    delta: GenericDelta
    data: bytes
    refs: frozenset[str]
    erased_by: int = 0


def check_batch(deltas: Iterable[GenericDelta], registry: Registry, *,
                erasure: bool = False) -> list[Checked]:
    """Validate a batch before any transaction: envelope, payload schema, ids unique in it.
    An ``erased`` delta, and a delta read from an erased record (``delta.erased``), are written
    only where ``erasure`` is true: by an erasure, which also erases, and where records written
    elsewhere are reproduced (import, a replica: the stores pass it with their ``salts``)."""
    checked: list[Checked] = []
    seen: set[str] = set()
    sync_kinds(registry)
    kinds = registry  # becomes a batch overlay once the batch declares a kind
    for i, d in enumerate(_batch(deltas)):
        if getattr(d, "erased", None) is not None and erasure:  # an erased record, reproduced
            checked.append(Checked(d, b"", *reproduced(d, i)))
            continue
        stored, data, typed = validate_typed(d, kinds, index=i)
        if stored.kind == ERASED and not erasure:
            raise ValidationError("kind", "an 'erased' delta is written by an erasure only "
                                  "(Braid.erase, `braidlog erase`), which drops what it names",
                                  index=i)
        if stored.kind == KIND_DECLARED:
            kinds = admit_declaration(kinds, registry, typed, i)
        if stored.id in seen:
            raise ValidationError("id", f"{stored.id} appears twice in the batch", index=i)
        check_entry_size(stored, data, index=i)
        seen.add(stored.id)
        try:
            refs = referenced_ids(stored, kinds, typed)
        except msgspec.MsgspecError as e:  # an old payload version whose upcast fails
            raise ValidationError("payload", f"cannot be upcast to the current version of kind "
                                  f"{stored.kind!r} ({e})", index=i) from None
        for ref in refs:
            if not 0 < len(ref.encode()) <= MAX_REF_BYTES:
                raise ValidationError(
                    "payload", f"kind {stored.kind!r} refers to an id of {len(ref.encode())} bytes; "
                    f"ids must be 1 to {MAX_REF_BYTES} bytes", index=i)
        checked.append(Checked(stored, data, refs))
    return checked


def _batch(deltas: Any) -> Iterable[Any]:
    """``deltas`` if it is a batch: an iterable of deltas, not a delta, a string or a mapping."""
    if isinstance(deltas, GenericDelta):
        raise ValidationError("deltas", "must be a list of deltas, not one delta: pass [delta], "
                              "or call append(delta)")
    if isinstance(deltas, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(deltas, Iterable):
        raise ValidationError("deltas", f"must be a list (or any iterable) of GenericDelta, "
                              f"not {type(deltas).__name__}")
    return deltas


def check_expected(expected_version: Any, expected_head: Any
                   ) -> tuple[int | Mapping[str, int] | None, int | None]:
    """The optimistic-concurrency arguments, checked: ``expected_head`` a seq, ``expected_version``
    a braid version or a dict of them by braid id (ints >= 0; numpy ints become ints)."""
    def count(value: Any) -> int | None:
        if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0:
            return int(value)
        return None

    if expected_head is not None:
        head = count(expected_head)
        if head is None:
            raise ValidationError("expected_head", "must be the seq of the head you read "
                                  f"(an int >= 0, e.g. log.head().seq), not {_shown(expected_head)}")
        expected_head = head
    if expected_version is None:
        return None, expected_head
    if isinstance(expected_version, Mapping):
        versions = {}
        for braid_id, value in expected_version.items():
            if not isinstance(braid_id, str) or count(value) is None:
                raise ValidationError(
                    "expected_version", "a dict must map braid ids (str) to versions (ints >= 0), "
                    f"not {_shown(braid_id)}: {_shown(value)}")
            versions[braid_id] = count(value)
        return versions, expected_head
    version = count(expected_version)
    if version is None:
        raise ValidationError(
            "expected_version", "must be the number of deltas the braid holds (an int >= 0, e.g. "
            f"log.braid_head(braid_id).version) or a dict of them by braid id, not {_shown(expected_version)}")
    return version, expected_head


def stage(checked: list[Checked], *, head: Head, hw: int,
          lookup: Callable[[list[str]], dict[str, tuple[int, bytes]]],
          braid_version: Callable[[str], int],
          expected_version: int | Mapping[str, int] | None,
          expected_head: int | None,
          dims: Callable[[str], int | None],
          salts: Mapping[str, bytes] | None = None) -> tuple[list[Staged], list[int]]:
    """Place a checked batch after ``head``, inside the writer's transaction: the rules every
    store shares (idempotent retry, expected versions, vector dimensions, seq, committed form
    and chain).

    ``lookup(ids)`` gives (seq, stored body) of each of those ids the store already holds.
    ``salts`` (delta id -> 16 bytes) reproduces records written elsewhere (import, a replica);
    a delta without one gets fresh random bytes.
    Returns the records to write (empty for a pure idempotent retry) and the seq of every delta
    in input order. Raises ConflictError or ValidationError; the caller writes nothing then.
    """
    expected_version, expected_head = check_expected(expected_version, expected_head)
    if expected_head is not None and expected_head != head.seq:
        raise StaleHead(f"expected the log head at seq {expected_head}, it is at {head.seq}",
                        expected=expected_head, actual=head.seq)
    if not checked:
        return [], []
    stored = lookup([c.delta.id for c in checked])
    seqs: list[int] = []
    fresh: list[Checked] = checked
    if stored:
        fresh = []
        for c in checked:
            found = stored.get(c.delta.id)
            if found is None:
                seqs.append(0)
                fresh.append(c)
            elif found[1][HW_SIZE:] == c.data:
                seqs.append(found[0])
            else:
                raise ConflictError(
                    f"delta {c.delta.id} is already stored at seq {found[0]} with other content; "
                    "a delta id can be appended once (give the new delta a new id)",
                    expected=c.data, actual=found[1][HW_SIZE:])
        if not fresh:
            return [], seqs
    _check_versions(fresh, expected_version, braid_version)
    _check_dims(fresh, dims)
    bodies: list[bytes] = []
    entries: list[bytes] = []
    first = head.seq + 1
    drawn = os.urandom(SALT_SIZE * len(fresh))
    chosen = [drawn[i * SALT_SIZE:(i + 1) * SALT_SIZE] for i in range(len(fresh))]
    if salts:
        chosen = [_salt(salts.get(c.delta.id), s) for c, s in zip(fresh, chosen, strict=False)]
    for seq, c, salt in zip(range(first, first + len(fresh)), fresh, chosen, strict=False):
        hw = next_hw(hw, ts_micros(c.delta.ts))
        bodies.append(hw.to_bytes(8, "big") + c.data)
        entries.append(erased_entry(seq, c.delta) if c.erased_by  # from the envelope it keeps
                       else committed_form(seq, c.delta, salt, c.data))
    staged = [Staged(seq, h, body, c.delta, c.refs, entry, b"" if c.erased_by else salt,
                     c.erased_by)
              for seq, h, body, c, entry, salt
              in zip(range(first, first + len(fresh)), links(head.hash, first, entries), bodies,
                     fresh, entries, chosen, strict=False)]
    if fresh is checked:
        return staged, [s.seq for s in staged]
    it = iter(staged)
    return staged, [s if s else next(it).seq for s in seqs]


def _salt(given: Any, drawn: bytes) -> bytes:
    if given is None:
        return drawn
    if not isinstance(given, bytes) or len(given) != SALT_SIZE:
        raise ValidationError("salts", f"a salt must be {SALT_SIZE} bytes, not {_shown(given)}")
    return given


def _check_versions(fresh: list[Checked],
                    expected: int | Mapping[str, int] | None,
                    braid_version: Callable[[str], int]) -> None:
    if expected is None:
        return
    if isinstance(expected, int):
        braids = {c.delta.braid_id for c in fresh}
        if len(braids) != 1:
            raise ValidationError(
                "expected_version",
                f"an int applies to one braid but the batch spans {sorted(braids)}; pass a dict by braid")
        expected = {braids.pop(): expected}
    for braid_id, want in expected.items():
        actual = braid_version(braid_id)
        if actual != want:
            raise ConflictError(
                f"braid {braid_id!r} is at version {actual}, not the expected {want}; "
                "read it again and retry", expected=want, actual=actual)


def _check_dims(fresh: list[Checked], dims: Callable[[str], int | None]) -> None:
    batch: dict[str, int] = {}
    for i, c in enumerate(fresh):
        v = c.delta.vector
        if v is None:
            continue
        want = batch.get(v.space) or dims(v.space)
        if want is None:
            batch[v.space] = v.dim
        elif v.dim != want:
            raise ValidationError(
                "vector.data", f"vector space {v.space!r} has dimension {want}, this vector has {v.dim}",
                index=i)


class IndexScans:
    """The scans every store answers from its indexes, through its own ``_scan_index``."""

    def _scan_index(self, index: str, key: str, start: int, stop: int | None, reverse: bool,
                    limit: int | None) -> Iterator[Record]:
        raise NotImplementedError

    def scan_braid(self, braid_id: str, start: int = 1, stop: int | None = None, *,
                   reverse: bool = False, limit: int | None = None) -> Iterator[Record]:
        """The deltas of one braid with seq in [start, stop)."""
        return self._scan_index("braid", braid_id, start, stop, reverse, limit)

    def scan_kind(self, kind: str, start: int = 1, stop: int | None = None, *,
                  reverse: bool = False, limit: int | None = None) -> Iterator[Record]:
        """The deltas of one kind with seq in [start, stop)."""
        return self._scan_index("kind", kind, start, stop, reverse, limit)

    def scan_refs(self, entity_id: str, start: int = 1, stop: int | None = None, *,
                  reverse: bool = False, limit: int | None = None) -> Iterator[Record]:
        """Every delta that refers to ``entity_id`` (a bead, knot, episode, delta or payload
        subject), with seq in [start, stop)."""
        return self._scan_index("refs", entity_id, start, stop, reverse, limit)


class MemoryLog(IndexScans, LogStore):
    """The reference store: everything in lists and dicts, lost when the process ends."""

    readonly = False

    def __init__(self, registry: Registry = REGISTRY) -> None:
        self.registry = store_kinds(registry, self)
        self._records: list[tuple[bytes, bytes, GenericDelta]] = []  # (hash, body, delta)
        self._sealed: list[tuple[bytes, bytes]] = []  # (committed form, salt)
        self._hw: list[int] = []
        self._ids: dict[str, int] = {}
        self._by: dict[tuple[str, str], list[int]] = {}  # (index, key) -> seqs
        self._braids: dict[str, BraidHead] = {}
        self._dims: dict[str, int] = {}
        self._checkpoints: dict[tuple[str, int, int], bytes] = {}
        self._used: list[str] = []  # the projections the store is used with
        self._tree: dict[merkle.Node, bytes] = {}  # every complete subtree of level >= 1
        self._frontier = merkle.Frontier()
        self._notes: dict[tuple[int, bytes], bytes] = {}
        self._erased: dict[int, int] = {}  # erased seq -> the seq of its erasure
        self._lock = threading.RLock()  # the single writer

    # -- writing -----------------------------------------------------------------------------
    def append(self, delta: GenericDelta, *, expected_version: int | None = None) -> int:
        """Append one delta; return its seq."""
        return self.append_batch([delta], expected_version=expected_version)[0]

    def append_batch(self, deltas: Iterable[GenericDelta], *,
                     expected_version: int | Mapping[str, int] | None = None,
                     expected_head: int | None = None, admit: Admit | None = None,
                     salts: Mapping[str, bytes] | None = None) -> list[int]:
        """Append deltas atomically; return their seqs in order."""
        return self._append(deltas, expected_version, expected_head, admit, salts)[1]

    def commit(self, deltas: Iterable[GenericDelta], *,
               expected_version: int | Mapping[str, int] | None = None,
               expected_head: int | None = None, admit: Admit | None = None,
               salts: Mapping[str, bytes] | None = None) -> list[Record]:
        """Append deltas atomically; return the records written (none for a pure retry)."""
        return [Record(s.seq, s.hash, s.delta)
                for s in self._append(deltas, expected_version, expected_head, admit, salts)[0]]

    def commit_locked(self, prepare: Callable[[Head], Iterable[GenericDelta]], *,
                      expected_version: int | Mapping[str, int] | None = None,
                      admit: Admit | None = None) -> list[Record]:
        """Call ``prepare(head)`` holding the writer lock and append its deltas atomically."""
        with self._lock:
            head = self.head()
            return self.commit(list(prepare(head)), expected_version=expected_version,
                               expected_head=head.seq, admit=admit)

    def _append(self, deltas, expected_version, expected_head, admit=None, salts=None):
        checked = check_batch(deltas, self.registry, erasure=salts is not None)
        with self._lock:
            return self._place(checked, expected_version, expected_head, admit, salts)

    def _place(self, checked, expected_version, expected_head, admit=None, salts=None):
        head = self.head()
        staged, seqs = stage(
            checked, head=head, hw=self._hw[-1] if self._hw else 0,
            lookup=self._lookup, braid_version=lambda b: self.braid_head(b).version,
            expected_version=expected_version, expected_head=expected_head, dims=self._dims.get,
            salts=salts)
        if admit is not None and staged:
            admit(head, staged)
        for s in staged:
            d = s.delta
            self._records.append((s.hash, s.body + encode(d) if s.erased_by else s.body, d))
            self._sealed.append((s.entry, s.salt))
            if s.erased_by:
                self._erased[s.seq] = s.erased_by
            self._hw.append(hw_of(s.body))
            self._ids[d.id] = s.seq
            self._by.setdefault(("braid", d.braid_id), []).append(s.seq)
            self._by.setdefault(("kind", d.kind), []).append(s.seq)
            for ref in s.refs:
                self._by.setdefault(("refs", ref), []).append(s.seq)
            self._braids[d.braid_id] = BraidHead(self.braid_head(d.braid_id).version + 1, s.seq)
            if d.vector is not None:
                self._dims.setdefault(d.vector.space, d.vector.dim)
            for level, index, h in self._frontier.push(merkle.leaf_hash(s.entry)):
                self._tree[(level, index)] = h
        return staged, seqs

    def spaces(self) -> dict[str, int]:
        """The vector spaces that hold at least one vector, with their dimension."""
        return dict(self._dims)

    def _lookup(self, ids: list[str]) -> dict[str, tuple[int, bytes]]:
        return {i: (seq, self._records[seq - 1][1]) for i in ids
                if (seq := self._ids.get(i)) is not None}

    # -- reading -----------------------------------------------------------------------------
    def read(self, seq: int) -> Record:
        """The record at ``seq``; IndexError when there is none."""
        if not 1 <= seq <= len(self._records):
            raise IndexError(f"no delta at seq {seq}; the log holds 1..{len(self._records)}")
        h, _, d = self._records[seq - 1]
        return Record(seq, h, d)

    def get(self, delta_id: str) -> Record | None:
        seq = self._ids.get(id_key(delta_id))
        return None if seq is None else self.read(seq)

    def seq_of(self, delta_id: str) -> int | None:
        return self._ids.get(id_key(delta_id))

    def body(self, seq: int) -> bytes:
        """The stored bytes of record ``seq`` (``hw || canonical delta``), as chained."""
        self.read(seq)
        return self._records[seq - 1][1]

    def entry(self, seq: int) -> bytes:
        """The committed form of record ``seq``: the chain's and the tree's input for it."""
        self.read(seq)
        return self._sealed[seq - 1][0]

    def scan_rows(self, start: int = 1, stop: int | None = None) -> Iterator[Row]:
        """The records with seq in [start, stop) as stored (Row)."""
        for seq in range(max(start, 1), min(stop or 2**63, len(self._records) + 1)):
            h, body, _ = self._records[seq - 1]
            entry, salt = self._sealed[seq - 1]
            by = self._erased.get(seq, 0)
            yield Row(seq, h, hw_of(body), entry, salt, b"" if by else body[HW_SIZE:], by)

    def scan(self, start: int = 1, stop: int | None = None, *, reverse: bool = False,
             limit: int | None = None) -> Iterator[Record]:
        seqs = range(max(start, 1), min(stop or 2**63, len(self._records) + 1))
        return self._emit(reversed(seqs) if reverse else seqs, limit)

    def scan_bodies(self, start: int = 1, stop: int | None = None
                    ) -> Iterator[tuple[int, bytes, bytes]]:
        """(seq, hash, body) for seqs in [start, stop), for verification and export."""
        for seq in range(max(start, 1), min(stop or 2**63, len(self._records) + 1)):
            h, body, _ = self._records[seq - 1]
            yield seq, h, body

    def _scan_index(self, index, key, start, stop, reverse, limit):
        seqs = self._by.get((index, key), [])
        lo = bisect.bisect_left(seqs, start)
        hi = bisect.bisect_left(seqs, stop) if stop is not None else len(seqs)
        chosen = seqs[lo:hi]
        return self._emit(reversed(chosen) if reverse else chosen, limit)

    def _emit(self, seqs, limit):
        for n, seq in enumerate(seqs):
            if limit is not None and n >= limit:
                return
            yield self.read(seq)

    def counts(self, index: str) -> dict[str, int]:
        """Number of deltas per key of an index ("braid" or "kind")."""
        return {key: len(seqs) for (i, key), seqs in sorted(self._by.items()) if i == index}

    def head(self) -> Head:
        if not self._records:
            return Head(0, GENESIS)
        return Head(len(self._records), self._records[-1][0])

    def hash_at(self, seq: int) -> bytes:
        """The chain hash after record ``seq`` (GENESIS for 0)."""
        return GENESIS if seq == 0 else self.read(seq).hash

    def braid_head(self, braid_id: str) -> BraidHead:
        return self._braids.get(braid_id, BraidHead(0, 0))

    def braids(self) -> dict[str, BraidHead]:
        return dict(sorted(self._braids.items()))

    def seq_at(self, ts: datetime) -> int:
        """The last seq such that every delta up to it has ``ts`` at or before the given time."""
        return bisect.bisect_right(self._hw, ts_micros(ts))

    def verify(self, start: int = 1, stop: int | None = None, *,
               progress: Progress | None = None) -> Head:
        """Recompute the chain over [start, stop); the head of the range, or IntegrityError."""
        return verify_bodies(self, start, stop, progress)

    def erase(self, seqs: Iterable[int], delta: GenericDelta) -> tuple[Record, list[bytes]]:
        """Erase the records at ``seqs`` and append ``delta``, their ``erased`` delta
        (braidlog.erasure); its record and the erased records' commitments."""
        with self._lock:
            return self._erase({s: 0 for s in seqs}, check_batch([delta], self.registry,
                                                                  erasure=True))

    def apply_erasures(self, erase: Mapping[int, int], append: Callable[[Any], Any]
                       ) -> tuple[Any, list[bytes]]:
        """As LmdbLog.apply_erasures: the records erased (seq -> the seq erasing it), then
        ``append(self)``."""
        with self._lock:
            return self._erase(dict(erase), None, append)

    def _erase(self, by_seq: dict[int, int], checked: list[Checked] | None,
               append: Callable[[Any], Any] | None = None) -> tuple[Any, list[bytes]]:
        head = self.head().seq
        for s in sorted(by_seq):
            if not 1 <= s <= head:
                raise ValidationError("seq", f"seq {s} is not in the log (1..{head})")
            if s in self._erased:
                raise ValidationError("seq", f"seq {s} is already erased")
        commitments = []
        for s in sorted(by_seq):  # the delta and body become their erased forms, the salt goes
            h, body, d = self._records[s - 1]
            entry = self._sealed[s - 1][0]
            for key in payload_refs(d, self.registry):
                self._by[("refs", key)].remove(s)
            view = erased_delta(entry, by_seq[s] or head + 1)
            self._records[s - 1] = (h, body[:HW_SIZE] + encode(view), view)
            self._sealed[s - 1] = (entry, b"")
            self._erased[s] = view.erased.by
            commitments.append(view.erased.commitment)
        for key in [k for k in self._checkpoints if k[2] >= min(by_seq)]:
            del self._checkpoints[key]  # they may hold what was erased
        if append is not None:
            return append(self), commitments
        staged, _ = self._place(checked, None, head)
        return Record(staged[0].seq, staged[0].hash, staged[0].delta), commitments

    # -- checkpoints ---------------------------------------------------------------------------
    def put_checkpoint(self, name: str, version: int, seq: int, blob: bytes) -> None:
        self._checkpoints[(name, version, seq)] = blob

    def checkpoint_seqs(self, name: str, version: int) -> list[int]:
        return sorted(s for (n, v, s) in self._checkpoints if n == name and v == version)

    def get_checkpoint(self, name: str, version: int, seq: int) -> bytes | None:
        return self._checkpoints.get((name, version, seq))

    def checkpoint_keys(self) -> list[tuple[str, int, int]]:
        return sorted(self._checkpoints)

    def projections_used(self) -> list[str]:
        return list(self._used)

    def use_projections(self, names: Iterable[str]) -> None:
        self._used.extend(n for n in dict.fromkeys(names) if n not in self._used)

    # -- the Merkle tree (braidlog/tree.py) and issued checkpoint notes ------------------------
    def tree_hashes(self, nodes: list[tuple[int, int]]) -> list[bytes]:
        """The hash of each complete subtree (level, index); a node past the head is an IndexError."""
        out = []
        for level, index in nodes:
            if ((index + 1) << level) > len(self._records) or index < 0 or level < 0:
                raise IndexError(f"no tree node ({level}, {index}): the log ends at seq "
                                 f"{len(self._records)}")
            out.append(merkle.leaf_hash(self._sealed[index][0]) if level == 0
                       else self._tree[(level, index)])
        return out

    def put_note(self, size: int, note: bytes) -> None:
        """Keep a checkpoint note issued for tree size ``size`` (the same note twice is kept once)."""
        self._notes[(size, digest(note)[:8])] = bytes(note)

    def notes(self, *, last: bool = False) -> list[tuple[int, bytes]]:
        """Every checkpoint note kept, as (tree size, note), smallest size first; with ``last``,
        only those of the largest size."""
        rows = [(size, note) for (size, _), note in sorted(self._notes.items())]
        return [r for r in rows if r[0] == rows[-1][0]] if last and rows else rows

    def close(self) -> None:
        pass

    def __enter__(self) -> MemoryLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def verify_bodies(store: LogStore, start: int, stop: int | None, progress: Progress | None, *,
                  rows: Callable[[int, int], Iterator[Row]] | None = None,
                  tree: bool = True) -> Head:
    """Recompute the chain of ``store`` over [start, stop): shared by every store's ``verify``.
    ``rows(start, stop)`` reads the records (default ``store.scan_rows``); a store passes its
    own to read them the way its reads do. Each record is checked against its committed form,
    the chain over the committed forms, and the Merkle tree's nodes against them
    (braidlog.chain). ``tree=False`` leaves the stored Merkle tree unread (its pages are
    known to be damaged)."""
    source = store.scan_rows if rows is None else rows
    start = max(start, 1)
    end = store.head().seq if stop is None else min(stop - 1, store.head().seq)
    prev = store.hash_at(start - 1)
    prev_hw = hw_of(store.body(start - 1)) if start > 1 else 0
    walk = checked_rows(source(start, end + 1), start, prev, prev_hw, progress)
    last = None
    for last in (tree_checked(store.tree_hashes, start, walk) if tree else walk):
        pass
    if (last.seq if last else start - 1) != end:
        missing = (last.seq if last else start - 1) + 1
        raise IntegrityError(f"seq {missing} is missing from the log", seq=missing)
    if progress is not None:
        progress(end - start + 1 if end >= start else 0)
    return Head(end, store.hash_at(end)) if end >= start else Head(end, prev)
