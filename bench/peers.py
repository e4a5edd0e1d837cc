"""The peers, timed on the same workloads: raw LMDB (the ceiling), sqlite3, eventsourcing."""

from __future__ import annotations

import pytest

from braidlog import bench, encode

ROUNDS = 20
needs_es = pytest.mark.skipif(not bench.eventsourcing_installed(),
                              reason="eventsourcing is not installed (pip install 'braidlog[bench]')")


@pytest.fixture
def raw(tmp_path):
    r = bench.RawLmdb(str(tmp_path / "raw"), durable=True)
    yield r
    r.close()


@pytest.fixture
def raw_indexed(tmp_path):
    r = bench.RawLmdb(str(tmp_path / "raw-indexed"), durable=True, indexed=True)
    yield r
    r.close()


def _with_keys(deltas):
    """Setup for the indexed ceiling: bodies and index keys, prepared outside the timing."""
    return ([encode(d) for d in deltas], bench.index_keys(deltas)), {}


@pytest.fixture
def sqlite(tmp_path):
    s = bench.SqliteLog(str(tmp_path / "events.db"), durable=True)
    yield s
    s.close()


@pytest.mark.parametrize("batch", [100, 1000])
def test_raw_lmdb_batched(benchmark, rates, raw, stream, batch):
    """Raw LMDB puts of the same encoded bytes, one durable transaction per batch."""
    benchmark.group = f"append-{batch}"
    benchmark.pedantic(raw.put_batch, setup=lambda: (([encode(d) for d in stream.take(batch)],), {}),
                       rounds=ROUNDS, iterations=1)
    rates.record(f"append-{batch}:raw LMDB", batch)


def test_raw_lmdb_single(benchmark, rates, raw, stream):
    """One put per durable commit."""
    benchmark.group = "single"
    benchmark.pedantic(raw.put_one, setup=lambda: ((encode(stream.take(1)[0]),), {}),
                       rounds=500, iterations=1)
    rates.record("single:raw LMDB", 1)


@pytest.mark.parametrize("batch", [100, 1000])
def test_raw_lmdb_indexed_batched(benchmark, rates, raw_indexed, stream, batch):
    """Raw LMDB puts of the same bytes plus braidlog's four index tables: its page-write ceiling."""
    benchmark.group = f"append-{batch}"
    benchmark.pedantic(raw_indexed.put_batch, setup=lambda: _with_keys(stream.take(batch)),
                       rounds=ROUNDS, iterations=1)
    rates.record(f"append-{batch}:{bench.RAW_INDEXED}", batch)


def test_raw_lmdb_indexed_single(benchmark, rates, raw_indexed, stream):
    """One durable commit of one record and its four index entries."""
    benchmark.group = "single"

    def setup():
        (bodies, keys), _ = _with_keys(stream.take(1))
        return (bodies[0], keys[0]), {}
    benchmark.pedantic(raw_indexed.put_one, setup=setup, rounds=500, iterations=1)
    rates.record(f"single:{bench.RAW_INDEXED}", 1)


@pytest.mark.parametrize("batch", [100, 1000])
def test_sqlite_batched(benchmark, rates, sqlite, stream, batch):
    """sqlite3, WAL, synchronous=FULL: one transaction per batch."""
    benchmark.group = f"append-{batch}"
    benchmark.pedantic(sqlite.put_batch,
                       setup=lambda: (([bench.sql_row(d) for d in stream.take(batch)],), {}),
                       rounds=ROUNDS, iterations=1)
    rates.record(f"append-{batch}:sqlite3", batch)


def test_sqlite_single(benchmark, rates, sqlite, stream):
    benchmark.group = "single"
    benchmark.pedantic(sqlite.put_one, setup=lambda: ((bench.sql_row(stream.take(1)[0]),), {}),
                       rounds=500, iterations=1)
    rates.record("single:sqlite3", 1)


@needs_es
@pytest.mark.parametrize("persistence", ["sqlite", "popo"])
@pytest.mark.parametrize("per_save", [1, 100])
def test_eventsourcing_save(benchmark, rates, tmp_path, stream, persistence, per_save):
    """eventsourcing: ``per_save`` events recorded on the braids' aggregates, then saved."""
    benchmark.group = "single" if per_save == 1 else f"append-{per_save}"
    es = bench.EventsourcingApp(persistence, str(tmp_path / "es.db"))
    benchmark.pedantic(es.save, setup=lambda: ((stream.take(per_save),), {}),
                       rounds=500 if per_save == 1 else ROUNDS, iterations=1)
    es.close()
    name = "eventsourcing SQLite" if persistence == "sqlite" else "eventsourcing memory"
    rates.record(f"{'single' if per_save == 1 else f'append-{per_save}'}:{name}", per_save)


@pytest.mark.parametrize("size", bench.suite_sizes())
def test_raw_scan_decode(benchmark, rates, raw_prebuilt, size):
    """A raw cursor over the same records plus msgspec decode of each: the scan baseline."""
    raw = raw_prebuilt(size)
    benchmark.group = f"scan-{size}"
    benchmark.pedantic(raw.scan_decode, rounds=5, iterations=1)
    rates.record("scan:raw LMDB", size, size=size)


@pytest.mark.parametrize("size", bench.suite_sizes())
def test_raw_scan_blake3(benchmark, rates, raw_prebuilt, size):
    """A raw cursor plus blake3 of each record's bytes: the verify baseline."""
    raw = raw_prebuilt(size)
    benchmark.group = f"verify-{size}"
    benchmark.pedantic(raw.scan_blake3, rounds=5, iterations=1)
    rates.record("verify:raw LMDB", size, size=size)


@pytest.mark.parametrize("size", bench.suite_sizes())
def test_sqlite_scan_decode(benchmark, tmp_path, session, size):
    s = bench.SqliteLog(str(tmp_path / "scan.db"), durable=False)
    rows = [bench.sql_row(d) for d in session.deltas(size)]
    for i in range(0, size, 1000):
        s.put_batch(rows[i:i + 1000])
    benchmark.group = f"scan-{size}"
    benchmark.pedantic(s.scan_decode, rounds=5, iterations=1)
    s.close()


@needs_es
@pytest.mark.parametrize("persistence", ["sqlite", "popo"])
@pytest.mark.parametrize("size", bench.suite_sizes())
def test_eventsourcing_aggregate_read(benchmark, rates, tmp_path, session, persistence, size):
    """Read every braid's aggregate back from its events: eventsourcing's replay."""
    es = bench.EventsourcingApp(persistence, str(tmp_path / "es.db"))
    ds = session.deltas(size)
    for i in range(0, size, 1000):
        es.save(ds[i:i + 1000])
    benchmark.group = f"replay-{size}"
    benchmark.pedantic(es.read_all, rounds=5, iterations=1)
    name = "eventsourcing SQLite" if persistence == "sqlite" else "eventsourcing memory"
    rates.record(f"replay:{name}", size, size=size)
    es.close()
