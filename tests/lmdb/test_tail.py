"""Format 5's tail (braidlog/lmdb/tail.py): the braid, kind and id-digest entries and the
envelope's refers-to entries of the records past the ``indexed-to`` mark are written by the
commit that brings the log ``EVERY`` records past it. Reads on both sides of the mark equal
those of ``MemoryLog`` (every index kept at once); a process killed after a commit that did not
write them loses nothing; ``verify`` finds a damaged entry on both sides of the mark and
``repair --indexes`` brings the mark to the head."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from braidlog import ConflictError, IntegrityError, LmdbLog, MemoryLog
from braidlog.bench.data import AgentSession
from braidlog.lmdb.format import INDEXED, id_digest
from braidlog.lmdb.tail import EVERY
from tests.support import ROOT, make_delta

POOL = AgentSession(11, braids=3, entities=40).deltas(400)  # refs, payload subjects, vectors


def _mark(path) -> int | None:
    env = lmdb.open(str(path), max_dbs=16, readonly=True, lock=False)
    with env.begin() as txn:
        raw = txn.get(INDEXED, db=env.open_db(b"meta", txn=txn, create=False))
    env.close()
    return None if raw is None else int.from_bytes(raw, "big")


def _damage(path, fn):
    env = lmdb.open(str(path), max_dbs=16)
    with env.begin(write=True) as txn:
        fn(txn, lambda name: env.open_db(name.encode(), txn=txn, create=False,
                                         dupsort=name in ("braid", "kind", "refs")))
    env.close()


def _reads(log, keys) -> dict:
    """Every read through the indexes, over the keys ``keys`` names (index -> keys)."""
    out: dict = {"head": log.head().seq, "braids": log.braids()}  # (salts differ: not hashes)
    for index in ("braid", "kind", "refs"):
        out[f"counts {index}"] = log.counts(index)
    scans = {"braid": log.scan_braid, "kind": log.scan_kind, "refs": log.scan_refs}
    for index, scan in scans.items():
        for key in sorted(keys[index]):
            out[f"{index} {key}"] = [r.seq for r in scan(key)]
            out[f"{index} {key} rev"] = [r.seq for r in scan(key, 3, reverse=True, limit=5)]
            out[f"{index} {key} mid"] = [r.seq for r in scan(key, 20, 90, limit=7)]
    for braid in sorted(keys["braid"]):
        out[f"head {braid}"] = log.braid_head(braid)
    for d in keys["ids"]:
        rec = log.get(d)
        out[f"id {d}"] = (log.seq_of(d), rec.seq if rec else None)
    return out


def _keys(deltas, store) -> dict:
    """The keys ``_reads`` reads: those of ``deltas``, every referenced id ``store`` counts, and
    one key of each index that no delta has."""
    return {"braid": {d.braid_id for d in deltas} | {"nobody"},
            "kind": {d.kind for d in deltas} | {"nothing"},
            "refs": set(store.counts("refs")) | {"no-entity"},
            "ids": [d.id for d in deltas[::7]] + ["01HZZZZZZZZZZZZZZZZZZZZZZZ"]}


ops = st.lists(st.one_of(
    st.tuples(st.just("one"), st.integers(1, 3)),      # single appends
    st.tuples(st.just("batch"), st.integers(2, 90)),   # a batch, possibly past the mark's step
    st.tuples(st.just("versioned"), st.integers(1, 2)),  # expected_version from the braid head
    st.tuples(st.just("retry"), st.integers(0, 10**6)),  # an idempotent retry of a stored one
    st.tuples(st.just("reopen"), st.just(0))), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops)
def test_reads_on_both_sides_of_the_mark_equal_a_store_that_indexes_every_record_at_once(plan):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s"
        log, memory, n = LmdbLog(path, durable=False), MemoryLog(), 0
        try:
            for op, arg in plan:
                if op == "one":
                    for d_ in POOL[n:n + arg]:
                        assert log.append(d_) == memory.append(d_)
                    n += arg
                elif op == "batch":
                    assert log.append_batch(POOL[n:n + arg]) == memory.append_batch(POOL[n:n + arg])
                    n += arg
                elif op == "versioned":
                    for d_ in POOL[n:n + arg]:
                        v = memory.braid_head(d_.braid_id).version
                        assert log.append(d_, expected_version=v) == memory.append(d_, expected_version=v)
                        with pytest.raises(ConflictError):  # v is one behind now
                            log.append(make_delta(n, braid=d_.braid_id), expected_version=v)
                    n += arg
                elif op == "retry" and n:
                    again = list({POOL[arg % n].id: POOL[arg % n], POOL[(arg // 7) % n].id:
                                  POOL[(arg // 7) % n]}.values())
                    assert log.append_batch(again) == memory.append_batch(again)
                elif op == "reopen":
                    log.close()
                    log = LmdbLog(path, durable=False)
                assert _reads(log, _keys(POOL[:n], memory)) == _reads(memory, _keys(POOL[:n], memory))
            assert log.verify().seq == memory.head().seq
        finally:
            log.close()
        mark = _mark(path)
        assert mark is not None and 0 <= n - mark < EVERY  # the tail never reaches EVERY


def test_a_read_inside_the_write_sees_the_tail_and_the_batches_before_it(lmdb_path):
    with LmdbLog(lmdb_path) as log:
        log.append_batch(POOL[:70])  # a flush: the mark at 70
        log.append_batch(POOL[70:75])  # a tail of 5
        b = POOL[75].braid_id
        seen = []

        def prepare(head):
            seen.append((log.braid_head(b), [r.seq for r in log.scan_braid(b, 60)]))
            return [POOL[75]]
        log.commit_locked(prepare, expected_version=log.braid_head(b).version)
        memory = MemoryLog()
        memory.append_batch(POOL[:75])
        assert seen == [(memory.braid_head(b), [r.seq for r in memory.scan_braid(b, 60)])]

        # writers in threads share commits: each batch's expected version counts the ones before
        errors, barrier = [], threading.Barrier(6)

        def writer(k):
            barrier.wait()
            for i in range(12):
                d = make_delta(1000 * k + i, braid=f"t{k % 2}")
                try:
                    while True:
                        try:
                            log.append(d, expected_version=log.braid_head(d.braid_id).version)
                            break
                        except ConflictError:
                            continue
                except Exception as e:  # reported below
                    errors.append(e)
        threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert log.braid_head("t0").version == log.braid_head("t1").version == 36
        assert [r.seq for r in log.scan_braid("t0")] == sorted(
            r.seq for r in log.scan() if r.delta.braid_id == "t0")
        assert log.verify() == log.head()


TAIL_WRITER = """
import sys
from braidlog import LmdbLog
from braidlog.bench.data import AgentSession
log = LmdbLog(sys.argv[1])
for d in AgentSession(11, braids=3, entities=40).deltas(400)[:int(sys.argv[2])]:
    log.append(d)
print("acked", log.head().seq, flush=True)
sys.stdin.read()  # killed here, its last commits' deferred entries not written
"""


@pytest.mark.slow
def test_a_process_killed_after_commits_that_did_not_flush_loses_nothing(tmp_path):
    path = tmp_path / "s"
    n = EVERY + 9
    proc = subprocess.Popen([sys.executable, "-c", TAIL_WRITER, str(path), str(n)], cwd=str(ROOT),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().split() == ["acked", str(n)]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert _mark(path) == EVERY  # the last 9 records' entries were never written
    memory = MemoryLog()
    memory.append_batch(POOL[:n])
    with LmdbLog(path) as log:
        assert log.verify().seq == n
        keys = _keys(POOL[:n], memory)
        assert _reads(log, keys) == _reads(memory, keys)
        assert log.append_batch(POOL[n - 3:n]) == [n - 2, n - 1, n]  # retries of the tail's
        for d in POOL[n:2 * EVERY]:  # the commit that brings the tail to EVERY writes it
            assert log.append(d) == memory.append(d)
    assert _mark(path) == 2 * EVERY
    with LmdbLog(path, readonly=True) as log:
        assert log.verify().seq == 2 * EVERY
        keys = _keys(POOL[:2 * EVERY], memory)
        assert _reads(log, keys) == _reads(memory, keys)


def _tailed(path, n: int = EVERY + 10) -> None:
    with LmdbLog(path) as log:
        log.append_batch(POOL[:EVERY])
        for d in POOL[EVERY:n]:
            log.append(d)
    assert _mark(path) == EVERY


def _seq(n: int) -> bytes:
    return n.to_bytes(8, "big")


@pytest.mark.parametrize("damage, found", [
    # below the mark: an entry lost, one naming another record
    (lambda txn, db: txn.delete(POOL[3].braid_id.encode(), _seq(4), db=db("braid")),
     "the braid index lacks the entry .* -> seq 4"),
    (lambda txn, db: txn.delete(id_digest(POOL[9].id), db=db("idh")),
     "the id-digest index lacks the entry .* -> seq 10"),
    # past it: the id entry lost, an entry written where the row is the index
    (lambda txn, db: txn.delete(POOL[EVERY + 2].id.encode(), db=db("ids")),
     f"the id index lacks the entry .* -> seq {EVERY + 3}"),
    (lambda txn, db: txn.put(POOL[EVERY + 2].kind.encode(), _seq(EVERY + 3), db=db("kind")),
     f"the kind index has an entry .* -> seq {EVERY + 3}, past the indexed-to mark {EVERY}"),
    (lambda txn, db: txn.put(id_digest(POOL[EVERY + 4].id), _seq(EVERY + 5), db=db("idh")),
     f"-> seq {EVERY + 5}, past the indexed-to mark {EVERY}"),
    # the mark itself: past the head
    (lambda txn, db: txn.put(INDEXED, _seq(10_000), db=db("meta")),
     "the indexed-to mark .* is seq 10000, past the head"),
], ids=["braid below", "idh below", "ids past", "kind past", "idh past", "mark past the head"])
def test_verify_finds_a_damaged_entry_on_both_sides_of_the_mark_and_repair_mends_it(
        lmdb_path, damage, found):
    _tailed(lmdb_path)
    _damage(lmdb_path, damage)
    with LmdbLog(lmdb_path) as log:
        with pytest.raises(IntegrityError, match=found):
            log.verify()
        log.repair_indexes()
        assert log.verify().seq == EVERY + 10
    assert _mark(lmdb_path) == EVERY + 10  # every record indexed by the repair
    memory = MemoryLog()
    memory.append_batch(POOL[:EVERY + 10])
    with LmdbLog(lmdb_path) as log:
        keys = _keys(POOL[:EVERY + 10], memory)
        assert _reads(log, keys) == _reads(memory, keys)


def test_a_retry_of_a_tail_record_whose_id_entry_was_lost_is_refused(lmdb_path):
    _tailed(lmdb_path)
    d = POOL[EVERY + 1]
    _damage(lmdb_path, lambda txn, db: txn.delete(d.id.encode(), db=db("ids")))
    with LmdbLog(lmdb_path) as log:
        head = log.head()
        with pytest.raises(IntegrityError, match=f"id indexes disagree on delta {d.id}"):
            log.append(d)  # the log's tail, the second witness, holds it
        with pytest.raises(IntegrityError, match="id index has no entry"):
            log.get(d.id)
        assert log.head() == head


def test_a_store_of_a_newer_format_is_refused_with_the_existing_error(lmdb_path):
    with LmdbLog(lmdb_path) as log:
        log.append(POOL[0])
    _damage(lmdb_path, lambda txn, db: txn.put(b"format", b"6", db=db("meta")))
    from braidlog import StorageError
    with pytest.raises(StorageError, match="has format version 6; this braidlog reads up to 5"):
        LmdbLog(lmdb_path)


FLUSHER = """
import sys
from braidlog import LmdbLog
from tests.support import make_delta
log = LmdbLog(sys.argv[1])
assert not log.registry.knows_subjects("field_revised")  # its projection is not loaded here
for i in range(int(sys.argv[2])):
    log.append(make_delta(i, braid="elsewhere"))
print(log.head().seq)
"""


@pytest.mark.slow
def test_a_process_that_cannot_name_payload_subjects_flushes_the_tail_without_losing_them(lmdb_path):
    subjects = [d for d in POOL if d.kind in ("field_revised", "decision_recorded")][:6]
    assert subjects
    with LmdbLog(lmdb_path) as log:
        log.append_batch(POOL[:EVERY])
        for d in subjects:  # in the tail, their payload subjects' refers-to entries written now
            if log.seq_of(d.id) is None:
                log.append(d)
        head = log.head().seq
    out = subprocess.run([sys.executable, "-c", FLUSHER, str(lmdb_path), str(EVERY)], cwd=str(ROOT),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert _mark(lmdb_path) > head  # that process's commit wrote the tail's deferred entries
    with LmdbLog(lmdb_path) as log:
        assert log.verify().seq == head + EVERY
        memory = MemoryLog()
        memory.append_batch([r.delta for r in log.scan()])
        keys = _keys([r.delta for r in log.scan()], memory)
        assert _reads(log, keys) == _reads(memory, keys)


def test_erasure_backup_and_restore_carry_the_mark_and_the_tail(tmp_path):
    import braidlog
    from braidlog.delta import referenced_ids
    from braidlog.erasure import envelope_refs
    from braidlog.lmdb.backup import backup, restore

    path = tmp_path / "s"
    _tailed(path)
    erased = [3, EVERY + 1, EVERY + 2]  # below the mark; past it: envelope refs, payload subjects
    subjects = {s for i in erased for s in referenced_ids(POOL[i - 1]) - envelope_refs(POOL[i - 1])}
    assert subjects
    with braidlog.open(path, projections=[]) as b:
        b.erase(seqs=erased, reason="test")
    assert _mark(path) == EVERY  # rewritten with every table, its mark too; the erased delta joins the tail
    with LmdbLog(path) as log:
        assert log.verify().seq == EVERY + 11
        for s in subjects:  # the erased payloads' subjects left the index with them
            assert not set(erased) & {r.seq for r in log.scan_refs(s)}
        for i in erased:  # their envelopes stay: braid, kind, the envelope's refs
            d = POOL[i - 1]
            assert i in [r.seq for r in log.scan_braid(d.braid_id)]
            assert i in [r.seq for r in log.scan_kind(d.kind)]
            for ref in envelope_refs(d):
                assert i in [r.seq for r in log.scan_refs(ref)]
        keys = _keys(POOL[:EVERY + 10], log)
        before = _reads(log, keys)
    backup(path, tmp_path / "backup")
    restore(tmp_path / "backup", tmp_path / "restored", projections=[])
    for copy in (tmp_path / "backup", tmp_path / "restored"):
        assert _mark(copy) == EVERY
        with LmdbLog(copy, readonly=True) as log:
            assert _reads(log, keys) == before
