"""The domain: one module per projection family, each a pure fold over braidlog's log.

Importing a module declares its payload kinds in braidlog's registry.
"""

from __future__ import annotations

import importlib

__all__ = ["FAMILIES", "default_projections"]

#: The projection families shipped with braidlog, in the order their modules are loaded.
FAMILIES: tuple[str, ...] = ("beads", "knots", "trust", "episodes", "decisions", "fields", "memories")


def default_projections() -> list:
    """Every projection of every shipped family (importing each module declares its kinds)."""
    out = []
    for family in FAMILIES:
        module = importlib.import_module(f"braidlog.projections.{family}")
        out.extend(module.PROJECTIONS)
    return out
