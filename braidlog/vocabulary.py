"""Payload schemas of the seed's minimum kinds that no projection owns.

``tick``, ``message``, ``observation``, ``tool_call``, ``tool_result`` and ``microagent`` are
declared here. ``knot_lifecycle``, ``bead_ref``, ``bead_write``, ``bead_version``, ``hypothesis``
and ``trust`` are declared open (any JSON object) until the projection that owns them claims
them with its schema (braidlog.projections.beads, braidlog.projections.knots, braidlog.projections.trust).
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from .delta import Text
from .kinds import DREAM_CONFIDENCE, MINIMUM_KINDS, REGISTRY, default_confidence

__all__ = ["Tick", "Message", "Observation", "ToolCall", "ToolResult", "Microagent",
           "DREAM_CONFIDENCE", "default_confidence"]  # the last two defined in kinds.py

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
