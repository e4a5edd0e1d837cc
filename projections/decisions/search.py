"""Decision search after LedgerMind (``SearchDecisionsRequest.mode``): which records a query may
return in each mode, and their rank weights. Scoring and paging are ``decision_search``'s.

- strict: active decisions only;
- balanced: every decision resolved to its active head, every proposal not accepted, each
  weighted phase x vitality x kind x status (``rank_weight``);
- audit: every decision and proposal as it is.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from msgspec import Struct

from braidlog import ValidationError

from .lifecycle import Lifecycle, check_time, lifecycle
from .model import DecisionPhase, DecisionVitality, Mode, ProposalStatus, SearchResultItem
from .queries import resolve_active_head
from .state import DecisionRecord, ProposalRecord, State

__all__ = ["PHASE_WEIGHTS", "VITALITY_WEIGHTS", "KIND_WEIGHTS", "STATUS_WEIGHTS", "rank_weight",
           "SearchCandidate", "search_candidates", "result_item"]

PHASE_WEIGHTS = {"canonical": 1.5, "emergent": 1.2, "pattern": 1.0}
VITALITY_WEIGHTS = {"active": 1.0, "decaying": 0.5, "dormant": 0.2}
KIND_WEIGHTS = {"decision": 1.35, "proposal": 1.0}
STATUS_WEIGHTS = {"rejected": 0.2, "falsified": 0.2, "superseded": 0.3, "deprecated": 0.3}


def _weight(kind: str, status: str, phase: str, vitality: str) -> float:
    w = PHASE_WEIGHTS[phase] * VITALITY_WEIGHTS[vitality] * KIND_WEIGHTS[kind]
    return w * STATUS_WEIGHTS.get(status, 1.0)


def rank_weight(record: DecisionRecord | ProposalRecord, as_of: datetime) -> float:
    """The balanced-mode multiplier: phase x vitality x kind (decision 1.35) x status penalty.

    Proposals count as PATTERN and ACTIVE; rejected or falsified x 0.2, superseded or
    deprecated x 0.3.
    """
    check_time(as_of)
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
    if text_of.keywords:  # the seed's "search terms for retrieval"
        text += "\n" + " ".join(text_of.keywords)
    mid = matched.proposal_id if isinstance(matched, ProposalRecord) else matched.decision_id
    if isinstance(result, ProposalRecord):
        c = result.content
        return SearchCandidate(
            id=mid, result_id=result.proposal_id, kind="proposal",
            status=result.status.value, phase=DecisionPhase.PATTERN, vitality=DecisionVitality.ACTIVE,
            namespace=c.namespace, target=c.target, preview=c.title, text=text,
            weight=_weight("proposal", result.status.value, "pattern", "active"))
    m = cache.get(result.decision_id)
    if m is None:
        m = cache[result.decision_id] = lifecycle(result, as_of)
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
    check_time(as_of)
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


