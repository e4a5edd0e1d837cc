"""Benchmarks: realistic agent workloads timed on braidlog and on its peers, in one run.

Shared by ``braidlog bench`` and the pytest-benchmark suites in ``bench/``. Every workload takes
a size and a seed, and is timed on braidlog and on each installed peer with identical data:

- raw LMDB puts of the same encoded bytes (the ceiling: no validation, chain or indexes), and
  the same puts plus braidlog's four index tables from keys prepared beforehand (the ceiling of
  braidlog's page writes);
- sqlite3 from the standard library (WAL; ``synchronous=FULL`` for the durable rows);
- the ``eventsourcing`` library on its SQLite and in-memory (POPO) recorders, when installed.

A run repeats every workload ``repeat`` times, peers interleaved with braidlog inside each
repeat, and reports each figure as the median and spread of its repeats, plus its ratio to
braidlog: the median of the per-repeat ratios, so a noisy spell hits both sides of a ratio.
This module imports ``lmdb`` and ``sqlite3`` itself: a ceiling has to be measured raw.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

import lmdb
import msgspec
from blake3 import blake3

from .braid import Braid
from .audit import entity_at
from .delta import BeadRef, GenericDelta, Provenance, Refs, encode, validate
from .errors import BraidlogError, MissingDependency, Rejected, ValidationError
from .group_commit import GroupCommitter
from .kinds import REGISTRY
from .lmdb.log import LmdbLog
from .projection import Projection
from .store import MemoryLog, check_batch

__all__ = [
    "WORKLOADS", "Config", "AgentSession", "agent_deltas", "ENTITIES", "COUNTER", "Entity",
    "all_projections", "RawLmdb", "SqliteLog", "EventsourcingApp", "eventsourcing_installed",
    "build_log", "suite_sizes", "time_travel_log", "Sample", "Row", "TargetResult", "Report", "run", "render", "percentile",
    "machine_facts",
]

#: Workload names, in the order a run does them (``--only`` takes these).
WORKLOADS = ("startup", "append", "single", "concurrent", "scan", "replay", "time_travel", "recall",
             "proofs")
START = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)
BATCH = 1_000
BRAID_FOLLOWING = "braidlog + shipped projections following, checks off"
BRAID_CHECKED = "braidlog + shipped projections, batched append with projection checks"
ES_BATCH = 100
APPENDERS = (1, 2, 4, 8)

# ---------------------------------------------------------------------------------------------
# Workload data: an agent session of about 300-byte deltas
# ---------------------------------------------------------------------------------------------

_WORDS = (
    "the build failed in the integration step after a timeout while waiting for the database "
    "container so I retried with a longer deadline and the second run passed but the flaky test "
    "still needs a fix before we merge user asked to summarise open incidents and rank them by "
    "impact on customers deploy rollback latency memory leak cache eviction schema migration "
    "retry budget alert threshold dashboard runbook owner ticket priority escalation customer "
    "region cluster node queue backlog consumer lag partition replica leader election quorum "
    "config flag feature release canary traffic error rate p99 regression benchmark profile "
    "trace span request response payload token budget context window summary plan step goal"
).split()
_TOOLS = ("search_logs", "read_file", "run_tests", "query_metrics", "open_ticket", "git_diff",
          "http_get", "list_incidents")
_FIELDS = ("status", "owner", "priority", "next_step", "summary", "eta", "risk")
_MODELS = ("claude-sonnet-4", "gpt-4.1", "llama-3.1-70b")
_B32 = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _ulid(ms: int, rnd: int) -> str:
    """A ULID string from 48 bits of milliseconds and 80 random bits (deterministic ids)."""
    n = (ms << 80) | rnd
    return "".join(_B32[(n >> s) & 31] for s in range(125, -1, -5))


class AgentSession:
    """Deterministic deltas of agent sessions: messages, tool calls and results, observations,
    bead writes and field revisions (the last two only while their kinds accept the payloads).

    Every delta carries one tag ``topic-NNNNN`` (its entity, of ``entities``) and belongs to one
    of ``braids`` braids. Delta ``i`` is the same for a given seed whatever else is generated.
    """

    def __init__(self, seed: int = 7, *, braids: int = 8, entities: int = 10_000,
                 start: datetime = START) -> None:
        self.seed = seed
        self.braids = [f"agent-{seed}-{b}" for b in range(braids)]
        self.entities = max(1, entities)
        self.start = start
        self._start_ms = int(start.timestamp() * 1000)
        self.kinds = self._usable_kinds()

    # kind -> (weight, maker); makers take (rnd, i, entity) and return (payload, provenance, refs)
    def _makers(self) -> dict[str, tuple[int, Callable[..., tuple[dict, Provenance, Refs | None]]]]:
        return {
            "message": (24, self._message), "tool_call": (15, self._tool_call),
            "tool_result": (15, self._tool_result), "observation": (10, self._observation),
            "bead_version": (8, self._bead_version), "bead_write": (8, self._bead_write),
            "field_revised": (12, self._field_revised),
            "decision_recorded": (8, self._decision_recorded),
        }

    def _usable_kinds(self) -> list[tuple[str, int, Callable[..., Any]]]:
        """The kinds whose sample payloads the registry accepts now. Projection modules are
        imported first, so their kinds are in; a kind whose owner has since changed its schema
        is left out rather than faked (``mix`` shows what is generated)."""
        all_projections()
        out = []
        for kind, (weight, make) in self._makers().items():
            if kind not in REGISTRY:
                continue
            try:
                for i in range(3):
                    payload, prov, refs = make(random.Random(i), i, i)
                    validate(GenericDelta(id=_ulid(0, 1), braid_id="b", kind=kind, ts=self.start,
                                          provenance=prov, confidence=1.0, payload=payload,
                                          refs=refs))
            except (BraidlogError, TypeError, ValueError):
                continue
            out.append((kind, weight, make))
        return out

    @property
    def mix(self) -> dict[str, int]:
        """The kinds generated and their weights."""
        return {k: w for k, w, _ in self.kinds}

    def deltas(self, n: int, offset: int = 0) -> list[GenericDelta]:
        """Deltas ``offset .. offset + n - 1`` of this session."""
        return list(self.iter(n, offset))

    def iter(self, n: int, offset: int = 0) -> Iterator[GenericDelta]:
        kinds = [k for k, _, _ in self.kinds]
        weights = [w for _, w, _ in self.kinds]
        makers = {k: m for k, _, m in self.kinds}
        cum = []
        total = 0
        for w in weights:
            total += w
            cum.append(total)
        for i in range(offset, offset + n):
            rnd = random.Random(self.seed * 1_000_003 + i)
            x = rnd.random() * total
            kind = kinds[next(j for j, c in enumerate(cum) if x < c)]
            entity = rnd.randrange(self.entities)
            payload, prov, refs = makers[kind](rnd, i, entity)
            ms = self._start_ms + i * 250
            delta_id = _ulid(ms, rnd.getrandbits(80))
            if "decision_id" in payload:  # a decision's id is the id of the delta recording it
                payload["decision_id"] = delta_id
            yield GenericDelta(
                id=delta_id, braid_id=self.braids[i % len(self.braids)],
                kind=kind, ts=self.start + timedelta(milliseconds=i * 250), provenance=prov,
                confidence=round(0.5 + rnd.random() / 2, 3), payload=payload, refs=refs,
                tags=(f"topic-{entity:05d}",),
            )

    @staticmethod
    def _text(rnd: random.Random, words: int) -> str:
        return " ".join(rnd.choice(_WORDS) for _ in range(words)).capitalize() + "."

    def _message(self, rnd, i, entity):
        who = rnd.choice(("user", "assistant"))
        prov = Provenance(who, model=rnd.choice(_MODELS) if who == "assistant" else None,
                          source="chat")
        return {"text": self._text(rnd, rnd.randint(12, 18)), "channel": "chat"}, prov, None

    def _tool_call(self, rnd, i, entity):
        tool = rnd.choice(_TOOLS)
        args = {"query": self._text(rnd, 5), "path": f"/srv/app/{rnd.choice(_WORDS)}.log",
                "since": f"2025-03-0{rnd.randint(1, 9)}T0{rnd.randint(0, 9)}:00:00Z",
                "limit": rnd.choice((10, 20, 50, 100))}
        return ({"tool": tool, "args": args, "call_id": f"call-{i:08d}"},
                Provenance("assistant", model=rnd.choice(_MODELS), tool=tool), None)

    def _tool_result(self, rnd, i, entity):
        tool = rnd.choice(_TOOLS)
        output = {"status": rnd.choice((200, 200, 200, 404, 500)), "hits": rnd.randint(0, 40),
                  "summary": self._text(rnd, 9), "elapsed_ms": rnd.randint(3, 4000)}
        return ({"tool": tool, "output": output, "ok": output["status"] == 200,
                 "call_id": f"call-{i - 1:08d}"}, Provenance("tool", tool=tool), None)

    def _observation(self, rnd, i, entity):
        data = {"host": f"node-{rnd.randint(1, 64):02d}", "cpu": round(rnd.random(), 3),
                "queue": rnd.randint(0, 5000), "region": rnd.choice(("eu-west", "us-east")),
                "metric": rnd.choice(_WORDS)}
        return ({"text": self._text(rnd, 8), "data": data},
                Provenance("perception", source="monitor"), None)

    def _bead_version(self, rnd, i, entity):
        bead, version = f"bead-{entity:05d}", f"bead-{entity:05d}-v{i}"
        payload = {"bead_id": bead, "bead_version_id": version, "bead_type": "memory_bead",
                   "version": 1 + i // max(1, self.entities), "name": self._text(rnd, 3),
                   "content": {"text": self._text(rnd, 6), "source": rnd.choice(_TOOLS)},
                   "memory_type": rnd.choice(("semantic", "procedural", "episodic"))}
        return (payload, Provenance("assistant", model=rnd.choice(_MODELS)),
                Refs(beads=(BeadRef(bead, "updated", version),)))

    def _bead_write(self, rnd, i, entity):
        bead, version = f"bead-{entity:05d}", f"bead-{entity:05d}-v{i - 1}"
        payload = {"bead_id": bead, "bead_version_id": version, "bead_type": "memory_bead",
                   "version": 1 + i // max(1, self.entities)}
        return (payload, Provenance("assistant", model=rnd.choice(_MODELS)),
                Refs(beads=(BeadRef(bead, "updated", version),)))

    def _field_revised(self, rnd, i, entity):
        payload = {"topic_id": f"topic-{entity:05d}", "field": rnd.choice(_FIELDS),
                   "field_type": "string", "value": self._text(rnd, 5), "provenance": "llm",
                   "why_changed": self._text(rnd, 5), "impact_expected": self._text(rnd, 3)}
        return payload, Provenance("assistant", model=rnd.choice(_MODELS)), None

    def _decision_recorded(self, rnd, i, entity):
        payload = {"decision_id": f"dec-{entity:05d}-{i}", "title": self._text(rnd, 4),
                   "target": f"service/{rnd.choice(_WORDS)}/{entity:05d}-{i}",
                   "rationale": self._text(rnd, 8),
                   "keywords": [rnd.choice(_WORDS) for _ in range(3)]}
        return payload, Provenance("assistant", model=rnd.choice(_MODELS)), None


def agent_deltas(n: int, seed: int = 7, *, entities: int = 10_000) -> list[GenericDelta]:
    """``n`` deltas of an agent session (see ``AgentSession``)."""
    return AgentSession(seed, entities=entities).deltas(n)


# ---------------------------------------------------------------------------------------------
# Projections for the benches
# ---------------------------------------------------------------------------------------------


class Entity(msgspec.Struct, array_like=True):
    """What the bench projection knows of one entity (a topic tag)."""

    count: int
    last_kind: str
    last_ts: datetime


def _evolve_entities(state: dict[str, Entity], d: GenericDelta) -> dict[str, Entity]:
    for tag in d.tags:
        e = state.get(tag)
        if e is None:
            state[tag] = Entity(1, d.kind, d.ts)
        else:
            e.count += 1
            e.last_kind = d.kind
            e.last_ts = d.ts
    return state


def _count(state: int, d: GenericDelta) -> int:
    return state + 1


class EntityView(msgspec.Struct, frozen=True, gc=False):
    """The fields of a delta the entities projection reads: the fold decodes no more."""

    kind: str
    ts: datetime
    tags: tuple[str, ...] = ()


#: A projection of one entry per entity (10,000, as in the time-travel targets), for time travel.
ENTITIES = Projection("bench.entities", 1, {}, _evolve_entities, state_type=dict[str, Entity],
                      view=EntityView)
#: The trivial fold of the live catch-up target: it counts deltas.
COUNTER = Projection("bench.count", 1, 0, _count)


def all_projections() -> tuple[list[Projection], list[str]]:
    """Every projection of every importable module of the ``projections`` package, and the
    modules that failed to import (with why)."""
    import pkgutil

    import braidlog.projections as package

    found: list[Projection] = []
    broken: list[str] = []
    names = list(getattr(package, "FAMILIES", ()))
    for info in pkgutil.iter_modules(package.__path__):
        if info.name not in names and not info.name.startswith("_") and info.name != "demos":
            names.append(info.name)
    seen: set[str] = set()
    for name in names:
        try:
            module = importlib.import_module(f"braidlog.projections.{name}")
        except Exception as e:  # a module being written elsewhere must not stop a bench
            broken.append(f"braidlog.projections.{name}: {type(e).__name__}: {e}")
            continue
        for p in getattr(module, "PROJECTIONS", ()):
            if p.name not in seen:
                seen.add(p.name)
                found.append(p)
    return found, broken


def admissible(deltas: Sequence[GenericDelta], projections: Sequence[Projection]) -> list[GenericDelta]:
    """The deltas, in order, that pass ``projections``' checks when appended one after another
    (the others are left out): a workload the boundary admits whole. Not timed."""
    braid = Braid(MemoryLog(), projections)
    out = []
    for d in deltas:
        try:
            braid.append(d)
        except (Rejected, ValidationError):
            continue
        out.append(d)
    return out


def suite_sizes() -> list[int]:
    """Log sizes of the pytest-benchmark suites: ``BRAIDLOG_BENCH_SIZES`` (comma-separated),
    default 10,000 and 100,000; 1000000 gives the figures the time-travel targets are set for."""
    text = os.environ.get("BRAIDLOG_BENCH_SIZES", "10000,100000")
    return [int(x) for x in text.replace("_", "").split(",") if x.strip()]


def build_log(path: str, session: AgentSession, n: int, *, projections: Sequence[Projection] = (),
              checkpoint_every: int = 5_000, durable: bool = False,
              progress: Callable[[int], None] | None = None) -> LmdbLog:
    """A store at ``path`` holding deltas 0..n-1 of ``session`` (1,000 per commit); with
    ``projections``, folded and checkpointed every ``checkpoint_every`` deltas. Returns it open."""
    log = LmdbLog(path, durable=durable)
    have = log.head().seq
    for at in range(have, n, BATCH):
        log.append_batch(session.iter(min(BATCH, n - at), at))
        if progress is not None:
            progress(min(at + BATCH, n))
    if projections:
        braid = Braid(log, projections, checkpoint_every=checkpoint_every)
        braid.checkpoint()
    return log


# ---------------------------------------------------------------------------------------------
# Peers
# ---------------------------------------------------------------------------------------------

_delta_decoder = msgspec.msgpack.Decoder(GenericDelta)


RAW_INDEXED = "raw LMDB, log + 4 indexes"
_RECORD_HEAD = bytes(40)  # where a braidlog record holds its chain hash and high-water time


def _u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


class IndexKeys(NamedTuple):
    """The index keys braidlog writes for one delta, prepared outside the timed part."""

    id: bytes
    braid: bytes
    kind: bytes
    refs: tuple[bytes, ...]


def index_keys(deltas: Sequence[GenericDelta]) -> list[IndexKeys]:
    """Each delta's keys in braidlog's four indexes, as ``LmdbLog`` derives them."""
    return [IndexKeys(c.delta.id.encode(), c.delta.braid_id.encode(), c.delta.kind.encode(),
                      tuple(r.encode() for r in c.refs))
            for c in check_batch(deltas, REGISTRY)]


class RawLmdb:
    """The ceiling: LMDB puts of already-encoded bytes into one database, no index, no chain.

    ``durable=True`` syncs data and meta pages at each commit, as ``LmdbLog`` does by default.
    With ``indexed=True`` it writes what braidlog writes: each body after 40 bytes (where a
    record holds its chain hash and high-water time) and braidlog's four index tables (ids,
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
                txn.cursor(db).putmulti([(k, _RECORD_HEAD + b) for k, b in zip(seqs, bodies)],
                                        append=True)
                ids, braids, kinds, refs = self.indexes
                txn.cursor(ids).putmulti([(k.id, s) for k, s in zip(keys, seqs)])
                txn.cursor(braids).putmulti([(k.braid, s) for k, s in zip(keys, seqs)], dupdata=True)
                txn.cursor(kinds).putmulti([(k.kind, s) for k, s in zip(keys, seqs)], dupdata=True)
                txn.cursor(refs).putmulti([(r, s) for k, s in zip(keys, seqs) for r in k.refs],
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


def _sql_row(d: GenericDelta) -> tuple[str, str, str, bytes]:
    return d.id, d.braid_id, d.kind, encode(d)


try:  # the eventsourcing library is an optional peer (the `bench` extra installs it)
    from eventsourcing.application import Application as _EsApplication
    from eventsourcing.domain import Aggregate as _EsAggregate
    from eventsourcing.domain import event as _es_event
except ImportError:  # pragma: no cover - depends on the environment
    _EsApplication = None


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
    FULL) or ``"popo"`` (its in-memory recorder).
    """

    def __init__(self, persistence: str, path: str | None = None) -> None:
        if _EsApplication is None:
            raise RuntimeError("eventsourcing is not installed: pip install 'braidlog[bench]'")
        env = {}
        if persistence == "sqlite":
            env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)}
        self.app = AgentMemoryApp(env=env)
        self.aggregates: dict[str, Any] = {}

    def _aggregate(self, braid_id: str) -> Any:
        agg = self.aggregates.get(braid_id)
        if agg is None:
            agg = self.aggregates[braid_id] = AgentMemory(braid_id)
        return agg

    def save(self, deltas: Sequence[GenericDelta]) -> None:
        """Record one event per delta on its braid's aggregate and save them in one go."""
        touched = {}
        for d in deltas:
            agg = self._aggregate(d.braid_id)
            agg.record(d.kind, d.payload, d.provenance.kind, d.confidence, list(d.tags))
            touched[d.braid_id] = agg
        self.app.save(*touched.values())

    def read_all(self) -> int:
        """Read every aggregate back from its events; the number of events replayed."""
        n = 0
        for agg in self.aggregates.values():
            got = self.app.repository.get(agg.id)
            n += got.count
        return n

    def close(self) -> None:
        self.app.close()


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------


class Sample(NamedTuple):
    """One figure of one repeat."""

    workload: str
    system: str
    metric: str
    value: float
    unit: str
    better: str  # "higher" or "lower"


class Row(msgspec.Struct, kw_only=True):
    """One figure over every repeat: median, spread and ratio to braidlog."""

    workload: str
    system: str
    metric: str
    unit: str
    better: str
    median: float
    low: float
    high: float
    spread: float  # half the range, relative to the median
    samples: list[float]
    ratio: float | None = None  # median of per-repeat ratios system / braidlog


class TargetResult(msgspec.Struct, kw_only=True):
    """A speed target, named by what it compares, checked on this run's figures."""

    name: str
    want: str
    value: float | None
    unit: str
    ok: bool | None
    note: str = ""


class Report(msgspec.Struct, kw_only=True):
    """Everything a run measured, for the table and for ``--json``."""

    machine: dict[str, Any]
    config: dict[str, Any]
    rows: list[Row]
    targets: list[TargetResult]
    skipped: list[str]
    seconds: float


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


#: From this size on a run repeats each workload once unless told otherwise: building and
#: folding logs of a million deltas takes minutes, each repeat as long again.
BIG = 500_000


@dataclass(frozen=True)
class Config:
    """What a run measures and how big."""

    size: int = 100_000          # deltas of the append, scan, replay and time-travel logs
    seed: int = 7
    repeat: int = 5
    single: int = 2_000          # single durable appends per system and repeat
    appends: int = 200           # single appends per appender in the concurrent workload
    queries: int = 200           # random at(seq) per repeat
    checkpoint_every: int = 5_000
    launches: int = 9            # fresh processes per start-up figure and repeat
    entities: int = 10_000
    only: tuple[str, ...] = WORKLOADS
    quick: bool = False
    dir: str | None = None
    recall_size: int | None = None  # vectors in the recall workload (default: size, at most 20,000)
    recall_dim: int = 128

    @classmethod
    def make(cls, *, quick: bool = False, size: int | None = None, seed: int = 7,
             repeat: int | None = None, only: Sequence[str] | None = None,
             dir: str | None = None, recall_size: int | None = None, recall_dim: int = 128) -> Config:
        """A config for a full run, or a quick one (under a minute), with overrides."""
        base = cls(size=5_000, repeat=3, single=200, appends=25, queries=60,
                   checkpoint_every=1_000, launches=3, quick=True) if quick else cls()
        if size is not None:
            if size < 100:
                raise ValidationError("size", f"must be at least 100 deltas, got {size}")
            base = replace(base, size=size, single=max(50, min(base.single, size // 5)),
                           checkpoint_every=min(base.checkpoint_every, max(100, size // 10)),
                           repeat=base.repeat if size < BIG else 1)
        if repeat is not None:
            if repeat < 1:
                raise ValidationError("repeat", f"must be at least 1, got {repeat}")
            base = replace(base, repeat=repeat)
        if only:
            bad = [w for w in only if w not in WORKLOADS]
            if bad:
                raise ValidationError("only", f"unknown workload {bad[0]!r}; choose from "
                                      f"{', '.join(WORKLOADS)}")
            base = replace(base, only=tuple(w for w in WORKLOADS if w in only))
        for name, value, low in (("recall_size", recall_size, 100), ("recall_dim", recall_dim, 2)):
            if value is not None and (not isinstance(value, int) or value < low):
                raise ValidationError(name, f"must be an int of at least {low}, got {value!r}")
        return replace(base, seed=seed, dir=dir, entities=min(10_000, max(10, base.size // 10)),
                       recall_size=recall_size, recall_dim=recall_dim)


Step = Callable[[str], None]


def _no_detail(label: str) -> None:
    pass


@dataclass
class _Run:
    config: Config
    root: str
    step: Step
    session: AgentSession
    cache: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    detail: Step = _no_detail  # how far an untimed step (building a log) has got
    _n: int = 0

    def counting(self, label: str, n: int) -> Callable[[int], None]:
        """A progress callback for building ``n`` items: "label · k of n", each tenth."""
        every = max(1, n // 10)
        last = [0]

        def progress(k: int) -> None:
            if k - last[0] >= every or k >= n:
                last[0] = k
                self.detail(f"{label} · {k:,} of {n:,}")
        return progress

    def path(self, name: str) -> str:
        self._n += 1
        return os.path.join(self.root, f"{self._n:04d}-{name}")

    def deltas(self, n: int, offset: int = 0) -> list[GenericDelta]:
        key = f"deltas:{offset}:{n}"
        if key not in self.cache:
            self.cache[key] = self.session.deltas(n, offset)
        return self.cache[key]

    def bodies(self, n: int) -> list[bytes]:
        key = f"bodies:{n}"
        if key not in self.cache:
            self.cache[key] = [encode(d) for d in self.deltas(n)]
        return self.cache[key]

    def index_keys(self, n: int, offset: int = 0) -> list[IndexKeys]:
        key = f"keys:{offset}:{n}"
        if key not in self.cache:
            self.cache[key] = index_keys(self.deltas(n, offset))
        return self.cache[key]


@contextlib.contextmanager
def _quiet_heap() -> Iterator[None]:
    """Freeze the harness's own objects (the generated workload) out of the garbage
    collector's reach while a system is timed, so that no system pays for collections that
    traverse data only the harness holds; what a system allocates is still collected."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    with _quiet_heap():
        t = time.perf_counter()
        out = fn()
        return time.perf_counter() - t, out


def _rm(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else _unlink(path)


def _unlink(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass


# -- start-up: a fresh interpreter importing braidlog, and running `braidlog head` ----------------

#: What ``import braidlog`` is measured against: the libraries it is built on, imported together.
PEER_IMPORT = "lmdb+msgspec+blake3+ulid"
STARTUP_COMMANDS = {
    ("python, importing nothing", "import ms"): "pass",
    (PEER_IMPORT, "import ms"): "import lmdb, msgspec, blake3, ulid",
    ("braidlog", "import ms"): "import braidlog",
}


def startup_commands(store: str) -> dict[tuple[str, str], list[str]]:
    """(system, metric) -> the command line each start-up figure times, one fresh process each."""
    commands = {key: [sys.executable, "-c", code] for key, code in STARTUP_COMMANDS.items()}
    commands["braidlog", "head ms"] = [sys.executable, "-m", "braidlog", "--store", store, "head"]
    return commands


def _launch(argv: list[str]) -> float:
    """Seconds from spawning ``argv`` to its exit (it must succeed)."""
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def _startup(run: _Run) -> list[Sample]:
    """Each command ``launches`` times, the commands interleaved so that load hits them alike;
    a figure is the median of its launches, in milliseconds."""
    store = run.cache.get("startup:store")
    if store is None:
        store = run.cache["startup:store"] = run.path("startup-store")
        LmdbLog(store).close()
    commands = startup_commands(store)
    run.step("start-up · import braidlog, braidlog head, the peer import")
    for argv in commands.values():  # warm the page cache: every repeat then times the same thing
        _launch(argv)
    times: dict[tuple[str, str], list[float]] = {key: [] for key in commands}
    for _ in range(run.config.launches):
        for key, argv in commands.items():
            times[key].append(_launch(argv))
    return [Sample("start-up", system, metric, statistics.median(ts) * 1000, "ms", "lower")
            for (system, metric), ts in times.items()]


# -- append: batched, 1,000 per durable commit -----------------------------------------------------

def _append(run: _Run) -> list[Sample]:
    n = run.config.size
    ds, bodies = run.deltas(n), run.bodies(n)
    batches = [ds[i:i + BATCH] for i in range(0, n, BATCH)]
    out: list[Sample] = []
    W = "append"

    def rates(system: str, seconds: float, commits: int) -> None:
        out.append(Sample(W, system, "deltas/s", n / seconds, "/s", "higher"))
        out.append(Sample(W, system, "commits/s", commits / seconds, "/s", "higher"))

    run.step("append · braidlog")
    path = run.path("braidlog")
    log = LmdbLog(path, durable=True)
    try:
        seconds, _ = _timed(lambda: [log.append_batch(b) for b in batches])
    finally:
        log.close()
        _rm(path)
    rates("braidlog", seconds, len(batches))

    # The shipped projections kept live on the same batches: first following the log after each
    # commit with their checks off, then through the boundary (checks inside the transaction,
    # the batch folded in as it is checked). The difference is what the checks cost.
    shipped, _ = all_projections()
    unchecked = [replace(p, check=None) for p in shipped]
    admitted = admissible(ds, shipped)  # the session's random bead and decision deltas break rules
    checked_batches = [admitted[i:i + BATCH] for i in range(0, len(admitted), BATCH)]
    for label, projections, follow in (
            (BRAID_FOLLOWING, unchecked, True), (BRAID_CHECKED, shipped, False)):
        run.step(f"append · {label}")
        path = run.path("braidlog-projections")
        braid = Braid(LmdbLog(path, durable=True), projections)
        try:
            def write() -> None:
                for b in checked_batches:
                    braid.append_batch(b)
                    if follow:
                        braid.catch_up()
            seconds, _ = _timed(write)
        finally:
            braid.close()
            _rm(path)
        out.append(Sample(W, label, "deltas/s", len(admitted) / seconds, "/s", "higher"))
        out.append(Sample(W, label, "commits/s", len(checked_batches) / seconds, "/s", "higher"))

    run.step("append · raw LMDB")
    path = run.path("raw-lmdb")
    raw = RawLmdb(path)
    chunks = [bodies[i:i + BATCH] for i in range(0, n, BATCH)]
    try:
        seconds, _ = _timed(lambda: [raw.put_batch(c) for c in chunks])
    finally:
        raw.close()
        _rm(path)
    rates("raw LMDB", seconds, len(chunks))

    run.step("append · raw LMDB, braidlog's five tables")
    path = run.path("raw-lmdb-indexed")
    raw = RawLmdb(path, indexed=True)
    keys = run.index_keys(n)
    key_chunks = [keys[i:i + BATCH] for i in range(0, n, BATCH)]
    try:
        seconds, _ = _timed(lambda: [raw.put_batch(c, k) for c, k in zip(chunks, key_chunks)])
    finally:
        raw.close()
        _rm(path)
    rates(RAW_INDEXED, seconds, len(chunks))

    run.step("append · sqlite3")
    path = run.path("sqlite.db")
    sql = SqliteLog(path)
    rows = [_sql_row(d) for d in ds]
    row_chunks = [rows[i:i + BATCH] for i in range(0, n, BATCH)]
    try:
        seconds, _ = _timed(lambda: [sql.put_batch(c) for c in row_chunks])
    finally:
        sql.close()
        _rm(path)
    rates("sqlite3 WAL FULL", seconds, len(row_chunks))

    if eventsourcing_installed():
        es_batches = [ds[i:i + ES_BATCH] for i in range(0, n, ES_BATCH)]
        for persistence, label in (("sqlite", "eventsourcing SQLite"),
                                   ("popo", "eventsourcing memory")):
            run.step(f"append · {label}")
            path = run.path("es.db")
            es = EventsourcingApp(persistence, path)
            try:
                seconds, _ = _timed(lambda: [es.save(b) for b in es_batches])
            finally:
                es.close()
                _rm(path)
            rates(f"{label} ({ES_BATCH}/save)", seconds, len(es_batches))
    return out


# -- single: one delta per durable commit ---------------------------------------------------------

def _latencies(W: str, system: str, lat: list[float], out: list[Sample]) -> None:
    total = sum(lat)
    out.append(Sample(W, system, "deltas/s", len(lat) / total, "/s", "higher"))
    out.append(Sample(W, system, "commits/s", len(lat) / total, "/s", "higher"))
    for q, name in ((50, "p50"), (99, "p99"), (99.9, "p99.9")):
        out.append(Sample(W, system, f"{name} ms", percentile(lat, q) * 1000, "ms", "lower"))


def _each(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[float]:
    lat: list[float] = []
    clock = time.perf_counter
    with _quiet_heap():
        for x in items:
            t = clock()
            fn(x)
            lat.append(clock() - t)
    return lat


def _single(run: _Run) -> list[Sample]:
    n = run.config.single
    ds = run.deltas(n, offset=10_000_000)
    bodies = [encode(d) for d in ds]
    out: list[Sample] = []
    W = "single"

    run.step("single · braidlog")
    path = run.path("braidlog")
    log = LmdbLog(path, durable=True)
    try:
        _latencies(W, "braidlog", _each(log.append, ds), out)
    finally:
        log.close()
        _rm(path)

    run.step("single · raw LMDB")
    path = run.path("raw-lmdb")
    raw = RawLmdb(path)
    try:
        _latencies(W, "raw LMDB", _each(raw.put_one, bodies), out)
    finally:
        raw.close()
        _rm(path)

    run.step("single · raw LMDB, braidlog's five tables")
    path = run.path("raw-lmdb-indexed")
    raw = RawLmdb(path, indexed=True)
    pairs = list(zip(bodies, run.index_keys(n, offset=10_000_000)))
    try:
        _latencies(W, RAW_INDEXED, _each(lambda p: raw.put_one(*p), pairs), out)
    finally:
        raw.close()
        _rm(path)

    run.step("single · sqlite3")
    path = run.path("sqlite.db")
    sql = SqliteLog(path)
    try:
        _latencies(W, "sqlite3 WAL FULL", _each(sql.put_one, [_sql_row(d) for d in ds]), out)
    finally:
        sql.close()
        _rm(path)

    if eventsourcing_installed():
        for persistence, label in (("sqlite", "eventsourcing SQLite"),
                                   ("popo", "eventsourcing memory")):
            run.step(f"single · {label}")
            path = run.path("es.db")
            es = EventsourcingApp(persistence, path)
            try:
                _latencies(W, f"{label} (1/save)", _each(lambda d: es.save((d,)), ds), out)
            finally:
                es.close()
                _rm(path)
    return out


# -- concurrent appenders, durable, with and without group commit -----------------------------------

def _appenders(log: LmdbLog, per_thread: list[list[GenericDelta]], append: Callable[[GenericDelta], Any]
               ) -> tuple[float, list[float]]:
    barrier = threading.Barrier(len(per_thread) + 1)
    lats: list[list[float]] = [[] for _ in per_thread]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        clock = time.perf_counter
        mine = lats[k]
        barrier.wait()
        try:
            for d in per_thread[k]:
                t = clock()
                append(d)
                mine.append(clock() - t)
        except BaseException as e:  # surfaced below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(per_thread))]
    for t in threads:
        t.start()
    with _quiet_heap():
        barrier.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return seconds, [x for lat in lats for x in lat]


def _concurrent(run: _Run) -> list[Sample]:
    m = run.config.appends
    out: list[Sample] = []
    for k in APPENDERS:
        W = f"concurrent ×{k}"
        per_thread = [run.deltas(m, offset=20_000_000 + t * m) for t in range(k)]
        total = k * m
        for system in ("braidlog", "braidlog + group commit"):
            run.step(f"concurrent ×{k} · {system}")
            path = run.path("braidlog")
            log = LmdbLog(path, durable=True)
            try:
                if system == "braidlog":
                    seconds, lat = _appenders(log, per_thread, log.append)
                    commits = total
                else:
                    group = GroupCommitter(log)
                    seconds, lat = _appenders(log, per_thread, group.append)
                    commits = group.commits
                if log.head().seq != total:
                    raise BraidlogError(f"{system}: {log.head().seq} deltas stored, {total} appended")
            finally:
                log.close()
                _rm(path)
            out.append(Sample(W, system, "deltas/s", total / seconds, "/s", "higher"))
            out.append(Sample(W, system, "commits/s", commits / seconds, "/s", "higher"))
            out.append(Sample(W, system, "p50 ms", percentile(lat, 50) * 1000, "ms", "lower"))
            out.append(Sample(W, system, "p99 ms", percentile(lat, 99) * 1000, "ms", "lower"))
    return out


# -- scan with decode, verify ------------------------------------------------------------------------

def _built_log(run: _Run) -> str:
    """A store of ``size`` deltas, built once per run (for scan and replay)."""
    if "log" not in run.cache:
        n = run.config.size
        label = f"building a log of {n:,} deltas"
        run.step(label)
        path = run.path("scan-log")
        build_log(path, run.session, n, progress=run.counting(label, n)).close()
        run.cache["log"] = path
    return run.cache["log"]


def _copies(run: _Run) -> tuple[str, str]:
    """A raw LMDB database and a sqlite3 table of the same records, built once per run."""
    if "copies" not in run.cache:
        n = run.config.size
        label = f"copying {n:,} records to raw LMDB and sqlite3"
        run.step(label)
        progress = run.counting(label, n)
        raw_path = run.path("scan-raw")
        raw = RawLmdb(raw_path, durable=False)
        sql_path = run.path("scan.db")
        sql = SqliteLog(sql_path, durable=False)
        for at in range(0, n, BATCH):
            chunk = run.session.deltas(min(BATCH, n - at), at)
            raw.put_batch([encode(d) for d in chunk])
            sql.put_batch([_sql_row(d) for d in chunk])
            progress(at + len(chunk))
        raw.close()
        sql.close()
        run.cache["copies"] = (raw_path, sql_path)
    return run.cache["copies"]


def _scan(run: _Run) -> list[Sample]:
    path = _built_log(run)
    raw_path, sql_path = _copies(run)
    n = run.config.size
    out: list[Sample] = []
    W = "scan"
    log = LmdbLog(path, create=False)
    raw = RawLmdb(raw_path, durable=False)
    sql = SqliteLog(sql_path, durable=False)
    try:
        run.step("scan · braidlog scan + decode")
        seconds, count = _timed(lambda: sum(1 for _ in log.scan()))
        assert count == n
        out.append(Sample(W, "braidlog", "scan+decode/s", n / seconds, "/s", "higher"))
        run.step("scan · raw LMDB cursor + msgspec decode")
        seconds, count = _timed(raw.scan_decode)
        out.append(Sample(W, "raw LMDB", "scan+decode/s", count / seconds, "/s", "higher"))
        run.step("scan · sqlite3 select + msgspec decode")
        seconds, count = _timed(sql.scan_decode)
        out.append(Sample(W, "sqlite3", "scan+decode/s", count / seconds, "/s", "higher"))
        run.step("scan · braidlog scan_braid + decode (through the braid index)")
        braids = list(log.braids())
        seconds, count = _timed(lambda: sum(1 for b in braids for _ in log.scan_braid(b)))
        assert count == n
        out.append(Sample(W, "braidlog", "index scan/s", n / seconds, "/s", "higher"))
        run.step("scan · braidlog get by id (through the id index)")
        ids = [r.delta.id for r in log.scan(limit=min(n, 20_000))]
        seconds, _ = _timed(lambda: [log.get(i) for i in ids])
        out.append(Sample(W, "braidlog", "get by id/s", len(ids) / seconds, "/s", "higher"))
        run.step("scan · braidlog verify")
        seconds, _ = _timed(log.verify)
        out.append(Sample(W, "braidlog", "verify/s", n / seconds, "/s", "higher"))
        run.step("scan · raw LMDB cursor + blake3")
        seconds, count = _timed(raw.scan_blake3)
        out.append(Sample(W, "raw LMDB", "verify/s", count / seconds, "/s", "higher"))
    finally:
        log.close()
        raw.close()
        sql.close()
    return out


# -- replay: every projection, the trivial fold, and eventsourcing's aggregate read ---------------------

def _replay(run: _Run) -> list[Sample]:
    path = _built_log(run)
    n = run.config.size
    out: list[Sample] = []
    W = "replay"
    projections, broken = all_projections()
    if "replay:broken" not in run.cache:
        run.cache["replay:broken"] = True
        run.skipped.extend(f"replay: left out {b}" for b in broken)
    never = 1 << 62  # measure the fold alone: no checkpoint writes on the way
    log = LmdbLog(path, create=False)
    try:
        label = f"braidlog, {len(projections)} projections"
        run.step(f"replay · {label}")
        braid = Braid(log, projections, checkpoint_every=never)
        seconds, _ = _timed(braid.rebuild)
        out.append(Sample(W, "braidlog", "deltas/s", n / seconds, "/s", "higher"))
        run.cache["replay:projections"] = [p.name for p in projections]
        run.step("replay · braidlog catch-up, trivial fold")
        braid = Braid(log, [COUNTER], checkpoint_every=never)
        seconds, _ = _timed(braid.rebuild)
        if braid.state(COUNTER.name) != n:
            raise BraidlogError("the trivial fold did not see every delta")
        out.append(Sample(W, "braidlog · trivial fold", "deltas/s", n / seconds, "/s", "higher"))
    finally:
        log.close()
    if eventsourcing_installed():
        for persistence, label in (("sqlite", "eventsourcing SQLite"),
                                   ("popo", "eventsourcing memory")):
            key = f"es:{persistence}"
            if key not in run.cache:
                run.step(f"replay · building {label}")
                progress = run.counting(f"replay · building {label}", n)
                es = EventsourcingApp(persistence, run.path("es-replay.db"))
                for at in range(0, n, BATCH):
                    es.save(run.session.deltas(min(BATCH, n - at), at))
                    progress(min(at + BATCH, n))
                run.cache[key] = es
            es = run.cache[key]
            run.step(f"replay · {label} aggregate read")
            seconds, count = _timed(es.read_all)
            if count != n:
                raise BraidlogError(f"{label} read {count} events of {n}")
            out.append(Sample(W, f"{label} aggregate read", "deltas/s", n / seconds, "/s", "higher"))
    return out


# -- time travel ------------------------------------------------------------------------------------

def time_travel_log(path: str, session: AgentSession, n: int, checkpoint_every: int,
                    progress: Callable[[int], None] | None = None) -> Braid:
    """A braid over a store of ``n`` deltas with ``ENTITIES`` checkpointed every
    ``checkpoint_every`` deltas (built on first use, reused when already there)."""
    build_log(path, session, n, progress=progress).close()
    braid = Braid(LmdbLog(path, durable=False), [ENTITIES], checkpoint_every=checkpoint_every)
    braid.checkpoint()
    return braid


def _time_travel(run: _Run) -> list[Sample]:
    cfg = run.config
    n = cfg.size
    if "tt" not in run.cache:
        path = _built_log(run)
        run.step(f"time travel · checkpointing {ENTITIES.name} every {cfg.checkpoint_every:,}")
        braid = Braid(LmdbLog(path, durable=False), [ENTITIES], checkpoint_every=cfg.checkpoint_every)
        braid.checkpoint()
        run.cache["tt"] = braid
        run.cache["tt:rep"] = 0
    braid: Braid = run.cache["tt"]
    run.cache["tt:rep"] += 1
    rnd = random.Random(cfg.seed * 7919 + run.cache["tt:rep"])
    points = [rnd.randint(1, n) for _ in range(cfg.queries)]
    run.step("time travel · braidlog at(seq)")
    lat = _each(lambda seq: braid.at(seq).state(ENTITIES.name), points)
    W = "time travel"
    out = [
        Sample(W, "braidlog", "at(seq) p50 ms", percentile(lat, 50) * 1000, "ms", "lower"),
        Sample(W, "braidlog", "at(seq) p99 ms", percentile(lat, 99) * 1000, "ms", "lower"),
        Sample(W, "braidlog", "at(seq)/s", len(lat) / sum(lat), "/s", "higher"),
    ]
    fields = next((p for p in all_projections()[0] if p.name == "fields" and p.local), None)
    if fields is None:  # the fields projection is missing or no longer local: nothing to time
        return out
    if "tt:entity" not in run.cache:  # lazy: entity as-of needs no live state
        run.cache["tt:entity"] = Braid(braid.log, [fields], lazy=True)
    by_entity: Braid = run.cache["tt:entity"]
    pairs = [(seq, f"topic-{rnd.randrange(run.session.entities):05d}") for seq in points]
    run.step("time travel · braidlog entity as-of")
    lat = _each(lambda p: entity_at(by_entity.at(p[0]), "fields", p[1]), pairs)
    out += [Sample(W, "braidlog", "entity as-of p50 ms", percentile(lat, 50) * 1000, "ms", "lower"),
            Sample(W, "braidlog", "entity as-of p99 ms", percentile(lat, 99) * 1000, "ms", "lower")]
    return out


# -- proofs (braidlog.proofs): the Merkle tree's cost on append, proofs and checkpoints ----------------

NO_TREE = "braidlog without the Merkle tree"


@contextlib.contextmanager
def _without_tree() -> Iterator[None]:
    """Appends that skip the Merkle tree (the tree table is left behind: a bench-only store)."""
    from .lmdb import format as lmdb_format

    real = lmdb_format.put_tree
    lmdb_format.put_tree = lambda *a: None
    try:
        yield
    finally:
        lmdb_format.put_tree = real


def _proofs(run: _Run) -> list[Sample]:
    from .cli import main as cli
    from .proofs import consistency_proof, inclusion_proof
    from .proofs.keys import generate, write_key

    cfg, W = run.config, "proofs"
    n = cfg.size
    batches = [run.deltas(n)[i:i + BATCH] for i in range(0, n, BATCH)]
    run.step("proofs · batched append with and without the tree, batches interleaved")
    with_path, without_path = run.path("tree"), run.path("no-tree")
    with_tree, without = LmdbLog(with_path, durable=True), LmdbLog(without_path, durable=True)
    spent = {True: 0.0, False: 0.0}
    try:
        with _quiet_heap():
            for i, b in enumerate(batches):  # alternate which goes first: load swings hit both
                for tree in ((True, False) if i % 2 else (False, True)):
                    if tree:
                        t = time.perf_counter()
                        with_tree.append_batch(b)
                    else:
                        with _without_tree():
                            t = time.perf_counter()
                            without.append_batch(b)
                    spent[tree] += time.perf_counter() - t
    finally:
        without.close()
        _rm(without_path)
    out = [Sample(W, "braidlog", "append deltas/s", n / spent[True], "/s", "higher"),
           Sample(W, NO_TREE, "append deltas/s", n / spent[False], "/s", "higher")]
    try:
        rnd = random.Random(cfg.seed * 31 + n)
        seqs = [rnd.randint(1, n) for _ in range(cfg.queries * 5)]
        run.step("proofs · inclusion proofs of random records in the head's tree")
        lat = _each(lambda seq: inclusion_proof(with_tree, seq, n), seqs)
        out += [Sample(W, "braidlog", "inclusion proof p50 ms", percentile(lat, 50) * 1000, "ms", "lower"),
                Sample(W, "braidlog", "inclusion proof p99 ms", percentile(lat, 99) * 1000, "ms", "lower")]
        run.step("proofs · consistency proofs from random sizes to the head")
        lat = _each(lambda old: consistency_proof(with_tree, old, n), seqs)
        out += [Sample(W, "braidlog", "consistency proof p50 ms", percentile(lat, 50) * 1000, "ms", "lower"),
                Sample(W, "braidlog", "consistency proof p99 ms", percentile(lat, 99) * 1000, "ms", "lower")]
        try:
            key = generate("bench.example/log")
        except BraidlogError:
            run.skipped.append("proofs · checkpoint: pip install 'braidlog[proofs]'")
            return out
        key_path = run.path("log.key")
        write_key(key, key_path)
        run.step("proofs · `braidlog checkpoint` (the command, in process)")
        devnull = open(os.devnull, "w")
        try:
            with contextlib.redirect_stdout(devnull):
                def checkpoint(_: int) -> None:
                    if cli(["--store", with_path, "checkpoint", "--key", key_path]) != 0:
                        raise BraidlogError("`braidlog checkpoint` failed in the bench")
                lat = _each(checkpoint, range(max(10, cfg.queries // 4)))
        finally:
            devnull.close()
        out += [Sample(W, "braidlog", "checkpoint p50 ms", percentile(lat, 50) * 1000, "ms", "lower")]
    finally:
        with_tree.close()
        _rm(with_path)
    return out


# -- recall: braidlog/bench_recall.py holds the workload ----------------------------------------------

def _recall(run: _Run) -> list[Sample]:
    try:
        from . import bench_recall
        from . import recall  # noqa: F401  (the recall extra)
    except MissingDependency as e:
        run.skipped.append(f"recall: {e}")
        return []
    if "recall" not in run.cache:
        n = run.config.recall_size or min(run.config.size, bench_recall.DEFAULT_SIZE)
        run.cache["recall"] = bench_recall.setup(run, n, run.config.recall_dim)
    return bench_recall.workload(run, run.cache["recall"])


_RUNNERS: dict[str, Callable[[_Run], list[Sample]]] = {
    "startup": _startup, "append": _append, "single": _single, "concurrent": _concurrent, "scan": _scan,
    "replay": _replay, "time_travel": _time_travel, "recall": _recall, "proofs": _proofs,
}
_STEPS = {"startup": 1, "append": 7, "single": 5, "concurrent": 2 * len(APPENDERS), "scan": 5, "replay": 4,
          "time_travel": 2, "recall": 11, "proofs": 4}  # timed steps per repeat, for the progress bar


# -- targets ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Target:
    name: str  # what it compares, in the words of the people who set it
    num: tuple[str, str, str]
    den: tuple[str, str, str] | None
    op: str
    bound: float
    unit: str


TARGETS = (
    _Target(f"import braidlog vs {PEER_IMPORT}",
            ("start-up", "braidlog", "import ms"), ("start-up", PEER_IMPORT, "import ms"), "<=", 1.5, "×"),
    _Target(f"braidlog head vs import {PEER_IMPORT}",
            ("start-up", "braidlog", "head ms"), ("start-up", PEER_IMPORT, "import ms"), "<=", 2, "×"),
    _Target("batched append vs raw LMDB puts, same bytes, 1,000/commit",
            ("append", "braidlog", "deltas/s"), ("append", "raw LMDB", "deltas/s"), ">=", 0.25, "×"),
    _Target(f"batched append vs {RAW_INDEXED}, 1,000/commit",
            ("append", "braidlog", "deltas/s"), ("append", RAW_INDEXED, "deltas/s"), ">=", 0.5, "×"),
    _Target(f"batched append vs eventsourcing SQLite at {ES_BATCH}/save",
            ("append", "braidlog", "deltas/s"),
            ("append", f"eventsourcing SQLite ({ES_BATCH}/save)", "deltas/s"), ">=", 4, "×"),
    _Target("single durable appends vs raw LMDB one put per commit",
            ("single", "braidlog", "deltas/s"), ("single", "raw LMDB", "deltas/s"), ">=", 0.8, "×"),
    _Target("single durable append vs sqlite3 WAL FULL",
            ("single", "braidlog", "deltas/s"), ("single", "sqlite3 WAL FULL", "deltas/s"), ">=", 1, "×"),
    _Target("scan with decode vs raw cursor + msgspec decode",
            ("scan", "braidlog", "scan+decode/s"), ("scan", "raw LMDB", "scan+decode/s"), ">=", 0.7, "×"),
    _Target("verify vs raw iteration + blake3",
            ("scan", "braidlog", "verify/s"), ("scan", "raw LMDB", "verify/s"), ">=", 0.5, "×"),
    _Target("replay vs eventsourcing SQLite aggregate read",
            ("replay", "braidlog", "deltas/s"),
            ("replay", "eventsourcing SQLite aggregate read", "deltas/s"), ">=", 8, "×"),
    _Target("live catch-up, trivial fold",
            ("replay", "braidlog · trivial fold", "deltas/s"), None, ">=", 300_000, "/s"),
    _Target("at(seq) p50, random seqs",
            ("time travel", "braidlog", "at(seq) p50 ms"), None, "<=", 10, "ms"),
    _Target("at(seq) p99, random seqs",
            ("time travel", "braidlog", "at(seq) p99 ms"), None, "<=", 30, "ms"),
    _Target("batched append with the Merkle tree vs without it",
            ("proofs", "braidlog", "append deltas/s"), ("proofs", NO_TREE, "append deltas/s"),
            ">=", 0.9, "×"),
    _Target("inclusion proof p50, random records",
            ("proofs", "braidlog", "inclusion proof p50 ms"), None, "<=", 1, "ms"),
    _Target("consistency proof p50, random sizes",
            ("proofs", "braidlog", "consistency proof p50 ms"), None, "<=", 1, "ms"),
    _Target("`braidlog checkpoint` p50",
            ("proofs", "braidlog", "checkpoint p50 ms"), None, "<=", 50, "ms"),
    _Target("entity as-of p50, random entities and seqs",
            ("time travel", "braidlog", "entity as-of p50 ms"), None, "<=", 1, "ms"),
    _Target("recall peak resident memory vs raw hnswlib indexing the same vectors",
            ("recall build", "braidlog", "peak RSS MB"), ("recall build", "raw hnswlib", "peak RSS MB"),
            "<=", 1.3, "×"),
    _Target("recall queries/s unfiltered vs raw hnswlib",
            ("recall unfiltered", "braidlog", "queries/s"), ("recall unfiltered", "raw hnswlib", "queries/s"),
            ">=", 0.9, "×"),
    _Target("recall queries/s as of a seq vs unfiltered",
            ("recall as of a seq", "braidlog", "queries/s"), ("recall unfiltered", "braidlog", "queries/s"),
            ">=", 0.8, "×"),
    _Target("recall queries/s filtered by braid vs unfiltered",
            ("recall filtered by braid", "braidlog", "queries/s"),
            ("recall unfiltered", "braidlog", "queries/s"), ">=", 0.8, "×"),
    _Target("recall@10 unfiltered vs exact search",
            ("recall unfiltered", "braidlog", "recall@10"), None, ">=", 0.95, ""),
    _Target("recall@10 as of a seq vs exact search",
            ("recall as of a seq", "braidlog", "recall@10"), None, ">=", 0.95, ""),
    _Target("recall@10 filtered by braid vs exact search",
            ("recall filtered by braid", "braidlog", "recall@10"), None, ">=", 0.95, ""),
)


def _check(t: _Target, by_key: dict[tuple[str, str, str], list[float]], size: int) -> TargetResult:
    want = f"{t.op} {t.bound:,g}{' ' if t.unit == 'ms' else ''}{t.unit}"
    num = by_key.get(t.num)
    den = by_key.get(t.den) if t.den else None
    if num is None or (t.den and den is None):
        return TargetResult(name=t.name, want=want, value=None, unit=t.unit, ok=None,
                            note="not measured in this run")
    if den is not None:
        value = statistics.median(a / b for a, b in zip(num, den))
    else:
        value = statistics.median(num)
    ok = value >= t.bound if t.op == ">=" else value <= t.bound
    note = ""
    if t.num[0] == "time travel" and size < 1_000_000:
        note = f"set for 1,000,000 deltas; this log has {size:,}"
    return TargetResult(name=t.name, want=want, value=value, unit=t.unit, ok=ok, note=note)


# -- the run ------------------------------------------------------------------------------------------

def run(config: Config, *, step: Step | None = None,
        total: Callable[[int], None] | None = None, detail: Step | None = None) -> Report:
    """Run the configured workloads ``repeat`` times; ``step(label)`` is called before each
    timed part (for progress), ``total(n)`` once with the number of steps to expect, and
    ``detail(label)`` as an untimed step that takes long (building a log) gets on."""
    started = time.perf_counter()
    root = tempfile.mkdtemp(prefix="braidlog-bench-", dir=config.dir)
    session = AgentSession(config.seed, entities=config.entities)
    r = _Run(config, root, step or _quiet, session, detail=detail or _no_detail)
    if total is not None:
        total(sum(_STEPS[w] for w in config.only) * config.repeat + 2)
    samples: list[tuple[Sample, int]] = []
    try:
        machine = machine_facts(root)
        for rep in range(config.repeat):
            prefix = f"[{rep + 1}/{config.repeat}] "
            r.step = lambda label, prefix=prefix: (step or _quiet)(prefix + label)
            r.detail = lambda label, prefix=prefix: (detail or _no_detail)(prefix + label)
            for w in config.only:
                samples.extend((s, rep) for s in _RUNNERS[w](r))
    finally:
        for value in r.cache.values():
            if isinstance(value, (Braid, EventsourcingApp)):
                value.close()
            elif isinstance(value, dict) and "log" in value:
                value["log"].close()
        shutil.rmtree(root, ignore_errors=True)
    rows, by_key = _aggregate(samples)
    targets = [_check(t, by_key, config.size) for t in TARGETS]
    cfg = {k: v for k, v in vars(config).items()}
    cfg["only"] = list(config.only)
    cfg["mix"] = session.mix
    cfg["payload_bytes_mean"] = _mean_bytes(session)
    cfg["projections"] = r.cache.get("replay:projections", [])
    return Report(machine=machine, config=cfg, rows=rows, targets=targets,
                  skipped=sorted(set(r.skipped)), seconds=time.perf_counter() - started)


def _quiet(label: str) -> None:
    pass


def _mean_bytes(session: AgentSession) -> float:
    ds = session.deltas(500)
    return round(sum(len(encode(d)) for d in ds) / len(ds), 1)


def _aggregate(samples: list[tuple[Sample, int]]
               ) -> tuple[list[Row], dict[tuple[str, str, str], list[float]]]:
    by_key: dict[tuple[str, str, str], list[float]] = {}
    meta: dict[tuple[str, str, str], Sample] = {}
    reps: dict[tuple[str, str, str], list[int]] = {}
    for s, rep in samples:
        key = (s.workload, s.system, s.metric)
        by_key.setdefault(key, []).append(s.value)
        reps.setdefault(key, []).append(rep)
        meta.setdefault(key, s)
    rows = []
    for key, values in by_key.items():
        s = meta[key]
        med = statistics.median(values)
        lo, hi = min(values), max(values)
        ratio = None
        ref = by_key.get((s.workload, "braidlog", s.metric))
        if ref is not None and s.system != "braidlog" and len(ref) == len(values):
            ratio = statistics.median(v / b for v, b in zip(values, ref) if b)
        rows.append(Row(workload=s.workload, system=s.system, metric=s.metric, unit=s.unit,
                        better=s.better, median=med, low=lo, high=hi,
                        spread=(hi - lo) / 2 / med if med else 0.0, samples=values, ratio=ratio))
    return rows, by_key


# -- machine facts ------------------------------------------------------------------------------------

def machine_facts(path: str) -> dict[str, Any]:
    """Cores, CPU, memory, Python, library versions and the storage under ``path``."""
    facts: dict[str, Any] = {
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "versions": _versions(),
        "storage": _storage(path),
    }
    return facts


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in ("braidlog", "lmdb", "msgspec", "blake3", "python-ulid", "numpy", "hnswlib", "tantivy",
                 "rich", "eventsourcing"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    out["liblmdb"] = ".".join(map(str, lmdb.version()))
    out["sqlite"] = sqlite3.sqlite_version
    return out


def _storage(path: str) -> dict[str, Any]:
    real = os.path.realpath(path)
    best = ("", "?", "?")
    try:
        with open("/proc/mounts") as f:
            for line in f:
                dev, mount, fstype = line.split()[:3]
                if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) > len(best[0]):
                    best = (mount, fstype, dev)
    except OSError:
        pass
    out: dict[str, Any] = {"path": real, "mount": best[0] or None, "filesystem": best[1],
                           "device": best[2]}
    name = os.path.basename(best[2])
    for candidate in (name, name.rstrip("0123456789"), name.rstrip("0123456789").rstrip("p")):
        try:
            with open(f"/sys/block/{candidate}/queue/rotational") as f:
                out["rotational"] = f.read().strip() == "1"
            break
        except OSError:
            continue
    out["fsync_ms_p50"] = _fsync_ms(path)
    return out


def _fsync_ms(path: str, n: int = 30) -> float:
    """Median time of a 4 KiB write plus fsync under ``path``: the floor of a durable commit."""
    fname = os.path.join(path, "fsync.probe")
    lat = []
    fd = os.open(fname, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        block = os.urandom(4096)
        for i in range(n):
            t = time.perf_counter()
            os.pwrite(fd, block, i * 4096)
            os.fsync(fd)
            lat.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(fname)
    return round(statistics.median(lat) * 1000, 3)


# -- rendering ------------------------------------------------------------------------------------------

def _fmt(value: float, unit: str) -> str:
    if unit == "":
        return f"{value:.3f}"
    if unit == "ms":
        return f"{value:.3f} ms" if value < 1 else f"{value:.2f} ms" if value < 100 else f"{value:,.0f} ms"
    if unit != "/s":  # seconds, megabytes: the value and its unit
        return f"{value:,.1f} {unit}" if value < 100 else f"{value:,.0f} {unit}"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M/s"
    if value >= 1e4:
        return f"{value / 1e3:.1f} k/s"
    return f"{value:,.0f}/s"


def _fmt_ratio(ratio: float | None) -> str:
    if ratio is None:
        return ""
    return f"{ratio:.2f}×" if ratio < 100 else f"{ratio:,.0f}×"


def render(report: Report, console: Any) -> None:
    """Print the report as rich tables on ``console``."""
    from rich.table import Table

    m = report.machine
    st = m["storage"]
    v = m["versions"]
    cfg = report.config
    console.print(
        f"[bold]braidlog bench[/bold]  {m['cores']} cores · {m['cpu']} · {m['memory_gib']} GiB · "
        f"Python {m['python']} · {m['platform']}")
    console.print(
        f"storage: {st['filesystem']} on {st['device']} at {st['mount']}"
        f"{' (rotational)' if st.get('rotational') else ''} · fsync p50 {st['fsync_ms_p50']} ms")
    console.print("versions: " + ", ".join(f"{k} {val}" for k, val in v.items()))
    console.print(
        f"size {cfg['size']:,} deltas (mean {cfg['payload_bytes_mean']} bytes encoded), "
        f"single {cfg['single']:,}, {cfg['appends']:,} per appender, seed {cfg['seed']}, "
        f"{cfg['repeat']} repeats{' (quick)' if cfg['quick'] else ''}, {report.seconds:.0f} s")
    table = Table(title="figures: median ± half-range over repeats; vs braidlog = median of "
                  "per-repeat ratios (system / braidlog)", title_justify="left")
    for col, justify in (("workload", "left"), ("system", "left"), ("metric", "left"),
                         ("median", "right"), ("±", "right"), ("vs braidlog", "right")):
        table.add_column(col, justify=justify)
    last = None
    for row in report.rows:
        if last is not None and row.workload != last:
            table.add_section()
        table.add_row(row.workload if row.workload != last else "", row.system, row.metric,
                      _fmt(row.median, row.unit), f"{row.spread * 100:.0f}%",
                      _fmt_ratio(row.ratio))
        last = row.workload
    console.print(table)
    targets = Table(title="targets (ratios measured pairwise in this run)", title_justify="left")
    for col in ("target", "want", "measured", ""):
        targets.add_column(col)
    for t in report.targets:
        if t.value is None:
            shown, mark = "—", "[dim]not run[/dim]"
        else:
            shown = (f"{t.value:.2f}×" if t.unit == "×" else _fmt(t.value, t.unit))
            mark = "[green]met[/green]" if t.ok else "[red]missed[/red]"
        targets.add_row(t.name + (f" [dim]({t.note})[/dim]" if t.note else ""), t.want, shown,
                        mark)
    console.print(targets)
    for s in report.skipped:
        console.print(f"[yellow]note[/yellow]: {s}")
