"""The kinds of delta braidlog's eventsourcing persistence module stores, declared in Python.

This module imports braidlog alone, not eventsourcing, and braidlog's metadata names it as a
``braidlog.kinds`` entry point: every braidlog process (the command line, ``import``, a replica)
knows these kinds whether or not eventsourcing is installed there.

They are not declared in the log itself: an application's notification ids are the store's seqs,
and eventsourcing (and its shipped tests) expect an application's first event to be
notification 1 in a new store.

docs/eventsourcing.md says how a stored event maps to a delta.
"""

from __future__ import annotations

from msgspec import Struct

from ..kinds import REGISTRY

__all__ = ["OWNER", "EVENT", "SNAPSHOT", "TRACKING", "VIEW", "EventRecorded", "TrackingRecorded"]

OWNER = "eventsourcing"
EVENT = "eventsourcing.event"  # an aggregate's event: one braid per originator
SNAPSHOT = "eventsourcing.snapshot"  # a snapshot of an aggregate: its own braid per originator
TRACKING = "eventsourcing.tracking"  # how far a downstream application has processed an upstream one
VIEW = "eventsourcing.view"  # a materialised view's own change, written with its tracking record


class EventRecorded(Struct, frozen=True, forbid_unknown_fields=True):
    """A stored event (or snapshot): eventsourcing's StoredEvent. Its state (bytes) is stored as
    the text it is when it is UTF-8 (the JSON of a mapper without cipher or compressor, so the
    command line shows it), else in base64 with ``base64`` true."""

    originator_id: str
    originator_version: int
    topic: str
    state: str
    base64: bool = False


class TrackingRecorded(Struct, frozen=True, forbid_unknown_fields=True):
    """eventsourcing's Tracking: notification ``notification_id`` of ``application_name`` is done."""

    application_name: str
    notification_id: int


REGISTRY.declare(EVENT, EventRecorded, owner=OWNER)
REGISTRY.declare(SNAPSHOT, EventRecorded, owner=OWNER)
REGISTRY.declare(TRACKING, TrackingRecorded, owner=OWNER)
REGISTRY.declare(VIEW, None, owner=OWNER)  # any JSON object: the view says what its changes hold
