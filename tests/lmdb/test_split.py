"""The whole-log verify split over a forked child (braidlog.lmdb.split) reports what the
one-process verify reports: the same head on an intact store, the same first damage (message and
seq) on a store changed through LMDB in the child's records, in this process's, in both, or in an
index, and the same when the child fails."""

from __future__ import annotations

import os
import struct
import sys
import threading

import lmdb
import pytest

from braidlog import BraidlogError, LmdbLog, Refs
from braidlog.lmdb import split
from braidlog.lmdb.file import _Reader, picked, read_metas, table_db
from braidlog.lmdb.format import u64
from tests.support import in_child, make_delta

_E = "<" if sys.byteorder == "little" else ">"

N = 3000


@pytest.fixture
def forks(monkeypatch):
    """verify splits any log (SPLIT_AT lowered), and the children it forks are counted. A thread
    an earlier test left idle in this process is not counted (verify would not fork beside it;
    these tests fork anyway, as tests.support.in_child does)."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(split, "SPLIT_AT", 1)
    forked = []
    fork = split.fork

    def counting(log, records):
        child = fork(log, records)
        forked.append(child)
        return child
    monkeypatch.setattr(split, "fork", counting)
    return forked


def _store(path) -> None:
    deltas = [make_delta(i, braid=f"b{i % 3}", kind="message" if i % 4 else "tick",
                         refs=Refs(deltas=(f"E{i % 7}",)) if i % 5 == 0 else None,
                         payload={"text": f"delta {i}"} if i % 4 else {})
              for i in range(N)]
    with LmdbLog(path, durable=False) as log:
        for i in range(0, N, 500):
            log.append_batch(deltas[i:i + 500])
        for d in [make_delta(N + i, braid="b1") for i in range(5)]:  # a tail past the mark
            log.append(d)


def _outcome(path, monkeypatch, at: int) -> tuple:
    """verify's outcome with the split at ``at`` (the one-process verify when 0)."""
    monkeypatch.setattr(split, "SPLIT_AT", 1 if at else 10**12)
    monkeypatch.setattr(split, "SHARE", (at - 1) / (N + 5) if at else split.SHARE)
    with LmdbLog(path, readonly=True) as log:
        try:
            return ("head", log.verify())
        except BraidlogError as e:
            return (type(e).__name__, str(e), getattr(e, "seq", None))


def _change(path, fn) -> None:
    env = lmdb.open(str(path), max_dbs=20)
    try:
        with env.begin(write=True) as txn:
            fn(txn, {name: env.open_db(name.encode(), txn=txn, create=False)
                     for name in ("log", "ids", "braid", "refs")})
    finally:
        env.close()


def _flip_row(at: int, offset: int):
    def fn(txn, db):
        row = bytearray(txn.get(u64(at), db=db["log"]))
        row[offset] ^= 0x20
        txn.put(u64(at), bytes(row), db=db["log"])
    return fn


def test_an_intact_store_gives_the_same_head_split_or_not(lmdb_path, forks, monkeypatch):
    _store(lmdb_path)
    assert _outcome(lmdb_path, monkeypatch, 2000) == _outcome(lmdb_path, monkeypatch, 0)
    assert forks[0] is not None and len([c for c in forks if c]) == 1


@pytest.mark.parametrize("damage", [
    [(100, -3)],            # the child's records: delta bytes changed
    [(2500, 5)],            # this process's records: the chain hash changed
    [(2999, -1), (40, 6)],  # both: the child's, the lower seq, comes first
    [(1999, 3), (2000, 3)],  # either side of the split
    [(1024, 60)],            # the tree nodes or form of a record that completes nodes
])
def test_a_changed_record_is_reported_as_one_process_reports_it(lmdb_path, forks, monkeypatch,
                                                                 damage):
    _store(lmdb_path)
    for at, offset in damage:
        _change(lmdb_path, _flip_row(at, offset))
    one = _outcome(lmdb_path, monkeypatch, 0)
    assert one[0] == "IntegrityError"
    assert _outcome(lmdb_path, monkeypatch, 2000) == one
    assert any(forks)


@pytest.mark.parametrize("seq", [500, 2600])  # looked up by the child, by this process
def test_a_lost_or_extra_index_entry_is_named_as_one_process_names_it(lmdb_path, forks,
                                                                         monkeypatch, seq):
    _store(lmdb_path)

    def lose(txn, db):
        key = next(k for k, v in txn.cursor(db["ids"]) if v == u64(seq))
        txn.delete(key, db=db["ids"])
    _change(lmdb_path, lose)
    one = _outcome(lmdb_path, monkeypatch, 0)
    assert one[0] == "IntegrityError" and "id index" in one[1]
    assert _outcome(lmdb_path, monkeypatch, 2000) == one
    _change(lmdb_path, lambda txn, db: txn.put(b"b0", u64(2), db=db["braid"]))  # b1's seq 2 as b0's
    assert _outcome(lmdb_path, monkeypatch, 2000) == _outcome(lmdb_path, monkeypatch, 0)
    with LmdbLog(lmdb_path) as log:  # the lost entries rebuilt: only the extra one is left
        log.repair_indexes()
    _change(lmdb_path, lambda txn, db: txn.put(b"E3", u64(seq), db=db["refs"]))  # an extra reference
    extra = _outcome(lmdb_path, monkeypatch, 0)
    assert extra[0] == "IntegrityError" and "refers-to" in extra[1], extra
    assert _outcome(lmdb_path, monkeypatch, 2000) == extra


def test_a_child_that_fails_is_stood_in_for(lmdb_path, forks, monkeypatch):
    _store(lmdb_path)
    _change(lmdb_path, _flip_row(700, -2))
    one = _outcome(lmdb_path, monkeypatch, 0)
    monkeypatch.setattr(split, "_check", lambda log, stop: b"")  # the child answers nothing
    assert _outcome(lmdb_path, monkeypatch, 2000) == one
    assert any(forks)


def _verify_in_child(path, monkeypatch, split_it: bool) -> str:
    """verify in a forked child (a SIGBUS there is counted, not suffered), split or not."""
    monkeypatch.setattr(split, "SPLIT_AT", 1 if split_it else 10**12)

    def run() -> str:
        try:
            with LmdbLog(path, check_head=False) as log:
                return f"head {log.verify()}"
        except BraidlogError as e:
            return f"{type(e).__name__}: {e}"
    return in_child(run, timeout=60)


@pytest.mark.parametrize("table", [b"log", b"ids"])
def test_a_page_pointing_past_the_end_of_the_file_is_found_before_anything_is_read(
        lmdb_path, forks, monkeypatch, table):
    """A node offset past the end of the file in the last leaf of the log or of an index: the
    split verify reads nothing through LMDB before the page check either (the child may die of
    it; this process reports the finding)."""
    with LmdbLog(lmdb_path, durable=False) as log:
        log.append_batch([make_delta(i, payload={"text": f"delta {i}"}) for i in range(300)])
    with LmdbLog(lmdb_path) as log:  # a second commit: its pages come at the end of the file
        log.append(make_delta(301, payload={"text": "the last one"}))
    with open(lmdb_path / "data.mdb", "rb") as f:
        hdr, m0, m1 = read_metas(f.fileno())
        meta = picked(m0, m1)
        db = table_db(f.fileno(), hdr, meta, table)
        _, _, leaf, count = _Reader(f.fileno(), hdr, meta.psize, meta.last_pgno).last_leaf_node(
            db.root, db.depth)
    if leaf * meta.psize + 0xFFF0 <= os.path.getsize(lmdb_path / "data.mdb"):
        pytest.skip("that table's last page is not near the end of the file")
    with open(lmdb_path / "data.mdb", "r+b") as f:
        f.seek(leaf * meta.psize + hdr + 2 * (count - 1))
        f.write(struct.pack(_E + "H", 0xFFF0))
    one = _verify_in_child(str(lmdb_path), monkeypatch, False)
    assert one.startswith("IntegrityError"), one
    assert _verify_in_child(str(lmdb_path), monkeypatch, True) == one


def test_erased_records_and_payload_subjects_verify_the_same_split_or_not(tmp_path, forks,
                                                                          monkeypatch):
    """Records whose payloads name subjects (refers-to entries of their own), some erased in
    the child's part and in this process's, and a tail past the indexed-to mark."""
    import braidlog
    from braidlog.bench.data import AgentSession

    path = tmp_path / "s"
    session = AgentSession(7, entities=40)
    with LmdbLog(path, durable=False) as log:
        log.append_batch(session.iter(N, 0))
        for i in range(N, N + 5):
            log.append_batch(session.iter(1, i))
    with braidlog.open(path, projections=[]) as b:
        b.erase(seqs=[5, 1500, 2600], reason="test")
    one = _outcome(path, monkeypatch, 0)
    assert one[0] == "head"
    assert _outcome(path, monkeypatch, 2000) == one
    assert any(forks)


def test_no_child_is_forked_beside_another_thread_or_for_a_small_log(lmdb_path):
    _store(lmdb_path)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    with LmdbLog(lmdb_path, readonly=True) as log:
        assert split.fork(log._access(), 100) is None  # below SPLIT_AT
        other.start()
        try:
            assert split.fork(log._access(), 10**6) is None
        finally:
            stop.set()
            other.join()
