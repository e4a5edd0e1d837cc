"""What one durable append writes, table by table: ``python -m braidlog.bench.pages [N] [--size SIZE]``.

Counts, with the kernel's own counters (``wchar`` and ``syscw`` of ``/proc/self/io``: exact, and
the same under any load), the bytes and write calls of ``N`` single durable appends (default
2,000) to a store first filled with ``--size`` records (default 1,000, as ``braidlog bench``'s
single workload starts from a new store), and their p50 latency (which load does change):

- braidlog as it ships, and with each of its index tables left out (what each one costs);
- braidlog with ``braid``, ``kind`` and ``refs`` as one table of composite keys (tag, name, seq),
  a layout measured here and not shipped (docs/benchmarks.md, *Single durable append*);
- raw LMDB: one put a commit, and the log with four indexes (the bench's peers);
- eventsourcing on SQLite, one event a save, when it is installed.

The variants are bench-only stores whose appends write other tables: like ``NoTreeLog``, what
they write cannot be read back as a braidlog store.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..delta import encode
from ..lmdb.format import id_digest, u64
from ..lmdb.log import LmdbLog
from .data import AgentSession
from .peers import EventsourcingApp, RawLmdb, eventsourcing_installed, index_keys

__all__ = ["layout", "deferred", "measure", "table", "main"]

INDEXES = ("ids", "idh", "braid", "kind", "refs")
PAGE = 4096


def layout(skip: Sequence[str] = (), composite: bool = False) -> type[LmdbLog]:
    """A bench-only LmdbLog writing the log and the index tables not in ``skip``; with
    ``composite``, braid, kind and refs entries go to one table as keys ``tag ‖ name ‖ 0 ‖ seq``."""
    class Layout(LmdbLog):
        def _put(self, txn: Any, staged: Any, digests: Any = None) -> None:
            db, keys = self._db, self._put_rows(txn, staged)
            named = {"braid": [(s.delta.braid_id, k) for s, k in zip(staged, keys, strict=False)],
                     "kind": [(s.delta.kind, k) for s, k in zip(staged, keys, strict=False)],
                     "refs": [(r, k) for s, k in zip(staged, keys, strict=False) for r in s.refs]}
            puts = {"ids": [(s.delta.id.encode(), k) for s, k in zip(staged, keys, strict=False)],
                    "idh": [(id_digest(s.delta.id), k) for s, k in zip(staged, keys, strict=False)]}
            if composite:  # the store's checkpoint table, empty here, stands in for a new one
                puts["ckpt"] = sorted((t[0].encode() + n.encode() + b"\0" + k, b"")
                                      for t, rows in named.items() for n, k in rows)
            else:
                puts.update({t: [(n.encode(), k) for n, k in rows] for t, rows in named.items()})
            for table, rows in puts.items():
                if rows and table not in skip:
                    txn.cursor(db[table]).putmulti(rows, dupdata=table in ("braid", "kind", "refs"))
    return Layout


#: The deferred-index prototype's meta key: the seq up to which braid, kind and refs hold entries.
INDEXED = b"indexed-to"


def deferred(every: int = 64, idh: bool = False) -> type[LmdbLog]:
    """A prototype of the next format's commit (docs/benchmarks.md, *Single durable append*):
    each commit writes the log and both id indexes (an idempotent retry must find any id at
    once), and leaves the ``braid``, ``kind`` and ``refs`` entries of its records to a later
    commit: the one that brings the log ``every`` records past ``indexed-to`` (meta) writes the
    entries of all of them, derived from their rows (the log is those indexes' write-ahead log,
    so a crash loses nothing), and moves ``indexed-to``. A read through those indexes reads the
    index up to ``indexed-to`` and the log's rows past it (at most ``every``): ``braid_head``
    and ``scan_braid`` here do; the other index reads of LmdbLog are not carried over.

    With ``idh``, the id-digest index is deferred too: an id past ``indexed-to`` is then found
    in the id index and in the log's tail, still two trees (what no single damaged page may
    hide from both), and a commit writes the paths of two tables fewer."""
    from ..delta import referenced_ids
    from ..errors import IntegrityError
    from ..lmdb.format import decode_keys, from_u64, row_data, row_entry
    from ..store import BraidHead

    class Deferred(LmdbLog):
        def _put(self, txn: Any, staged: Any, digests: Any = None) -> None:
            db, keys = self._db, self._put_rows(txn, staged)
            txn.cursor(db["ids"]).putmulti([(s.delta.id.encode(), k) for s, k in zip(staged, keys, strict=False)])
            if not idh:
                txn.cursor(db["idh"]).putmulti([(id_digest(s.delta.id), k)
                                                for s, k in zip(staged, keys, strict=False)])
            covered = self._covered(txn)
            if staged[-1].seq - covered >= every:
                rows: dict[str, list[tuple[bytes, bytes]]] = {"braid": [], "kind": [], "refs": [],
                                                              "idh": []}
                for seq, value in self._tail(txn, covered):
                    d = self._decoded(seq, value).delta
                    k = u64(seq)
                    if idh:
                        rows["idh"].append((id_digest(d.id), k))
                    rows["braid"].append((d.braid_id.encode(), k))
                    rows["kind"].append((d.kind.encode(), k))
                    rows["refs"].extend((r.encode(), k) for r in referenced_ids(d, self.registry))
                for table, got in rows.items():
                    if got:
                        txn.cursor(db[table]).putmulti(sorted(got), dupdata=table != "idh")
                txn.put(INDEXED, u64(staged[-1].seq), db=db["meta"])

        def _stored(self, txn: Any, delta_ids: list[str], digests: Any = None) -> dict[str, Any]:
            """An id past ``indexed-to`` has no id-digest entry yet: the log's tail, a tree
            apart from the id index, stands in for it (with ``idh``)."""
            if not idh:
                return super()._stored(txn, delta_ids, digests)
            tail = {decode_keys(row_entry(v)).id: u64(s) for s, v in self._tail(txn, self._covered(txn))}
            found = {}
            for delta_id in delta_ids:
                first = txn.get(delta_id.encode(), db=self._db["ids"])
                second = txn.get(id_digest(delta_id), db=self._db["idh"]) or tail.get(delta_id)
                if first is None and second is None:
                    continue
                if first is None or first != second:  # (first None: second is not)
                    raise IntegrityError(f"the id indexes disagree on delta {delta_id}",
                                         seq=from_u64(next(s for s in (first, second) if s is not None)))
                value = self._landed(txn, "id", delta_id, from_u64(first))
                found[delta_id] = (from_u64(first), bytes(value[32:40]) + bytes(row_data(value)))
            return found

        def _covered(self, txn: Any) -> int:
            raw = txn.get(INDEXED, db=self._db["meta"])
            return 0 if raw is None else from_u64(raw)

        def _tail(self, txn: Any, covered: int) -> list[tuple[int, bytes]]:
            cur = txn.cursor(self._db["log"])
            if not cur.set_range(u64(covered + 1)):
                return []
            return [(from_u64(k), bytes(v)) for k, v in cur]

        def braid_head(self, braid_id: str) -> BraidHead:
            def fn(txn: Any) -> BraidHead:
                cur = txn.cursor(self._db["braid"])
                count, seq = 0, 0
                if cur.set_key(braid_id.encode()):
                    count = cur.count()
                    cur.last_dup()
                    seq = from_u64(cur.value())
                for s, value in self._tail(txn, self._covered(txn)):
                    if decode_keys(row_entry(value)).braid_id == braid_id:
                        count, seq = count + 1, s
                return BraidHead(count, seq)
            return self._read(fn)

        def scan_braid(self, braid_id: str, start: int = 1, stop: int | None = None, *,
                       reverse: bool = False, limit: int | None = None) -> Any:
            def fn(txn: Any) -> list[Any]:
                hi = stop if stop is not None else 2**63
                cur, seqs = txn.cursor(self._db["braid"]), []
                if cur.set_range_dup(braid_id.encode(), u64(start)):
                    seqs = [from_u64(v) for v in cur.iternext_dup()]
                seqs += [s for s, v in self._tail(txn, self._covered(txn))
                         if decode_keys(row_entry(v)).braid_id == braid_id]
                seqs = [s for s in seqs if start <= s < hi][::-1 if reverse else 1]
                log = self._db["log"]
                return [self._decoded(s, txn.get(u64(s), db=log)) for s in seqs[:limit]]
            return iter(self._read(fn))
    return Deferred


def _io() -> dict[str, int]:
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(":") for line in f)}


#: One layout: its name, how to open it at a path, how to append record ``i`` alone in a durable
#: commit, and how to append records ``lo..hi`` in batches (to fill the store first).
Variant = tuple[str, Callable[[str], Any], Callable[[Any, int], None], Callable[[Any, int, int], None]]


def measure(make: Callable[[str], Any], one: Callable[[Any, int], None],
            many: Callable[[Any, int, int], None], n: int, size: int
            ) -> tuple[float, float, float]:
    """(pages written a commit, write calls a commit, p50 ms) over ``n`` single appends to a
    store ``many`` first filled with ``size`` records."""
    d = tempfile.mkdtemp(prefix="braidlog-pages-")
    try:
        store = make(d + "/s")
        many(store, 0, size)
        before, lat = _io(), []
        for i in range(size, size + n):
            t = time.perf_counter()
            one(store, i)
            lat.append(time.perf_counter() - t)
        after = _io()
        getattr(store, "close", lambda: None)()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    lat.sort()
    return ((after["wchar"] - before["wchar"]) / n / PAGE, (after["syscw"] - before["syscw"]) / n,
            lat[n // 2] * 1e3)


def table(n: int = 2000, size: int = 1000) -> list[tuple[str, float, float, float]]:
    """(layout, pages a commit, write calls a commit, p50 ms) of every layout above, each on a
    store of ``size`` records."""
    ds = AgentSession(7).deltas(n + size, offset=10_000_000)
    bodies, keys = [encode(d) for d in ds], index_keys(ds, offset=10_000_000)

    def braidlog(name: str, cls: type[LmdbLog]) -> Variant:
        def many(s: LmdbLog, lo: int, hi: int) -> None:
            for i in range(lo, hi, 1000):
                s.append_batch(ds[i:min(hi, i + 1000)])
        return (name, lambda path: cls(path, durable=True), lambda s, i: s.append(ds[i]), many)

    def raw_many(s: RawLmdb, lo: int, hi: int) -> None:
        for i in range(lo, hi, 1000):
            s.put_batch(bodies[i:min(hi, i + 1000)], keys[i:min(hi, i + 1000)] if s.indexes else ())

    def es_many(s: EventsourcingApp, lo: int, hi: int) -> None:
        for i in range(lo, hi, 100):
            s.save(ds[i:min(hi, i + 100)])

    rows = [braidlog("braidlog", LmdbLog)]
    rows += [braidlog(f"braidlog without {t}", layout(skip=(t,))) for t in INDEXES]
    rows += [braidlog("braidlog, log only", layout(skip=INDEXES)),
             braidlog("braidlog, braid+kind+refs as one composite-key table",
                      layout(composite=True)),
             braidlog("braidlog, braid+kind+refs deferred to every 64th record (prototype)",
                      deferred(64)),
             braidlog("braidlog, idh+braid+kind+refs deferred to every 64th record (prototype)",
                      deferred(64, idh=True)),
             ("raw LMDB, one put", RawLmdb, lambda s, i: s.put_one(bodies[i]), raw_many),
             ("raw LMDB, log + 4 indexes", lambda p: RawLmdb(p, indexed=True),
              lambda s, i: s.put_one(bodies[i], keys[i]), raw_many)]
    if eventsourcing_installed():
        rows.append(("eventsourcing on SQLite (1/save)", lambda p: EventsourcingApp("sqlite", p),
                     lambda s, i: s.save((ds[i],)), es_many))
    return [(name, *measure(make, one, many, n, size)) for name, make, one, many in rows]


def main(argv: Sequence[str]) -> None:
    """``python -m braidlog.bench.pages [N] [--size SIZE]``."""
    args = list(argv)
    size = int(args.pop(args.index("--size") + 1)) if "--size" in args else 1000
    args = [a for a in args if a != "--size"]
    n = int(args[0]) if args else 2000
    print(f"{n:,} single durable appends to a store of {size:,} records")
    print(f"{'one delta, one durable commit':54s} {'pages':>6s} {'writes':>6s} {'p50 ms':>7s}")
    for name, pages, calls, p50 in table(n, size):
        print(f"{name:54s} {pages:6.1f} {calls:6.1f} {p50:7.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
