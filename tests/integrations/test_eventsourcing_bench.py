"""The bench's eventsourcing workload: the same application on braidlog and on eventsourcing's
SQLite module, every figure and target present; a small run (the figures themselves are
docs/benchmarks.md's)."""

from __future__ import annotations

import pytest

pytest.importorskip("eventsourcing")

from braidlog import bench
from braidlog.bench import eventsourcing as es


def test_the_eventsourcing_workload_reports_both_modules_and_the_disk(tmp_path):
    config = bench.Config.make(quick=True, size=200, repeat=1, only=["eventsourcing"], dir=str(tmp_path))
    report = bench.run(config)
    rows = {(r.workload, r.system, r.metric): r for r in report.rows}
    for system in (es.BRAIDLOG, es.SQLITE):
        assert rows[(es.BATCHED, system, "events/s")].median > 0
        assert rows[(es.BATCHED, system, "MB stored")].median > 0
        assert rows[(es.SINGLE, system, "events/s")].median > 0
        assert rows[(es.THREADED, system, "events/s")].median > 0
    for workload in (es.BATCHED, es.SINGLE, es.THREADED):  # the fsync floor beside each durable row
        assert rows[(workload, es.DISK, "fsync p50 ms")].median > 0
    # every ratio reads one way: above 1 is better for braidlog
    names = {t.name: t for t in report.targets if t.name.startswith("eventsourcing")}
    assert len(names) == 4 and all(t.value is not None for t in names.values())
    assert rows[(es.SINGLE, es.WAL, "events/s")].median > 0  # the next design's prototype
    wal = [t for t in report.targets if t.name.startswith("the next design (durable='wal') vs eventsourcing")]
    assert len(wal) == 3 and all(t.value is not None for t in wal)
    by_bytes = next(t for n, t in names.items() if "bytes" in n)
    sqlite_mb = rows[(es.BATCHED, es.SQLITE, "MB stored")].median
    braidlog_mb = rows[(es.BATCHED, es.BRAIDLOG, "MB stored")].median
    assert by_bytes.value == pytest.approx(sqlite_mb / braidlog_mb)
    assert not report.skipped
