"""What one durable append writes, table by table: ``python -m braidlog.bench.pages [N]``.

Counts, with the kernel's own counters (``wchar`` and ``syscw`` of ``/proc/self/io``: exact, and
the same under any load), the bytes and write calls of ``N`` single durable appends (default
2,000, after 1,000 on a new store), and their p50 latency (which load does change):

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
from ..lmdb.format import id_digest, pack_row, u64
from ..lmdb.log import LmdbLog
from .data import AgentSession
from .peers import EventsourcingApp, RawLmdb, eventsourcing_installed, index_keys

__all__ = ["layout", "measure", "table", "main"]

INDEXES = ("ids", "idh", "braid", "kind", "refs")
PAGE = 4096


def layout(skip: Sequence[str] = (), composite: bool = False) -> type[LmdbLog]:
    """A bench-only LmdbLog writing the log and the index tables not in ``skip``; with
    ``composite``, braid, kind and refs entries go to one table as keys ``tag ‖ name ‖ 0 ‖ seq``."""
    class Layout(LmdbLog):
        def _put(self, txn: Any, staged: Any, digests: Any = None) -> None:
            db, keys = self._db, [u64(s.seq) for s in staged]
            txn.cursor(db["log"]).putmulti(
                [(k, pack_row(s.hash, int.from_bytes(s.body[:8], "big"), s.entry, nodes, s.salt,
                              s.body[8:]))
                 for k, s, nodes in zip(keys, staged, self._tree_nodes(txn, staged))],
                append=True)
            named = {"braid": [(s.delta.braid_id, k) for s, k in zip(staged, keys)],
                     "kind": [(s.delta.kind, k) for s, k in zip(staged, keys)],
                     "refs": [(r, k) for s, k in zip(staged, keys) for r in s.refs]}
            puts = {"ids": [(s.delta.id.encode(), k) for s, k in zip(staged, keys)],
                    "idh": [(id_digest(s.delta.id), k) for s, k in zip(staged, keys)]}
            if composite:
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


def measure(make: Callable[[str], Any], append: Callable[[Any, int], None], n: int,
            warm: int = 1000) -> tuple[float, float, float]:
    """(pages written a commit, write calls a commit, p50 ms) over ``n`` appends after ``warm``."""
    d = tempfile.mkdtemp(prefix="braidlog-pages-")
    try:
        store = make(d + "/s")
        for i in range(warm):
            append(store, i)
        before, lat = _io(), []
        for i in range(warm, warm + n):
            t = time.perf_counter()
            append(store, i)
            lat.append(time.perf_counter() - t)
        after = _io()
        getattr(store, "close", lambda: None)()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    lat.sort()
    return ((after["wchar"] - before["wchar"]) / n / PAGE, (after["syscw"] - before["syscw"]) / n,
            lat[n // 2] * 1e3)


def table(n: int = 2000, warm: int = 1000) -> list[tuple[str, float, float, float]]:
    """(layout, pages a commit, write calls a commit, p50 ms) of every layout above."""
    ds = AgentSession(7).deltas(n + warm, offset=10_000_000)
    bodies, keys = [encode(d) for d in ds], index_keys(ds, offset=10_000_000)

    def durable(cls: type[LmdbLog]) -> Callable[[str], LmdbLog]:
        return lambda path: cls(path, durable=True)

    rows: list[tuple[str, Callable[[str], Any], Callable[[Any, int], None]]] = [
        ("braidlog", durable(LmdbLog), lambda s, i: s.append(ds[i]))]
    rows += [(f"braidlog without {t}", durable(layout(skip=(t,))), lambda s, i: s.append(ds[i]))
             for t in INDEXES]
    rows += [("braidlog, log only", durable(layout(skip=INDEXES)), lambda s, i: s.append(ds[i])),
             ("braidlog, braid+kind+refs as one composite-key table",
              durable(layout(composite=True)), lambda s, i: s.append(ds[i])),
             ("raw LMDB, one put", RawLmdb, lambda s, i: s.put_one(bodies[i])),
             ("raw LMDB, log + 4 indexes", lambda p: RawLmdb(p, indexed=True),
              lambda s, i: s.put_one(bodies[i], keys[i]))]
    if eventsourcing_installed():
        rows.append(("eventsourcing on SQLite (1/save)", lambda p: EventsourcingApp("sqlite", p),
                     lambda s, i: s.save((ds[i],))))
    return [(name, *measure(make, append, n, warm)) for name, make, append in rows]


def main(n: int = 2000) -> None:
    print(f"{'one delta, one durable commit':54s} {'pages':>6s} {'writes':>6s} {'p50 ms':>7s}")
    for name, pages, calls, p50 in table(n):
        print(f"{name:54s} {pages:6.1f} {calls:6.1f} {p50:7.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
