"""Promotion: a caught-up replica starts a new writer epoch, recorded in the stream itself.

The epoch record (wire.py) is published by the synchronous writer with the expected-last-
sequence check, so it lands directly after the last record the stream acknowledged, or not at
all. From then on the stream's last record carries the new epoch: the old writer is refused
before it publishes anything once it reads the stream, and a batch it already had in flight
is refused by the expected-sequence check (its seq is taken by the epoch record). Its
unshipped tail can no longer win.
"""

from __future__ import annotations

import socket
import time
from datetime import UTC, datetime
from typing import Any, NamedTuple

from ..chain import GENESIS
from ..errors import ConflictError, StaleWriter
from ..store import FullStore, Head
from .replica import Replica
from .role import unmark
from .stream import Stream
from .sync import SyncLog
from .wire import Epochs, epoch_deltas, read_epoch

__all__ = ["promote", "Promotion"]


class Promotion(NamedTuple):
    """What ``promote`` did: the epoch it started and the store's head (its epoch record)."""

    epoch: int
    head: Head
    caught_up: Head  # the last record of the previous epoch

    def __str__(self) -> str:
        return f"epoch {self.epoch} at seq {self.head.seq}"


def _moving(stream: Stream, first: int, until: float) -> tuple[int, int]:
    """Watch the stream's last seq until ``until`` (at least one look); (first, last seen)."""
    while True:
        left = until - time.monotonic()
        if left > 0:
            time.sleep(min(left, 0.1))
        last = stream.info()["last_seq"]
        if last != first or time.monotonic() >= until:
            return first, last


def _still_moving(stream: Any, before: int, after: int, when: str) -> ConflictError:
    return ConflictError(
        f"stream {stream.name} is still moving: it grew from seq {before} to {after} {when}, so "
        "its writer is alive. Stop the old writer first: stop its process (the application, "
        f"`braidlog ship`), or revoke its NATS credentials for {stream.prefix}.> "
        "(docs/replication.md, *Authorization*); then promote again. --force (force=True) "
        "fences it while it runs: its next write is refused", expected=before, actual=after)


def promote(store: FullStore, stream: Stream, *, writer: str | None = None, quiet: float = 2.0,
            force: bool = False, timeout: float = 60.0, now: datetime | None = None
            ) -> Promotion:
    """Make ``store``, a replica of ``stream``, the writer of a new epoch that fences the old.

    1. Catches the replica up and requires it to hold everything the stream acknowledged (the
       same last record, no half-shipped group).
    2. Watches the stream for ``quiet`` seconds: a stream that still grows has a live writer,
       and promote refuses (ConflictError saying how to stop it) unless ``force``.
    3. Appends and publishes the epoch record (``writer_epoch``, epoch = the stream's + 1)
       synchronously: it lands right after the last acknowledged record or not at all, and
       the store commits it only once the stream acknowledged it.

    With ``force`` a writer still shipping is fenced while it runs: promote catches up with
    whatever it shipped and retries until the epoch record lands or ``timeout`` passes.
    Ship from the returned head with Shipper or SyncLog.
    """
    deadline = time.monotonic() + timeout
    start = time.monotonic()
    first = stream.info(timeout=timeout)["last_seq"]
    replica = Replica(store, stream)
    while True:
        left = max(deadline - time.monotonic(), 0.1)
        caught = replica.catch_up(timeout=left)
        seen = (first, first) if force else _moving(stream, first, start + quiet)
        if seen[1] != seen[0]:
            raise _still_moving(stream, seen[0], seen[1], f"in the last {quiet:g} s")
        caught = replica.catch_up(timeout=max(deadline - time.monotonic(), 0.1))
        wm = stream.watermark(timeout=max(deadline - time.monotonic(), 0.1))
        if not wm.complete:
            raise ConflictError(
                f"stream {stream.name} ends inside a transaction (seq {wm.seq} of a group ending "
                f"at {wm.commit}): the old writer stopped while shipping it; restart the old "
                "writer's shipper to finish it, or ship the log to a new stream",
                expected=wm.commit, actual=wm.seq)
        if (caught.seq, caught.hash) != (wm.seq, wm.hash):
            if force and time.monotonic() < deadline:
                first, start = wm.seq, time.monotonic()
                continue
            if not force and wm.seq > caught.seq:  # it grew while the replica caught up to it
                raise _still_moving(stream, caught.seq, wm.seq, "while the replica caught up")
            raise ConflictError(
                f"the replica is at {caught} but stream {stream.name} at {wm}: it has not caught "
                "up; run the replica again before promoting it", expected=wm.seq,
                actual=caught.seq)
        name, ts = writer or socket.gethostname(), now or datetime.now(UTC)

        def fence(head: Head, name: str = name, ts: datetime = ts) -> list:
            # decided under the store's write lock, after the SyncLog levelled the store with
            # the stream: the epoch is the one after the last this log holds
            return epoch_deltas(store.registry, Epochs(store).current + 1, name, forced=force,
                                ts=ts)

        log = SyncLog(store, stream, timeout=max(deadline - time.monotonic(), 0.1), _promoting=True)
        try:
            records = log.commit_locked(fence)
        except StaleWriter as e:
            if force and time.monotonic() < deadline:
                first, start = stream.info()["last_seq"], time.monotonic()
                replica = Replica(store, stream)
                continue
            raise ConflictError(
                f"stream {stream.name} moved while the epoch record was published ({e}); its "
                "writer is alive: stop it and promote again, or use --force; this store is "
                "unchanged", expected=wm.seq, actual=None) from None
        unmark(store)  # the writer of the new epoch: it takes writes now
        at = records[0].seq - 1  # everything the stream acknowledged before the new epoch
        before = Head(at, store.hash_at(at) if at else GENESIS)
        return Promotion(read_epoch(records[-1].delta).epoch, Head(records[-1].seq,
                                                                   records[-1].hash), before)
