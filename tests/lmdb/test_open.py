"""Opening a store: after fork, while another process grows it, a file cut short, a foreign
LMDB environment. Each opens or is refused with a braidlog error; none crashes."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import lmdb
import pytest

from braidlog import LmdbLog, StorageError
from braidlog.cli import main
from tests.support import make_delta
from tests.support.workers import refused_in_child


def _worker(args: tuple[str, int]) -> tuple[int, str, int]:
    path, i = args
    with LmdbLog(path) as log:  # the parent has this store open: the child opens its own
        seq = log.append(make_delta(1000 + i, braid=f"w{i}"))
        return seq, log.read(seq).delta.braid_id, log.head().seq


def test_fork_pool_workers_open_append_and_read_a_store_the_parent_has_open(lmdb_path):
    parent = LmdbLog(lmdb_path)
    parent.append_batch([make_delta(i) for i in range(5)])
    with multiprocessing.get_context("fork").Pool(3) as pool:
        results = pool.map(_worker, [(str(lmdb_path), i) for i in range(6)])
    assert sorted(seq for seq, _, _ in results) == list(range(6, 12))
    assert all(braid == f"w{i}" for i, (_, braid, _) in enumerate(results))
    assert parent.head().seq == 11  # the parent's environment was not disturbed
    assert [r.delta.braid_id for r in parent.scan(6)] == [b for _, b, _ in sorted(results)]
    parent.verify()
    parent.append(make_delta(99))
    parent.close()


def _a_thread_inside_a_write(lmdb_path) -> tuple[LmdbLog, threading.Thread, threading.Event]:
    """A store with one delta and a thread held inside the write transaction of a second,
    until the returned event is set."""
    log = LmdbLog(lmdb_path)
    log.append(make_delta(0))
    inside, release = threading.Event(), threading.Event()

    def prepare(head):
        inside.set()
        release.wait(30)
        return [make_delta(1)]

    t = threading.Thread(target=log.commit_locked, args=(prepare,))
    t.start()
    assert inside.wait(30)
    return log, t, release


def test_a_child_forked_while_a_thread_is_in_a_transaction_is_told_what_to_do(lmdb_path):
    log, t, release = _a_thread_inside_a_write(lmdb_path)
    # the child: the inherited environment has the parent's write transaction in it
    refused = refused_in_child(lambda: LmdbLog(lmdb_path), "'spawn' or 'forkserver' start method")
    release.set()
    t.join()
    assert refused
    assert log.head().seq == 2  # the parent's transaction committed untouched
    log.verify()
    log.close()


def _close_while_another_thread_writes(lmdb_path) -> int:
    log, t, release = _a_thread_inside_a_write(lmdb_path)
    closer = threading.Thread(target=log.close)
    closer.start()
    closer.join(0.3)
    if not closer.is_alive():
        return 5  # the close did not wait for the transaction
    release.set()
    t.join()
    closer.join(30)
    try:
        log.head()
    except StorageError as e:
        if "is closed" not in str(e):
            return 6
    with LmdbLog(lmdb_path) as again:
        return 0 if again.head().seq == 2 else 7


def test_closing_waits_for_another_threads_transaction(lmdb_path):
    """Closing LMDB under a transaction crashes the process: the close waits for it to end."""
    pid = os.fork()  # a crash must not take the test run with it
    if pid == 0:
        code = 3
        try:
            code = _close_while_another_thread_writes(lmdb_path)
        except BaseException:
            code = 4
        os._exit(code)
    for _ in range(600):  # a hung close fails the test, not the run
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("closing the store hung with another thread's transaction in it")
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.slow
def test_opening_while_another_process_grows_the_map(tmp_path):
    path, stop = tmp_path / "growing", tmp_path / "stop"
    LmdbLog(path, map_size=1 << 20).close()
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {os.getcwd()!r})
        from braidlog import LmdbLog
        from tests.support import make_delta
        log = LmdbLog({str(path)!r}, map_size=1 << 20, durable=False)
        big, i = "x" * 20000, 0
        print("writing", flush=True)
        while not os.path.exists({str(stop)!r}):
            log.append_batch([make_delta(i + j, payload={{"text": big}}) for j in range(4)])
            i += 4
        print(log.stat()["map_size"], flush=True)
    """)], stdout=subprocess.PIPE, text=True)
    errors, heads = [], []
    try:
        assert writer.stdout.readline() == "writing\n"
        for _ in range(1000):
            try:
                with LmdbLog(path, readonly=True, map_size=1 << 20) as log:
                    head = log.head().seq
                    if head:
                        assert log.read(head).seq == head
                    heads.append(head)
            except Exception as e:  # any exception: counted, then asserted to be none
                errors.append(repr(e))
    finally:
        stop.touch()
        out, _ = writer.communicate(timeout=300)
    assert writer.returncode == 0
    assert int(out) >= 1 << 24, "the writer grew the map several times meanwhile"
    assert len(set(heads)) > 10, "the opens saw the log grow"
    assert errors == [], f"{len(errors)} of 1000 opens failed: {errors[:3]}"


def _cut(path, fraction: float) -> tuple[int, int]:
    data = path / "data.mdb"
    full = data.stat().st_size
    with open(data, "r+b") as f:
        f.truncate(int(full * fraction))
    return full, int(full * fraction)


def _store_of(path, n: int = 2000) -> None:
    with LmdbLog(path, durable=False) as log:
        for i in range(0, n, 500):
            log.append_batch([make_delta(i + j, payload={"text": "y" * 300}) for j in range(500)])


def test_a_file_cut_short_is_refused_with_both_sizes_and_the_remedy(lmdb_path):
    _store_of(lmdb_path)
    _, size = _cut(lmdb_path, 0.3)
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.getcwd()!r})
        from braidlog import LmdbLog, StorageError
        from braidlog.cli import main
        try:
            LmdbLog({str(lmdb_path)!r})
        except StorageError as e:
            print("open:", e)
        try:
            LmdbLog({str(lmdb_path)!r}, readonly=True, check_head=False).verify()
        except StorageError as e:
            print("verify:", e)
        sys.exit(main(["--store", {str(lmdb_path)!r}, "verify"]))
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stderr  # not -7 (SIGBUS)
    out = run.stdout.splitlines()
    assert [line.split(":")[0] for line in out] == ["open", "verify"]
    for line in out + [run.stderr]:
        assert f"is {size:,} bytes" in line and "needs" in line and "cut short" in line
        assert "restore the store from a backup" in line
    assert "braidlog: error:" in run.stderr


def test_a_file_cut_inside_its_meta_pages_is_refused(lmdb_path):
    _store_of(lmdb_path, 10)
    with open(lmdb_path / "data.mdb", "r+b") as f:
        f.truncate(4100)  # pages are 4096 bytes: meta page 1 starts at 4096
    with pytest.raises(StorageError, match="inside meta page 1"):
        LmdbLog(lmdb_path)


def test_a_file_that_is_not_lmdb_is_refused(lmdb_path):
    lmdb_path.mkdir()
    (lmdb_path / "data.mdb").write_bytes(b"\x00" * 10000)
    with pytest.raises(StorageError, match="not an LMDB data file"):
        LmdbLog(lmdb_path)


def test_a_plain_lmdb_environment_with_a_key_named_meta_is_not_a_braidlog_store(tmp_path):
    path = tmp_path / "plain"
    env = lmdb.open(str(path))
    with env.begin(write=True) as txn:
        txn.put(b"meta", b"some value")
        txn.put(b"other", b"1")
    env.close()
    for readonly in (False, True):
        with pytest.raises(StorageError, match="not a braidlog store"):
            LmdbLog(path, readonly=readonly)
    assert main(["--store", str(path), "verify"]) == 1


def test_a_store_with_a_table_braidlog_never_writes_is_refused(lmdb_path):
    LmdbLog(lmdb_path).close()
    env = lmdb.open(str(lmdb_path), max_dbs=16)
    env.open_db(b"extra")
    env.close()
    with pytest.raises(StorageError, match="holds extra, which braidlog never writes"):
        LmdbLog(lmdb_path)


def test_a_store_that_lost_a_table_is_refused_not_given_an_empty_one(lmdb_path):
    with LmdbLog(lmdb_path) as log:
        log.append(make_delta(0))
    env = lmdb.open(str(lmdb_path), max_dbs=16)
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(b"ids", txn=txn), delete=True)
    env.close()
    for readonly in (False, True):
        with pytest.raises(StorageError, match="lacks the table"):
            LmdbLog(lmdb_path, readonly=readonly)
