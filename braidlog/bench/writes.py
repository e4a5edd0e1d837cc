"""The write workloads: start-up, batched append, single durable appends, concurrent appenders
(the store's own shared commits, and the opt-in GroupCommitter wrapper); each timed on braidlog
and on its peers, the disk's fsync latency beside each durable workload."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from ..braid import Braid
from ..delta import GenericDelta, encode
from ..errors import BraidlogError
from ..group_commit import GroupCommitter
from ..lmdb.log import LmdbLog
from .data import BATCH, admissible, all_projections
from .harness import Run, Sample, each, fresh, in_threads, latencies, launch, percentile, remove, timed
from .machine import fsync_ms
from .peers import (
    ES_BATCH,
    ES_PEERS,
    RAW_INDEXED,
    EventsourcingApp,
    RawLmdb,
    SqliteLog,
    eventsourcing_installed,
    sql_row,
    startup_commands,
)

__all__ = ["BRAID_FOLLOWING", "BRAID_CHECKED", "GROUP_COMMITTER", "DISK", "APPENDERS", "appenders", "RUNNERS", "STEPS",
           "WAL_LOG"]

BRAID_FOLLOWING = "braidlog + shipped projections following, checks off"
BRAID_CHECKED = "braidlog + shipped projections, batched append with projection checks"
GROUP_COMMITTER = "braidlog + GroupCommitter (the opt-in wrapper)"
#: The disk's row beside each durable workload: its fsync latency, the floor of a durable commit.
DISK = "the disk (4 KiB write + fsync)"
APPENDERS = (1, 2, 4, 8)


def _startup(run: Run) -> list[Sample]:
    """Each command ``launches`` times, the commands interleaved so that load hits them alike;
    a figure is the median of its launches, in milliseconds."""
    store = run.cache.get("startup:store")
    if store is None:
        store = run.cache["startup:store"] = run.path("startup-store")
        LmdbLog(store).close()
    commands = startup_commands(store)
    # Every command reads compiled bytecode, as an installed package does (pip compiles it at
    # install): kept in a prefix of the run's own, for braidlog and the peers alike, so that an
    # editable install or PYTHONDONTWRITEBYTECODE does not make braidlog compile its sources
    # at every launch while its dependencies load theirs.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = run.cache.setdefault("startup:pycache", run.path("pycache"))
    run.step("start-up · import braidlog, braidlog head, the peer import")
    for argv in commands.values():  # compile, and warm the page cache: every repeat then times
        launch(argv, env)          # the same thing
    times: dict[tuple[str, str], list[float]] = {key: [] for key in commands}
    for _ in range(run.config.launches):
        for key, argv in commands.items():
            times[key].append(launch(argv, env))
    return [Sample("start-up", system, metric, statistics.median(ts) * 1000, "ms", "lower")
            for (system, metric), ts in times.items()]


# -- append: batched, 1,000 per durable commit -----------------------------------------------------

def _append(run: Run) -> list[Sample]:
    n = run.config.size
    ds, bodies = run.deltas(n), run.bodies(n)
    batches = [ds[i:i + BATCH] for i in range(0, n, BATCH)]
    W = "append"
    out = [Sample(W, DISK, "fsync p50 ms", fsync_ms(run.root), "ms", "lower")]

    def rates(system: str, seconds: float, commits: int) -> None:
        out.append(Sample(W, system, "deltas/s", n / seconds, "/s", "higher"))
        out.append(Sample(W, system, "commits/s", commits / seconds, "/s", "higher"))

    with fresh(run, "append · braidlog", "braidlog", _durable_log) as log:
        seconds, _ = timed(lambda: [log.append_batch(b) for b in batches])
    rates("braidlog", seconds, len(batches))

    # The shipped projections kept live on the same batches: first following the log after each
    # commit with their checks off, then through the boundary (checks inside the transaction,
    # the batch folded in as it is checked). The difference is what the checks cost.
    shipped, _ = all_projections()
    unchecked = [replace(p, check=None) for p in shipped]
    admitted = admissible(ds, shipped)  # the session's random bead and decision deltas break rules
    checked_batches = [admitted[i:i + BATCH] for i in range(0, len(admitted), BATCH)]
    for label, projections, follow in (
            (BRAID_FOLLOWING, unchecked, True), (BRAID_CHECKED, shipped, False)):
        with fresh(run, f"append · {label}", "braidlog-projections",
                   partial(_braid_at, projections)) as braid:
            def write(follow: bool = follow) -> None:
                for b in checked_batches:
                    braid.append_batch(b)
                    if follow:
                        braid.catch_up()
            seconds, _ = timed(write)
        out.append(Sample(W, label, "deltas/s", len(admitted) / seconds, "/s", "higher"))
        out.append(Sample(W, label, "commits/s", len(checked_batches) / seconds, "/s", "higher"))

    chunks = [bodies[i:i + BATCH] for i in range(0, n, BATCH)]
    with fresh(run, "append · raw LMDB", "raw-lmdb", RawLmdb) as raw:
        seconds, _ = timed(lambda: [raw.put_batch(c) for c in chunks])
    rates("raw LMDB", seconds, len(chunks))

    keys = run.index_keys(n)
    key_chunks = [keys[i:i + BATCH] for i in range(0, n, BATCH)]
    with fresh(run, "append · raw LMDB, braidlog's five tables", "raw-lmdb-indexed",
               _indexed_raw) as raw:
        seconds, _ = timed(lambda: [raw.put_batch(c, k) for c, k in zip(chunks, key_chunks, strict=False)])
    rates(RAW_INDEXED, seconds, len(chunks))

    rows = [sql_row(d) for d in ds]
    row_chunks = [rows[i:i + BATCH] for i in range(0, n, BATCH)]
    with fresh(run, "append · sqlite3", "sqlite.db", SqliteLog) as sql:
        seconds, _ = timed(lambda: [sql.put_batch(c) for c in row_chunks])
    rates("sqlite3 WAL FULL", seconds, len(row_chunks))

    if eventsourcing_installed():
        es_batches = [ds[i:i + ES_BATCH] for i in range(0, n, ES_BATCH)]
        for persistence, label in ES_PEERS:
            with fresh(run, f"append · {label}", "es.db",
                       partial(EventsourcingApp, persistence)) as es:
                seconds, _ = timed(lambda: [es.save(b) for b in es_batches])
            rates(f"{label} ({ES_BATCH}/save)", seconds, len(es_batches))
    return out


# -- single: one delta per durable commit ---------------------------------------------------------

def _single(run: Run) -> list[Sample]:
    n = run.config.single
    ds = run.deltas(n, offset=10_000_000)
    bodies = [encode(d) for d in ds]
    W = "single"
    out = [Sample(W, DISK, "fsync p50 ms", fsync_ms(run.root), "ms", "lower")]

    with fresh(run, "single · braidlog", "braidlog", _durable_log) as log:
        latencies(W, "braidlog", each(log.append, ds), out)

    with fresh(run, f"single · {WAL_LOG}", "braidlog-wal", _wal_log) as log:
        latencies(W, WAL_LOG, each(log.append, ds), out)

    with fresh(run, "single · raw LMDB", "raw-lmdb", RawLmdb) as raw:
        latencies(W, "raw LMDB", each(raw.put_one, bodies), out)

    pairs = list(zip(bodies, run.index_keys(n, offset=10_000_000), strict=False))
    with fresh(run, "single · raw LMDB, braidlog's five tables", "raw-lmdb-indexed",
               _indexed_raw) as raw:
        latencies(W, RAW_INDEXED, each(lambda p: raw.put_one(*p), pairs), out)

    rows = [sql_row(d) for d in ds]
    with fresh(run, "single · sqlite3", "sqlite.db", SqliteLog) as sql:
        latencies(W, "sqlite3 WAL FULL", each(sql.put_one, rows), out)

    if eventsourcing_installed():
        for persistence, label in ES_PEERS:
            with fresh(run, f"single · {label}", "es.db",
                       partial(EventsourcingApp, persistence)) as es:
                latencies(W, f"{label} (1/save)", each(lambda d: es.save((d,)), ds), out)
    return out


def _braid_at(projections: list[Any], path: str) -> Braid:
    """A Braid with ``projections`` on a durable log at ``path``."""
    return Braid(_durable_log(path), projections)


def _durable_log(path: str) -> LmdbLog:
    return LmdbLog(path, durable=True)


#: The next design for a durable commit, built as a prototype: one sync a commit through a
#: write-ahead file, LMDB behind it unsynced (``durable="wal"``).
WAL_LOG = "braidlog durable='wal' (next design)"


def _wal_log(path: str) -> LmdbLog:
    return LmdbLog(path, durable="wal")


def _indexed_raw(path: str) -> RawLmdb:
    return RawLmdb(path, indexed=True)


# -- concurrent appenders, durable, with and without group commit -----------------------------------

def appenders(per_thread: list[list[GenericDelta]], append: Callable[[GenericDelta], Any]
              ) -> tuple[float, list[float]]:
    """Thread k calls ``append`` on each delta of ``per_thread[k]``, all threads at once: the
    wall seconds, and every call's latency."""
    lats: list[list[float]] = [[] for _ in per_thread]

    def work(k: int) -> None:
        clock, mine = time.perf_counter, lats[k]
        for d in per_thread[k]:
            t = clock()
            append(d)
            mine.append(clock() - t)

    seconds = in_threads(len(per_thread), work)
    return seconds, [x for lat in lats for x in lat]


def _concurrent(run: Run) -> list[Sample]:
    m = run.config.appends
    out: list[Sample] = []
    for k in APPENDERS:
        W = f"concurrent ×{k}"
        per_thread = [run.deltas(m, offset=20_000_000 + t * m) for t in range(k)]
        total = k * m
        out.append(Sample(W, DISK, "fsync p50 ms", fsync_ms(run.root), "ms", "lower"))
        for system in ("braidlog", GROUP_COMMITTER):
            run.step(f"concurrent ×{k} · {system}")
            path = run.path("braidlog")
            log = LmdbLog(path, durable=True)
            try:
                first = log.last_commit()
                if system == "braidlog":  # the store's own writer queue shares the commits
                    seconds, lat = appenders(per_thread, log.append)
                else:
                    seconds, lat = appenders(per_thread, GroupCommitter(log).append)
                commits = log.last_commit() - first
                if log.head().seq != total:
                    raise BraidlogError(f"{system}: {log.head().seq} deltas stored, {total} appended")
            finally:
                log.close()
                remove(path)
            out.append(Sample(W, system, "deltas/s", total / seconds, "/s", "higher"))
            out.append(Sample(W, system, "commits/s", commits / seconds, "/s", "higher"))
            out.append(Sample(W, system, "p50 ms", percentile(lat, 50) * 1000, "ms", "lower"))
            out.append(Sample(W, system, "p99 ms", percentile(lat, 99) * 1000, "ms", "lower"))
    return out


RUNNERS = {"startup": _startup, "append": _append, "single": _single, "concurrent": _concurrent}
STEPS = {"startup": 1, "append": 8, "single": 6, "concurrent": 2 * len(APPENDERS)}
