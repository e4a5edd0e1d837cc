"""The replication workload: shipping to NATS JetStream and replica catch-up, against plain
JetStream on the same bytes.

One nats-server (JetStream, file storage, R1) on loopback is started for the run and stopped
after it; every part gets a stream of its own. The peers publish and read the very bodies
braidlog ships (the stored ``hw || canonical delta`` of the same records), without braidlog's
headers, checks or LMDB writes, so each ratio is the cost of what braidlog adds:

- async shipping (``Shipper.ship`` of a whole log, atomic batches of 1000) against plain atomic
  batches of 1000 of the same bytes;
- sync appends (``SyncLog.append``: one LMDB commit, then one acknowledged publish) against
  plain ``js.publish`` of one message waiting for its ack;
- replica catch-up (read, verify the chain, validate, append to LMDB) against plain batched
  direct-get reads of the same messages.

It needs the ``replication`` extra (nats-py and the nats-server binary); without it the run
notes the skip and goes on.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sysconfig
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..lmdb.log import LmdbLog
from .harness import Run, Sample, remove, timed

__all__ = ["run_workload", "STEPS", "nats_server", "SERVER_NOTE", "MIN_VERSION", "server_binary", "free_port",
           "wait_port"]

W = "replication"
BRAIDLOG = "braidlog"
PLAIN = "plain JetStream"
MAX_RECORDS = 20_000  # records shipped and caught up per repeat (the sync part sends a tenth)
STEPS = 6
SERVER_NOTE = "replication: needs nats-py and nats-server >= 2.12 (pip install 'braidlog[replication]')"


#: The oldest nats-server with atomic batches, which shipping uses.
MIN_VERSION = (2, 12)


def server_binary() -> str | None:
    """A nats-server of ``MIN_VERSION`` or later: the pip-installed one first, then PATH."""
    for path in (Path(sysconfig.get_path("scripts")) / "nats-server", shutil.which("nats-server")):
        if path and Path(path).exists():
            try:
                out = subprocess.run([str(path), "--version"], capture_output=True, text=True,
                                     timeout=10).stdout
                version = tuple(int(x) for x in out.split("v")[-1].strip().split(".")[:2])
            except (OSError, ValueError, subprocess.TimeoutExpired):
                continue
            if version >= MIN_VERSION:
                return str(path)
    return None


def free_port() -> int:
    """A loopback TCP port free when asked (another process may take it before it is bound)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[Any], timeout: float = 10.0) -> bool:
    """Whether ``port`` on loopback accepts a connection within ``timeout`` seconds, while
    ``proc`` (the server meant to listen there) is still running."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.02)
    return False


@contextmanager
def nats_server(root: str) -> Iterator[str | None]:
    """The URL of a nats-server with JetStream on a free loopback port, storing under ``root``,
    stopped when the block ends; None when nats-py or the binary is missing."""
    binary = server_binary()
    try:
        import nats  # noqa: F401  (only asked whether it is installed)
    except ImportError:
        binary = None
    if binary is None:
        yield None
        return
    port = free_port()
    store = os.path.join(root, "nats")
    proc = subprocess.Popen([binary, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", store],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        yield f"nats://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(store, ignore_errors=True)


async def _plain(url: str, name: str, work: Callable[[Any, Any], Awaitable[None]]) -> None:
    import nats

    nc = await nats.connect(url)
    try:
        js = nc.jetstream(timeout=30)
        await js.add_stream(name=name, subjects=[f"{name}.>"], allow_atomic=True, allow_direct=True)
        await work(nc, js)
    finally:
        await nc.close()


def _publish_atomic(url: str, name: str, bodies: list[tuple[str, bytes]]) -> None:
    from ..replication import MAX_BATCH

    async def work(nc: Any, js: Any) -> None:
        for at in range(0, len(bodies), MAX_BATCH):
            chunk = bodies[at:at + MAX_BATCH]
            bid = nc.new_inbox().rpartition(".")[2]
            for i, (subject, body) in enumerate(chunk, 1):
                hdr = {"Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(i)}
                if i == len(chunk):
                    hdr["Nats-Batch-Commit"] = "1"
                    ack = json.loads((await nc.request(f"{name}.{subject}", body, headers=hdr, timeout=30)).data)
                    if "error" in ack:
                        raise RuntimeError(f"plain JetStream refused an atomic batch: {ack}")
                else:
                    await nc.publish(f"{name}.{subject}", body, headers=hdr)

    asyncio.run(_plain(url, name, work))


def _publish_one_by_one(url: str, name: str, bodies: list[tuple[str, bytes]]) -> None:
    async def work(nc: Any, js: Any) -> None:
        for subject, body in bodies:
            await js.publish(f"{name}.{subject}", body)

    asyncio.run(_plain(url, name, work))


def _read_direct(url: str, name: str, n: int) -> int:
    import nats

    from ..replication import MAX_BATCH

    async def run() -> int:
        nc = await nats.connect(url)
        try:
            got = 0
            while got < n:
                inbox = nc.new_inbox()
                sub = await nc.subscribe(inbox)
                await nc.publish(f"$JS.API.DIRECT.GET.{name}",
                                 json.dumps({"seq": got + 1, "batch": MAX_BATCH}).encode(), reply=inbox)
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


def _writer(run: Run, n: int) -> LmdbLog:
    """A store of ``n`` records of the agent session, built once a run, 100 per transaction."""
    key = f"replication:writer:{n}"
    if key not in run.cache:
        log = LmdbLog(run.path("replication-writer"), durable=False)
        for at in range(0, n, 100):
            log.append_batch(run.deltas(min(100, n - at), at))
        run.cache[key] = {"log": log}
    return run.cache[key]["log"]


def run_workload(run: Run) -> list[Sample]:
    """One repeat: each part on braidlog and on plain JetStream, the side that goes first alternating."""
    from ..replication import Replica, Shipper, Stream, SyncLog

    n = min(run.config.size, MAX_RECORDS)
    n_sync = max(n // 10, 100)
    rep = run.cache.get("replication:repeat", 0)
    run.cache["replication:repeat"] = rep + 1
    with nats_server(run.root) as url:
        if url is None:
            run.skipped.append(SERVER_NOTE)
            return []
        writer = _writer(run, n)
        bodies = [(f"plain.{seq % 8}", body) for seq, _, body in writer.scan_bodies()]
        name = f"B{os.getpid()}R{rep}"
        out: list[Sample] = []

        def ship() -> None:
            run.step("replication: Shipper.ship, atomic batches of 1000")
            with Stream(url, name + "S", timeout=30) as stream:
                seconds, _ = timed(lambda: Shipper(writer, stream).ship(timeout=300))
            out.append(Sample(W, BRAIDLOG, f"ship {n:,} records/s", n / seconds, "/s", "higher"))

        def ship_plain() -> None:
            run.step("replication: plain atomic batches of 1000")
            seconds, _ = timed(lambda: _publish_atomic(url, name + "P", bodies))
            out.append(Sample(W, PLAIN, f"ship {n:,} records/s", n / seconds, "/s", "higher"))

        def sync() -> None:
            run.step("replication: SyncLog.append, one delta each")
            path = run.path("replication-sync")
            store = LmdbLog(path, durable=False)
            try:
                with Stream(url, name + "Y", timeout=30) as stream:
                    log = SyncLog(store, stream)
                    deltas = run.deltas(n_sync, 0)
                    seconds, _ = timed(lambda: [log.append(d) for d in deltas])
            finally:
                store.close()
                remove(path)
            out.append(Sample(W, BRAIDLOG, "sync appends/s", n_sync / seconds, "/s", "higher"))

        def sync_plain() -> None:
            run.step("replication: plain js.publish, one message each")
            seconds, _ = timed(lambda: _publish_one_by_one(url, name + "Q", bodies[:n_sync]))
            out.append(Sample(W, PLAIN, "sync appends/s", n_sync / seconds, "/s", "higher"))

        sides = [(ship, ship_plain), (sync, sync_plain)]
        for ours, theirs in sides:
            for part in ((ours, theirs) if rep % 2 == 0 else (theirs, ours)):
                part()
        with Stream(url, name + "C", timeout=30) as source:
            Shipper(writer, source).ship(timeout=300)

            def catch_up() -> None:
                run.step("replication: Replica.catch_up of an empty store")
                path = run.path("replication-replica")
                store = LmdbLog(path, durable=False)
                try:
                    seconds, head = timed(lambda: Replica(store, source).catch_up(timeout=300))
                    if head != writer.head():
                        raise RuntimeError(f"the replica caught up to {head}, not the writer's {writer.head()}")
                finally:
                    store.close()
                    remove(path)
                out.append(Sample(W, BRAIDLOG, f"catch up {n:,} records/s", n / seconds, "/s", "higher"))

            def read_plain() -> None:
                run.step("replication: plain batched direct get")
                seconds, _ = timed(lambda: _read_direct(url, source.name, n))
                out.append(Sample(W, PLAIN, f"catch up {n:,} records/s", n / seconds, "/s", "higher"))

            for part in ((catch_up, read_plain) if rep % 2 == 0 else (read_plain, catch_up)):
                part()
        return out
