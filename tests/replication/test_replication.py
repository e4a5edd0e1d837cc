"""Log shipping to NATS JetStream and verified replicas, against real nats-server processes.

One-node tests share one server per module (a fresh stream each); the three-node failover
tests start their own cluster (marked cluster and slow). Every loop is bounded in count and
time; every process started here is stopped here.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time

import pytest

nats = pytest.importorskip("nats")

import braidlog  # noqa: E402  (after the importorskip above)
from braidlog import Braid, ConflictError, IntegrityError, LmdbLog, ValidationError  # noqa: E402  (after the importorskip above)
from braidlog.cli import main  # noqa: E402  (after the importorskip above)
from braidlog.recall import Recall, embed_delta  # noqa: E402  (after the importorskip above)
from braidlog.replication import (  # noqa: E402  (after the importorskip above)
    HDR_COMMIT,
    NotAcknowledged,
    Replica,
    ReplicationError,
    Shipper,
    StaleWriter,
    Stream,
    SyncLog,
    braid_token,
    promote,
)
from tests.support import ROOT, make_delta, random_deltas  # noqa: E402  (after the importorskip above)
from tests.support.nats import (  # noqa: E402  (after the importorskip above)
    COUNTS,
    NatsCluster,
    append_mixed,
    assert_stream_is_the_log,
    forged,
    free_port,
    raw_messages,
    republish,
    shipped,
)

pytestmark = pytest.mark.nats
def test_braid_ids_become_one_subject_token():
    assert braid_token("agent-7_main") == "agent-7_main"
    assert braid_token("a.b c>*") == "a~2Eb~20c~3E~2A"
    assert braid_token("é~") == "~C3~A9~7E"
    assert braid_token("a.b") != braid_token("a~2Eb")  # escaping is injective: ~ is escaped too


def test_bad_arguments_are_refused_before_anything_is_sent(url, stores):
    with pytest.raises(ValidationError, match="stream"):
        Stream(url, "bad.name")
    with pytest.raises(ValidationError, match="replicas"):
        Stream(url, "ok", replicas=0)
    with pytest.raises(ValidationError, match="servers"):
        Stream(" , ", "ok")


def test_unreachable_nats_is_a_clear_error():
    start = time.monotonic()
    with pytest.raises(ReplicationError, match="cannot reach NATS"):
        Stream(f"nats://127.0.0.1:{free_port()}", "S", timeout=0.5)
    assert time.monotonic() - start < 10


def test_a_foreign_stream_of_that_name_is_refused(url, stream_name, open_stream):
    async def make_plain() -> None:
        nc = await nats.connect(url)
        await nc.jetstream().add_stream(name=stream_name, subjects=[f"plain.{stream_name}"])
        await nc.close()

    asyncio.run(make_plain())
    with pytest.raises(ReplicationError, match="not a braidlog stream"):
        open_stream()
    with pytest.raises(ReplicationError, match="there is no stream"):
        open_stream(stream_name + "missing", create=False)


def test_a_record_larger_than_max_payload_is_a_clear_error(stores, open_stream):
    writer = stores("w")
    writer.append(make_delta(1, payload={"text": "x" * (1 << 20)}))
    with pytest.raises(ReplicationError, match="record seq 1 is .* bytes, more than .* max_payload"):
        Shipper(writer, open_stream()).ship(timeout=5)


def test_shipper_batch_size_is_checked(stores, open_stream):
    with pytest.raises(ValidationError, match="batch"):
        Shipper(stores("w"), open_stream(), batch=1001)


# -- shipping and rebuilding -----------------------------------------------------------------
def test_replica_rebuilt_from_the_stream_has_the_writers_head(stores, open_stream, rng, tmp_path):
    writer = stores("w")
    txns = append_mixed(writer, random_deltas(rng, 400, braids=4), rng)
    writer.append(make_delta(9999, braid="odd braid.id/é"))
    writer.append_batch([embed_delta(make_delta(i, payload={"text": f"note {i} about topic {i % 7}"}))
                         for i in range(60)])
    stream = open_stream()
    wm = Shipper(writer, stream).ship(timeout=20)
    assert (wm.seq, wm.hash) == writer.head()
    assert_stream_is_the_log(stream.servers, stream.name, writer)

    replica = stores("r")
    head = Replica(replica, stream).catch_up(timeout=20)
    assert head == writer.head() == replica.head()
    assert replica.verify() == writer.head()
    assert list(replica.scan_bodies()) == list(writer.scan_bodies()), "not byte-identical"
    assert replica.braids() == writer.braids()
    some = writer.read(len(txns)).delta
    assert [r.seq for r in replica.scan_refs(some.id)] == [r.seq for r in writer.scan_refs(some.id)]

    # projections, time travel and recall work on the replica, read-only
    replica.close()
    view = braidlog.open(tmp_path / "r", projections=[COUNTS], readonly=True, create=False)
    mine = Braid(writer, [COUNTS])
    try:
        assert view.state("counts") == mine.state("counts")
        mid = head.seq // 2
        assert view.at(mid).state("counts") == mine.at(mid).state("counts")
        theirs, ours = Recall(view, directory=False), Recall(writer, directory=False)
        for as_of in (None, head.seq - 30):
            got = [(h.seq, h.delta_id) for h in theirs.recall("topic 3", 5, as_of=as_of)]
            assert got and got == [(h.seq, h.delta_id) for h in ours.recall("topic 3", 5, as_of=as_of)]
        with pytest.raises(braidlog.StorageError, match="read-only"):
            view.append(make_delta(1, braid="nope"))
    finally:
        view.close()


def test_sync_appends_return_after_the_stream_holds_them(stores, open_stream):
    writer, stream = stores("w"), open_stream()
    log = SyncLog(writer, stream)
    first = make_delta(1)
    seq = log.append(first)
    assert stream.watermark().seq == seq == 1
    seqs = log.append_batch([make_delta(i, braid=f"b{i % 2}") for i in range(2, 7)])
    wm = stream.watermark()
    assert (wm.seq, wm.hash, wm.commit) == (seqs[-1], writer.head().hash, seqs[-1])
    # a Braid on a SyncLog: every append and execute is synchronous
    braid = Braid(log, [COUNTS])
    braid.append(make_delta(7))
    assert stream.watermark().seq == 7
    assert braid.state("counts") == {"b1": 4, "b0": 3}
    # one transaction = one group: its records share the marker, which is its last seq
    messages = raw_messages(stream.servers, stream.name)
    assert [int(h[HDR_COMMIT]) for _, _, h, _ in messages] == [1, 6, 6, 6, 6, 6, 7]
    assert log.append(first) == 1  # an idempotent retry ships nothing new
    assert stream.watermark().seq == 7


def test_unacknowledged_sync_append_says_so_and_ships_later(nats_binary, tmp_path, stores):
    node = NatsCluster.start(nats_binary, tmp_path / "own", 1).nodes[0]
    try:
        stream = Stream(node.url, "LOSSY", timeout=1)
        writer = stores("w")
        log = SyncLog(writer, stream, timeout=1.0)
        log.append(make_delta(1))
        node.stop()  # the stream goes away
        second = make_delta(2)
        with pytest.raises(NotAcknowledged, match=r"seq 2\.\.2 were not committed locally") as err:
            log.append(second)
        assert err.value.seqs == [2] and writer.head().seq == 1, "committed without an ack"
        node.start(port=node.port)  # it comes back (same port, same storage)
        log.timeout = 20.0  # long enough to wait out the reconnect
        # "not acknowledged" means unknown, not lost: the client may flush the unacknowledged
        # publish after reconnecting (its expected-last-sequence still fits); the next call
        # then takes it in from the stream first. Appending it again is idempotent.
        log.append(second)
        log.append(make_delta(3))
        assert writer.head().seq == 3 and writer.seq_of(second.id) == 2
        assert_stream_is_the_log(node.url, "LOSSY", writer)
        markers = [int(h[HDR_COMMIT]) for _, _, h, _ in raw_messages(node.url, "LOSSY")]
        assert markers == [1, 2, 3]
        stream.close()
    finally:
        node.stop()


def test_replica_follows_a_background_shipper(stores, open_stream, rng):
    writer, stream = stores("w"), open_stream()
    shipper = Shipper(writer, stream).start(poll=0.01)
    replica = Replica(stores("r"), stream)
    stop = threading.Event()
    follower = threading.Thread(target=lambda: replica.follow(stop, timeout=30, poll=0.05))
    follower.start()
    try:
        for batch in range(60):
            writer.append_batch(random_deltas(rng, rng.randrange(1, 6)))
            if batch % 10 == 0:
                time.sleep(0.01)
        shipper.stop()
        end = time.monotonic() + 15
        while replica.head != writer.head() and time.monotonic() < end:
            time.sleep(0.02)
    finally:
        stop.set()
        follower.join(20)
        shipper.stop()
    assert not follower.is_alive()
    assert replica.head == writer.head() == replica.store.head()


@pytest.mark.slow
def test_shipper_sigkilled_mid_group_resumes_from_the_watermark(stores, open_stream, url,
                                                                 stream_name, tmp_path, rng):
    writer = stores("w")
    writer.append_batch(random_deltas(rng, 3000))  # one transaction, many atomic batches
    writer.append(make_delta(5000))
    head = writer.head()
    stream = open_stream()
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.replication.test_replication", "ship", str(tmp_path / "w"), url,
         stream_name, "10"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 30
        while stream.info()["last_seq"] < 200 and time.monotonic() < end and child.poll() is None:
            time.sleep(0.005)
        child.send_signal(signal.SIGKILL)
        _, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    wm = stream.watermark()
    assert 0 < wm.seq < 3000, f"the shipper was not killed mid-transaction ({wm}); {err}"
    assert wm.commit == 3001 and not wm.complete  # one group: both transactions, read at once
    # a replica applies nothing of the half-shipped transaction
    replica = stores("r")
    assert Replica(replica, stream).catch_up(timeout=20).seq == 0
    with pytest.raises(ConflictError, match="ends inside a transaction"):
        promote(stores("p"), stream, quiet=0.1, timeout=20)
    # a new shipper finishes the transaction, then ships the rest: nothing lost, nothing twice
    wm = Shipper(writer, stream, batch=500).ship(timeout=30)
    assert (wm.seq, wm.hash, wm.commit) == (head.seq, head.hash, head.seq)
    assert_stream_is_the_log(url, stream_name, writer)
    markers = [int(h[HDR_COMMIT]) for _, _, h, _ in raw_messages(url, stream_name)]
    assert markers == [3001] * 3001  # the resumed shipper finished the same group
    assert Replica(replica, stream).catch_up(timeout=20) == head


# -- refusing what does not chain ------------------------------------------------------------
@pytest.mark.parametrize("how", ["body", "hash", "seq", "dropped"])
def test_a_record_tampered_with_in_the_stream_is_refused(stores, open_stream, stream_name, how):
    _, stream, messages = shipped(stores, open_stream)
    copy = open_stream(stream_name + "copy", prefix=stream.prefix + "copy")
    republish(copy.servers, copy.name, [(s.replace(stream.prefix, copy.prefix, 1), h, d)
                                        for s, h, d in forged(messages, 7, how)])
    replica = Replica(stores("r"), copy)
    with pytest.raises(IntegrityError, match="record seq 7 refused") as err:
        replica.catch_up(timeout=20)
    assert err.value.seq == 7
    assert "stopped at seq 6 and applied nothing after it" in str(err.value)
    assert replica.store.head().seq == 6 and replica.error is err.value
    with pytest.raises(IntegrityError):  # it stays stopped
        replica.catch_up(timeout=5)
    assert replica.store.head().seq == 6


def test_a_rechained_forgery_breaks_the_chain_at_the_next_record(stores, open_stream, stream_name):
    _, stream, messages = shipped(stores, open_stream)
    copy = open_stream(stream_name + "copy", prefix=stream.prefix + "copy")
    republish(copy.servers, copy.name, [(s.replace(stream.prefix, copy.prefix, 1), h, d)
                                        for s, h, d in forged(messages, 7, "rechained")])
    replica = Replica(stores("r"), copy)
    with pytest.raises(IntegrityError, match="record seq 7 refused|record seq 8 refused") as err:
        replica.catch_up(timeout=20)
    # a flipped byte inside the canonical msgpack either stops decoding (7) or, when it still
    # decodes, leaves record 8 unable to chain onto the forged hash; a writer's head written
    # down (braidlog head / verify --against) is what proves the forged prefix wrong
    assert err.value.seq in (7, 8) and replica.store.head().seq == err.value.seq - 1


def test_a_tampered_record_stops_its_whole_transaction(stores, open_stream, stream_name):
    _, stream, messages = shipped(stores, open_stream, group=(5, 9))
    copy = open_stream(stream_name + "copy", prefix=stream.prefix + "copy")
    republish(copy.servers, copy.name, [(s.replace(stream.prefix, copy.prefix, 1), h, d)
                                        for s, h, d in forged(messages, 7, "body")])
    replica = Replica(stores("r"), copy)
    with pytest.raises(IntegrityError, match="record seq 7 refused.*stopped at seq 4"):
        replica.catch_up(timeout=20)
    assert replica.store.head().seq == 4, "part of a transaction was applied"


def test_a_store_that_is_not_a_prefix_of_the_stream_is_refused(stores, open_stream):
    writer, stream, _ = shipped(stores, open_stream, n=5)
    other = stores("o")
    other.append(make_delta(1, braid="elsewhere"))
    with pytest.raises(IntegrityError, match="record seq 1 refused.*not a replica"):
        Replica(other, stream).catch_up(timeout=10)
    longer = stores("l")
    for rec in writer.scan():
        longer.append(rec.delta)
    longer.append(make_delta(99))
    with pytest.raises(ConflictError, match="not a replica of that stream"):
        Replica(longer, stream).catch_up(timeout=10)


# -- the guide ---------------------------------------------------------------------------------
def test_the_guide_example_runs(url, tmp_path, monkeypatch):
    """docs/replication.md's Python example (not run by test_docs: it needs a server)."""
    text = (ROOT / "docs" / "replication.md").read_text(encoding="utf-8")
    marker = "<!-- no-run: needs a running nats-server; tests/replication/test_replication.py runs this block -->"
    block = text.split(marker, 1)[1].split("```python\n", 1)[1].split("\n```", 1)[0]
    assert 'NATS = "nats://127.0.0.1:4222"' in block
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block.replace("nats://127.0.0.1:4222", url), "docs/replication.md", "exec"),
         namespace)
    assert namespace["head"].seq == 5  # 1 + 3 appended asynchronously, 1 synchronously


# -- failover on one node ----------------------------------------------------------------------
def test_a_stale_writer_is_refused_and_nothing_is_merged(stores, open_stream):
    old = stores("old")
    stream = open_stream()
    old_log = SyncLog(old, stream)
    for i in range(1, 6):
        old_log.append(make_delta(i))
    new = stores("new")
    done = promote(new, stream, quiet=0.1, timeout=10)
    assert done.caught_up == old.head() and done.epoch == 1 and done.head.seq == 7
    new_log = SyncLog(new, stream)
    new_log.append(make_delta(100, braid="after-failover"))
    before = stream.watermark()
    assert before.epoch == 1

    old.append(make_delta(200, braid="split-brain"))  # the old writer comes back
    with pytest.raises(StaleWriter, match="writer epoch 1 since seq 7 .*epoch 0.*fenced") as err:
        old_log.ship()
    assert "its records 6..6 were never acknowledged" in str(err.value)
    with pytest.raises(StaleWriter, match="this call appended nothing"):
        old_log.append(make_delta(201))
    assert old.head().seq == 6, "a refused stale writer appended locally again"
    with pytest.raises(StaleWriter, match="fenced"):  # a new SyncLog: refused before it writes
        SyncLog(old, stream).append(make_delta(202))
    assert old.head().seq == 6
    assert stream.watermark() == before
    assert_stream_is_the_log(stream.servers, stream.name, new)
    with pytest.raises(StaleWriter, match="fenced"):
        Shipper(old, stream).ship(timeout=10)  # a fresh shipper reads the watermark: refused too


# -- the command line --------------------------------------------------------------------------
def test_cli_ships_rebuilds_and_promotes(tmp_path, url, stream_name, capsys, rng):
    w, r = str(tmp_path / "w"), str(tmp_path / "r")
    with LmdbLog(w) as writer:
        append_mixed(writer, random_deltas(rng, 50), rng)
        head = writer.head()
    assert main(["--store", w, "ship", "--nats", url, "--stream", stream_name, "--once"]) == 0
    assert f"stream {stream_name} at {head}" in capsys.readouterr().out
    assert main(["--store", r, "replica", "--nats", url, "--stream", stream_name, "--once"]) == 0
    assert f"replica at {head}" in capsys.readouterr().out
    with LmdbLog(w) as writer:  # following: ship and replica run for a while, then exit
        writer.append(make_delta(60))
        head = writer.head()
    assert main(["--store", w, "ship", "--nats", url, "--stream", stream_name, "--for", "0.3"]) == 0
    assert main(["--store", r, "replica", "--nats", url, "--stream", stream_name, "--for", "0.3"]) == 0
    assert "applied 1 record(s)" in capsys.readouterr().out.splitlines()[-1]
    with LmdbLog(r) as replica:
        assert replica.head() == head
    assert main(["--store", r, "promote", "--nats", url, "--stream", stream_name,
                 "--quiet", "0.1"]) == 0
    assert f"writer epoch 1 begins at seq {head.seq + 2}, after everything stream " \
        f"{stream_name} acknowledged (up to {head})" in capsys.readouterr().out
    line = json.dumps(json.loads(braidlog.to_json(make_delta(77, braid="cli"))))
    (tmp_path / "d.jsonl").write_text(line + "\n")
    assert main(["--store", r, "sync-append", str(tmp_path / "d.jsonl"), "--nats", url,
                 "--stream", stream_name]) == 0
    assert "acknowledged by stream" in capsys.readouterr().out
    with LmdbLog(w) as writer:
        writer.append(make_delta(78, braid="stale"))
    assert main(["--store", w, "ship", "--nats", url, "--stream", stream_name, "--once"]) == 1
    assert "is in writer epoch 1 since seq 53" in capsys.readouterr().err and head.seq == 51


def test_cli_ship_replica_and_promote_print_json(tmp_path, url, stream_name, capsys, rng):
    w, r = str(tmp_path / "w"), str(tmp_path / "r")
    with LmdbLog(w) as writer:
        append_mixed(writer, random_deltas(rng, 20), rng)
        head = writer.head()
    assert main(["--store", w, "ship", "--nats", url, "--stream", stream_name, "--once",
                 "--json"]) == 0
    last = lambda: json.loads(capsys.readouterr().out.splitlines()[-1])  # noqa: E731 (after the seed line)
    assert last() == {"shipped": head.seq, "stream": stream_name, "at": str(head)}
    assert main(["--store", r, "replica", "--nats", url, "--stream", stream_name, "--once",
                 "--json"]) == 0
    got = last()
    assert got["applied"] == head.seq and got["head"] == str(head) and got["checkpoints"] is None
    assert main(["--store", r, "promote", "--nats", url, "--stream", stream_name,
                 "--quiet", "0.1", "--json"]) == 0
    promoted = last()
    assert promoted["epoch"] == 1 and promoted["caught_up"] == str(head)
    assert promoted["seq"] == head.seq + 2 and promoted["stream"] == stream_name


def test_cli_replica_exits_1_naming_the_refused_seq(tmp_path, stores, open_stream, stream_name,
                                                    url, capsys):
    _, stream, messages = shipped(stores, open_stream)
    copy = open_stream(stream_name + "copy", prefix=stream.prefix + "copy")
    republish(copy.servers, copy.name, [(s.replace(stream.prefix, copy.prefix, 1), h, d)
                                        for s, h, d in forged(messages, 4, "body")])
    code = main(["--store", str(tmp_path / "cli-r"), "replica", "--nats", url,
                 "--stream", copy.name, "--prefix", copy.prefix, "--once"])
    assert code == 1
    assert "record seq 4 refused" in capsys.readouterr().err
    with LmdbLog(tmp_path / "cli-r") as replica:
        assert replica.head().seq == 3


# -- three nodes: losing the leader, losing the writer ------------------------------------------
def leader(stream: Stream) -> str:
    end = time.monotonic() + 20
    while time.monotonic() < end:
        name = stream.info(timeout=10)["leader"]
        if name:
            return name
        time.sleep(0.1)
    raise AssertionError("the stream has no leader")


@pytest.mark.cluster
@pytest.mark.slow
def test_leader_sigkilled_during_shipping_loses_duplicates_and_reorders_nothing(
        nats_cluster, stores, rng):
    stream = Stream(nats_cluster.urls, "R3KILL", replicas=3, timeout=5)
    writer = stores("w")
    shipper = Shipper(writer, stream, batch=50).start(poll=0.005, ship_timeout=60)
    # a replica follows the stream throughout; a reader of its store watches its head
    replica = stores("r")
    follower = Replica(replica, Stream(nats_cluster.urls, "R3KILL", timeout=5), batch=50)
    following, seen, failed = threading.Event(), set(), []

    def follow() -> None:
        try:
            follower.follow(following, poll=0.005)
        except Exception as e:  # handed to the assertions below
            failed.append(e)

    def watch() -> None:
        while not following.is_set():
            seen.add(replica.head().seq)
            time.sleep(0.0005)

    threads = [threading.Thread(target=follow), threading.Thread(target=watch)]
    for t in threads:
        t.start()
    killed = None
    ends = {0}  # the last seq of every writer transaction
    try:
        deltas = random_deltas(rng, 4000)
        i, end = 0, time.monotonic() + 60
        while i < len(deltas) and time.monotonic() < end:
            n = rng.randrange(1, 8)
            ends.add(writer.append_batch(deltas[i:i + n])[-1])
            i += n
            if killed is None and i >= 800:
                killed = leader(stream)
                nats_cluster.node(killed).kill()  # SIGKILL, mid-shipping
                at_kill = (shipper.shipped, writer.head().seq)
            time.sleep(0.0005)
        assert i >= len(deltas), "the writer did not finish in time"
        wm = shipper.stop(timeout=90)
        end = time.monotonic() + 60
        while follower.head != writer.head() and time.monotonic() < end and not failed:
            time.sleep(0.01)
    finally:
        if shipper._thread is not None:
            shipper._stop.set()
        following.set()
        for t in threads:
            t.join(30)
        follower.stream.close()
    head = writer.head()
    print(f"killed leader {killed} with {at_kill[0]} of {at_kill[1]} records shipped; "
          f"{shipper.retries} retries; {head.seq} shipped in the end; the following replica "
          f"showed {len(seen)} distinct heads")
    assert at_kill[0] < head.seq
    assert (wm.seq, wm.hash) == head
    assert leader(stream) != killed, "no new leader was elected"
    assert_stream_is_the_log(nats_cluster.urls, "R3KILL", writer)
    assert not failed
    assert not seen - ends, f"the replica exposed part of a transaction: heads {sorted(seen - ends)[:5]}"
    assert len(seen) > 10 and follower.head == head == replica.head()
    assert list(replica.scan_bodies()) == list(writer.scan_bodies())
    stream.close()


@pytest.mark.cluster
@pytest.mark.slow
def test_failover_promotes_a_caught_up_replica_and_refuses_the_old_writer(nats_cluster, stores):
    old_stream = Stream(nats_cluster.urls, "R3FAIL", replicas=3, timeout=5)
    new_stream = None
    try:
        old = stores("old")
        old_log = SyncLog(old, old_stream)
        for k in range(40):
            old_log.append_batch([make_delta(10 * k + j, braid=f"b{j}") for j in range(3)])
        acked = old.head()
        old.append(make_delta(9000, braid="never-shipped"))  # then the writer's machine is cut off

        new_stream = Stream(nats_cluster.urls[::-1], "R3FAIL", create=False, timeout=5)
        replica = stores("new")
        assert promote(replica, new_stream, quiet=0.2, timeout=60).caught_up == acked
        new_log = SyncLog(replica, new_stream)
        new_log.append(make_delta(9100, braid="new-writer"))
        nats_cluster.node(leader(new_stream)).kill()  # and the stream loses its leader too
        new_log.append(make_delta(9101, braid="new-writer"))
        assert new_stream.watermark(timeout=30).seq == acked.seq + 4  # kind, epoch, 2 records

        # the old writer comes back and ships what it committed: refused, not merged
        with pytest.raises(StaleWriter, match="error 10071"):
            old_log.ship()
        assert_stream_is_the_log(nats_cluster.urls, "R3FAIL", replica)
        assert old.head().seq == acked.seq + 1
    finally:
        old_stream.close()
        if new_stream is not None:
            new_stream.close()


# -- the subprocess body of the crash test: python -m tests.test_replication ship ... ------------
if __name__ == "__main__":
    command, path, servers, name, batch = sys.argv[1:6]
    assert command == "ship"
    with LmdbLog(path, create=False) as log, Stream(servers, name) as target:
        Shipper(log, target, batch=int(batch)).ship(timeout=60)
