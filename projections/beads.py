"""Beads: versioned, addressable artifacts in memory, after the Braid seed ("Beads").

A bead has a fixed type (tool_bead, skill_bead, memory_bead, microagent_bead, reasoning_bead)
and a list of immutable versions. Writing a bead appends two deltas at once: a ``bead_version``
(``BeadVersioned``: the new version's content, addressable forever by its ``bead_version_id``)
and a ``bead_write`` (``BeadWritten``: the bead's active version is now that one; version 1
created the bead). ``bead_ref`` (``BeadReferenced``) records a use of a bead by some delta.

A ``BeadRef`` without a version means the version active at the time of the referring delta or
knot. The projection reads its own kinds and any delta with ``refs.beads``; its evolve is
positional (the fold passes each delta's seq), so each version, activation and use remembers
the log seq it happened at: ``resolve(state, ref, seq=...)`` is a pure function of the state
and a position, and works the same on a time-travel view's state.

Reasoning beads hold a first-person narrative (it must start with "I" or a contraction of it:
"I think ...", "I'm ...") and structured fields. Their raw chain of thought is stored only when
the decider is built with ``allow_raw_cot=True`` (a write carrying one is refused otherwise),
and ``context_view`` leaves it out unless asked for by name.

Rules (``check``, at the boundary, whatever path brings the delta; seed section "Beads"):

- ``bead-version-immutable``: a ``bead_version_id`` is written once.
- ``bead-type-fixed``: a bead keeps the type of its first version.
- ``bead-versions-in-order``: a bead's versions are numbered 1, 2, 3 … in the order written.
- ``memory-type-for-memory-beads``: a memory_bead has a memory_type (semantic, procedural,
  episodic) and no other bead has one.
- ``reasoning-for-reasoning-beads``: a reasoning_bead has reasoning (the narrative's "I ..." form
  is its schema's) and no other bead has any.
- ``raw-cot-behind-flag``: raw chain of thought is stored only on a projection built with
  ``allow_raw_cot=True`` (seed: "optional behind a flag").
- ``bead-write-names-a-version``: a ``bead_write`` activates a version written before it, of
  that bead, with its type and number.
- ``bead-ref-names-a-bead``: a ``bead_ref`` names a written bead (and, if pinned, one of its
  versions).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

import braidlog
from braidlog import (
    BeadRef,
    Boundary,
    BraidlogError,
    Context,
    Decider,
    GenericDelta,
    Ident,
    Refs,
    Rejected,
    Text,
    ValidationError,
    check_payload,
    plain,
    refuse,
)

from .trust import dream_confidence

__all__ = [
    "BEAD_TYPES", "MEMORY_TYPES", "NARRATIVE_PATTERN",
    "ReasoningFields", "Reasoning", "BeadVersioned", "BeadWritten", "BeadReferenced",
    "VersionRecord", "Activation", "Use", "Bead", "State", "evolve",
    "WriteBead", "RefBead", "decide", "check",
    "active_version", "resolve", "versions", "version", "uses", "context_view",
    "decider", "PROJECTIONS",
]

BEAD_TYPES = ("tool_bead", "skill_bead", "memory_bead", "microagent_bead", "reasoning_bead")
MEMORY_TYPES = ("semantic", "procedural", "episodic")
#: A reasoning bead's narrative starts with the word "I" or a contraction of it (I'm, I've, I'd ...).
NARRATIVE_PATTERN = r"^I(?:[ \u2019']\S)"

BeadType = Literal["tool_bead", "skill_bead", "memory_bead", "microagent_bead", "reasoning_bead"]
MemoryType = Literal["semantic", "procedural", "episodic"]
Narrative = Annotated[str, Meta(pattern=NARRATIVE_PATTERN)]
_NARRATIVE = re.compile(NARRATIVE_PATTERN)
_ULID = re.compile("^[0-7][0-9A-HJKMNP-TV-Z]{25}$")


# NOTE: payload class names are stored as tags; never rename one, add a new one.

class ReasoningFields(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """The structured side of a thought summary."""

    goal: str | None = None
    observations: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    open_questions: tuple[str, ...] = ()
    next_steps: tuple[str, ...] = ()


class Reasoning(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A reasoning bead's content: the "I ..." narrative, structured fields, optional raw CoT."""

    narrative: Narrative
    fields: ReasoningFields = msgspec.field(default_factory=ReasoningFields)
    raw_cot: str | None = None


class BeadVersioned(Struct, frozen=True, tag=True, forbid_unknown_fields=True, omit_defaults=True):
    """One immutable version of a bead, addressable by ``bead_version_id``."""

    bead_id: Ident
    bead_version_id: Ident
    bead_type: BeadType
    version: Annotated[int, Meta(ge=1)]
    name: Text
    content: dict[str, Any] = {}
    memory_type: MemoryType | None = None
    reasoning: Reasoning | None = None
    supersedes: Ident | None = None


class BeadWritten(Struct, frozen=True, tag=True, forbid_unknown_fields=True, omit_defaults=True):
    """``bead_version_id`` is now the bead's active version (version 1: the bead was created)."""

    bead_id: Ident
    bead_version_id: Ident
    bead_type: BeadType
    version: Annotated[int, Meta(ge=1)]


class BeadReferenced(Struct, frozen=True, tag=True, forbid_unknown_fields=True, omit_defaults=True):
    """A delta used a bead in ``role``; without a version, the one active at that time."""

    bead_id: Ident
    role: Ident
    bead_version_id: Ident | None = None
    note: str | None = None


def _refers_version(p: Any) -> list[str]:
    return [p.bead_id, p.bead_version_id]


def _refers_ref(p: BeadReferenced) -> list[str]:
    return [p.bead_id] + ([p.bead_version_id] if p.bead_version_id else [])


braidlog.declare("bead_version", BeadVersioned, owner="beads", refers=_refers_version)
braidlog.declare("bead_write", BeadWritten, owner="beads", refers=_refers_version)
braidlog.declare("bead_ref", BeadReferenced, owner="beads", refers=_refers_ref)

KINDS = frozenset({"bead_version", "bead_write", "bead_ref"})
_read_version = braidlog.REGISTRY["bead_version"].reader()
_read_write = braidlog.REGISTRY["bead_write"].reader()
_read_ref = braidlog.REGISTRY["bead_ref"].reader()


# ---------------------------------------------------------------------------------------- state

# gc=False: a state is a tree (no record refers back to what holds it), so no record can be in
# a reference cycle, and the cyclic collector need not track the many a replay allocates.
class VersionRecord(Struct, gc=False):
    """A stored version: its payload and the facts of the delta that wrote it."""

    body: BeadVersioned
    delta_id: str
    braid_id: str
    ts: datetime
    seq: int
    provenance: str
    confidence: float


class Activation(Struct):
    """A version became active at log position ``seq`` (by the bead_write ``delta_id``)."""

    seq: int
    ts: datetime
    bead_version_id: str
    delta_id: str


class Use(Struct):
    """A delta that referred to a bead, with the version the reference resolved to then."""

    delta_id: str
    seq: int
    ts: datetime
    kind: str
    role: str
    bead_version_id: str | None
    resolved: str | None
    knot_id: str | None = None


class Bead(Struct, gc=False):
    """A bead: its type, its versions in order, and every activation."""

    bead_id: str
    bead_type: str
    braid_id: str
    versions: list[str] = []
    activations: list[Activation] = []


class State(Struct, kw_only=True):
    """Beads, every version by id, and uses by bead (each with the log seq it happened at)."""

    beads: dict[str, Bead] = {}
    versions: dict[str, VersionRecord] = {}
    uses: dict[str, list[Use]] = {}


#: what reading a payload that is not of its kind's schema may raise (the fold skips it)
_UNREADABLE = (BraidlogError, msgspec.MsgspecError, TypeError, ValueError, KeyError)


def _bead(state: State, bead_id: str, bead_type: str, braid_id: str) -> Bead:
    b = state.beads.get(bead_id)
    if b is None:
        b = state.beads[bead_id] = Bead(bead_id, bead_type, braid_id, [], [])
    return b


# The records below are built positionally, in field order: msgspec takes arguments that way
# faster than it matches keywords, and these run once per delta of a replay.

def _on_version(state: State, d: GenericDelta, seq: int) -> None:
    try:
        p = _read_version(d)
    except _UNREADABLE:
        return  # not a payload of this schema: a fact this projection cannot read
    vid = p.bead_version_id
    if vid not in state.versions:
        # body, delta_id, braid_id, ts, seq, provenance, confidence
        state.versions[vid] = VersionRecord(p, d.id, d.braid_id, d.ts, seq, d.provenance.kind,
                                            d.confidence)
        _bead(state, p.bead_id, p.bead_type, d.braid_id).versions.append(vid)


def _on_write(state: State, d: GenericDelta, seq: int) -> None:
    try:
        p = _read_write(d)
    except _UNREADABLE:
        return
    _bead(state, p.bead_id, p.bead_type, d.braid_id).activations.append(
        Activation(seq, d.ts, p.bead_version_id, d.id))  # seq, ts, bead_version_id, delta_id


def _on_ref(state: State, d: GenericDelta, seq: int) -> None:
    try:
        p = _read_ref(d)
    except _UNREADABLE:
        return
    _use(state, d, seq, p.bead_id, p.role, p.bead_version_id)


_APPLY = {"bead_version": _on_version, "bead_write": _on_write, "bead_ref": _on_ref}


def evolve(state: State, d: GenericDelta, seq: int) -> State:
    """Fold the delta at log position ``seq``: this module's kinds, and bead refs of any other
    kind recorded as uses (the fold shows it no other delta)."""
    apply = _APPLY.get(d.kind)
    if apply is not None:
        apply(state, d, seq)
    elif d.refs is not None:
        for r in d.refs.beads:
            _use(state, d, seq, r.bead_id, r.role, r.bead_version_id)
    return state


def _use(state: State, d: GenericDelta, seq: int, bead_id: str, role: str,
         version_id: str | None) -> None:
    resolved = version_id or active_version(state, bead_id)
    use = Use(d.id, seq, d.ts, d.kind, role, version_id, resolved, d.provenance.knot_id)
    uses = state.uses.get(bead_id)
    if uses is None:
        state.uses[bead_id] = [use]
    else:
        uses.append(use)


# ---------------------------------------------------------------------------------------- rules

def check(state: State, d: GenericDelta, at: Boundary, allow_raw_cot: bool = False) -> None:
    """The bead rules (module doc), at the boundary: refuse ``d`` naming the rule it breaks.
    Other kinds' ``refs.beads`` are uses, recorded as they come: no rule holds them."""
    kind = d.kind
    if kind == "bead_version":
        _check_version(state, _read_version(d), allow_raw_cot)
    elif kind == "bead_write":
        p = _read_write(d)
        v = state.versions.get(p.bead_version_id)
        if v is None or v.body.bead_id != p.bead_id or v.body.bead_type != p.bead_type \
                or v.body.version != p.version:
            found = "no such version" if v is None else (
                f"version {v.body.version} of {v.body.bead_type} {v.body.bead_id}")
            raise refuse("bead-write-names-a-version", f"bead_write activates {p.bead_version_id!r} "
                         f"as version {p.version} of {p.bead_type} {p.bead_id}, but the log holds "
                         f"{found}; write the bead_version first (beads.WriteBead writes both)")
    elif kind == "bead_ref":
        p = _read_ref(d)
        bead = state.beads.get(p.bead_id)
        if bead is None or not bead.activations:
            raise refuse("bead-ref-names-a-bead", f"no bead {p.bead_id!r}; write it first with WriteBead")
        if p.bead_version_id is not None and p.bead_version_id not in bead.versions:
            raise refuse("bead-ref-names-a-bead", f"{p.bead_version_id!r} is not a version of bead "
                         f"{p.bead_id} (it has {', '.join(bead.versions)})")


def _check_version(state: State, p: BeadVersioned, allow_raw_cot: bool) -> None:
    if p.bead_version_id in state.versions:
        raise refuse("bead-version-immutable", f"bead version {p.bead_version_id} already exists; "
                     "a version is immutable: write the change as a new version with a new id")
    bead = state.beads.get(p.bead_id)
    if bead is not None and bead.bead_type != p.bead_type:
        raise refuse("bead-type-fixed", f"bead {p.bead_id} is a {bead.bead_type}; a bead's type "
                     f"never changes (write a new {p.bead_type} bead instead)")
    expected = len(bead.versions) + 1 if bead is not None else 1
    if p.version != expected:
        raise refuse("bead-versions-in-order", f"bead {p.bead_id} has {expected - 1} version(s); "
                     f"its next is version {expected}, not {p.version}")
    if (p.bead_type == "memory_bead") != (p.memory_type is not None):
        raise refuse("memory-type-for-memory-beads", f"a memory_bead needs a memory_type (one of "
                     f"{', '.join(MEMORY_TYPES)}) and only a memory_bead has one; this "
                     f"{p.bead_type} has {p.memory_type!r}")
    if (p.bead_type == "reasoning_bead") != (p.reasoning is not None):
        raise refuse("reasoning-for-reasoning-beads", "a reasoning_bead needs reasoning (a "
                     "narrative \"I ...\" thought summary and structured fields) and only a "
                     f"reasoning_bead has any; this is a {p.bead_type}")
    if p.reasoning is not None and p.reasoning.raw_cot is not None and not allow_raw_cot:
        raise refuse("raw-cot-behind-flag", "raw chain of thought is not stored on this braid: "
                     "drop reasoning.raw_cot, or open the braid with beads.decider(allow_raw_cot=True)")


# ------------------------------------------------------------------------------------- commands

class WriteBead(braidlog.Command, frozen=True, kw_only=True):
    """Create a bead (no such ``bead_id`` yet) or write its next version.

    On an update, fields left None keep the active version's value; ``expected_version`` guards
    against a concurrent update.
    """

    bead_id: str | None = None
    bead_type: str | None = None
    name: str | None = None
    content: dict[str, Any] | None = None
    memory_type: str | None = None
    reasoning: Reasoning | None = None
    bead_version_id: str | None = None
    expected_version: int | None = None
    confidence: float | None = None


class RefBead(braidlog.Command, frozen=True, kw_only=True):
    """Record that the current delta stream used a bead; ``ref_id`` makes a retry a no-op."""

    bead_id: str
    role: str = "used"
    bead_version_id: str | None = None
    note: str | None = None
    ref_id: str | None = None
    confidence: float | None = None


def decide(command: Any, state: State, ctx: Context, allow_raw_cot: bool = False) -> list[GenericDelta]:
    """Decide WriteBead or RefBead: [] when already done; Rejected/ValidationError to refuse."""
    if isinstance(command, WriteBead):
        return _write(command, state, ctx, allow_raw_cot)
    if isinstance(command, RefBead):
        return _ref(command, state, ctx)
    raise ValidationError("command", f"beads cannot decide {type(command).__name__}; use WriteBead or RefBead")


def _check_reasoning(r: Reasoning, allow_raw_cot: bool) -> None:
    if not isinstance(r, Reasoning):
        raise ValidationError("reasoning", f"must be a beads.Reasoning, got {type(r).__name__}")
    if not isinstance(r.narrative, str) or not _NARRATIVE.match(r.narrative):
        raise ValidationError(
            "reasoning.narrative",
            "must be a first-person narrative: start with \"I\" or a contraction of it "
            f"(\"I checked ...\", \"I'm ...\"), got {str(r.narrative)[:40]!r}")


def _write(c: WriteBead, state: State, ctx: Context, allow_raw_cot: bool) -> list[GenericDelta]:
    bead = state.beads.get(c.bead_id) if c.bead_id is not None else None
    current = _active_record(state, bead) if bead is not None else None
    bead_type = c.bead_type if c.bead_type is not None else bead.bead_type if bead is not None else None
    if bead_type is None:
        raise ValidationError("bead_type", f"is required to create a bead: one of {', '.join(BEAD_TYPES)}")
    if bead_type not in BEAD_TYPES:
        raise ValidationError("bead_type", f"must be one of {', '.join(BEAD_TYPES)}, got {bead_type!r}")
    prev = current.body if current is not None else None
    name = c.name if c.name is not None else (prev.name if prev else None)
    if not name:
        raise ValidationError("name", "is required to create a bead (a short human-readable name)")
    content = c.content if c.content is not None else (prev.content if prev else {})
    memory_type = c.memory_type if c.memory_type is not None else (prev.memory_type if prev else None)
    reasoning = c.reasoning if c.reasoning is not None else (prev.reasoning if prev else None)
    if c.reasoning is not None:
        _check_reasoning(c.reasoning, allow_raw_cot)
    if c.bead_version_id is not None and c.bead_version_id in state.versions:
        old = state.versions[c.bead_version_id].body
        if old.bead_id == c.bead_id and _same(old, name, content, memory_type, reasoning):
            return []  # already written; other content under that id is the boundary's to refuse
    if c.expected_version is not None:
        actual = prev.version if prev else 0
        if actual != c.expected_version:
            raise Rejected(f"bead {c.bead_id} is at version {actual}, not the expected "
                           f"{c.expected_version}; read it again and retry")
    if prev is not None and c.bead_version_id is None and _same(prev, name, content, memory_type, reasoning):
        return []

    bead_id = c.bead_id or ctx.new_id()
    version_id = c.bead_version_id or ctx.new_id()
    number = len(bead.versions) + 1 if bead is not None else 1
    confidence = dream_confidence(ctx, c.confidence)
    body = check_payload("bead_version", msgspec.to_builtins(BeadVersioned(
        bead_id=bead_id, bead_version_id=version_id, bead_type=bead_type,  # type: ignore[arg-type]  # strs checked against the schema by check_payload
        version=number, name=name, content=content, memory_type=memory_type,  # type: ignore[arg-type]  # strs checked against the schema by check_payload
        reasoning=reasoning, supersedes=prev.bead_version_id if prev else None)))
    written = check_payload("bead_write", msgspec.to_builtins(BeadWritten(
        bead_id=bead_id, bead_version_id=version_id, bead_type=bead_type, version=number)))  # type: ignore[arg-type]  # strs checked against the schema by check_payload
    role = "updated" if prev else "created"
    refs = Refs(beads=(BeadRef(bead_id, role, version_id),))
    return [ctx.delta("bead_version", body, confidence=confidence, refs=refs),
            ctx.delta("bead_write", written, confidence=confidence, refs=refs)]


def _same(v: BeadVersioned, name: str, content: dict[str, Any], memory_type: str | None,
          reasoning: Reasoning | None) -> bool:
    return plain((v.name, v.content, v.memory_type, v.reasoning)) == plain((name, content, memory_type, reasoning))


def _ref(c: RefBead, state: State, ctx: Context) -> list[GenericDelta]:
    if c.ref_id is not None and any(u.delta_id == c.ref_id for u in state.uses.get(c.bead_id, ())):
        return []
    payload = check_payload("bead_ref", msgspec.to_builtins(BeadReferenced(
        bead_id=c.bead_id, role=c.role, bead_version_id=c.bead_version_id, note=c.note)))
    confidence = dream_confidence(ctx, c.confidence)
    d = ctx.delta("bead_ref", payload, confidence=confidence,
                  refs=Refs(beads=(BeadRef(c.bead_id, c.role, c.bead_version_id),)))
    if c.ref_id is not None:
        if not _ULID.match(c.ref_id):
            raise ValidationError("ref_id", f"must be a ULID (it becomes the delta's id), got {c.ref_id!r}")
        d = msgspec.structs.replace(d, id=c.ref_id)
    return [d]


# ---------------------------------------------------------------------------------------- queries

def _active_record(state: State, bead: Bead) -> VersionRecord | None:
    if not bead.activations:
        return None
    return state.versions.get(bead.activations[-1].bead_version_id)


def active_version(state: State, bead_id: str, *, seq: int | None = None,
                   as_of: datetime | None = None) -> str | None:
    """The bead's active version id after log position ``seq`` (or at time ``as_of``; else now)."""
    bead = state.beads.get(bead_id)
    if bead is None:
        return None
    found = None
    for a in bead.activations:
        if (seq is not None and a.seq > seq) or (as_of is not None and a.ts > as_of):
            break
        found = a.bead_version_id
    return found


def resolve(state: State, ref: BeadRef, *, seq: int | None = None,
            as_of: datetime | None = None) -> VersionRecord | None:
    """The version a BeadRef names: its pinned version, else the one active at ``seq``/``as_of``.

    Pass the referring delta's seq (a knot's: its tie's seq) to resolve as the seed means it.
    """
    if ref.bead_version_id is not None:
        v = state.versions.get(ref.bead_version_id)
        return v if v is not None and v.body.bead_id == ref.bead_id else None
    vid = active_version(state, ref.bead_id, seq=seq, as_of=as_of)
    return None if vid is None else state.versions.get(vid)


def versions(state: State, bead_id: str) -> list[VersionRecord]:
    """Every version of a bead, oldest first."""
    bead = state.beads.get(bead_id)
    return [] if bead is None else [state.versions[v] for v in bead.versions if v in state.versions]


def version(state: State, bead_version_id: str) -> VersionRecord | None:
    """One version by its BeadVersionID (old versions stay addressable)."""
    return state.versions.get(bead_version_id)


def uses(state: State, bead_id: str) -> list[Use]:
    """Every delta that referred to the bead, with the version each reference resolved to."""
    return list(state.uses.get(bead_id, ()))


def context_view(state: State, bead_id: str, *, seq: int | None = None, as_of: datetime | None = None,
                 bead_version_id: str | None = None, include_raw_cot: bool = False) -> dict[str, Any] | None:
    """What may be injected into an agent's context for a bead: raw CoT only when asked for."""
    v = resolve(state, BeadRef(bead_id, "used", bead_version_id), seq=seq, as_of=as_of)
    if v is None:
        return None
    b = v.body
    view: dict[str, Any] = {"bead_id": b.bead_id, "bead_version_id": b.bead_version_id,
                            "bead_type": b.bead_type, "version": b.version, "name": b.name,
                            "content": b.content}
    if b.memory_type is not None:
        view["memory_type"] = b.memory_type
    if b.reasoning is not None:
        view["narrative"] = b.reasoning.narrative
        view["fields"] = plain(b.reasoning.fields)
        if include_raw_cot and b.reasoning.raw_cot is not None:
            view["raw_cot"] = b.reasoning.raw_cot
    return view


def decider(*, allow_raw_cot: bool = False) -> Decider:
    """The beads projection; ``allow_raw_cot=True`` lets reasoning beads store raw chain of thought."""
    return Decider(name="beads", version=2, initial=State(), evolve=evolve, state_type=State,
                   kinds=KINDS, refs=frozenset({"beads"}), positional=True, local=True,
                   check=lambda state, d, at: check(state, d, at, allow_raw_cot),
                   decide=lambda command, state, ctx: decide(command, state, ctx, allow_raw_cot))


PROJECTIONS = [decider()]
