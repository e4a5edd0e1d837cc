"""One suite every LogStore passes (as eventsourcing's shared recorder tests do).

Imported by test_store.py, which runs it against MemoryLog and LmdbLog through the ``log``
fixture.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, timedelta

import msgspec
import pytest

from braidlog import GENESIS, BeadRef, ConflictError, Head, IntegrityError, Refs, StaleHead, ValidationError
from braidlog.chain import link
from braidlog.delta import committed_form, decode_entry, encode
from tests.support import T0, make_delta


def test_empty_store(log):
    assert log.head() == Head(0, GENESIS)
    assert list(log.scan()) == []
    assert log.verify() == Head(0, GENESIS)
    assert log.get("01ARZ3NDEKTSV4RRFFQ69G5FAV") is None
    assert log.braid_head("b1") == (0, 0)
    with pytest.raises(IndexError):
        log.read(1)


def test_append_assigns_gap_free_seqs_from_one(log):
    assert log.append(make_delta(0)) == 1
    assert log.append_batch([make_delta(i) for i in range(1, 4)]) == [2, 3, 4]
    assert log.append(make_delta(4)) == 5
    assert [r.seq for r in log.scan()] == [1, 2, 3, 4, 5]


def test_read_and_get_return_what_was_appended(log):
    ds = [make_delta(i) for i in range(3)]
    log.append_batch(ds)
    for seq, d in enumerate(ds, 1):
        assert log.read(seq).delta == d
        assert log.get(d.id).seq == seq
        assert log.seq_of(d.id) == seq


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
        assert entry == row.entry == committed_form(seq, ds[seq - 1], row.salt, row.data)
        e = decode_entry(entry)
        assert (e.seq, e.id, e.braid_id, e.kind, e.commitment) == (
            seq, ds[seq - 1].id, ds[seq - 1].braid_id, ds[seq - 1].kind,
            hashlib.sha256(row.salt + row.data).digest())
        prev = link(prev, seq, entry)
        assert log.read(seq).hash == prev == log.hash_at(seq) == row.hash
    assert log.head() == Head(3, prev)


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


def test_scan_ranges_are_half_open_forward_and_reverse_with_limit(log):
    log.append_batch([make_delta(i) for i in range(10)])
    seqs = lambda it: [r.seq for r in it]
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
          make_delta(5, braid="a", provenance=__import__("braidlog").Provenance("assistant", episode_id="ep-1"))]
    log.append_batch(ds)
    seqs = lambda it: [r.seq for r in it]
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
    assert log.braids() == {"a": (4, 6), "b": (2, 4)}
    assert log.counts("kind") == {"message": 4, "tick": 2}


def test_seq_at_time_is_the_longest_prefix_at_or_before_it(log):
    secs = [0, 10, 10, 5, 20, 30]  # seq 4 is stamped earlier than seq 3 (out of order)
    log.append_batch([make_delta(i, ts=T0 + timedelta(seconds=s)) for i, s in enumerate(secs)])
    at = lambda s: log.seq_at(T0 + timedelta(seconds=s))
    assert at(-1) == 0
    assert at(0) == 1
    assert at(9) == 1
    assert at(10) == 4   # ties: every delta stamped at 10 s, and the late-arriving 5 s one after them
    assert at(19) == 4
    assert at(20) == 5
    assert at(10_000) == 6


def test_verify_names_the_first_bad_seq(log):
    log.append_batch([make_delta(i) for i in range(5)])
    assert log.verify() == log.head()
    assert log.verify(2, 4) == Head(3, log.hash_at(3))


def test_vectors_keep_one_dimension_per_space(log):
    from braidlog import Vector
    assert log.spaces() == {}
    log.append(make_delta(0, vector=Vector.of([1.0, 2.0, 3.0])))
    with pytest.raises(ValidationError, match="dimension 3"):
        log.append(make_delta(1, vector=Vector.of([1.0, 2.0])))
    log.append(make_delta(2, vector=Vector.of([1.0, 2.0], space="small")))
    with pytest.raises(ValidationError, match="finite"):
        log.append(make_delta(3, vector=Vector.of([1.0, float("nan"), 0.0])))
    with pytest.raises(ValidationError, match="finite"):
        log.append(make_delta(4, vector=Vector.of([float("inf"), 0.0, 0.0])))
    assert log.head().seq == 2
    assert log.spaces() == {"default": 3, "small": 2}


def test_checkpoints_are_kept_by_name_version_and_seq(log):
    log.put_checkpoint("p", 1, 10, b"a")
    log.put_checkpoint("p", 1, 5, b"b")
    log.put_checkpoint("p", 2, 7, b"c")
    log.put_checkpoint("q", 1, 3, b"d")
    assert log.checkpoint_seqs("p", 1) == [5, 10]
    assert log.get_checkpoint("p", 1, 10) == b"a"
    assert log.get_checkpoint("p", 1, 11) is None
    assert log.checkpoint_keys() == [("p", 1, 5), ("p", 1, 10), ("p", 2, 7), ("q", 1, 3)]


def test_no_update_or_delete_api(log):
    for verb in ("update", "delete", "remove", "put", "set"):
        assert not hasattr(log, verb)


def test_integrity_error_type_is_exported():
    assert issubclass(IntegrityError, Exception)


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


def test_delta_ids_are_looked_up_case_insensitively(log):
    d = make_delta(0)
    log.append(d)
    assert log.seq_of(d.id.lower()) == 1 and log.get(d.id.lower()).delta == d


def test_the_merkle_tree_is_rfc_6962_over_the_committed_forms(log):
    from braidlog.proofs import consistency_proof, inclusion_proof, root
    from tests.support.rfc9162 import Reference

    for start, n in ((0, 1), (1, 2), (3, 5), (8, 1), (9, 12)):  # nodes complete across batches
        log.append_batch([make_delta(i) for i in range(start, start + n)])
    ref = Reference.of_inputs([log.entry(seq) for seq in range(1, 22)])
    for size in range(1, 22):
        assert root(log, size) == ref.root(size)
        assert inclusion_proof(log, size, 21).path == ref.inclusion(size - 1, 21)
        assert consistency_proof(log, size, 21).path == ref.consistency(size, 21)
    with pytest.raises(IndexError):
        log.tree_hashes([(0, 21)])
    with pytest.raises(IndexError):
        log.tree_hashes([(3, 2)])


def test_checkpoint_notes_are_kept_by_tree_size(log):
    log.put_note(5, b"b note\n")
    log.put_note(2, b"a note\n")
    log.put_note(5, b"b note\n")
    assert log.notes() == [(2, b"a note\n"), (5, b"b note\n")]
    log.put_note(5, b"c note\n")
    assert sorted(log.notes(last=True)) == [(5, b"b note\n"), (5, b"c note\n")]
    assert len(log.notes()) == 3


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
