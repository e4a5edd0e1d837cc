"""The memories commands and ``decide``: the deltas a command appends against the state.

The rules those deltas must obey are ``rules``'s, run at the boundary on every path a delta
takes in (``execute`` included); ``decide`` works out which policy applies and builds the delta.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal, overload

import msgspec

import braidlog
from braidlog import ConflictError, Context, GenericDelta, Rejected, ValidationError

from .events import MemoryAdded, MemoryReinforced, MemoryReplaced
from .model import (
    BUILTIN_PROFILES,
    DEFAULT_PROFILE,
    MAX_ID,
    RESERVED_METADATA,
    ConflictPolicy,
    DomainProfile,
    Memory,
    Source,
    TypeSpec,
)
from .state import State, slot_key

__all__ = ["AddMemory", "UpdateMemory", "BindProfile", "decide", "resolve", "reinforce_confidence"]

class AddMemory(braidlog.Command, frozen=True, kw_only=True):
    """Store a memory; an occupied slot goes through its type's ConflictPolicy.

    ``expected_version`` is the version the caller expects of the slot's current record (0 for
    an empty slot, or any memory without a subject).
    """

    memory: Memory
    expected_version: int | None = None


class UpdateMemory(braidlog.Command, frozen=True, kw_only=True):
    """Change a record's content, confidence, status, tags or (merged) metadata."""

    memory_id: str
    expected_version: int | None = None
    content: str | None = None
    confidence: float | None = None
    status: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None


class BindProfile(braidlog.Command, frozen=True, kw_only=True):
    """Make ``workspace`` take its types and policies from the profile named ``profile``."""

    workspace: str
    profile: str


def resolve(existing: Memory, incoming: Memory, policy: ConflictPolicy) -> ConflictPolicy:
    """The policy actually applied: REPLACE downgrades to IGNORE when the incoming is older or
    weaker (ties replace), or when both have sources and the incoming's best authority is lower."""
    if policy is not ConflictPolicy.REPLACE:
        return policy
    if existing.sources and incoming.sources:
        if max(s.authority for s in incoming.sources) < max(s.authority for s in existing.sources):
            return ConflictPolicy.IGNORE
    assert incoming.timestamp is not None and existing.timestamp is not None  # both completed memories
    if incoming.timestamp < existing.timestamp or incoming.confidence < existing.confidence:
        return ConflictPolicy.IGNORE
    return ConflictPolicy.REPLACE


def reinforce_confidence(c_old: float, c_new: float, weight_sources: Iterable[Source]
                         ) -> tuple[float, float, float]:
    """``(c, w, bump)``: w = summed authority (1.0 if 0), bump = c_new·w·0.5,
    c = min(1, c_old + (1 − c_old)·bump)."""
    w = sum(s.authority for s in weight_sources) or 1.0
    bump = c_new * w * 0.5
    return min(1.0, c_old + (1.0 - c_old) * bump), w, bump


@overload
def _text(value: Any, name: str, optional: Literal[False] = False, max_length: int | None = None) -> str: ...
@overload
def _text(value: Any, name: str, optional: bool, max_length: int | None = None) -> str | None: ...
def _text(value: Any, name: str, optional: bool = False, max_length: int | None = None) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or (max_length is not None and len(value) > max_length):
        size = f"1..{max_length}" if max_length else "at least 1"
        raise ValidationError(name, f"must be a string of {size} characters{' or None' if optional else ''} "
                                    f"(got {value!r})")
    return value


def _confidence(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0.0 <= value <= 1.0):
        raise ValidationError(name, f"must be a number in [0, 1] (got {value!r})")
    return float(value)


def _aware(value: Any, name: str) -> datetime:
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise ValidationError(name, f"must be a timezone-aware datetime (got {value!r})")
    return value


def _json(value: Any, name: str) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(name, f"must be finite JSON (got {value!r})")
        return value
    if isinstance(value, (list, tuple)):
        return [_json(v, f"{name}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValidationError(name, "must be JSON: object keys are strings")
        return {k: _json(v, f"{name}.{k}") for k, v in value.items()}
    raise ValidationError(name, f"must be JSON (got {type(value).__name__})")


def _metadata(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(name, f"must be a JSON object (got {type(value).__name__})")
    reserved = [k for k in value if k in RESERVED_METADATA]
    if reserved:
        raise ValidationError(f"{name}.{reserved[0]}", "is managed by the library; leave it out")
    return _json(value, name)


def _tags(value: Any, name: str) -> list[str]:
    if not isinstance(value, (list, tuple)):
        raise ValidationError(name, f"must be a list of strings (got {type(value).__name__})")
    for i, t in enumerate(value):
        _text(t, f"{name}[{i}]", max_length=MAX_ID)
    return list(dict.fromkeys(value))


def _sources(value: Any, name: str, now: datetime) -> list[Source]:
    if not isinstance(value, (list, tuple)):
        raise ValidationError(name, f"must be a list of Source (got {type(value).__name__})")
    out: dict[tuple, Source] = {}
    for i, s in enumerate(value):
        where = f"{name}[{i}]"
        if isinstance(s, dict):
            try:
                s = msgspec.convert(s, Source)
            except msgspec.ValidationError as e:
                raise ValidationError(where, str(e)) from None
        if not isinstance(s, Source):
            raise ValidationError(where, f"must be a Source (got {type(s).__name__})")
        _text(s.document_id, f"{where}.document_id")
        _text(s.chunk_id, f"{where}.chunk_id", optional=True)
        _text(s.uri, f"{where}.uri", optional=True)
        a = s.authority
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not math.isfinite(a) or a < 0:
            raise ValidationError(f"{where}.authority", f"must be a finite number >= 0 (got {a!r})")
        if s.span is not None:
            sp = s.span
            if (not isinstance(sp, tuple) or len(sp) != 2 or not all(type(x) is int for x in sp)
                    or not 0 <= sp[0] <= sp[1]):
                raise ValidationError(f"{where}.span", f"must be (start, end) ints with 0 <= start <= end (got {sp!r})")
        if s.retrieved_at is None:
            s = msgspec.structs.replace(s, retrieved_at=now)
        else:
            _aware(s.retrieved_at, f"{where}.retrieved_at")
        out.setdefault(s.key(), s)
    return list(out.values())


def _profile_or_none(state: State, workspace: str, profiles: Mapping[str, DomainProfile],
                     default: str) -> DomainProfile | None:
    return profiles.get(state.profiles.get(workspace, default))


def _profile(state: State, workspace: str, profiles: Mapping[str, DomainProfile], default: str) -> DomainProfile:
    name = state.profiles.get(workspace, default)
    profile = profiles.get(name)
    if profile is None:
        raise Rejected(f"workspace {workspace!r} is bound to profile {name!r}, which this decider does not "
                       f"know; pass it to memories_decider(profiles=[...])")
    return profile


def _check_spec(spec: TypeSpec, m: Memory, prefix: str) -> None:
    for f in spec.required_fields:
        attr = "sources" if f == "source" else f
        if not getattr(m, attr):
            raise ValidationError(f"{prefix}{attr}", f"is required for type {spec.name!r}")
    if spec.allowed_tags is not None:
        bad = [t for t in m.tags if t not in spec.allowed_tags]
        if bad:
            raise ValidationError(f"{prefix}tags", f"{bad[0]!r} is not allowed for type {spec.name!r}; "
                                                   f"use {', '.join(spec.allowed_tags)}")


def _incoming(m: Any, ctx: Context) -> Memory:
    """The incoming memory checked and completed (id, timestamp, sources' retrieved_at)."""
    if isinstance(m, dict):
        try:
            m = msgspec.convert(m, Memory)
        except msgspec.ValidationError as e:
            raise ValidationError("memory", str(e)) from None
    if not isinstance(m, Memory):
        raise ValidationError("memory", f"must be a Memory (got {type(m).__name__})")
    for attr, default in (("superseded_by", None), ("version", 0), ("half_life_days", None),
                          ("updated_at", None)):
        if getattr(m, attr) != default:
            raise ValidationError(f"memory.{attr}", "is set by the library; leave it unset")
    mid = _text(m.id, "memory.id", optional=True, max_length=MAX_ID) or ctx.new_id()
    return Memory(
        id=mid, type=_text(m.type, "memory.type", max_length=MAX_ID),
        content=_text(m.content, "memory.content"),
        confidence=_confidence(m.confidence, "memory.confidence"),
        subject=_text(m.subject, "memory.subject", optional=True),
        tags=_tags(m.tags, "memory.tags"),
        workspace=_text(m.workspace, "memory.workspace", max_length=MAX_ID),
        sources=_sources(m.sources, "memory.sources", ctx.now),
        status=_text(m.status, "memory.status", optional=True),
        metadata=_metadata(m.metadata, "memory.metadata"),
        timestamp=ctx.now if m.timestamp is None else _aware(m.timestamp, "memory.timestamp"))


def _current(state: State, workspace: str, type: str, subject: str | None) -> Memory | None:
    key = slot_key(workspace, type, subject)
    for rid in reversed(state.slots.get(key, []) if key else []):
        rec = state.memories[rid]
        if rec.superseded_by is None:
            return rec
    return None


def _check_version(expected: Any, actual: int, what: str) -> None:
    if expected is None:
        return
    if isinstance(expected, bool) or not isinstance(expected, int):
        raise ValidationError("expected_version", f"must be an int or None (got {expected!r})")
    if expected != actual:
        raise ConflictError(f"{what}: expected version {expected}, actual {actual}; re-read and retry",
                            expected=expected, actual=actual)


def _src(sources: Iterable[Source]) -> list[Any]:
    return [msgspec.to_builtins(s) for s in sources]


def decide(command: Any, state: State, ctx: Context, *,
           profiles: Mapping[str, DomainProfile] = BUILTIN_PROFILES,
           default_profile: str = DEFAULT_PROFILE) -> list[GenericDelta]:
    """The deltas that carry out ``command`` against ``state``; [] when already done or ignored."""
    if isinstance(command, AddMemory):
        return _add(command, state, ctx, profiles, default_profile)
    if isinstance(command, UpdateMemory):
        return _update(command, state, ctx, profiles, default_profile)
    if isinstance(command, BindProfile):
        ws = _text(command.workspace, "workspace", max_length=MAX_ID)
        if command.profile not in profiles:
            raise ValidationError("profile", f"unknown profile {command.profile!r}; use one of {', '.join(profiles)}")
        if state.profiles.get(ws) == command.profile:
            return []
        return [ctx.delta("workspace_profile_bound", {"workspace": ws, "profile": command.profile})]
    raise ValidationError("command", f"memories cannot decide a {type(command).__name__}; "
                                     "use AddMemory, UpdateMemory or BindProfile")


def _add(c: AddMemory, state: State, ctx: Context, profiles: Mapping[str, DomainProfile],
         default_profile: str) -> list[GenericDelta]:
    m = _incoming(c.memory, ctx)
    mid, ts = m.id, m.timestamp
    assert mid is not None and ts is not None  # _incoming fills both
    if mid in state.memories or mid in state.absorbed:
        return []  # the id is the add's idempotency key: this add is already done
    profile = _profile(state, m.workspace, profiles, default_profile)
    spec = profile.spec(m.type)
    if spec is None:
        raise ValidationError("memory.type", f"unknown type {m.type!r} in workspace {m.workspace!r} "
                                             f"(profile {profile.name!r}); use one of {', '.join(profile.all_types())}")
    _check_spec(spec, m, "memory.")
    existing = _current(state, m.workspace, m.type, m.subject)
    existing_id = existing.id if existing is not None else None
    _check_version(c.expected_version, existing.version if existing else 0,
                   f"slot ({m.workspace}, {m.type}, {m.subject})")
    policy = None if existing is None else resolve(existing, m, spec.conflict_policy)
    if policy is ConflictPolicy.IGNORE:
        return []
    if existing is not None and policy is ConflictPolicy.REPLACE:
        assert existing_id is not None  # a kept memory has its id
        replaced = MemoryReplaced(id=existing_id, incoming_id=mid, content=m.content,
                                  confidence=m.confidence, timestamp=ts, tags=m.tags,
                                  sources=m.sources, metadata=m.metadata)
        return [ctx.delta("memory_replaced", msgspec.to_builtins(replaced))]
    if existing is not None and policy is ConflictPolicy.REINFORCE:
        assert existing_id is not None  # a kept memory has its id
        seen = {s.key() for s in existing.sources}
        new = [s for s in m.sources if s.key() not in seen]
        conf, w, bump = reinforce_confidence(existing.confidence, m.confidence, new or m.sources)
        reinforced = MemoryReinforced(id=existing_id, incoming_id=mid, confidence=conf, weight=w, bump=bump,
                                      sources=new, tags=m.tags,
                                      content=m.content if m.confidence > conf else None)
        return [ctx.delta("memory_reinforced", msgspec.to_builtins(reinforced))]
    status = m.status
    if status is None and m.type == "goal":
        status = "active"
    added = MemoryAdded(
        id=mid, type=m.type, content=m.content, confidence=m.confidence, workspace=m.workspace,
        timestamp=ts, subject=m.subject, tags=m.tags, sources=m.sources, status=status,
        metadata=m.metadata, half_life_days=spec.half_life_days, policy=policy,
        supersedes=existing_id if policy is ConflictPolicy.SUPERSEDE else None,
        conflicts_with=existing_id if policy is ConflictPolicy.FLAG else None)
    return [ctx.delta("memory_added", msgspec.to_builtins(added))]


def _update(c: UpdateMemory, state: State, ctx: Context, profiles: Mapping[str, DomainProfile],
            default_profile: str) -> list[GenericDelta]:
    rid = _text(c.memory_id, "memory_id", max_length=MAX_ID)
    rec = state.memories.get(rid)
    if rec is None:
        raise Rejected(f"unknown memory {rid!r}" + (f"; it was absorbed into {state.absorbed[rid]!r}"
                                                     if rid in state.absorbed else ""))
    _check_version(c.expected_version, rec.version, f"memory {rid}")
    if rec.superseded_by is not None:
        raise Rejected(f"memory {rid!r} is superseded by {rec.superseded_by!r}; update that one")
    changes: dict[str, Any] = {}
    if c.content is not None and _text(c.content, "content") != rec.content:
        changes["content"] = c.content
    if c.confidence is not None and _confidence(c.confidence, "confidence") != rec.confidence:
        changes["confidence"] = float(c.confidence)
    if c.status is not None and _text(c.status, "status") != rec.status:
        changes["status"] = c.status
    if c.tags is not None:
        tags = _tags(c.tags, "tags")
        profile = profiles.get(state.profiles.get(rec.workspace, default_profile))
        spec = profile.spec(rec.type) if profile is not None else None
        if spec is not None:
            _check_spec(spec, Memory(type=rec.type, content=rec.content, subject=rec.subject, tags=tags,
                                     sources=rec.sources, status=rec.status, metadata=rec.metadata), "")
        if tags != rec.tags:
            changes["tags"] = tags
    if c.metadata is not None:
        meta = _metadata(c.metadata, "metadata")
        meta = {k: v for k, v in meta.items() if k not in rec.metadata or rec.metadata[k] != v}
        if meta:
            changes["metadata"] = meta
    if not changes:
        return []
    return [ctx.delta("memory_updated", {"id": rid, **changes})]
