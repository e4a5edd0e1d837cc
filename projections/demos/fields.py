"""Demo piece for fields: a project topic whose owner changes hands, read, bumped and forgotten."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import braidlog
from braidlog.projections.demos import session_braid
from braidlog.projections.fields import (
    ArchiveTopics,
    BumpSalience,
    FieldView,
    RestoreTopic,
    ReviseField,
    State,
    get_field,
    get_topic,
    list_topics,
    topic_salience,
)

__all__ = ["write"]


def _field(state: State, topic: str, name: str, history: bool = False) -> FieldView:
    """A field this demo wrote."""
    view = get_field(state, topic, name, history=history)
    assert view is not None, f"{topic}.{name} was written"
    return view


def write(braid: braidlog.Braid, start: datetime, braid_id: str | None = None) -> list[str]:
    """Append the fields piece of the session through ``braid.execute``; lines that describe it."""
    braid_id = braid_id or session_braid(braid, "demo")

    def run(command: Any, minute: int, who: str) -> list[braidlog.Record]:
        return braid.execute("fields", command, braid_id=braid_id, provenance=who,
                             now=start + timedelta(minutes=minute))

    topic = "project-atlas"
    run(ReviseField(topic_id=topic, field="owner", value="unassigned", provenance="api"), 0, "tool")
    (priya,) = run(ReviseField(topic_id=topic, field="owner", value="Priya", provenance="llm",
                               why_changed="Priya volunteered in stand-up"), 1, "assistant")
    run(ReviseField(topic_id=topic, field="owner", value="Aya", provenance="ui",
                    why_changed="handoff from Priya", impact_expected="Aya chairs the weekly review"),
        2, "user")
    run(ReviseField(topic_id=topic, field="budget_eur", value=12000, field_type="float", salience=4,
                    provenance="api"), 3, "tool")
    run(ReviseField(topic_id=topic, field="due", value="2026-06-30", field_type="date",
                    provenance="mcp"), 4, "tool")
    run(ReviseField(topic_id=topic, field="ticket", value="ATL-1042", field_type="ticket_key",
                    provenance="mcp"), 4, "tool")  # not a MemState type: stored as string
    scratch = get_topic(braid.state("fields"), "scratch-notes", include_archived=True)
    if scratch is not None and scratch.archived:  # a second demo run into the same store
        run(RestoreTopic(topic_id="scratch-notes", reason="demo rerun"), 5, "system")
    run(ReviseField(topic_id="scratch-notes", field="idea", value="try the other cafe", salience=0.2,
                    provenance="llm"), 5, "assistant")

    state = braid.state("fields")
    owner = _field(state, topic, "owner", history=True)
    assert owner.history is not None  # asked for
    trail = " <- ".join(f"{r.value!r} ({r.provenance})" for r in owner.history)
    before = owner.salience
    run(BumpSalience(topic_id=topic, field="owner", by=0.5), 6, "system")  # the read, recorded
    after = _field(braid.state("fields"), topic, "owner").salience
    archived = run(ArchiveTopics(below=0.5, reason="forget low-salience topics"), 7, "system")
    state = braid.state("fields")
    then = _field(braid.at(priya.seq).state("fields"), topic, "owner").value
    return [
        f"fields: {topic}.owner is {owner.value!r}; history newest first: {trail}",
        f"fields: why it changed: {owner.why_changed!r}; expected impact: {owner.impact_expected!r}",
        f"fields: time travel to seq {priya.seq} reads owner = {then!r}",
        f"fields: ticket is a {_field(state, topic, 'ticket').field_type!r} field; the type asked "
        f"for, {_field(state, topic, 'ticket').requested_type!r}, is not MemState's",
        f"fields: reading owner bumped its salience {before:g} -> {after:g} by an explicit delta; "
        f"topic salience {topic_salience(state, topic):.2f} (mean of its fields)",
        f"fields: forgetting archived {len(archived)} topic(s) below salience 0.5 "
        f"({', '.join(r.delta.payload['topic_id'] for r in archived)}); live topics: "
        f"{', '.join(t.topic_id for t in list_topics(state))}",
    ]
