"""The seed's models: LedgerMind's enums, constrained strings and Pydantic models (seeds 000, 001).

Every model checks and coerces its fields on construction, as Pydantic does, and raises a
braidlog ``ValidationError`` naming the field and the seed's rule (``target: Expected str of
length >= 3 (TargetStr: at least 3 characters)``).
"""

from __future__ import annotations

import contextvars
import enum
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from braidlog import Command, Ident, Ulid, UtcTime, ValidationError

__all__ = [
    "DecisionPhase", "DecisionVitality", "PatternScope", "ProposalStatus", "TrustBoundary",
    "StrictStr", "TargetStr", "RationaleStr", "Unit", "Count", "Priority", "UtcTime", "Ulid", "Ident",
    "DecisionStatus", "Mode",
    "ProceduralStep", "ProceduralContent", "DecisionContent", "ProposalContent", "DecisionStream",
    "ResolutionIntent", "MemoryDecision", "RecordDecisionRequest", "SupersedeDecisionRequest",
    "SearchDecisionsRequest", "AcceptProposalRequest", "SearchResultItem",
]

HUMAN = "user"  # the one provenance kind that counts as a human (TrustBoundary.HUMAN_ONLY)


# ------------------------------------------------------------------------------ seed enums

class DecisionPhase(str, enum.Enum):  # noqa: UP042 - a StrEnum member formats as its value, not as Class.NAME
    """How mature a stream is: PATTERN -> EMERGENT -> CANONICAL."""

    PATTERN = "pattern"
    EMERGENT = "emergent"
    CANONICAL = "canonical"


class DecisionVitality(str, enum.Enum):  # noqa: UP042 - a StrEnum member formats as its value, not as Class.NAME
    """How recently a stream was used: ACTIVE (< 7 days), DECAYING (7-30), DORMANT (> 30)."""

    ACTIVE = "active"
    DECAYING = "decaying"
    DORMANT = "dormant"


class PatternScope(str, enum.Enum):  # noqa: UP042 - a StrEnum member formats as its value, not as Class.NAME
    """What a decision affects: one component, several, or the infrastructure."""

    LOCAL = "local"
    SYSTEM = "system"
    INFRA = "infra"


class ProposalStatus(str, enum.Enum):  # noqa: UP042 - a StrEnum member formats as its value, not as Class.NAME
    """A proposal's status: DRAFT -> ACCEPTED or REJECTED or FALSIFIED."""

    DRAFT = "draft"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    FALSIFIED = "falsified"


class TrustBoundary(str, enum.Enum):  # noqa: UP042 - a StrEnum member formats as its value, not as Class.NAME
    """Who may change decisions: agents with intent, or humans only."""

    AGENT_WITH_INTENT = "agent_with_intent"
    HUMAN_ONLY = "human_only"


# ------------------------------------------------------------------------ constrained types

StrictStr = Annotated[str, Meta(min_length=1)]
TargetStr = Annotated[str, Meta(min_length=3)]
RationaleStr = Annotated[str, Meta(min_length=10)]
Unit = Annotated[float, Meta(ge=0.0, le=1.0)]
Count = Annotated[int, Meta(ge=0)]
Priority = Annotated[int, Meta(ge=0, le=10)]
DecisionStatus = Literal["active", "deprecated", "superseded"]
Mode = Literal["strict", "balanced", "audit"]

_HINTS = {
    "title": "StrictStr: at least 1 character",
    "query": "StrictStr: at least 1 character",
    "reason": "StrictStr: at least 1 character",
    "target": "TargetStr: at least 3 characters",
    "rationale": "RationaleStr: at least 10 characters",
    "confidence": "a number in [0, 1]",
    "coverage": "a number in [0, 1]",
    "stability_score": "a number in [0, 1]",
    "frequency": "an integer >= 0",
    "priority": "an integer in [0, 10]",
    "limit": "an integer in [1, 50]",
    "old_decision_ids": "at least one decision id",
    "decision_id": "a ULID (the id of the delta that records the decision)",
    "proposal_id": "a ULID (the id of the delta that drafted the proposal)",
}

_validating: contextvars.ContextVar[bool] = contextvars.ContextVar("_validating", default=False)


def _error(e: msgspec.ValidationError) -> ValidationError:
    """A braidlog ValidationError naming the field and the rule from a msgspec one."""
    text = str(e)
    rule, sep, path = text.rpartition(" - at `$")
    if not sep:
        return ValidationError("model", text)
    field = path.rstrip("`").lstrip(".") or "model"
    hint = _HINTS.get(field.split(".")[0].split("[")[0])
    return ValidationError(field, f"{rule} ({hint})" if hint else rule)


class _Model(Command, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A seed model or command: fields are checked and coerced on construction, as Pydantic does."""

    def __post_init__(self) -> None:
        if _validating.get():
            return
        token = _validating.set(True)
        try:
            checked = msgspec.convert(msgspec.to_builtins(self), type(self))
            for name in self.__struct_fields__:  # coerce as Pydantic does: "infra" -> PatternScope.INFRA
                msgspec.structs.force_setattr(self, name, getattr(checked, name))
        except msgspec.ValidationError as e:
            raise _error(e) from None
        except (TypeError, msgspec.EncodeError) as e:
            raise ValidationError(type(self).__name__, f"fields must be JSON values ({e})") from None
        finally:
            _validating.reset(token)


# ------------------------------------------------------------------------------ seed models

class ProceduralStep(_Model, frozen=True, kw_only=True):
    """One step of distilled procedural knowledge."""

    action: str
    rationale: str | None = None
    expected_outcome: str | None = None


class ProceduralContent(_Model, frozen=True, kw_only=True):
    """Step-by-step instructions distilled from successful trajectories (MemP)."""

    steps: list[ProceduralStep]
    target_task: str
    success_evidence_ids: list[int]


class DecisionContent(_Model, frozen=True, kw_only=True):
    """A semantic decision as the seed shows it (a view of a recorded decision)."""

    title: StrictStr
    target: TargetStr
    rationale: RationaleStr
    status: DecisionStatus = "active"
    namespace: str = "default"
    keywords: list[str] = []
    evidence_event_ids: list[int] = []
    consequences: list[str] = []
    supersedes: list[str] = []
    superseded_by: str | None = None
    attachments: list[dict[str, str]] = []
    procedural: ProceduralContent | None = None


class ProposalContent(_Model, frozen=True, kw_only=True):
    """A draft hypothesis awaiting evaluation, with its epistemic fields."""

    title: StrictStr
    target: TargetStr
    rationale: RationaleStr
    status: ProposalStatus = ProposalStatus.DRAFT
    namespace: str = "default"
    confidence: Unit = 0.0
    keywords: list[str] = []
    strengths: list[str] = []
    objections: list[str] = []
    counter_patterns: list[str] = []
    alternative_ids: list[str] = []
    evidence_event_ids: list[int] = []
    counter_evidence_event_ids: list[int] = []
    suggested_consequences: list[str] = []
    suggested_supersedes: list[str] = []
    procedural: ProceduralContent | None = None
    first_observed_at: UtcTime | None = None
    last_observed_at: UtcTime | None = None
    hit_count: Count = 0
    miss_count: Count = 0
    ready_for_review: bool = False


class DecisionStream(_Model, frozen=True, kw_only=True):
    """A decision with its lifecycle metrics, as of one time (built by ``stream``)."""

    decision_id: StrictStr
    target: TargetStr
    title: StrictStr
    rationale: RationaleStr
    namespace: str = "default"
    scope: PatternScope = PatternScope.LOCAL
    status: DecisionStatus = "active"
    phase: DecisionPhase = DecisionPhase.PATTERN
    vitality: DecisionVitality = DecisionVitality.ACTIVE
    provenance: Literal["internal", "external"] = "internal"
    keywords: list[str] = []
    evidence_event_ids: list[int] = []
    consequences: list[str] = []
    superseded_by: str | None = None
    supersedes: list[str] = []
    attachments: list[dict[str, str]] = []
    procedural: ProceduralContent | None = None
    procedural_ids: list[str] = []
    frequency: Count = 0
    unique_contexts: Count = 0
    hit_count: Count = 0
    confidence: Unit = 1.0
    stability_score: Unit = 0.0
    reinforcement_density: float = 0.0
    coverage: Unit = 0.0
    lifetime_days: float = 0.0
    estimated_removal_cost: float = 0.0
    estimated_utility: float = 0.0
    first_seen: UtcTime
    last_seen: UtcTime
    schema_version: int = 1


class ResolutionIntent(_Model, frozen=True, kw_only=True):
    """How to resolve a conflict: supersede or deprecate the named decisions, or abort."""

    resolution_type: Literal["supersede", "deprecate", "abort"]
    rationale: str
    target_decision_ids: list[str]


class MemoryDecision(_Model, frozen=True, kw_only=True):
    """What an operation did: persisted or not, where, why, and the delta ids it wrote."""

    should_persist: bool
    store_type: Literal["episodic", "semantic", "none"]
    reason: str
    priority: Priority = 0
    metadata: dict[str, Any] = {}


class RecordDecisionRequest(_Model, frozen=True, kw_only=True):
    """MCP request: record a decision."""

    title: StrictStr
    target: TargetStr
    rationale: RationaleStr
    consequences: list[str] = []
    namespace: str = "default"


class SupersedeDecisionRequest(_Model, frozen=True, kw_only=True):
    """MCP request: record a decision that supersedes at least one active decision."""

    title: StrictStr
    target: TargetStr
    rationale: RationaleStr
    old_decision_ids: Annotated[list[str], Meta(min_length=1)]
    consequences: list[str] = []
    namespace: str = "default"


class SearchDecisionsRequest(_Model, frozen=True, kw_only=True):
    """MCP request: search decisions (strict, balanced or audit)."""

    query: StrictStr
    limit: Annotated[int, Meta(ge=1, le=50)] = 5
    offset: Count = 0
    namespace: str = "default"
    mode: Mode = "balanced"


class AcceptProposalRequest(_Model, frozen=True, kw_only=True):
    """MCP request: accept a draft proposal."""

    proposal_id: str


class SearchResultItem(_Model, frozen=True, kw_only=True):
    """One search hit as the MCP server returns it."""

    id: str
    score: float
    status: str
    preview: str
    kind: str

