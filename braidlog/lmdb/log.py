"""``LmdbLog``: the log in an LMDB environment (env.py opens it and runs its transactions).

Hazards, handled here and in env.py so callers never meet them (docs/operations.md has the
long form):

- Every transaction is short: scans copy a chunk of records out of a read transaction, close it,
  then yield, so no buffer outlives its transaction and a paused iterator pins no old pages
  (long-lived readers make the file grow).
- One writer at a time: LMDB's write lock serialises writer threads and processes; a second
  writer waits for the first to commit. Every write re-reads the head inside its transaction.
- The map grows by itself, and a process adopts another one's growth (env.py).
- An LmdbLog must not be used across ``fork``: one used in a child raises StorageError; open the
  store again in the child (which works: see env.py).
- Nothing read through an index is trusted: the record an index entry lands on must hold that
  key, and the id index is kept twice (by id and by a digest of the id) so that a damaged entry
  can never let an idempotent retry write a delta a second time.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from .. import tree as merkle
from ..chain import GENESIS, HASH_SIZE, digest, link
from ..delta import GenericDelta, _decoder, referenced_ids
from ..erasure import envelope_refs, erased_bytes
from ..errors import BraidlogError, DecodeError, IntegrityError, NoSuchSeq, StorageError, ValidationError
from ..kind_schema import store_kinds
from ..kinds import REGISTRY, Registry
from ..replay import collector_paused
from ..store import (
    Admit,
    FullStore,
    Head,
    IndexScans,
    OnDisk,
    Progress,
    Record,
    Row,
    Staged,
    check_batch,
    id_key,
    stage,
    ts_micros,
)
from ..store.arguments import checked_reads, durability
from . import env as lmdb_env
from .access import LogAccess
from .env import store_path as _store_path
from .erase import LmdbErasure, clean_leftover
from .file import edge_findings
from .format import (
    FORMAT_VERSION,
    MAX_KEY,
    TABLES,
    U64,
    Before,
    Peaks,
    before,
    before_hashes,
    bytes_of,
    copied,
    decode_keys,
    delta_of,
    from_u64,
    id_digest,
    log_rows,
    open_tables,
    pack_row,
    put_keys,
    records,
    row_data,
    row_entry,
    split_row,
    sweep,
    tree_node,
    tree_nodes,
    u64,
)
from .format import create as create_store
from .tail import EVERY, IndexReads, Tail, TailKey, flush
from .wal import Entry

__all__ = ["LmdbLog", "FORMAT_VERSION"]

DEFAULT_MAP_SIZE = 1 << 30
MAX_MAP_SIZE = lmdb_env.MAX_MAP_SIZE
CHUNK = 1024
#: A batch of at least this many deltas is appended with Python's cyclic garbage collector
#: paused, as a fold is (replay.collector_paused): its passes over the objects a batch makes
#: cost about 7% of a batched append's CPU time, and appending makes no cyclic garbage.
MANY = 64
_ALONE = nullcontext()

T = TypeVar("T")

_decode = _decoder.decode  # the strict decoder; records are decoded only as callers pull them

_REPAIR = ("The index is damaged, the log may be intact: run `braidlog verify`, then "
           "`braidlog repair --indexes` to rebuild the indexes from the log")
_FIELD = {"id": "id", "braid": "braid_id", "kind": "kind", "refers-to": "reference"}
_INDEX = {"ids": "id", "braid": "braid", "kind": "kind", "refs": "refers-to"}


_open_stores: weakref.WeakSet[LmdbLog] = weakref.WeakSet()


def _forked() -> None:
    for store in list(_open_stores):
        store._forked = True


os.register_at_fork(after_in_child=_forked)


@checked_reads
class LmdbLog(IndexReads, IndexScans, LmdbErasure, FullStore, OnDisk):
    """The log in an LMDB environment at ``path`` (a directory).

    ``durable=True`` (the default) syncs data and meta pages on every commit: a committed append
    survives an OS crash. ``durable=False`` skips the meta-page sync (LMDB's NOMETASYNC): an OS
    crash may undo the last commits but never corrupts the store; a process crash loses nothing.
    ``durable="wal"`` syncs once a commit: LMDB commits unsynced and the commit's records are
    synced to a write-ahead file beside it, which a checkpoint empties and an open after a
    crash appends again (wal.py; one writing process a store). Erasure needs ``durable=True``.
    """

    def __init__(self, path: str | os.PathLike[str], *, durable: bool | str = True, create: bool = True,
                 readonly: bool = False, map_size: int = DEFAULT_MAP_SIZE,
                 registry: Registry = REGISTRY, check_head: bool = True) -> None:
        self.path = _store_path(path)
        if isinstance(map_size, bool) or not isinstance(map_size, int) or not 0 < map_size <= MAX_MAP_SIZE:
            got = map_size if isinstance(map_size, int) else type(map_size).__name__
            raise ValidationError("map_size", f"must be a number of bytes from 1 to {MAX_MAP_SIZE} "
                                  f"(the store grows it as it fills), not {got}")
        durability(durable)
        self.registry = store_kinds(registry, self, self.last_commit)
        self.durable = durable
        self.readonly = readonly
        self._forked = False
        self._peaks = Peaks()  # the tree's peaks after this log's last append (format.tree_nodes)
        self._tail = Tail()  # the keys of the records past the indexed-to mark (tail.py)
        self._check_path(create and not readonly)
        if create and not readonly:
            if not (self.path / "data.mdb").exists():
                create_store(self.path, map_size)
            else:  # a crash after the store was linked into place left its build beside it
                sweep(self.path.parent, self.path.name)
        shared = lmdb_env.acquire(self.path, readonly=readonly, create=create, durable=durable,
                                  map_size=map_size, tables=TABLES, init=open_tables)
        self._shared_env: lmdb_env.Env | None = shared  # None once closed
        self._env, self._db = shared.env, shared.db  # the lmdb handles, for tests and tools
        self._logged = shared.logged  # (a write in flight may end after a close began)
        if not readonly:
            clean_leftover(self.path)
        self.format_version = shared.format_version
        _open_stores.add(self)
        try:
            shared.recover(self._replay)
        except BaseException:
            self.close()
            raise
        if check_head:
            try:
                self.check_head()
            except BaseException:
                self.close()
                raise

    def check_head(self) -> Head:
        """The O(1) check made on open: the pages on the way to the last two records lie within
        the file (read with pread first: a damaged one would crash the reader), and the head
        record chains from the one before it."""
        with self._alive().pinned():
            found = edge_findings(self.path / "data.mdb", b"log")
        if found:
            raise IntegrityError(
                f"{self.path / 'data.mdb'}: a page on the way to the log's head is damaged: "
                f"{found}; the head was not read. Run `braidlog verify`, which reads the file "
                "safely, to find what is intact")

        def fn(txn: Any) -> Any:
            cur = txn.cursor(self._db["log"])
            if not cur.last():
                return Head(0, GENESIS)
            seq, value = from_u64(cur.key()), bytes(cur.value())
            prev = bytes(cur.value())[:HASH_SIZE] if cur.prev() else GENESIS
            if seq > 1 and from_u64(cur.key()) != seq - 1:
                raise IntegrityError(f"seq {seq - 1} is missing below the head {seq}", seq=seq - 1)
            expected = link(prev, seq, split_row(seq, value).entry)
            if expected != value[:HASH_SIZE]:
                raise IntegrityError(
                    f"the head record (seq {seq}) does not chain: expected hash {expected.hex()}, "
                    f"found {value[:HASH_SIZE].hex()}; run `braidlog verify` to find the first bad seq",
                    seq=seq, expected=expected, found=value[:HASH_SIZE])
            return Head(seq, value[:HASH_SIZE])
        return self._read(fn)

    def _replay(self, entries: list[Entry]) -> None:
        """Append again the write-ahead file's records past the head (env.py's recovery): the
        same deltas with the same salts, so the same records, chain and tree."""
        head = self._read(self._head_in)[0].seq
        for first, items in entries:
            rest = items[max(0, head + 1 - first):]
            if not rest:
                continue
            if first + len(items) - len(rest) != head + 1:
                raise IntegrityError(f"the write-ahead file's records start at seq {first}, past "
                                     f"the log's head {head} + 1; restore from a backup",
                                     seq=head + 1)
            deltas = [_decoder.decode(data) for _, data in rest]
            salts = {d.id: salt for d, (salt, _) in zip(deltas, rest, strict=True)}
            self._append(deltas, None, head, salts=salts)
            head += len(rest)

    # -- opening -----------------------------------------------------------------------------
    def _check_path(self, create: bool) -> None:
        p = self.path
        if p.exists() and not p.is_dir():
            raise StorageError(f"{p} is a file, not a braidlog store",
                               hint="a store is a directory; give another path")
        if p.is_dir() and not (p / "data.mdb").exists() and any(p.iterdir()):
            raise StorageError(f"{p} is not a braidlog store (no data.mdb)",
                               hint="give an empty or new directory to create one")
        if not create and not (p / "data.mdb").exists():
            raise StorageError(f"no store at {p}", hint="run `braidlog init` or pass create=True")

    # -- transactions --------------------------------------------------------------------------
    def _alive(self) -> lmdb_env.Env:
        """The store's environment; StorageError once the store is closed or in a forked child."""
        if self._shared_env is None:
            raise StorageError(f"the store at {self.path} is closed", hint="open it again")
        if self._forked:
            raise StorageError("this store was opened before fork()",
                               hint="open the store again in the child process")
        return self._shared_env

    def _read(self, fn: Callable[[Any], T], *, buffers: bool = True) -> T:
        return self._alive().read(fn, buffers=buffers)

    def _write(self, fn: Callable[[Any], T], weight: int = 1) -> T:
        env = self._alive()
        if self.readonly:
            raise StorageError("this store is open read-only", hint="open it without readonly=True")
        result = env.write(fn, weight)
        if self.durable and not env.durable:
            # the environment was opened non-durable by another LmdbLog of this process: make
            # this log's commits durable anyway
            env.sync()
        return result

    # -- writing -----------------------------------------------------------------------------
    def append(self, delta: GenericDelta, *, expected_version: int | None = None) -> int:
        """Append one delta; return its seq."""
        return self._append([delta], expected_version, None)[1][0]

    def append_batch(self, deltas: Iterable[GenericDelta], *, expected_version: int | Mapping[str, int] | None = None,
                     expected_head: int | None = None, admit: Admit | None = None,
                     salts: Mapping[str, bytes] | None = None) -> list[int]:
        """Append deltas atomically in one transaction; return their seqs in order. ``salts``
        (delta id -> 16 bytes) reproduces records written elsewhere (import, replicas)."""
        return self._append(deltas, expected_version, expected_head, admit, salts)[1]

    def commit(self, deltas: Iterable[GenericDelta], *, expected_version: int | Mapping[str, int] | None = None,
               expected_head: int | None = None, admit: Admit | None = None,
               salts: Mapping[str, bytes] | None = None) -> list[Record]:
        """Append deltas atomically; return the records written (none for a pure retry)."""
        return [Record(s.seq, s.hash, s.delta)
                for s in self._append(deltas, expected_version, expected_head, admit, salts)[0]]

    def commit_locked(self, prepare: Callable[[Head], Iterable[Any]], *,
                      expected_version: int | Mapping[str, int] | None = None,
                      admit: Admit | None = None) -> list[Record]:
        """Hold the writer lock, call ``prepare(head)``, append what it returns in the same
        transaction. No other writer can append in between, so nothing decided in ``prepare``
        can be stale. ``prepare`` may read the store but must not write to it."""
        def fn(txn: Any) -> Any:
            at = self._head_in(txn)
            checked = check_batch(prepare(at[0]), self.registry)
            staged, _ = self._append_in(txn, checked, expected_version, at[0].seq, admit, at=at)
            return [Record(s.seq, s.hash, s.delta) for s in staged]
        return self._write(fn)

    def _append(self, deltas: Iterable[Any], expected_version: Any, expected_head: int | None,
                admit: Admit | None = None, salts: Any = None) -> tuple[list[Staged], list[int]]:
        with collector_paused() if isinstance(deltas, Sized) and len(deltas) >= MANY else _ALONE:
            checked = check_batch(deltas, self.registry,  # before the writer lock is taken
                                  erasure=salts is not None)
            return self._write(lambda txn: self._append_in(
                txn, checked, expected_version, expected_head, admit, salts), len(checked))

    def _append_in(self, txn: Any, checked: Any, expected_version: Any, expected_head: int | None,
                   admit: Admit | None = None, salts: Any = None, at: tuple[Head, int] | None = None) -> Any:
        db = self._db
        head, hw = at or self._head_in(txn)
        spaces = db["spaces"]

        digests: dict[str, bytes] = {}  # each id's digest, made once for the lookup and the puts

        def lookup(delta_ids: list[str]) -> dict[str, tuple[int, bytes]]:
            return self._stored(txn, delta_ids, digests)

        def braid_version(braid_id: str) -> int:  # the index's and the tail's, batches before too
            return self._braid_head_in(txn, braid_id).version

        def dims(space: str) -> int | None:
            raw = txn.get(space.encode(), db=spaces)
            return None if raw is None else from_u64(raw)

        staged, seqs = stage(checked, head=head, hw=hw, lookup=lookup,
                             braid_version=braid_version, expected_version=expected_version,
                             expected_head=expected_head, dims=dims, salts=salts)
        if staged:
            if admit is not None:  # the projections' checks (Braid), inside this transaction
                admit(head, staged)
            self._put(txn, staged, digests)
        else:
            self._logged(head.seq + 1, [])
        return staged, seqs

    def _stored(self, txn: Any, delta_ids: list[str], digests: dict[str, bytes] | None = None
                ) -> dict[str, tuple[int, bytes]]:
        """(seq, stored body) of each of ``delta_ids`` already in the log. Both id indexes must
        agree and the record they name must hold the id: a damaged entry raises IntegrityError
        rather than let an idempotent retry write a delta a second time."""
        db = self._db
        by_id = {bytes(k).decode(): bytes(v) for k, v in txn.cursor(db["ids"]).getmulti(
            [i.encode() for i in delta_ids])}
        if "idh" not in db:  # a read-only store of an older format (it never appends)
            by_digest = by_id
        else:
            made = {i: id_digest(i) for i in delta_ids}
            if digests is not None:
                digests.update(made)
            named = {h: i for i, h in made.items()}
            by_digest = {named[bytes(k)]: bytes(v)
                         for k, v in txn.cursor(db["idh"]).getmulti(list(named))}
            # an id past the indexed-to mark has no id-digest entry yet: the log's tail, a tree
            # apart from the id index, is its second witness
            tail = {t.id: t.seq for t in self._tail_in(txn)}
            for delta_id in delta_ids:
                if delta_id not in by_digest and delta_id in tail:
                    by_digest[delta_id] = u64(tail[delta_id])
        found = {}
        for delta_id in delta_ids:
            seq, seq2 = by_id.get(delta_id), by_digest.get(delta_id)
            if seq is None and seq2 is None:
                continue
            if seq is None or seq != seq2:  # (seq None: seq2 is not)
                at = ["no entry" if s is None else f"seq {from_u64(s)}" for s in (seq, seq2)]
                raise IntegrityError(
                    f"the id indexes disagree on delta {delta_id}: the id index has "
                    f"{at[0]}, the id-digest index {at[1]}; nothing was written. "
                    f"{_REPAIR}", seq=from_u64(next(s for s in (seq, seq2) if s is not None)))
            value = self._landed(txn, "id", delta_id, from_u64(seq))
            found[delta_id] = (from_u64(seq), bytes(value[HASH_SIZE:HASH_SIZE + U64])
                               + bytes(row_data(value)))
        return found

    def _landed(self, txn: Any, index: str, key: str, seq: int) -> Any:
        """The stored value of record ``seq``, which the ``index`` entry for ``key`` points at;
        IntegrityError unless that record holds the key."""
        value = txn.get(u64(seq), db=self._db["log"]) if 1 <= seq < 2**63 else None
        if value is None:
            raise IntegrityError(f"the {index} index maps {key!r} to seq {seq}, which the log "
                                 f"does not hold. {_REPAIR}", seq=seq)
        if index == "refers-to":
            held = self._refers(self._decoded(seq, value).delta, key)
        else:
            try:
                keys = decode_keys(row_entry(value))
            except msgspec.MsgspecError:
                raise DecodeError(f"the record at seq {seq} is not a delta") from None
            held = getattr(keys, _FIELD[index]) == key
        if not held:
            raise IntegrityError(f"the {index} index maps {key!r} to seq {seq}, whose delta "
                                 f"does not have that {_FIELD[index].replace('_', ' ')}. "
                                 f"{_REPAIR}", seq=seq)
        return value

    def _refers(self, d: GenericDelta, key: str) -> bool:
        """Whether ``d`` refers to ``key``, as the refers-to index was written. For a kind whose
        payload subjects this process cannot name (``Registry.knows_subjects``: its projection
        is not loaded here) only the envelope can be checked, and a payload subject (such as a
        field's ``topic/field``) is taken as written."""
        if d.erased is not None:  # its payload's subjects left the index with it
            return key in envelope_refs(d)
        if not self.registry.knows_subjects(d.kind):
            return True
        try:
            return key in referenced_ids(d, self.registry)
        except (msgspec.MsgspecError, BraidlogError):
            return True  # an old payload whose upcast fails now: it cannot be judged here

    def _put(self, txn: Any, staged: list[Staged], digests: dict[str, bytes] | None = None) -> None:
        """Write the staged records' rows, their id entries and their payload subjects'
        refers-to entries; the rest of their entries wait in the tail until a commit brings it
        to ``EVERY`` records (tail.py), which writes them all and moves the mark."""
        db = self._db
        mark, before = self._mark(txn), self._tail_in(txn)
        keys, deltas = self._put_rows(txn, staged), [s.delta for s in staged]
        self._logged(staged[0].seq, None if any(s.erased_by for s in staged) else
                     [(s.salt, s.body[U64:]) for s in staged])
        put_keys(txn.cursor(db["ids"]), [(d.id.encode(), k) for d, k in zip(deltas, keys, strict=False)])
        added = tuple(TailKey(s.seq, s.delta.id, s.delta.braid_id, s.delta.kind,
                              envelope_refs(s.delta) if s.refs else frozenset()) for s in staged)
        ref_rows = [(ref.encode(), k) for s, t, k in zip(staged, added, keys, strict=False)
                    for ref in s.refs - t.refs]
        if ref_rows:
            txn.cursor(db["refs"]).putmulti(ref_rows, dupdata=True)
        spaces = {d.vector.space.encode(): u64(d.vector.dim) for d in deltas if d.vector is not None}
        for space, dim in spaces.items():  # one dimension per space: stage checked it
            txn.put(space, dim, db=db["spaces"], overwrite=False)
        if staged[-1].seq - mark >= EVERY:
            flush(txn, db, before + added, staged[-1].seq)
            self._tail.grown(staged[-1].seq, staged[-1].hash, ())
        else:
            self._tail.grown(staged[-1].seq, staged[-1].hash, before + added)

    def _put_rows(self, txn: Any, staged: list[Staged]) -> list[bytes]:
        """Write the staged records' rows (with the tree nodes each completes); return their keys."""
        keys = [s.seq.to_bytes(U64, "big") for s in staged]
        added = txn.cursor(self._db["log"]).putmulti([(k, pack_row(
            s.hash, int.from_bytes(s.body[:U64], "big"), s.entry, nodes, u64(s.erased_by) if s.erased_by else s.salt,
            s.body[U64:])) for k, s, nodes in zip(keys, staged, self._tree_nodes(txn, staged), strict=False)],
            append=True, overwrite=False)[1]
        if added != len(staged):
            raise StorageError("log append was refused: a seq already exists",
                               hint="the store is damaged; run `braidlog verify`")
        return keys

    def _tree_nodes(self, txn: Any, staged: list[Staged]) -> list[bytes]:
        """The Merkle tree nodes each staged record's leaf (its committed form) completes, kept
        in its row."""
        return tree_nodes(txn, self._db, staged[0].seq - 1, [s.entry for s in staged],
                          self._peaks, staged[-1].hash)

    def _head_in(self, txn: Any) -> tuple[Head, int]:
        cur = txn.cursor(self._db["log"])
        if not cur.last():
            return Head(0, GENESIS), 0
        value = cur.value()
        return (Head(from_u64(cur.key()), bytes(value[:HASH_SIZE])),
                from_u64(value[HASH_SIZE:HASH_SIZE + U64]))

    # -- reading -----------------------------------------------------------------------------
    def read(self, seq: int) -> Record:
        """The record at ``seq``; IndexError when there is none, IntegrityError when the log
        holds ``seq`` (it is at or below the head) but a read cannot find it."""
        def fn(txn: Any) -> Any:
            rec = self._record_in(txn, seq)
            if rec is None:
                head = self._head_in(txn)[0].seq
                if 1 <= seq <= head:
                    raise IntegrityError(
                        f"seq {seq} is within the log (1..{head}) but a read of it finds nothing: "
                        "the store is damaged; run `braidlog verify`", seq=seq)
                raise NoSuchSeq(f"no delta at seq {seq}; the log holds 1..{head}")
            return rec
        return self._read(fn)

    def _record_in(self, txn: Any, seq: int) -> Record | None:
        value = txn.get(u64(seq), db=self._db["log"]) if 1 <= seq < 2**63 else None
        return None if value is None else self._decoded(seq, value)

    @staticmethod
    def _decoded(seq: int, value: Any) -> Record:
        return Record(seq, bytes(value[:HASH_SIZE]), delta_of(seq, value))

    def get(self, delta_id: str) -> Record | None:
        def fn(txn: Any) -> Any:
            seq = self._seq_of_in(txn, delta_id)
            return None if seq is None else self._record_in(txn, seq)
        return self._read(fn)

    def seq_of(self, delta_id: str) -> int | None:
        return self._read(lambda txn: self._seq_of_in(txn, delta_id))

    def _seq_of_in(self, txn: Any, delta_id: str) -> int | None:
        """The seq of a delta id, through the id index, checked against the record it names;
        an id the id index lacks is looked up in the id-digest index too."""
        key = id_key(delta_id)
        raw = key.encode()
        if not 0 < len(raw) <= MAX_KEY:
            return None  # no stored id is empty or longer than an LMDB key
        seq = txn.get(raw, db=self._db["ids"])
        if seq is None:
            idh = self._db.get("idh")  # not in a read-only store of an older format
            other = None if idh is None else txn.get(id_digest(key), db=idh)
            if other is None:  # past the indexed-to mark, the log's tail is the second witness
                other = next((u64(t.seq) for t in self._tail_in(txn) if t.id == key), None)
            if other is not None:
                raise IntegrityError(
                    f"the id index has no entry for {key!r}, but the id-digest index maps it to "
                    f"seq {from_u64(other)}. {_REPAIR}", seq=from_u64(other))
            return None
        self._landed(txn, "id", key, from_u64(seq))
        return from_u64(seq)

    def body(self, seq: int) -> bytes:
        """The body of record ``seq``: ``hw`` (u64 big-endian) and its canonical delta bytes
        (of an erased record: those of what reads give, braidlog.erasure.erased_delta)."""
        row = self._row(seq)
        if row.erased_by:
            return row.hw.to_bytes(U64, "big") + erased_bytes(row.entry, row.erased_by)
        return row.body

    def entry(self, seq: int) -> bytes:
        """The committed form of record ``seq``: what the chain links and the tree's leaf."""
        return self._row(seq).entry

    def _row(self, seq: int) -> Row:
        value = self._read(lambda txn: copied(txn.get(u64(seq), db=self._db["log"]))) if 1 <= seq < 2**63 else None
        if value is None:
            raise NoSuchSeq(f"no delta at seq {seq}")
        return split_row(seq, value)

    def scan_rows(self, start: int = 1, stop: int | None = None) -> Iterator[Row]:
        """The records with seq in [start, stop) as stored (Row: hash, hw, committed form,
        salt, delta bytes), for verification, export and replication."""
        for seqs, values in self._rows(start, stop, False, None):
            for seq, value in zip(seqs, values, strict=False):
                yield split_row(seq, value)

    def scan(self, start: int = 1, stop: int | None = None, *, reverse: bool = False,
             limit: int | None = None) -> Iterator[Record]:
        """Records with seq in [start, stop), forward or reverse, at most ``limit``."""
        return records(self._rows(start, stop, reverse, limit))

    def scan_bodies(self, start: int = 1, stop: int | None = None
                    ) -> Iterator[tuple[int, bytes, bytes]]:
        """(seq, hash, body) for seqs in [start, stop): body is hw || delta bytes."""
        for seqs, values in self._rows(start, stop, False, None):
            for seq, value in zip(seqs, values, strict=False):
                yield seq, value[:HASH_SIZE], value[HASH_SIZE:HASH_SIZE + U64] + bytes_of(value)

    def _rows(self, start: int, stop: int | None, reverse: bool, limit: int | None
              ) -> Iterator[tuple[Sequence[int], list[bytes]]]:
        """Log rows copied out a chunk per short transaction (``format.log_rows``), read only
        as the caller pulls them (no buffer outlives its transaction): (seqs, rows) each."""
        log = self._db["log"]
        return self._chunk_lists(lambda txn, lo, hi, n: log_rows(txn, log, lo, hi, n, reverse),
                                 start, stop, reverse, limit, buffers=False)

    def _chunk_lists(self, chunk: Callable[..., Any], start: int, stop: int | None, reverse: bool,
                     limit: int | None, buffers: bool = True) -> Iterator[tuple[Sequence[int], Any]]:
        """``chunk(txn, lo, hi, n)``'s (seqs, items) for [start, stop), one short read
        transaction each, until ``limit`` items or none is left."""
        lo, hi = max(start, 1), stop if stop is not None else 2**63
        left = limit if limit is not None else 2**63
        while left > 0 and lo < hi:
            def one(txn: Any, lo: int = lo, hi: int = hi, n: int = min(CHUNK, left)) -> Any:
                return chunk(txn, lo, hi, n)
            seqs, got = self._read(one, buffers=buffers)
            if not seqs:
                return
            yield seqs, got
            left -= len(seqs)
            if reverse:
                hi = seqs[-1]
            else:
                lo = seqs[-1] + 1

    def head(self) -> Head:
        return self._read(lambda txn: self._head_in(txn)[0])

    def hash_at(self, seq: int) -> bytes:
        """The chain hash after record ``seq`` (GENESIS for 0)."""
        if seq == 0:
            return GENESIS
        value = self._read(lambda txn: copied(txn.get(u64(seq), db=self._db["log"]))) if 1 <= seq < 2**63 else None
        if value is None:
            raise NoSuchSeq(f"no delta at seq {seq}")
        return value[:HASH_SIZE]

    def spaces(self) -> dict[str, int]:
        """The vector spaces that hold at least one vector, with their dimension."""
        def fn(txn: Any) -> Any:
            return {bytes(k).decode(): from_u64(v) for k, v in txn.cursor(self._db["spaces"])}
        return self._read(fn)

    def seq_at(self, ts: datetime) -> int:
        """The last seq such that every delta up to it has ``ts`` at or before the given time."""
        t = ts_micros(ts)

        def fn(txn: Any) -> Any:
            log = self._db["log"]
            lo, hi = 0, self._head_in(txn)[0].seq  # invariant: hw(lo) <= t < hw(hi + 1)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                value = txn.get(u64(mid), db=log)
                if from_u64(value[HASH_SIZE:HASH_SIZE + U64]) <= t:
                    lo = mid
                else:
                    hi = mid - 1
            return lo
        return self._read(fn)

    def verify(self, start: int = 1, stop: int | None = None, *,
               progress: Progress | None = None) -> Head:
        """Recompute the chain over [start, stop), reading each record through the B-tree as
        reads do; over the whole log (the default) also check every index against the log both
        ways, both meta pages and the file's B-tree (check.py). The head of the range, or
        IntegrityError naming the first damage and the remedy."""
        from .check import verify
        return verify(self._access(), start, stop, progress)

    def repair_indexes(self, progress: Progress | None = None) -> dict[str, int]:
        """Rebuild every index (and the Merkle tree) from the log in one write transaction,
        after verifying the log's chain; the entries written per table."""
        from .check import repair_indexes
        return repair_indexes(self._access(), progress)

    def _access(self) -> LogAccess:
        """What check.py and erase.py use of this log (its ``LogAccess``, access.py)."""
        return LogAccess(self, self.path, self.readonly, self.registry, self._db, self._alive(),
                         self._read, self._write, self._head_in, self._decoded, self._landed,
                         self._alive, self._rebind, self._reopened)

    def _reopened(self) -> LmdbLog:
        """This store opened again read-only, with this log's registry: a forked child's own
        (verify's, split.py), since the parent's environment is not the child's to use."""
        return LmdbLog(self.path, readonly=True, registry=self.registry, check_head=False)

    def _rebind(self) -> None:
        """Take the environment's handles again: an erasure reopened it on a new file."""
        env = self._alive()
        self._env, self._db = env.env, env.db
        self._tail.forget()

    # -- checkpoints ---------------------------------------------------------------------------
    @staticmethod
    def _ckpt_key(name: str, version: int, seq: int) -> bytes:
        return name.encode() + b"\0" + version.to_bytes(4, "big") + u64(seq)

    def put_checkpoint(self, name: str, version: int, seq: int, blob: bytes) -> None:
        self._write(lambda txn: txn.put(self._ckpt_key(name, version, seq), blob, db=self._db["ckpt"]))

    def checkpoint_seqs(self, name: str, version: int) -> list[int]:
        prefix = self._ckpt_key(name, version, 0)[:-U64]
        return [s for n, v, s in self._checkpoint_keys(prefix)]

    def get_checkpoint(self, name: str, version: int, seq: int) -> bytes | None:
        key = self._ckpt_key(name, version, seq)
        return self._read(lambda txn: copied(txn.get(key, db=self._db["ckpt"])))

    def checkpoint_keys(self) -> list[tuple[str, int, int]]:
        return self._checkpoint_keys(b"")

    def _checkpoint_keys(self, prefix: bytes) -> list[tuple[str, int, int]]:
        def fn(txn: Any) -> Any:
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
        raw = self._read(lambda txn: copied(txn.get(b"projections", db=self._db["meta"])))
        return [] if raw is None else raw.decode().split("\0")

    def use_projections(self, names: Iterable[str]) -> None:
        """Record that the store is used with ``names`` (kept with the others, in order)."""
        new = [n for n in dict.fromkeys(names) if n not in self.projections_used()]
        if new:
            def fn(txn: Any) -> Any:
                raw = txn.get(b"projections", db=self._db["meta"])
                have = [] if raw is None else bytes(raw).decode().split("\0")
                names = have + [n for n in new if n not in have]
                txn.put(b"projections", "\0".join(names).encode(), db=self._db["meta"])
            self._write(fn)

    # -- the Merkle tree (braidlog/tree.py) and issued checkpoint notes -------------------------
    def tree_hashes(self, nodes: list[merkle.Node]) -> list[bytes]:
        """The hash of each complete subtree (level, index), read in one transaction; a node
        past the head is an IndexError."""
        def fn(txn: Any) -> Any:
            log, out = self._db["log"], []
            for node in nodes:
                found = tree_node(txn, log, node)
                if found is None:
                    level, index = node
                    raise IndexError(f"no tree node ({level}, {index}): it needs seq "
                                     f"{(index + 1) << level}")
                out.append(found)
            return out
        return self._read(fn)

    def put_note(self, size: int, note: bytes) -> None:
        """Keep a checkpoint note issued for tree size ``size`` (the same note twice is kept once)."""
        key = u64(size) + digest(note)[:8]
        self._write(lambda txn: txn.put(key, note, db=self._db["notes"]))

    def notes(self, *, last: bool = False) -> list[tuple[int, bytes]]:
        """Every checkpoint note kept, as (tree size, note), smallest size first; with ``last``,
        only those of the largest size."""
        if "notes" not in self._db:  # a format-1 store opened read-only
            return []

        def fn(txn: Any) -> Any:
            cur = txn.cursor(self._db["notes"])
            if last:
                if not cur.last():
                    return []
                prefix = bytes(cur.key())[:U64]
                cur.set_range(prefix)
            return [(from_u64(bytes(k)[:U64]), bytes(v)) for k, v in cur]
        return self._read(fn)

    def upgraded(self) -> Before | None:
        """The chain's head (seq, hash) and the tree's root as they stood before this store was
        upgraded to format 4 (re-chained over the committed forms), or None."""
        return self._read(lambda txn: before(txn, self._db))

    def before_hashes(self, *sizes: int) -> dict[int, tuple[bytes, bytes]]:
        """For each size, the chain hash and tree root the first ``size`` records had before
        the upgrade to format 4, recomputed from them (O(largest size))."""
        return before_hashes(self.scan_rows(1, max(sizes, default=0) + 1), sizes)

    # -- operating -----------------------------------------------------------------------------
    def last_commit(self) -> int:
        """A number that changes with every commit to the store, by any process: the commit a
        read begun now sees, so a read made after it sees at least that commit. A cheap test
        that nothing was written since it was last read (a commit that appended nothing
        changes it too)."""
        return self._alive().last_commit()

    def release_pages(self) -> None:
        """Drop the store's file pages this process has read from its resident set, keeping them
        in the page cache (Linux; elsewhere nothing): for a scan of the whole log, such as a
        recall index built from it, whose copies are all the process keeps."""
        self._alive().release_pages()

    def stat(self) -> dict[str, int]:
        """Map size, file size and page facts of the environment."""
        return {**self._alive().info(), "file_size": (self.path / "data.mdb").stat().st_size}

    def copy(self, dest: str | os.PathLike[str], *, compact: bool = True) -> None:
        """An online, consistent copy of the store into the empty directory ``dest``."""
        env = self._alive()
        Path(dest).mkdir(parents=True, exist_ok=True)
        env.copy(Path(dest), compact=compact)

    def sync(self) -> None:
        """Flush everything to disk now (useful with durable=False)."""
        self._alive().sync()

    def close(self) -> None:
        """Release the store; the environment closes with the last LmdbLog of its path."""
        shared = getattr(self, "_shared_env", None)
        if shared is None:
            return
        self._shared_env = None
        _open_stores.discard(self)
        if not self._forked:
            lmdb_env.release(self.path, shared)

    def __enter__(self) -> LmdbLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LmdbLog({str(self.path)!r})"
