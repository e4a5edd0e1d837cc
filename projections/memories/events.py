"""The memories projection's payloads: one past-tense event per kind, declared in the registry."""

from __future__ import annotations

from typing import Any

from msgspec import Struct

import braidlog

from .model import Authority, Confidence, ConflictPolicy, HalfLife, Ident, Source, Text, UtcTime  # noqa: F401  (re-exported with the events)

__all__ = ["MemoryAdded", "MemoryReplaced", "MemoryReinforced", "MemoryUpdated",
           "WorkspaceProfileBound", "KINDS"]

# NOTE: payload class names may be stored; never rename one, add a new one.

class MemoryAdded(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A new record (version 1). ``policy`` is the one applied when its slot was occupied:
    with SUPERSEDE ``supersedes`` names the record it supersedes, with FLAG ``conflicts_with``
    the record both now name in ``metadata.conflicts_with``."""

    id: Ident
    type: Ident
    content: Text
    confidence: Confidence
    workspace: Ident
    timestamp: UtcTime
    subject: Text | None = None
    tags: list[Text] = []
    sources: list[Source] = []
    status: Text | None = None
    metadata: dict[str, Any] = {}
    half_life_days: HalfLife | None = None
    policy: ConflictPolicy | None = None
    supersedes: Ident | None = None
    conflicts_with: Ident | None = None


class MemoryReplaced(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """REPLACE: record ``id`` took the incoming content, confidence and timestamp; tags unioned,
    sources replaced when the incoming has some, metadata merged, replace log and count kept."""

    id: Ident
    incoming_id: Ident
    content: Text
    confidence: Confidence
    timestamp: UtcTime
    tags: list[Text] = []
    sources: list[Source] = []
    metadata: dict[str, Any] = {}


class MemoryReinforced(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """REINFORCE: record ``id`` gained ``sources`` (the new ones by key) and the blended
    ``confidence`` (from ``weight`` and ``bump``); ``content`` is set when it was replaced."""

    id: Ident
    incoming_id: Ident
    confidence: Confidence
    weight: float
    bump: float
    sources: list[Source] = []
    tags: list[Text] = []
    content: Text | None = None


class MemoryUpdated(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """An explicit change of a record; fields left out are unchanged, metadata is merged."""

    id: Ident
    content: Text | None = None
    confidence: Confidence | None = None
    status: Text | None = None
    tags: list[Text] | None = None
    metadata: dict[str, Any] | None = None


class WorkspaceProfileBound(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A workspace now takes its types and policies from ``profile``."""

    workspace: Ident
    profile: Ident


def _refers_added(p: MemoryAdded) -> list[str]:
    return [i for i in (p.id, p.supersedes, p.conflicts_with) if i]


def _refers_absorbed(p: Any) -> list[str]:
    return [p.id, p.incoming_id]


def _refers_id(p: Any) -> list[str]:
    return [p.id]


braidlog.declare("memory_added", MemoryAdded, owner="memories", refers=_refers_added)
braidlog.declare("memory_replaced", MemoryReplaced, owner="memories", refers=_refers_absorbed)
braidlog.declare("memory_reinforced", MemoryReinforced, owner="memories", refers=_refers_absorbed)
braidlog.declare("memory_updated", MemoryUpdated, owner="memories", refers=_refers_id)
braidlog.declare("workspace_profile_bound", WorkspaceProfileBound, owner="memories", refers=lambda p: ())

KINDS = frozenset({"memory_added", "memory_replaced", "memory_reinforced", "memory_updated",
                   "workspace_profile_bound"})
