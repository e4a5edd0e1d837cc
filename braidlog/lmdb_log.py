"""``LmdbLog``: the log in an LMDB environment. The only module that imports ``lmdb``.

Hazards, handled here so callers never meet them (docs/operations.md has the long form):

- Every transaction is a ``with`` block and short: scans copy a chunk of records out of a read
  transaction, close it, then yield, so no buffer outlives its transaction and a paused iterator
  pins no old pages (long-lived readers make the file grow).
- One writer at a time: LMDB's write lock serialises writer threads and processes; a second
  writer waits for the first to commit. Every write re-reads the head inside its transaction.
- The map grows by itself: a write that meets MDB_MAP_FULL is aborted, the map doubled, and the
  write run again; a process that sees another one's growth (MDB_MAP_RESIZED) adopts it.
  ``set_mapsize`` is only called with no transaction of this process open.
- An environment must not be used across ``fork``: a store used in a child raises StorageError;
  open the store again in the child.
"""

from __future__ import annotations

import os
import threading
import weakref
from itertools import islice
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import lmdb
import msgspec

from .chain import GENESIS, HASH_SIZE
from .chain import link
from .delta import _decoder
from .errors import BraidlogError, DecodeError, IntegrityError, StorageError, StoreFullError
from .kind_schema import store_kinds
from .kinds import REGISTRY, Registry
from .store import (
    BraidHead, Head, IndexScans, Progress, Record, Staged, check_batch, id_key, stage, ts_micros,
    verify_bodies,
)

__all__ = ["LmdbLog", "FORMAT_VERSION"]

FORMAT_VERSION = 1
DEFAULT_MAP_SIZE = 1 << 30
MAX_MAP_SIZE = 1 << 40
CHUNK = 1024
_U64 = 8
_DBS = ("meta", "log", "ids", "braid", "kind", "refs", "ckpt", "spaces")
_DUPS = {"braid", "kind", "refs"}  # DUPSORT, not DUPFIXED: LMDB 0.9's compacting copy crashes on that

T = TypeVar("T")

_decode = _decoder.decode  # the strict decoder; records are decoded only as callers pull them

_open_stores: weakref.WeakSet[LmdbLog] = weakref.WeakSet()


def _forked() -> None:
    for store in list(_open_stores):
        store._forked = True
    _shared.clear()  # the child opens its own environments; the parent's are not touched


os.register_at_fork(after_in_child=_forked)


def u64(n: int) -> bytes:
    return n.to_bytes(_U64, "big")


def from_u64(b: bytes | memoryview) -> int:
    return int.from_bytes(b, "big")


class _Gate:
    """Lets ``set_mapsize`` wait until no transaction of this process is open."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._active = 0
        self._exclusive = False
        self._local = threading.local()

    @contextmanager
    def shared(self) -> Iterator[None]:
        depth = getattr(self._local, "depth", 0)
        with self._cv:
            while self._exclusive and not depth:  # a thread already inside never waits: no deadlock
                self._cv.wait()
            self._active += 1
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth
            with self._cv:
                self._active -= 1
                if not self._active:
                    self._cv.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cv:
            while self._exclusive:
                self._cv.wait()
            self._exclusive = True
            while self._active:
                self._cv.wait()
        try:
            yield
        finally:
            with self._cv:
                self._exclusive = False
                self._cv.notify_all()


_shared: dict[str, _Shared] = {}
_shared_lock = threading.Lock()


class _Shared:
    """One LMDB environment per path per process (LMDB forbids opening one twice), shared by
    every LmdbLog of that path and closed with the last of them."""

    def __init__(self, path: Path, *, readonly: bool, create: bool, durable: bool,
                 map_size: int) -> None:
        self.readonly = readonly
        self.durable = durable
        self.users = 0
        self.gate = _Gate()
        try:
            self.env = lmdb.open(
                str(path), map_size=map_size, max_dbs=len(_DBS) + 4, subdir=True,
                readonly=readonly, create=create and not readonly, sync=True,
                metasync=durable, lock=True, readahead=False, max_readers=512,
            )
        except lmdb.Error as e:
            raise StorageError(f"cannot open store at {path}: {e}",
                               hint="check the path and its permissions") from e
        try:
            self.db = self._open_dbs(path)
        except BaseException:
            self.env.close()
            raise

    def _open_dbs(self, path: Path) -> dict[str, Any]:
        env = self.env
        with env.begin() as txn:
            names = {bytes(k) for k, _ in txn.cursor()}
        if not names and self.readonly:
            raise StorageError(f"{path} is an empty store", hint="run `braidlog init` first")
        if names and b"meta" not in names:
            raise StorageError(f"{path} is an LMDB environment but not a braidlog store",
                               hint="open it with lmdb directly, or give another path")
        if names:  # an existing store: its format is checked before anything is opened or written
            with env.begin() as txn:
                raw = txn.get(b"format", db=env.open_db(b"meta", txn=txn, create=False))
            version = int(raw) if raw is not None and raw.isdigit() else 0
            if version > FORMAT_VERSION:
                raise StorageError(
                    f"{path} has format version {version}; this braidlog reads up to {FORMAT_VERSION}",
                    hint="upgrade braidlog to open it")
            if version < 1:
                raise StorageError(f"{path} has no braidlog format version", hint="not a braidlog store")
        else:
            version = FORMAT_VERSION
        db: dict[str, Any] = {}
        if self.readonly:
            for name in _DBS:
                db[name] = env.open_db(name.encode(), create=False, dupsort=name in _DUPS)
        else:
            with env.begin(write=True) as txn:
                for name in _DBS:
                    db[name] = env.open_db(name.encode(), txn=txn, dupsort=name in _DUPS)
                if not names:
                    txn.put(b"format", str(FORMAT_VERSION).encode(), db=db["meta"])
                    txn.put(b"engine", b"braidlog", db=db["meta"])
        self.format_version = version
        return db


class LmdbLog(IndexScans):
    """The log in an LMDB environment at ``path`` (a directory).

    ``durable=True`` (the default) syncs data and meta pages on every commit: a committed append
    survives an OS crash. ``durable=False`` skips the meta-page sync (LMDB's NOMETASYNC): an OS
    crash may undo the last commits but never corrupts the store; a process crash loses nothing.
    """

    def __init__(self, path: str | os.PathLike[str], *, durable: bool = True, create: bool = True,
                 readonly: bool = False, map_size: int = DEFAULT_MAP_SIZE,
                 registry: Registry = REGISTRY, check_head: bool = True) -> None:
        self.path = Path(path)
        self.registry = store_kinds(registry, self)
        self.durable = durable
        self.readonly = readonly
        self._forked = False
        self._check_path(create and not readonly)
        key = os.path.realpath(self.path)
        with _shared_lock:
            shared = _shared.get(key)
            if shared is None:
                shared = _Shared(self.path, readonly=readonly, create=create, durable=durable,
                                 map_size=map_size)
                _shared[key] = shared
            elif shared.readonly and not readonly:
                raise StorageError(f"{self.path} is already open read-only in this process",
                                   hint="close the read-only store first, or open this one read-only")

            shared.users += 1
        self._key = key
        self._shared_env = shared
        self._env, self._db, self._gate = shared.env, shared.db, shared.gate
        self.format_version = shared.format_version
        _open_stores.add(self)
        if check_head:
            try:
                self.check_head()
            except BaseException:
                self.close()
                raise

    def check_head(self) -> Head:
        """The O(1) check made on open: the head record chains from the one before it."""
        def fn(txn):
            cur = txn.cursor(self._db["log"])
            if not cur.last():
                return Head(0, GENESIS)
            seq, value = from_u64(cur.key()), bytes(cur.value())
            prev = bytes(cur.value())[:HASH_SIZE] if cur.prev() else GENESIS
            if seq > 1 and from_u64(cur.key()) != seq - 1:
                raise IntegrityError(f"seq {seq - 1} is missing below the head {seq}", seq=seq - 1)
            expected = link(prev, seq, value[HASH_SIZE:])
            if expected != value[:HASH_SIZE]:
                raise IntegrityError(
                    f"the head record (seq {seq}) does not chain: expected hash {expected.hex()}, "
                    f"found {value[:HASH_SIZE].hex()}; run `braidlog verify` to find the first bad seq",
                    seq=seq, expected=expected, found=value[:HASH_SIZE])
            return Head(seq, value[:HASH_SIZE])
        return self._read(fn)

    # -- opening -----------------------------------------------------------------------------
    def _check_path(self, create: bool) -> None:
        p = self.path
        if create and not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists() and not p.is_dir():
            raise StorageError(f"{p} is a file, not a braidlog store",
                               hint="a store is a directory; give another path")
        if p.is_dir() and not (p / "data.mdb").exists() and any(p.iterdir()):
            raise StorageError(f"{p} is not a braidlog store (no data.mdb)",
                               hint="give an empty or new directory to create one")
        if not p.exists() and not create:
            raise StorageError(f"no store at {p}", hint="run `braidlog init` or pass create=True")

    # -- transactions --------------------------------------------------------------------------
    def _alive(self) -> None:
        if self._shared_env is None:
            raise StorageError(f"the store at {self.path} is closed", hint="open it again")
        if self._forked:
            raise StorageError("this store was opened before fork()",
                               hint="open the store again in the child process")

    def _read(self, fn: Callable[[Any], T], *, buffers: bool = True) -> T:
        self._alive()
        while True:
            try:
                with self._gate.shared(), self._env.begin(buffers=buffers) as txn:
                    return fn(txn)
            except lmdb.MapResizedError:
                self._adopt_map()
            except lmdb.Error as e:
                raise StorageError(f"read failed: {e}", hint="see docs/operations.md") from e

    def _write(self, fn: Callable[[Any], T]) -> T:
        self._alive()
        if self.readonly:
            raise StorageError("this store is open read-only", hint="open it without readonly=True")
        while True:
            try:
                with self._gate.shared(), self._env.begin(write=True) as txn:
                    result = fn(txn)
                if self.durable and not self._shared_env.durable:
                    # the environment was opened non-durable by another LmdbLog of this process:
                    # make this log's commits durable anyway
                    self._env.sync(True)
                return result
            except lmdb.MapFullError:
                self._grow()
            except lmdb.MapResizedError:
                self._adopt_map()
            except BraidlogError:
                raise
            except lmdb.Error as e:
                raise StorageError(f"write failed: {e}", hint="see docs/operations.md") from e

    def _grow(self) -> None:
        with self._gate.exclusive():
            size = self._env.info()["map_size"]
            if size >= MAX_MAP_SIZE:
                raise StoreFullError(f"the store reached {size} bytes",
                                     hint="move it to a larger disk or shard braids over stores")
            try:
                self._env.set_mapsize(min(size * 2, MAX_MAP_SIZE))
            except lmdb.Error as e:
                raise StoreFullError(f"cannot grow the store map: {e}",
                                     hint="free disk space or address space") from e

    def _adopt_map(self) -> None:
        with self._gate.exclusive():
            self._env.set_mapsize(0)

    # -- writing -----------------------------------------------------------------------------
    def append(self, delta, *, expected_version: int | None = None) -> int:
        """Append one delta; return its seq."""
        return self._append([delta], expected_version, None)[1][0]

    def append_batch(self, deltas, *, expected_version: int | Mapping[str, int] | None = None,
                     expected_head: int | None = None) -> list[int]:
        """Append deltas atomically in one transaction; return their seqs in order."""
        return self._append(deltas, expected_version, expected_head)[1]

    def commit(self, deltas, *, expected_version: int | Mapping[str, int] | None = None,
               expected_head: int | None = None) -> list[Record]:
        """Append deltas atomically; return the records written (none for a pure retry)."""
        return [Record(s.seq, s.hash, s.delta)
                for s in self._append(deltas, expected_version, expected_head)[0]]

    def commit_locked(self, prepare: Callable[[Head], Iterable[Any]], *,
                      expected_version: int | Mapping[str, int] | None = None) -> list[Record]:
        """Hold the writer lock, call ``prepare(head)``, append what it returns in the same
        transaction. No other writer can append in between, so nothing decided in ``prepare``
        can be stale. ``prepare`` may read the store but must not write to it."""
        def fn(txn):
            head = self._head_in(txn)[0]
            checked = check_batch(prepare(head), self.registry)
            staged, _ = self._append_in(txn, checked, expected_version, head.seq)
            return [Record(s.seq, s.hash, s.delta) for s in staged]
        return self._write(fn)

    def _append(self, deltas: Iterable[Any], expected_version, expected_head
                ) -> tuple[list[Staged], list[int]]:
        checked = check_batch(deltas, self.registry)  # before the writer lock is taken
        return self._write(lambda txn: self._append_in(txn, checked, expected_version, expected_head))

    def _append_in(self, txn, checked, expected_version, expected_head):
        db = self._db
        head, hw = self._head_in(txn)
        ids, braids, spaces = db["ids"], db["braid"], db["spaces"]
        cur = txn.cursor(braids)

        def lookup(delta_ids: list[str]) -> dict[str, tuple[int, bytes]]:
            rows = txn.cursor(ids).getmulti([i.encode() for i in delta_ids])
            return {bytes(k).decode(): (from_u64(v), bytes(txn.get(v, db=db["log"]))[HASH_SIZE:])
                    for k, v in rows}

        def braid_version(braid_id: str) -> int:
            return cur.count() if cur.set_key(braid_id.encode()) else 0

        def dims(space: str) -> int | None:
            raw = txn.get(space.encode(), db=spaces)
            return None if raw is None else from_u64(raw)

        staged, seqs = stage(checked, head=head, hw=hw, lookup=lookup,
                             braid_version=braid_version, expected_version=expected_version,
                             expected_head=expected_head, dims=dims)
        if staged:
            self._put(txn, staged)
        return staged, seqs

    def _put(self, txn, staged: list[Staged]) -> None:
        db = self._db
        keys = [s.seq.to_bytes(_U64, "big") for s in staged]
        cur = txn.cursor(db["log"])
        consumed, added = cur.putmulti([(k, s.hash + s.body) for k, s in zip(keys, staged)],
                                       append=True, overwrite=False)
        if added != len(staged):
            raise StorageError("log append was refused: a seq already exists",
                               hint="the store is damaged; run `braidlog verify`")
        deltas = [s.delta for s in staged]
        txn.cursor(db["ids"]).putmulti([(d.id.encode(), k) for d, k in zip(deltas, keys)],
                                       overwrite=False)
        txn.cursor(db["braid"]).putmulti([(d.braid_id.encode(), k) for d, k in zip(deltas, keys)],
                                         dupdata=True)
        txn.cursor(db["kind"]).putmulti([(d.kind.encode(), k) for d, k in zip(deltas, keys)],
                                        dupdata=True)
        ref_rows = [(ref.encode(), k) for s, k in zip(staged, keys) for ref in s.refs]
        if ref_rows:
            txn.cursor(db["refs"]).putmulti(ref_rows, dupdata=True)
        spaces = {d.vector.space.encode(): u64(d.vector.dim) for d in deltas if d.vector is not None}
        for space, dim in spaces.items():  # one dimension per space: stage checked it
            txn.put(space, dim, db=db["spaces"], overwrite=False)

    def _head_in(self, txn) -> tuple[Head, int]:
        cur = txn.cursor(self._db["log"])
        if not cur.last():
            return Head(0, GENESIS), 0
        value = cur.value()
        return (Head(from_u64(cur.key()), bytes(value[:HASH_SIZE])),
                from_u64(value[HASH_SIZE:HASH_SIZE + _U64]))

    # -- reading -----------------------------------------------------------------------------
    def read(self, seq: int) -> Record:
        """The record at ``seq``; IndexError when there is none."""
        rec = self._read(lambda txn: self._record_in(txn, seq))
        if rec is None:
            raise IndexError(f"no delta at seq {seq}; the log holds 1..{self.head().seq}")
        return rec

    def _record_in(self, txn, seq: int) -> Record | None:
        value = txn.get(u64(seq), db=self._db["log"]) if 1 <= seq < 2**63 else None
        if value is None:
            return None
        try:
            return Record(seq, bytes(value[:HASH_SIZE]), _decode(value[HASH_SIZE + _U64:]))
        except msgspec.MsgspecError as e:
            raise DecodeError(f"the record at seq {seq} is not a delta ({e})") from None

    def get(self, delta_id: str) -> Record | None:
        def fn(txn):
            seq = txn.get(id_key(delta_id).encode(), db=self._db["ids"])
            return None if seq is None else self._record_in(txn, from_u64(seq))
        return self._read(fn)

    def seq_of(self, delta_id: str) -> int | None:
        raw = self._read(lambda txn: _copy(txn.get(id_key(delta_id).encode(), db=self._db["ids"])))
        return None if raw is None else from_u64(raw)

    def body(self, seq: int) -> bytes:
        """The stored bytes of record ``seq`` (``hw || canonical delta``), as chained."""
        if not 1 <= seq < 2**63:
            raise IndexError(f"no delta at seq {seq}")
        value = self._read(lambda txn: _copy(txn.get(u64(seq), db=self._db["log"])))
        if value is None:
            raise IndexError(f"no delta at seq {seq}")
        return value[HASH_SIZE:]

    def scan(self, start: int = 1, stop: int | None = None, *, reverse: bool = False,
             limit: int | None = None) -> Iterator[Record]:
        """Records with seq in [start, stop), forward or reverse, at most ``limit``."""
        for key, value in self._raw_rows(start, stop, reverse, limit):
            try:
                yield Record(from_u64(key), value[:HASH_SIZE], _decode(value[HASH_SIZE + _U64:]))
            except msgspec.MsgspecError as e:
                raise DecodeError(f"the record at seq {from_u64(key)} is not a delta ({e})",
                                  ) from None

    def scan_bodies(self, start: int = 1, stop: int | None = None
                    ) -> Iterator[tuple[int, bytes, bytes]]:
        """(seq, hash, body) for seqs in [start, stop), for verification and export."""
        for key, value in self._raw_rows(start, stop, False, None):
            yield from_u64(key), value[:HASH_SIZE], value[HASH_SIZE:]

    def _raw_rows(self, start: int, stop: int | None, reverse: bool, limit: int | None
                  ) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) copies of log rows, read a chunk per short transaction and decoded
        only as the caller pulls them (no buffer outlives its transaction)."""
        def chunk(txn, lo, hi, n):
            cur = txn.cursor(self._db["log"])
            if reverse:
                if not cur.set_range(u64(hi)):
                    if not cur.last():
                        return []
                elif not cur.prev():
                    return []
                rows = list(islice(cur.iterprev(), n))
                lo_key = u64(lo)
                return [r for r in rows if r[0] >= lo_key]
            if not cur.set_range(u64(lo)):
                return []
            hi_key = u64(hi) if hi < 2**63 else None
            rows = list(islice(cur.iternext(), n))
            return rows if hi_key is None else [r for r in rows if r[0] < hi_key]
        return self._chunks(chunk, start, stop, reverse, limit, key=lambda row: from_u64(row[0]),
                            buffers=False)

    def _scan_index(self, index: str, key: str, start: int, stop: int | None, reverse: bool,
                    limit: int | None) -> Iterator[Record]:
        k = key.encode()

        def chunk(txn, lo, hi, n):
            cur = txn.cursor(self._db[index])
            out = []
            if reverse:
                if cur.set_range_dup(k, u64(hi)):
                    ok = cur.prev_dup()
                else:
                    ok = cur.set_key(k) and cur.last_dup()
                while ok and len(out) < n:
                    seq = from_u64(cur.value())
                    if seq < lo:
                        break
                    out.append(seq)
                    ok = cur.prev_dup()
            else:
                ok = cur.set_range_dup(k, u64(lo))
                while ok and len(out) < n:
                    seq = from_u64(cur.value())
                    if seq >= hi:
                        break
                    out.append(seq)
                    ok = cur.next_dup()
            return [self._record_in(txn, seq) for seq in out]
        return self._chunks(chunk, start, stop, reverse, limit)

    def _chunks(self, chunk, start, stop, reverse, limit, key=lambda r: r.seq, buffers=True):
        lo, hi = max(start, 1), stop if stop is not None else 2**63
        left = limit if limit is not None else 2**63
        while left > 0 and lo < hi:
            rows = self._read(lambda txn: chunk(txn, lo, hi, min(CHUNK, left)), buffers=buffers)
            if not rows:
                return
            yield from rows
            left -= len(rows)
            if reverse:
                hi = key(rows[-1])
            else:
                lo = key(rows[-1]) + 1

    def head(self) -> Head:
        return self._read(lambda txn: self._head_in(txn)[0])

    def hash_at(self, seq: int) -> bytes:
        """The chain hash after record ``seq`` (GENESIS for 0)."""
        if seq == 0:
            return GENESIS
        if not 1 <= seq < 2**63:
            raise IndexError(f"no delta at seq {seq}")
        value = self._read(lambda txn: _copy(txn.get(u64(seq), db=self._db["log"])))
        if value is None:
            raise IndexError(f"no delta at seq {seq}")
        return value[:HASH_SIZE]

    def braid_head(self, braid_id: str) -> BraidHead:
        """A braid's version and last seq, from its index: the count and the last of its seqs."""
        def fn(txn):
            cur = txn.cursor(self._db["braid"])
            if not cur.set_key(braid_id.encode()):
                return BraidHead(0, 0)
            count = cur.count()
            cur.last_dup()
            return BraidHead(count, from_u64(cur.value()))
        return self._read(fn)

    def braids(self) -> dict[str, BraidHead]:
        def fn(txn):
            cur = txn.cursor(self._db["braid"])
            out = {}
            ok = cur.first()
            while ok:
                key, count = bytes(cur.key()).decode(), cur.count()
                cur.last_dup()
                out[key] = BraidHead(count, from_u64(cur.value()))
                ok = cur.next_nodup()
            return out
        return self._read(fn)

    def spaces(self) -> dict[str, int]:
        """The vector spaces that hold at least one vector, with their dimension."""
        def fn(txn):
            return {bytes(k).decode(): from_u64(v) for k, v in txn.cursor(self._db["spaces"])}
        return self._read(fn)

    def seq_at(self, ts: datetime) -> int:
        """The last seq such that every delta up to it has ``ts`` at or before the given time."""
        t = ts_micros(ts)

        def fn(txn):
            log = self._db["log"]
            lo, hi = 0, self._head_in(txn)[0].seq  # invariant: hw(lo) <= t < hw(hi + 1)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                value = txn.get(u64(mid), db=log)
                if from_u64(value[HASH_SIZE:HASH_SIZE + _U64]) <= t:
                    lo = mid
                else:
                    hi = mid - 1
            return lo
        return self._read(fn)

    def verify(self, start: int = 1, stop: int | None = None, *,
               progress: Progress | None = None) -> Head:
        """Recompute the chain over [start, stop); the head of the range, or IntegrityError."""
        return verify_bodies(self, start, stop, progress)

    def counts(self, index: str) -> dict[str, int]:
        """Number of deltas per key of an index ("braid" or "kind")."""
        def fn(txn):
            cur = txn.cursor(self._db[index])
            out = {}
            if cur.first():
                while True:
                    out[bytes(cur.key()).decode()] = cur.count()
                    if not cur.next_nodup():
                        break
            return out
        return self._read(fn)

    # -- checkpoints ---------------------------------------------------------------------------
    @staticmethod
    def _ckpt_key(name: str, version: int, seq: int) -> bytes:
        return name.encode() + b"\0" + version.to_bytes(4, "big") + u64(seq)

    def put_checkpoint(self, name: str, version: int, seq: int, blob: bytes) -> None:
        self._write(lambda txn: txn.put(self._ckpt_key(name, version, seq), blob, db=self._db["ckpt"]))

    def checkpoint_seqs(self, name: str, version: int) -> list[int]:
        prefix = self._ckpt_key(name, version, 0)[:-_U64]
        return [s for n, v, s in self._checkpoint_keys(prefix)]

    def get_checkpoint(self, name: str, version: int, seq: int) -> bytes | None:
        key = self._ckpt_key(name, version, seq)
        return self._read(lambda txn: _copy(txn.get(key, db=self._db["ckpt"])))

    def checkpoint_keys(self) -> list[tuple[str, int, int]]:
        return self._checkpoint_keys(b"")

    def _checkpoint_keys(self, prefix: bytes) -> list[tuple[str, int, int]]:
        def fn(txn):
            cur = txn.cursor(self._db["ckpt"])
            out = []
            if cur.set_range(prefix):
                for key in cur.iternext(values=False):
                    key = bytes(key)
                    if not key.startswith(prefix):
                        break
                    name, _, rest = key.partition(b"\0")
                    out.append((name.decode(), int.from_bytes(rest[:4], "big"), from_u64(rest[4:])))
            return out
        return self._read(fn)

    # -- the projections a store is used with -------------------------------------------------
    def projections_used(self) -> list[str]:
        """The names of the projections this store has been opened with, first use first."""
        raw = self._read(lambda txn: _copy(txn.get(b"projections", db=self._db["meta"])))
        return [] if raw is None else raw.decode().split("\0")

    def use_projections(self, names: Iterable[str]) -> None:
        """Record that the store is used with ``names`` (kept with the others, in order)."""
        new = [n for n in dict.fromkeys(names) if n not in self.projections_used()]
        if new:
            def fn(txn):
                raw = txn.get(b"projections", db=self._db["meta"])
                have = [] if raw is None else bytes(raw).decode().split("\0")
                names = have + [n for n in new if n not in have]
                txn.put(b"projections", "\0".join(names).encode(), db=self._db["meta"])
            self._write(fn)

    # -- operating -----------------------------------------------------------------------------
    def stat(self) -> dict[str, int]:
        """Map size, file size and page facts of the environment."""
        self._alive()
        info, stat = self._env.info(), self._env.stat()
        return {"map_size": info["map_size"], "last_pgno": info["last_pgno"],
                "page_size": stat["psize"],
                "file_size": (self.path / "data.mdb").stat().st_size}

    def copy(self, dest: str | os.PathLike[str], *, compact: bool = True) -> None:
        """An online, consistent copy of the store into the empty directory ``dest``."""
        self._alive()
        Path(dest).mkdir(parents=True, exist_ok=True)
        try:
            # Without a read transaction of ours, LMDB takes the writer mutex for the copy while
            # holding the GIL, which deadlocks against a write in another thread of this
            # process. A compacting copy reads from an explicit transaction; a plain one (py-lmdb
            # allows no transaction there) keeps this process's other threads out meanwhile.
            if compact:
                with self._gate.shared(), self._env.begin() as txn:
                    self._env.copy(str(dest), compact=True, txn=txn)
            else:
                with self._gate.exclusive():
                    self._env.copy(str(dest), compact=False)
        except lmdb.Error as e:
            raise StorageError(f"copy to {dest} failed: {e}", hint="dest must be an empty directory") from e

    def sync(self) -> None:
        """Flush everything to disk now (useful with durable=False)."""
        self._alive()
        self._env.sync(True)

    def close(self) -> None:
        """Release the store; the environment closes with the last LmdbLog of its path."""
        shared = getattr(self, "_shared_env", None)
        if shared is None:
            return
        self._shared_env = None
        _open_stores.discard(self)
        with _shared_lock:
            shared.users -= 1
            if shared.users == 0:
                if _shared.get(self._key) is shared:
                    del _shared[self._key]
                if not self._forked:
                    shared.env.close()

    def __enter__(self) -> LmdbLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LmdbLog({str(self.path)!r})"


def _copy(value: Any) -> bytes | None:
    return None if value is None else bytes(value)
