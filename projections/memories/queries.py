"""Reads of the memories state: records, slots, workspaces, decayed confidence, recall."""

from __future__ import annotations

from datetime import datetime

from .decide import _aware
from .model import DEFAULT_PROFILE, DEFAULT_WORKSPACE, Memory
from .state import State, slot_key

__all__ = ["get_memory", "list_memories", "slot_memories", "workspaces", "workspace_profile",
           "effective_confidence", "recall"]

def get_memory(state: State, memory_id: str) -> Memory | None:
    """A record by id (an absorbed incoming id leads to the record that absorbed it)."""
    rec = state.memories.get(memory_id)
    if rec is None and memory_id in state.absorbed:
        rec = state.memories.get(state.absorbed[memory_id])
    return rec


def list_memories(state: State, workspace: str | None = DEFAULT_WORKSPACE, *, type: str | None = None,
                  subject: str | None = None, status: str | None = None, tag: str | None = None,
                  include_superseded: bool = False) -> list[Memory]:
    """Records in one workspace (None: every workspace), in the order they were stored;
    superseded ones only when asked."""
    return [m for m in state.memories.values()
            if (workspace is None or m.workspace == workspace)
            and (type is None or m.type == type)
            and (subject is None or m.subject == subject)
            and (status is None or m.status == status)
            and (tag is None or tag in m.tags)
            and (include_superseded or m.superseded_by is None)]


def slot_memories(state: State, workspace: str, type: str, subject: str, *,
                  include_superseded: bool = False) -> list[Memory]:
    """The records in one slot, oldest first."""
    key = slot_key(workspace, type, subject)
    recs = [state.memories[i] for i in state.slots.get(key, [])]
    return [m for m in recs if include_superseded or m.superseded_by is None]


def workspaces(state: State) -> list[str]:
    """Every workspace that holds a memory or has a profile bound, sorted."""
    return sorted({m.workspace for m in state.memories.values()} | set(state.profiles))


def workspace_profile(state: State, workspace: str, default: str = DEFAULT_PROFILE) -> str:
    """The name of the profile a workspace is bound to (the default when unbound)."""
    return state.profiles.get(workspace, default)


def effective_confidence(memory: Memory, as_of: datetime) -> float:
    """``confidence · 0.5^(age_days / half_life_days)`` as of ``as_of``; no decay without a
    half-life or at a non-positive age."""
    _aware(as_of, "as_of")
    if memory.half_life_days is None or memory.timestamp is None:
        return memory.confidence
    age_days = (as_of - memory.timestamp).total_seconds() / 86400.0
    if age_days <= 0:
        return memory.confidence
    return memory.confidence * 0.5 ** (age_days / memory.half_life_days)


def recall(state: State, as_of: datetime, workspace: str | None = DEFAULT_WORKSPACE, *,
           type: str | None = None, subject: str | None = None, min_confidence: float = 0.0,
           include_superseded: bool = False) -> list[tuple[Memory, float]]:
    """``(memory, effective confidence as of as_of)``, strongest first, at or above ``min_confidence``."""
    _aware(as_of, "as_of")
    scored = [(m, effective_confidence(m, as_of))
              for m in list_memories(state, workspace, type=type, subject=subject,
                                     include_superseded=include_superseded)]
    return sorted((x for x in scored if x[1] >= min_confidence), key=lambda x: -x[1])
