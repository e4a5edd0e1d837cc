"""What a writer checks about its stream before it publishes: the stream's last record is this
log's own record (by its bytes and chain hash, not only its headers), in this writer's epoch.

Shared by the shipper (asynchronous) and the synchronous writer. The three outcomes that stop
a writer are told apart, because their remedies differ:

- the stream is in a newer writer epoch: this writer was fenced by a promotion (StaleWriter);
- the stream's last record chains but is not this log's: another writer (StaleWriter);
- the stream's last record does not chain at all, or its bytes are not what its headers claim:
  a foreign or corrupt record (IntegrityError); this log is intact, ship it to a new stream.
"""

from __future__ import annotations

import time
from functools import partial

from ..chain import GENESIS
from ..delta import decode
from ..errors import DecodeError, IntegrityError, StaleWriter
from ..store import HW_SIZE, FullStore, Head
from .stream import Last, Stream
from .wire import HDR_HASH, Epochs, Watermark, chains, header, read_epoch

__all__ = ["check_stream", "fenced"]

RECOVER = ("this store's log is intact: ship it to a new stream (`braidlog ship --stream NEW`), "
           "point the replicas at NEW, and let only the writer's credentials publish to the "
           "stream's subjects (docs/replication.md, *A foreign or corrupt record*)")


SAFE = ("This store's log is intact (`braidlog verify` checks it): ship it to a new stream "
        "(`braidlog ship --stream NEW`) and point the replicas there (docs/replication.md, *A foreign "
        "or corrupt record*); do not throw it away. Only if another writer was rightly promoted on "
        "this stream, move this store aside (keep it: `braidlog log` lists what it holds) and "
        "follow the stream with `braidlog replica` into an empty store")


def fenced(stream: Stream, store: FullStore, epochs: Epochs, mark: Watermark, head: Head,
           refused: int | None) -> StaleWriter:
    """The error for a writer whose epoch is older than its stream's."""
    where = ""
    found = stream.last_epoch()
    shipped = min(mark.seq, head.seq)
    if found is not None:
        seq, _headers, body = found
        shipped = _common(stream, store, min(seq - 1, head.seq))
        try:
            payload = read_epoch(decode(body[HW_SIZE:]))
            where = (f" since seq {seq} (writer {payload.writer!r}"
                     f"{', forced' if payload.forced else ''})")
        except DecodeError:
            where = f" since seq {seq}"
    tail = (f"; its records {shipped + 1}..{head.seq} were never acknowledged by the stream and "
            "are not in the history" if head.seq > shipped else "")
    how = f" (JetStream refused its batch with error {refused})" if refused else ""
    return StaleWriter(
        f"stream {stream.name} is in writer epoch {mark.epoch}{where}, this store's writer is in "
        f"epoch {epochs.current}: a newer writer was promoted and this one is fenced{how}; "
        f"it publishes nothing more{tail}. Rebuild this store as a replica "
        f"(move it aside and run `braidlog replica` into an empty store); "
        f"`braidlog log --start {shipped + 1}` on it lists what was lost",
        expected=epochs.current, actual=mark.epoch)


def _common(stream: Stream, store: FullStore, seq: int) -> int:
    """The last seq at or below ``seq`` where the stream holds this store's own record (the
    epoch record may be preceded by its kind's declaration, in the same batch)."""
    for _ in range(4):
        if seq <= 0:
            return 0
        rows = stream._retry(partial(stream._read, seq, 1), time.monotonic() + stream.timeout,
                             "reading the stream")
        if rows and rows[0][0] == seq and header(rows[0][1], HDR_HASH) == store.hash_at(seq).hex():
            return seq
        seq -= 1
    return seq


def check_stream(stream: Stream, store: FullStore, epochs: Epochs, last: Last, head: Head,
                 refused: int | None = None) -> None:
    """Raise unless ``stream`` ends at a record of this log (a prefix of it, or its head).

    ``head`` is the store's head; a stream that goes past it is checked as far as this store
    can: if the record at this store's head is the stream's, the stream extends this log (the
    synchronous writer catches up from it), else it is another writer's.
    """
    mark, body, salt = last
    name = stream.name
    epochs.refresh()
    if mark.epoch > epochs.current:
        raise fenced(stream, store, epochs, mark, head, refused)
    if mark.seq == 0:
        return
    how = (f"JetStream refused this store's batch with error {refused}" if refused
           else "the expected-sequence check refuses this store's batches")
    if mark.seq == head.seq + 1 and body is not None:
        chained = chains(head.hash, mark.seq, body, salt)
        if chained != mark.hash:
            raise IntegrityError(
                f"stream {name} seq {mark.seq} holds a foreign or corrupt record: its bytes "
                f"chained onto this log's head give hash {chained.hex()}, its headers claim "
                f"{mark.hash.hex()}; replicas stop before it. {RECOVER}", seq=mark.seq,
                expected=chained, found=mark.hash)
    if mark.seq > head.seq or mark.commit > head.seq:
        raise StaleWriter(
            f"stream {name} goes to seq {max(mark.seq, mark.commit)} but this store's head is "
            f"seq {head.seq}: another writer ships to it, or its tail was forged ({how}). {SAFE}",
            expected=head.seq, actual=mark.seq)
    ours = store.hash_at(mark.seq)
    prev = store.hash_at(mark.seq - 1) if mark.seq > 1 else GENESIS
    chained = chains(prev, mark.seq, body or b"", salt)
    if chained != mark.hash:
        raise IntegrityError(
            f"stream {name} seq {mark.seq} holds a foreign or corrupt record: its bytes chained "
            f"onto this log's seq {mark.seq - 1} give hash {chained.hex()}, its headers claim "
            f"{mark.hash.hex()}{' (this log’s own hash at that seq)' if mark.hash == ours else ''}"
            f"; replicas stop before it. {RECOVER}", seq=mark.seq, expected=ours, found=mark.hash)
    if mark.hash != ours:
        raise StaleWriter(
            f"stream {name} seq {mark.seq} has chain hash {mark.hash.hex()}, this store "
            f"{ours.hex()}: the stream's last record is not this log's: another writer's, or forged "
            f"and rechained ({how}; none of it was merged here). {SAFE}", expected=ours,
            actual=mark.hash)
