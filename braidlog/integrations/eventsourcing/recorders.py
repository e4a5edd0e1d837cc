"""eventsourcing's recorders on a braidlog store.

One save's consecutive events of one aggregate are one delta of kind ``eventsourcing.events`` in
the braid ``<table>:<originator id>`` (one braid per aggregate; ``<table>`` is
``<application>_events``, the table name eventsourcing's PostgreSQL module would use); a snapshot
is one of kind ``eventsourcing.snapshot`` in ``<application>_snapshots:<originator id>``; a
tracking record one of kind ``eventsourcing.tracking`` in ``<application>_tracking:<upstream
application>``. Notification ids count the events of the store, 1, 2, 3 …, in seq order; each
delta's tag ``n:FIRST-LAST`` names its events' ids. Stores written before hold one event a delta
(kind ``eventsourcing.event``), whose notification id is its seq; both kinds are read as one
sequence. docs/eventsourcing.md has the whole mapping.

The rules, checked inside the store's write transaction so that no other writer (thread or
process) can slip in between: within one braid, versions only go up (a version at or below the
originator's last one raises ``IntegrityError``, whether or not that number is taken), and so do
tracked notification ids per upstream application. A call's events and its tracking record are
one transaction: all are written, or none.
"""

from __future__ import annotations

import binascii
import heapq
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, NamedTuple
from uuid import UUID

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    DataError,
    IntegrityError,
    Notification,
    ProcessRecorder,
    ProgrammingError,
    StoredEvent,
    Subscription,
    Tracking,
    TrackingRecorder,
)

from ... import GenericDelta, LmdbLog, Provenance, Record
from ...store import Head, Staged
from ..eventsourcing_kinds import EVENT, EVENTS, IDS_TAG, SNAPSHOT, TRACKING
from .store import BraidlogDatastore, paged

__all__ = [
    "BraidlogRecorder", "BraidlogAggregateRecorder", "BraidlogApplicationRecorder",
    "BraidlogTrackingRecorder", "BraidlogProcessRecorder", "BraidlogSubscription",
]

MAX_BRAID_ID = 120  # characters: braidlog's limit on a braid id
_I64 = 2**63
_PROVENANCE = Provenance("system")  # the kind says eventsourcing
_EVENT_KINDS = (EVENTS, EVENT)  # an aggregate's events as this module writes them, and as it did
_b64encode = binascii.b2a_base64
_b64decode = binascii.a2b_base64

#: How often a waiting subscription looks for another process's commit (seconds); a commit of
#: this process wakes it at once.
POLL_INTERVAL = 0.02


#: Crockford's base32, two digits at a time: 10 bits an entry.
_PAIRS = [a + b for a in "0123456789ABCDEFGHJKMNPQRSTVWXYZ" for b in "0123456789ABCDEFGHJKMNPQRSTVWXYZ"]
_MS_SHIFTS = range(40, -1, -10)  # 48 bits of milliseconds as 10 digits (the top two bits zero)
_RANDOM_SHIFTS = range(70, -1, -10)  # 80 random bits as 16 digits
_RANDOM = 1 << 80


def _new_ids(n: int) -> list[str]:
    """``n`` new ULIDs, in order: this millisecond, then 80 random bits counting up, as ULID's
    monotonic generation makes them. Two digits a lookup: 2.8 µs for one, where
    ``str(ulid.ULID())`` takes 4 and gives no order within a millisecond."""
    r = int.from_bytes(os.urandom(10), "big") % (_RANDOM - n)
    ms = time.time_ns() // 1_000_000
    pairs = _PAIRS
    head = "".join([pairs[(ms >> s) & 1023] for s in _MS_SHIFTS])
    return [head + "".join([pairs[(v >> s) & 1023] for s in _RANDOM_SHIFTS]) for v in range(r, r + n)]


def _int(value: Any) -> bool:
    return type(value) is int and -_I64 <= value < _I64


def _what(value: Any) -> str:
    return type(value).__name__


class BraidlogRecorder:
    """What every recorder on a braidlog store shares: the datastore, ids, the one write path."""

    def __init__(self, datastore: BraidlogDatastore, **kwargs: Any) -> None:
        if not isinstance(datastore, BraidlogDatastore):
            raise ProgrammingError(f"datastore must be a BraidlogDatastore, not {_what(datastore)}")
        super().__init__(**kwargs)
        self.datastore = datastore
        self._uuids = datastore.originator_id_type == "uuid"

    @staticmethod
    def _table(name: Any, field: str) -> str:
        if not isinstance(name, str) or not name or ":" in name:
            raise ProgrammingError(f"{field} must be a non-empty str without ':' (it starts the "
                                   f"braid ids of its records), not {name!r}")
        return name

    # -- ids ------------------------------------------------------------------------------------
    def _oid_text(self, originator_id: Any, field: str = "originator_id") -> str:
        """An originator id as stored: a UUID in its canonical form, text as it is."""
        if type(originator_id) is UUID:
            return str(originator_id)
        if isinstance(originator_id, UUID):
            return str(UUID(int=originator_id.int))
        if isinstance(originator_id, str):
            if not self._uuids:
                if not originator_id:
                    raise DataError(f"{field} must not be empty")
                return originator_id
            try:
                return str(UUID(originator_id))
            except ValueError:
                raise DataError(f"{field} {originator_id!r} is not a UUID; this store keeps UUID "
                                "originator ids (set ORIGINATOR_ID_TYPE=text for text ids)") from None
        raise DataError(f"{field} must be a UUID or a str, not {_what(originator_id)}")

    def _oid(self, text: str) -> UUID | str:
        return UUID(text) if self._uuids else text

    @staticmethod
    def _braid(table: str, key: str, field: str) -> str:
        braid = f"{table}:{key}"
        if len(braid) > MAX_BRAID_ID:
            raise DataError(f"{field} {key!r} is too long: its braid id {table}:... may hold at "
                            f"most {MAX_BRAID_ID} characters, so at most {MAX_BRAID_ID - len(table) - 1}")
        return braid

    # -- the write path -------------------------------------------------------------------------
    def _commit(self, build: Callable[[LmdbLog, Head], list[GenericDelta]],
                staged: Callable[[Sequence[Staged]], None] | None = None) -> list[Record]:
        """Append what ``build(log, head)`` returns in one write transaction, ``build`` called
        inside it (so what it reads and checks cannot change before the write): it raises
        IntegrityError, and nothing is written, on a conflict. Appenders in several threads
        share commits (the store's own group commit). ``staged`` is called inside the
        transaction too, with the records about to be written (seq and chain hash known)."""
        admit = None if staged is None else lambda head, records: staged(records)
        with self.datastore.using() as log:
            records = log.commit_locked(lambda head: build(log, head), admit=admit)
        self.datastore.committed()
        return records

    @staticmethod
    def _check_floors(log: LmdbLog, floors: Mapping[str, tuple[int, str]],
                      last: Callable[[dict[str, Any]], Any], known: Mapping[str, int] | None = None
                      ) -> None:
        """Inside the write: each braid's last value (``last(payload)``; from ``known`` when it
        has the braid) must be below the first the call adds (``floors``: braid -> (that value,
        what to call it)), else IntegrityError."""
        for braid, (first, what) in floors.items():
            value = None if known is None else known.get(braid)
            if value is not None:
                if first <= value:
                    raise IntegrityError(f"{what} {first} conflicts: {braid} is at {value}; it "
                                         "only goes up")
                continue
            found = _last(log, braid, last)
            if found is not None and first <= found[1]:
                raise IntegrityError(f"{what} {first} conflicts: {braid} is at {found[1]} "
                                     f"(seq {found[0].seq}); it only goes up")

    def _check_tracking(self, tracking: Any) -> None:
        if not isinstance(tracking, Tracking):
            raise ProgrammingError(f"tracking must be a Tracking, not {_what(tracking)}")
        if not isinstance(tracking.application_name, str) or not tracking.application_name:
            raise DataError("tracking.application_name must be a non-empty str, not "
                            f"{tracking.application_name!r}")
        if not _int(tracking.notification_id):
            raise DataError("tracking.notification_id must be an int, not "
                            f"{tracking.notification_id!r}")


def _last(log: LmdbLog, braid: str, value: Callable[[dict[str, Any]], Any]
          ) -> tuple[Record, Any] | None:
    """The braid's last record with a ``value(payload)``, and that value (an erased record,
    whose payload is gone, is passed over)."""
    for record in paged(partial(log.scan_braid, braid), reverse=True):
        found = value(record.delta.payload)
        if found is not None:
            return record, found
    return None


def _last_version(payload: dict[str, Any]) -> int | None:
    events = payload.get("events")
    return events[-1][0] if events else payload.get("originator_version")


def _tracked(payload: dict[str, Any]) -> int | None:
    return payload.get("notification_id")


def _seq(r: Record) -> int:
    return r.seq


def _ids(r: Record) -> tuple[int, int]:
    """The first and last notification ids of an event delta: its tag ``n:FIRST-LAST`` (kind
    ``eventsourcing.events``), or its seq (one event a delta, kind ``eventsourcing.event``)."""
    if r.delta.kind == EVENTS:
        for tag in r.delta.tags:
            if tag.startswith(IDS_TAG):
                first, _, last = tag[len(IDS_TAG):].partition("-")
                return int(first), int(last or first)
    return r.seq, r.seq


def _scan_events(log: LmdbLog, start: int = 1, stop: int | None = None, *,
                 reverse: bool = False, first: int = 1) -> Iterator[Record]:
    """The event deltas of both kinds in seq order (``reverse``: newest first), read in pages."""
    return heapq.merge(*(paged(partial(log.scan_kind, k), start, stop, reverse=reverse, first=first)
                         for k in _EVENT_KINDS), key=_seq, reverse=reverse)


def _first_event(log: LmdbLog, start: int, stop: int) -> Record | None:
    found = [r for k in _EVENT_KINDS for r in log.scan_kind(k, start, stop, limit=1)]
    return min(found, key=_seq) if found else None


def _seek(log: LmdbLog, lo: int) -> int:
    """The seq of the first event delta holding a notification id ``>= lo`` (past the head when
    there is none): a binary search over seqs, since ids go up with seqs."""
    a, b = 1, log.head().seq
    found = b + 1
    while a <= b:
        mid = (a + b) // 2
        r = _first_event(log, mid, b + 1)
        if r is None:
            b = mid - 1
        elif _ids(r)[1] >= lo:
            found, b = r.seq, mid - 1
        else:
            a = r.seq + 1
    return found


def _next_id(log: LmdbLog) -> int:
    """The notification id the store's next event gets: one past its last event delta's."""
    for r in _scan_events(log, reverse=True):
        return _ids(r)[1] + 1
    return 1


_KNOWN = 4096  # braids whose last version a datastore remembers, at most


class _Written(NamedTuple):
    """What a datastore's last commit left: true while the store's head is ``key`` (seq, chain
    hash of that commit's last record), so that nobody has written since. ``next_id``: the next
    notification id (0: not known); ``versions``: the last version of braids it knows."""

    key: tuple[int, bytes]
    next_id: int
    versions: dict[str, int]


class _Run:
    """Consecutive events of one aggregate in one call: one delta."""

    __slots__ = ("braid", "oid", "events", "texts", "base64")

    def __init__(self, braid: str, oid: str) -> None:
        self.braid, self.oid = braid, oid
        self.events: list[tuple[int, str, bytes]] = []
        self.texts: list[str] = []  # each state as text, while every state so far is UTF-8
        self.base64 = False

    def add(self, version: int, topic: str, state: bytes) -> None:
        self.events.append((version, topic, state))
        if not self.base64:  # the JSON a mapper without cipher or compressor makes is kept as text
            try:
                self.texts.append(str(state, "utf-8"))
            except UnicodeDecodeError:
                self.base64 = True

    def payload(self) -> dict[str, Any]:
        if self.base64:
            return {"originator_id": self.oid, "base64": True, "events": [
                [v, t, _b64encode(s, newline=False).decode("ascii")] for v, t, s in self.events]}
        return {"originator_id": self.oid,
                "events": [[v, t, x] for (v, t, _), x in zip(self.events, self.texts, strict=True)]}


class BraidlogAggregateRecorder(BraidlogRecorder, AggregateRecorder):
    """Stored events (or snapshots) of aggregates: one braid per originator.

    ``events_table_name`` names the braids (``<events_table_name>:<originator id>``);
    ``for_snapshots`` stores deltas of kind ``eventsourcing.snapshot``, one a snapshot, instead
    of ``eventsourcing.events``.
    """

    def __init__(self, datastore: BraidlogDatastore, *, events_table_name: str = "stored_events",
                 for_snapshots: bool = False, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        self.events_table_name = self._table(events_table_name, "events_table_name")
        self.kind = SNAPSHOT if for_snapshots else EVENTS

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any
                      ) -> Sequence[int] | None:
        self._insert(stored_events, None)
        return None

    def _insert(self, stored_events: Sequence[StoredEvent], tracking: Tracking | None
                ) -> list[int]:
        """Write ``stored_events`` (and ``tracking``) in one transaction; their notification ids
        (snapshots: their seqs)."""
        runs, floors = self._runs(stored_events)
        tracked = None
        if tracking is not None:
            self._check_tracking(tracking)
            tracked = self._braid(self.tracking_table_name, tracking.application_name,  # type: ignore[attr-defined]  # a tracking recorder's, the only one given tracking
                                  "tracking.application_name")
        if not runs and tracking is None:
            return []
        ts = datetime.now(UTC)
        kind = self.kind
        out: list[int] = []

        # What this process wrote last: valid while the store's head is its last record. Read
        # and set inside the write transaction, so that each batch of a group commit finds
        # what the batch before it wrote (set once committed, the next batch would miss it).
        datastore = self.datastore
        base: list[_Written] = []

        def build(log: LmdbLog, head: Head) -> list[GenericDelta]:
            written = datastore.written
            known = written if written is not None and written.key == (head.seq, head.hash) else None
            base[:] = [known] if known is not None else []
            self._check_floors(log, floors, _last_version, known and known.versions)
            if tracking is not None and tracked is not None:
                self._check_floors(log, {tracked: (tracking.notification_id,
                                   f"tracking of {tracking.application_name!r}: notification")}, _tracked)
            ids = _new_ids(len(runs) + (tracking is not None))
            deltas = []
            out.clear()
            if kind == EVENTS:
                n = known.next_id if known is not None and known.next_id else _next_id(log)
                for i, run in enumerate(runs):
                    k = len(run.events)
                    tag = f"{IDS_TAG}{n}" if k == 1 else f"{IDS_TAG}{n}-{n + k - 1}"
                    out.extend(range(n, n + k))
                    n += k
                    deltas.append(GenericDelta(id=ids[i], braid_id=run.braid, kind=kind, ts=ts,
                                               provenance=_PROVENANCE, confidence=1.0,
                                               payload=run.payload(), tags=(tag,)))
            else:  # snapshots: one a delta, as eventsourcing.event was
                for i, run in enumerate(runs):
                    v, topic, state = run.events[0]
                    payload = {"originator_id": run.oid, "originator_version": v, "topic": topic}
                    if run.base64:
                        payload["state"], payload["base64"] = _b64encode(state, newline=False).decode("ascii"), True
                    else:
                        payload["state"] = run.texts[0]
                    deltas.append(GenericDelta(id=ids[i], braid_id=run.braid, kind=kind, ts=ts,
                                               provenance=_PROVENANCE, confidence=1.0, payload=payload))
            if tracking is not None and tracked is not None:
                deltas.append(self._tracking_delta(tracking, tracked, ids[-1], ts))
            return deltas

        def remember(staged: Sequence[Staged]) -> None:
            # Its key is the chain hash of the batch's last record: should the transaction not
            # commit, no head will ever match it.
            before = base[0] if base else None
            versions = dict(before.versions) if before is not None and len(before.versions) < _KNOWN else {}
            versions.update((run.braid, run.events[-1][0]) for run in runs)
            next_id = out[-1] + 1 if out else before.next_id if before is not None else 0
            datastore.written = _Written((staged[-1].seq, staged[-1].hash), next_id, versions)

        records = self._commit(build, remember)
        if kind == EVENTS:
            return out
        return [r.seq for r in records[:len(runs)]]

    def _tracking_delta(self, tracking: Tracking, braid: str, delta_id: str, ts: datetime
                        ) -> GenericDelta:
        raise ProgrammingError(f"{type(self).__name__} records no tracking; use a process recorder")

    def _runs(self, stored_events: Any) -> tuple[list[_Run], dict[str, tuple[int, str]]]:
        """``stored_events`` as runs (consecutive events of one aggregate; a snapshot each), every
        field checked; and the first version each braid gets. Versions of one originator must go
        up within the call."""
        if isinstance(stored_events, (str, bytes, Mapping)) or not isinstance(stored_events, Iterable):
            raise ProgrammingError(f"stored_events must be a sequence of StoredEvent, not "
                                   f"{_what(stored_events)}")
        table, one_each = self.events_table_name, self.kind != EVENTS
        runs: list[_Run] = []
        floors: dict[str, tuple[int, str]] = {}
        lasts: dict[str, int] = {}
        run: _Run | None = None
        last_id: Any = None  # the originator id of the event before, and its text and braid
        oid = braid = ""
        for i, s in enumerate(stored_events):
            if not isinstance(s, StoredEvent):
                raise ProgrammingError(f"stored_events[{i}] must be a StoredEvent, not {_what(s)}")
            if s.originator_id is not last_id or last_id is None:  # a save's events share one
                oid = self._oid_text(s.originator_id, f"stored_events[{i}].originator_id")
                braid = self._braid(table, oid, f"stored_events[{i}].originator_id")
                last_id = s.originator_id
            version = s.originator_version
            if not _int(version):
                raise DataError(f"stored_events[{i}].originator_version must be an int, not "
                                f"{version!r}")
            if not isinstance(s.topic, str) or not s.topic:
                raise DataError(f"stored_events[{i}].topic must be a non-empty str, not {s.topic!r}")
            state = s.state
            if type(state) is not bytes:
                if not isinstance(state, (bytes, bytearray, memoryview)):
                    raise DataError(f"stored_events[{i}].state must be bytes, not {_what(state)}")
                state = bytes(state)
            before = lasts.get(braid)
            if before is None:
                floors[braid] = (version, f"originator {oid}: version")
            elif version <= before:
                raise IntegrityError(f"stored_events[{i}]: version {version} of originator {oid} "
                                     f"comes after version {before} in the same call; versions "
                                     "only go up")
            lasts[braid] = version
            if run is None or run.braid != braid or one_each:
                run = _Run(braid, oid)
                runs.append(run)
            run.add(version, s.topic, state)
        return runs, floors

    def _events(self, p: dict[str, Any]) -> list[tuple[int, str, bytes]]:
        """The events a delta's payload holds, oldest first (none: erased)."""
        events = p.get("events")
        if events is not None:
            if p.get("base64"):
                return [(v, t, _b64decode(x)) for v, t, x in events]
            return [(v, t, x.encode("utf-8")) for v, t, x in events]
        v = p.get("originator_version")
        if v is None:
            return []
        state = _b64decode(p["state"]) if p.get("base64") else p["state"].encode("utf-8")
        return [(v, p["topic"], state)]

    def select_events(self, originator_id: UUID | str, *, gt: int | None = None,
                      lte: int | None = None, desc: bool = False, limit: int | None = None
                      ) -> Sequence[StoredEvent]:
        for name, value in (("gt", gt), ("lte", lte)):
            if value is not None and not _int(value):
                raise DataError(f"{name} must be an int or None, not {value!r}")
        if limit is not None and (not _int(limit) or limit < 0):
            raise DataError(f"limit must be an int >= 0 or None, not {limit!r}")
        braid = self._braid(self.events_table_name, self._oid_text(originator_id), "originator_id")
        if limit == 0:
            return []
        oid = self._oid(self._oid_text(originator_id))
        found: list[StoredEvent] = []
        with self.datastore.using() as log:
            scan = partial(log.scan_braid, braid)
            if desc or gt is not None:  # from the newest back: versions go up along the braid
                done = False
                for r in paged(scan, reverse=True, first=1 if desc and limit else 16):
                    for v, topic, state in reversed(self._events(r.delta.payload)):
                        if gt is not None and v <= gt:
                            done = True
                            break
                        if lte is not None and v > lte:
                            continue
                        found.append(StoredEvent(oid, v, topic, state))
                        if desc and limit is not None and len(found) == limit:
                            done = True
                            break
                    if done:
                        break
                if not desc:
                    found.reverse()
                    del found[len(found) if limit is None else limit:]
            else:
                for r in paged(scan, first=64):
                    events = self._events(r.delta.payload)
                    if events and lte is not None and events[0][0] > lte:
                        break
                    for v, topic, state in events:
                        if lte is not None and v > lte:
                            break
                        found.append(StoredEvent(oid, v, topic, state))
                        if limit is not None and len(found) == limit:
                            return found
        return found


class BraidlogApplicationRecorder(BraidlogAggregateRecorder, ApplicationRecorder):
    """An application's events, and its notifications: its events in the order of the store's
    seq, numbered by the store's count of events (1, 2, 3 …; in a store written before, an
    event's seq)."""

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any
                      ) -> Sequence[int] | None:
        return self._insert(stored_events, None)

    def select_notifications(self, start: int | None, limit: int, stop: int | None = None,
                             topics: Sequence[str] = (), *, inclusive_of_start: bool = True
                             ) -> Sequence[Notification]:
        for name, value in (("start", start), ("stop", stop)):
            if value is not None and not _int(value):
                raise DataError(f"{name} must be an int or None, not {value!r}")
        if not _int(limit) or limit < 0:
            raise DataError(f"limit must be an int >= 0, not {limit!r}")
        if isinstance(topics, (str, bytes)) or not isinstance(topics, Iterable):
            raise DataError(f"topics must be a sequence of str, not {_what(topics)}")
        topics = list(topics)
        if not all(isinstance(t, str) for t in topics):
            raise DataError(f"topics must be a sequence of str, not {topics!r}")
        wanted = frozenset(topics)
        lo = 1 if start is None else start if inclusive_of_start else start + 1
        lo = max(lo, 1)
        hi = None if stop is None else stop + 1
        if limit == 0 or (hi is not None and hi <= lo):
            return []
        prefix = self.events_table_name + ":"
        out: list[Notification] = []
        with self.datastore.using() as log:
            for r in _scan_events(log, 1 if lo == 1 else _seek(log, lo), first=min(limit, 64)):
                first, _ = _ids(r)
                if hi is not None and first >= hi:
                    break
                d = r.delta
                if not d.braid_id.startswith(prefix):
                    continue
                events = self._events(d.payload)  # none: erased
                if not events:
                    continue
                oid = self._oid(d.payload["originator_id"])
                for nid, (v, topic, state) in enumerate(events, first):
                    if nid < lo or (wanted and topic not in wanted):
                        continue
                    if hi is not None and nid >= hi:
                        break
                    out.append(Notification(id=nid, originator_id=oid, originator_version=v,
                                            topic=topic, state=state))
                    if len(out) == limit:
                        return out
        return out

    def max_notification_id(self) -> int | None:
        prefix = self.events_table_name + ":"
        with self.datastore.using() as log:
            for r in _scan_events(log, reverse=True):
                if r.delta.braid_id.startswith(prefix):
                    return _ids(r)[1]
        return None

    def subscribe(self, gt: int | None = None, topics: Sequence[str] = ()
                  ) -> Subscription[ApplicationRecorder]:
        if gt is not None and not _int(gt):
            raise DataError(f"gt must be an int or None, not {gt!r}")
        return BraidlogSubscription(self, gt=gt, topics=topics)


class BraidlogSubscription(Subscription[BraidlogApplicationRecorder]):
    """An application's notifications after ``gt``, then each new one as it is committed: by this
    process (woken at once) or by another (seen within ``POLL_INTERVAL``: the subscription reads
    the store's head, a short read transaction, and selects again when it moved)."""

    def __init__(self, recorder: BraidlogApplicationRecorder, gt: int | None = None,
                 topics: Sequence[str] = ()) -> None:
        if not isinstance(recorder, BraidlogApplicationRecorder):
            raise ProgrammingError(f"recorder must be a BraidlogApplicationRecorder, not {_what(recorder)}")
        if gt is not None and not _int(gt):
            raise DataError(f"gt must be an int or None, not {gt!r}")
        if isinstance(topics, (str, bytes)) or not isinstance(topics, Sequence) or not all(
                isinstance(t, str) for t in topics):
            raise DataError(f"topics must be a sequence of topic strings, not {_what(topics)}")
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        self._buffer: deque[Notification] = deque()
        self._woken = threading.Event()
        recorder.datastore.listen(self._woken)

    def stop(self) -> None:
        super().stop()
        self._woken.set()
        self._recorder.datastore.unlisten(self._woken)

    def __next__(self) -> Notification:
        recorder = self._recorder
        while not self._has_been_stopped:
            if self._buffer:
                return self._buffer.popleft()
            with recorder.datastore.using() as log:
                mark = log.head().seq  # what the select below sees, at least
            self._woken.clear()
            found = recorder.select_notifications(
                start=self._last_notification_id or 0, limit=500, topics=self._topics,
                inclusive_of_start=False)
            if found:
                self._last_notification_id = found[-1].id
                self._buffer.extend(found)
                continue
            while not self._has_been_stopped and not self._woken.is_set():
                self._woken.wait(POLL_INTERVAL)
                with recorder.datastore.using() as log:
                    if log.head().seq != mark:
                        break
        raise StopIteration


class BraidlogTrackingRecorder(BraidlogRecorder, TrackingRecorder):
    """Tracking records: per upstream application, a braid ``<tracking_table_name>:<name>``
    whose notification ids only go up.

    A materialised view subclasses it and writes its own changes as deltas with ``record``, in
    the same transaction as the tracking record of the event that caused them.
    """

    def __init__(self, datastore: BraidlogDatastore, *,
                 tracking_table_name: str = "notification_tracking", **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        self.tracking_table_name = self._table(tracking_table_name, "tracking_table_name")

    def _tracking_delta(self, tracking: Tracking, braid: str, delta_id: str, ts: datetime
                        ) -> GenericDelta:
        return GenericDelta(
            id=delta_id, braid_id=braid, kind=TRACKING, ts=ts, provenance=_PROVENANCE,
            confidence=1.0, payload={"application_name": tracking.application_name,
                                     "notification_id": tracking.notification_id})

    def insert_tracking(self, tracking: Tracking) -> None:
        self.record(tracking)

    def record(self, tracking: Tracking, deltas: Sequence[GenericDelta] = ()) -> list[Record]:
        """Append ``deltas`` (a view's own changes, of any kind this process knows, e.g.
        ``eventsourcing.view``) and the tracking record in one transaction; the records written.
        IntegrityError, and nothing written, if ``tracking`` is not after the last one."""
        if isinstance(deltas, GenericDelta) or not isinstance(deltas, Iterable):
            raise ProgrammingError(f"deltas must be a sequence of GenericDelta, not {_what(deltas)}")
        deltas = list(deltas)
        for i, d in enumerate(deltas):
            if not isinstance(d, GenericDelta):
                raise ProgrammingError(f"deltas[{i}] must be a GenericDelta, not {_what(d)}")
        self._check_tracking(tracking)
        braid = self._braid(self.tracking_table_name, tracking.application_name,
                            "tracking.application_name")
        delta = self._tracking_delta(tracking, braid, _new_ids(1)[0], datetime.now(UTC))

        def build(log: LmdbLog, head: Head) -> list[GenericDelta]:
            self._check_floors(log, {braid: (tracking.notification_id, f"tracking of "
                                             f"{tracking.application_name!r}: notification")}, _tracked)
            return [*deltas, delta]
        return self._commit(build)

    def max_tracking_id(self, application_name: str) -> int | None:
        if not isinstance(application_name, str) or not application_name:
            raise DataError(f"application_name must be a non-empty str, not {application_name!r}")
        braid = self._braid(self.tracking_table_name, application_name, "application_name")
        with self.datastore.using() as log:
            last = _last(log, braid, _tracked)
        return None if last is None else last[1]


class BraidlogProcessRecorder(BraidlogTrackingRecorder, BraidlogApplicationRecorder,
                              ProcessRecorder):
    """An application recorder whose events are written with the tracking record of the
    upstream notification they were made from, in one transaction."""

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any
                      ) -> Sequence[int] | None:
        return self._insert(stored_events, kwargs.get("tracking"))
