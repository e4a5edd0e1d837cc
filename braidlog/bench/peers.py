"""The peers braidlog is timed against, with identical data: raw LMDB puts (the ceiling) with and
without braidlog's index tables, sqlite3, the ``eventsourcing`` library when installed, and
braidlog itself without its Merkle tree. This module imports ``lmdb`` and ``sqlite3`` itself: a
ceiling has to be measured raw."""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

import lmdb
import msgspec
from blake3 import blake3

from ..delta import SALT_SIZE, GenericDelta, committed_form, encode
from ..kinds import REGISTRY
from ..lmdb.format import completes, pack_row
from ..lmdb.log import LmdbLog
from ..store import check_batch

__all__ = ["PEER_IMPORT", "STARTUP_COMMANDS", "startup_commands", "RAW_INDEXED", "NO_TREE",
           "ES_BATCH", "ES_PEERS", "IndexKeys", "index_keys", "RawLmdb", "SqliteLog", "sql_row",
           "eventsourcing_installed", "EventsourcingApp", "NoTreeLog"]

#: What ``import braidlog`` is measured against: the libraries it is built on, imported together.
PEER_IMPORT = "lmdb+msgspec+blake3+ulid"
STARTUP_COMMANDS = {
    ("python, importing nothing", "import ms"): "pass",
    (PEER_IMPORT, "import ms"): "import lmdb, msgspec, blake3, ulid",
    ("braidlog", "import ms"): "import braidlog",
}

RAW_INDEXED = "raw LMDB, log + 4 indexes"
NO_TREE = "braidlog without the Merkle tree"
ES_BATCH = 100  # deltas per eventsourcing save in the batched append
#: The eventsourcing application is measured on these persistence modules: (persistence, label).
ES_PEERS = (("sqlite", "eventsourcing SQLite"), ("braidlog", "eventsourcing on braidlog"),
            ("popo", "eventsourcing memory"))


def startup_commands(store: str) -> dict[tuple[str, str], list[str]]:
    """(system, metric) -> the command line each start-up figure times, one fresh process each."""
    commands = {key: [sys.executable, "-c", code] for key, code in STARTUP_COMMANDS.items()}
    commands["braidlog", "head ms"] = [sys.executable, "-m", "braidlog", "--store", store, "head"]
    return commands


class NoTreeLog(LmdbLog):
    """A bench-only store whose appends skip the Merkle tree (its rows hold none of the tree's
    nodes: such a store cannot be read back), to measure what the tree costs an append."""

    def _tree_nodes(self, txn: Any, staged: Sequence[Any]) -> list[bytes]:
        return [b""] * len(staged)


_delta_decoder = msgspec.msgpack.Decoder(GenericDelta)


def _u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


class IndexKeys(NamedTuple):
    """The index keys braidlog writes for one delta, prepared outside the timed part."""

    id: bytes
    braid: bytes
    kind: bytes
    refs: tuple[bytes, ...]
    head: bytes = b""  # what a braidlog row holds before the delta bytes (hashes zeroed)


def index_keys(deltas: Sequence[GenericDelta], offset: int = 0) -> list[IndexKeys]:
    """Each delta's keys in braidlog's four indexes, as ``LmdbLog`` derives them, and the row
    head it writes before the delta's bytes (for seqs from ``offset + 1``)."""
    out = []
    for seq, c in enumerate(check_batch(deltas, REGISTRY), offset + 1):
        salt = bytes(SALT_SIZE)
        entry = committed_form(seq, c.delta, salt, c.data)
        head = pack_row(bytes(32), 0, entry, bytes(32 * completes(seq)), salt, b"")
        out.append(IndexKeys(c.delta.id.encode(), c.delta.braid_id.encode(),
                             c.delta.kind.encode(), tuple(r.encode() for r in c.refs), head))
    return out


class RawLmdb:
    """The ceiling: LMDB puts of already-encoded bytes into one database, no index, no chain.

    ``durable=True`` syncs data and meta pages at each commit, as ``LmdbLog`` does by default.
    With ``indexed=True`` it writes what braidlog writes: each body after the row head of
    ``IndexKeys.head`` (chain hash, high-water time, committed form, tree nodes and salt, prepared
    beforehand) and braidlog's four index tables (ids,
    braid, kind and refs, laid out as in docs/format.md) from keys prepared beforehand: the
    ceiling of braidlog's page writes, without validation, chain or any per-delta Python.
    """

    def __init__(self, path: str, *, durable: bool = True, indexed: bool = False) -> None:
        os.makedirs(path, exist_ok=True)
        self.env = lmdb.open(path, map_size=1 << 36, max_dbs=5, sync=True, metasync=durable,
                             readahead=False)
        self.db = self.env.open_db(b"log")
        self.indexes = [self.env.open_db(name, dupsort=name != b"ids")
                        for name in (b"ids", b"braid", b"kind", b"refs")] if indexed else []
        self.seq = 0

    def put_batch(self, bodies: Sequence[bytes], keys: Sequence[IndexKeys] = ()) -> None:
        """One transaction putting every body under the next seqs (and its index keys)."""
        seq, db = self.seq, self.db
        with self.env.begin(write=True) as txn:
            if not self.indexes:
                for body in bodies:
                    seq += 1
                    txn.put(_u64(seq), body, db=db, append=True)
            else:
                seqs = [_u64(s) for s in range(seq + 1, seq + len(bodies) + 1)]
                seq += len(bodies)
                txn.cursor(db).putmulti([(s, k.head + b) for s, k, b in zip(seqs, keys, bodies, strict=False)],
                                        append=True)
                ids, braids, kinds, refs = self.indexes
                txn.cursor(ids).putmulti([(k.id, s) for k, s in zip(keys, seqs, strict=False)])
                txn.cursor(braids).putmulti([(k.braid, s) for k, s in zip(keys, seqs, strict=False)], dupdata=True)
                txn.cursor(kinds).putmulti([(k.kind, s) for k, s in zip(keys, seqs, strict=False)], dupdata=True)
                txn.cursor(refs).putmulti([(r, s) for k, s in zip(keys, seqs, strict=False) for r in k.refs],
                                          dupdata=True)
        self.seq = seq

    def put_one(self, body: bytes, keys: IndexKeys | None = None) -> None:
        """One transaction, one put (plus the index puts): the single-commit ceiling."""
        if keys is not None:
            self.put_batch((body,), (keys,))
            return
        self.seq += 1
        with self.env.begin(write=True) as txn:
            txn.put(_u64(self.seq), body, db=self.db, append=True)

    def scan_decode(self) -> int:
        """Iterate every record with a cursor and decode it as a GenericDelta; the count.

        The fastest plain loop py-lmdb offers (values only, copied to bytes, which msgspec
        decodes faster than memoryviews), so the baseline is as strong as it gets."""
        n = 0
        decode = _delta_decoder.decode
        with self.env.begin() as txn:
            for value in txn.cursor(self.db).iternext(keys=False, values=True):
                decode(value)
                n += 1
        return n

    def scan_blake3(self) -> int:
        """Iterate every record and hash its bytes with blake3; the count."""
        n = 0
        with self.env.begin() as txn:
            for value in txn.cursor(self.db).iternext(keys=False, values=True):
                blake3(value).digest()
                n += 1
        return n

    def close(self) -> None:
        self.env.close()


class SqliteLog:
    """sqlite3 in WAL mode, as an event table with the indexes braidlog keeps (id, braid, kind).

    ``durable=True`` sets ``synchronous=FULL`` (the WAL is synced at every commit).
    """

    def __init__(self, path: str, *, durable: bool = True) -> None:
        self.con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        self.con.execute("CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, "
                         "id TEXT NOT NULL UNIQUE, braid TEXT NOT NULL, kind TEXT NOT NULL, "
                         "body BLOB NOT NULL)")
        self.con.execute("CREATE INDEX IF NOT EXISTS by_braid ON events (braid, seq)")
        self.con.execute("CREATE INDEX IF NOT EXISTS by_kind ON events (kind, seq)")

    _INSERT = "INSERT INTO events (id, braid, kind, body) VALUES (?, ?, ?, ?)"

    def put_batch(self, rows: Sequence[tuple[str, str, str, bytes]]) -> None:
        self.con.execute("BEGIN")
        self.con.executemany(self._INSERT, rows)
        self.con.execute("COMMIT")

    def put_one(self, row: tuple[str, str, str, bytes]) -> None:
        self.con.execute("BEGIN")
        self.con.execute(self._INSERT, row)
        self.con.execute("COMMIT")

    def scan_decode(self) -> int:
        n = 0
        decode = _delta_decoder.decode
        for (body,) in self.con.execute("SELECT body FROM events ORDER BY seq"):
            decode(body)
            n += 1
        return n

    def close(self) -> None:
        self.con.close()


def sql_row(d: GenericDelta) -> tuple[str, str, str, bytes]:
    return d.id, d.braid_id, d.kind, encode(d)


try:  # the eventsourcing library is an optional peer (the `bench` extra installs it)
    from eventsourcing.application import Application as _EsApplication
    from eventsourcing.domain import Aggregate as _EsAggregate
    from eventsourcing.domain import event as _es_event
except ImportError:  # pragma: no cover - depends on the environment
    _EsApplication = None  # type: ignore[assignment,misc]  # None: the optional peer is not installed


def eventsourcing_installed() -> bool:
    """Whether the ``eventsourcing`` library can be benchmarked here."""
    return _EsApplication is not None


if _EsApplication is not None:

    class AgentMemory(_EsAggregate):
        """One braid as an eventsourcing aggregate: each delta is one event."""

        def __init__(self, braid_id: str) -> None:
            self.braid_id = braid_id
            self.count = 0
            self.last_kind = ""

        @_es_event("DeltaRecorded")
        def record(self, kind: str, payload: dict, provenance: str, confidence: float,
                   tags: list) -> None:
            self.count += 1
            self.last_kind = kind

    class AgentMemoryApp(_EsApplication):
        """The eventsourcing application holding the bench's aggregates."""


class EventsourcingApp:
    """The ``eventsourcing`` library used as its docs show: an Application, one aggregate per
    braid, events recorded through a decorated method and saved ``per_save`` at a time.

    ``persistence`` is ``"sqlite"`` (its SQLite recorder: WAL, SQLite's default synchronous
    FULL), ``"braidlog"`` (braidlog's persistence module, durable: every commit synced) or
    ``"popo"`` (its in-memory recorder).
    """

    def __init__(self, persistence: str, path: str | None = None, *,
                 env: dict[str, str] | None = None) -> None:
        if _EsApplication is None:
            raise RuntimeError("eventsourcing is not installed: pip install '.[bench]'")
        settings: dict[str, str] = {}
        if persistence == "sqlite":
            settings = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)}
        elif persistence == "braidlog":
            settings = {"PERSISTENCE_MODULE": "braidlog.integrations.eventsourcing",
                        "BRAIDLOG_STORE": str(path), "BRAIDLOG_DURABLE": "y"}
        self.app = AgentMemoryApp(env={**settings, **(env or {})})
        self.aggregates: dict[str, Any] = {}

    def aggregate(self, braid_id: str) -> Any:
        agg = self.aggregates.get(braid_id)
        if agg is None:
            agg = self.aggregates[braid_id] = AgentMemory(braid_id)
        return agg

    @staticmethod
    def new_aggregate(braid_id: str) -> Any:
        """A new aggregate this object does not keep (a thread's own)."""
        return AgentMemory(braid_id)

    @staticmethod
    def record(agg: Any, d: GenericDelta) -> None:
        """Record ``d`` as one event of ``agg`` (not saved yet)."""
        agg.record(d.kind, d.payload, d.provenance.kind, d.confidence, list(d.tags))

    def save(self, deltas: Sequence[GenericDelta]) -> None:
        """Record one event per delta on its braid's aggregate and save them in one go."""
        touched = {}
        for d in deltas:
            agg = self.aggregate(d.braid_id)
            self.record(agg, d)
            touched[d.braid_id] = agg
        self.app.save(*touched.values())

    def read_all(self) -> int:
        """Read every aggregate back from its events; the number of events replayed."""
        n = 0
        for agg in self.aggregates.values():
            got: Any = self.app.repository.get(agg.id)
            n += got.count
        return n

    def close(self) -> None:
        self.app.close()

