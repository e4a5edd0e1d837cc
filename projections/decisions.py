"""Decisions: LedgerMind's decision streams as a projection over the log (seeds 000 and 001).

A decision is recorded once and never edited: its id is the id of the ``decision_recorded``
delta that recorded it, and its target, title and rationale never change. At most one decision
is active per (target, namespace); recording another needs a ``ResolutionIntent`` that names
every conflicting id and either supersedes them (``superseded_by`` on the old ones, ``supersedes``
on the new one, in the one delta) or deprecates them. Proposals are drafted, then accepted
(recording the decision they suggest), rejected or falsified.

Evidence for a decision stream is every delta that cites the decision's id in ``refs.deltas``
(any kind, from any braid), plus ``decision_used`` deltas, which also count as hits. The
lifecycle metrics (frequency, stability, phase, vitality ...) are pure functions of a decision's
record and an explicit ``as_of`` time; nothing here reads the wall clock.

docs/decisions.md maps the seed's models to kinds and payloads and records every choice made
where the seeds are silent.
"""

from __future__ import annotations

import contextvars
import enum
import statistics
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

import braidlog
from braidlog import (
    BraidlogError, Context, Decider, GenericDelta, Provenance, Rejected, Refs, ValidationError,
)


__all__ = [
    # seed enums and models
    "DecisionPhase", "DecisionVitality", "PatternScope", "ProposalStatus", "TrustBoundary",
    "ProceduralStep", "ProceduralContent", "DecisionContent", "ProposalContent", "DecisionStream",
    "ResolutionIntent", "MemoryDecision", "RecordDecisionRequest", "SupersedeDecisionRequest",
    "SearchDecisionsRequest", "AcceptProposalRequest", "SearchResultItem",
    # payloads
    "DecisionRecorded", "DecisionUsed", "ProposalDrafted", "ProposalAccepted", "ProposalRejected",
    "ProposalFalsified", "TrustBoundarySet", "KINDS",
    # state
    "Evidence", "DecisionRecord", "ProposalRecord", "State", "evolve",
    # commands
    "RecordDecision", "SupersedeDecision", "DraftProposal", "AcceptProposal", "RejectProposal",
    "FalsifyProposal", "UseDecision", "SetTrustBoundary", "decide",
    "memory_decision", "execute",
    # queries
    "OBSERVATION_WINDOW_DAYS", "MAX_CHAIN", "Lifecycle", "stability_score", "estimated_removal_cost",
    "estimated_utility", "vitality_for", "decay_weeks", "promote", "lifecycle", "stream",
    "decision", "proposal", "active_decision", "trust_boundary", "resolve_active_head",
    "rank_weight", "SearchCandidate", "search_candidates", "result_item",
    "DECIDER", "PROJECTIONS",
]

OBSERVATION_WINDOW_DAYS = 30.0  # coverage = lifetime / 30 days (LifecycleEngine's window)
ACTIVE_BELOW_DAYS = 7.0         # ACTIVE: last used less than 7 days ago
DORMANT_AFTER_DAYS = 30.0       # DECAYING: 7..30 days; DORMANT: more than 30 days
DECAYING_WEEKLY = 0.05          # confidence lost per idle week while DECAYING
DORMANT_WEEKLY = 0.2            # confidence lost per idle week while DORMANT
MAX_CHAIN = 20                  # a superseded_by chain of more than 20 records resolves to nothing
INTERVENTION_CONFIDENCE = 0.7
INTERVENTION_REMOVAL_COST = 0.8
INTERVENTION_UTILITY = 0.5
HUMAN = "user"                  # the one provenance kind that counts as a human

PHASE_WEIGHTS = {"canonical": 1.5, "emergent": 1.2, "pattern": 1.0}
VITALITY_WEIGHTS = {"active": 1.0, "decaying": 0.5, "dormant": 0.2}
KIND_WEIGHTS = {"decision": 1.35, "proposal": 1.0}
STATUS_WEIGHTS = {"rejected": 0.2, "falsified": 0.2, "superseded": 0.3, "deprecated": 0.3}


# ------------------------------------------------------------------------------ seed enums

class DecisionPhase(str, enum.Enum):
    """How mature a stream is: PATTERN -> EMERGENT -> CANONICAL."""

    PATTERN = "pattern"
    EMERGENT = "emergent"
    CANONICAL = "canonical"


class DecisionVitality(str, enum.Enum):
    """How recently a stream was used: ACTIVE (< 7 days), DECAYING (7-30), DORMANT (> 30)."""

    ACTIVE = "active"
    DECAYING = "decaying"
    DORMANT = "dormant"


class PatternScope(str, enum.Enum):
    """What a decision affects: one component, several, or the infrastructure."""

    LOCAL = "local"
    SYSTEM = "system"
    INFRA = "infra"


class ProposalStatus(str, enum.Enum):
    """A proposal's status: DRAFT -> ACCEPTED or REJECTED or FALSIFIED."""

    DRAFT = "draft"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    FALSIFIED = "falsified"


class TrustBoundary(str, enum.Enum):
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
UtcTime = Annotated[datetime, Meta(tz=True)]
Ulid = Annotated[str, Meta(pattern="^[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
Ident = Annotated[str, Meta(min_length=1, max_length=120)]
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


class _Model(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
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


# ---------------------------------------------------------------------------------- payloads
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

KINDS = frozenset({"decision_recorded", "decision_used", "proposal_drafted", "proposal_accepted",
                   "proposal_rejected", "proposal_falsified", "trust_boundary_set"})
#: kind -> read(delta): its payload as the kind's Struct, as braidlog.typed gives it
_READ = {kind: braidlog.REGISTRY[kind].reader() for kind in KINDS}


# ------------------------------------------------------------------------------------- state

class Evidence(Struct, array_like=True):
    """One delta citing a stream: its id, time, context key and whether it was a hit."""

    delta_id: str
    ts: datetime
    context: str
    hit: bool


# gc=False: a state is a tree (no record refers back to what holds it), so no record can be in
# a reference cycle, and the cyclic collector need not track the many a replay allocates.
class DecisionRecord(Struct, gc=False):
    """A recorded decision: its immutable content, its links, and the evidence citing it."""

    decision_id: str
    title: str
    target: str
    rationale: str
    namespace: str
    scope: PatternScope
    provenance: str
    intervention: bool
    keywords: list[str]
    consequences: list[str]
    evidence_event_ids: list[int]
    attachments: list[dict[str, str]]
    procedural: ProceduralContent | None
    confidence: float
    recorded_at: datetime
    recorded_by: Provenance
    status: str = "active"
    superseded_by: str | None = None
    deprecated_by: str | None = None
    supersedes: list[str] = []
    deprecates: list[str] = []
    resolution_rationale: str | None = None
    proposal_id: str | None = None
    evidence: list[Evidence] = []


class ProposalRecord(Struct, kw_only=True, gc=False):
    """A proposal: its drafted content and where it went."""

    proposal_id: str
    content: ProposalContent
    drafted_at: datetime
    drafted_by: Provenance
    status: ProposalStatus = ProposalStatus.DRAFT
    decision_id: str | None = None
    reason: str | None = None
    closed_at: datetime | None = None
    miss_count: int = 0
    counter_evidence_event_ids: list[int] = []


class State(Struct, kw_only=True):
    """Every decision and proposal by id, the active index, and the trust boundaries."""

    decisions: dict[str, DecisionRecord] = {}
    proposals: dict[str, ProposalRecord] = {}
    active: dict[str, dict[str, list[str]]] = {}
    boundaries: dict[str, TrustBoundary] = {}
    default_boundary: TrustBoundary = TrustBoundary.AGENT_WITH_INTENT
    last_ts: datetime | None = None


def _context_key(d: GenericDelta, p: DecisionUsed | None) -> str:
    """The context an evidence delta was seen in: its payload's, episode's, knot's or braid's."""
    if p is not None and p.context:
        return p.context
    prov = d.provenance
    return prov.episode_id or prov.knot_id or d.braid_id


def _cite(state: State, d: GenericDelta, ids: Iterable[str], used: DecisionUsed | None) -> None:
    seen: set[str] = set()
    for did in ids:
        rec = state.decisions.get(did)
        if rec is None or did in seen:
            continue
        seen.add(did)
        rec.evidence.append(Evidence(d.id, d.ts, _context_key(d, used), used is not None))


def _deactivate(state: State, rec: DecisionRecord) -> None:
    ids = state.active.get(rec.namespace, {}).get(rec.target)
    if ids and rec.decision_id in ids:
        ids.remove(rec.decision_id)
        if not ids:
            del state.active[rec.namespace][rec.target]


def _recorded(state: State, d: GenericDelta, p: DecisionRecorded) -> None:
    did = p.decision_id
    if did in state.decisions:
        return  # a decision is recorded once; its content never changes
    superseded, deprecated = [], []
    for sid in p.supersedes:
        old = state.decisions.get(sid)
        if old is not None and old.status == "active":
            old.status, old.superseded_by = "superseded", did
            _deactivate(state, old)
            superseded.append(sid)
    for sid in p.deprecates:
        old = state.decisions.get(sid)
        if old is not None and old.status == "active":
            old.status, old.deprecated_by = "deprecated", did
            _deactivate(state, old)
            deprecated.append(sid)
    # Positional, in field order: msgspec takes 23 arguments this way ~3x faster than by keyword.
    state.decisions[did] = DecisionRecord(
        did, p.title, p.target, p.rationale, p.namespace,
        p.scope, p.provenance, p.intervention,  # scope: msgspec already typed it a PatternScope
        list(p.keywords), list(p.consequences), list(p.evidence_event_ids),
        [dict(a) for a in p.attachments] if p.attachments else [], p.procedural,
        d.confidence, d.ts, d.provenance,  # confidence, recorded_at, recorded_by
        "active", None, None,  # status, superseded_by, deprecated_by
        superseded, deprecated, p.resolution_rationale, p.proposal_id, [])  # ..., evidence
    by_target = state.active.get(p.namespace)
    if by_target is None:
        by_target = state.active[p.namespace] = {}
    ids = by_target.get(p.target)
    if ids is None:
        by_target[p.target] = [did]
    else:
        ids.append(did)


def _used(state: State, d: GenericDelta, p: DecisionUsed) -> None:
    _cite(state, d, (p.decision_id, *(d.refs.deltas if d.refs is not None else ())), p)


def _drafted(state: State, d: GenericDelta, p: ProposalDrafted) -> None:
    if p.proposal_id in state.proposals:
        return
    fields = msgspec.structs.asdict(p)
    del fields["proposal_id"]
    content = msgspec.convert(msgspec.to_builtins(fields), ProposalContent)
    state.proposals[p.proposal_id] = ProposalRecord(
        proposal_id=p.proposal_id, content=content, drafted_at=d.ts, drafted_by=d.provenance)


def _closed(state: State, d: GenericDelta, pid: str, status: ProposalStatus) -> ProposalRecord | None:
    rec = state.proposals.get(pid)
    if rec is None or rec.status != ProposalStatus.DRAFT:
        return None  # only a draft moves, and only once
    rec.status, rec.closed_at = status, d.ts
    return rec


def _accepted(state: State, d: GenericDelta, p: ProposalAccepted) -> None:
    rec = _closed(state, d, p.proposal_id, ProposalStatus.ACCEPTED)
    if rec is not None:
        rec.decision_id = p.decision_id


def _rejected(state: State, d: GenericDelta, p: ProposalRejected) -> None:
    rec = _closed(state, d, p.proposal_id, ProposalStatus.REJECTED)
    if rec is not None:
        rec.reason = p.reason


def _falsified(state: State, d: GenericDelta, p: ProposalFalsified) -> None:
    rec = _closed(state, d, p.proposal_id, ProposalStatus.FALSIFIED)
    if rec is not None:
        rec.reason = p.reason
        rec.miss_count += 1
        rec.counter_evidence_event_ids.extend(p.counter_evidence_event_ids)


def _boundary_set(state: State, d: GenericDelta, p: TrustBoundarySet) -> None:
    if p.namespace is None:
        state.default_boundary = TrustBoundary(p.boundary)
    else:
        state.boundaries[p.namespace] = TrustBoundary(p.boundary)


#: kind -> (read its payload, apply it): built once, so evolve does one lookup per delta
_APPLY = {kind: (_READ[kind], apply) for kind, apply in {
    "decision_recorded": _recorded, "decision_used": _used, "proposal_drafted": _drafted,
    "proposal_accepted": _accepted, "proposal_rejected": _rejected,
    "proposal_falsified": _falsified, "trust_boundary_set": _boundary_set,
}.items()}


def evolve(state: State, d: GenericDelta) -> State:
    """Apply one delta in place: this module's kinds change records; any delta may cite one."""
    ts = d.ts
    if state.last_ts is None or ts > state.last_ts:
        state.last_ts = ts
    kind = d.kind
    if kind not in _APPLY:  # most deltas: an `in` test is cheaper than a .get() call
        refs = d.refs
        if refs is not None and refs.deltas and state.decisions:
            _cite(state, d, refs.deltas, None)
        return state
    read, apply = _APPLY[kind]
    try:
        p = read(d)
    except (BraidlogError, msgspec.ValidationError):
        return state  # not a payload of this schema: a fact this projection cannot read
    apply(state, d, p)
    return state


# ---------------------------------------------------------------------------------- commands

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


Command = (RecordDecision | SupersedeDecision | DraftProposal | AcceptProposal | RejectProposal
           | FalsifyProposal | UseDecision | SetTrustBoundary)


# ------------------------------------------------------------------------------------ decide

def trust_boundary(state: State, namespace: str) -> TrustBoundary:
    """The trust boundary in force for ``namespace``."""
    return state.boundaries.get(namespace, state.default_boundary)


def _guard(state: State, ctx: Context, namespace: str, operation: str) -> None:
    """Refuse an agent-sourced operation where the namespace is HUMAN_ONLY."""
    if ctx.provenance.kind != HUMAN and trust_boundary(state, namespace) is TrustBoundary.HUMAN_ONLY:
        raise Rejected(f"trust boundary: namespace {namespace!r} is HUMAN_ONLY, so {operation} needs "
                       f"provenance 'user', not {ctx.provenance.kind!r}; ask a human to do it")


def _payload(struct: Struct) -> dict[str, Any]:
    return msgspec.to_builtins(struct)


def _delta(ctx: Context, kind: str, payload: Struct, *, id: str | None = None,
           confidence: float | None = None, refs: Refs | None = None) -> GenericDelta:
    d = ctx.delta(kind, _payload(payload), confidence=confidence, refs=refs)
    return msgspec.structs.replace(d, id=id) if id is not None and id != d.id else d


def _ids(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _check_targets(state: State, ids: Sequence[str], namespace: str, verb: str) -> None:
    """Every decision an intent names must exist, be active and share the namespace."""
    for did in ids:
        old = state.decisions.get(did)
        if old is None:
            raise Rejected(f"cannot {verb} {did!r}: unknown decision; name a recorded, active decision")
        if old.status != "active":
            by = old.superseded_by or old.deprecated_by
            raise Rejected(f"cannot {verb} {did!r}: it is {old.status}"
                           + (f" (by {by!r})" if by else "") + ", not active")
        if old.namespace != namespace:
            raise Rejected(f"cannot {verb} {did!r}: it is in namespace {old.namespace!r}, "
                           f"not {namespace!r}")


def _record(state: State, ctx: Context, c: _DecisionFields, *, title: str, target: str,
            rationale: str, supersede: Sequence[str], deprecate: Sequence[str],
            resolution_rationale: str | None, intent_given: bool, proposal_id: str | None = None,
            confidence: float | None = None) -> GenericDelta | None:
    """The decision_recorded delta for a decision, None when it is already recorded."""
    ns = c.namespace
    supersede, deprecate = _ids(supersede), _ids(deprecate)
    both = set(supersede) & set(deprecate)
    if both:
        raise Rejected(f"decisions {sorted(both)} cannot be both superseded and deprecated; pick one")
    if c.intervention and c.confidence is not None:
        raise ValidationError("confidence", f"an intervention sets confidence {INTERVENTION_CONFIDENCE}; "
                                            "leave confidence unset")
    if c.decision_id is not None and (c.decision_id in state.decisions or c.decision_id in state.proposals):
        rec = state.decisions.get(c.decision_id)
        if (rec is not None and (rec.title, rec.target, rec.rationale, rec.namespace) == (title, target, rationale, ns)
                and set(supersede) <= set(rec.supersedes) and set(deprecate) <= set(rec.deprecates)
                and rec.proposal_id == proposal_id):
            return None
        raise Rejected(f"decision_id {c.decision_id!r} is already taken by other content; use a new id")
    conflicts = list(state.active.get(ns, {}).get(target, ()))
    if c.decision_id is None:
        for did in conflicts:
            rec = state.decisions[did]
            if ((rec.title, rec.rationale) == (title, rationale) and rec.proposal_id == proposal_id
                    and set(supersede) <= set(rec.supersedes) and set(deprecate) <= set(rec.deprecates)):
                return None  # this very decision is already the active one
    _check_targets(state, supersede, ns, "supersede")
    _check_targets(state, deprecate, ns, "deprecate")
    resolved = set(supersede) | set(deprecate)
    if conflicts and not intent_given:
        raise Rejected(f"CONFLICT: target {target!r} in namespace {ns!r} has the active decision(s) "
                       f"{conflicts}; a ResolutionIntent is required (supersede or deprecate naming "
                       "every conflicting id)")
    missing = [did for did in conflicts if did not in resolved]
    if missing:
        raise Rejected(f"CONFLICT: the ResolutionIntent does not cover the active decision(s) "
                       f"{missing} on target {target!r} in namespace {ns!r}; a ResolutionIntent is "
                       "required that names every conflicting id")
    decision_id = c.decision_id or ctx.new_id()
    if c.intervention:
        confidence = INTERVENTION_CONFIDENCE
    elif c.confidence is not None:
        confidence = c.confidence
    payload = DecisionRecorded(
        decision_id=decision_id, title=title, target=target, rationale=rationale, namespace=ns,
        scope=c.scope, provenance=c.provenance, intervention=c.intervention,
        keywords=tuple(c.keywords), consequences=tuple(c.consequences),
        evidence_event_ids=tuple(c.evidence_event_ids), attachments=tuple(c.attachments),
        procedural=c.procedural, supersedes=tuple(supersede), deprecates=tuple(deprecate),
        resolution_rationale=resolution_rationale, proposal_id=proposal_id,
    )
    return _delta(ctx, "decision_recorded", payload, id=decision_id, confidence=confidence)


def _intent_ids(intent: ResolutionIntent | None) -> tuple[list[str], list[str]]:
    if intent is None or intent.resolution_type == "abort":
        return [], []
    if intent.resolution_type == "supersede":
        return list(intent.target_decision_ids), []
    return [], list(intent.target_decision_ids)


def _decide_record(c: RecordDecision, state: State, ctx: Context) -> list[GenericDelta]:
    _guard(state, ctx, c.namespace, "recording a decision")
    if c.intent is not None and c.intent.resolution_type == "abort":
        return []  # abort: nothing changes
    supersede, deprecate = _intent_ids(c.intent)
    d = _record(state, ctx, c, title=c.title, target=c.target, rationale=c.rationale,
                supersede=supersede, deprecate=deprecate, intent_given=c.intent is not None,
                resolution_rationale=c.intent.rationale if c.intent is not None else None)
    return [] if d is None else [d]


def _decide_supersede(c: SupersedeDecision, state: State, ctx: Context) -> list[GenericDelta]:
    _guard(state, ctx, c.namespace, "superseding a decision")
    d = _record(state, ctx, c, title=c.title, target=c.target, rationale=c.rationale,
                supersede=c.old_decision_ids, deprecate=(), intent_given=True,
                resolution_rationale=c.rationale)
    return [] if d is None else [d]


def _decide_draft(c: DraftProposal, state: State, ctx: Context) -> list[GenericDelta]:
    p = c.proposal
    _guard(state, ctx, p.namespace, "drafting a proposal")
    if p.status is not ProposalStatus.DRAFT:
        raise ValidationError("proposal.status", f"a proposal is written as draft, not {p.status!r}; "
                                                 "accept, reject or falsify it afterwards")
    fields = msgspec.structs.asdict(p)
    del fields["status"]
    fields["first_observed_at"] = p.first_observed_at or ctx.now
    fields["last_observed_at"] = p.last_observed_at or fields["first_observed_at"]
    key = (p.namespace, p.target, p.title, p.rationale)
    if c.proposal_id is not None and (c.proposal_id in state.proposals or c.proposal_id in state.decisions):
        old = state.proposals.get(c.proposal_id)
        if old is not None and _same_proposal(old.content, p):
            return []
        raise Rejected(f"proposal_id {c.proposal_id!r} is already taken by other content; use a new id")
    if c.proposal_id is None:
        for old in state.proposals.values():
            o = old.content
            if old.status is ProposalStatus.DRAFT and (o.namespace, o.target, o.title, o.rationale) == key:
                return []  # the same draft is already waiting for review
    proposal_id = c.proposal_id or ctx.new_id()
    payload = msgspec.convert({"proposal_id": proposal_id, **msgspec.to_builtins(fields)}, ProposalDrafted)
    return [_delta(ctx, "proposal_drafted", payload, id=proposal_id)]


def _same_proposal(a: ProposalContent, b: ProposalContent) -> bool:
    skip = {"status", "first_observed_at", "last_observed_at"}
    da, db = msgspec.structs.asdict(a), msgspec.structs.asdict(b)
    return all(da[k] == db[k] for k in da if k not in skip)


def _draft(state: State, proposal_id: str, verb: str) -> ProposalRecord:
    rec = state.proposals.get(proposal_id)
    if rec is None:
        raise Rejected(f"cannot {verb} proposal {proposal_id!r}: no such proposal; draft it first")
    return rec


def _not_draft(rec: ProposalRecord, verb: str) -> Rejected:
    became = f" as decision {rec.decision_id!r}" if rec.decision_id else ""
    return Rejected(f"cannot {verb} proposal {rec.proposal_id!r}: it is {rec.status.value}{became}; "
                    "only a draft proposal can be accepted, rejected or falsified")


def _decide_accept(c: AcceptProposal, state: State, ctx: Context) -> list[GenericDelta]:
    rec = _draft(state, c.proposal_id, "accept")
    p = rec.content
    _guard(state, ctx, p.namespace, "accepting a proposal")
    if rec.status is not ProposalStatus.DRAFT:
        raise _not_draft(rec, "accept")
    if c.intent is not None and c.intent.resolution_type == "abort":
        return []
    more_supersede, deprecate = _intent_ids(c.intent)
    fields = _DecisionFields(
        namespace=p.namespace, consequences=p.suggested_consequences, keywords=p.keywords,
        evidence_event_ids=p.evidence_event_ids, procedural=p.procedural, decision_id=c.decision_id)
    d = _record(state, ctx, fields, title=p.title, target=p.target, rationale=p.rationale,
                supersede=[*p.suggested_supersedes, *more_supersede], deprecate=deprecate,
                intent_given=True, proposal_id=rec.proposal_id, confidence=p.confidence,
                resolution_rationale=(c.intent.rationale if c.intent is not None
                                      else f"accepted proposal {rec.proposal_id}"))
    if d is None:  # pragma: no cover - a draft's decision cannot exist yet
        return []
    decision_id = d.payload["decision_id"]
    accepted = ProposalAccepted(proposal_id=rec.proposal_id, decision_id=decision_id)
    return [d, _delta(ctx, "proposal_accepted", accepted)]


def _decide_close(c: RejectProposal | FalsifyProposal, state: State, ctx: Context) -> list[GenericDelta]:
    falsify = isinstance(c, FalsifyProposal)
    verb = "falsify" if falsify else "reject"
    rec = _draft(state, c.proposal_id, verb)
    _guard(state, ctx, rec.content.namespace, f"{'falsifying' if falsify else 'rejecting'} a proposal")
    target = ProposalStatus.FALSIFIED if falsify else ProposalStatus.REJECTED
    if rec.status is target and rec.reason == c.reason:
        return []  # already done
    if rec.status is not ProposalStatus.DRAFT:
        raise _not_draft(rec, verb)
    if falsify:
        payload: Struct = ProposalFalsified(proposal_id=rec.proposal_id, reason=c.reason,
                                            counter_evidence_event_ids=tuple(c.counter_evidence_event_ids))
        return [_delta(ctx, "proposal_falsified", payload)]
    return [_delta(ctx, "proposal_rejected", ProposalRejected(proposal_id=rec.proposal_id, reason=c.reason))]


def _decide_use(c: UseDecision, state: State, ctx: Context) -> list[GenericDelta]:
    if c.decision_id not in state.decisions:
        raise Rejected(f"cannot use decision {c.decision_id!r}: unknown decision")
    payload = DecisionUsed(decision_id=c.decision_id, context=c.context, note=c.note)
    return [_delta(ctx, "decision_used", payload, refs=Refs(deltas=(c.decision_id,)))]


def _decide_boundary(c: SetTrustBoundary, state: State, ctx: Context) -> list[GenericDelta]:
    if ctx.provenance.kind != HUMAN:
        raise Rejected(f"trust boundary: only a human (provenance 'user') may set it, "
                       f"not {ctx.provenance.kind!r}")
    current = state.default_boundary if c.namespace is None else state.boundaries.get(c.namespace)
    if current == c.boundary:
        return []
    return [_delta(ctx, "trust_boundary_set", TrustBoundarySet(boundary=c.boundary, namespace=c.namespace))]


_HANDLERS = {
    RecordDecision: _decide_record, SupersedeDecision: _decide_supersede,
    DraftProposal: _decide_draft, AcceptProposal: _decide_accept,
    RejectProposal: _decide_close, FalsifyProposal: _decide_close,
    UseDecision: _decide_use, SetTrustBoundary: _decide_boundary,
}


def decide(command: Command, state: State, ctx: Context) -> list[GenericDelta]:
    """The deltas a command appends ([] when already done); Rejected or ValidationError to refuse."""
    handler = _HANDLERS.get(type(command))
    if handler is None:
        names = ", ".join(c.__name__ for c in _HANDLERS)
        raise ValidationError("command", f"{type(command).__name__} is not a decisions command; "
                                         f"use one of {names}")
    return handler(command, state, ctx)


# ---------------------------------------------------------------------- MemoryDecision results

_PRIORITY = {"decision_recorded": 5, "proposal_accepted": 5, "proposal_drafted": 3,
             "proposal_rejected": 3, "proposal_falsified": 3, "trust_boundary_set": 5,
             "decision_used": 1}


def memory_decision(command: Command, outcome: Sequence[Any] | BaseException) -> MemoryDecision:
    """The MemoryDecision of an operation: from the deltas (or records) it wrote, or its refusal."""
    if isinstance(outcome, BaseException):
        return MemoryDecision(should_persist=False, store_type="none", reason=str(outcome),
                              metadata={"delta_ids": [], "error": type(outcome).__name__})
    deltas = [getattr(x, "delta", x) for x in outcome]
    if not deltas:
        intent = getattr(command, "intent", None)
        if intent is not None and intent.resolution_type == "abort":
            reason = f"ABORTED: the ResolutionIntent is abort; nothing changed ({intent.rationale})"
        else:
            reason = f"already done: {type(command).__name__} changes nothing"
        return MemoryDecision(should_persist=False, store_type="none", reason=reason,
                              metadata={"delta_ids": []})
    meta: dict[str, Any] = {"delta_ids": [d.id for d in deltas]}
    reasons = []
    for d in deltas:
        p = d.payload
        if d.kind == "decision_recorded":
            meta["decision_id"] = p["decision_id"]
            sup, dep = p.get("supersedes", []), p.get("deprecates", [])
            if sup:
                meta["superseded"] = list(sup)
            if dep:
                meta["deprecated"] = list(dep)
            reasons.append("Decision recorded" + (f"; superseded {list(sup)}" if sup else "")
                           + (f"; deprecated {list(dep)}" if dep else ""))
        elif d.kind == "proposal_accepted":
            meta["proposal_id"] = p["proposal_id"]
            reasons.append(f"Proposal accepted as decision {p['decision_id']}")
        elif d.kind == "decision_used":
            meta["decision_id"] = p["decision_id"]
            reasons.append("Decision use recorded")
        elif d.kind == "trust_boundary_set":
            reasons.append(f"Trust boundary set to {p['boundary']}")
        else:
            meta["proposal_id"] = p["proposal_id"]
            reasons.append({"proposal_drafted": "Proposal drafted", "proposal_rejected": "Proposal rejected",
                            "proposal_falsified": "Proposal falsified"}[d.kind])
    episodic = all(d.kind == "decision_used" for d in deltas)
    return MemoryDecision(should_persist=True, store_type="episodic" if episodic else "semantic",
                          reason="; ".join(reasons), priority=max(_PRIORITY[d.kind] for d in deltas),
                          metadata=meta)


def execute(braid: Any, command: Command, *, braid_id: str, provenance: Provenance | str = "system",
            now: datetime | None = None, confidence: float = 1.0) -> MemoryDecision:
    """Run a command on a braid and return its MemoryDecision (a refusal appends nothing)."""
    if DECIDER.name not in braid.projections:
        raise ValidationError("braid", "has no decisions projection; open it with "
                                       "projections=projections.decisions.PROJECTIONS (or the defaults)")
    try:
        records = braid.execute(DECIDER, command, braid_id=braid_id, provenance=provenance, now=now,
                                confidence=confidence)
    except (Rejected, ValidationError) as e:
        return memory_decision(command, e)
    return memory_decision(command, records)


# ----------------------------------------------------------------------------------- queries

DAY_SECONDS = 86400.0


def _days(start: datetime, stop: datetime) -> float:
    return (stop - start).total_seconds() / DAY_SECONDS


def _check_time(as_of: datetime) -> None:
    if not isinstance(as_of, datetime) or as_of.tzinfo is None:
        raise ValidationError("as_of", "must be a timezone-aware datetime (the time the metrics are for)")


def stability_score(dates: Sequence[datetime], lifetime_days: float) -> float:
    """1 - var(intervals in days) / (lifetime + 1), floored at 0; 0.3 with two dates, 0 with fewer."""
    if len(dates) < 2:
        return 0.0
    if len(dates) == 2:
        return 0.3
    ordered = sorted(dates)
    intervals = [_days(a, b) for a, b in zip(ordered, ordered[1:])]
    return max(0.0, 1.0 - statistics.variance(intervals) / (lifetime_days + 1.0))


def estimated_removal_cost(*, scope: PatternScope | str, consequences: int, unique_contexts: int,
                           provenance: str, hit_count: int, confidence: float) -> float:
    """The seed's removal cost: scope, consequences, contexts, external provenance, hits, confidence."""
    score = {"infra": 0.5, "system": 0.3}.get(PatternScope(scope).value, 0.0)
    score += min(0.05 * consequences, 0.2)
    score += min(0.05 * unique_contexts, 0.3)
    if provenance == "external":
        score += 0.4
    score += min(hit_count / 100.0, 0.2)
    score += 0.1 * confidence
    return min(score, 1.0)


def estimated_utility(*, frequency: int, unique_contexts: int, scope: PatternScope | str) -> float:
    """The seed's utility: min(f/10, 0.4) + min(contexts/5, 0.3) + 0.2 for SYSTEM or INFRA, capped at 1."""
    score = min(frequency / 10.0, 0.4) + min(unique_contexts / 5.0, 0.3)
    if PatternScope(scope) in (PatternScope.SYSTEM, PatternScope.INFRA):
        score += 0.2
    return min(score, 1.0)


def vitality_for(days_idle: float) -> DecisionVitality:
    """ACTIVE under 7 days since last use, DECAYING from 7 to 30 days, DORMANT after 30."""
    if days_idle < ACTIVE_BELOW_DAYS:
        return DecisionVitality.ACTIVE
    if days_idle <= DORMANT_AFTER_DAYS:
        return DecisionVitality.DECAYING
    return DecisionVitality.DORMANT


def decay_weeks(days_idle: float) -> tuple[int, int]:
    """Completed idle weeks charged at the DECAYING rate and at the DORMANT rate.

    Week k ends at day 7k and costs the rate of the band the stream is in then: 0.05 while
    7k <= 30 (weeks 1-4), 0.2 after (week 5 on).
    """
    weeks = int(max(days_idle, 0.0) // 7)
    decaying = min(weeks, int(DORMANT_AFTER_DAYS // 7))
    return decaying, weeks - decaying


def promote(phase: DecisionPhase, *, frequency: int, confidence: float, lifetime_days: float,
            coverage: float, stability: float, removal_cost: float,
            vitality: DecisionVitality) -> DecisionPhase:
    """The seed's transitions: PATTERN -> EMERGENT -> CANONICAL (never back)."""
    if (phase is DecisionPhase.PATTERN and (frequency >= 3 or confidence >= 0.5)
            and (lifetime_days > 0.5 or frequency >= 5)):
        phase = DecisionPhase.EMERGENT
    if (phase is DecisionPhase.EMERGENT and coverage > 0.3 and stability > 0.6
            and removal_cost > 0.5 and vitality is DecisionVitality.ACTIVE):
        phase = DecisionPhase.CANONICAL
    return phase


class Lifecycle(Struct, frozen=True, kw_only=True):
    """A decision stream's lifecycle metrics as of one time."""

    as_of: datetime
    frequency: int
    unique_contexts: int
    hit_count: int
    first_seen: datetime
    last_seen: datetime
    lifetime_days: float
    coverage: float
    reinforcement_density: float
    stability_score: float
    confidence: float
    vitality: DecisionVitality
    phase: DecisionPhase
    estimated_removal_cost: float
    estimated_utility: float


def lifecycle(record: DecisionRecord, as_of: datetime) -> Lifecycle:
    """The stream's metrics from its evidence up to ``as_of`` (later evidence is not yet seen).

    The phase is reviewed at every evidence delta in time order (each review applies both
    transitions in turn) and only ever advances; between evidence nothing can improve, so no
    review at ``as_of`` could promote further. Confidence starts at the recorded confidence and
    loses the weekly decay of every idle gap (recording to first evidence, evidence to evidence,
    last evidence to ``as_of``); new evidence stops the decay but does not restore what was lost.
    """
    _check_time(as_of)
    evidence = sorted((e for e in record.evidence if e.ts <= as_of), key=lambda e: e.ts)
    consequences = len(record.consequences)
    first = last = record.recorded_at
    phase = DecisionPhase.EMERGENT if record.intervention else DecisionPhase.PATTERN
    frequency = hits = 0
    contexts: set[str] = set()
    decaying_weeks = dormant_weeks = 0
    n_intervals, mean, m2 = 0, 0.0, 0.0  # Welford's running variance of the intervals
    prev: datetime | None = None

    def confidence_now() -> float:
        return max(0.0, record.confidence - DECAYING_WEEKLY * decaying_weeks - DORMANT_WEEKLY * dormant_weeks)

    def stability(lifetime: float) -> float:
        if frequency < 3:
            return 0.3 if frequency == 2 else 0.0
        return max(0.0, 1.0 - (m2 / (n_intervals - 1)) / (lifetime + 1.0))

    for e in evidence:
        a, b = decay_weeks(_days(last, e.ts))
        decaying_weeks, dormant_weeks = decaying_weeks + a, dormant_weeks + b
        frequency += 1
        hits += e.hit
        contexts.add(e.context)
        if prev is not None:
            x = _days(prev, e.ts)
            n_intervals += 1
            step = x - mean
            mean += step / n_intervals
            m2 += step * (x - mean)
        prev = e.ts
        first, last = min(first, e.ts), max(last, e.ts)
        lifetime = _days(first, last)
        conf = confidence_now()
        cost = estimated_removal_cost(scope=record.scope, consequences=consequences,
                                      unique_contexts=len(contexts), provenance=record.provenance,
                                      hit_count=hits, confidence=conf)
        phase = promote(phase, frequency=frequency, confidence=conf, lifetime_days=lifetime,
                        coverage=min(lifetime / OBSERVATION_WINDOW_DAYS, 1.0), stability=stability(lifetime),
                        removal_cost=cost, vitality=DecisionVitality.ACTIVE)

    idle = max(_days(last, as_of), 0.0)
    a, b = decay_weeks(idle)
    decaying_weeks, dormant_weeks = decaying_weeks + a, dormant_weeks + b
    lifetime = _days(first, last)
    conf = confidence_now()
    if record.intervention and frequency == 0:
        cost, utility = INTERVENTION_REMOVAL_COST, INTERVENTION_UTILITY
    else:
        cost = estimated_removal_cost(scope=record.scope, consequences=consequences,
                                      unique_contexts=len(contexts), provenance=record.provenance,
                                      hit_count=hits, confidence=conf)
        utility = estimated_utility(frequency=frequency, unique_contexts=len(contexts), scope=record.scope)
    return Lifecycle(
        as_of=as_of, frequency=frequency, unique_contexts=len(contexts), hit_count=hits,
        first_seen=first, last_seen=last, lifetime_days=lifetime,
        coverage=min(lifetime / OBSERVATION_WINDOW_DAYS, 1.0),
        reinforcement_density=frequency / max(lifetime, 0.01), stability_score=stability(lifetime),
        confidence=conf, vitality=vitality_for(idle), phase=phase,
        estimated_removal_cost=cost, estimated_utility=utility,
    )


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
    """The id of the active decision on (target, namespace), if any."""
    ids = state.active.get(namespace, {}).get(target)
    return ids[-1] if ids else None


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


def _weight(kind: str, status: str, phase: str, vitality: str) -> float:
    w = PHASE_WEIGHTS[phase] * VITALITY_WEIGHTS[vitality] * KIND_WEIGHTS[kind]
    return w * STATUS_WEIGHTS.get(status, 1.0)


def rank_weight(record: DecisionRecord | ProposalRecord, as_of: datetime) -> float:
    """The balanced-mode multiplier: phase x vitality x kind (decision 1.35) x status penalty.

    Proposals count as PATTERN and ACTIVE; rejected or falsified x 0.2, superseded or
    deprecated x 0.3.
    """
    _check_time(as_of)
    if isinstance(record, ProposalRecord):
        return _weight("proposal", record.status.value, "pattern", "active")
    m = lifecycle(record, as_of)
    return _weight("decision", record.status, m.phase.value, m.vitality.value)


class SearchCandidate(Struct, frozen=True, kw_only=True):
    """A record a query may match (``id``) and the record to return for it (``result_id``)."""

    id: str
    result_id: str
    kind: Literal["decision", "proposal"]
    status: str
    phase: DecisionPhase
    vitality: DecisionVitality
    namespace: str
    target: str
    preview: str
    text: str
    weight: float


def _candidate(matched: DecisionRecord | ProposalRecord, result: DecisionRecord | ProposalRecord,
               as_of: datetime, cache: dict[str, Lifecycle]) -> SearchCandidate:
    text_of = matched.content if isinstance(matched, ProposalRecord) else matched
    text = f"{text_of.title}\n{text_of.rationale}"
    if isinstance(result, ProposalRecord):
        c = result.content
        return SearchCandidate(
            id=matched.proposal_id, result_id=result.proposal_id, kind="proposal",
            status=result.status.value, phase=DecisionPhase.PATTERN, vitality=DecisionVitality.ACTIVE,
            namespace=c.namespace, target=c.target, preview=c.title, text=text,
            weight=_weight("proposal", result.status.value, "pattern", "active"))
    m = cache.get(result.decision_id)
    if m is None:
        m = cache[result.decision_id] = lifecycle(result, as_of)
    mid = matched.proposal_id if isinstance(matched, ProposalRecord) else matched.decision_id
    return SearchCandidate(
        id=mid, result_id=result.decision_id, kind="decision", status=result.status,
        phase=m.phase, vitality=m.vitality, namespace=result.namespace, target=result.target,
        preview=result.title, text=text,
        weight=_weight("decision", result.status, m.phase.value, m.vitality.value))


def search_candidates(state: State, namespace: str | None = None, mode: Mode = "balanced",
                      as_of: datetime | None = None) -> list[SearchCandidate]:
    """Every record a decision search may return, with its status, phase, vitality and weight.

    strict: active decisions only. balanced: every decision resolved to its active head (records
    whose chain is longer than 20 or loops are left out) and every proposal not yet accepted.
    audit: every decision and proposal as it is. ``namespace`` filters on the returned record;
    ``as_of`` (default: the newest delta time the state has seen) dates phase and vitality.
    """
    if mode not in ("strict", "balanced", "audit"):
        raise ValidationError("mode", f"must be strict, balanced or audit, not {mode!r}")
    if as_of is None:
        if state.last_ts is None:
            return []
        as_of = state.last_ts
    _check_time(as_of)
    cache: dict[str, Lifecycle] = {}
    out: list[SearchCandidate] = []

    def keep(ns: str) -> bool:
        return namespace is None or ns == namespace

    for rec in state.decisions.values():
        if mode == "strict":
            if rec.status == "active" and keep(rec.namespace):
                out.append(_candidate(rec, rec, as_of, cache))
        elif mode == "audit":
            if keep(rec.namespace):
                out.append(_candidate(rec, rec, as_of, cache))
        else:
            head = resolve_active_head(state, rec.decision_id)
            if head is not None and keep(head.namespace):
                out.append(_candidate(rec, head, as_of, cache))
    if mode != "strict":
        for prop in state.proposals.values():
            if mode == "balanced" and prop.status is ProposalStatus.ACCEPTED:
                continue
            if keep(prop.content.namespace):
                out.append(_candidate(prop, prop, as_of, cache))
    return out


def result_item(candidate: SearchCandidate, score: float) -> SearchResultItem:
    """The SearchResultItem for a candidate and its final score."""
    return SearchResultItem(id=candidate.result_id, score=score, status=candidate.status,
                            preview=candidate.preview, kind=candidate.kind)


DECIDER = Decider("decisions", version=1, initial=State(), evolve=evolve, decide=decide, state_type=State)
PROJECTIONS = [DECIDER]
