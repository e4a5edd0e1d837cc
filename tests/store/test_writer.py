"""The LogStore contract (what a writer adds to a reader): gap-free seqs, atomic batches, the
idempotent retry, optimistic concurrency, the admit hook, no update. Run against MemoryLog and
LmdbLog."""

from __future__ import annotations

from datetime import UTC

import msgspec
import pytest

from braidlog import ConflictError, StaleHead, ValidationError
from braidlog.store import LogStore
from tests.support import T0, make_delta

ROLE = LogStore  # the ``log`` fixture (tests/store/conftest.py) checks each store implements it


def test_append_assigns_gap_free_seqs_from_one(log):
    assert log.append(make_delta(0)) == 1
    assert log.append_batch([make_delta(i) for i in range(1, 4)]) == [2, 3, 4]
    assert log.append(make_delta(4)) == 5
    assert [r.seq for r in log.scan()] == [1, 2, 3, 4, 5]


def test_ts_is_stored_in_utc(log):
    from datetime import timedelta as td
    from datetime import timezone
    local = T0.astimezone(timezone(td(hours=5)))
    seq = log.append(make_delta(0, ts=local))
    ts = log.read(seq).delta.ts
    assert ts == T0 and ts.utcoffset() == td(0)


def test_idempotent_retry_returns_stored_seq_and_writes_nothing(log):
    ds = [make_delta(i) for i in range(3)]
    assert log.append_batch(ds) == [1, 2, 3]
    head = log.head()
    assert log.append_batch(ds) == [1, 2, 3]
    assert log.append(ds[1]) == 2
    assert log.head() == head


def test_same_id_other_bytes_is_a_conflict(log):
    d = make_delta(0)
    log.append(d)
    other = msgspec.structs.replace(d, payload={"text": "changed"})
    with pytest.raises(ConflictError, match=f"delta {d.id} is already stored at seq 1"):
        log.append(other)
    assert log.head().seq == 1


def test_duplicate_id_within_a_batch_is_refused(log):
    d = make_delta(0)
    with pytest.raises(ValidationError, match="appears twice"):
        log.append_batch([d, d])
    assert log.head().seq == 0


def test_batch_with_one_bad_delta_writes_nothing(log):
    ds = [make_delta(0), make_delta(1, confidence=1.5), make_delta(2)]
    with pytest.raises(ValidationError) as e:
        log.append_batch(ds)
    assert e.value.field == "confidence" and e.value.index == 1
    assert log.head().seq == 0 and list(log.scan()) == []


def test_expected_version_per_braid(log):
    log.append(make_delta(0, braid="a"), expected_version=0)
    log.append(make_delta(1, braid="a"), expected_version=1)
    with pytest.raises(ConflictError) as e:
        log.append(make_delta(2, braid="a"), expected_version=1)
    assert (e.value.expected, e.value.actual) == (1, 2)
    log.append(make_delta(3, braid="b"), expected_version=0)
    assert log.braid_head("a") == (2, 2) and log.braid_head("b") == (1, 3)
    assert log.head().seq == 3


def test_expected_version_mapping_for_a_batch_over_braids(log):
    log.append_batch([make_delta(0, braid="a"), make_delta(1, braid="b")],
                     expected_version={"a": 0, "b": 0})
    with pytest.raises(ConflictError):
        log.append_batch([make_delta(2, braid="a"), make_delta(3, braid="b")],
                         expected_version={"a": 1, "b": 0})
    with pytest.raises(ValidationError, match="spans"):
        log.append_batch([make_delta(4, braid="a"), make_delta(5, braid="b")], expected_version=1)
    assert log.head().seq == 2


def test_expected_head(log):
    log.append(make_delta(0))
    with pytest.raises(StaleHead) as e:
        log.append_batch([make_delta(1)], expected_head=0)
    assert (e.value.expected, e.value.actual) == (0, 1)
    assert log.append_batch([make_delta(1)], expected_head=1) == [2]


def test_an_id_from_a_refers_function_must_fit_an_index_key(log):
    import msgspec as ms

    class Note(ms.Struct):
        about: str

    log.registry.declare("test_note_about", Note, owner="tests", refers=lambda p: [p.about])
    with pytest.raises(ValidationError, match="ids must be 1 to 480 bytes"):
        log.append(make_delta(0, kind="test_note_about", payload={"about": "x" * 600}))
    assert log.append(make_delta(1, kind="test_note_about", payload={"about": "entity-1"})) == 1
    assert [r.seq for r in log.scan_refs("entity-1")] == [1]


def test_a_delta_read_back_appends_again_as_a_retry(log):
    d = make_delta(0, confidence=1)  # an int: stored canonically as the float 1.0
    seq = log.append(d)
    assert log.append(log.read(seq).delta) == seq
    assert log.head().seq == 1


def test_timestamps_before_1970_are_refused(log):
    from datetime import datetime

    with pytest.raises(ValidationError, match="at or after 1970"):
        log.append(make_delta(0, ts=datetime(1965, 1, 1, tzinfo=UTC)))
    assert log.head().seq == 0


def test_no_update_or_delete_api(log):
    for verb in ("update", "delete", "remove", "put", "set"):
        assert not hasattr(log, verb)


def test_admit_sees_the_head_and_the_staged_records_and_a_raise_writes_nothing(log):
    log.append(make_delta(0))
    seen: list = []
    records = log.commit([make_delta(1), make_delta(2)],
                         admit=lambda head, staged: seen.append((head, list(staged))))
    (head, staged), = seen
    assert head.seq == 1 and [(s.seq, s.hash) for s in staged] == \
        [(r.seq, r.hash) for r in records] == [(2, log.hash_at(2)), (3, log.hash_at(3))]
    assert [s.body for s in staged] == [log.body(2), log.body(3)]
    head = log.head()

    def refuse(head, staged):
        raise ConflictError("the replication stream refused it")

    with pytest.raises(ConflictError, match="refused it"):
        log.commit([make_delta(3)], admit=refuse)
    with pytest.raises(ConflictError, match="refused it"):
        log.commit_locked(lambda h: [make_delta(4)], admit=refuse)
    assert log.head() == head
    calls: list = []
    assert log.commit([log.read(2).delta], admit=lambda *a: calls.append(a)) == []  # a retry
    assert calls == []
