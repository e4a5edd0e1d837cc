"""The eventsourcing workload: the same eventsourcing ``Application`` on braidlog's persistence
module (``braidlog.integrations.eventsourcing``) and on eventsourcing's SQLite module, both
durable (braidlog's default: every commit synced; SQLite in WAL with its default
``synchronous=FULL``), the two interleaved and their order alternating from repeat to repeat.

Timed, each on a fresh store:

- ``ES_BATCH`` events a save: one aggregate per braid of the agent session, each save recording
  ``ES_BATCH`` events on one aggregate (``--size`` events in all, at most ``MAX_EVENTS``); then
  the bytes each store holds on disk (SQLite after a WAL checkpoint);
- one event a save (``single`` saves: ``--quick``'s or the default's, as the single appends);
- ``THREADS`` threads of one application, each saving its own aggregates, one event a save
  (``appends`` saves a thread, as the concurrent appenders).

The disk's fsync latency (a 4 KiB write and fsync under the run's directory) is measured in
each repeat beside these rows: a durable one-event save cannot be faster than it.

Each part is also timed on ``WAL``: braidlog's persistence module on a store opened
``durable="wal"`` (``BRAIDLOG_DURABLE=wal``), the next design for a durable commit, built as a
prototype: LMDB commits unsynced and each commit's records are synced once to a write-ahead
file (docs/operations.md), where a durable LMDB commit flushes the device twice.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from collections.abc import Sequence
from typing import Any

from ..delta import GenericDelta
from .harness import Run, Sample, in_threads, quiet_heap, remove, store_bytes
from .machine import fsync_ms
from .peers import ES_BATCH, EventsourcingApp, eventsourcing_installed

__all__ = ["THREADS", "MAX_EVENTS", "BATCHED", "SINGLE", "THREADED", "SQLITE", "BRAIDLOG", "DISK", "WAL",
           "run_workload", "TIMED_STEPS"]

THREADS = 8
MAX_EVENTS = 20_000  # events of the batched run, at most (fewer when --size is smaller)
BATCHED = f"eventsourcing, {ES_BATCH} events a save"
SINGLE = "eventsourcing, one event a save"
THREADED = f"eventsourcing, {THREADS} threads, one event a save"
SQLITE = "eventsourcing SQLite"
BRAIDLOG = "braidlog"
DISK = "the disk (4 KiB write + fsync)"
WAL = "braidlog durable='wal' (next design)"
TIMED_STEPS = 9  # per repeat, for the progress bar


def _persistence(system: str) -> str:
    return "sqlite" if system == SQLITE else "braidlog"


def _app(system: str, path: str) -> EventsourcingApp:
    if system != WAL:
        return EventsourcingApp(_persistence(system), path)
    return EventsourcingApp("braidlog", path, env={"BRAIDLOG_DURABLE": "wal"})


def _checkpoint(path: str) -> None:
    """Fold SQLite's WAL into its database file, as a closed database at rest is."""
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()


def _batched(run: Run, system: str, ds: Sequence[GenericDelta]) -> list[Sample]:
    batches = [ds[i:i + ES_BATCH] for i in range(0, len(ds), ES_BATCH)]
    path = run.path("es-batched.db" if system == SQLITE else "es-batched.lmdb")
    run.step(f"eventsourcing · {system}: {len(ds):,} events, {ES_BATCH} a save")
    es = _app(system, path)
    try:
        with quiet_heap():
            t = time.perf_counter()
            for b in batches:
                es.save(b)
            seconds = time.perf_counter() - t
    finally:
        es.close()
    if system == SQLITE:
        _checkpoint(path)
    size = store_bytes(path)
    remove(path)
    if system == WAL:  # its bytes are braidlog's
        return [Sample(BATCHED, system, "events/s", len(ds) / seconds, "/s", "higher")]
    return [Sample(BATCHED, system, "events/s", len(ds) / seconds, "/s", "higher"),
            Sample(BATCHED, system, "MB stored", size / 1e6, "MB", "lower"),
            Sample(BATCHED, system, "bytes an event", size / len(ds), "B", "lower")]


def _single(run: Run, system: str, ds: Sequence[GenericDelta]) -> list[Sample]:
    path = run.path("es-single.db" if system == SQLITE else "es-single.lmdb")
    run.step(f"eventsourcing · {system}: {len(ds):,} saves of one event")
    es = _app(system, path)
    lat: list[float] = []
    try:
        clock = time.perf_counter
        with quiet_heap():
            for d in ds:
                t = clock()
                es.save((d,))
                lat.append(clock() - t)
    finally:
        es.close()
        remove(path)
    return [Sample(SINGLE, system, "events/s", len(lat) / sum(lat), "/s", "higher"),
            Sample(SINGLE, system, "p50 ms", statistics.median(lat) * 1000, "ms", "lower")]


def _threaded(run: Run, system: str, per_thread: Sequence[Sequence[GenericDelta]]) -> list[Sample]:
    path = run.path("es-threads.db" if system == SQLITE else "es-threads.lmdb")
    total = sum(len(ds) for ds in per_thread)
    run.step(f"eventsourcing · {system}: {len(per_thread)} threads, {total:,} saves of one event")
    es = _app(system, path)

    def work(k: int) -> None:
        mine: dict[str, Any] = {}  # this thread's own aggregates, one per braid it writes
        for d in per_thread[k]:
            agg = mine.get(d.braid_id)
            if agg is None:
                agg = mine[d.braid_id] = es.new_aggregate(f"{k}:{d.braid_id}")
            es.record(agg, d)
            es.app.save(agg)

    try:
        seconds = in_threads(len(per_thread), work)
    finally:
        es.close()
        remove(path)
    return [Sample(THREADED, system, "events/s", total / seconds, "/s", "higher")]


def run_workload(run: Run) -> list[Sample]:
    """One repeat: each part on both systems, the system that goes first alternating."""
    if not eventsourcing_installed():
        run.skipped.append("eventsourcing: not installed (pip install 'braidlog[bench]')")
        return []
    cfg = run.config
    n = max(ES_BATCH, min(cfg.size, MAX_EVENTS) // ES_BATCH * ES_BATCH)
    batched = run.deltas(n, offset=30_000_000)
    single = run.deltas(cfg.single, offset=40_000_000)
    per_thread = [run.deltas(cfg.appends, offset=50_000_000 + k * cfg.appends)
                  for k in range(THREADS)]
    rep = run.cache.get("eventsourcing:repeat", 0)
    run.cache["eventsourcing:repeat"] = rep + 1
    order = (BRAIDLOG, SQLITE) if rep % 2 == 0 else (SQLITE, BRAIDLOG)
    fsync = fsync_ms(run.root)  # beside each durable row: the floor of a durable commit
    out = [Sample(w, DISK, "fsync p50 ms", fsync, "ms", "lower") for w in (BATCHED, SINGLE, THREADED)]
    for system in (*order, WAL):
        out.extend(_batched(run, system, batched))
    for system in (*order, WAL):
        out.extend(_single(run, system, single))
    for system in (*order, WAL):
        out.extend(_threaded(run, system, per_thread))
    return out
