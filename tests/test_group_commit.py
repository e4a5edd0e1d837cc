"""GroupCommitter: many appenders, one transaction per group, each batch keeps its own semantics."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from braidlog import ConflictError, GenericDelta, LmdbLog, MemoryLog, Provenance, ValidationError
from braidlog.group_commit import GroupCommitter

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def msg(i: int, braid: str = "b1", **kw) -> GenericDelta:
    return GenericDelta(braid_id=braid, kind="message", ts=T0 + timedelta(seconds=i),
                        provenance=Provenance("user"), confidence=kw.pop("confidence", 1.0),
                        payload=kw.pop("payload", {"text": f"message {i}"}), **kw)


class GatedLog:
    """A store whose first append waits for ``release``, so that other appenders queue up."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.registry = inner.registry
        self.release = threading.Event()
        self.calls: list[int] = []  # deltas per append_batch call, in order

    def append_batch(self, deltas, **kw):
        deltas = list(deltas)
        first = not self.calls
        self.calls.append(len(deltas))
        if first:
            assert self.release.wait(10), "the test never released the gate"
        return self.inner.append_batch(deltas, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def run_group(committer: GroupCommitter, gate: GatedLog, first, batches):
    """Append ``first`` (which blocks in the store), queue ``batches`` behind it, release.

    Returns (result or exception) for ``first`` and for each batch, in order.
    """
    results: dict[int, object] = {}

    def go(k, args):
        deltas, kw = args
        try:
            results[k] = committer.append_batch(deltas, **kw)
        except Exception as e:  # any exception: the test inspects it
            results[k] = e

    leader = threading.Thread(target=go, args=(0, first))
    leader.start()
    while not gate.calls:
        time.sleep(0.001)
    threads = []
    for k, args in enumerate(batches, 1):
        t = threading.Thread(target=go, args=(k, args))
        t.start()
        threads.append(t)
        while len(committer._queue) < k:  # queued in this order
            time.sleep(0.001)
    gate.release.set()
    for t in [leader, *threads]:
        t.join(10)
    return [results[k] for k in range(len(batches) + 1)]


def test_queued_batches_share_one_transaction():
    gate = GatedLog(MemoryLog())
    gc = GroupCommitter(gate)
    out = run_group(gc, gate, ([msg(0)], {}), [([msg(1), msg(2)], {}), ([msg(3)], {}),
                                               ([msg(4, braid="b2")], {})])
    assert out == [[1], [2, 3], [4], [5]]
    assert gate.calls == [1, 4]  # the leader's own batch, then the three queued ones merged
    assert (gc.commits, gc.batches) == (2, 4)
    assert [r.delta.payload["text"] for r in gate.inner.scan()] == [f"message {i}" for i in range(5)]


def test_a_bad_delta_fails_only_its_own_batch():
    gate = GatedLog(MemoryLog())
    gc = GroupCommitter(gate)
    bad = msg(9, confidence=2.0)
    with pytest.raises(ValidationError) as e:
        gc.append_batch([msg(8), bad])
    assert e.value.field == "confidence" and e.value.index == 1
    assert gate.calls == []  # refused before it could join a group: nothing written
    out = run_group(gc, gate, ([msg(0)], {}), [([msg(1)], {}), ([msg(2)], {})])
    assert out == [[1], [2], [3]]


def test_a_conflict_in_a_merged_group_fails_only_the_batch_at_fault():
    gate = GatedLog(MemoryLog())
    gc = GroupCommitter(gate)
    taken = msg(0)
    reused = msg(5, id=taken.id)  # the same id with other bytes: a ConflictError
    out = run_group(gc, gate, ([taken], {}), [([msg(1)], {}), ([msg(2), reused], {}),
                                              ([msg(3)], {})])
    assert out[0] == [1] and out[1] == [2] and out[3] == [3]
    assert isinstance(out[2], ConflictError)
    assert gate.calls == [1, 4, 1, 2, 1]  # merged attempt refused, then each batch alone
    assert gate.inner.head().seq == 3


def test_the_same_delta_from_two_appenders_is_stored_once():
    """An idempotent retry keeps its meaning inside a group: both appenders get the one seq."""
    gate = GatedLog(MemoryLog())
    gc = GroupCommitter(gate)
    same = msg(1)
    out = run_group(gc, gate, ([msg(0)], {}), [([same], {}), ([same], {}), ([msg(2)], {})])
    assert out == [[1], [2], [2], [3]]
    assert gate.inner.head().seq == 3


def test_stale_expected_version_fails_only_its_batch():
    gate = GatedLog(MemoryLog())
    gc = GroupCommitter(gate)
    out = run_group(gc, gate, ([msg(0, braid="a")], {}),
                    [([msg(1, braid="b")], {"expected_version": 0}),
                     ([msg(2, braid="c")], {"expected_version": 7}),
                     ([msg(3, braid="d")], {})])
    assert out[1] == [2] and out[3] == [3]
    assert isinstance(out[2], ConflictError) and (out[2].expected, out[2].actual) == (7, 0)


def test_expected_version_sees_the_braid_as_a_lone_append_would():
    """A batch expecting braid b at version 1 must not be merged after another write to b."""
    gate = GatedLog(MemoryLog())
    gc = GroupCommitter(gate)
    out = run_group(gc, gate, ([msg(0, braid="b")], {}),
                    [([msg(1, braid="b")], {}), ([msg(2, braid="b")], {"expected_version": 2})])
    assert out == [[1], [2], [3]]
    assert gate.calls == [1, 1, 1]  # the expecting batch waited for a group of its own


def test_threads_on_a_durable_store(tmp_path):
    log = LmdbLog(tmp_path / "store")
    gc = GroupCommitter(log)
    per, threads = 40, 6
    seqs: list[list[int]] = [[] for _ in range(threads)]

    def work(k):
        for i in range(per):
            seqs[k].extend(gc.append_batch([msg(i, braid=f"t{k}"), msg(i + 1, braid=f"t{k}")]))

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    every = sorted(s for mine in seqs for s in mine)
    assert every == list(range(1, per * threads * 2 + 1))
    for mine in seqs:  # each batch is contiguous
        assert all(b == a + 1 for a, b in zip(mine[::2], mine[1::2], strict=False))
    assert gc.batches == per * threads and 1 <= gc.commits <= gc.batches
    assert log.verify().seq == per * threads * 2
    for k in range(threads):
        assert log.braid_head(f"t{k}").version == per * 2
    log.close()


def test_max_deltas_must_be_positive():
    with pytest.raises(ValueError, match="max_deltas"):
        GroupCommitter(MemoryLog(), max_deltas=0)
