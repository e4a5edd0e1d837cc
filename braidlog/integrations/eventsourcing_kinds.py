"""The kinds of delta braidlog's eventsourcing persistence module stores, declared in Python.

This module imports braidlog alone, not eventsourcing, and braidlog's metadata names it as a
``braidlog.kinds`` entry point: every braidlog process (the command line, ``import``, a replica)
knows these kinds whether or not eventsourcing is installed there.

They are not declared in the log itself: eventsourcing (and its shipped tests) expect an
application's first event to be notification 1 of a new store.

An aggregate's events are deltas of kind ``eventsourcing.events``: one save's consecutive events
of one aggregate in one delta, whose tag ``n:FIRST-LAST`` (``n:FIRST`` for one event) names their
notification ids (so an erased delta's ids stay known). Stores written before it have kind
``eventsourcing.event``: one event a delta, its notification id the delta's seq. Those records are
never rewritten, and the recorders read both kinds (as one sequence, in seq order).

docs/eventsourcing.md says how a stored event maps to a delta.
"""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta, Struct

from ..kinds import REGISTRY

__all__ = ["OWNER", "EVENT", "EVENTS", "SNAPSHOT", "TRACKING", "VIEW", "EventRecorded", "EventsRecorded",
           "TrackingRecorded", "IDS_TAG", "describe_events", "describe_event",
           "describe_tracking"]

OWNER = "eventsourcing"
EVENTS = "eventsourcing.events"  # one save's events of one aggregate: one braid per originator
EVENT = "eventsourcing.event"  # one event of an aggregate, as stores before EVENTS hold them
SNAPSHOT = "eventsourcing.snapshot"  # a snapshot of an aggregate: its own braid per originator
TRACKING = "eventsourcing.tracking"  # how far a downstream application has processed an upstream one
VIEW = "eventsourcing.view"  # a materialised view's own change, written with its tracking record
IDS_TAG = "n:"  # the tag of an EVENTS delta: n:FIRST-LAST, its events' notification ids


class EventRecorded(Struct, frozen=True, forbid_unknown_fields=True):
    """A stored snapshot (``eventsourcing.snapshot``), or a stored event as stores written
    before ``eventsourcing.events`` hold them (``eventsourcing.event``): eventsourcing's
    StoredEvent. Its state (bytes) is stored as the text it is when it is UTF-8 (the JSON of a
    mapper without cipher or compressor, so the command line shows it), else in base64 with
    ``base64`` true."""

    originator_id: str
    originator_version: int
    topic: str
    state: str
    base64: bool = False


#: One event of an ``eventsourcing.events`` delta: [originator_version, topic, state].
Event = tuple[int, str, str]


class EventsRecorded(Struct, frozen=True, forbid_unknown_fields=True):
    """``eventsourcing.events``: consecutive events of one aggregate, saved together, versions
    going up. ``base64``: every state is in base64 (a mapper with a cipher or a compressor), else
    each is its UTF-8 text."""

    originator_id: str
    events: Annotated[list[Event], Meta(min_length=1)]
    base64: bool = False


def _name(topic: str) -> str:
    """A topic without its module: ``__main__:Dog.Registered`` -> ``Dog.Registered``."""
    return topic.rpartition(":")[2] or topic


def describe_events(payload: dict[str, Any]) -> str:
    """``versions 1..3: v1 Dog.Registered, v2 Dog.TrickAdded, v3 Dog.TrickAdded`` (the braid
    names the aggregate)."""
    events = payload["events"]
    first, last = events[0][0], events[-1][0]
    which = f"version {first}" if len(events) == 1 else f"versions {first}..{last}"
    shown = ", ".join(f"v{v} {_name(t)}" for v, t, _ in events[:5])
    more = f", … {len(events) - 5} more" if len(events) > 5 else ""
    return f"{which}: {shown}{more}"


def describe_event(payload: dict[str, Any]) -> str:
    """``version 2: Dog.TrickAdded`` (a snapshot: ``snapshot at version 2: …``)."""
    return f"version {payload['originator_version']}: {_name(payload['topic'])}"


def describe_tracking(payload: dict[str, Any]) -> str:
    return f"done: notification {payload['notification_id']} of {payload['application_name']}"


class TrackingRecorded(Struct, frozen=True, forbid_unknown_fields=True):
    """eventsourcing's Tracking: notification ``notification_id`` of ``application_name`` is done."""

    application_name: str
    notification_id: int


# No ``refers``: an aggregate is found by its braid, ``<app>_events:<originator id>`` (audit's
# entity_braids), which costs a save nothing; an index entry a delta cost 3 of 19 pages a commit.
REGISTRY.declare(EVENTS, EventsRecorded, owner=OWNER, describe=describe_events)
REGISTRY.declare(EVENT, EventRecorded, owner=OWNER, describe=describe_event)
REGISTRY.declare(SNAPSHOT, EventRecorded, owner=OWNER,
                 describe=lambda p: "snapshot at " + describe_event(p))
REGISTRY.declare(TRACKING, TrackingRecorded, owner=OWNER, describe=describe_tracking)
REGISTRY.declare(VIEW, None, owner=OWNER)  # any JSON object: the view says what its changes hold
