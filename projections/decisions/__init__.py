"""Decisions: LedgerMind's decision streams as a projection over the log (seeds 000 and 001).

A decision is recorded once and never edited: its id is the id of the ``decision_recorded``
delta that recorded it, and its target, title and rationale never change. At most one decision
is active per (target, namespace), targets matched through the target registry (exact, alias,
case-insensitive); recording another needs a ``ResolutionIntent`` that names every conflicting
id and either supersedes them (``superseded_by`` on the old ones, ``supersedes`` on the new one,
in the one delta) or deprecates them. Proposals are drafted, then accepted (recording the
decision they suggest), rejected or falsified.

Where to find what (each module one responsibility, imported in this order):

| module | holds |
|---|---|
| ``model`` | the seed's enums, constrained strings and models (DecisionStream, ResolutionIntent ...) |
| ``events`` | the payloads, one past-tense event per kind, declared in the registry |
| ``targets`` | the target registry: which registered target a name names |
| ``state`` | the records, the active index, and ``evolve`` (the fold; checks nothing) |
| ``lifecycle`` | metrics, vitality, weekly decay, promote_stream (pure functions of a record and a time) |
| ``queries`` | reads: the seed's models for a record, the active decision, supersede chains |
| ``rules`` | every rule a delta must obey to enter the log, one function each; ``check`` |
| ``commands`` | the commands |
| ``decide`` | the deltas a command appends; ``DECIDER`` |
| ``results`` | MemoryDecision results; ``execute`` |
| ``search`` | the records each search mode may return, and their rank weights |

docs/decisions.md states every rule with its source in the seeds.
"""

from __future__ import annotations

from .commands import (
    AcceptProposal,
    Command,
    DraftProposal,
    FalsifyProposal,
    RecordDecision,
    Reflect,
    RegisterTargetAlias,
    RejectProposal,
    SetTrustBoundary,
    SupersedeDecision,
    UseDecision,
)
from .decide import DECIDER, PROJECTIONS, decide
from .events import (
    KINDS,
    DecisionRecorded,
    DecisionsReflected,
    DecisionUsed,
    ProposalAccepted,
    ProposalDrafted,
    ProposalFalsified,
    ProposalRejected,
    TargetAliasRegistered,
    TrustBoundarySet,
)
from .lifecycle import (
    ACTIVE_BELOW_DAYS,
    DORMANT_FROM_DAYS,
    INTERVENTION_CONFIDENCE,
    OBSERVATION_WINDOW_DAYS,
    PROMOTION_MOMENTUM,
    Lifecycle,
    Promotion,
    decay_weeks,
    estimated_removal_cost,
    estimated_utility,
    lifecycle,
    promote,
    promote_stream,
    promoted_confidence,
    review,
    stability_score,
    vitality_for,
)
from .model import (
    AcceptProposalRequest,
    DecisionContent,
    DecisionPhase,
    DecisionStream,
    DecisionVitality,
    MemoryDecision,
    PatternScope,
    ProceduralContent,
    ProceduralStep,
    ProposalContent,
    ProposalStatus,
    RecordDecisionRequest,
    ResolutionIntent,
    SearchDecisionsRequest,
    SearchResultItem,
    SupersedeDecisionRequest,
    TrustBoundary,
)
from .queries import (
    MAX_CHAIN,
    active_decision,
    active_decisions,
    decision,
    proposal,
    resolve_active_head,
    stream,
    trust_boundary,
)
from .results import execute, memory_decision
from .rules import CHECKS, check, check_batch
from .search import SearchCandidate, rank_weight, result_item, search_candidates
from .state import DecisionRecord, Evidence, ProposalRecord, State, evolve
from .targets import canonical_target, resolve_target

__all__ = [
    # seed enums and models
    "DecisionPhase", "DecisionVitality", "PatternScope", "ProposalStatus", "TrustBoundary",
    "ProceduralStep", "ProceduralContent", "DecisionContent", "ProposalContent", "DecisionStream",
    "ResolutionIntent", "MemoryDecision", "RecordDecisionRequest", "SupersedeDecisionRequest",
    "SearchDecisionsRequest", "AcceptProposalRequest", "SearchResultItem",
    # payloads
    "DecisionRecorded", "DecisionUsed", "ProposalDrafted", "ProposalAccepted", "ProposalRejected",
    "ProposalFalsified", "TrustBoundarySet", "TargetAliasRegistered", "DecisionsReflected", "KINDS",
    # target registry
    "resolve_target", "canonical_target",
    # state
    "Evidence", "DecisionRecord", "ProposalRecord", "State", "evolve",
    # rules
    "check", "check_batch", "CHECKS",
    # commands
    "RecordDecision", "SupersedeDecision", "DraftProposal", "AcceptProposal", "RejectProposal",
    "FalsifyProposal", "UseDecision", "SetTrustBoundary", "RegisterTargetAlias", "Reflect", "Command",
    "decide",
    "memory_decision", "execute",
    # lifecycle
    "OBSERVATION_WINDOW_DAYS", "ACTIVE_BELOW_DAYS", "DORMANT_FROM_DAYS", "PROMOTION_MOMENTUM",
    "INTERVENTION_CONFIDENCE", "Lifecycle", "Promotion", "stability_score", "estimated_removal_cost",
    "estimated_utility", "vitality_for", "decay_weeks", "promote", "promoted_confidence",
    "review", "promote_stream", "lifecycle",
    # queries
    "MAX_CHAIN", "stream", "decision", "proposal", "active_decision", "active_decisions",
    "trust_boundary", "resolve_active_head",
    # search
    "rank_weight", "SearchCandidate", "search_candidates", "result_item",
    "DECIDER", "PROJECTIONS",
]
