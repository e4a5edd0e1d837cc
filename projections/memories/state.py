"""The memories projection's state and its fold (checks nothing: what is in the log is a fact)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import overload

import msgspec
from msgspec import Struct

import braidlog
from braidlog import GenericDelta

from .events import KINDS
from .model import REPLACE_LOG_LIMIT, Memory

__all__ = ["State", "slot_key", "evolve"]

class State(Struct, kw_only=True):
    """Records by id (in the order they were stored), slots, absorbed ids and profile bindings."""

    memories: dict[str, Memory] = {}
    slots: dict[str, list[str]] = {}
    absorbed: dict[str, str] = {}
    profiles: dict[str, str] = {}


@overload
def slot_key(workspace: str, type: str, subject: str) -> str: ...
@overload
def slot_key(workspace: str, type: str, subject: str | None) -> str | None: ...
def slot_key(workspace: str, type: str, subject: str | None) -> str | None:
    """The slot of ``(workspace, type, subject)`` as a string key; None without a subject."""
    if subject is None:
        return None
    return msgspec.json.encode([workspace, type, subject]).decode()


def _union(old: Iterable[str], new: Iterable[str]) -> list[str]:
    out = list(old)
    out.extend(t for t in dict.fromkeys(new) if t not in out)
    return out


def evolve(state: State, delta: GenericDelta) -> State:
    """Apply one memories delta (in place); other kinds leave the state as it is."""
    kind = delta.kind
    if kind not in KINDS:
        return state
    p = braidlog.typed(delta)
    ts = delta.ts
    if kind == "workspace_profile_bound":
        state.profiles[p.workspace] = p.profile
        return state
    if kind == "memory_added":
        if p.id in state.memories:
            return state  # a second add of one id: the first stands
        meta = dict(p.metadata)
        if p.conflicts_with is not None:
            meta["conflicts_with"] = [p.conflicts_with]
        added = Memory(
            id=p.id, type=p.type, content=p.content, confidence=p.confidence, subject=p.subject,
            tags=list(p.tags), workspace=p.workspace,
            sources=[s if s.retrieved_at else msgspec.structs.replace(s, retrieved_at=ts) for s in p.sources],
            status=p.status, metadata=meta, timestamp=p.timestamp, version=1,
            half_life_days=p.half_life_days, updated_at=ts)
        for other_id, link in ((p.supersedes, "superseded_by"), (p.conflicts_with, "conflicts_with")):
            other = state.memories.get(other_id) if other_id else None
            if other is None:
                continue
            if link == "superseded_by":
                other.superseded_by = p.id
            else:
                other.metadata = {**other.metadata,
                                  "conflicts_with": [*other.metadata.get("conflicts_with", []), p.id]}
            other.version += 1
            other.updated_at = ts
        state.memories[p.id] = added
        key = slot_key(p.workspace, p.type, p.subject)
        if key is not None:
            state.slots.setdefault(key, []).append(p.id)
        return state
    rec = state.memories.get(p.id)
    if rec is None:
        return state
    if kind == "memory_replaced":
        entry = {"at": ts.isoformat(), "delta_id": delta.id, "incoming_id": p.incoming_id,
                 "previous_content": rec.content, "previous_confidence": rec.confidence}
        log = [*rec.metadata.get("replace_log", []), entry][-REPLACE_LOG_LIMIT:]
        rec.metadata = {**rec.metadata, **p.metadata, "replace_log": log,
                        "replace_count": rec.metadata.get("replace_count", 0) + 1}
        rec.content, rec.confidence, rec.timestamp = p.content, p.confidence, p.timestamp
        rec.tags = _union(rec.tags, p.tags)
        if p.sources:
            rec.sources = list(p.sources)
        state.absorbed[p.incoming_id] = p.id
    elif kind == "memory_reinforced":
        seen = {s.key() for s in rec.sources}
        rec.sources = [*rec.sources, *(s for s in p.sources if s.key() not in seen)]
        rec.confidence = p.confidence
        rec.tags = _union(rec.tags, p.tags)
        if p.content is not None:
            rec.content = p.content
        state.absorbed[p.incoming_id] = p.id
    else:  # memory_updated
        if p.content is not None:
            rec.content = p.content
        if p.confidence is not None:
            rec.confidence = p.confidence
        if p.status is not None:
            rec.status = p.status
        if p.tags is not None:
            rec.tags = list(p.tags)
        if p.metadata:
            rec.metadata = {**rec.metadata, **p.metadata}
    rec.version += 1
    rec.updated_at = ts
    return state
