"""An erasure shipped through NATS JetStream: replicas apply it and drop the plaintext too
(a real nats-server, as tests/replication/test_replication.py starts it)."""

from __future__ import annotations

import pytest

pytest.importorskip("nats")

import braidlog
from braidlog import LmdbLog
from braidlog.replication import Replica, Shipper
from tests.support import make_delta
from tests.support.forgetting import files_holding

pytestmark = pytest.mark.nats

SECRET = "hedgehog-diary-entry"


def _deltas():
    alice = [make_delta(i, braid="alice", payload={"text": f"{SECRET} {i}"}) for i in range(5)]
    bob = [make_delta(10 + i, braid="bob", payload={"text": f"bob {i}"}) for i in range(5)]
    return alice, bob


def _erase(path, **kw):
    with braidlog.open(path, projections=[]) as b:
        return b.erase(reason="replica test", **kw)


def test_a_replica_applies_an_erasure_shipped_after_the_records(tmp_path, open_stream):
    writer_path, replica_path = tmp_path / "w", tmp_path / "r"
    alice, bob = _deltas()
    with LmdbLog(writer_path) as w:
        w.append_batch(alice)
        w.append_batch(bob)
        Shipper(w, open_stream()).ship(timeout=20)
    replica_store = LmdbLog(replica_path)
    replica = Replica(replica_store, open_stream())
    try:
        assert replica.catch_up(timeout=20).seq == 10
        assert files_holding(replica_path, SECRET)  # the test can fail
        report = _erase(writer_path, braid="alice")
        with LmdbLog(writer_path) as w:
            head = Shipper(w, open_stream()).ship(timeout=20)
            assert head.seq == report.seq
            writer_head = w.head()
        assert replica.catch_up(timeout=20) == writer_head
        assert replica_store.verify() == writer_head
        for seq in report.seqs:
            assert replica_store.read(seq).delta.erased.by == report.seq
    finally:
        replica_store.close()
    assert files_holding(replica_path, SECRET) == {}
    assert files_holding(replica_path, "bob 3")


def test_a_record_erased_before_it_was_shipped_ships_erased(tmp_path, open_stream):
    writer_path, replica_path = tmp_path / "w", tmp_path / "r"
    alice, bob = _deltas()
    with LmdbLog(writer_path) as w:
        w.append_batch(alice + bob)
    report = _erase(writer_path, braid="alice")
    with LmdbLog(writer_path) as w:
        Shipper(w, open_stream()).ship(timeout=20)
        head = w.head()
    with LmdbLog(replica_path) as r:
        assert Replica(r, open_stream()).catch_up(timeout=20) == head
        assert r.verify() == head
        assert r.read(report.seqs[0]).delta.erased.by == report.seq
    assert files_holding(replica_path, SECRET) == {}


def test_a_new_replica_of_a_stream_that_still_holds_the_text_ends_erased(tmp_path, open_stream):
    """The stream keeps the messages it was sent until its retention drops them (a copy
    outside the store, docs/forgetting.md); a replica built from it afterwards applies the
    erasure when it reaches it."""
    writer_path = tmp_path / "w"
    alice, bob = _deltas()
    with LmdbLog(writer_path) as w:
        w.append_batch(alice + bob)
        Shipper(w, open_stream()).ship(timeout=20)
    report = _erase(writer_path, braid="alice")
    with LmdbLog(writer_path) as w:
        Shipper(w, open_stream()).ship(timeout=20)
        head = w.head()
    with LmdbLog(tmp_path / "late") as r:
        assert Replica(r, open_stream()).catch_up(timeout=20) == head
        assert all(r.read(s).delta.erased is not None for s in report.seqs)
    assert files_holding(tmp_path / "late", SECRET) == {}
