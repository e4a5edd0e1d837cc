"""The Bodies contract: the records as stored and chained (body, committed form, chain hash,
rows), the time index over their high-water times, and verify. Run against MemoryLog and
LmdbLog."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from braidlog import GENESIS, Head
from braidlog.chain import link
from braidlog.delta import decode_entry, encode
from braidlog.store import Bodies, record_entry
from tests.support import T0, make_delta

ROLE = Bodies  # the ``log`` fixture (tests/store/conftest.py) checks each store implements it


def test_record_hash_chains_over_the_committed_forms(log):
    ds = [make_delta(i) for i in range(3)]
    log.append_batch(ds)
    prev = GENESIS
    rows = list(log.scan_rows())
    assert [r.seq for r in rows] == [1, 2, 3] and len({r.salt for r in rows}) == 3
    for seq, row in zip((1, 2, 3), rows, strict=False):
        body = log.body(seq)
        assert body[8:] == row.data == encode(ds[seq - 1]) and row.body == body
        entry = log.entry(seq)
        assert entry == row.entry == record_entry(seq, ds[seq - 1], row.salt, row.data)
        e = decode_entry(entry)
        assert (e.seq, e.id, e.braid_id, e.kind, e.commitment) == (
            seq, ds[seq - 1].id, ds[seq - 1].braid_id, ds[seq - 1].kind,
            hashlib.sha256(row.salt + row.data).digest())
        prev = link(prev, seq, entry)
        assert log.read(seq).hash == prev == log.hash_at(seq) == row.hash
    assert log.head() == Head(3, prev)


def test_seq_at_time_is_the_longest_prefix_at_or_before_it(log):
    secs = [0, 10, 10, 5, 20, 30]  # seq 4 is stamped earlier than seq 3 (out of order)
    log.append_batch([make_delta(i, ts=T0 + timedelta(seconds=s)) for i, s in enumerate(secs)])

    def at(s):
        return log.seq_at(T0 + timedelta(seconds=s))

    assert at(-1) == 0
    assert at(0) == 1
    assert at(9) == 1
    assert at(10) == 4   # ties: every delta stamped at 10 s, and the late-arriving 5 s one after them
    assert at(19) == 4
    assert at(20) == 5
    assert at(10_000) == 6


def test_verify_recomputes_the_chain_over_a_range(log):
    assert log.verify() == Head(0, GENESIS)
    log.append_batch([make_delta(i) for i in range(5)])
    assert log.verify() == log.head()
    assert log.verify(2, 4) == Head(3, log.hash_at(3))
