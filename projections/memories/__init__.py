"""Memories: typed memories with provenance, workspaces and conflict policies, after typedmem (seed 002).

A ``Memory`` has a type, content and confidence, an optional subject, tags, a workspace and
``Source`` provenance. Its slot is ``(workspace, type, subject)``; memories without a subject
never collide. When an added memory lands in an occupied slot, its type's ``ConflictPolicy``
(from the workspace's ``DomainProfile``) decides: REPLACE, KEEP_BOTH, SUPERSEDE, REINFORCE, FLAG
or IGNORE. The decision is made in ``decide`` and its outcome recorded in the delta, so
``evolve`` needs no profile: it applies what the log says. Every record has a version (1 when
stored, +1 per change); writes may carry ``expected_version``. Confidence decays per type as
``confidence * 0.5 ** (age_days / half_life_days)`` as of a time the caller gives.

Ids: a memory's id is a ULID from the context (or the caller's own, which then doubles as the
idempotency key of the add); ``refers`` indexes every delta under the ids of the records it
touches, and under the absorbed incoming id for REPLACE and REINFORCE.

Where to find what (each module one responsibility, imported in this order):

| module | holds |
|---|---|
| ``model`` | the seed's policies, Source, Memory, TypeSpec, DomainProfile, the built-in profiles |
| ``events`` | the payloads, one past-tense event per kind, declared in the registry |
| ``state`` | the state and ``evolve`` (the fold; checks nothing) |
| ``decide`` | the commands and the deltas they append |
| ``rules`` | every rule a delta must obey to enter the log, one function each; the boundary check |
| ``queries`` | reads: records, slots, workspaces, decayed confidence, recall |

docs/memory.md states every rule with its source in the seed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from braidlog import Context, Decider, GenericDelta, ValidationError

from .decide import AddMemory, BindProfile, UpdateMemory, decide, reinforce_confidence, resolve
from .events import KINDS, MemoryAdded, MemoryReinforced, MemoryReplaced, MemoryUpdated, WorkspaceProfileBound
from .model import (
    BUILTIN_PROFILES,
    DEFAULT_PROFILE,
    DEFAULT_WORKSPACE,
    REPLACE_LOG_LIMIT,
    RESERVED_METADATA,
    ConflictPolicy,
    DomainProfile,
    Memory,
    Source,
    TypeSpec,
)
from .queries import (
    effective_confidence,
    get_memory,
    list_memories,
    recall,
    slot_memories,
    workspace_profile,
    workspaces,
)
from .rules import checker
from .state import State, evolve, slot_key

__all__ = [
    "ConflictPolicy", "Source", "Memory", "TypeSpec", "DomainProfile", "BUILTIN_PROFILES",
    "DEFAULT_PROFILE", "DEFAULT_WORKSPACE", "REPLACE_LOG_LIMIT", "RESERVED_METADATA",
    "MemoryAdded", "MemoryReplaced", "MemoryReinforced", "MemoryUpdated", "WorkspaceProfileBound",
    "KINDS", "State", "evolve",
    "AddMemory", "UpdateMemory", "BindProfile", "decide", "resolve", "reinforce_confidence", "checker",
    "slot_key", "get_memory", "list_memories", "slot_memories", "workspaces", "workspace_profile",
    "effective_confidence", "recall", "memories_decider", "PROJECTIONS",
]


def memories_decider(*, profiles: Iterable[DomainProfile] = (), default_profile: str = DEFAULT_PROFILE,
                     name: str = "memories") -> Decider:
    """The memories Decider: built-in profiles plus ``profiles`` (which win on a name clash);
    an unbound workspace uses ``default_profile``."""
    registry = dict(BUILTIN_PROFILES)
    for p in profiles:
        if not isinstance(p, DomainProfile):
            raise ValidationError("profiles", f"must be DomainProfiles (got {type(p).__name__})")
        registry[p.name] = p
    if default_profile not in registry:
        raise ValidationError("default_profile",
                              f"unknown profile {default_profile!r}; use one of {', '.join(registry)}")

    def decide_with_profiles(command: Any, state: State, ctx: Context) -> list[GenericDelta]:
        return decide(command, state, ctx, profiles=registry, default_profile=default_profile)

    # version 2: the rules hold at the boundary (the state and fold are as in version 1)
    return Decider(name=name, version=2, initial=State(), evolve=evolve, kinds=KINDS,
                   state_type=State, decide=decide_with_profiles,
                   check=checker(registry, default_profile))


PROJECTIONS = [memories_decider()]
