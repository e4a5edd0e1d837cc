"""typedmem's model (seed 002): conflict policies, Source, Memory, TypeSpec, DomainProfile and the
built-in profiles, with the constrained field types the payloads use."""

from __future__ import annotations

import enum
import math
from datetime import datetime
from typing import Annotated, Any

from msgspec import Meta, Struct

from braidlog import Confidence, Ident, Text, UtcTime, ValidationError

__all__ = [
    "ConflictPolicy", "Source", "Memory", "TypeSpec", "DomainProfile", "BUILTIN_PROFILES",
    "DEFAULT_PROFILE", "DEFAULT_WORKSPACE", "REPLACE_LOG_LIMIT", "RESERVED_METADATA", "MAX_ID",
    "Ident", "Text", "Confidence", "Authority", "HalfLife", "UtcTime",
]

DEFAULT_WORKSPACE = "default"
DEFAULT_PROFILE = "personal"  # typedmem's pre-profile default: fact, preference, goal, event, observation
REPLACE_LOG_LIMIT = 20
#: metadata keys the library manages; an incoming memory may not set them.
RESERVED_METADATA = ("replace_log", "replace_count", "conflicts_with")
MAX_ID = 120

Authority = Annotated[float, Meta(ge=0.0)]
HalfLife = Annotated[float, Meta(gt=0.0)]


class ConflictPolicy(str, enum.Enum):  # noqa: UP042 - a StrEnum member formats as its value, not as Class.NAME
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
