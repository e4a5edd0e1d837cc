"""``BraidlogSaver``: a LangGraph checkpointer whose storage is a braidlog log.

Each thread is a braid (``langgraph/thread/<thread_id>``). ``put`` appends one
``langgraph.checkpoint`` delta holding the checkpoint less its channel values, its metadata, and
the values of the channels that changed (``new_versions``) only, each as a byte delta against an
earlier version of the channel where that is smaller (``_values``), with the seqs of the records
holding the versions of the channels it did not change (``at``); ``put_writes`` appends one
``langgraph.writes`` delta. Every record names keys the refers-to index files it under, so the
latest checkpoint, a checkpoint by id and its writes are each an index lookup (``_heads``), and a
process opening a thread reads a handful of records, not its history. Calls made at once from
several threads (LangGraph's background writes, the async methods' worker threads) share one
durable commit: the store's writer queue groups them.

Deleting is appending: ``delete_thread``, ``prune`` and ``delete_for_runs`` append
``langgraph.deleted`` tombstones, after which the checkpoints they name are gone from every
read of every process; the records stay in the log (its chain and proofs cover them) until
they are erased.
"""

from __future__ import annotations

import builtins
import logging
import random
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    writes_sort_key,
)

from ...delta import delta as make_delta
from ...errors import BraidlogError, ConflictError, StorageError, ValidationError
from ._async import InWorkerThreads
from ._batch import Batches
from ._checks import text as _text
from ._checks import thread_id as _thread_id
from ._checks import where as _where
from ._encoding import (
    PROVENANCE,
    braid_of,
    checkpoint_key,
    declare_kinds,
    dump_any,
    head_key,
    load,
    load_any,
    open_braid,
    thread_key,
)
from ._heads import Head, Known, Lookup, head_of
from ._puts import Put, put_args
from ._ride import Rides
from ._threads import RUNS_BRAID, THREAD_PREFIX, RunDeletions, ThreadIndex, _key
from ._values import Values

__all__ = ["BraidlogSaver"]

logger = logging.getLogger(__name__)

_SLOW = object()  # a direct read cannot answer: build the thread's index
MAX_HEADS = 100_000  # namespaces whose last checkpoint a saver keeps for its next put

Where = Callable[[str, Any], "int | None"]


class BraidlogSaver(InWorkerThreads):
    """A LangGraph checkpointer on a braidlog store: ``store`` is a path (a store is created
    there when none exists) or an open ``braidlog.Braid``. Sync and async methods; any number
    of processes may use one store (LMDB: one writer at a time, readers never wait)."""

    def __init__(self, store: Any, *, serde: Any = None, erase: bool = True) -> None:
        super().__init__(serde=serde)
        if not isinstance(erase, bool):
            raise ValidationError("erase", f"must be True or False, not {type(erase).__name__}")
        self.erase = erase  # delete_thread and prune("delete") erase the records they delete
        self.braid, self._owned = open_braid(store)
        self.log = self.braid.log
        self._lock = threading.RLock()  # the thread indexes (the slow path) and run deletions
        self._threads: dict[str, ThreadIndex] = {}
        self._runs = RunDeletions()
        self._values = Values(self.log)
        self._lookup = Lookup(self.log)
        self._heads: dict[tuple[str, str], Head] = {}
        self._known = Known()  # whether a thread gained records since, but this saver's own
        self._rides = Rides()  # task writes riding in their thread's next put's commit
        self._puts: dict[str, threading.Lock] = {}  # a thread's puts, one at a time
        self._pool: ThreadPoolExecutor | None = None
        self._batches = Batches(self)  # the async methods' writes, committed in batches
        # The kinds are declared on open (as a SQL saver creates its tables), so that no write
        # of a call that fails leaves a declaration behind; a read-only store declares nothing.
        self._declared = self.log.readonly
        if not self._declared:
            self._declare()

    def _declare(self) -> None:
        try:
            declare_kinds(self.braid)
        except BaseException:
            if self._owned:
                self.braid.close()
            raise
        self._declared = True

    # -- life ------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the store if this saver opened it (from a path), once the async writes queued
        are committed."""
        self._batches.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._owned:
            self.braid.close()

    def __enter__(self) -> BraidlogSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        """Versions unique across forks of a thread (as LangGraph's own savers make them), so a
        version names one value."""
        if current is None:
            n = 0
        elif isinstance(current, int) and not isinstance(current, bool):
            n = current
        else:
            head = current.split(".")[0] if isinstance(current, str) else ""
            if not head.isascii() or not head.isdigit():
                raise ValidationError("current", f"must be a version this saver made (digits, a dot, "
                                      f"digits), an int or None, not {current!r}"[:200])
            n = int(head)
        return f"{n + 1:032}.{random.random():016}"

    # -- the index (the slow path) ------------------------------------------------------------
    def _thread(self, tid: str) -> ThreadIndex:
        return self._thread_by_braid(braid_of(THREAD_PREFIX, tid))

    def _thread_by_braid(self, braid: str) -> ThreadIndex:
        idx = self._threads.get(braid)
        if idx is None:
            idx = self._threads[braid] = ThreadIndex(braid)
        idx.catch_up(self.log)
        self._runs.catch_up(self.log)
        return idx

    def _append(self, deltas: list[Any]) -> list[int]:
        """Append durably; calls made at once from several threads share one commit (the
        store's writer queue, docs/operations.md)."""
        seqs: list[int] = self.braid.append_batch(deltas)
        for d, seq in zip(deltas, seqs, strict=True):
            self._known.appended(d.braid_id, seq)
        return seqs

    def _delta(self, braid: str, kind: str, payload: dict[str, Any]) -> Any:
        return make_delta(braid, kind, payload, provenance=PROVENANCE, confidence=1.0,
                          ts=datetime.now(UTC))

    def _put_lock(self, tid: str) -> threading.Lock:
        lock = self._puts.get(tid)
        if lock is None:
            with self._lock:
                lock = self._puts.setdefault(tid, threading.Lock())
        return lock

    def _runs_now(self) -> RunDeletions:
        with self._lock:
            self._runs.catch_up(self.log)
        return self._runs

    # -- reading -------------------------------------------------------------------------------
    def _build(self, p: dict[str, Any], where: Where, writes: list[dict[str, Any]]) -> CheckpointTuple:
        """The CheckpointTuple of checkpoint record payload ``p``: each channel version it names
        read from the record ``where(channel, version)`` gives, and its ``writes``."""
        checkpoint = load_any(self.serde, p["checkpoint"])
        values = {}
        for ch, ver in checkpoint.get("channel_versions", {}).items():
            seq = where(ch, ver)
            found = None if seq is None else self._values.bytes_at(seq, ch)
            if found is not None:
                values[ch] = load(self.serde, *found)
        checkpoint["channel_values"] = values
        tid, ns, parent = p["thread_id"], p["ns"], p.get("parent_id")
        config: Any = {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": p["checkpoint_id"]}}
        parent_config: Any = None if parent is None else {
            "configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": parent}}
        return CheckpointTuple(config, checkpoint, load_any(self.serde, p["metadata"]), parent_config,
                               self._writes(writes))

    def _direct(self, seq: int, p: dict[str, Any], writes: list[dict[str, Any]]) -> CheckpointTuple:
        values, at = p["values"], p["at"]
        return self._build(p, lambda ch, _: seq if ch in values else at.get(ch), writes)

    @staticmethod
    def _locate(idx: ThreadIndex, ns: str, seq: int, p: dict[str, Any]) -> Where:
        """Where checkpoint record ``seq`` (payload ``p``) finds the versions it names: in
        itself and the records its ``at`` names, or (written before ``at``) in the thread's
        index, by version."""
        if "at" in p:
            values, at = p["values"], p["at"]
            return lambda ch, _: seq if ch in values else at.get(ch)
        blobs = idx.blobs

        def where(ch: str, ver: Any) -> int | None:
            found = blobs.get((ns, ch, _key(ver)))
            return None if found is None else found[0]
        return where

    def _tuple(self, idx: ThreadIndex, ns: str, cp: Any) -> CheckpointTuple:
        """From the thread's index: the values of the versions its checkpoint names."""
        p = self.log.read(cp.seq).delta.payload
        return self._build(p, self._locate(idx, ns, cp.seq, p),
                           [self.log.read(s).delta.payload for s in cp.writes])

    def _writes(self, payloads: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
        """A checkpoint's pending writes: per (task, idx) the first stored, or the last for
        the special channels (errors, interrupts), as LangGraph's savers keep them; in
        ``writes_sort_key`` order."""
        kept: dict[tuple[str, int], tuple[tuple[str, str, int], tuple[str, str, Any]]] = {}
        for p in payloads:
            task, path, replace = p["task_id"], p.get("task_path", ""), p.get("replace", False)
            for i, ch, enc in p["writes"]:
                if (task, i) in kept and not replace:
                    continue
                kept[(task, i)] = (writes_sort_key(path, task, i),
                                   (task, ch, load_any(self.serde, enc)))
        return [w for _, w in sorted(kept.values(), key=lambda kv: kv[0])]

    def _get_direct(self, tid: str, ns: str, cid: str | None) -> Any:
        """get_tuple through the index lookups, or _SLOW when they cannot answer."""
        braid = braid_of(THREAD_PREFIX, tid)
        latest = cid is None
        kept = self._heads.get((tid, ns)) if latest else None
        if kept is not None and kept.gen == self._known.unchanged(braid, self.log.braid_head(braid)):
            cid = kept.latest[0]  # the namespace as this saver last put it: nothing else came since
        else:
            if not self._lookup.direct(tid, braid):
                return _SLOW
            if latest:
                head = self._lookup.head(tid, ns)
                if head is None:
                    return None
                pointer = head[1].get("latest")
                cid = head[1]["checkpoint_id"] if pointer is None else pointer[0]
        assert cid is not None
        found, writes = self._lookup.checkpoint(tid, ns, cid)
        if found is None:
            return _SLOW if latest else None
        seq, p = found
        if "at" not in p:
            return _SLOW
        if self._runs_now().hides_run(p.get("run_id"), seq):
            return _SLOW if latest else None
        return self._direct(seq, p, writes)

    # -- the interface ---------------------------------------------------------------------
    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its checkpoint_id, else the thread's latest in its
        checkpoint_ns), or None."""
        _, tid, ns, cid = _where(config)
        got = self._get_direct(tid, ns, cid)
        if got is not _SLOW:
            return got
        with self._lock:
            idx = self._thread(tid)
            found = idx.latest(self._runs, ns) if cid is None else (cid, idx.get(self._runs, ns, cid))
            if found is None or found[1] is None:
                return None
            return self._tuple(idx, ns, found[1])

    def list(self, config: Any, *, filter: Any = None, before: Any = None,
             limit: Any = None) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by checkpoint id): of ``config``'s thread (all threads when
        None), its checkpoint_ns and checkpoint_id when given, those whose metadata holds every
        key of ``filter``, before ``before``'s checkpoint, at most ``limit``."""
        tid = ns = cid = None
        if config is not None:
            if not isinstance(config, Mapping) or not isinstance(config.get("configurable", {}), Mapping):
                raise ValidationError("config", "must be a RunnableConfig or None")
            conf = config.get("configurable", {})
            if conf.get("thread_id") is not None:
                _, tid, _, cid = _where(config)
            if conf.get("checkpoint_ns") is not None:
                ns = _text(conf["checkpoint_ns"], "config.configurable.checkpoint_ns")
        if filter is not None and (not isinstance(filter, Mapping)
                                   or not all(isinstance(k, str) for k in filter)):
            raise ValidationError("filter", "must be a dict of metadata keys to values, or None")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValidationError("limit", f"must be a whole number, at least 0, or None; not {limit!r}"[:120])
        before_id = None
        if before is not None:
            before_id = _where(before, "before")[3]
        if tid is not None and ns is not None and cid is None and self._listable(tid, ns):
            return self._list_direct(tid, ns, before_id, filter, limit)
        return self._list_indexed(tid, ns, cid, before_id, filter, limit)

    def _listable(self, tid: str, ns: str) -> bool:
        """Whether the namespace's put order is its newest-first order, read directly."""
        if self._runs_now().runs or not self._lookup.direct(tid, braid_of(THREAD_PREFIX, tid)):
            return False
        head = self._lookup.head(tid, ns)
        return head is None or bool(head[1].get("mono"))

    def _list_direct(self, tid: str, ns: str, before_id: str | None, filter: Any,
                     limit: int | None) -> Iterator[CheckpointTuple]:
        stop = None if before_id is None else self._lookup.first_seq(tid, ns, before_id)
        left, seen = limit, set()
        for _, p in self._lookup.history(tid, ns, stop):
            if left is not None and left <= 0:
                return
            ccid = p["checkpoint_id"]
            if ccid in seen or (before_id is not None and ccid >= before_id):
                continue
            seen.add(ccid)
            found, writes = self._lookup.checkpoint(tid, ns, ccid)
            if found is None or "at" not in found[1]:
                continue
            tup = self._direct(found[0], found[1], writes)
            if filter and not all(k in tup.metadata and tup.metadata.get(k) == v for k, v in filter.items()):
                continue
            if left is not None:
                left -= 1
            yield tup

    def _list_indexed(self, tid: str | None, ns: str | None, cid: str | None, before_id: str | None,
                      filter: Any, limit: int | None) -> Iterator[CheckpointTuple]:
        with self._lock:
            if tid is not None:
                threads = [self._thread(tid)]
            else:
                threads = [self._thread_by_braid(b) for b in self.log.braids()
                           if b.startswith(THREAD_PREFIX)]
            found = []
            for idx in threads:
                for (cns, ccid), cp in idx.visible(self._runs, ns):
                    if (cid is None or ccid == cid) and (before_id is None or ccid < before_id):
                        found.append((ccid, cns, idx, cp))
        found.sort(key=lambda f: f[0], reverse=True)
        left = limit
        for _, cns, idx, cp in found:
            if left is not None and left <= 0:
                return
            with self._lock:
                tup = self._tuple(idx, cns, cp)
            if filter and not all(k in tup.metadata and tup.metadata.get(k) == v for k, v in filter.items()):
                continue
            if left is not None:
                left -= 1
            yield tup

    # -- writing -------------------------------------------------------------------------------
    def _head(self, tid: str, ns: str) -> Any:
        """The namespace's last checkpoint (None: there is none), as this saver last put it
        when no process has put another since, or _SLOW when it was written without ``at``."""
        found = self._lookup.head(tid, ns)
        if found is None:
            return None
        cached = self._heads.get((tid, ns))
        if cached is not None and cached.seq == found[0]:
            return cached
        head = head_of(found[0], found[1], self.serde)
        return _SLOW if head is None else head

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> RunnableConfig:
        """Append the checkpoint: its channels in ``new_versions`` stored (as byte deltas where
        smaller), the others found by version in the thread's earlier records."""
        op = put_args(self.serde, config, checkpoint, metadata, new_versions)
        self._rides.putting(op.tid, +1)
        try:
            with self._put_lock(op.tid):
                delta = self._put_delta(op)
                riders = self._rides.take(op.tid)  # the thread's writes waiting for this commit
                try:
                    seq = self._append([r.delta for r in riders] + [delta])[-1]
                except BraidlogError:
                    if not riders:
                        raise
                    Rides.settle(riders, committed=False)  # each alone: only a bad one fails
                    riders = []
                    (seq,) = self._append([delta])
                except BaseException:
                    Rides.settle(riders, committed=False)
                    raise
                Rides.settle(riders, committed=True)
                self._put_done(op, seq)
        finally:
            self._rides.putting(op.tid, -1)
        return op.returned

    def _put_delta(self, op: Put) -> Any:
        """The put's delta, its values placed against the namespace's last checkpoint; the
        caller holds the thread's put lock until it is committed and ``_put_done``."""
        tid, ns = op.tid, op.ns
        braid = braid_of(THREAD_PREFIX, tid)
        now = self.log.braid_head(braid)
        kept = self._heads.get((tid, ns))
        gen = None if kept is None else self._known.unchanged(braid, now)
        if kept is not None and gen is not None and kept.gen == gen:
            head: Any = kept  # nothing but this saver's own records since it was kept
        else:
            head = self._head(tid, ns) if self._lookup.direct(tid, braid) else _SLOW
            gen = self._known.looked_up(braid, now)
        op.gen = gen
        op.indexed = head is _SLOW or (head is not None and bool(self._runs_now().runs))
        op.head = None if op.indexed else cast(Head | None, head)
        if op.indexed:
            self._place_indexed(op.payload, tid, ns, op.versions, op.new, op.fresh)
        else:
            self._place(op.payload, op.head, op.parent, op.versions, op.new, op.fresh)
        return self._delta(braid, "langgraph.checkpoint", op.payload)

    def _put_done(self, op: Put, seq: int) -> None:
        """Keep what the put committed at ``seq`` for the next: its values, its head."""
        for ch, value in op.fresh.items():
            self._values.written(seq, ch, op.payload["values"][ch], value)
        if op.indexed:
            self._heads.pop((op.tid, op.ns), None)
        else:
            self._remember(op.tid, op.ns, seq, op.payload, op.versions, op.head, op.gen)

    def _place(self, payload: dict[str, Any], head: Head | None, parent: str | None,
               versions: dict[str, Any], new: dict[str, Any], fresh: dict[str, tuple[str, bytes]]) -> None:
        """Fill ``values``, ``at``, ``latest`` and ``mono`` from the namespace's last checkpoint
        and the parent's record, without the thread's history (unless a version is not where
        the parent says, as a hand-made checkpoint may have it)."""
        tid, ns, cid = payload["thread_id"], payload["ns"], payload["checkpoint_id"]
        pwhere: dict[str, tuple[Any, int]] = {}
        if parent is not None and head is not None:
            if head.cid == parent:
                pwhere = head.where
            else:
                found, _ = self._lookup.checkpoint(tid, ns, parent)
                ph = None if found is None else head_of(found[0], found[1], self.serde)
                pwhere = {} if ph is None else ph.where
        at: dict[str, int] = {}
        missing = []
        for ch, ver in versions.items():
            if ch in new:
                continue
            w = pwhere.get(ch)
            if w is not None and w[0] == _key(ver):
                at[ch] = w[1]
            else:
                missing.append(ch)
        if missing and head is not None:  # not where the parent has it: ask the thread's index
            with self._lock:
                idx = self._thread(tid)
                for ch in missing:
                    found_at = idx.blobs.get((ns, ch, _key(versions[ch])))
                    if found_at is not None:
                        at[ch] = found_at[0]
        last = {} if head is None else head.last
        payload["values"] = self._encode(new, fresh, last.get)
        payload["at"] = at
        if head is None:
            payload["latest"], payload["mono"] = None, True
        else:
            lcid, lseq = head.latest
            payload["latest"] = None if cid >= lcid else [lcid, lseq]
            payload["mono"] = head.mono and cid >= head.cid

    def _place_indexed(self, payload: dict[str, Any], tid: str, ns: str, versions: dict[str, Any],
                       new: dict[str, Any], fresh: dict[str, tuple[str, bytes]]) -> None:
        """``_place`` from the thread's index: for a thread with tombstones, or one whose last
        checkpoint was written without ``at``. ``mono`` is false: its lists read the index."""
        cid = payload["checkpoint_id"]
        with self._lock:
            idx = self._thread(tid)
            at = {}
            for ch, ver in versions.items():
                found = idx.blobs.get((ns, ch, _key(ver)))
                if ch not in new and found is not None:
                    at[ch] = found[0]
            last = {ch: s for (n, ch), (s, _, _) in idx.last.items() if n == ns}
            latest = idx.latest(self._runs, ns)
        payload["values"] = self._encode(new, fresh, last.get)
        payload["at"] = at
        payload["latest"] = None if latest is None or cid >= latest[0] else [latest[0], latest[1].seq]
        payload["mono"] = False

    def _encode(self, new: dict[str, Any], fresh: dict[str, tuple[str, bytes]],
                last: Callable[[str], int | None]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for ch, ver in new.items():
            if ch not in fresh:
                values[ch] = {"v": ver, "t": "empty"}
            else:
                t, data = fresh[ch]
                values[ch] = self._values.encode(ch, ver, t, data, last(ch))
        return values

    def _remember(self, tid: str, ns: str, seq: int, p: dict[str, Any], versions: dict[str, Any],
                  head: Head | None, gen: int) -> None:
        """Keep the namespace's new last checkpoint for the next put."""
        values, at = p["values"], p["at"]
        where = {ch: (_key(ver), seq if ch in values else at[ch]) for ch, ver in versions.items()
                 if ch in values or ch in at}
        last = dict(head.last) if head is not None else {}
        last.update((ch, seq) for ch, enc in values.items() if enc.get("t") != "empty")
        latest = p["latest"]
        if len(self._heads) >= MAX_HEADS:
            self._heads.clear()
        self._heads[(tid, ns)] = Head(seq, p["checkpoint_id"], (p["checkpoint_id"], seq) if latest is None
                                      else (latest[0], latest[1]), p["mono"], where, last, gen)

    def put_writes(self, config: Any, writes: Any, task_id: Any, task_path: Any = "") -> None:
        """Append a task's writes for the checkpoint ``config`` names. Writing the same
        (task, index) again keeps the first, except for the special channels (errors,
        interrupts, resumes), where the last counts."""
        got = self._writes_delta(config, writes, task_id, task_path)
        if got is not None:
            self._rides.write(got[0], got[1], self._append)

    def _writes_delta(self, config: Any, writes: Any, task_id: Any, task_path: Any) -> tuple[str, Any] | None:
        """(thread id, delta) of a put_writes, or None when there is nothing to write."""
        _, tid, ns, cid = _where(config)
        if cid is None:
            raise ValidationError("config.configurable.checkpoint_id", "is required to store writes")
        task_id = _text(task_id, "task_id")
        task_path = _text(task_path, "task_path")
        if isinstance(writes, (str, bytes, Mapping)) or not isinstance(writes, Sequence):
            raise ValidationError("writes", "must be a list of (channel, value) pairs")
        rows = []
        for i, w in enumerate(writes):
            if not isinstance(w, (tuple, list)) or len(w) != 2:
                raise ValidationError(f"writes[{i}]", "must be a (channel, value) pair")
            ch = _text(w[0], f"writes[{i}][0]")
            rows.append([WRITES_IDX_MAP.get(ch, i), ch,
                         dump_any(self.serde, w[1], f"writes[{i}][1]")])
        if not rows:
            return None
        replace = all(r[1] in WRITES_IDX_MAP for r in rows)
        braid = braid_of(THREAD_PREFIX, tid)
        idx = self._threads.get(braid)  # a retry of writes already stored keeps the first: a
        if not replace and idx is not None:  # read drops it; with the index at hand, skip it
            with self._lock:
                cp = self._thread(tid).checkpoints.get((ns, cid))
                if cp is not None and all((task_id, r[0]) in cp.write_keys for r in rows):
                    return None
        payload = {"thread_id": tid, "ns": ns, "checkpoint_id": cid, "task_id": task_id,
                   "task_path": task_path, "writes": rows, "key": checkpoint_key(tid, ns, cid)}
        if replace:
            payload["replace"] = True
        return tid, self._delta(braid, "langgraph.writes", payload)

    def delete_thread(self, thread_id: Any) -> None:
        """Hide every checkpoint and write of the thread from every read of every process (a
        tombstone in its braid), then erase its records where the store can erase and this
        saver holds it alone: their payloads dropped from every file, their envelopes and
        commitments kept (``braidlog erase``). When another process has the store open the
        records stay, hidden, until ``erase_deleted()``."""
        tid = _thread_id(thread_id, "thread_id")
        with self._lock:
            idx = self._thread(tid)
            if not any(True for _ in idx.visible(self._runs)):
                return
            (seq,) = self._append([self._delta(idx.braid, "langgraph.deleted",
                                               {"what": "thread", "thread_id": tid,
                                                "thread": thread_key(tid)})])
            self._forget(tid)
            idx.catch_up(self.log)
            if self.erase:
                self._erase_before(idx, seq, quiet=True)

    def _erase_before(self, idx: ThreadIndex, upto: int, *, quiet: bool) -> bool:
        """Erase the thread's records before seq ``upto`` that still hold a payload; whether
        they are erased now (False: the store is open elsewhere)."""
        seqs = [r.seq for r in self.log.scan_braid(idx.braid, stop=upto) if r.delta.payload]
        if not seqs:
            return True
        try:
            self.braid.erase(seqs=seqs, reason="LangGraph delete_thread")
        except StorageError as e:
            if not quiet:
                raise
            logger.warning("thread %r is deleted from every read; its %d records are not erased "
                        "yet (%s); BraidlogSaver.erase_deleted() erases them once this process "
                        "holds the store alone", idx.thread_id, len(seqs), e)
            return False
        self._threads.pop(idx.braid, None)  # what it knew pointed into the erased records
        self._values.reset()
        return True

    def _forget(self, tid: str) -> None:
        """Drop what this saver keeps of the thread's namespaces (after a tombstone)."""
        for key in [k for k in self._heads if k[0] == tid]:
            self._heads.pop(key, None)
        self._known.forget(braid_of(THREAD_PREFIX, tid))

    def erase_deleted(self) -> builtins.list[str]:  # (list: the method above)
        """Erase the records of every deleted thread (deleted by any process) that still hold a
        payload; the thread ids erased. The store must be held by this process alone
        (``StorageError`` otherwise, and nothing is erased)."""
        done = []
        with self._lock:
            for braid in [b for b in self.log.braids() if b.startswith(THREAD_PREFIX)]:
                last = next((r for r in self.log.scan_braid(braid, reverse=True)
                             if r.delta.kind == "langgraph.deleted"
                             and r.delta.payload.get("what") == "thread"), None)
                if last is None:
                    continue
                idx = self._thread_by_braid(braid)
                if any(r.delta.payload for r in self.log.scan_braid(braid, stop=last.seq)):
                    if self._erase_before(idx, last.seq, quiet=False):
                        done.append(last.delta.payload["thread_id"])
        return done

    def delete_for_runs(self, run_ids: Any) -> None:
        """Hide the checkpoints (and their writes) that these runs wrote."""
        if isinstance(run_ids, (str, bytes, Mapping)) or not isinstance(run_ids, Sequence):
            raise ValidationError("run_ids", "must be a list of run ids")
        runs = [_thread_id(r, f"run_ids[{i}]") for i, r in enumerate(run_ids)]
        if not runs:
            return
        with self._lock:
            self._append([self._delta(RUNS_BRAID, "langgraph.deleted", {"what": "runs", "run_ids": runs})])
            self._runs.catch_up(self.log)

    def prune(self, thread_ids: Any, *, strategy: Any = "keep_latest") -> None:
        """``keep_latest``: hide all but the latest checkpoint of each checkpoint_ns of each
        thread; ``delete``: hide them all. The values the kept checkpoints name stay readable."""
        if isinstance(thread_ids, (str, bytes, Mapping)) or not isinstance(thread_ids, Sequence):
            raise ValidationError("thread_ids", "must be a list of thread ids")
        if strategy not in ("keep_latest", "delete"):
            raise ValidationError("strategy", f"must be 'keep_latest' or 'delete', not {strategy!r}"[:120])
        tids = [_thread_id(t, f"thread_ids[{i}]") for i, t in enumerate(thread_ids)]
        with self._lock:
            deltas, touched = [], []
            for tid in tids:
                idx = self._thread(tid)
                visible = list(idx.visible(self._runs))
                if not visible:
                    continue
                if strategy == "delete":
                    payload: dict[str, Any] = {"what": "thread", "thread_id": tid, "thread": thread_key(tid)}
                else:
                    keep: dict[str, str] = {}
                    for (ns, cid), _ in visible:
                        if ns not in keep or cid > keep[ns]:
                            keep[ns] = cid
                    if len(keep) == len(visible):
                        continue  # nothing but the latest: nothing to prune
                    payload = {"what": "prune", "thread_id": tid, "thread": thread_key(tid),
                               "keep": [[ns, cid] for ns, cid in sorted(keep.items())]}
                deltas.append(self._delta(idx.braid, "langgraph.deleted", payload))
                touched.append(idx)
                self._forget(tid)
            if deltas:
                seqs = self._append(deltas)
                for idx, seq in zip(touched, seqs, strict=True):
                    idx.catch_up(self.log)
                    if strategy == "delete" and self.erase:
                        self._erase_before(idx, seq, quiet=True)

    def copy_thread(self, source_thread_id: Any, target_thread_id: Any) -> None:
        """Append to the target thread a copy of every visible checkpoint and write of the
        source, in the order they were put, in one atomic batch: each value stored once (as a
        byte delta where smaller), each checkpoint naming where its values are, as ``put``
        writes them."""
        src = _thread_id(source_thread_id, "source_thread_id")
        dst = _thread_id(target_thread_id, "target_thread_id")
        while True:
            with self._put_lock(dst), self._lock:
                idx = self._thread(src)
                target = self._thread(dst)
                head = self.log.head().seq
                try:
                    deltas = self._copies(idx, dst, target.braid, head)
                    if not deltas:
                        return
                    # its seqs must be the ones ``at`` names: alone, and only at this head
                    self.braid.append_batch(deltas, expected_head=head)
                except ConflictError:
                    continue  # another write came first: copy again at the new head
                finally:
                    self._values.settle()
                self._forget(dst)
                return

    def _copies(self, idx: ThreadIndex, dst: str, braid: str, head: int) -> builtins.list[Any]:
        visible = sorted(idx.visible(self._runs), key=lambda kv: kv[1].seq)
        deltas: list[Any] = []
        held: dict[tuple[str, int], int] = {}  # (channel, source seq) -> target seq holding it
        last: dict[tuple[str, str], int] = {}  # (ns, channel) -> target seq of its last version
        tops: dict[str, tuple[str, int, bool]] = {}  # ns -> (greatest id, its seq, in order)
        for (ns, cid), cp in visible:
            seq = head + len(deltas) + 1
            p = self.log.read(cp.seq).delta.payload
            where = self._locate(idx, ns, cp.seq, p)
            values: dict[str, Any] = {}
            at: dict[str, int] = {}
            for ch, ver in load_any(self.serde, p["checkpoint"]).get("channel_versions", {}).items():
                origin = where(ch, ver)
                if origin is None:
                    continue
                if (ch, origin) in held:
                    at[ch] = held[(ch, origin)]
                    continue
                found = self._values.bytes_at(origin, ch)
                if found is None:
                    values[ch] = {"v": ver, "t": "empty"}
                else:
                    values[ch] = self._values.encode(ch, ver, found[0], found[1], last.get((ns, ch)))
                    self._values.pending(seq, ch, values[ch], found)
                    last[(ns, ch)] = seq
                held[(ch, origin)] = seq
            top = tops.get(ns)
            latest = None if top is None or cid >= top[0] else [top[0], top[1]]
            mono = top is None or (top[2] and cid >= top[0])
            tops[ns] = (cid, seq, mono) if latest is None else (top[0], top[1], False)  # type: ignore[index]
            copied = {k: v for k, v in p.items() if k != "_v"}
            deltas.append(self._delta(braid, "langgraph.checkpoint", {
                **copied, "thread_id": dst, "values": values, "at": at, "latest": latest, "mono": mono,
                "key": checkpoint_key(dst, ns, cid), "head": head_key(dst, ns)}))
            for s in cp.writes:
                w = {k: v for k, v in self.log.read(s).delta.payload.items() if k != "_v"}
                deltas.append(self._delta(braid, "langgraph.writes", {
                    **w, "thread_id": dst, "key": checkpoint_key(dst, ns, cid)}))
        return deltas

    def get_delta_channel_history(self, *, config: Any, channels: Any) -> dict[str, Any]:
        """For each channel, the writes on the path from the checkpoint ``config`` names back to
        the nearest ancestor that stores a value of it (``seed``), oldest first, as
        ``BaseCheckpointSaver``'s walk gives them, reading only those channels' values."""
        if isinstance(channels, (str, bytes, Mapping)) or not isinstance(channels, Sequence):
            raise ValidationError("channels", "must be a list of channel names")
        names = [_text(c, f"channels[{i}]") for i, c in enumerate(channels)]
        if not names:
            return {}
        _, tid, ns, cid = _where(config)
        collected: dict[str, list[Any]] = {c: [] for c in names}
        seeds: dict[str, Any] = {}
        with self._lock:
            idx = self._thread(tid)
            if cid is None:
                found = idx.latest(self._runs, ns)
                target = None if found is None else found[1]
            else:
                target = idx.get(self._runs, ns, cid)
            remaining = set(names)
            cursor = None if target is None else target.parent_id
            while cursor is not None and remaining:
                cp = idx.get(self._runs, ns, cursor)
                if cp is None:
                    break
                for w in reversed(self._writes([self.log.read(s).delta.payload for s in cp.writes])):
                    if w[1] in remaining:
                        collected[w[1]].append(w)
                versions = load_any(self.serde, self.log.read(cp.seq).delta.payload["checkpoint"]).get(
                    "channel_versions", {})
                for ch in [c for c in names if c in remaining and c in versions]:
                    ver = versions[ch]
                    where = idx.blobs.get((ns, ch, _key(ver)))
                    found_value = None if where is None else self._values.bytes_at(where[0], ch)
                    if found_value is not None:
                        seeds[ch] = load(self.serde, *found_value)
                        remaining.discard(ch)
                cursor = cp.parent_id
        out: dict[str, Any] = {}
        for ch in names:
            entry: dict[str, Any] = {"writes": list(reversed(collected[ch]))}
            if ch in seeds:
                entry["seed"] = seeds[ch]
            out[ch] = entry
        return out


# Type names LangGraph's signatures use, for readers of this module.
_ = (ChannelVersions, Checkpoint, CheckpointMetadata)
