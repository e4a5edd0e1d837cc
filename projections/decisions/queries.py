"""Reads of the decisions state: the seed's models for a record, the active index, supersede chains."""

from __future__ import annotations

from datetime import datetime

import msgspec

from .lifecycle import lifecycle
from .model import DecisionContent, DecisionStream, ProposalContent, TrustBoundary
from .state import DecisionRecord, State
from .targets import canonical_target

__all__ = ["MAX_CHAIN", "stream", "decision", "proposal", "active_decision", "active_decisions",
           "trust_boundary", "resolve_active_head"]

MAX_CHAIN = 20  # a superseded_by chain of more than 20 records resolves to nothing


def stream(state: State, decision_id: str, as_of: datetime) -> DecisionStream | None:
    """The seed's DecisionStream for a decision, with its metrics as of ``as_of`` (None if unknown)."""
    rec = state.decisions.get(decision_id)
    if rec is None:
        return None
    m = lifecycle(rec, as_of)
    return DecisionStream(
        decision_id=rec.decision_id, target=rec.target, title=rec.title, rationale=rec.rationale,
        namespace=rec.namespace, scope=rec.scope, status=rec.status, phase=m.phase,
        vitality=m.vitality, provenance=rec.provenance, keywords=list(rec.keywords),
        evidence_event_ids=list(rec.evidence_event_ids), consequences=list(rec.consequences),
        superseded_by=rec.superseded_by, supersedes=list(rec.supersedes),
        attachments=[dict(a) for a in rec.attachments], procedural=rec.procedural,
        frequency=m.frequency, unique_contexts=m.unique_contexts, hit_count=m.hit_count,
        confidence=m.confidence, stability_score=m.stability_score,
        reinforcement_density=m.reinforcement_density, coverage=m.coverage,
        lifetime_days=m.lifetime_days, estimated_removal_cost=m.estimated_removal_cost,
        estimated_utility=m.estimated_utility, first_seen=m.first_seen, last_seen=m.last_seen,
    )


def decision(state: State, decision_id: str) -> DecisionContent | None:
    """The seed's DecisionContent of a recorded decision (None if unknown)."""
    rec = state.decisions.get(decision_id)
    if rec is None:
        return None
    return DecisionContent(
        title=rec.title, target=rec.target, rationale=rec.rationale, status=rec.status,
        namespace=rec.namespace, keywords=list(rec.keywords), evidence_event_ids=list(rec.evidence_event_ids),
        consequences=list(rec.consequences), supersedes=list(rec.supersedes),
        superseded_by=rec.superseded_by, attachments=[dict(a) for a in rec.attachments],
        procedural=rec.procedural,
    )


def proposal(state: State, proposal_id: str) -> ProposalContent | None:
    """The seed's ProposalContent of a proposal, with its current status (None if unknown)."""
    rec = state.proposals.get(proposal_id)
    if rec is None:
        return None
    return msgspec.structs.replace(rec.content, status=rec.status,
                                   miss_count=rec.content.miss_count + rec.miss_count,
                                   counter_evidence_event_ids=[*rec.content.counter_evidence_event_ids,
                                                               *rec.counter_evidence_event_ids])


def active_decision(state: State, target: str, namespace: str = "default") -> str | None:
    """The id of the active decision on (target, namespace), if any; ``target`` is matched
    through the target registry (exact, alias, case-insensitive)."""
    ids = active_decisions(state, target, namespace)
    return ids[-1] if ids else None


def active_decisions(state: State, target: str, namespace: str = "default") -> list[str]:
    """Every active decision on (target, namespace), oldest first (one unless hand-appended
    deltas from before the boundary checks left more)."""
    return list(state.active.get(namespace, {}).get(canonical_target(state, target), ()))


def trust_boundary(state: State, namespace: str) -> TrustBoundary:
    """The trust boundary in force for ``namespace``."""
    return state.boundaries.get(namespace, state.default_boundary)


def resolve_active_head(state: State, decision_id: str) -> DecisionRecord | None:
    """Follow superseded_by to the record that is active or has no successor.

    None when the id is unknown, a link dangles, the chain holds more than 20 records
    (MAX_CHAIN) or it loops.
    """
    seen: set[str] = set()
    current: str | None = decision_id
    while current is not None and len(seen) < MAX_CHAIN:
        rec = state.decisions.get(current)
        if rec is None or current in seen:
            return None
        if rec.status == "active" or not rec.superseded_by:
            return rec
        seen.add(current)
        current = rec.superseded_by
    return None

