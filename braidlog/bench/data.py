"""The bench's workload data: deterministic agent sessions of about 300-byte deltas, the bench's
own projections, and the logs built from them (untimed)."""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from ..braid import Braid
from ..delta import BeadRef, GenericDelta, Provenance, ProvenanceKind, Refs, validate
from ..errors import BraidlogError, Rejected, ValidationError
from ..kinds import REGISTRY
from ..lmdb.log import LmdbLog
from ..projection import Projection
from ..store import MemoryLog

#: Who speaks in a chat message.
_CHAT: tuple[ProvenanceKind, ...] = ("user", "assistant")
#: What a maker gives for one delta: its payload, provenance and refs.
_Made = tuple[dict[str, Any], Provenance, Refs | None]

__all__ = ["START", "BATCH", "AgentSession", "agent_deltas", "Entity", "ENTITIES", "COUNTER",
           "all_projections", "admissible", "build_log", "time_travel_log"]

START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
BATCH = 1_000  # deltas per commit of the batched append and of every log built

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
    def _makers(self) -> dict[str, tuple[int, Callable[..., _Made]]]:
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

    def _message(self, rnd: random.Random, i: int, entity: int) -> _Made:
        who = rnd.choice(_CHAT)
        prov = Provenance(who, model=rnd.choice(_MODELS) if who == "assistant" else None,
                          source="chat")
        return {"text": self._text(rnd, rnd.randint(12, 18)), "channel": "chat"}, prov, None

    def _tool_call(self, rnd: random.Random, i: int, entity: int) -> _Made:
        tool = rnd.choice(_TOOLS)
        args = {"query": self._text(rnd, 5), "path": f"/srv/app/{rnd.choice(_WORDS)}.log",
                "since": f"2025-03-0{rnd.randint(1, 9)}T0{rnd.randint(0, 9)}:00:00Z",
                "limit": rnd.choice((10, 20, 50, 100))}
        return ({"tool": tool, "args": args, "call_id": f"call-{i:08d}"},
                Provenance("assistant", model=rnd.choice(_MODELS), tool=tool), None)

    def _tool_result(self, rnd: random.Random, i: int, entity: int) -> _Made:
        tool = rnd.choice(_TOOLS)
        output = {"status": rnd.choice((200, 200, 200, 404, 500)), "hits": rnd.randint(0, 40),
                  "summary": self._text(rnd, 9), "elapsed_ms": rnd.randint(3, 4000)}
        return ({"tool": tool, "output": output, "ok": output["status"] == 200,
                 "call_id": f"call-{i - 1:08d}"}, Provenance("tool", tool=tool), None)

    def _observation(self, rnd: random.Random, i: int, entity: int) -> _Made:
        data = {"host": f"node-{rnd.randint(1, 64):02d}", "cpu": round(rnd.random(), 3),
                "queue": rnd.randint(0, 5000), "region": rnd.choice(("eu-west", "us-east")),
                "metric": rnd.choice(_WORDS)}
        return ({"text": self._text(rnd, 8), "data": data},
                Provenance("perception", source="monitor"), None)

    def _bead_version(self, rnd: random.Random, i: int, entity: int) -> _Made:
        bead, version = f"bead-{entity:05d}", f"bead-{entity:05d}-v{i}"
        payload = {"bead_id": bead, "bead_version_id": version, "bead_type": "memory_bead",
                   "version": 1 + i // max(1, self.entities), "name": self._text(rnd, 3),
                   "content": {"text": self._text(rnd, 6), "source": rnd.choice(_TOOLS)},
                   "memory_type": rnd.choice(("semantic", "procedural", "episodic"))}
        return (payload, Provenance("assistant", model=rnd.choice(_MODELS)),
                Refs(beads=(BeadRef(bead, "updated", version),)))

    def _bead_write(self, rnd: random.Random, i: int, entity: int) -> _Made:
        bead, version = f"bead-{entity:05d}", f"bead-{entity:05d}-v{i - 1}"
        payload = {"bead_id": bead, "bead_version_id": version, "bead_type": "memory_bead",
                   "version": 1 + i // max(1, self.entities)}
        return (payload, Provenance("assistant", model=rnd.choice(_MODELS)),
                Refs(beads=(BeadRef(bead, "updated", version),)))

    def _field_revised(self, rnd: random.Random, i: int, entity: int) -> _Made:
        payload = {"topic_id": f"topic-{entity:05d}", "field": rnd.choice(_FIELDS),
                   "field_type": "string", "value": self._text(rnd, 5), "provenance": "llm",
                   "why_changed": self._text(rnd, 5), "impact_expected": self._text(rnd, 3)}
        return payload, Provenance("assistant", model=rnd.choice(_MODELS)), None

    def _decision_recorded(self, rnd: random.Random, i: int, entity: int) -> _Made:
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
ENTITIES: Projection[dict[str, Entity]] = Projection("bench.entities", 1, {}, _evolve_entities,
                                                    state_type=dict[str, Entity], view=EntityView)
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


def time_travel_log(path: str, session: AgentSession, n: int, checkpoint_every: int,
                    progress: Callable[[int], None] | None = None) -> Braid:
    """A braid over a store of ``n`` deltas with ``ENTITIES`` checkpointed every
    ``checkpoint_every`` deltas (built on first use, reused when already there)."""
    build_log(path, session, n, progress=progress).close()
    braid = Braid(LmdbLog(path, durable=False), [ENTITIES], checkpoint_every=checkpoint_every)
    braid.checkpoint()
    return braid

