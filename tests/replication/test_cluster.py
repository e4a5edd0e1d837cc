"""Failover on a real three-node nats-server cluster (R3 streams), as an operator would run it.

Old writer W, replicas R1 (promoted) and R2 (following). Every scenario ends with one history in
the stream, every delta the stream acknowledged in it, the old writer refused before it writes,
and the replicas byte-identical. The cluster is shared by the module (no node is killed here;
test_replication.py kills leaders); every scenario has its own stream.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

nats = pytest.importorskip("nats")

from braidlog import ConflictError, IntegrityError, LmdbLog  # noqa: E402  (after the importorskip above)
from braidlog.replication import EPOCH_KIND, HDR_EPOCH, Replica, Shipper, StaleWriter, Stream, SyncLog, promote  # noqa: E402  (after the importorskip above)
from tests.support import ROOT, make_delta, random_deltas  # noqa: E402  (after the importorskip above)
from tests.support.nats import NatsCluster, assert_stream_is_the_log, forge_next, raw_messages  # noqa: E402  (after the importorskip above)

pytestmark = [pytest.mark.nats, pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(nats_binary, tmp_path_factory):
    nodes = NatsCluster.start(nats_binary, tmp_path_factory.mktemp("cluster"), 3)
    yield nodes
    nodes.stop()


@pytest.fixture
def opened(cluster, tmp_path):
    """make(kind, name): an R3 Stream or an LmdbLog, closed after the test."""
    streams: list[Stream] = []
    logs: list[LmdbLog] = []

    def stream(name: str, **kw) -> Stream:
        kw.setdefault("replicas", 3)
        kw.setdefault("timeout", 5)
        s = Stream(cluster.urls, name, **kw)
        streams.append(s)
        return s

    def store(name: str) -> LmdbLog:
        log = LmdbLog(tmp_path / name, durable=False)
        logs.append(log)
        return log

    yield stream, store
    for s in streams:
        s.close()
    for log in logs:
        log.close()


def one_history(stream: Stream, writer: LmdbLog, *replicas: LmdbLog) -> None:
    """The stream is the writer's log, record for record; every replica is byte-identical."""
    assert_stream_is_the_log(stream.servers, stream.name, writer)
    bodies = list(writer.scan_bodies())
    for replica in replicas:
        assert Replica(replica, stream).catch_up(timeout=30) == writer.head()
        assert list(replica.scan_bodies()) == bodies, "a replica differs from the writer"


def epochs_of(stream: Stream) -> list[str]:
    return [h[HDR_EPOCH] for _, _, h, _ in raw_messages(stream.servers, stream.name)]


# -- the documented order ---------------------------------------------------------------------
def test_the_documented_promotion_order(opened):
    stream, store = opened
    s = stream("ORDER")
    w, r1, r2 = store("w"), store("r1"), store("r2")
    log = SyncLog(w, s)
    acked = [log.append_batch([make_delta(3 * k + j, braid=f"b{j}") for j in range(3)])
             for k in range(10)]
    Replica(r2, s).catch_up(timeout=20)
    # 1. the old writer stops (its machine is lost; its store stays where it is)
    # 2. promote a caught-up replica
    done = promote(r1, stream("ORDER", replicas=None), writer="r1", quiet=0.3, timeout=30)
    assert (done.epoch, done.caught_up, done.head.seq) == (1, w.head(), 32)  # 31 declares it
    # 3. write to it synchronously
    new = SyncLog(r1, s)
    new.append_batch([make_delta(100 + i, braid="after") for i in range(4)])
    # 4. the old writer comes back: refused before it writes, its store unchanged
    head = w.head()
    with pytest.raises(StaleWriter, match="writer epoch 1 since seq 32 \\(writer 'r1'\\)"):
        SyncLog(w, s).append(make_delta(999, braid="late"))
    assert w.head() == head
    one_history(s, r1, r2)
    assert all(r1.read(seq).delta.id == w.read(seq).delta.id for batch in acked for seq in batch)
    assert epochs_of(s) == ["0"] * 31 + ["1"] * 5


# -- the race: the old writer ships its tail right after the promotion -------------------------
def test_the_old_writers_tail_shipped_after_the_promotion_is_refused(opened, rng):
    stream, store = opened
    s = stream("RACE")
    w, r1, r2 = store("w"), store("r1"), store("r2")
    old = Shipper(w, s)
    w.append_batch(random_deltas(rng, 20))
    old.ship(timeout=20)
    w.append_batch(random_deltas(rng, 5))  # the tail: committed, not yet shipped
    done = promote(r1, stream("RACE", replicas=None), writer="r1", quiet=0.3, timeout=30)
    assert done.head.seq == 22
    wm = s.watermark()
    with pytest.raises(StaleWriter, match=r"records 21\.\.25 were never acknowledged"):
        old.ship(timeout=20)  # its cached watermark is 20: error 10071, then the fence is read
    assert s.watermark() == wm and old.shipped == 20
    SyncLog(r1, s).append(make_delta(50, braid="r1"))
    one_history(s, r1, r2)
    assert list(r1.scan_bodies(1, 21)) == list(w.scan_bodies(1, 21))


# -- the old writer and its shipper SIGSTOPped across a promotion, then resumed ----------------
def old_writer(path: str, servers: str, name: str) -> int:
    """The body of the stopped process: append and ship asynchronously until refused."""
    with LmdbLog(path, durable=False) as log, Stream(servers.split(","), name, timeout=5) as s:
        shipper = Shipper(log, s).start(poll=0.005)
        i = 0
        while shipper.error is None and i < 100_000:
            log.append(make_delta(i, braid="old"))
            i += 1
            time.sleep(0.003)
        try:
            shipper.stop(timeout=30)
        except StaleWriter as e:
            print(f"FENCED {e}", flush=True)
            return 3
    return 0


def test_the_old_writer_sigstopped_across_a_promotion_is_refused_when_resumed(
        opened, cluster, tmp_path):
    stream, store = opened
    s = stream("STOPPED")
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.replication.test_cluster", str(tmp_path / "w"),
         ",".join(cluster.urls), "STOPPED"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 30
        while s.info()["last_seq"] < 50 and time.monotonic() < end and child.poll() is None:
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGSTOP)  # writer and shipper frozen mid-flight
        r1, r2 = store("r1"), store("r2")
        Replica(r2, s).catch_up(timeout=20)
        done = promote(r1, stream("STOPPED", replicas=None), writer="r1", quiet=0.5, timeout=30)
        SyncLog(r1, s).append_batch([make_delta(i, braid="r1") for i in range(3)])
        os.kill(child.pid, signal.SIGCONT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert child.returncode == 3, err
    assert f"writer epoch 1 since seq {done.head.seq}" in out
    with LmdbLog(tmp_path / "w", durable=False) as w:
        # the old writer's records up to the fence are the history; the rest are not in it
        cut = done.caught_up.seq + 1
        assert list(w.scan_bodies(1, cut)) == list(r1.scan_bodies(1, cut))
        assert w.head().seq >= done.caught_up.seq
    one_history(s, r1, r2)
    assert r1.read(done.head.seq).delta.kind == EPOCH_KIND


# -- a promotion while the old writer is alive and writing synchronously ----------------------
def test_a_promotion_while_the_old_writer_is_alive(opened):
    stream, store = opened
    s = stream("ALIVE")
    w, r1, r2 = store("w"), store("r1"), store("r2")
    log = SyncLog(w, s)
    acked: list[str] = []
    refused: list[BaseException] = []
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            d = make_delta(i, braid="old")
            try:
                log.append(d)
            except StaleWriter as e:
                refused.append(e)
                return
            acked.append(d.id)
            i += 1
            time.sleep(0.005)  # alive, as an agent writes: not a flood that starves everyone

    thread = threading.Thread(target=write)
    thread.start()
    try:
        end = time.monotonic() + 20
        while len(acked) < 20 and time.monotonic() < end:
            time.sleep(0.01)
        with pytest.raises(ConflictError, match="still moving.*Stop the old writer first"):
            promote(r1, stream("ALIVE", replicas=None), quiet=0.5, timeout=30)
        done = promote(r1, stream("ALIVE", replicas=None), writer="r1", quiet=0.5, force=True,
                       timeout=30)
        thread.join(30)
    finally:
        stop.set()
        thread.join(10)
    assert refused and "fenced" in str(refused[0])
    SyncLog(r1, s).append(make_delta(7, braid="r1"))
    # synchronous mode: the old writer's store holds exactly what the stream acknowledged
    assert w.head() == done.caught_up
    assert [r1.read(seq).delta.id for seq in range(1, done.caught_up.seq + 1)] == acked
    one_history(s, r1, r2)


# -- records published into the stream by a third client ---------------------------------------
@pytest.mark.parametrize("how", ["bytes", "prev"])
def test_a_foreign_record_from_a_third_client(opened, how):
    stream, store = opened
    s = stream(f"FOREIGN{how}")
    w, r1 = store("w"), store("r1")
    log = SyncLog(w, s)
    for i in range(8):
        log.append(make_delta(i))
    replica = Replica(r1, s)
    replica.catch_up(timeout=20)
    w.append(make_delta(8))  # committed, about to ship
    assert forge_next(w, s, how) == 9
    with pytest.raises(IntegrityError, match="seq 9 holds a foreign or corrupt record"):
        Shipper(w, s).ship(timeout=20)
    with pytest.raises(IntegrityError, match="record seq 9 refused"):
        replica.catch_up(timeout=20)
    assert w.head().seq == 9 and r1.head().seq == 8
    # recovery: the verified store ships to a new stream; the stopped replica moves there
    assert w.verify() == w.head()
    fresh = stream(f"FOREIGN{how}2")
    SyncLog(w, fresh).append(make_delta(10))
    r2 = store("r2")
    one_history(fresh, w, r1, r2)


# -- replication factor ------------------------------------------------------------------------
def test_an_r1_stream_is_scaled_to_the_replicas_asked_for(opened):
    stream, store = opened
    s1 = stream("SCALE", replicas=1)
    assert s1.info()["replicas"] == 1
    SyncLog(store("w"), s1).append(make_delta(1))
    s3 = stream("SCALE", replicas=3)
    assert s3.replicas == 3 and s3.info()["replicas"] == 3
    assert s3.watermark().seq == 1


if __name__ == "__main__":
    sys.exit(old_writer(*sys.argv[1:4]))
