"""Payload schemas of the seed's minimum kinds that no projection owns.

``tick``, ``message``, ``observation``, ``tool_call``, ``tool_result`` and ``microagent`` are
declared here. ``knot_lifecycle``, ``bead_ref``, ``bead_write``, ``bead_version``, ``hypothesis``
and ``trust`` are declared open (any JSON object) until the projection that owns them claims
them with its schema (braidlog.projections.beads, braidlog.projections.knots, braidlog.projections.trust).
"""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta, Struct

from .kinds import MINIMUM_KINDS, REGISTRY

__all__ = ["Tick", "Message", "Observation", "ToolCall", "ToolResult", "Microagent",
           "DREAM_CONFIDENCE", "default_confidence"]

#: Where dream-provenance content starts (seed: dream outputs are low-confidence by default).
DREAM_CONFIDENCE = 0.3


def default_confidence(kind: str, provenance: str, payload: Any = None) -> float:
    """The confidence a delta gets when its writer states none (the Braid reference
    implementation's defaults): a ``message`` from ``user`` or ``tool`` 0.7, any other message
    0.6; a ``tool_call`` 0.6; a ``tool_result`` 0.7 when ok and 0.4 when it failed
    (``payload["ok"] is False``); any other kind 1.0. Dream provenance starts at
    ``DREAM_CONFIDENCE`` at most. It is stored in the delta, so the log says what was assumed."""
    if kind == "message":
        value = 0.7 if provenance in ("user", "tool") else 0.6
    elif kind == "tool_call":
        value = 0.6
    elif kind == "tool_result":
        ok = payload.get("ok", True) if isinstance(payload, dict) else True
        value = 0.4 if ok is False else 0.7
    else:
        value = 1.0
    return min(value, DREAM_CONFIDENCE) if provenance == "dream" else value


Text = Annotated[str, Meta(min_length=1)]


class Tick(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A clock tick: lets time-based rules (TTL, decay) advance without other input."""

    note: str | None = None


class Message(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A message in the conversation; who said it is the delta's provenance."""

    text: Text
    channel: str | None = None
    knot_pass: str | None = None


class Observation(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Something perceived: text, structured data, or both."""

    text: str | None = None
    data: dict[str, Any] = {}


class ToolCall(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A call of a tool, planned or made; ``knot_pass`` is "think" or "speak" when inside a knot."""

    tool: Text
    args: dict[str, Any] = {}
    call_id: str | None = None
    knot_pass: str | None = None


class ToolResult(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """What a tool returned."""

    tool: Text
    output: Any = None
    ok: bool = True
    call_id: str | None = None


class Microagent(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """An ephemeral agent spawned from a template, and what it was asked."""

    name: Text
    spec: dict[str, Any] = {}


_OWNED = {
    "tick": Tick, "message": Message, "observation": Observation,
    "tool_call": ToolCall, "tool_result": ToolResult, "microagent": Microagent,
}

for _kind in MINIMUM_KINDS:
    if _kind not in REGISTRY:
        REGISTRY.declare(_kind, _OWNED.get(_kind), owner="braid")
