"""Synchronous writing: an append returns once the stream holds it, and a write the stream
refused is never committed locally.

The records are published from inside the store's open write transaction (the store's ``admit``
hook, after the caller's own ``admit`` checks) with ``Nats-Expected-Last-Sequence`` = the seq
before them, and the transaction commits only after the stream acknowledged them. If the stream
refuses them (a newer writer epoch, another writer, a foreign record) or does not answer in
time, the transaction is abandoned: the store is exactly as it was before the call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

from ..chain import Row as ChainRow
from ..delta import GenericDelta
from ..errors import IntegrityError, NotAcknowledged, StaleWriter, ValidationError
from ..kinds import Registry
from ..store import Admit, BraidHead, FullStore, Head, OnDisk, Progress, Record, Staged
from .checks import check_stream
from .replica import Replica
from .shipper import Shipper
from .stream import HINT, Last, Stream, Transient
from .wire import EPOCH_BRAID, EPOCH_KIND, HDR_HASH, MAX_BATCH, Row, Watermark, header, read_epoch

__all__ = ["SyncLog"]

T = TypeVar("T")


class _Refused(Exception):
    """Raised inside the write transaction when the stream took something else at our seq;
    checked (and turned into StaleWriter or IntegrityError) once the transaction is gone."""

    def __init__(self, last: Last, code: int | None) -> None:
        self.last = last
        self.code = code
        super().__init__("the stream refused the batch")


class SyncLog(FullStore):
    """A store whose appends return only after the stream acknowledged them with its replicas.

    It implements every role of the store it wraps (``FullStore``; ``OnDisk`` too when the
    store is on disk: ``SyncLog`` is then an ``OnDiskSyncLog``), answered by that store, so
    ``Braid(SyncLog(store, stream), ...)`` makes every append and ``execute`` synchronous. An
    append the stream does not acknowledge raises and leaves the store unchanged: StaleWriter
    (a newer writer epoch or another writer holds the stream; every later call is refused at
    once), IntegrityError (a foreign or corrupt record ends the stream), NotAcknowledged (no
    answer in time: the stream may still store it when the connection comes back; the next call
    catches up from the stream first, and appending the same deltas again is idempotent). One
    transaction is at most 1000 deltas, one JetStream atomic batch.
    """

    def __new__(cls, store: FullStore, stream: Stream, **kw: Any) -> SyncLog:
        if cls is SyncLog and isinstance(store, OnDisk):
            cls = OnDiskSyncLog
        return super().__new__(cls)

    def __init__(self, store: FullStore, stream: Stream, *, timeout: float = 30.0,
                 batch: int = MAX_BATCH, _promoting: bool = False) -> None:
        self.store = store
        self.stream = stream
        self.timeout = timeout
        self.shipper = Shipper(store, stream, batch=batch, _promoting=_promoting)
        self._lock = threading.Lock()
        self._stale: StaleWriter | None = None

    # -- the store's writing API, synchronous ------------------------------------------------
    def append(self, delta: GenericDelta, *, expected_version: int | None = None) -> int:
        """Append one delta; return its seq once the stream holds it."""
        self._sync(lambda hook: self.store.commit([delta], expected_version=expected_version,
                                                  admit=hook), None)
        return self._seq(delta)

    def append_batch(self, deltas: Iterable[GenericDelta], *,
                     expected_version: int | Mapping[str, int] | None = None,
                     expected_head: int | None = None, admit: Admit | None = None,
                     salts: Mapping[str, bytes] | None = None) -> list[int]:
        """Append deltas atomically; return their seqs once the stream holds them (whole)."""
        deltas = list(deltas)
        self._sync(lambda hook: self.store.commit(
            deltas, expected_version=expected_version, expected_head=expected_head,
            admit=hook, salts=salts), admit)
        return [self._seq(d) for d in deltas]

    def commit(self, deltas: Iterable[GenericDelta], *,
               expected_version: int | Mapping[str, int] | None = None,
               expected_head: int | None = None, admit: Admit | None = None,
               salts: Mapping[str, bytes] | None = None) -> list[Record]:
        """Append deltas atomically; the records written, once the stream holds them."""
        return self._sync(lambda hook: self.store.commit(
            deltas, expected_version=expected_version, expected_head=expected_head,
            admit=hook, salts=salts), admit)

    def commit_locked(self, prepare: Callable[[Head], Iterable[GenericDelta]], *,
                      expected_version: int | Mapping[str, int] | None = None,
                      admit: Admit | None = None) -> list[Record]:
        """``store.commit_locked``, committed only once the stream holds the records."""
        return self._sync(lambda hook: self.store.commit_locked(
            prepare, expected_version=expected_version, admit=hook), admit)

    def ship(self) -> Watermark:
        """Ship whatever the local log holds that the stream does not (appended around this
        SyncLog, e.g. by a Shipper's store); catch up first if the stream is ahead."""
        with self._lock:
            self._alive()
            return self._prepare(time.monotonic() + self.timeout)

    # -- how ---------------------------------------------------------------------------------
    def _seq(self, delta: GenericDelta) -> int:
        seq = self.store.seq_of(delta.id)
        assert seq is not None  # committed, or already there (an idempotent retry)
        return seq

    def _alive(self) -> None:
        if self._stale is not None:
            raise StaleWriter(f"{self._stale} (this call appended nothing)",
                              expected=self._stale.expected, actual=self._stale.actual)

    def _sync(self, write: Callable[[Admit], T], admit: Admit | None) -> T:
        """Run ``write(hook)`` where ``hook`` is the store's ``admit``: the caller's checks
        (``admit``, e.g. a Braid's projections), then the publish."""
        with self._lock:
            self._alive()
            deadline = time.monotonic() + self.timeout
            for _attempt in range(3):
                self._prepare(deadline)
                try:
                    def hook(head: Head, staged: list[Staged]) -> None:
                        if admit is not None:
                            admit(head, staged)
                        self._publish(staged, deadline)

                    return write(hook)
                except _Moved:  # the local log or the stream moved: level them, try again
                    self.shipper._wm = None
                    continue
                except _Refused as e:
                    self.shipper._wm = None
                    self._refused(e)
                except BaseException:
                    self.shipper._wm = None  # whatever failed, read the stream again first
                    raise
            raise StaleWriter(f"stream {self.stream.name} or the local store kept moving while "
                              "this SyncLog wrote (another writer of this epoch, or another "
                              "process appending to the store); this call committed nothing "
                              "locally", expected=None, actual=None)

    def _refused(self, e: _Refused) -> None:
        head = self.store.head()
        try:
            check_stream(self.stream, self.store, self.shipper.epochs, e.last, head, e.code)
        except StaleWriter as stale:
            self._stale = StaleWriter(f"{stale}; this call committed nothing locally",
                                      expected=stale.expected, actual=stale.actual)
            raise self._stale from None
        except IntegrityError as bad:
            raise IntegrityError(f"{bad}; this call committed nothing locally", seq=bad.seq,
                                 expected=bad.expected, found=bad.found) from None
        raise StaleWriter(f"stream {self.stream.name} refused seq {head.seq + 1} (error "
                          f"{e.code}) and holds {e.last.mark}: nothing was committed locally",
                          expected=head.seq, actual=e.last.mark.seq)

    def _prepare(self, deadline: float) -> Watermark:
        """Bring the stream and the store level: read and check the stream's last record,
        take in what the stream holds past our head (acknowledged, then not committed here),
        ship what we hold past the stream's (appended around this SyncLog)."""
        shipper = self.shipper
        try:
            for _attempt in range(5):
                if shipper._wm is not None:
                    break
                last = self.stream.last(timeout=max(deadline - time.monotonic(), 0.1))
                head = self.store.head()
                shipper.epochs.refresh()
                if (last.mark.seq > head.seq and last.mark.epoch == shipper.epochs.current
                        and self._extends(head, deadline)):
                    # acknowledged by the stream but not committed here (a crash between the
                    # acknowledgement and the commit, or a call that timed out and landed
                    # later): these records chain onto our head; take them in as a replica would
                    Replica(self.store, self.stream, _for_writer=True).catch_up(
                        timeout=max(deadline - time.monotonic(), 0.1))
                    continue
                check_stream(self.stream, self.store, shipper.epochs, last, head)
                shipper._wm = last.mark
            return shipper.ship(timeout=max(deadline - time.monotonic(), 0.1))
        except StaleWriter as e:
            self._stale = StaleWriter(f"{e}; this call committed nothing locally",
                                      expected=e.expected, actual=e.actual)
            raise self._stale from None

    def _extends(self, head: Head, deadline: float) -> bool:
        """Whether the stream holds this store's head record at its seq (so it extends it)."""
        if head.seq == 0:
            return True
        rows = self.stream._retry(lambda: self.stream._read(head.seq, 1), deadline,
                                  "reading the stream at this store's head")
        return bool(rows) and rows[0][0] == head.seq and rows[0][2] == self.store.body(head.seq) \
            and header(rows[0][1], HDR_HASH) == head.hash.hex()

    def _publish(self, staged: list[Staged], deadline: float) -> None:
        """The admit hook: publish ``staged``; return only once the stream holds it."""
        first, last = staged[0], staged[-1]
        if len(staged) > MAX_BATCH:
            raise ValidationError("deltas", f"a synchronous transaction holds at most {MAX_BATCH} "
                                  f"deltas (one JetStream atomic batch), got {len(staged)}")
        wm = self.shipper._wm
        if wm is not None and (wm.seq, wm.hash) == (last.seq, last.hash):
            return  # the store retried its transaction: already published and acknowledged
        if wm is None or wm.seq != first.seq - 1:
            raise _Moved()
        epoch = self.shipper.epochs.at(wm.seq)
        batch = []
        for s in staged:
            if s.delta.kind == EPOCH_KIND and s.delta.braid_id == EPOCH_BRAID:
                epoch = read_epoch(s.delta).epoch
            batch.append(Row(s.seq, s.hash, s.body, self.stream.subject(s.delta.braid_id), epoch,
                             s.salt))
        stream, delay, code = self.stream, 0.05, None
        while True:
            left = deadline - time.monotonic()
            try:
                stream._call(stream._publish(batch, last.seq), min(stream.timeout, max(left, 0.001)))
                self.shipper._wm = Watermark(last.seq, last.hash, last.seq, epoch)
                return
            except Transient as e:
                code = e.code or code
                error = e
            try:  # did it land (a lost acknowledgement), or did someone else take the seq?
                now = stream._call(stream._last(), min(stream.timeout, max(left, 0.001)))
            except Transient:
                now = None
            if now is not None:
                if now.mark.seq >= last.seq and (now.mark.seq, now.mark.hash, now.body) == (
                        last.seq, last.hash, last.body):
                    self.shipper._wm = Watermark(last.seq, last.hash, last.seq, epoch)
                    return
                if (now.mark.seq, now.mark.hash) != (wm.seq, wm.hash):
                    if now.mark.seq > wm.seq and now.mark.epoch == self.shipper.epochs.current:
                        raise _Moved()  # maybe ours, landed late: catch up from it, try again
                    raise _Refused(now, code)
            if time.monotonic() + delay >= deadline:
                seqs = [s.seq for s in staged]
                raise NotAcknowledged(
                    f"seq {first.seq}..{last.seq} were not committed locally: stream "
                    f"{stream.name} did not acknowledge them within {self.timeout:.1f} s "
                    f"({error})", seqs=seqs,
                    hint="the stream may still store them when the connection comes back; the "
                    "next call catches up from the stream first, and appending the same deltas "
                    f"again is idempotent; {HINT}")
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    # -- every other role of the store, answered by the store ----------------------------------
    # Reads, checkpoints and side tables need no stream: the records they see are committed.
    # An erasure appends its ``erased`` delta locally; the next call ships it (as anything
    # appended around this SyncLog), and a replica applies it (Replica.catch_up).

    @property
    def registry(self) -> Registry:  # type: ignore[override]  # the store's, read-only here
        return self.store.registry

    @property
    def readonly(self) -> bool:  # type: ignore[override]  # the store's, read-only here
        return self.store.readonly

    def head(self) -> Head:
        return self.store.head()

    def read(self, seq: int) -> Record:
        return self.store.read(seq)

    def get(self, delta_id: str) -> Record | None:
        return self.store.get(delta_id)

    def seq_of(self, delta_id: str) -> int | None:
        return self.store.seq_of(delta_id)

    def scan(self, start: int = 1, stop: int | None = None, *, reverse: bool = False,
             limit: int | None = None) -> Iterator[Record]:
        return self.store.scan(start, stop, reverse=reverse, limit=limit)

    def scan_braid(self, braid_id: str, start: int = 1, stop: int | None = None, *,
                   reverse: bool = False, limit: int | None = None) -> Iterator[Record]:
        return self.store.scan_braid(braid_id, start, stop, reverse=reverse, limit=limit)

    def scan_kind(self, kind: str, start: int = 1, stop: int | None = None, *,
                  reverse: bool = False, limit: int | None = None) -> Iterator[Record]:
        return self.store.scan_kind(kind, start, stop, reverse=reverse, limit=limit)

    def scan_refs(self, entity_id: str, start: int = 1, stop: int | None = None, *,
                  reverse: bool = False, limit: int | None = None) -> Iterator[Record]:
        return self.store.scan_refs(entity_id, start, stop, reverse=reverse, limit=limit)

    def braid_head(self, braid_id: str) -> BraidHead:
        return self.store.braid_head(braid_id)

    def body(self, seq: int) -> bytes:
        return self.store.body(seq)

    def entry(self, seq: int) -> bytes:
        return self.store.entry(seq)

    def hash_at(self, seq: int) -> bytes:
        return self.store.hash_at(seq)

    def scan_bodies(self, start: int = 1, stop: int | None = None
                    ) -> Iterator[tuple[int, bytes, bytes]]:
        return self.store.scan_bodies(start, stop)

    def scan_rows(self, start: int = 1, stop: int | None = None) -> Iterator[ChainRow]:
        return self.store.scan_rows(start, stop)

    def seq_at(self, ts: datetime) -> int:
        return self.store.seq_at(ts)

    def verify(self, start: int = 1, stop: int | None = None, *,
               progress: Progress | None = None) -> Head:
        return self.store.verify(start, stop, progress=progress)

    def braids(self) -> dict[str, BraidHead]:
        return self.store.braids()

    def counts(self, index: str) -> dict[str, int]:
        return self.store.counts(index)

    def spaces(self) -> dict[str, int]:
        return self.store.spaces()

    def put_checkpoint(self, name: str, version: int, seq: int, blob: bytes) -> None:
        self.store.put_checkpoint(name, version, seq, blob)

    def checkpoint_seqs(self, name: str, version: int) -> list[int]:
        return self.store.checkpoint_seqs(name, version)

    def get_checkpoint(self, name: str, version: int, seq: int) -> bytes | None:
        return self.store.get_checkpoint(name, version, seq)

    def checkpoint_keys(self) -> list[tuple[str, int, int]]:
        return self.store.checkpoint_keys()

    def projections_used(self) -> list[str]:
        return self.store.projections_used()

    def use_projections(self, names: Iterable[str]) -> None:
        self.store.use_projections(names)

    def put_note(self, size: int, note: bytes) -> None:
        self.store.put_note(size, note)

    def notes(self, *, last: bool = False) -> list[tuple[int, bytes]]:
        return self.store.notes(last=last)

    def tree_hashes(self, nodes: list[tuple[int, int]]) -> list[bytes]:
        return self.store.tree_hashes(nodes)

    def erase(self, seqs: Iterable[int], delta: GenericDelta) -> tuple[Record, list[bytes]]:
        return self.store.erase(seqs, delta)

    def apply_erasures(self, erase: Mapping[int, int], append: Callable[[Any], Any]
                       ) -> tuple[Any, list[bytes]]:
        return self.store.apply_erasures(erase, append)

    def close(self) -> None:
        self.store.close()

    def __repr__(self) -> str:
        return f"SyncLog({self.store!r}, {self.stream!r})"


class OnDiskSyncLog(SyncLog, OnDisk):
    """A SyncLog over a store kept in a directory: its ``OnDisk`` capability too."""

    store: Any  # an OnDisk FullStore

    @property
    def path(self) -> Path:  # type: ignore[override]  # the store's, read-only here
        return self.store.path

    @property
    def format_version(self) -> int:  # type: ignore[override]  # the store's, read-only here
        return self.store.format_version

    def last_commit(self) -> int:
        return self.store.last_commit()

    def release_pages(self) -> None:
        self.store.release_pages()

    def stat(self) -> dict[str, int]:
        return self.store.stat()

    def copy(self, dest: str | PathLike[str], *, compact: bool = True) -> None:
        self.store.copy(dest, compact=compact)

    def upgraded(self) -> Any:
        return self.store.upgraded()

    def before_hashes(self, *sizes: int) -> dict[int, tuple[bytes, bytes]]:
        return self.store.before_hashes(*sizes)


class _Moved(Exception):
    """The local head is not where the stream's watermark is: ship the backlog and retry."""
