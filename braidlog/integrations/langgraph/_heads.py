"""The saver's direct reads: a thread's latest checkpoint, a checkpoint by id and its writes,
each found through the refers-to index, without reading the thread's history.

Every record the saver writes names keys the refers-to index files it under
(``_encoding.checkpoint_key``, ``head_key``, ``thread_key``). A checkpoint record also holds
``at`` (for each channel it names but did not change, the seq of the record holding that
version), ``latest`` (the id and seq of the namespace's checkpoint with the greatest id as of
this put, None when that is this one) and ``mono`` (whether every checkpoint of the namespace
was put in the order of its id, so the put order is the newest-first order of ``list``).

So the latest checkpoint is the last record under the namespace's head key, or the one its
``latest`` names; its values are in the records its ``at`` names; its writes are the records
under its checkpoint key. A thread is read this way while it has no tombstone (no
``delete_thread`` or ``prune``) and its records all hold these keys; otherwise, and for a
checkpoint a deletion of runs hides, the saver builds the thread's index from its history
(``_threads.ThreadIndex``), as it did before these keys.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ._encoding import checkpoint_key, head_key, load_any, thread_key
from ._threads import _key

__all__ = ["Head", "Known", "Lookup", "head_of"]


@dataclass
class Head:
    """What a ``put`` needs of the namespace it puts in: its last checkpoint record."""

    seq: int
    cid: str
    latest: tuple[str, int]  # (id, seq) of the namespace's checkpoint with the greatest id
    mono: bool
    #: channel -> (version, seq of the record holding it), for the versions this checkpoint names
    where: dict[str, tuple[Any, int]]
    #: channel -> seq of its last stored version (the start of the next one's delta chain)
    last: dict[str, int]
    #: the generation of its braid's ``Known`` it was read or written in
    gen: int = 0


def head_of(seq: int, p: dict[str, Any], serde: Any) -> Head | None:
    """The Head of checkpoint record ``seq`` (payload ``p``); None for a record without ``at``
    (written before these keys, or by ``copy_thread``)."""
    at = p.get("at")
    if at is None:
        return None
    values = p["values"]
    versions = load_any(serde, p["checkpoint"]).get("channel_versions", {})
    where: dict[str, tuple[Any, int]] = {}
    last: dict[str, int] = {}
    for ch, ver in versions.items():
        s = seq if ch in values else at.get(ch)
        if s is not None:
            where[ch] = (_key(ver), s)
            last[ch] = s
    for ch, enc in values.items():
        if enc.get("t") != "empty":
            last[ch] = seq
    latest = p.get("latest")
    return Head(seq, p["checkpoint_id"], (p["checkpoint_id"], seq) if latest is None else
                (latest[0], latest[1]), bool(p.get("mono")), where, last)


class Known:
    """Whether a thread's braid gained no record since the saver last looked its thread up but
    the ones the saver appended: while so, the ``Head`` the saver keeps of a namespace of it
    (from its own last put there, in the same generation) is the namespace as it is, and a put
    need not look it up again. The test is one read of the braid's version: the records it
    gained since are all this saver's exactly when the version grew by the number of this
    saver's appends to it since (each counted once, by seq, once durable); a record of anyone
    else's (another process, another saver on the same store, a tombstone) makes it grow by
    more, and the saver looks the thread up again, which starts a new generation (the Heads
    kept of its other namespaces are then read again too)."""

    MAX = 100_000  # braids known at once

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._base: dict[str, tuple[int, int, int]] = {}  # braid -> (version, last seq, generation)
        self._ours: dict[str, set[int]] = {}  # braid -> seqs this saver appended since its base
        self._gen = 0

    def appended(self, braid: str, seq: int) -> None:
        """This saver's record ``seq`` of ``braid`` is durable."""
        with self._lock:
            base = self._base.get(braid)
            if base is not None and seq > base[1]:
                self._ours[braid].add(seq)

    def looked_up(self, braid: str, head: Any) -> int:
        """The thread was looked up after its braid stood at ``head`` (its BraidHead): a new
        generation, returned."""
        with self._lock:
            if len(self._base) >= self.MAX:
                self._base.clear()
                self._ours.clear()
            self._gen += 1
            self._base[braid] = (head.version, head.seq, self._gen)
            self._ours[braid] = set()
            return self._gen

    def unchanged(self, braid: str, head: Any) -> int | None:
        """The generation whose Heads of ``braid`` still hold, its braid standing at ``head``;
        None when a record not this saver's may have come (look the thread up)."""
        with self._lock:
            base = self._base.get(braid)
            if base is None:
                return None
            ours = self._ours[braid]
            if head.version - base[0] != len(ours):
                return None
            self._base[braid] = (head.version, head.seq, base[2])
            ours.clear()
            return base[2]

    def forget(self, braid: str) -> None:
        with self._lock:
            self._base.pop(braid, None)
            self._ours.pop(braid, None)


def _mine(p: dict[str, Any], tid: str, ns: str, cid: str | None = None) -> bool:
    """Whether a payload found under a key is of this thread, namespace (and checkpoint): the
    keys are digests, so this guards against a collision."""
    return p.get("thread_id") == tid and p.get("ns") == ns and (cid is None or p.get("checkpoint_id") == cid)


class Lookup:
    """The index lookups of one store (``log``)."""

    def __init__(self, log: Any) -> None:
        self.log = log
        self._first: dict[str, bool] = {}  # braid -> whether its first record has the keys

    def direct(self, tid: str, braid: str) -> bool:
        """Whether thread ``tid`` (braid ``braid``) can be read directly: no tombstone, and
        its first record written with the keys (so every later one was)."""
        ok = self._first.get(braid)
        if ok is None:
            first = next(iter(self.log.scan_braid(braid, limit=1)), None)
            if first is None:
                return not self._tombstoned(tid)  # an empty thread: not cached, it may begin
            ok = self._first[braid] = "key" in first.delta.payload
        return ok and not self._tombstoned(tid)

    def _tombstoned(self, tid: str) -> bool:
        return next(iter(self.log.scan_refs(thread_key(tid), limit=1)), None) is not None

    def forget(self, braid: str) -> None:
        self._first.pop(braid, None)

    def head(self, tid: str, ns: str) -> tuple[int, dict[str, Any]] | None:
        """(seq, payload) of the last checkpoint put in the namespace, or None."""
        for rec in self.log.scan_refs(head_key(tid, ns), reverse=True, limit=1):
            p = rec.delta.payload
            if rec.delta.kind == "langgraph.checkpoint" and _mine(p, tid, ns):
                return rec.seq, p
        return None

    def checkpoint(self, tid: str, ns: str, cid: str
                   ) -> tuple[tuple[int, dict[str, Any]] | None, list[dict[str, Any]]]:
        """The last record of checkpoint ``cid`` (seq, payload) or None, and the payloads of
        its writes in the order written."""
        found, writes = None, []
        for rec in self.log.scan_refs(checkpoint_key(tid, ns, cid)):
            p = rec.delta.payload
            if not _mine(p, tid, ns, cid):
                continue
            if rec.delta.kind == "langgraph.checkpoint":
                found = (rec.seq, p)
            elif rec.delta.kind == "langgraph.writes":
                writes.append(p)
        return found, writes

    def first_seq(self, tid: str, ns: str, cid: str) -> int | None:
        """The seq of the first record of checkpoint ``cid``, or None."""
        for rec in self.log.scan_refs(checkpoint_key(tid, ns, cid)):
            if rec.delta.kind == "langgraph.checkpoint" and _mine(rec.delta.payload, tid, ns, cid):
                return rec.seq
        return None

    def history(self, tid: str, ns: str, stop: int | None, page: int = 16) -> Iterator[tuple[int, Any]]:
        """(seq, payload) of the namespace's checkpoint records before seq ``stop`` (None: all),
        newest first, read a page at a time."""
        key = head_key(tid, ns)
        while True:
            got = list(self.log.scan_refs(key, stop=stop, reverse=True, limit=page))
            for rec in got:
                if rec.delta.kind == "langgraph.checkpoint" and _mine(rec.delta.payload, tid, ns):
                    yield rec.seq, rec.delta.payload
            if len(got) < page:
                return
            stop = got[-1].seq
