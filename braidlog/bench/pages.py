"""What one durable append writes, table by table:
``python -m braidlog.bench.pages [N] [--size SIZE] [--only TEXT]``.

Counts, with the kernel's own counters (``wchar`` and ``syscw`` of ``/proc/self/io``: exact, and
the same under any load), the bytes and write calls of ``N`` single durable appends (default
2,000) to a store first filled with ``--size`` records (default 1,000, as ``braidlog bench``'s
single workload starts from a new store), and their p50 latency (which load does change);
``--only TEXT`` measures only the rows whose name holds TEXT:

- braidlog as it ships (format 5: the braid, kind and id-digest entries, and the envelope's
  refers-to entries, written by every 64th record's commit, lmdb/tail.py); braidlog writing every
  index at once, as format 4 did; and that layout with each of its index tables left out (what
  each one costs);
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
from ..lmdb.format import id_digest
from ..lmdb.log import LmdbLog
from ..lmdb.tail import ALL
from .data import AgentSession
from .peers import EventsourcingApp, RawLmdb, eventsourcing_installed, index_keys

__all__ = ["layout", "measure", "table", "main"]

INDEXES = ("ids", "idh", "braid", "kind", "refs")
PAGE = 4096


def layout(skip: Sequence[str] = (), composite: bool = False) -> type[LmdbLog]:
    """A bench-only LmdbLog writing the log and the index tables not in ``skip``; with
    ``composite``, braid, kind and refs entries go to one table as keys ``tag ‖ name ‖ 0 ‖ seq``."""
    class Layout(LmdbLog):
        def _mark(self, txn: Any) -> int:
            return ALL  # every index written at once, as format 4 did: no tail

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


def table(n: int = 2000, size: int = 1000, only: str = "") -> list[tuple[str, float, float, float]]:
    """(layout, pages a commit, write calls a commit, p50 ms) of every layout above whose name
    holds ``only``, each on a store of ``size`` records."""
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

    rows = [braidlog("braidlog", LmdbLog),
            braidlog("braidlog, every index at once (format 4's commit)", layout())]
    rows += [braidlog(f"braidlog without {t}", layout(skip=(t,))) for t in INDEXES]
    rows += [braidlog("braidlog, log only", layout(skip=INDEXES)),
             braidlog("braidlog, braid+kind+refs as one composite-key table",
                      layout(composite=True)),
             ("raw LMDB, one put", RawLmdb, lambda s, i: s.put_one(bodies[i]), raw_many),
             ("raw LMDB, log + 4 indexes", lambda p: RawLmdb(p, indexed=True),
              lambda s, i: s.put_one(bodies[i], keys[i]), raw_many)]
    if eventsourcing_installed():
        rows.append(("eventsourcing on SQLite (1/save)", lambda p: EventsourcingApp("sqlite", p),
                     lambda s, i: s.save((ds[i],)), es_many))
    return [(name, *measure(make, one, many, n, size)) for name, make, one, many in rows
            if only in name]


def main(argv: Sequence[str]) -> None:
    """``python -m braidlog.bench.pages [N] [--size SIZE] [--only TEXT]``."""
    args = list(argv)
    size = int(args.pop(args.index("--size") + 1)) if "--size" in args else 1000
    only = args.pop(args.index("--only") + 1) if "--only" in args else ""
    args = [a for a in args if a not in ("--size", "--only")]
    n = int(args[0]) if args else 2000
    print(f"{n:,} single durable appends to a store of {size:,} records")
    print(f"{'one delta, one durable commit':54s} {'pages':>6s} {'writes':>6s} {'p50 ms':>7s}")
    for name, pages, calls, p50 in table(n, size, only):
        print(f"{name:54s} {pages:6.1f} {calls:6.1f} {p50:7.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
