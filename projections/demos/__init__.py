"""Scripted pieces of an agent session, one module per family, written by ``braidlog demo``."""

from __future__ import annotations

from typing import Any

__all__ = ["session_braid"]


def session_braid(braid: Any, fallback: str) -> str:
    """The braid of the session written so far (the last delta's), or ``fallback`` on an empty log."""
    head = braid.head().seq
    return braid.log.read(head).delta.braid_id if head else fallback
