"""The rules every store shares, written once: checking a batch (``check_batch``), placing it
after the head (``stage``: idempotent retry, expected versions, vector dimensions, seq,
committed form, chain), the rule that a record continues the log (``next_hw``, ``hw_fault``,
``chain_fault``, ``record_entry``), and recomputing the chain (``verify_bodies``).

Import (transfer.py) and a replica (replication/) check records written elsewhere by the same
functions ``stage`` builds records by.
"""

from __future__ import annotations

import numbers
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, NamedTuple

import msgspec

from ..chain import Row, checked_rows, link, links, tree_checked, ts_micros
from ..delta import SALT_SIZE, GenericDelta, _shown, check_entry_size, committed_form, referenced_ids, validate_typed
from ..erasure import ERASED, erased_entry, reproduced
from ..errors import ConflictError, IntegrityError, StaleHead, ValidationError
from ..kind_schema import KIND_DECLARED, admit_declaration
from ..kind_schema import sync as sync_kinds
from ..kinds import Registry
from ..receipts.schema import CONTEXT_USED, check_citations
from .ports import FullStore, Head, Progress, Record, Staged

__all__ = [
    "MAX_REF_BYTES", "HW_SIZE", "Checked", "IndexScans", "id_key", "resolve_point", "hw_of",
    "next_hw", "hw_fault", "chain_fault", "record_entry", "check_batch", "check_expected",
    "stage", "verify_bodies", "ts_micros",
]

MAX_REF_BYTES = 480  # an index key must stay under LMDB's 511-byte limit


def id_key(delta_id: str) -> str:
    """The stored form of a delta id: ULIDs are case-insensitive and stored upper-case."""
    return delta_id.upper()


def resolve_point(store: FullStore, point: int | str | datetime, field: str = "point") -> int:
    """The seq a point names in ``store``: a seq (0 to the head), a delta id, or a timezone-aware
    datetime (the last seq up to which every delta has ``ts`` at or before it). A bad point is a
    ValidationError naming ``field``."""
    head = store.head().seq
    if isinstance(point, bool):
        raise ValidationError(field, "must be a seq, a delta id or a datetime")
    if isinstance(point, numbers.Integral):  # numpy integers too
        if not 0 <= int(point) <= head:
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


def record_entry(seq: int, delta: GenericDelta, salt: bytes, data: bytes) -> bytes:
    """Record ``seq``'s committed form, the chain's and the tree's input for it: the envelope and
    ``SHA-256(salt || data)`` (``data``: the delta's canonical bytes), or, for an erased record
    (``delta.erased`` set: no salt, no bytes), the envelope and commitment it keeps."""
    if delta.erased is not None:
        return erased_entry(seq, delta)
    return committed_form(seq, delta, salt, data)


def chain_fault(prev: bytes, seq: int, entry: bytes, found: bytes) -> bytes | None:
    """The chain hash record ``seq`` (committed form ``entry``) should have after a record of
    hash ``prev``, when ``found`` is not it; else None."""
    expected = link(prev, seq, entry)
    return None if expected == found else expected




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
        if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0:
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
        versions: dict[str, int] = {}
        for braid_id, value in expected_version.items():
            counted = count(value)
            if not isinstance(braid_id, str) or counted is None:
                raise ValidationError(
                    "expected_version", "a dict must map braid ids (str) to versions (ints >= 0), "
                    f"not {_shown(braid_id)}: {_shown(value)}")
            versions[braid_id] = counted
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
        entries.append(record_entry(seq, c.delta, salt, c.data))
    staged = [Staged(seq, h, body, c.delta, c.refs, entry, b"" if c.erased_by else salt,
                     c.erased_by)
              for seq, h, body, c, entry, salt
              in zip(range(first, first + len(fresh)), links(head.hash, first, entries), bodies,
                     fresh, entries, chosen, strict=False)]
    receipts = [(n, s.seq, s.delta.payload) for n, s in enumerate(staged)
                if s.delta.kind == CONTEXT_USED and not s.erased_by]
    if receipts:  # the citations of a context receipt: records before it, by seq and id
        check_citations(receipts, {s.delta.id: s.seq for s in staged}, lookup)
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



def verify_bodies(store: FullStore, start: int, stop: int | None, progress: Progress | None, *,
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
    tail = deque(tree_checked(store.tree_hashes, start, walk) if tree else walk, maxlen=1)
    last = tail[0] if tail else None
    if (last.seq if last else start - 1) != end:
        missing = (last.seq if last else start - 1) + 1
        raise IntegrityError(f"seq {missing} is missing from the log", seq=missing)
    if progress is not None:
        progress(end - start + 1 if end >= start else 0)
    return Head(end, store.hash_at(end)) if end >= start else Head(end, prev)
