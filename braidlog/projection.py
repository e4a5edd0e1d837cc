"""Projections (pure folds over the log) and deciders (projections that also decide commands).

A ``Projection`` is ``initial`` plus ``evolve(state, delta) -> state``: deterministic, no wall
clock, no randomness, no I/O. "Now" inside a fold is the delta's ``ts``. ``evolve`` never raises
on a delta that is in the log: deltas are facts. The engine owns every state it folds (a live
state, a checkpoint it decoded, a view's state), so ``evolve`` may update the state in place
and return it; it must not keep references to states it was given elsewhere.

A ``Decider`` adds ``decide(command, state, ctx) -> list[GenericDelta]``: pure, with time and
new ids taken from ``ctx``; it returns ``[]`` when the command is already done, and raises
``Rejected`` (or ``ValidationError``) when it refuses.

State must be encodable by msgspec (Structs, dicts, lists, scalars) so it can be checkpointed;
``state_type`` is the type checkpoints decode to (default: the type of ``initial``). Bump
``version`` whenever State or evolve changes: checkpoints of older versions are then ignored.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from .delta import GenericDelta, Provenance, Refs, Vector, new_id

__all__ = ["Projection", "Decider", "Context"]

S = TypeVar("S")


@dataclass(frozen=True)
class Projection(Generic[S]):
    """A named, versioned fold: ``initial`` and ``evolve``; ``kinds`` limits the deltas it reads."""

    name: str
    version: int
    initial: S
    evolve: Callable[[S, GenericDelta], S]
    kinds: frozenset[str] | None = None
    state_type: Any = None

    def __post_init__(self) -> None:
        if self.kinds is not None and not isinstance(self.kinds, frozenset):
            object.__setattr__(self, "kinds", frozenset(self.kinds))
        if self.state_type is None:
            object.__setattr__(self, "state_type", type(self.initial))

    def start(self) -> S:
        """A fresh initial state the caller owns (a deep copy of ``initial``)."""
        return copy.deepcopy(self.initial)

    def reads(self, d: GenericDelta) -> bool:
        return self.kinds is None or d.kind in self.kinds

    def fold(self, deltas: Iterable[GenericDelta], state: S | None = None) -> S:
        """Fold deltas into ``state`` (a fresh initial state when None)."""
        s = self.start() if state is None else state
        evolve, kinds = self.evolve, self.kinds
        for d in deltas:
            if kinds is None or d.kind in kinds:
                s = evolve(s, d)
        return s


@dataclass(frozen=True)
class Decider(Projection[S]):
    """A projection that also decides commands against its state."""

    decide: Callable[[Any, S, Context], list[GenericDelta]] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.decide is None:
            raise TypeError(f"Decider {self.name!r} needs decide")


@dataclass
class Context:
    """What ``decide`` may know of the world: the time, fresh ids, and who is acting.

    The facade fills it in; tests build one with a fixed ``now`` and ``ids``. ``log`` is a
    read-only store at ``head``, the point the decision is made against, for rules that need
    facts of the log that no state keeps (for example, which braid a delta id belongs to).
    """

    now: datetime
    braid_id: str
    provenance: Provenance = field(default_factory=lambda: Provenance("system"))
    confidence: float = 1.0
    ids: Iterator[str] | None = None
    head: int = 0
    log: Any = None

    def new_id(self) -> str:
        """The next id: from ``ids`` when given (deterministic tests), else a new ULID."""
        return next(self.ids) if self.ids is not None else new_id()

    def delta(self, kind: str, payload: dict[str, Any], *, braid_id: str | None = None,
              refs: Refs | None = None, tags: Iterable[str] = (), confidence: float | None = None,
              provenance: Provenance | None = None, vector: Vector | None = None) -> GenericDelta:
        """A delta stamped with this context's time, braid, provenance and a new id."""
        return GenericDelta(
            id=self.new_id(), braid_id=braid_id or self.braid_id, kind=kind, ts=self.now,
            provenance=provenance or self.provenance,
            confidence=self.confidence if confidence is None else confidence,
            payload=payload, refs=refs, tags=tuple(tags), vector=vector,
        )


