"""Projections (pure folds over the log) and deciders (projections that also decide commands).

A ``Projection`` is ``initial`` plus ``evolve(state, delta) -> state``: deterministic, no wall
clock, no randomness, no I/O. "Now" inside a fold is the delta's ``ts``. ``evolve`` never raises
on a delta that is in the log: deltas are facts. The engine owns every state it folds (a live
state, a checkpoint it decoded, a view's state), so ``evolve`` may update the state in place
and return it; it must not keep references to states it was given elsewhere.

What a projection reads is declared, so the fold calls ``evolve`` only for those deltas:
``kinds`` (None: every delta), plus any delta whose ``refs`` has one of the fields named in
``refs`` non-empty (``"beads"``, ``"knots"``, ``"episodes"``, ``"deltas"``), plus any delta
whose provenance kind is in ``provenances``. A delta outside all three is never shown to
``evolve``, so ``evolve`` must treat it as a no-op: a projection whose state counts or dates
every delta has to say ``kinds=None``. ``positional=True`` declares
``evolve(state, delta, seq)``: the fold passes each delta's log position, so a state that needs
positions does not have to read every delta to count them.

A ``Decider`` adds ``decide(command, state, ctx) -> list[GenericDelta]``: pure, with time and
new ids taken from ``ctx``; it returns ``[]`` when the command is already done, and raises
``Rejected`` (or ``ValidationError``) when it refuses.

The boundary: a projection's rules live once, in ``check(state, delta, at) -> None``, and hold
for every delta that enters a store opened with the projection, whatever the path
(``Braid.append``, ``append_batch``, ``execute``, the CLI's ``append`` and ``import``):

- ``Braid`` runs the checks inside the store's write transaction, after the shape and kind
  schema are checked and seqs assigned, for each new delta the projection reads
  (``Projection.reads``), against the projection's state just before that delta: the live
  state at the head with the batch's earlier deltas folded in. ``at`` (a ``Boundary``) gives the
  seq the delta will take, its index in the batch, and ``at.log``, the log as of just before it
  (the head plus the batch's earlier deltas), for rules that need facts no state keeps.
- A check refuses by raising ``Rejected`` whose reason starts with the rule's name
  (``refuse(rule, detail)`` builds one) or ``ValidationError`` naming the field and the rule.
  The batch is then refused whole: nothing of it is written, the error names the delta's index
  in the batch, and the live states are as they were before it.
- A check is pure like ``evolve``: no clock ("now" is the delta's ``ts``), no I/O beyond
  ``at.log``, and it must not change ``state``. It does not run on an idempotent retry (the delta
  is already a fact), nor on paths that copy history the log already verified (replica apply,
  restore of a backup); ``evolve`` still checks nothing.
- ``decide`` builds a command's deltas and keeps only what it needs to build them (idempotency,
  defaults); the rule a raw append could break is the check's, and ``execute`` passes through
  the same boundary.

State must be encodable by msgspec (Structs, dicts, lists, scalars) so it can be checkpointed;
``state_type`` is the type checkpoints decode to (default: the type of ``initial``). Bump
``version`` whenever State, evolve or what the projection reads changes: checkpoints of older
versions are then ignored.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from msgspec import Struct

from .delta import GenericDelta, Provenance, Refs, Vector, new_id
from .errors import Rejected, ValidationError
from .kinds import default_confidence
from .store.ports import LogReader

__all__ = ["Projection", "Decider", "Context", "Boundary", "Check", "refuse", "REF_FIELDS"]

#: The fields of ``Refs`` a projection may read by (``Projection.refs``).
REF_FIELDS = ("beads", "knots", "episodes", "deltas")

S = TypeVar("S")


class Boundary(Struct, frozen=True):
    """Where a delta being checked stands: the ``seq`` it will take, its ``index`` in its batch,
    and ``log``, a read-only store as of just before it (the head the batch is written after,
    plus the batch's earlier deltas): a ``LogReader`` (``head``, ``read``, ``get``, ``seq_of``,
    the ``scan`` family, ``braid_head``).
    (A frozen Struct: the boundary makes one a delta, and a frozen dataclass took 1 µs.)"""

    seq: int
    index: int
    log: LogReader


Check = Callable[[Any, GenericDelta, Boundary], None]
"""A projection's rules over its state: ``check(state, delta, at)`` returns None when ``delta``
may enter, raises ``Rejected`` (see ``refuse``) or ``ValidationError`` naming the rule when not."""


def refuse(rule: str, detail: str) -> Rejected:
    """The refusal of a boundary check: ``Rejected`` whose reason is ``"<rule>: <detail>"``, so
    the rule is named first (``rule`` is a short kebab-case name, ``detail`` says what to do)."""
    return Rejected(f"{rule}: {detail}")


class BadProjection(ValidationError, TypeError):
    """A projection declared with a field of the wrong type or value (also a TypeError, as a
    wrong argument to a constructor is)."""


@dataclass(frozen=True)
class Projection(Generic[S]):
    """A named, versioned fold: ``initial`` and ``evolve``; ``kinds``, ``refs`` and
    ``provenances`` say which deltas it reads; ``positional`` that evolve takes their seq;
    ``check`` its rules, run at the boundary on every delta it reads (see the module doc)."""

    name: str
    version: int
    initial: S
    evolve: Callable[..., S]
    kinds: frozenset[str] | None = None
    state_type: Any = None
    positional: bool = False
    refs: frozenset[str] = frozenset()
    provenances: frozenset[str] = frozenset()
    check: Check | None = None
    #: An entity of this projection changes only through the deltas that refer to it (its own
    #: delta and those the refers-to index finds): ``audit.entity_at`` may fold those alone.
    local: bool = False
    #: A msgspec Struct with some of ``GenericDelta``'s fields (same names and types): where the
    #: fold reads this projection alone from the log (time travel), it decodes each record into
    #: it and skips the rest of the record, several times cheaper than a whole delta for a
    #: projection that reads no payload. ``evolve`` must then read only those fields; it still
    #: gets whole deltas elsewhere (live appends, folds of several projections).
    view: Any = None
    #: How an erased delta (``delta.erased`` set: its payload and vector dropped, its envelope
    #: kept; braidlog.erasure) folds: ``erased(state, delta, seq) -> state``. None (the
    #: default): it is passed over, as if evolve had not been shown it. It is called at the
    #: delta's own seq, in every fold, whenever it was erased (erasure is retroactive).
    erased: Callable[[S, GenericDelta, int], S] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise BadProjection("name", f"must be a non-empty string, not {self.name!r}"[:120])
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise BadProjection("version", f"projection {self.name!r}: must be a whole number from 1, "
                                f"not {self.version!r}"[:160])
        for attr in ("evolve", "check", "erased"):
            value = getattr(self, attr)
            if not callable(value) and (attr == "evolve" or value is not None):
                raise BadProjection(attr, f"projection {self.name!r}: must be a function, not "
                                    f"{type(value).__name__}")
        for attr in ("kinds", "refs", "provenances"):
            value = getattr(self, attr)
            if value is None and attr == "kinds":
                continue
            if isinstance(value, str) or not isinstance(value, (set, frozenset, list, tuple)) \
                    or not all(isinstance(v, str) for v in value):
                raise BadProjection(attr, f"projection {self.name!r}: {attr} is a set of names, not "
                                    f"{value!r}"[:200])
            if not isinstance(value, frozenset):
                object.__setattr__(self, attr, frozenset(value))
        unknown = sorted(self.refs - set(REF_FIELDS))
        if unknown:
            raise BadProjection("refs", f"projection {self.name!r}: refs {unknown} are not fields of Refs "
                                f"(one of {', '.join(REF_FIELDS)})")
        if self.state_type is None:
            object.__setattr__(self, "state_type", type(self.initial))
        if self.view is not None:
            self._check_view()

    def _check_view(self) -> None:
        fields = getattr(self.view, "__struct_fields__", None)
        if not isinstance(self.view, type) or fields is None:
            raise TypeError(f"projection {self.name!r}: view must be a msgspec Struct type, "
                            f"not {self.view!r}")
        extra = sorted(set(fields) - set(GenericDelta.__struct_fields__))
        if extra:
            raise ValueError(f"projection {self.name!r}: view fields {extra} are not fields of "
                             "GenericDelta")
        needed = {"kind"} if self.kinds is not None else set()
        needed |= {"refs"} if self.refs else set()
        needed |= {"provenance"} if self.provenances else set()
        missing = sorted(needed - set(fields))
        if missing:
            raise ValueError(f"projection {self.name!r}: its view must hold {missing}, which "
                             "the fold reads to choose the deltas it shows evolve")

    def start(self) -> S:
        """A fresh initial state the caller owns (a deep copy of ``initial``)."""
        return copy.deepcopy(self.initial)

    def reads(self, d: GenericDelta) -> bool:
        """Whether the fold shows ``d`` to ``evolve``: its kind, its refs or its provenance."""
        if self.kinds is None or d.kind in self.kinds:
            return True
        if self.provenances and d.provenance.kind in self.provenances:
            return True
        refs = d.refs
        return refs is not None and any(getattr(refs, f) for f in self.refs)

    def apply(self, state: S, d: GenericDelta, seq: int) -> S:
        """``evolve`` of one delta at log position ``seq`` (whichever form evolve takes); it
        does not check ``reads``."""
        if d.erased is not None:
            return state if self.erased is None else self.erased(state, d, seq)
        return self.evolve(state, d, seq) if self.positional else self.evolve(state, d)

    def fold(self, deltas: Iterable[GenericDelta], state: S | None = None, *, seq: int = 0) -> S:
        """Fold deltas into ``state`` (a fresh initial state when None). ``seq`` is where the
        state stands: the deltas are the log's deltas ``seq + 1``, ``seq + 2`` … in order."""
        s = self.start() if state is None else state
        evolve, positional, erased = self.evolve, self.positional, self.erased
        if not self.refs and not self.provenances:
            kinds = self.kinds
            for at, d in enumerate(deltas, seq + 1):
                if kinds is None or d.kind in kinds:
                    if d.erased is not None:
                        s = s if erased is None else erased(s, d, at)
                    else:
                        s = evolve(s, d, at) if positional else evolve(s, d)
            return s
        reads = self.reads
        for at, d in enumerate(deltas, seq + 1):
            if reads(d):
                if d.erased is not None:
                    s = s if erased is None else erased(s, d, at)
                else:
                    s = evolve(s, d, at) if positional else evolve(s, d)
        return s


@dataclass(frozen=True)
class Decider(Projection[S]):
    """A projection that also decides commands against its state."""

    decide: Callable[[Any, S, Context], list[GenericDelta]] = None  # type: ignore[assignment]  # required: __post_init__ refuses None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not callable(self.decide):
            raise BadProjection("decide", f"Decider {self.name!r} needs decide (a function)")


def _stated(given: float | None, context: float | None, kind: str, provenance: Provenance,
            payload: dict[str, Any]) -> float:
    """The delta's confidence: as given, else the context's, else its kind's default."""
    if given is not None:
        return given
    if context is not None:
        return context
    return default_confidence(kind, provenance.kind, payload)


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
    confidence: float | None = None  # None: each delta gets its kind's default_confidence
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
            confidence=_stated(confidence, self.confidence, kind, provenance or self.provenance,
                               payload),
            payload=payload, refs=refs, tags=tuple(tags), vector=vector,
        )


