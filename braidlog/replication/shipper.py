"""Asynchronous shipping: publish a store's committed records to its stream, in seq order.

One batch in flight per stream. A *group* is every record found committed past the stream's
watermark in one read of the log; a read sees whole transactions, so a group is one or more
whole transactions, and every record of it carries the group's last seq (``Braidlog-Commit``).
A group of one record is one plain publish; a larger one goes out as atomic batches of at most
1000 messages. Before it publishes anything after (re)reading the watermark, the shipper checks
the stream's last record (checks.py): its epoch, its bytes and its chain hash.
"""

from __future__ import annotations

import threading
import time

from ..chain import digest
from ..errors import BraidlogError, ReplicationError, ValidationError
from ..store import FullStore
from .checks import check_stream
from .role import refuse_writes
from .stream import HINT, Stream, Transient
from .wire import HDR_TREE_SIZE, MAX_BATCH, Epochs, Watermark, header, rows

__all__ = ["Shipper"]


class Shipper:
    """Publishes a store's committed records to its stream, in seq order, one batch in flight.

    ``ship()`` publishes everything committed so far and returns once the stream acknowledged
    it; ``follow()`` (or ``start()`` for a background thread) keeps doing so. After a crash a new
    Shipper resumes from the stream's watermark: nothing is lost, duplicated or reordered.
    """

    def __init__(self, store: FullStore, stream: Stream, *, batch: int = MAX_BATCH,
                 _promoting: bool = False) -> None:
        if type(batch) is not int or not 1 <= batch <= MAX_BATCH:
            raise ValidationError("batch", f"must be 1 to {MAX_BATCH} (JetStream's atomic batch "
                                  f"limit), got {batch!r}")
        if not _promoting:  # promote ships the epoch record from the replica it makes the writer
            refuse_writes(store, f"ship to stream {stream.name}")
        self.store = store
        self.stream = stream
        self.batch = batch
        self.shipped = 0
        self.retries = 0
        self.error: BaseException | None = None
        self.epochs = Epochs(store)
        self._wm: Watermark | None = None
        self._refused: int | None = None  # the JetStream error code that refused a batch
        self._notes_sent: set[tuple[int, bytes]] = set()  # (tree size, digest of the note)
        self._notes_loaded = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def ship(self, *, timeout: float = 30.0) -> Watermark:
        """Publish every record committed now and not yet in the stream; the stream's watermark.

        Retries through leader elections and lost acknowledgements until ``timeout``, then
        ReplicationError. StaleWriter when the stream is in a newer writer epoch or holds
        another writer's records; IntegrityError when its last record is foreign or corrupt.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            head = self.store.head()
            delay = 0.05
            while True:
                try:
                    wm = self._wm
                    if wm is None:
                        last = self.stream._call(self.stream._last(), self._left(deadline))
                        if last.mark.seq > head.seq:
                            head = self.store.head()
                        check_stream(self.stream, self.store, self.epochs, last, head,
                                     self._refused)
                        wm = self._wm = last.mark
                    if wm.seq >= head.seq:
                        self._ship_notes(wm, deadline)
                        return wm
                    end = wm.commit if wm.commit > wm.seq else head.seq
                    stop = min(end, wm.seq + self.batch)
                    self.epochs.refresh()
                    batch = rows(self.store, self.epochs, self.stream.subject, wm.seq + 1, stop)
                    self.stream._call(self.stream._publish(batch, end), self._left(deadline))
                    self._wm = Watermark(stop, batch[-1].hash, end, batch[-1].epoch)
                    self.shipped += len(batch)
                    delay = 0.05
                except Transient as e:
                    self._wm = None  # re-read: the batch may have landed, or someone else wrote
                    self._refused = e.code or self._refused
                    self.retries += 1
                    if time.monotonic() + delay >= deadline:
                        raise ReplicationError(
                            f"could not ship seq {head.seq} to stream {self.stream.name} within "
                            f"{timeout:.1f} s: {e}", hint=HINT) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 1.0)

    def _ship_notes(self, wm: Watermark, deadline: float) -> None:
        """Publish the signed checkpoint notes the store keeps for shipped tree sizes to the
        checkpoint stream (``Stream.checkpoint_stream``), each once."""
        notes = [(size, note) for size, note in self.store.notes() if size <= wm.seq]
        if not notes or all((size, digest(note)) in self._notes_sent for size, note in notes):
            return
        stream = self.stream
        if not self._notes_loaded:
            start = 1
            while True:
                got = stream._call(stream._read_notes(start, MAX_BATCH), self._left(deadline))
                for seq, headers, data in got:
                    self._notes_sent.add((int(header(headers, HDR_TREE_SIZE) or -1),
                                          digest(data)))
                    start = seq + 1
                if len(got) < MAX_BATCH:
                    break
            self._notes_loaded = True
        for size, note in notes:
            key = (size, digest(note))
            if key not in self._notes_sent:
                stream._call(stream._publish_note(size, note), self._left(deadline))
                self._notes_sent.add(key)

    def _left(self, deadline: float) -> float:
        return min(self.stream.timeout, max(deadline - time.monotonic(), 0.001))

    def follow(self, stop: threading.Event | None = None, *, poll: float = 0.05,
               timeout: float | None = None, ship_timeout: float = 30.0) -> Watermark:
        """Ship as the log grows until ``stop`` is set or ``timeout`` passes; ships once more."""
        end = None if timeout is None else time.monotonic() + timeout
        stop = stop or self._stop
        while True:
            self.ship(timeout=ship_timeout)
            if stop.is_set() or (end is not None and time.monotonic() >= end):
                return self.ship(timeout=ship_timeout)
            stop.wait(poll)

    def start(self, *, poll: float = 0.05, ship_timeout: float = 30.0) -> Shipper:
        """Follow the log in a background thread; ``stop()`` ends it and re-raises its error."""
        if self._thread is not None:
            raise ValidationError("shipper", "already started")
        self._stop.clear()

        def run() -> None:
            try:
                self.follow(self._stop, poll=poll, ship_timeout=ship_timeout)
            except BaseException as e:  # handed to stop()
                self.error = e

        self._thread = threading.Thread(target=run, daemon=True,
                                        name=f"braidlog-ship-{self.stream.name}")
        self._thread.start()
        return self

    def stop(self, *, timeout: float = 60.0) -> Watermark | None:
        """Stop the background thread after a last ship; re-raise what ended it early."""
        thread, self._thread = self._thread, None
        if thread is None:
            return None
        self._stop.set()
        thread.join(timeout)
        if thread.is_alive():
            raise ReplicationError(f"the shipper of stream {self.stream.name} did not stop "
                                   f"within {timeout:.0f} s", hint=HINT)
        if self.error is not None:
            error, self.error = self.error, None
            if isinstance(error, BraidlogError):
                raise error
            raise ReplicationError(f"the shipper of stream {self.stream.name} failed: {error!r}",
                                   hint=HINT) from error
        return self._wm
