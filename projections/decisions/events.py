"""The decisions projection's payloads: one past-tense event per kind, declared in the registry.

Importing this module declares the kinds (owner ``decisions``) in braidlog's registry, so every
append checks a payload against its Struct: the seed's field rules (title >= 1, target >= 3,
rationale >= 10 characters, confidence in [0, 1]) hold on every path a delta takes in.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

import braidlog

from .model import (
    Count,
    Ident,
    PatternScope,
    ProceduralContent,
    RationaleStr,
    StrictStr,
    TargetStr,
    TrustBoundary,
    Unit,
    UtcTime,
)

__all__ = [
    "DecisionRecorded", "DecisionUsed", "ProposalDrafted", "ProposalAccepted", "ProposalRejected",
    "ProposalFalsified", "TrustBoundarySet", "TargetAliasRegistered", "DecisionsReflected", "KINDS",
    "READ",
]

# NOTE: payload class names may be stored; never rename one, add a new one.

class DecisionRecorded(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A decision was recorded, active; it supersedes and deprecates the listed decisions."""

    decision_id: Ident
    title: StrictStr
    target: TargetStr
    rationale: RationaleStr
    namespace: str = "default"
    scope: PatternScope = PatternScope.LOCAL
    provenance: Literal["internal", "external"] = "internal"
    intervention: bool = False
    keywords: tuple[str, ...] = ()
    consequences: tuple[str, ...] = ()
    evidence_event_ids: tuple[int, ...] = ()
    attachments: tuple[dict[str, str], ...] = ()
    procedural: ProceduralContent | None = None
    supersedes: tuple[Ident, ...] = ()
    deprecates: tuple[Ident, ...] = ()
    resolution_rationale: str | None = None
    proposal_id: Ident | None = None


class DecisionUsed(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A decision was used successfully: evidence for its stream and one hit."""

    decision_id: Ident
    context: str | None = None
    note: str | None = None


class ProposalDrafted(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A proposal was written as a draft (its status is always draft here)."""

    proposal_id: Ident
    title: StrictStr
    target: TargetStr
    rationale: RationaleStr
    namespace: str = "default"
    confidence: Unit = 0.0
    keywords: tuple[str, ...] = ()
    strengths: tuple[str, ...] = ()
    objections: tuple[str, ...] = ()
    counter_patterns: tuple[str, ...] = ()
    alternative_ids: tuple[str, ...] = ()
    evidence_event_ids: tuple[int, ...] = ()
    counter_evidence_event_ids: tuple[int, ...] = ()
    suggested_consequences: tuple[str, ...] = ()
    suggested_supersedes: tuple[Ident, ...] = ()
    procedural: ProceduralContent | None = None
    first_observed_at: UtcTime | None = None
    last_observed_at: UtcTime | None = None
    hit_count: Count = 0
    miss_count: Count = 0
    ready_for_review: bool = False


class ProposalAccepted(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A draft proposal was accepted and became the decision ``decision_id``."""

    proposal_id: Ident
    decision_id: Ident


class ProposalRejected(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A draft proposal was rejected, with a reason."""

    proposal_id: Ident
    reason: StrictStr


class ProposalFalsified(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A draft proposal was contradicted by new data; it stays, marked falsified."""

    proposal_id: Ident
    reason: StrictStr
    counter_evidence_event_ids: tuple[int, ...] = ()


class TrustBoundarySet(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """The trust boundary of one namespace (or of every namespace, when None) was set."""

    boundary: TrustBoundary
    namespace: str | None = None


class TargetAliasRegistered(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``alias`` names the registered target ``target`` from now on, in every namespace."""

    alias: TargetStr
    target: TargetStr


class DecisionsReflected(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A reflection ran (LedgerMind's ReflectionEngine.run_cycle): every stream of ``namespace``
    (of every namespace, when None) with evidence new since the last reflection is reviewed
    once, as of this delta's time, over that batch."""

    namespace: str | None = None


def _refers_recorded(p: DecisionRecorded) -> list[str]:
    return [p.decision_id, *p.supersedes, *p.deprecates, *([p.proposal_id] if p.proposal_id else [])]


def _refers_drafted(p: ProposalDrafted) -> list[str]:
    return [p.proposal_id, *p.suggested_supersedes]


braidlog.declare("decision_recorded", DecisionRecorded, owner="decisions", refers=_refers_recorded)
braidlog.declare("decision_used", DecisionUsed, owner="decisions", refers=lambda p: [p.decision_id])
braidlog.declare("proposal_drafted", ProposalDrafted, owner="decisions", refers=_refers_drafted)
braidlog.declare("proposal_accepted", ProposalAccepted, owner="decisions",
                 refers=lambda p: [p.proposal_id, p.decision_id])
braidlog.declare("proposal_rejected", ProposalRejected, owner="decisions", refers=lambda p: [p.proposal_id])
braidlog.declare("proposal_falsified", ProposalFalsified, owner="decisions", refers=lambda p: [p.proposal_id])
braidlog.declare("trust_boundary_set", TrustBoundarySet, owner="decisions")
braidlog.declare("target_alias_registered", TargetAliasRegistered, owner="decisions")
braidlog.declare("decisions_reflected", DecisionsReflected, owner="decisions")

KINDS = frozenset({"decision_recorded", "decision_used", "proposal_drafted", "proposal_accepted",
                   "proposal_rejected", "proposal_falsified", "trust_boundary_set",
                   "target_alias_registered", "decisions_reflected"})
#: kind -> read(delta): its payload as the kind's Struct, as braidlog.typed gives it
READ = {kind: braidlog.REGISTRY[kind].reader() for kind in KINDS}
