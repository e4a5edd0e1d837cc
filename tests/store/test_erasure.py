"""The Erasure contract: an erasure drops the records' payloads and keeps their envelopes and
commitments, so the chain and the tree still verify. Run against MemoryLog and LmdbLog."""

from __future__ import annotations

import hashlib

import pytest

from braidlog import ValidationError
from braidlog.delta import decode_entry
from braidlog.erasure import erasure_delta
from braidlog.store import Erasure
from tests.support import make_delta

ROLE = Erasure  # the ``log`` fixture (tests/store/conftest.py) checks each store implements it


def test_erase_keeps_the_envelope_and_the_commitment_and_the_chain(log):
    ds = [make_delta(i, braid="a") for i in range(4)]
    log.append_batch(ds)
    rows = {r.seq: r for r in log.scan_rows()}
    hashes = [log.hash_at(s) for s in range(1, 5)]
    record, commitments = log.erase([2, 3], erasure_delta([2, 3], "asked to forget"))
    assert record.seq == 5 and record.delta.kind == "erased" and log.head().seq == 5
    assert commitments == [hashlib.sha256(rows[s].salt + rows[s].data).digest() for s in (2, 3)]
    for seq in (2, 3):
        gone = log.read(seq).delta
        assert gone.payload == {} and gone.vector is None and gone.erased.by == 5
        assert (gone.id, gone.braid_id, gone.kind) == (ds[seq - 1].id, "a", ds[seq - 1].kind)
        assert gone.erased.commitment == decode_entry(log.entry(seq)).commitment
    assert log.read(1).delta == ds[0] and log.read(4).delta == ds[3]
    assert [log.hash_at(s) for s in range(1, 5)] == hashes
    assert log.verify() == log.head()


def test_erase_refuses_a_seq_outside_the_log_or_already_erased_and_writes_nothing(log):
    log.append_batch([make_delta(i) for i in range(2)])
    with pytest.raises(ValidationError, match="seq 7 is not in the log"):
        log.erase([7], erasure_delta([7], "no such record"))
    assert log.head().seq == 2
    log.erase([1], erasure_delta([1], "once"))
    head = log.head()
    with pytest.raises(ValidationError, match="seq 1 is already erased"):
        log.erase([1], erasure_delta([1], "twice"))
    assert log.head() == head
