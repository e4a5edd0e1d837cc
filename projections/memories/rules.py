"""The memories projection's rules: typedmem's policies (seed 002), checked where deltas enter.

Each rule is one function named after it, raising ``Rejected`` (``refuse``) or
``ValidationError`` whose message starts with the rule's name. ``checker(profiles, default)``
builds the check the boundary runs inside the write transaction for every delta of this
projection's kinds, whatever the path (``Braid.append``, ``append_batch``, ``execute``, the
CLI's ``append`` and ``import``, MCP): a raw delta obeys what ``decide`` would have decided.

| rule | kinds | seed |
|---|---|---|
| ``memory_id_unique`` | memory_added, memory_replaced, memory_reinforced | (an id names one memory) |
| ``type_in_profile`` | memory_added | Profiles: a workspace accepts its profile's types |
| ``type_spec_fields`` | memory_added, memory_updated | TypeSpec.required_fields, allowed_tags |
| ``reserved_metadata`` | memory_added, memory_replaced, memory_updated | library-managed metadata keys |
| ``half_life_from_type`` | memory_added | TypeSpec.half_life_days |
| ``conflict_policy`` | memory_added, memory_replaced, memory_reinforced | ConflictPolicy: the slot's policy decides |
| ``reinforce_blend`` | memory_reinforced | REINFORCE: authority-weighted blend |
| ``memory_known`` | memory_replaced, memory_reinforced, memory_updated | |
| ``profile_known`` | workspace_profile_bound, every write in a workspace | DomainProfile |
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from braidlog import Boundary, Check, GenericDelta, ValidationError, refuse

from .decide import _current, _profile_or_none, resolve
from .events import MemoryAdded, MemoryReinforced, MemoryReplaced, MemoryUpdated, WorkspaceProfileBound
from .model import RESERVED_METADATA, ConflictPolicy, DomainProfile, Memory, TypeSpec
from .state import State

__all__ = ["checker", "memory_id_unique", "type_in_profile", "type_spec_fields", "reserved_metadata",
           "half_life_from_type", "conflict_policy", "reinforce_blend", "memory_known", "profile_known"]

P = ConflictPolicy


def memory_id_unique(state: State, mid: str, d: GenericDelta, what: str) -> None:
    """An id names one memory: a new record (or an absorbed incoming memory) takes a fresh id."""
    if mid in state.memories or mid in state.absorbed:
        raise refuse("memory_id_unique", f"{what} {mid!r} is already a memory"
                     + (f" (absorbed into {state.absorbed[mid]!r})" if mid in state.absorbed else "")
                     + "; give the new memory a new id")


def profile_known(state: State, workspace: str, profiles: Mapping[str, DomainProfile],
                  default: str) -> DomainProfile:
    """A workspace's profile is one this store's memories projection knows."""
    profile = _profile_or_none(state, workspace, profiles, default)
    if profile is None:
        name = state.profiles.get(workspace, default)
        raise refuse("profile_known", f"workspace {workspace!r} is bound to profile {name!r}, which "
                                      "this store's memories projection does not know")
    return profile


def type_in_profile(profile: DomainProfile, workspace: str, type: str) -> TypeSpec:
    """A memory's type is one of its workspace's profile."""
    spec = profile.spec(type)
    if spec is None:
        raise ValidationError("payload.type", f"type_in_profile: unknown type {type!r} in workspace "
                                              f"{workspace!r} (profile {profile.name!r}); use one of "
                                              f"{', '.join(profile.all_types())}")
    return spec


def type_spec_fields(spec: TypeSpec, m: Memory) -> None:
    """The type's required fields are set, and its tags are among the allowed ones."""
    for f in spec.required_fields:
        attr = "sources" if f == "source" else f
        if not getattr(m, attr):
            raise ValidationError(f"payload.{attr}", f"type_spec_fields: is required for type {spec.name!r}")
    if spec.allowed_tags is not None:
        bad = [t for t in m.tags if t not in spec.allowed_tags]
        if bad:
            raise ValidationError("payload.tags", f"type_spec_fields: {bad[0]!r} is not allowed for type "
                                                  f"{spec.name!r}; use {', '.join(spec.allowed_tags)}")


def reserved_metadata(metadata: Mapping[str, Any] | None) -> None:
    """The library manages replace_log, replace_count and conflicts_with; a delta may not set them."""
    bad = sorted(set(metadata or ()) & set(RESERVED_METADATA))
    if bad:
        raise ValidationError(f"payload.metadata.{bad[0]}", "reserved_metadata: is managed by the library "
                                                            "(replace_log, replace_count, conflicts_with)")


def half_life_from_type(spec: TypeSpec, half_life: float | None) -> None:
    """A record decays with its type's half-life (None: it does not decay)."""
    if half_life != spec.half_life_days:
        raise ValidationError("payload.half_life_days", f"half_life_from_type: type {spec.name!r} has "
                                                        f"half-life {spec.half_life_days!r}, not {half_life!r}")


def conflict_policy(applied: ConflictPolicy | None, policy: ConflictPolicy | None, what: str,
                    slot: tuple[str, str, str | None], existing: Memory | None) -> None:
    """What happens in an occupied slot is what its type's policy resolves to
    (``resolve``: REPLACE downgrades to IGNORE for an older, weaker or less authoritative memory)."""
    if applied == policy:
        return
    ws, type, subject = slot
    where = f"slot ({ws}, {type}, {subject})"
    if existing is None or policy is None:  # policy is None exactly when the slot is empty
        raise refuse("conflict_policy", f"{what} applies {applied.value if applied else 'no policy'}, but "
                                        f"{where} is empty: a new memory is simply stored")
    said = {P.REPLACE: f"replaces the active {existing.id!r} in place (memory_replaced)",
            P.REINFORCE: f"reinforces {existing.id!r} (memory_reinforced)",
            P.IGNORE: f"is ignored: it is older, weaker or less authoritative than {existing.id!r}",
            P.KEEP_BOTH: "is stored beside it (memory_added, policy keep_both)",
            P.SUPERSEDE: f"supersedes {existing.id!r} (memory_added, policy supersede)",
            P.FLAG: f"is stored flagged against {existing.id!r} (memory_added, policy flag)"}[policy]
    raise refuse("conflict_policy", f"{where} holds the active memory {existing.id!r}; under type "
                                    f"{type!r}'s policy an incoming one {said}, so {what} "
                                    f"({applied.value if applied else 'a plain add'}) cannot enter")


def reinforce_blend(old: float, p: MemoryReinforced) -> None:
    """REINFORCE's blend: confidence = min(1, old + (1 − old) · bump), and the weight is the
    summed authority of the new sources (1.0 when it sums to 0)."""
    want = min(1.0, old + (1.0 - old) * p.bump)
    if not math.isclose(p.confidence, want, rel_tol=1e-9, abs_tol=1e-12):
        raise ValidationError("payload.confidence", f"reinforce_blend: must be min(1, {old} + (1 - {old}) x "
                                                    f"bump {p.bump}) = {want}, not {p.confidence}")
    if p.sources:
        w = sum(s.authority for s in p.sources) or 1.0
        if not math.isclose(p.weight, w, rel_tol=1e-9, abs_tol=1e-12):
            raise ValidationError("payload.weight", f"reinforce_blend: must be the summed authority of "
                                                    f"the new sources, {w}, not {p.weight}")


def memory_known(state: State, mid: str, verb: str) -> Memory:
    """A change names a stored memory that is not superseded."""
    rec = state.memories.get(mid)
    if rec is None:
        raise refuse("memory_known", f"cannot {verb} unknown memory {mid!r}"
                     + (f"; it was absorbed into {state.absorbed[mid]!r}" if mid in state.absorbed else ""))
    if rec.superseded_by is not None:
        raise refuse("memory_known", f"cannot {verb} memory {mid!r}: it is superseded by "
                                     f"{rec.superseded_by!r}; change that one")
    return rec


# ------------------------------------------------------------------------------- checks by kind

def _incoming(p: MemoryAdded | MemoryReplaced, rec: Memory | None) -> Memory:
    if isinstance(p, MemoryAdded):
        return Memory(type=p.type, content=p.content, confidence=p.confidence, subject=p.subject,
                      tags=list(p.tags), workspace=p.workspace, sources=list(p.sources),
                      status=p.status, metadata=dict(p.metadata), timestamp=p.timestamp)
    assert rec is not None
    return Memory(type=rec.type, content=p.content, confidence=p.confidence, subject=rec.subject,
                  tags=list(p.tags), workspace=rec.workspace, sources=list(p.sources),
                  metadata=dict(p.metadata), timestamp=p.timestamp)


def _added(state: State, d: GenericDelta, p: MemoryAdded, profiles: Mapping[str, DomainProfile],
           default: str) -> None:
    memory_id_unique(state, p.id, d, "memory")
    profile = profile_known(state, p.workspace, profiles, default)
    spec = type_in_profile(profile, p.workspace, p.type)
    m = _incoming(p, None)
    type_spec_fields(spec, m)
    reserved_metadata(p.metadata)
    half_life_from_type(spec, p.half_life_days)
    existing = _current(state, p.workspace, p.type, p.subject)
    policy = None if existing is None else resolve(existing, m, spec.conflict_policy)
    conflict_policy(p.policy, policy, "this memory_added", (p.workspace, p.type, p.subject), existing)
    if p.supersedes is not None or policy is P.SUPERSEDE:
        if existing is None or p.supersedes != existing.id:
            raise refuse("conflict_policy", f"a superseding memory names the slot's active memory "
                                            f"{existing.id if existing else None!r}, not {p.supersedes!r}")
    if p.conflicts_with is not None or policy is P.FLAG:
        if existing is None or p.conflicts_with != existing.id:
            raise refuse("conflict_policy", f"a flagged memory names the slot's active memory "
                                            f"{existing.id if existing else None!r}, not {p.conflicts_with!r}")


def _absorbing(state: State, d: GenericDelta, p: MemoryReplaced | MemoryReinforced,
               profiles: Mapping[str, DomainProfile], default: str) -> None:
    replaced = isinstance(p, MemoryReplaced)
    rec = memory_known(state, p.id, "replace" if replaced else "reinforce")
    memory_id_unique(state, p.incoming_id, d, "incoming memory")
    profile = profile_known(state, rec.workspace, profiles, default)
    spec = type_in_profile(profile, rec.workspace, rec.type)
    current = _current(state, rec.workspace, rec.type, rec.subject)
    slot = (rec.workspace, rec.type, rec.subject)
    if current is None or current.id != rec.id:
        raise refuse("conflict_policy", f"{rec.id!r} is not the active memory of slot "
                                        f"({slot[0]}, {slot[1]}, {slot[2]})")
    if isinstance(p, MemoryReplaced):
        reserved_metadata(p.metadata)
        incoming = _incoming(p, rec)
        type_spec_fields(spec, incoming)
        policy = resolve(rec, incoming, spec.conflict_policy)
        conflict_policy(P.REPLACE, policy, "this memory_replaced", slot, rec)
    else:
        conflict_policy(P.REINFORCE, spec.conflict_policy, "this memory_reinforced", slot, rec)
        reinforce_blend(rec.confidence, p)


def _updated(state: State, d: GenericDelta, p: MemoryUpdated, profiles: Mapping[str, DomainProfile],
             default: str) -> None:
    rec = memory_known(state, p.id, "update")
    reserved_metadata(p.metadata)
    if p.tags is not None:
        profile = profile_known(state, rec.workspace, profiles, default)
        spec = type_in_profile(profile, rec.workspace, rec.type)
        type_spec_fields(spec, Memory(type=rec.type, content=rec.content, subject=rec.subject,
                                      tags=list(p.tags), sources=rec.sources, status=rec.status,
                                      metadata=rec.metadata))


def _bound(state: State, d: GenericDelta, p: WorkspaceProfileBound, profiles: Mapping[str, DomainProfile],
           default: str) -> None:
    if p.profile not in profiles:
        raise ValidationError("payload.profile", f"profile_known: unknown profile {p.profile!r}; use one "
                                                 f"of {', '.join(profiles)}")


_BY_KIND: dict[str, Callable[..., None]] = {
    "memory_added": _added, "memory_replaced": _absorbing, "memory_reinforced": _absorbing,
    "memory_updated": _updated, "workspace_profile_bound": _bound}


def checker(profiles: Mapping[str, DomainProfile], default: str) -> Check:
    """The boundary check of a memories projection knowing ``profiles`` (``default`` for an
    unbound workspace)."""
    import braidlog

    def check(state: State, d: GenericDelta, at: Boundary | None = None) -> None:
        rule = _BY_KIND.get(d.kind)
        if rule is None:
            return
        p = braidlog.typed(d)  # the engine has checked the schema before any rule
        rule(state, d, p, profiles, default)

    return check
