"""Demo piece for memories: typed memories in three workspaces, one under each conflict policy."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import braidlog
from braidlog.projections.demos import session_braid
from braidlog.projections.memories import AddMemory, BindProfile, Memory, Source, effective_confidence, list_memories

__all__ = ["write"]



def write(braid: braidlog.Braid, start: datetime, braid_id: str | None = None) -> list[str]:
    """Append the memories piece of the session through ``braid.execute``; lines that describe it."""
    braid_id = braid_id or session_braid(braid, "demo")
    minute = iter(range(60))

    def run(command: Any, who: str = "assistant") -> list[braidlog.Record]:
        return braid.execute("memories", command, braid_id=braid_id, provenance=who,
                             now=start + timedelta(minutes=next(minute)))

    def add(**kw: Any) -> list[braidlog.Record]:
        return run(AddMemory(memory=Memory(**kw)))

    def outcome(records: list[braidlog.Record]) -> str:
        if not records:
            return "ignore (nothing appended)"
        d = records[0].delta
        return {"memory_replaced": "replace", "memory_reinforced": "reinforce"}.get(
            d.kind, d.payload.get("policy", "stored"))

    run(BindProfile(workspace="design", profile="engineering_design"), "system")
    run(BindProfile(workspace="papers", profile="research_paper"), "system")
    lines = []
    add(type="preference", content="drinks tea", subject="user", confidence=0.7,
        sources=[Source(document_id="chat", chunk_id="turn-2", authority=0.9)])
    r = add(type="preference", content="drinks coffee now", subject="user", confidence=0.8,
            sources=[Source(document_id="chat", chunk_id="turn-9", authority=0.9)])
    (pref,) = list_memories(braid.state("memories"), type="preference")
    lines.append(f"memories: preference 'drinks coffee now' -> {outcome(r)} "
                 f"(same id, version {pref.version}, {pref.metadata.get('replace_count', 0)} replace(s) logged)")
    r = add(type="preference", content="drinks water", subject="user", confidence=0.3)
    lines.append(f"memories: weaker preference 'drinks water' -> {outcome(r)}")
    add(type="fact", content="lives in Lyon", subject="user")
    r = add(type="fact", content="lives in Grenoble", subject="user", confidence=0.6)
    lines.append(f"memories: second fact about the user -> {outcome(r)}")
    add(type="decision", content="store memories in Postgres", subject="storage", workspace="design")
    r = add(type="decision", content="store memories in an LMDB log", subject="storage", workspace="design")
    lines.append(f"memories: new storage decision -> {outcome(r)} (old one hidden from listings)")
    add(type="risk", content="the map fills within a month", subject="disk", workspace="design")
    r = add(type="risk", content="the map is fine for a year", subject="disk", workspace="design", confidence=0.5)
    lines.append(f"memories: contradictory risk reading -> {outcome(r)} (each names the other)")
    add(type="evidence", content="append-only logs ease audits", subject="audit", workspace="papers",
        confidence=0.6, sources=[Source(document_id="paper_a.pdf", chunk_id="results", authority=0.9)])
    r = add(type="evidence", content="append-only logs ease audits", subject="audit", workspace="papers",
            confidence=0.5, sources=[Source(document_id="paper_b.pdf", chunk_id="table-2", authority=0.8)])
    state = braid.state("memories")
    (ev,) = list_memories(state, "papers")
    lines.append(f"memories: corroborating evidence -> {outcome(r)}: confidence 0.6 -> {ev.confidence:.2f}, "
                 f"{len(ev.sources)} sources")
    (pref,) = list_memories(state, type="preference")
    later = start + timedelta(days=60)
    lines.append(f"memories: preference confidence {pref.confidence:g} decays to "
                 f"{effective_confidence(pref, later):.2f} after 60 days (half-life 60); "
                 f"{len(list_memories(state, None))} live records, "
                 f"{len(list_memories(state, None, include_superseded=True))} with superseded")
    return lines
