"""``BraidlogSaver``: a LangGraph checkpointer whose storage is a braidlog log.

Each thread is a braid (``langgraph/thread/<thread_id>``). ``put`` appends one
``langgraph.checkpoint`` delta holding the checkpoint less its channel values, its metadata, and
the values of the channels that changed (``new_versions``) only, each as a byte delta against
the channel's previous version where that is smaller; ``put_writes`` appends one
``langgraph.writes`` delta. A checkpoint is read back by finding, for each channel version it
names, the record that stored it. So a thread's storage grows with what its steps changed, not
with the size of its state at every step.

Deleting is appending: ``delete_thread``, ``prune`` and ``delete_for_runs`` append
``langgraph.deleted`` tombstones, after which the checkpoints they name are gone from every
read of every process; the records stay in the log (its chain and proofs cover them) until
they are erased.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import threading
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)

from ...delta import delta as make_delta
from ...errors import StorageError, ValidationError
from ._encoding import (
    PROVENANCE,
    b64,
    bdiff,
    bpatch,
    braid_of,
    declare_kinds,
    dump,
    dump_any,
    load,
    load_any,
    open_braid,
    unb64,
)
from ._threads import RUNS_BRAID, THREAD_PREFIX, RunDeletions, ThreadIndex
from ._threads import Checkpoint as Indexed

__all__ = ["BraidlogSaver"]

logger = logging.getLogger(__name__)

#: A channel value is stored as a byte delta against its previous version until the deltas
#: since it was last stored whole add up to its size, or MAX_DEPTH of them: a value that grows
#: by a little each step is stored whole about log2(steps) times plus once per MAX_DEPTH
#: versions, so its storage grows with what was added, and a cold read of it takes at most
#: MAX_DEPTH + 1 small records.
MAX_DEPTH = 256
CACHE_BYTES = 64 << 20


class _Cache:
    """Recently read or written channel values, by (seq, channel), as serialized bytes."""

    def __init__(self, budget: int) -> None:
        self.budget, self.size = budget, 0
        self.items: OrderedDict[tuple[int, str], tuple[str, bytes]] = OrderedDict()

    def get(self, key: tuple[int, str]) -> tuple[str, bytes] | None:
        hit = self.items.get(key)
        if hit is not None:
            self.items.move_to_end(key)
        return hit

    def put(self, key: tuple[int, str], value: tuple[str, bytes]) -> None:
        if key in self.items:
            return
        self.items[key] = value
        self.size += len(value[1])
        while self.size > self.budget and len(self.items) > 1:
            _, (_, old) = self.items.popitem(last=False)
            self.size -= len(old)


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(field, "must be text UTF-8 can encode (it holds a lone surrogate)") from None
    return value


def _thread_id(value: Any, field: str) -> str:
    """A thread id as LangGraph's savers take one: a string, an integer or a UUID, as text."""
    if isinstance(value, uuid.UUID) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    return _text(value, field)


def _where(config: Any, field: str = "config") -> tuple[Any, str, str, str | None]:
    """(thread id as given, as text, checkpoint_ns, checkpoint_id or None) of a RunnableConfig."""
    if not isinstance(config, Mapping):
        raise ValidationError(field, f"must be a RunnableConfig (a dict with 'configurable'), "
                              f"not {type(config).__name__}")
    conf = config.get("configurable")
    if not isinstance(conf, Mapping):
        raise ValidationError(f"{field}.configurable", "must be a dict holding thread_id")
    given = conf.get("thread_id")
    if given is None:
        raise ValidationError(f"{field}.configurable.thread_id", "is required")
    tid = _thread_id(given, f"{field}.configurable.thread_id")
    ns = conf.get("checkpoint_ns")
    ns = "" if ns is None else _text(ns, f"{field}.configurable.checkpoint_ns")
    cid = conf.get("checkpoint_id")
    cid = None if cid is None else _text(cid, f"{field}.configurable.checkpoint_id")
    return given, tid, ns, cid


def _version(value: Any, field: str) -> Any:
    if type(value) is str:
        return _text(value, field)
    if type(value) is int and -2**63 <= value < 2**64:
        return value
    if type(value) is float and math.isfinite(value):
        return value
    raise ValidationError(field, f"must be a channel version (a string, an integer or a finite "
                          f"float), not {value!r}"[:200])


def _versions(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(field, f"must be a dict of channel versions, not {type(value).__name__}")
    return {_text(k, f"{field} key"): _version(v, f"{field}.{k}") for k, v in value.items()}


class BraidlogSaver(BaseCheckpointSaver[str]):
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
        self._lock = threading.RLock()
        self._threads: dict[str, ThreadIndex] = {}
        self._runs = RunDeletions()
        self._cache = _Cache(CACHE_BYTES)
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
        """Close the store if this saver opened it (from a path)."""
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
        elif isinstance(current, int):
            n = current
        else:
            n = int(str(current).split(".")[0])
        return f"{n + 1:032}.{random.random():016}"

    # -- the index -------------------------------------------------------------------------
    def _thread(self, tid: str) -> ThreadIndex:
        braid = braid_of(THREAD_PREFIX, tid)
        idx = self._threads.get(braid)
        if idx is None:
            idx = self._threads[braid] = ThreadIndex(braid)
        idx.catch_up(self.log)
        self._runs.catch_up(self.log)
        return idx

    def _append(self, deltas: list[Any]) -> list[int]:
        return self.braid.append_batch(deltas)

    def _delta(self, braid: str, kind: str, payload: dict[str, Any]) -> Any:
        return make_delta(braid, kind, payload, provenance=PROVENANCE, confidence=1.0,
                          ts=datetime.now(UTC))

    # -- values ----------------------------------------------------------------------------
    def _bytes_at(self, seq: int, ch: str) -> tuple[str, bytes] | None:
        """The serialized value of channel ``ch`` stored by record ``seq`` (None: empty),
        resolving its chain of byte deltas."""
        hit = self._cache.get((seq, ch))
        if hit is not None:
            return hit
        chain: list[tuple[int, dict[str, Any]]] = []
        at = seq
        while True:
            enc = self.log.read(at).delta.payload.get("values", {}).get(ch)
            if enc is None:  # erased under a later version's delta: the value is gone
                return None
            if enc.get("t") == "empty":
                return None
            if "b" in enc:
                value = (enc["t"], unb64(enc["b"]))
                self._cache.put((at, ch), value)
                break
            chain.append((at, enc))
            at = enc["base"]
            hit = self._cache.get((at, ch))
            if hit is not None:
                value = hit
                break
        for s, enc in reversed(chain):
            value = (enc["t"], bpatch(value[1], enc["ops"]))
            self._cache.put((s, ch), value)
        return value

    def _tuple(self, idx: ThreadIndex, ns: str, cid: str, cp: Indexed) -> CheckpointTuple:
        p = self.log.read(cp.seq).delta.payload
        checkpoint = load_any(self.serde, p["checkpoint"])
        values = {}
        for ch, ver in checkpoint.get("channel_versions", {}).items():
            where = idx.blobs.get((ns, ch, tuple(ver) if isinstance(ver, list) else ver))
            if where is None:
                continue
            found = self._bytes_at(where[0], ch)
            if found is not None:
                values[ch] = load(self.serde, *found)
        checkpoint["channel_values"] = values
        tid = idx.thread_id
        config = {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
        parent = None
        if cp.parent_id is not None:
            parent = {"configurable": {"thread_id": tid, "checkpoint_ns": ns,
                                       "checkpoint_id": cp.parent_id}}
        return CheckpointTuple(config, checkpoint, load_any(self.serde, p["metadata"]), parent,
                               self._writes(cp))

    def _writes(self, cp: Indexed) -> list[tuple[str, str, Any]]:
        """The checkpoint's pending writes: per (task, idx) the first stored, or the last for
        the special channels (errors, interrupts), as LangGraph's savers keep them; in
        ``writes_sort_key`` order."""
        kept: dict[tuple[str, int], tuple[tuple[str, str, int], tuple[str, str, Any]]] = {}
        for seq in cp.writes:
            p = self.log.read(seq).delta.payload
            task, path, replace = p["task_id"], p.get("task_path", ""), p.get("replace", False)
            for i, ch, enc in p["writes"]:
                if (task, i) in kept and not replace:
                    continue
                kept[(task, i)] = (writes_sort_key(path, task, i),
                                   (task, ch, load_any(self.serde, enc)))
        return [w for _, w in sorted(kept.values(), key=lambda kv: kv[0])]

    # -- the interface ---------------------------------------------------------------------
    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its checkpoint_id, else the thread's latest in its
        checkpoint_ns), or None."""
        _, tid, ns, cid = _where(config)
        with self._lock:
            idx = self._thread(tid)
            if cid is None:
                found = idx.latest(self._runs, ns)
                if found is None:
                    return None
                cid, cp = found
            else:
                cp = idx.get(self._runs, ns, cid)
                if cp is None:
                    return None
            return self._tuple(idx, ns, cid, cp)

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
        for ccid, cns, idx, cp in found:
            if left is not None and left <= 0:
                return
            with self._lock:
                tup = self._tuple(idx, cns, ccid, cp)
            if filter and not all(k in tup.metadata and tup.metadata[k] == v for k, v in filter.items()):
                continue
            if left is not None:
                left -= 1
            yield tup

    def _thread_by_braid(self, braid: str) -> ThreadIndex:
        idx = self._threads.get(braid)
        if idx is None:
            idx = self._threads[braid] = ThreadIndex(braid)
        idx.catch_up(self.log)
        self._runs.catch_up(self.log)
        return idx

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> dict[str, Any]:
        """Append the checkpoint: its channels in ``new_versions`` stored (as byte deltas where
        smaller), the others found by version in the thread's earlier records."""
        given, tid, ns, parent = _where(config)
        if not isinstance(checkpoint, Mapping):
            raise ValidationError("checkpoint", f"must be a Checkpoint (a dict), not {type(checkpoint).__name__}")
        cid = _text(checkpoint.get("id"), "checkpoint.id")
        channel_values = checkpoint.get("channel_values", {})
        if not isinstance(channel_values, Mapping):
            raise ValidationError("checkpoint.channel_values", "must be a dict of channel values")
        _versions(checkpoint.get("channel_versions", {}), "checkpoint.channel_versions")
        seen = checkpoint.get("versions_seen", {})
        if not isinstance(seen, Mapping):
            raise ValidationError("checkpoint.versions_seen", "must be a dict of dicts of versions")
        for node, vs in seen.items():
            _versions(vs, f"checkpoint.versions_seen.{node}")
        if not isinstance(metadata, Mapping):
            raise ValidationError("metadata", f"must be a dict, not {type(metadata).__name__}")
        new = _versions(new_versions, "new_versions")
        try:
            md = get_serializable_checkpoint_metadata(config, dict(metadata))
        except (AttributeError, TypeError) as e:
            raise ValidationError("metadata", f"cannot be read as checkpoint metadata ({e})") from None
        rest = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        with self._lock:
            idx = self._thread(tid)
            values: dict[str, Any] = {}
            fresh: dict[str, tuple[str, bytes]] = {}
            for ch, ver in new.items():
                if ch not in channel_values:
                    values[ch] = {"v": ver, "t": "empty"}
                    continue
                t, data = dump(self.serde, channel_values[ch], f"checkpoint.channel_values.{ch}")
                enc: dict[str, Any] = {"v": ver, "t": t}
                ops, base = None, idx.last.get((ns, ch))
                if base is not None and base[1] < MAX_DEPTH and base[2] < len(data):
                    old = self._bytes_at(base[0], ch)
                    if old is not None:
                        ops = bdiff(old[1], data)
                if ops is not None:
                    cost = base[2] + sum(len(op) if isinstance(op, str) else 8 for op in ops)
                    enc.update(base=base[0], d=base[1] + 1, c=cost, ops=ops)
                else:
                    enc["b"] = b64(data)
                values[ch] = enc
                fresh[ch] = (t, data)
            run = md.get("run_id")
            payload = {"thread_id": tid, "ns": ns, "checkpoint_id": cid, "parent_id": parent,
                       "run_id": None if run is None else str(run),
                       "checkpoint": dump_any(self.serde, rest, "checkpoint"),
                       "metadata": dump_any(self.serde, md, "metadata"), "values": values}
            (seq,) = self._append([self._delta(idx.braid, "langgraph.checkpoint", payload)])
            for ch, value in fresh.items():
                self._cache.put((seq, ch), value)
            idx.catch_up(self.log)
        return {"configurable": {"thread_id": given, "checkpoint_ns": ns, "checkpoint_id": cid}}

    def put_writes(self, config: Any, writes: Any, task_id: Any, task_path: Any = "") -> None:
        """Append a task's writes for the checkpoint ``config`` names. Writing the same
        (task, index) again keeps the first, except for the special channels (errors,
        interrupts, resumes), where the last counts."""
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
            return
        replace = all(r[1] in WRITES_IDX_MAP for r in rows)
        with self._lock:
            idx = self._thread(tid)
            cp = idx.checkpoints.get((ns, cid))
            if not replace and cp is not None and all((task_id, r[0]) in cp.write_keys for r in rows):
                return  # a retry of writes already stored: the first ones count
            payload = {"thread_id": tid, "ns": ns, "checkpoint_id": cid, "task_id": task_id,
                       "task_path": task_path, "writes": rows}
            if replace:
                payload["replace"] = True
            self._append([self._delta(idx.braid, "langgraph.writes", payload)])
            idx.catch_up(self.log)

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
                                               {"what": "thread", "thread_id": tid})])
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
        self._cache = _Cache(CACHE_BYTES)
        return True

    def erase_deleted(self) -> list[str]:
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
                    payload: dict[str, Any] = {"what": "thread", "thread_id": tid}
                else:
                    keep = {}
                    for (ns, cid), _ in visible:
                        if ns not in keep or cid > keep[ns]:
                            keep[ns] = cid
                    if len(keep) == len(visible):
                        continue  # nothing but the latest: nothing to prune
                    payload = {"what": "prune", "thread_id": tid,
                               "keep": [[ns, cid] for ns, cid in sorted(keep.items())]}
                deltas.append(self._delta(idx.braid, "langgraph.deleted", payload))
                touched.append(idx)
            if deltas:
                seqs = self._append(deltas)
                for idx, seq in zip(touched, seqs, strict=True):
                    idx.catch_up(self.log)
                    if strategy == "delete" and self.erase:
                        self._erase_before(idx, seq, quiet=True)

    def copy_thread(self, source_thread_id: Any, target_thread_id: Any) -> None:
        """Append to the target thread a copy of every visible checkpoint and write of the
        source, in the order they were put, in one atomic batch."""
        src = _thread_id(source_thread_id, "source_thread_id")
        dst = _thread_id(target_thread_id, "target_thread_id")
        with self._lock:
            idx = self._thread(src)
            target = self._thread(dst)
            visible = sorted(idx.visible(self._runs), key=lambda kv: kv[1].seq)
            deltas, stored = [], set()
            for (ns, _), cp in visible:
                p = self.log.read(cp.seq).delta.payload
                checkpoint = load_any(self.serde, p["checkpoint"])
                values = {}
                for ch, ver in checkpoint.get("channel_versions", {}).items():
                    key = (ns, ch, tuple(ver) if isinstance(ver, list) else ver)
                    where = idx.blobs.get(key)
                    if where is None or key in stored:
                        continue
                    found = self._bytes_at(where[0], ch)
                    values[ch] = ({"v": ver, "t": "empty"} if found is None
                                  else {"v": ver, "t": found[0], "b": b64(found[1])})
                    stored.add(key)
                deltas.append(self._delta(target.braid, "langgraph.checkpoint", {
                    **p, "thread_id": dst, "values": values}))
                for seq in cp.writes:
                    w = self.log.read(seq).delta.payload
                    deltas.append(self._delta(target.braid, "langgraph.writes", {**w, "thread_id": dst}))
            if deltas:
                self._append(deltas)
                target.catch_up(self.log)

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
                for w in reversed(self._writes(cp)):
                    if w[1] in remaining:
                        collected[w[1]].append(w)
                versions = load_any(self.serde, self.log.read(cp.seq).delta.payload["checkpoint"]).get(
                    "channel_versions", {})
                for ch in [c for c in names if c in remaining and c in versions]:
                    ver = versions[ch]
                    where = idx.blobs.get((ns, ch, tuple(ver) if isinstance(ver, list) else ver))
                    found_value = None if where is None else self._bytes_at(where[0], ch)
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

    # -- async: the same, off the event loop -----------------------------------------------
    async def aget_tuple(self, config: Any) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(self, config: Any, *, filter: Any = None, before: Any = None,
                    limit: Any = None) -> AsyncIterator[CheckpointTuple]:
        items = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for item in items:
            yield item

    async def aget_delta_channel_history(self, *, config: Any, channels: Any) -> dict[str, Any]:
        return await asyncio.to_thread(lambda: self.get_delta_channel_history(config=config, channels=channels))

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> dict[str, Any]:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: Any, writes: Any, task_id: Any, task_path: Any = "") -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: Any) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Any) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def aprune(self, thread_ids: Any, *, strategy: Any = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    async def acopy_thread(self, source_thread_id: Any, target_thread_id: Any) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)


# Type names LangGraph's signatures use, for readers of this module.
_ = (ChannelVersions, Checkpoint, CheckpointMetadata)
