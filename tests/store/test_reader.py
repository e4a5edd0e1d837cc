"""The LogReader contract: the head, a record by seq or delta id, the scans, a braid's version.
Run against MemoryLog and LmdbLog."""

from __future__ import annotations

import pytest

from braidlog import GENESIS, BeadRef, Head, Provenance, Refs
from braidlog.store import LogReader
from tests.support import make_delta

ROLE = LogReader  # the ``log`` fixture (tests/store/conftest.py) checks each store implements it


def seqs(records):
    return [r.seq for r in records]


def test_empty_store(log):
    assert log.head() == Head(0, GENESIS)
    assert list(log.scan()) == []
    assert log.get("01ARZ3NDEKTSV4RRFFQ69G5FAV") is None
    assert log.braid_head("b1") == (0, 0)
    with pytest.raises(IndexError):
        log.read(1)


def test_read_and_get_return_what_was_appended(log):
    ds = [make_delta(i) for i in range(3)]
    log.append_batch(ds)
    for seq, d in enumerate(ds, 1):
        assert log.read(seq).delta == d
        assert log.get(d.id).seq == seq
        assert log.seq_of(d.id) == seq


def test_delta_ids_are_looked_up_case_insensitively(log):
    d = make_delta(0)
    log.append(d)
    assert log.seq_of(d.id.lower()) == 1 and log.get(d.id.lower()).delta == d


def test_scan_ranges_are_half_open_forward_and_reverse_with_limit(log):
    log.append_batch([make_delta(i) for i in range(10)])
    assert seqs(log.scan(3, 7)) == [3, 4, 5, 6]
    assert seqs(log.scan(3, 7, reverse=True)) == [6, 5, 4, 3]
    assert seqs(log.scan(limit=2)) == [1, 2]
    assert seqs(log.scan(reverse=True, limit=3)) == [10, 9, 8]
    assert seqs(log.scan(9, 100)) == [9, 10]
    assert seqs(log.scan(0, 2)) == [1]
    assert seqs(log.scan(5, 5)) == []


def test_scan_by_braid_kind_and_refs(log):
    target = make_delta(0, braid="a")
    ds = [target,
          make_delta(1, braid="b", kind="tick", payload={}),
          make_delta(2, braid="a", refs=Refs(deltas=(target.id,), beads=(BeadRef("bead-1", "used", "v-1"),))),
          make_delta(3, braid="b", refs=Refs(knots=("knot-9",), episodes=("ep-1",))),
          make_delta(4, braid="a", kind="tick", payload={}),
          make_delta(5, braid="a", provenance=Provenance("assistant", episode_id="ep-1"))]
    log.append_batch(ds)
    assert seqs(log.scan_braid("a")) == [1, 3, 5, 6]
    assert seqs(log.scan_braid("a", 2, 6)) == [3, 5]
    assert seqs(log.scan_braid("a", reverse=True, limit=2)) == [6, 5]
    assert seqs(log.scan_braid("a", 1, 6, reverse=True)) == [5, 3, 1]
    assert seqs(log.scan_braid("zzz")) == []
    assert seqs(log.scan_kind("tick")) == [2, 5]
    assert seqs(log.scan_refs(target.id)) == [3]
    assert seqs(log.scan_refs("bead-1")) == [3] == seqs(log.scan_refs("v-1"))
    assert seqs(log.scan_refs("ep-1")) == [4, 6]
    assert seqs(log.scan_refs("knot-9")) == [4]
