"""LmdbLog beyond the contract: persistence, format, growth, fork, tampering, read-only."""

from __future__ import annotations

import os
import subprocess
import sys

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from braidlog import DecodeError, IntegrityError, LmdbLog, StorageError
from braidlog.lmdb.log import FORMAT_VERSION
from tests.support import ROOT, in_child, make_delta


def test_records_survive_close_and_reopen(lmdb_path):
    with LmdbLog(lmdb_path) as log:
        log.append_batch([make_delta(i) for i in range(5)])
        head = log.head()
    with LmdbLog(lmdb_path) as log:
        assert log.head() == head
        assert log.verify() == head
        assert log.append(make_delta(5)) == 6


def test_a_file_is_not_a_store(tmp_path):
    f = tmp_path / "file"
    f.write_text("hello")
    with pytest.raises(StorageError, match="is a file, not a braidlog store"):
        LmdbLog(f)


def test_a_directory_of_other_files_is_not_a_store(tmp_path):
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(StorageError, match="not a braidlog store"):
        LmdbLog(tmp_path)


def test_a_foreign_lmdb_environment_is_not_a_store(tmp_path):
    env = lmdb.open(str(tmp_path / "foreign"), max_dbs=2)
    with env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    env.close()
    with pytest.raises(StorageError, match="an LMDB environment but not a braidlog store"):
        LmdbLog(tmp_path / "foreign")


def test_a_meta_table_without_a_format_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "odd"
    env = lmdb.open(str(path), max_dbs=2)
    env.open_db(b"meta")
    env.close()
    with pytest.raises(StorageError, match="has no braidlog format version"):
        LmdbLog(path)
    env = lmdb.open(str(path), max_dbs=2)
    with env.begin() as txn:
        assert [bytes(k) for k, _ in txn.cursor()] == [b"meta"]  # no table was added, no format stamped
        assert txn.get(b"format", db=env.open_db(b"meta", txn=txn, create=False)) is None
    env.close()


def test_a_format_that_is_not_a_number_is_refused(tmp_path):
    path = tmp_path / "odd"
    env = lmdb.open(str(path), max_dbs=2)
    with env.begin(write=True) as txn:
        txn.put(b"format", b"one", db=env.open_db(b"meta", txn=txn))
    env.close()
    with pytest.raises(StorageError, match="has no braidlog format version"):
        LmdbLog(path)


def test_a_newer_format_is_refused(lmdb_path):
    LmdbLog(lmdb_path).close()
    env = lmdb.open(str(lmdb_path), max_dbs=16)
    meta = env.open_db(b"meta")
    with env.begin(write=True) as txn:
        txn.put(b"format", str(FORMAT_VERSION + 1).encode(), db=meta)
    env.close()
    with pytest.raises(StorageError, match=f"format version {FORMAT_VERSION + 1}.*upgrade braidlog"):
        LmdbLog(lmdb_path)


def test_missing_store_without_create(lmdb_path):
    with pytest.raises(StorageError, match="no store at"):
        LmdbLog(lmdb_path, create=False)


def test_the_map_grows_by_itself(lmdb_path):
    with LmdbLog(lmdb_path, map_size=64 * 1024) as log:
        for i in range(40):
            log.append_batch([make_delta(i * 50 + j, payload={"text": "x" * 500}) for j in range(50)])
        assert log.head().seq == 2000
        assert log.stat()["map_size"] > 64 * 1024
        log.verify()


def test_readonly_store_refuses_writes(lmdb_path):
    LmdbLog(lmdb_path).close()
    with LmdbLog(lmdb_path, readonly=True) as log:
        with pytest.raises(StorageError, match="read-only"):
            log.append(make_delta(0))


def test_a_store_used_after_fork_raises_in_the_child(lmdb_path):
    log = LmdbLog(lmdb_path)
    log.append(make_delta(0))
    pid = os.fork()
    if pid == 0:  # child
        try:
            log.head()
        except StorageError as e:
            os._exit(0 if "opened before fork" in str(e) else 2)
        os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert log.head().seq == 1
    log.close()


def _tamper(path, seq: int, offset: int) -> bytes:
    env = lmdb.open(str(path), max_dbs=16)
    db = env.open_db(b"log")
    with env.begin(write=True) as txn:
        key = seq.to_bytes(8, "big")
        value = bytearray(txn.get(key, db=db))
        old = bytes(value)
        value[offset % len(value)] ^= 0x01
        txn.put(key, bytes(value), db=db)
    env.close()
    return old


def _restore(path, seq: int, old: bytes) -> None:
    env = lmdb.open(str(path), max_dbs=16)
    db = env.open_db(b"log")
    with env.begin(write=True) as txn:
        txn.put(seq.to_bytes(8, "big"), old, db=db)
    env.close()


@pytest.fixture(scope="module")
def tamper_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("tamper") / "store"
    with LmdbLog(path) as log:
        log.append_batch([make_delta(i) for i in range(30)])
    return path


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seq=st.integers(1, 30), offset=st.integers(0, 10_000))
def test_flipping_any_byte_of_any_record_is_named_by_verify(tamper_store, seq, offset):
    old = _tamper(tamper_store, seq, offset)
    try:
        with LmdbLog(tamper_store, readonly=True, check_head=False) as log:
            with pytest.raises(IntegrityError) as e:
                log.verify()
            assert e.value.seq == seq
            assert e.value.expected != e.value.found
    finally:
        _restore(tamper_store, seq, old)
    with LmdbLog(tamper_store, readonly=True) as log:
        log.verify()


def test_a_missing_record_is_named(lmdb_path):
    with LmdbLog(lmdb_path) as log:
        log.append_batch([make_delta(i) for i in range(5)])
    env = lmdb.open(str(lmdb_path), max_dbs=16)
    with env.begin(write=True) as txn:
        txn.delete((3).to_bytes(8, "big"), db=env.open_db(b"log", txn=txn))
    env.close()
    with LmdbLog(lmdb_path, readonly=True, check_head=False) as log:
        with pytest.raises(IntegrityError, match="seq 3 is missing") as e:
            log.verify()
        assert e.value.seq == 3


def _edit_log_table(path, edit) -> None:
    env = lmdb.open(str(path), max_dbs=16)
    with env.begin(write=True) as txn:
        edit(txn, env.open_db(b"log", txn=txn))
    env.close()


def test_scans_of_a_log_with_a_gap_name_each_record_by_its_own_key(lmdb_path):
    """Scans read a run of rows without their keys when the run's first and last keys and its
    length give the seqs it holds: in a run with a missing row, each record keeps its own key
    (a key that is no seq, here nine bytes, read as a number, as reads always named it); in a
    run whose ends and length are those of seqs 5..12, the row between 6 and 8 is named 7. Only
    damage makes either (verify names it), and a scan raised nothing for it before either."""
    with LmdbLog(lmdb_path) as log:
        log.append_batch([make_delta(i) for i in range(12)])
        rows = {r.seq: r for r in log.scan()}

    def damage(txn, db):
        moved = txn.get((7).to_bytes(8, "big"), db=db)
        txn.delete((3).to_bytes(8, "big"), db=db)
        txn.delete((7).to_bytes(8, "big"), db=db)
        txn.put((6).to_bytes(8, "big") + b"\x00", moved, db=db)  # sorts between 6 and 8
    _edit_log_table(lmdb_path, damage)
    odd = 6 << 8  # the nine-byte key read as a number, as a keyed read names it
    with LmdbLog(lmdb_path, readonly=True, check_head=False) as log:
        want = [1, 2, 4, 5, 6, odd, 8, 9, 10, 11, 12]
        assert [r.seq for r in log.scan()] == want
        assert [r.seq for r in log.scan(reverse=True)] == want[::-1]
        assert [r.seq for r in log.scan(2, 9)] == [2, 4, 5, 6, odd, 8]
        assert [r.seq for r in log.scan(4, limit=3)] == [4, 5, 6]
        assert [row.seq for row in log.scan_rows(1, 6)] == [1, 2, 4, 5]
        assert [seq for seq, _, _ in log.scan_bodies(5, 13)] == [5, 6, 7, 8, 9, 10, 11, 12]
        with pytest.raises(IntegrityError, match="seq 3 is missing"):
            log.verify()
        for r in log.scan():
            want_rec = rows[7] if r.seq == odd else rows[r.seq]
            assert (r.hash, r.delta) == (want_rec.hash, want_rec.delta)


def test_a_row_shorter_than_a_rows_head_is_not_a_delta(lmdb_path):
    with LmdbLog(lmdb_path) as log:
        log.append_batch([make_delta(i) for i in range(4)])
    _edit_log_table(lmdb_path, lambda txn, db: txn.put((2).to_bytes(8, "big"), b"short", db=db))
    with LmdbLog(lmdb_path, readonly=True, check_head=False) as log:
        for read in (lambda: list(log.scan()), lambda: list(log.scan(reverse=True)),
                     lambda: log.read(2)):
            with pytest.raises(DecodeError, match="the record at seq 2 is not a delta"):
                read()
        assert [r.seq for r in log.scan(3)] == [3, 4]


def test_second_writer_process_waits_for_the_first(lmdb_path):
    """LMDB's writer lock: a second process's write blocks until the first commits, then lands."""
    LmdbLog(lmdb_path).close()
    code = f"""
import sys, time
sys.path.insert(0, {os.getcwd()!r})
from braidlog import LmdbLog
from tests.support import make_delta
print("start", flush=True)
t = time.monotonic()
log = LmdbLog({str(lmdb_path)!r})
seq = log.append(make_delta(1, braid="second"))
print(seq, round(time.monotonic() - t, 3))
"""
    log = LmdbLog(lmdb_path)
    with log._env.begin(write=True) as txn:  # hold the writer lock, as a long commit would
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline() == "start\n"
        try:
            proc.wait(timeout=1.0)
            pytest.fail("the second writer did not wait")
        except subprocess.TimeoutExpired:
            pass
        txn.put(b"probe", b"1", db=log._db["meta"])
    out, _ = proc.communicate(timeout=30)
    seq, waited = out.split()
    assert int(seq) == 1 and float(waited) >= 0.9
    assert log.braid_head("second") == (1, 1)
    log.close()


def test_opening_checks_the_head_record_in_constant_time(lmdb_path):
    with LmdbLog(lmdb_path) as log:
        log.append_batch([make_delta(i) for i in range(5)])
    old = _tamper(lmdb_path, 5, 100)
    with pytest.raises(IntegrityError, match=r"head record \(seq 5\) does not chain.*braidlog verify") as e:
        LmdbLog(lmdb_path)
    assert e.value.seq == 5
    with LmdbLog(lmdb_path, check_head=False) as log:  # still open to audit it
        with pytest.raises(IntegrityError):
            log.verify()
    _restore(lmdb_path, 5, old)
    with LmdbLog(lmdb_path) as log:
        assert log.check_head() == log.head()


def test_a_record_that_does_not_decode_is_a_decode_error_naming_its_seq(lmdb_path):
    from braidlog import DecodeError

    with LmdbLog(lmdb_path) as log:
        log.append_batch([make_delta(i) for i in range(3)])
    env = lmdb.open(str(lmdb_path), max_dbs=16)
    db = env.open_db(b"log")
    with env.begin(write=True) as txn:
        value = bytes(txn.get((2).to_bytes(8, "big"), db=db))
        txn.put((2).to_bytes(8, "big"), value[:40] + b"\x93\x01\x02", db=db)
    env.close()
    with LmdbLog(lmdb_path, check_head=False) as log:
        with pytest.raises(DecodeError, match="seq 2 is not a delta"):
            list(log.scan())
        with pytest.raises(DecodeError, match="seq 2 is not a delta"):
            log.read(2)
        with pytest.raises(IntegrityError) as e:
            log.verify()
        assert e.value.seq == 2


def test_a_compacting_copy_of_a_store_with_large_indexes(lmdb_path, tmp_path):
    """LMDB 0.9 segfaults compacting a DUPFIXED table with a few hundred values under one key."""
    with LmdbLog(lmdb_path) as log:
        for i in range(0, 1200, 400):
            log.append_batch([make_delta(j) for j in range(i, i + 400)])  # one braid, one kind
        head = log.head()
        log.copy(tmp_path / "copy")
    with LmdbLog(tmp_path / "copy", readonly=True) as copy:
        assert copy.verify() == head
        assert copy.braid_head("b1") == (1200, 1200)
        assert [r.seq for r in copy.scan_kind("message", reverse=True, limit=2)] == [1200, 1199]


def test_a_closed_store_refuses_use_even_while_another_handle_is_open(lmdb_path):
    a, b = LmdbLog(lmdb_path), LmdbLog(lmdb_path)
    a.close()
    with pytest.raises(StorageError, match="is closed"):
        a.append(make_delta(0))
    assert b.append(make_delta(1)) == 1
    b.close()


def test_a_durable_log_syncs_its_commits_on_an_environment_opened_fast(lmdb_path, monkeypatch):
    fast = LmdbLog(lmdb_path, durable=False)
    durable = LmdbLog(lmdb_path, durable=True)
    synced = []
    monkeypatch.setattr(durable._shared_env, "sync", lambda: synced.append(True))
    durable.append(make_delta(0))
    fast.append(make_delta(1))
    assert synced == [True], "only the durable log's commit is synced"
    fast.close(), durable.close()


def test_out_of_range_seqs_are_index_errors(lmdb_path):
    with LmdbLog(lmdb_path) as log:
        log.append(make_delta(0))
        for seq in (2**64, -1):
            with pytest.raises(IndexError):
                log.read(seq)
            with pytest.raises(IndexError):
                log.body(seq)
        with pytest.raises(IndexError):
            log.hash_at(-1)


def test_a_plain_copy_while_another_thread_writes(lmdb_path, tmp_path):
    import threading

    from braidlog import ConflictError

    log = LmdbLog(lmdb_path)
    log.append_batch([make_delta(i) for i in range(50)])
    stop = threading.Event()

    def conflicting_writes():
        while not stop.is_set():
            try:
                log.append(make_delta(99), expected_version=0)  # refused inside the write txn
            except ConflictError:
                pass

    t = threading.Thread(target=conflicting_writes)
    t.start()
    try:
        for i in range(20):
            log.copy(tmp_path / f"copy{i}", compact=False)
    finally:
        stop.set()
        t.join(10)
    assert not t.is_alive()
    log.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc are Linux's")
def test_release_pages_drops_the_log_from_the_resident_set(tmp_path):
    """A whole scan maps the log's pages into the process; release_pages hands them back to the
    page cache (the reads after it still see every record)."""
    with LmdbLog(tmp_path / "s", durable=False) as log:
        for lo in range(0, 20_000, 2_000):
            log.append_batch([make_delta(i, payload={"text": "x" * 1000}) for i in range(lo, lo + 2_000)])

    def file_kb() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("RssFile"))

    def run() -> tuple[int, int, int, int]:
        with LmdbLog(tmp_path / "s") as log:
            before = file_kb()
            n = sum(1 for _ in log.scan_bodies())
            read = file_kb()
            log.release_pages()
            released = file_kb()
            assert sum(1 for _ in log.scan_bodies()) == n
            return before, read, released, n
    before, read, released, n = in_child(run)
    assert n == 20_000 and read - before > 15_000  # about 22 MB of records, mapped
    assert read - released > 15_000


def test_the_tree_stays_right_when_writers_take_turns_and_a_write_runs_again(tmp_path):
    """Each log starts its next tree append from the peaks it kept, only while the log still
    ends where it left it: two handles taking turns, another process in between, and a batch
    written again after the map grew all leave the tree verify recomputes."""
    from braidlog.tree import Frontier, leaf_hash

    path = tmp_path / "store"
    a, b = LmdbLog(path, map_size=1 << 16), LmdbLog(path)
    i = 0
    for _round in range(6):
        for log in (a, b, a):
            log.append(make_delta(i))
            i += 1
        big = [make_delta(i + k, payload={"text": "x" * 2000}) for k in range(40)]
        a.append_batch(big)  # the map grows: the write runs again
        i += 40
        code = ("import sys; from braidlog import LmdbLog; from tests.support import make_delta; "
                f"LmdbLog(sys.argv[1]).append(make_delta({i}))")
        subprocess.run([sys.executable, "-c", code, str(path)], check=True,
                       cwd=ROOT)
        i += 1
    assert a.verify().seq == i
    frontier = Frontier()
    for row in a.scan_rows():
        frontier.push(leaf_hash(row.entry))
    root = frontier.root()
    from braidlog.tree import resolve

    assert resolve([(0, i)], a.tree_hashes) == [root]
    a.close()
    b.close()


def test_peaks_kept_from_a_write_that_failed_are_not_used_for_another_log(tmp_path):
    from braidlog.chain import link
    from braidlog.lmdb.format import tree_nodes

    path = tmp_path / "store"
    a, b = LmdbLog(path), LmdbLog(path)
    for i in range(5):
        a.append(make_delta(i))
    head = a.head()
    ghost = [b"\x00" * 8 + bytes([k]) * 50 for k in range(3)]  # records that never commit

    class Abort(Exception):
        pass

    def write_then_fail(txn):
        tree_nodes(txn, a._db, head.seq, ghost, a._peaks, link(head.hash, head.seq + 3, ghost[-1]))
        raise Abort

    with pytest.raises(Abort):
        a._write(write_then_fail)
    assert a._peaks.size == head.seq + 3  # kept, for a log that never came to be
    b.append_batch([make_delta(10 + k) for k in range(3)])  # the same size, other records
    for k in range(8):  # on to a tree size where a node spans the records of both
        a.append(make_delta(20 + k))
    assert a.verify().seq == head.seq + 11
    a.close()
    b.close()


def test_a_large_batch_pauses_the_garbage_collector_and_leaves_it_as_it_found_it(tmp_path):
    import gc

    from braidlog import ValidationError
    from braidlog.lmdb.log import MANY

    seen = []
    with LmdbLog(tmp_path / "s") as log:
        real = log._append_in

        def spy(*a, **k):
            seen.append(gc.isenabled())
            return real(*a, **k)
        log._append_in = spy
        log.append_batch([make_delta(i) for i in range(MANY)])
        log.append(make_delta(MANY))
        assert seen == [False, True] and gc.isenabled()  # paused for the batch alone
        bad = [make_delta(MANY + 1 + i) for i in range(MANY)] + [make_delta(0, braid="")]
        with pytest.raises(ValidationError):
            log.append_batch(bad)
        assert gc.isenabled() and log.head().seq == MANY + 1  # refused whole, collector back on
        gc.disable()
        try:
            log.append_batch([make_delta(500 + i) for i in range(MANY)])
            assert not gc.isenabled()  # the caller's choice stands
        finally:
            gc.enable()
