"""Appenders in several threads of one process share commits without asking: the first to find
no commit in flight leads and commits every batch queued by then in one transaction (one sync);
each batch is checked on its own, in a nested transaction, so one bad batch fails alone; each
appender returns only once the transaction holding its batch is committed."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from braidlog import BraidlogError, ConflictError, GenericDelta, LmdbLog, Provenance

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def msg(i: int, braid: str = "b1", **kw) -> GenericDelta:
    return GenericDelta(braid_id=braid, kind="message", ts=T0 + timedelta(seconds=i),
                        provenance=Provenance("user"), confidence=1.0, payload={"text": f"message {i}"},
                        **kw)


def commits(log: LmdbLog) -> int:
    return log._env.info()["last_txnid"]


def queued(log: LmdbLog) -> int:
    return len(log._shared_env._queue)


def grouped(log: LmdbLog, first, others):
    """Run ``first(admit)`` in a thread, its admit holding the writer's transaction open until
    every call of ``others`` (each in a thread of its own) is queued behind it; then let it go.
    The results (or exceptions) of ``first`` and of each of ``others``, in order."""
    entered, go = threading.Event(), threading.Event()

    def hold(head, staged):
        entered.set()
        assert go.wait(10)

    results: dict[int, object] = {}

    def run(k, call):
        try:
            results[k] = call()
        except Exception as e:  # any exception: the test inspects it
            results[k] = e

    threads = [threading.Thread(target=run, args=(0, lambda: first(hold)))]
    threads[0].start()
    assert entered.wait(10)
    for k, call in enumerate(others, 1):
        threads.append(threading.Thread(target=run, args=(k, call)))
        threads[-1].start()
        deadline = time.monotonic() + 10
        while queued(log) < k:  # queued in this order, so they commit in it
            assert time.monotonic() < deadline, "an appender never queued"
            time.sleep(0.001)
    go.set()
    for t in threads:
        t.join(10)
    return [results[k] for k in range(len(threads))]


def test_threads_appending_share_commits_and_each_is_written_once(tmp_path):
    log = LmdbLog(tmp_path / "s")
    before = commits(log)
    deltas = [[msg(100 * t + i, braid=f"b{t}") for i in range(40)] for t in range(8)]
    seqs: dict[int, list[int]] = {}

    def appender(t):
        seqs[t] = [log.append(d) for d in deltas[t]]

    threads = [threading.Thread(target=appender, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(s for v in seqs.values() for s in v) == list(range(1, 321))
    for t in range(8):
        assert seqs[t] == sorted(seqs[t])
        assert [log.read(s).delta for s in seqs[t]] == deltas[t]
    assert log.verify().seq == 320
    assert commits(log) - before <= 320  # never more than one commit an append
    log.close()


def test_batches_queued_behind_a_commit_are_committed_together_in_order(tmp_path):
    log = LmdbLog(tmp_path / "s")
    before = commits(log)
    out = grouped(log, lambda admit: log.commit([msg(0)], admit=admit),
                  [lambda i=i: log.append_batch([msg(10 * i), msg(10 * i + 1)]) for i in range(1, 5)])
    assert [r.seq for r in out[0]] == [1]
    assert out[1:] == [[2, 3], [4, 5], [6, 7], [8, 9]]
    assert commits(log) - before == 2  # the first alone, then the four queued behind it in one
    assert log.verify().seq == 9
    log.close()


def test_one_bad_batch_of_a_group_fails_alone(tmp_path):
    log = LmdbLog(tmp_path / "s")
    taken = msg(1)
    log.append(taken)
    before = commits(log)
    reused = GenericDelta(id=taken.id, braid_id="b1", kind="message", ts=T0,
                          provenance=Provenance("user"), confidence=1.0, payload={"text": "other bytes"})
    out = grouped(log, lambda admit: log.commit([msg(2)], admit=admit), [
        lambda: log.append(msg(3)),
        lambda: log.append_batch([msg(4), reused]),          # an id reused with other bytes
        lambda: log.append(msg(5), expected_version=1),      # stale: b1 is at 3 by then
        lambda: log.append(msg(6), expected_version=3),      # as the group left it
        lambda: log.append(taken),                           # an idempotent retry
    ])
    assert out[1] == 3
    assert isinstance(out[2], BraidlogError)
    assert isinstance(out[3], ConflictError)
    assert out[4] == 4 and out[5] == 1
    assert commits(log) - before == 2
    assert [r.delta.payload["text"] for r in log.scan()] == [
        "message 1", "message 2", "message 3", "message 6"]
    assert log.verify().seq == 4
    log.close()


def test_a_check_inside_a_group_reads_what_the_batches_before_it_wrote(tmp_path):
    log = LmdbLog(tmp_path / "s")
    seen = []

    def look(head, staged):  # a projection's check, reading through the store
        seen.append((head.seq, log.braid_head("b1").version, log.head().seq))

    out = grouped(log, lambda admit: log.commit([msg(1)], admit=admit), [
        lambda: log.append(msg(2)),
        lambda: log.commit([msg(3)], admit=look),
    ])
    assert out[2][0].seq == 3
    assert seen == [(2, 2, 2)]  # seq 2, committed in the same transaction, is seen
    log.close()


def test_an_exception_that_is_no_refusal_leaves_nothing_written(tmp_path):
    log = LmdbLog(tmp_path / "s")

    def broken(head, staged):
        raise KeyboardInterrupt  # not a refusal of this batch: the leader's commit is abandoned

    with pytest.raises(KeyboardInterrupt):
        log.commit([msg(1)], admit=broken)
    assert log.head().seq == 0
    assert log.append(msg(2)) == 1
    log.close()


def test_a_write_inside_a_write_is_refused(tmp_path):
    log = LmdbLog(tmp_path / "s")

    def nested(head, staged):
        log.append(msg(9))

    with pytest.raises(BraidlogError, match="inside a write transaction"):
        log.commit([msg(1)], admit=nested)
    assert log.head().seq == 0
    log.close()
