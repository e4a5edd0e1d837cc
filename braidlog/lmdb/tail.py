"""The log's tail: the records past the ``indexed-to`` mark, whose ``braid``, ``kind`` and
``idh`` entries and envelope refers-to entries are not written yet (format 5).

The invariant: every record with seq at or below the mark has every index entry; a record past
it has its ``ids`` entry and its payload subjects' refers-to entries (written by its own commit,
by the process that can name them), and nothing else. Its other entries are derived from its row
(the committed form holds the id, braid, kind and the envelope's refs), so the log is those
indexes' write-ahead log: a crash before they are written loses nothing. The commit that brings
the log ``EVERY`` records past the mark writes them all and moves the mark, in its transaction.

A read through a deferred index reads the index (it holds the records up to the mark) and the
tail's keys (``Tail.keys``), in one transaction: a read inside a write transaction sees the rows
its transaction wrote, so every batch of a group commit sees the ones before it.

Hazards:

- The tail is at most ``EVERY - 1`` records between commits, and a batch that brings it to
  ``EVERY`` or more flushes in its own commit, so a read merges at most ``EVERY - 1`` rows plus
  the batch being written.
- The id-digest index is deferred too: an id past the mark is found in the id index and in the
  tail's rows, still two trees, so no single damaged page hides it from both.
- A store without a mark (a format-4 store open read-only) has every index written: its mark
  is its head.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from ..chain import GENESIS, HASH_SIZE
from ..delta import decode_entry
from ..erasure import envelope_refs
from ..store import BraidHead, Record
from .format import INDEXED, U64, from_u64, id_digest, put_keys, row_entry, u64

__all__ = ["EVERY", "ALL", "TailKey", "Tail", "IndexReads", "indexed_to", "flush", "tail_keys",
           "index_seqs"]

#: A commit that brings the log this many records past the mark writes their deferred entries.
EVERY = 64
ALL = 2**63 - 1  # the mark of a store whose every record is indexed (no mark kept)


class TailKey(NamedTuple):
    """What a tail record's deferred entries are keyed by, read from its committed form."""

    seq: int
    id: str
    braid_id: str
    kind: str
    refs: frozenset[str]  # the envelope's refers-to keys (refs, provenance)


def indexed_to(txn: Any, meta: Any) -> int:
    """The mark: every record up to it has all its index entries (``ALL`` when none is kept)."""
    raw = txn.get(INDEXED, db=meta)
    return ALL if raw is None else from_u64(raw)


def tail_keys(seq: int, value: Any) -> TailKey:
    """The keys of the record ``seq`` whose row is ``value`` (DecodeError if it holds none)."""
    e = decode_entry(row_entry(value))
    return TailKey(seq, e.id, e.braid_id, e.kind, envelope_refs(e))  # type: ignore[arg-type]  # an Entry has the envelope fields it reads


class Tail:
    """The keys of the records past the mark, as this process last read them: a read decodes
    only the rows appended since. The copy is trusted only while the log's record at the size
    it was read to still has the chain hash it had then (which covers every record up to it,
    so the same hash means the same committed forms: an aborted write leaves a hash no log has,
    as ``format.Peaks`` does). Shared by the threads of a store: each read replaces the whole
    snapshot, so a lost update costs a re-read, never a wrong answer."""

    __slots__ = ("_snap",)

    def __init__(self) -> None:
        self._snap: tuple[int, bytes, tuple[TailKey, ...]] = (0, GENESIS, ())

    def keys(self, txn: Any, db: Any, mark: int) -> tuple[TailKey, ...]:
        """The keys of the records past ``mark`` up to the head ``txn`` sees, in seq order."""
        log = db["log"]
        cur = txn.cursor(log)
        if not cur.last():
            return ()
        head = from_u64(cur.key())
        if head <= mark:
            return ()
        chain = bytes(cur.value()[:HASH_SIZE])
        size, at, have = self._snap
        if size > head or (size and _chain_at(txn, log, size) != at):
            size, have = 0, ()  # another log's, or one an aborted write left
        # in seq order, and a flush empties it: all of it is past the mark but after a flush
        kept = have if not have or have[0].seq > mark else tuple(k for k in have if k.seq > mark)
        start = max(size, mark) + 1
        new = []
        if start <= head and cur.set_key(u64(start)):
            for key, value in cur:
                if len(key) != U64:
                    break
                new.append(tail_keys(from_u64(key), value))
        out = kept + tuple(new) if new else kept
        self._snap = (head, chain, out)
        return out

    def grown(self, size: int, chain: bytes, keys: tuple[TailKey, ...]) -> None:
        """Take ``keys`` as the tail of the log whose record ``size`` has chain hash ``chain``
        (a write's own, known without reading its rows back)."""
        self._snap = (size, chain, keys)

    def forget(self) -> None:
        """Drop the copy (the store's file was replaced)."""
        self._snap = (0, GENESIS, ())


def _chain_at(txn: Any, log: Any, seq: int) -> bytes | None:
    value = txn.get(u64(seq), db=log)
    return None if value is None else bytes(value[:HASH_SIZE])


def flush(txn: Any, db: Any, keys: Iterable[TailKey], to: int) -> None:
    """Write the deferred entries of ``keys`` (the tail up to ``to``) and move the mark to ``to``."""
    rows: dict[str, list[tuple[bytes, bytes]]] = {"braid": [], "kind": [], "refs": []}
    ids: list[tuple[bytes, bytes]] = []
    for k in keys:
        s = u64(k.seq)
        ids.append((id_digest(k.id), s))
        rows["braid"].append((k.braid_id.encode(), s))
        rows["kind"].append((k.kind.encode(), s))
        rows["refs"].extend((r.encode(), s) for r in k.refs)
    for table, got in rows.items():
        if got:
            got.sort()
            txn.cursor(db[table]).putmulti(got, dupdata=True)
    if ids:  # at the tree's right edge, as the id index's keys are (format.put_keys)
        put_keys(txn.cursor(db["idh"]), ids)
    txn.put(INDEXED, u64(to), db=db["meta"])


_MATCH = {
    "braid": lambda t, key: t.braid_id == key,
    "kind": lambda t, key: t.kind == key,
    "refs": lambda t, key: key in t.refs,
}
_INDEX = {"ids": "id", "braid": "braid", "kind": "kind", "refs": "refers-to"}


class IndexReads:
    """``LmdbLog``'s reads through the braid, kind and refers-to indexes: each reads the index
    (every record up to the mark) and the tail's keys (the records past it) in one transaction.
    The log supplies the transactions, its tables and the checks of what an entry names."""

    _db: Any
    _tail: Tail

    def _read(self, fn: Callable[[Any], Any], *, buffers: bool = True) -> Any:
        raise NotImplementedError

    def _landed(self, txn: Any, index: str, key: str, seq: int) -> Any:
        raise NotImplementedError

    def _decoded(self, seq: int, value: Any) -> Record:
        raise NotImplementedError

    def _chunk_lists(self, chunk: Callable[..., Any], start: int, stop: int | None,
                     reverse: bool, limit: int | None, buffers: bool = True
                     ) -> Iterator[tuple[Sequence[int], Any]]:
        raise NotImplementedError

    def _mark(self, txn: Any) -> int:
        """The ``indexed-to`` mark ``txn`` sees."""
        return indexed_to(txn, self._db["meta"])

    def _tail_in(self, txn: Any) -> tuple[TailKey, ...]:
        """The keys of the records past the mark that ``txn`` sees (its own writes too)."""
        return self._tail.keys(txn, self._db, self._mark(txn))

    def _scan_index(self, index: str, key: str, start: int, stop: int | None, reverse: bool,
                    limit: int | None) -> Iterator[Record]:
        k, match = key.encode(), _MATCH[index]

        def chunk(txn: Any, lo: int, hi: int, n: int) -> tuple[list[int], list[Record]]:
            out = index_seqs(txn.cursor(self._db[index]), k, lo, hi, n, reverse)
            tail = [t.seq for t in self._tail_in(txn) if lo <= t.seq < hi and match(t, key)]
            if tail:  # past the mark (refers-to: a payload subject's entry may be there too)
                out = sorted(set(out).union(tail), reverse=reverse)[:n]
            name = _INDEX[index]
            return out, [self._decoded(seq, self._landed(txn, name, key, seq)) for seq in out]
        for _, got in self._chunk_lists(chunk, start, stop, reverse, limit):
            yield from got

    def _braid_head_in(self, txn: Any, braid_id: str, check: bool = False) -> BraidHead:
        """A braid's version and last seq: its index entries' count and last, then the tail's."""
        cur = txn.cursor(self._db["braid"])
        count = seq = 0
        if cur.set_key(braid_id.encode()):
            count = cur.count()
            cur.last_dup()
            seq = from_u64(cur.value())
            if check:
                self._landed(txn, "braid", braid_id, seq)
        for t in self._tail_in(txn):
            if t.braid_id == braid_id:
                count, seq = count + 1, t.seq
        return BraidHead(count, seq)

    def braid_head(self, braid_id: str) -> BraidHead:
        """A braid's version and last seq, from its index and the tail."""
        result: BraidHead = self._read(lambda txn: self._braid_head_in(txn, braid_id, True))
        return result

    def braids(self) -> dict[str, BraidHead]:
        def fn(txn: Any) -> Any:
            cur = txn.cursor(self._db["braid"])
            out = {}
            ok = cur.first()
            while ok:
                key, count = bytes(cur.key()).decode(), cur.count()
                cur.last_dup()
                out[key] = BraidHead(count, from_u64(cur.value()))
                self._landed(txn, "braid", key, out[key].seq)
                ok = cur.next_nodup()
            for t in self._tail_in(txn):
                had = out.get(t.braid_id)
                out[t.braid_id] = BraidHead((had.version if had else 0) + 1, t.seq)
            return out
        result: dict[str, BraidHead] = self._read(fn)
        return result

    def counts(self, index: str) -> dict[str, int]:
        """Number of deltas per key of an index ("braid", "kind" or "refs")."""
        def fn(txn: Any) -> Any:
            cur = txn.cursor(self._db[index])
            out, ok = {}, cur.first()
            while ok:
                out[bytes(cur.key()).decode()] = cur.count()
                ok = cur.next_nodup()
            for t in self._tail_in(txn):
                for key in (t.refs if index == "refs" else (getattr(t, _FIELD[index]),)):
                    out[key] = out.get(key, 0) + 1
            return out
        result: dict[str, int] = self._read(fn)
        return result


_FIELD = {"braid": "braid_id", "kind": "kind"}


def index_seqs(cur: Any, k: bytes, lo: int, hi: int, n: int, reverse: bool) -> list[int]:
    """At most ``n`` seqs of key ``k`` in [lo, hi) of a DUPSORT index, through ``cur``, from
    ``lo`` up (from ``hi`` down when ``reverse``)."""
    out: list[int] = []
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
    return out
