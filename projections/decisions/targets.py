"""The target registry (LedgerMind's ``TargetRegistry.normalize``): one name per target.

A target is registered by the first decision recorded on it, or by the alias that names it
(``target_alias_registered``). A name given for a target is matched, in this order, exactly
against the registered targets, exactly against the aliases, then case-insensitively against
the targets and then the aliases; a name that matches nothing is a new target. Conflict
detection compares the matched names, so "DataBase" recorded after "database" conflicts with
it. The registry is one for the whole store (LedgerMind keeps one per storage path); the
one-active rule stays per (target, namespace).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

__all__ = ["Registered", "resolve_target", "canonical_target"]


class Registered(Protocol):
    """What resolving a name reads of the decisions' state: the registered targets and aliases."""

    @property
    def targets(self) -> Mapping[str, str]: ...  # lower-cased name -> registered target
    @property
    def aliases(self) -> Mapping[str, str]: ...  # alias -> registered target
    @property
    def folded_aliases(self) -> Mapping[str, str]: ...  # lower-cased alias -> registered target


def resolve_target(state: Registered, name: str) -> str | None:
    """The registered target ``name`` names (exact, alias, case-insensitive), None if none."""
    folded = name.lower()
    registered = state.targets.get(folded)
    if registered == name:
        return registered
    alias = state.aliases.get(name)
    if alias is not None:
        return alias
    if registered is not None:
        return registered
    return state.folded_aliases.get(folded)


def canonical_target(state: Registered, name: str) -> str:
    """The registered target ``name`` names, or ``name`` itself when it is a new target."""
    return resolve_target(state, name) or name
