"""The decisions commands (imperative; each decided by ``decide`` into past-tense deltas)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from .model import (
    AcceptProposalRequest,
    PatternScope,
    ProceduralContent,
    ProposalContent,
    RationaleStr,
    RecordDecisionRequest,
    ResolutionIntent,
    StrictStr,
    SupersedeDecisionRequest,
    TargetStr,
    TrustBoundary,
    Ulid,
    Unit,
    _Model,
)

__all__ = ["RecordDecision", "SupersedeDecision", "DraftProposal", "AcceptProposal", "RejectProposal",
           "FalsifyProposal", "UseDecision", "SetTrustBoundary", "RegisterTargetAlias", "Reflect", "Command"]


class _DecisionFields(_Model, frozen=True, kw_only=True):
    """What every way of recording a decision carries besides its title, target and rationale."""

    namespace: str = "default"
    consequences: list[str] = []
    keywords: list[str] = []
    evidence_event_ids: list[int] = []
    attachments: list[dict[str, str]] = []
    procedural: ProceduralContent | None = None
    scope: PatternScope = PatternScope.LOCAL
    provenance: Literal["internal", "external"] = "internal"
    confidence: Unit | None = None
    intervention: bool = False
    decision_id: Ulid | None = None


class RecordDecision(_DecisionFields, frozen=True, kw_only=True):
    """Record a decision; with an active one on the target, an intent must resolve the conflict.

    ``intervention=True`` records a human intervention: it starts EMERGENT with confidence 0.7,
    removal cost 0.8 and utility 0.5. ``confidence`` (default: the context's) is the stream's
    starting confidence. ``decision_id`` (a ULID) makes retries idempotent.
    """

    title: StrictStr
    target: TargetStr
    rationale: RationaleStr
    intent: ResolutionIntent | None = None

    @classmethod
    def from_request(cls, request: RecordDecisionRequest, intent: ResolutionIntent | None = None,
                     **extra: Any) -> RecordDecision:
        """The command for a RecordDecisionRequest."""
        return cls(**msgspec.structs.asdict(request), intent=intent, **extra)


class SupersedeDecision(_DecisionFields, frozen=True, kw_only=True):
    """Record a decision that supersedes ``old_decision_ids`` (each must be active)."""

    title: StrictStr
    target: TargetStr
    rationale: RationaleStr
    old_decision_ids: Annotated[list[str], Meta(min_length=1)]

    @classmethod
    def from_request(cls, request: SupersedeDecisionRequest, **extra: Any) -> SupersedeDecision:
        """The command for a SupersedeDecisionRequest."""
        return cls(**msgspec.structs.asdict(request), **extra)


class DraftProposal(_Model, frozen=True, kw_only=True):
    """Write a proposal as a draft; ``proposal_id`` (a ULID) makes retries idempotent."""

    proposal: ProposalContent
    proposal_id: Ulid | None = None


class AcceptProposal(_Model, frozen=True, kw_only=True):
    """Accept a draft: record its decision, supersede its suggested_supersedes, mark it accepted.

    ``intent`` may supersede or deprecate further decisions (a conflict the proposal does not
    name needs one); ``decision_id`` (a ULID) names the decision it becomes.
    """

    proposal_id: str
    decision_id: Ulid | None = None
    intent: ResolutionIntent | None = None

    @classmethod
    def from_request(cls, request: AcceptProposalRequest, **extra: Any) -> AcceptProposal:
        """The command for an AcceptProposalRequest."""
        return cls(proposal_id=request.proposal_id, **extra)


class RejectProposal(_Model, frozen=True, kw_only=True):
    """Reject a draft proposal, with a reason."""

    proposal_id: str
    reason: StrictStr


class FalsifyProposal(_Model, frozen=True, kw_only=True):
    """Mark a draft proposal as contradicted by new data, with a reason."""

    proposal_id: str
    reason: StrictStr
    counter_evidence_event_ids: list[int] = []


class UseDecision(_Model, frozen=True, kw_only=True):
    """Record that a decision was used successfully (evidence and a hit for its stream)."""

    decision_id: str
    context: str | None = None
    note: str | None = None


class SetTrustBoundary(_Model, frozen=True, kw_only=True):
    """Set the trust boundary of a namespace, or of every namespace when ``namespace`` is None."""

    boundary: TrustBoundary
    namespace: str | None = None


class RegisterTargetAlias(_Model, frozen=True, kw_only=True):
    """Let ``alias`` name the target ``target`` (registered, or registered by this), in every namespace."""

    alias: TargetStr
    target: TargetStr


class Reflect(_Model, frozen=True, kw_only=True):
    """Run a reflection (LedgerMind's ReflectionEngine.run_cycle): review once every stream of
    ``namespace`` (every namespace when None) that has evidence new since its last review."""

    namespace: str | None = None


Command = (RecordDecision | SupersedeDecision | DraftProposal | AcceptProposal | RejectProposal
           | FalsifyProposal | UseDecision | SetTrustBoundary | RegisterTargetAlias | Reflect)

