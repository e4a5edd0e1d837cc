"""Memories: typed memories with provenance, workspaces and conflict policies, after typedmem (seed 002).

A ``Memory`` has a type, content and confidence, an optional subject, tags, a workspace and
``Source`` provenance. Its slot is ``(workspace, type, subject)``; memories without a subject
never collide. When an added memory lands in an occupied slot, its type's ``ConflictPolicy``
(from the workspace's ``DomainProfile``) decides: REPLACE, KEEP_BOTH, SUPERSEDE, REINFORCE, FLAG
or IGNORE. The decision is made in ``decide`` and its outcome recorded in the delta, so
``evolve`` needs no profile: it applies what the log says. Every record has a version (1 when
stored, +1 per change); writes may carry ``expected_version``. Confidence decays per type as
``confidence * 0.5 ** (age_days / half_life_days)`` as of a time the caller gives.

Ids: a memory's id is a ULID from the context (or the caller's own, which then doubles as the
idempotency key of the add); ``refers`` indexes every delta under the ids of the records it
touches, and under the absorbed incoming id for REPLACE and REINFORCE.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

import braidlog
from braidlog import ConflictError, Context, Decider, GenericDelta, Rejected, ValidationError

__all__ = [
    "ConflictPolicy", "Source", "Memory", "TypeSpec", "DomainProfile", "BUILTIN_PROFILES",
    "DEFAULT_PROFILE", "DEFAULT_WORKSPACE", "REPLACE_LOG_LIMIT", "RESERVED_METADATA",
    "MemoryAdded", "MemoryReplaced", "MemoryReinforced", "MemoryUpdated", "WorkspaceProfileBound",
    "State", "evolve",
    "AddMemory", "UpdateMemory", "BindProfile", "decide", "resolve", "reinforce_confidence",
    "slot_key", "get_memory", "list_memories", "slot_memories", "workspaces", "workspace_profile",
    "effective_confidence", "recall", "memories_decider", "PROJECTIONS",
]

DEFAULT_WORKSPACE = "default"
DEFAULT_PROFILE = "personal"  # typedmem's pre-profile default: fact, preference, goal, event, observation
REPLACE_LOG_LIMIT = 20
#: metadata keys the library manages; an incoming memory may not set them.
RESERVED_METADATA = ("replace_log", "replace_count", "conflicts_with")
MAX_ID = 120

Ident = Annotated[str, Meta(min_length=1, max_length=MAX_ID)]
Text = Annotated[str, Meta(min_length=1)]
Confidence = Annotated[float, Meta(ge=0.0, le=1.0)]
Authority = Annotated[float, Meta(ge=0.0)]
HalfLife = Annotated[float, Meta(gt=0.0)]
UtcTime = Annotated[datetime, Meta(tz=True)]


class ConflictPolicy(str, enum.Enum):
    """What happens when an added memory lands in an occupied slot."""

    REPLACE = "replace"
    KEEP_BOTH = "keep_both"
    SUPERSEDE = "supersede"
    REINFORCE = "reinforce"
    FLAG = "flag"
    IGNORE = "ignore"


class Source(Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """Where a memory came from; ``key()`` is its identity for REINFORCE's union.

    ``retrieved_at`` left None is stamped with the deciding context's time.
    """

    document_id: Text
    chunk_id: Text | None = None
    span: tuple[int, int] | None = None
    retrieved_at: UtcTime | None = None
    authority: Authority = 1.0
    uri: Text | None = None

    def key(self) -> tuple[str, str | None, tuple[int, int] | None]:
        """``(document_id, chunk_id, span)``: two slices of one document are distinct evidence."""
        return (self.document_id, self.chunk_id, self.span)


class Memory(Struct, kw_only=True):
    """A typed memory: what callers add and what the state keeps.

    On input leave ``id`` (a new ULID), ``timestamp`` (the context's now), ``version``,
    ``superseded_by``, ``half_life_days`` and ``updated_at`` unset; the library fills them.
    """

    type: str
    content: str
    confidence: float = 1.0
    subject: str | None = None
    tags: list[str] = []
    workspace: str = DEFAULT_WORKSPACE
    sources: list[Source] = []
    status: str | None = None
    superseded_by: str | None = None
    metadata: dict[str, Any] = {}
    id: str | None = None
    timestamp: datetime | None = None
    version: int = 0
    half_life_days: float | None = None
    updated_at: datetime | None = None


_REQUIRABLE = ("source", "subject", "tags", "content", "status", "metadata", "sources")


class TypeSpec(Struct, frozen=True, kw_only=True):
    """A memory type in a profile: its policy, half-life, required fields and allowed tags.

    ``required_fields``: "source" (or "sources") needs a source, "subject" a subject, "tags" a
    tag, "status"/"metadata"/"content" a non-empty value. ``allowed_tags`` None = any tag.
    """

    name: str
    description: str = ""
    conflict_policy: ConflictPolicy = ConflictPolicy.KEEP_BOTH
    half_life_days: float | None = None
    summarizable: bool = False
    required_fields: tuple[str, ...] = ()
    allowed_tags: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValidationError("TypeSpec.name", "must be a non-empty string")
        if not isinstance(self.conflict_policy, ConflictPolicy):
            raise ValidationError("TypeSpec.conflict_policy",
                                  f"must be a ConflictPolicy (got {self.conflict_policy!r})")
        h = self.half_life_days
        if h is not None and (isinstance(h, bool) or not isinstance(h, (int, float))
                              or not math.isfinite(h) or h <= 0):
            raise ValidationError("TypeSpec.half_life_days", f"must be a positive number or None (got {h!r})")
        bad = [f for f in self.required_fields if f not in _REQUIRABLE]
        if bad:
            raise ValidationError("TypeSpec.required_fields", f"unknown {bad}; use some of {', '.join(_REQUIRABLE)}")


class DomainProfile(Struct, frozen=True, kw_only=True):
    """A domain's memory types; ``include_core_types`` merges core's types under its own."""

    name: str
    description: str = ""
    types: dict[str, TypeSpec] = {}
    include_core_types: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValidationError("DomainProfile.name", "must be a non-empty string")
        for key, spec in self.types.items():
            if key != spec.name:
                raise ValidationError(f"DomainProfile.types[{key!r}]", f"is keyed by its name ({spec.name!r})")

    def all_types(self) -> dict[str, TypeSpec]:
        """Every type this profile accepts (core's first when included, own ones override)."""
        base = dict(_CORE_TYPES) if self.include_core_types else {}
        base.update(self.types)
        return base

    def spec(self, type: str) -> TypeSpec | None:
        """The TypeSpec of ``type``, or None if the profile does not know it."""
        return self.all_types().get(type)

    def policies(self) -> dict[str, ConflictPolicy]:
        """Conflict policy by type name."""
        return {n: s.conflict_policy for n, s in self.all_types().items()}

    @staticmethod
    def builtin(name: str) -> DomainProfile:
        """One of the built-in profiles by name."""
        profile = BUILTIN_PROFILES.get(name)
        if profile is None:
            raise ValidationError("profile", f"unknown built-in profile {name!r}; "
                                             f"use one of {', '.join(BUILTIN_PROFILES)}")
        return profile


P = ConflictPolicy


def _types(*specs: TypeSpec) -> dict[str, TypeSpec]:
    return {s.name: s for s in specs}


_CORE_TYPES = _types(
    TypeSpec(name="fact", description="A stable claim about the world.", conflict_policy=P.KEEP_BOTH),
    TypeSpec(name="note", description="A free-form annotation.", conflict_policy=P.KEEP_BOTH),
    TypeSpec(name="goal", description="An objective; restating it replaces it.", conflict_policy=P.REPLACE),
    TypeSpec(name="task", description="An action item; replaced on update.", conflict_policy=P.REPLACE),
    TypeSpec(name="event", description="A time-anchored occurrence.", conflict_policy=P.KEEP_BOTH,
             half_life_days=14.0, summarizable=True),
)
_OBSERVATION = TypeSpec(name="observation", description="A low-level signal, as it happened.",
                        conflict_policy=P.KEEP_BOTH, half_life_days=7.0, summarizable=True)

BUILTIN_PROFILES: dict[str, DomainProfile] = {p.name: p for p in (
    DomainProfile(name="core", description="Knowledge primitives: fact, note, goal, task, event.",
                  types=_CORE_TYPES, include_core_types=False),
    DomainProfile(name="personal", description="Personal assistant: preferences, observations.", types=_types(
        TypeSpec(name="preference", description="A user tendency that can shift.",
                 conflict_policy=P.REPLACE, half_life_days=60.0),
        _OBSERVATION,
    )),
    DomainProfile(name="research_paper", description="Knowledge extracted from papers.", types=_types(
        TypeSpec(name="claim", description="An assertion a paper makes.", required_fields=("source",)),
        TypeSpec(name="method", description="A technique used in the work.", required_fields=("source",)),
        TypeSpec(name="evidence", description="A result supporting a claim; corroboration reinforces.",
                 conflict_policy=P.REINFORCE, required_fields=("source",)),
        TypeSpec(name="limitation", description="A caveat or threat to validity."),
        TypeSpec(name="open_question", description="A question the paper raises."),
    )),
    DomainProfile(name="engineering_design", description="Decisions, constraints and risks.", types=_types(
        TypeSpec(name="decision", description="A choice made; a new one supersedes the old.",
                 conflict_policy=P.SUPERSEDE, required_fields=("subject",)),
        TypeSpec(name="constraint", description="A bound the system must respect.", conflict_policy=P.REPLACE),
        TypeSpec(name="risk", description="A potential negative outcome; readings are flagged.",
                 conflict_policy=P.FLAG),
        TypeSpec(name="assumption", description="A premise the design relies on.", conflict_policy=P.REPLACE),
        TypeSpec(name="todo", description="An engineering action item.", conflict_policy=P.REPLACE),
    )),
    DomainProfile(name="legal", description="Obligations, exceptions, deadlines, definitions.", types=_types(
        TypeSpec(name="obligation", description="A duty on a party.", required_fields=("source", "subject")),
        TypeSpec(name="exception", description="Where an obligation does not apply.", required_fields=("source",)),
        TypeSpec(name="deadline", description="A time-bound requirement.", conflict_policy=P.REPLACE),
        TypeSpec(name="definition", description="A defined term; a new definition supersedes.",
                 conflict_policy=P.SUPERSEDE),
        TypeSpec(name="citation", description="A reference to another instrument."),
    )),
    DomainProfile(name="medical_literature", description="Findings and outcomes from studies.", types=_types(
        TypeSpec(name="finding", description="A clinically relevant result.", required_fields=("source",)),
        TypeSpec(name="population", description="The patient group studied."),
        TypeSpec(name="intervention", description="The treatment or procedure applied."),
        TypeSpec(name="outcome", description="A measured endpoint; corroboration reinforces.",
                 conflict_policy=P.REINFORCE, required_fields=("source",)),
        TypeSpec(name="limitation", description="A caveat or threat to validity."),
    )),
    DomainProfile(name="child_development", description="A child's behaviour, milestones, concerns.", types=_types(
        TypeSpec(name="observation", description="A behaviour, tagged with its developmental axis.",
                 conflict_policy=P.KEEP_BOTH, half_life_days=7.0, summarizable=True,
                 allowed_tags=("language", "motor", "emotional", "cognitive", "social")),
        TypeSpec(name="milestone", description="A developmental milestone.", required_fields=("subject",)),
        TypeSpec(name="concern", description="Something to watch; readings are flagged.",
                 conflict_policy=P.FLAG, half_life_days=30.0),
    )),
)}


# NOTE: payload class names may be stored; never rename one, add a new one.

class MemoryAdded(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A new record (version 1). ``policy`` is the one applied when its slot was occupied:
    with SUPERSEDE ``supersedes`` names the record it supersedes, with FLAG ``conflicts_with``
    the record both now name in ``metadata.conflicts_with``."""

    id: Ident
    type: Ident
    content: Text
    confidence: Confidence
    workspace: Ident
    timestamp: UtcTime
    subject: Text | None = None
    tags: list[Text] = []
    sources: list[Source] = []
    status: Text | None = None
    metadata: dict[str, Any] = {}
    half_life_days: HalfLife | None = None
    policy: ConflictPolicy | None = None
    supersedes: Ident | None = None
    conflicts_with: Ident | None = None


class MemoryReplaced(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """REPLACE: record ``id`` took the incoming content, confidence and timestamp; tags unioned,
    sources replaced when the incoming has some, metadata merged, replace log and count kept."""

    id: Ident
    incoming_id: Ident
    content: Text
    confidence: Confidence
    timestamp: UtcTime
    tags: list[Text] = []
    sources: list[Source] = []
    metadata: dict[str, Any] = {}


class MemoryReinforced(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """REINFORCE: record ``id`` gained ``sources`` (the new ones by key) and the blended
    ``confidence`` (from ``weight`` and ``bump``); ``content`` is set when it was replaced."""

    id: Ident
    incoming_id: Ident
    confidence: Confidence
    weight: float
    bump: float
    sources: list[Source] = []
    tags: list[Text] = []
    content: Text | None = None


class MemoryUpdated(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """An explicit change of a record; fields left out are unchanged, metadata is merged."""

    id: Ident
    content: Text | None = None
    confidence: Confidence | None = None
    status: Text | None = None
    tags: list[Text] | None = None
    metadata: dict[str, Any] | None = None


class WorkspaceProfileBound(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A workspace now takes its types and policies from ``profile``."""

    workspace: Ident
    profile: Ident


def _refers_added(p: MemoryAdded) -> list[str]:
    return [i for i in (p.id, p.supersedes, p.conflicts_with) if i]


def _refers_absorbed(p: Any) -> list[str]:
    return [p.id, p.incoming_id]


def _refers_id(p: Any) -> list[str]:
    return [p.id]


braidlog.declare("memory_added", MemoryAdded, owner="memories", refers=_refers_added)
braidlog.declare("memory_replaced", MemoryReplaced, owner="memories", refers=_refers_absorbed)
braidlog.declare("memory_reinforced", MemoryReinforced, owner="memories", refers=_refers_absorbed)
braidlog.declare("memory_updated", MemoryUpdated, owner="memories", refers=_refers_id)
braidlog.declare("workspace_profile_bound", WorkspaceProfileBound, owner="memories", refers=lambda p: ())

KINDS = frozenset({"memory_added", "memory_replaced", "memory_reinforced", "memory_updated",
                   "workspace_profile_bound"})


# ---------------------------------------------------------------------------------------- state

class State(Struct, kw_only=True):
    """Records by id (in the order they were stored), slots, absorbed ids and profile bindings."""

    memories: dict[str, Memory] = {}
    slots: dict[str, list[str]] = {}
    absorbed: dict[str, str] = {}
    profiles: dict[str, str] = {}


def slot_key(workspace: str, type: str, subject: str | None) -> str | None:
    """The slot of ``(workspace, type, subject)`` as a string key; None without a subject."""
    if subject is None:
        return None
    return msgspec.json.encode([workspace, type, subject]).decode()


def _union(old: Iterable[str], new: Iterable[str]) -> list[str]:
    out = list(old)
    out.extend(t for t in dict.fromkeys(new) if t not in out)
    return out


def evolve(state: State, delta: GenericDelta) -> State:
    """Apply one memories delta (in place); other kinds leave the state as it is."""
    kind = delta.kind
    if kind not in KINDS:
        return state
    p = braidlog.typed(delta)
    ts = delta.ts
    if kind == "workspace_profile_bound":
        state.profiles[p.workspace] = p.profile
        return state
    if kind == "memory_added":
        if p.id in state.memories:
            return state  # a second add of one id: the first stands
        meta = dict(p.metadata)
        if p.conflicts_with is not None:
            meta["conflicts_with"] = [p.conflicts_with]
        rec = Memory(
            id=p.id, type=p.type, content=p.content, confidence=p.confidence, subject=p.subject,
            tags=list(p.tags), workspace=p.workspace,
            sources=[s if s.retrieved_at else msgspec.structs.replace(s, retrieved_at=ts) for s in p.sources],
            status=p.status, metadata=meta, timestamp=p.timestamp, version=1,
            half_life_days=p.half_life_days, updated_at=ts)
        for other_id, link in ((p.supersedes, "superseded_by"), (p.conflicts_with, "conflicts_with")):
            other = state.memories.get(other_id) if other_id else None
            if other is None:
                continue
            if link == "superseded_by":
                other.superseded_by = p.id
            else:
                other.metadata = {**other.metadata,
                                  "conflicts_with": [*other.metadata.get("conflicts_with", []), p.id]}
            other.version += 1
            other.updated_at = ts
        state.memories[p.id] = rec
        key = slot_key(p.workspace, p.type, p.subject)
        if key is not None:
            state.slots.setdefault(key, []).append(p.id)
        return state
    rec = state.memories.get(p.id)
    if rec is None:
        return state
    if kind == "memory_replaced":
        entry = {"at": ts.isoformat(), "delta_id": delta.id, "incoming_id": p.incoming_id,
                 "previous_content": rec.content, "previous_confidence": rec.confidence}
        log = [*rec.metadata.get("replace_log", []), entry][-REPLACE_LOG_LIMIT:]
        rec.metadata = {**rec.metadata, **p.metadata, "replace_log": log,
                        "replace_count": rec.metadata.get("replace_count", 0) + 1}
        rec.content, rec.confidence, rec.timestamp = p.content, p.confidence, p.timestamp
        rec.tags = _union(rec.tags, p.tags)
        if p.sources:
            rec.sources = list(p.sources)
        state.absorbed[p.incoming_id] = rec.id
    elif kind == "memory_reinforced":
        seen = {s.key() for s in rec.sources}
        rec.sources = [*rec.sources, *(s for s in p.sources if s.key() not in seen)]
        rec.confidence = p.confidence
        rec.tags = _union(rec.tags, p.tags)
        if p.content is not None:
            rec.content = p.content
        state.absorbed[p.incoming_id] = rec.id
    else:  # memory_updated
        if p.content is not None:
            rec.content = p.content
        if p.confidence is not None:
            rec.confidence = p.confidence
        if p.status is not None:
            rec.status = p.status
        if p.tags is not None:
            rec.tags = list(p.tags)
        if p.metadata:
            rec.metadata = {**rec.metadata, **p.metadata}
    rec.version += 1
    rec.updated_at = ts
    return state


# ------------------------------------------------------------------------------------- commands

class AddMemory(braidlog.Command, frozen=True, kw_only=True):
    """Store a memory; an occupied slot goes through its type's ConflictPolicy.

    ``expected_version`` is the version the caller expects of the slot's current record (0 for
    an empty slot, or any memory without a subject).
    """

    memory: Memory
    expected_version: int | None = None


class UpdateMemory(braidlog.Command, frozen=True, kw_only=True):
    """Change a record's content, confidence, status, tags or (merged) metadata."""

    memory_id: str
    expected_version: int | None = None
    content: str | None = None
    confidence: float | None = None
    status: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None


class BindProfile(braidlog.Command, frozen=True, kw_only=True):
    """Make ``workspace`` take its types and policies from the profile named ``profile``."""

    workspace: str
    profile: str


def resolve(existing: Memory, incoming: Memory, policy: ConflictPolicy) -> ConflictPolicy:
    """The policy actually applied: REPLACE downgrades to IGNORE when the incoming is older or
    weaker (ties replace), or when both have sources and the incoming's best authority is lower."""
    if policy is not ConflictPolicy.REPLACE:
        return policy
    if existing.sources and incoming.sources:
        if max(s.authority for s in incoming.sources) < max(s.authority for s in existing.sources):
            return ConflictPolicy.IGNORE
    if incoming.timestamp < existing.timestamp or incoming.confidence < existing.confidence:
        return ConflictPolicy.IGNORE
    return ConflictPolicy.REPLACE


def reinforce_confidence(c_old: float, c_new: float, weight_sources: Iterable[Source]
                         ) -> tuple[float, float, float]:
    """``(c, w, bump)``: w = summed authority (1.0 if 0), bump = c_new·w·0.5,
    c = min(1, c_old + (1 − c_old)·bump)."""
    w = sum(s.authority for s in weight_sources) or 1.0
    bump = c_new * w * 0.5
    return min(1.0, c_old + (1.0 - c_old) * bump), w, bump


def _text(value: Any, name: str, optional: bool = False, max_length: int | None = None) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or (max_length is not None and len(value) > max_length):
        size = f"1..{max_length}" if max_length else "at least 1"
        raise ValidationError(name, f"must be a string of {size} characters{' or None' if optional else ''} "
                                    f"(got {value!r})")
    return value


def _confidence(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0.0 <= value <= 1.0):
        raise ValidationError(name, f"must be a number in [0, 1] (got {value!r})")
    return float(value)


def _aware(value: Any, name: str) -> datetime:
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise ValidationError(name, f"must be a timezone-aware datetime (got {value!r})")
    return value


def _json(value: Any, name: str) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(name, f"must be finite JSON (got {value!r})")
        return value
    if isinstance(value, (list, tuple)):
        return [_json(v, f"{name}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValidationError(name, "must be JSON: object keys are strings")
        return {k: _json(v, f"{name}.{k}") for k, v in value.items()}
    raise ValidationError(name, f"must be JSON (got {type(value).__name__})")


def _metadata(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(name, f"must be a JSON object (got {type(value).__name__})")
    reserved = [k for k in value if k in RESERVED_METADATA]
    if reserved:
        raise ValidationError(f"{name}.{reserved[0]}", "is managed by the library; leave it out")
    return _json(value, name)


def _tags(value: Any, name: str) -> list[str]:
    if not isinstance(value, (list, tuple)):
        raise ValidationError(name, f"must be a list of strings (got {type(value).__name__})")
    for i, t in enumerate(value):
        _text(t, f"{name}[{i}]", max_length=MAX_ID)
    return list(dict.fromkeys(value))


def _sources(value: Any, name: str, now: datetime) -> list[Source]:
    if not isinstance(value, (list, tuple)):
        raise ValidationError(name, f"must be a list of Source (got {type(value).__name__})")
    out: dict[tuple, Source] = {}
    for i, s in enumerate(value):
        where = f"{name}[{i}]"
        if isinstance(s, dict):
            try:
                s = msgspec.convert(s, Source)
            except msgspec.ValidationError as e:
                raise ValidationError(where, str(e)) from None
        if not isinstance(s, Source):
            raise ValidationError(where, f"must be a Source (got {type(s).__name__})")
        _text(s.document_id, f"{where}.document_id")
        _text(s.chunk_id, f"{where}.chunk_id", optional=True)
        _text(s.uri, f"{where}.uri", optional=True)
        a = s.authority
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not math.isfinite(a) or a < 0:
            raise ValidationError(f"{where}.authority", f"must be a finite number >= 0 (got {a!r})")
        if s.span is not None:
            sp = s.span
            if (not isinstance(sp, tuple) or len(sp) != 2 or not all(type(x) is int for x in sp)
                    or not 0 <= sp[0] <= sp[1]):
                raise ValidationError(f"{where}.span", f"must be (start, end) ints with 0 <= start <= end (got {sp!r})")
        if s.retrieved_at is None:
            s = msgspec.structs.replace(s, retrieved_at=now)
        else:
            _aware(s.retrieved_at, f"{where}.retrieved_at")
        out.setdefault(s.key(), s)
    return list(out.values())


def _profile(state: State, workspace: str, profiles: Mapping[str, DomainProfile], default: str) -> DomainProfile:
    name = state.profiles.get(workspace, default)
    profile = profiles.get(name)
    if profile is None:
        raise Rejected(f"workspace {workspace!r} is bound to profile {name!r}, which this decider does not "
                       f"know; pass it to memories_decider(profiles=[...])")
    return profile


def _check_spec(spec: TypeSpec, m: Memory, prefix: str) -> None:
    for f in spec.required_fields:
        attr = "sources" if f == "source" else f
        if not getattr(m, attr):
            raise ValidationError(f"{prefix}{attr}", f"is required for type {spec.name!r}")
    if spec.allowed_tags is not None:
        bad = [t for t in m.tags if t not in spec.allowed_tags]
        if bad:
            raise ValidationError(f"{prefix}tags", f"{bad[0]!r} is not allowed for type {spec.name!r}; "
                                                   f"use {', '.join(spec.allowed_tags)}")


def _incoming(m: Any, ctx: Context) -> Memory:
    """The incoming memory checked and completed (id, timestamp, sources' retrieved_at)."""
    if isinstance(m, dict):
        try:
            m = msgspec.convert(m, Memory)
        except msgspec.ValidationError as e:
            raise ValidationError("memory", str(e)) from None
    if not isinstance(m, Memory):
        raise ValidationError("memory", f"must be a Memory (got {type(m).__name__})")
    for attr, default in (("superseded_by", None), ("version", 0), ("half_life_days", None),
                          ("updated_at", None)):
        if getattr(m, attr) != default:
            raise ValidationError(f"memory.{attr}", "is set by the library; leave it unset")
    mid = _text(m.id, "memory.id", optional=True, max_length=MAX_ID) or ctx.new_id()
    return Memory(
        id=mid, type=_text(m.type, "memory.type", max_length=MAX_ID),
        content=_text(m.content, "memory.content"),
        confidence=_confidence(m.confidence, "memory.confidence"),
        subject=_text(m.subject, "memory.subject", optional=True),
        tags=_tags(m.tags, "memory.tags"),
        workspace=_text(m.workspace, "memory.workspace", max_length=MAX_ID),
        sources=_sources(m.sources, "memory.sources", ctx.now),
        status=_text(m.status, "memory.status", optional=True),
        metadata=_metadata(m.metadata, "memory.metadata"),
        timestamp=ctx.now if m.timestamp is None else _aware(m.timestamp, "memory.timestamp"))


def _current(state: State, workspace: str, type: str, subject: str | None) -> Memory | None:
    key = slot_key(workspace, type, subject)
    for rid in reversed(state.slots.get(key, []) if key else []):
        rec = state.memories[rid]
        if rec.superseded_by is None:
            return rec
    return None


def _check_version(expected: Any, actual: int, what: str) -> None:
    if expected is None:
        return
    if isinstance(expected, bool) or not isinstance(expected, int):
        raise ValidationError("expected_version", f"must be an int or None (got {expected!r})")
    if expected != actual:
        raise ConflictError(f"{what}: expected version {expected}, actual {actual}; re-read and retry",
                            expected=expected, actual=actual)


def _src(sources: Iterable[Source]) -> list[Any]:
    return [msgspec.to_builtins(s) for s in sources]


def decide(command: Any, state: State, ctx: Context, *,
           profiles: Mapping[str, DomainProfile] = BUILTIN_PROFILES,
           default_profile: str = DEFAULT_PROFILE) -> list[GenericDelta]:
    """The deltas that carry out ``command`` against ``state``; [] when already done or ignored."""
    if isinstance(command, AddMemory):
        return _add(command, state, ctx, profiles, default_profile)
    if isinstance(command, UpdateMemory):
        return _update(command, state, ctx, profiles, default_profile)
    if isinstance(command, BindProfile):
        ws = _text(command.workspace, "workspace", max_length=MAX_ID)
        if command.profile not in profiles:
            raise ValidationError("profile", f"unknown profile {command.profile!r}; use one of {', '.join(profiles)}")
        if state.profiles.get(ws) == command.profile:
            return []
        return [ctx.delta("workspace_profile_bound", {"workspace": ws, "profile": command.profile})]
    raise ValidationError("command", f"memories cannot decide a {type(command).__name__}; "
                                     "use AddMemory, UpdateMemory or BindProfile")


def _add(c: AddMemory, state: State, ctx: Context, profiles: Mapping[str, DomainProfile],
         default_profile: str) -> list[GenericDelta]:
    m = _incoming(c.memory, ctx)
    if m.id in state.memories or m.id in state.absorbed:
        return []  # the id is the add's idempotency key: this add is already done
    profile = _profile(state, m.workspace, profiles, default_profile)
    spec = profile.spec(m.type)
    if spec is None:
        raise ValidationError("memory.type", f"unknown type {m.type!r} in workspace {m.workspace!r} "
                                             f"(profile {profile.name!r}); use one of {', '.join(profile.all_types())}")
    _check_spec(spec, m, "memory.")
    existing = _current(state, m.workspace, m.type, m.subject)
    _check_version(c.expected_version, existing.version if existing else 0,
                   f"slot ({m.workspace}, {m.type}, {m.subject})")
    policy = None if existing is None else resolve(existing, m, spec.conflict_policy)
    if policy is ConflictPolicy.IGNORE:
        return []
    if policy is ConflictPolicy.REPLACE:
        payload = MemoryReplaced(id=existing.id, incoming_id=m.id, content=m.content,
                                 confidence=m.confidence, timestamp=m.timestamp, tags=m.tags,
                                 sources=m.sources, metadata=m.metadata)
        return [ctx.delta("memory_replaced", msgspec.to_builtins(payload))]
    if policy is ConflictPolicy.REINFORCE:
        seen = {s.key() for s in existing.sources}
        new = [s for s in m.sources if s.key() not in seen]
        conf, w, bump = reinforce_confidence(existing.confidence, m.confidence, new or m.sources)
        payload = MemoryReinforced(id=existing.id, incoming_id=m.id, confidence=conf, weight=w, bump=bump,
                                   sources=new, tags=m.tags,
                                   content=m.content if m.confidence > conf else None)
        return [ctx.delta("memory_reinforced", msgspec.to_builtins(payload))]
    status = m.status
    if status is None and m.type == "goal":
        status = "active"
    payload = MemoryAdded(
        id=m.id, type=m.type, content=m.content, confidence=m.confidence, workspace=m.workspace,
        timestamp=m.timestamp, subject=m.subject, tags=m.tags, sources=m.sources, status=status,
        metadata=m.metadata, half_life_days=spec.half_life_days, policy=policy,
        supersedes=existing.id if policy is ConflictPolicy.SUPERSEDE else None,
        conflicts_with=existing.id if policy is ConflictPolicy.FLAG else None)
    return [ctx.delta("memory_added", msgspec.to_builtins(payload))]


def _update(c: UpdateMemory, state: State, ctx: Context, profiles: Mapping[str, DomainProfile],
            default_profile: str) -> list[GenericDelta]:
    rid = _text(c.memory_id, "memory_id", max_length=MAX_ID)
    rec = state.memories.get(rid)
    if rec is None:
        raise Rejected(f"unknown memory {rid!r}" + (f"; it was absorbed into {state.absorbed[rid]!r}"
                                                     if rid in state.absorbed else ""))
    _check_version(c.expected_version, rec.version, f"memory {rid}")
    if rec.superseded_by is not None:
        raise Rejected(f"memory {rid!r} is superseded by {rec.superseded_by!r}; update that one")
    changes: dict[str, Any] = {}
    if c.content is not None and _text(c.content, "content") != rec.content:
        changes["content"] = c.content
    if c.confidence is not None and _confidence(c.confidence, "confidence") != rec.confidence:
        changes["confidence"] = float(c.confidence)
    if c.status is not None and _text(c.status, "status") != rec.status:
        changes["status"] = c.status
    if c.tags is not None:
        tags = _tags(c.tags, "tags")
        profile = profiles.get(state.profiles.get(rec.workspace, default_profile))
        spec = profile.spec(rec.type) if profile is not None else None
        if spec is not None:
            _check_spec(spec, Memory(type=rec.type, content=rec.content, subject=rec.subject, tags=tags,
                                     sources=rec.sources, status=rec.status, metadata=rec.metadata), "")
        if tags != rec.tags:
            changes["tags"] = tags
    if c.metadata is not None:
        meta = _metadata(c.metadata, "metadata")
        meta = {k: v for k, v in meta.items() if k not in rec.metadata or rec.metadata[k] != v}
        if meta:
            changes["metadata"] = meta
    if not changes:
        return []
    return [ctx.delta("memory_updated", {"id": rid, **changes})]


# -------------------------------------------------------------------------------------- queries

def get_memory(state: State, memory_id: str) -> Memory | None:
    """A record by id (an absorbed incoming id leads to the record that absorbed it)."""
    rec = state.memories.get(memory_id)
    if rec is None and memory_id in state.absorbed:
        rec = state.memories.get(state.absorbed[memory_id])
    return rec


def list_memories(state: State, workspace: str | None = DEFAULT_WORKSPACE, *, type: str | None = None,
                  subject: str | None = None, status: str | None = None, tag: str | None = None,
                  include_superseded: bool = False) -> list[Memory]:
    """Records in one workspace (None: every workspace), in the order they were stored;
    superseded ones only when asked."""
    return [m for m in state.memories.values()
            if (workspace is None or m.workspace == workspace)
            and (type is None or m.type == type)
            and (subject is None or m.subject == subject)
            and (status is None or m.status == status)
            and (tag is None or tag in m.tags)
            and (include_superseded or m.superseded_by is None)]


def slot_memories(state: State, workspace: str, type: str, subject: str, *,
                  include_superseded: bool = False) -> list[Memory]:
    """The records in one slot, oldest first."""
    key = slot_key(workspace, type, subject)
    recs = [state.memories[i] for i in state.slots.get(key, [])]
    return [m for m in recs if include_superseded or m.superseded_by is None]


def workspaces(state: State) -> list[str]:
    """Every workspace that holds a memory or has a profile bound, sorted."""
    return sorted({m.workspace for m in state.memories.values()} | set(state.profiles))


def workspace_profile(state: State, workspace: str, default: str = DEFAULT_PROFILE) -> str:
    """The name of the profile a workspace is bound to (the default when unbound)."""
    return state.profiles.get(workspace, default)


def effective_confidence(memory: Memory, as_of: datetime) -> float:
    """``confidence · 0.5^(age_days / half_life_days)`` as of ``as_of``; no decay without a
    half-life or at a non-positive age."""
    _aware(as_of, "as_of")
    if memory.half_life_days is None or memory.timestamp is None:
        return memory.confidence
    age_days = (as_of - memory.timestamp).total_seconds() / 86400.0
    if age_days <= 0:
        return memory.confidence
    return memory.confidence * 0.5 ** (age_days / memory.half_life_days)


def recall(state: State, as_of: datetime, workspace: str | None = DEFAULT_WORKSPACE, *,
           type: str | None = None, subject: str | None = None, min_confidence: float = 0.0,
           include_superseded: bool = False) -> list[tuple[Memory, float]]:
    """``(memory, effective confidence as of as_of)``, strongest first, at or above ``min_confidence``."""
    _aware(as_of, "as_of")
    scored = [(m, effective_confidence(m, as_of))
              for m in list_memories(state, workspace, type=type, subject=subject,
                                     include_superseded=include_superseded)]
    return sorted((x for x in scored if x[1] >= min_confidence), key=lambda x: -x[1])


def memories_decider(*, profiles: Iterable[DomainProfile] = (), default_profile: str = DEFAULT_PROFILE,
                     name: str = "memories") -> Decider:
    """The memories Decider: built-in profiles plus ``profiles`` (which win on a name clash);
    an unbound workspace uses ``default_profile``."""
    registry = dict(BUILTIN_PROFILES)
    for p in profiles:
        if not isinstance(p, DomainProfile):
            raise ValidationError("profiles", f"must be DomainProfiles (got {type(p).__name__})")
        registry[p.name] = p
    if default_profile not in registry:
        raise ValidationError("default_profile",
                              f"unknown profile {default_profile!r}; use one of {', '.join(registry)}")

    def decide_with_profiles(command: Any, state: State, ctx: Context) -> list[GenericDelta]:
        return decide(command, state, ctx, profiles=registry, default_profile=default_profile)

    return Decider(name=name, version=1, initial=State(), evolve=evolve, kinds=KINDS,
                   state_type=State, decide=decide_with_profiles)


PROJECTIONS = [memories_decider()]
