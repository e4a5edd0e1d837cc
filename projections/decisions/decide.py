"""``decide``: the deltas a decisions command appends, against the state it is decided on.

A handler works out what a command means (an intent's ids, the accepted proposal's fields, the
registered name of the target) and whether it is already done (then ``[]``). The rules its
deltas must obey are ``rules``'s: ``DECIDER.check``, which the boundary runs inside the write
transaction on every delta entering a store opened with this projection, ``execute``'s
included. A handler calls a rule itself only where it needs the answer to build its deltas (the
proposal it accepts) or where a refusal must come before "already done" (the trust boundary).
Time and ids come from the ``Context``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec
from msgspec import Struct

from braidlog import Context, Decider, GenericDelta, Refs, Rejected, ValidationError

from . import rules
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
    _DecisionFields,
)
from .events import (
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
from .lifecycle import INTERVENTION_CONFIDENCE
from .model import ProposalContent, ProposalStatus, ResolutionIntent
from .state import State, evolve
from .targets import canonical_target, resolve_target

__all__ = ["decide", "DECIDER", "PROJECTIONS"]


def _delta(ctx: Context, kind: str, payload: Struct, *, id: str | None = None,
           confidence: float | None = None, refs: Refs | None = None) -> GenericDelta:
    d = ctx.delta(kind, msgspec.to_builtins(payload), confidence=confidence, refs=refs)
    return msgspec.structs.replace(d, id=id) if id is not None and id != d.id else d


def _ids(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _record(state: State, ctx: Context, c: _DecisionFields, *, title: str, target: str,
            rationale: str, supersede: Sequence[str], deprecate: Sequence[str],
            resolution_rationale: str | None, proposal_id: str | None = None,
            confidence: float | None = None) -> GenericDelta | None:
    """The decision_recorded delta for a decision (its target as registered), None when it is
    already recorded."""
    ns = c.namespace
    target = canonical_target(state, target)
    supersede, deprecate = _ids(supersede), _ids(deprecate)
    if c.intervention and c.confidence is not None:
        raise ValidationError("confidence", f"an intervention sets confidence {INTERVENTION_CONFIDENCE}; "
                                            "leave confidence unset")

    def same(rec: Any) -> bool:
        return (rec.title, rec.rationale, rec.proposal_id) == (title, rationale, proposal_id) \
            and set(supersede) <= set(rec.supersedes) and set(deprecate) <= set(rec.deprecates)

    if c.decision_id is not None and (c.decision_id in state.decisions or c.decision_id in state.proposals):
        rec = state.decisions.get(c.decision_id)
        if rec is not None and (rec.target_key, rec.namespace) == (target, ns) and same(rec):
            return None
        raise Rejected(f"decision_id {c.decision_id!r} is already taken by other content; use a new id")
    if c.decision_id is None:
        for did in state.active.get(ns, {}).get(target, ()):
            if same(state.decisions[did]):
                return None  # this very decision is already the active one
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
    rules.trust_boundary(state, ctx.provenance.kind, c.namespace, "recording a decision")
    if c.intent is not None and c.intent.resolution_type == "abort":
        return []  # abort: nothing changes
    supersede, deprecate = _intent_ids(c.intent)
    d = _record(state, ctx, c, title=c.title, target=c.target, rationale=c.rationale,
                supersede=supersede, deprecate=deprecate,
                resolution_rationale=c.intent.rationale if c.intent is not None else None)
    return [] if d is None else [d]


def _decide_supersede(c: SupersedeDecision, state: State, ctx: Context) -> list[GenericDelta]:
    rules.trust_boundary(state, ctx.provenance.kind, c.namespace, "superseding a decision")
    d = _record(state, ctx, c, title=c.title, target=c.target, rationale=c.rationale,
                supersede=c.old_decision_ids, deprecate=(), resolution_rationale=c.rationale)
    return [] if d is None else [d]


def _decide_draft(c: DraftProposal, state: State, ctx: Context) -> list[GenericDelta]:
    p = c.proposal
    rules.trust_boundary(state, ctx.provenance.kind, p.namespace, "drafting a proposal")
    if p.status is not ProposalStatus.DRAFT:
        raise ValidationError("proposal.status", f"a proposal is written as draft, not {p.status!r}; "
                                                 "accept, reject or falsify it afterwards")
    fields = msgspec.structs.asdict(p)
    del fields["status"]
    fields["target"] = target = canonical_target(state, p.target)
    fields["first_observed_at"] = p.first_observed_at or ctx.now
    fields["last_observed_at"] = p.last_observed_at or fields["first_observed_at"]
    if c.proposal_id is not None and (c.proposal_id in state.proposals or c.proposal_id in state.decisions):
        old = state.proposals.get(c.proposal_id)
        if old is not None and _same_proposal(old.content, p, target):
            return []
        raise Rejected(f"proposal_id {c.proposal_id!r} is already taken by other content; use a new id")
    if c.proposal_id is None:
        key = (p.namespace, target, p.title, p.rationale)
        for old in state.proposals.values():
            o = old.content
            if old.status is ProposalStatus.DRAFT and (o.namespace, o.target, o.title, o.rationale) == key:
                return []  # the same draft is already waiting for review
    proposal_id = c.proposal_id or ctx.new_id()
    payload = msgspec.convert({"proposal_id": proposal_id, **msgspec.to_builtins(fields)}, ProposalDrafted)
    return [_delta(ctx, "proposal_drafted", payload, id=proposal_id)]


def _same_proposal(a: ProposalContent, b: ProposalContent, target: str) -> bool:
    skip = {"status", "first_observed_at", "last_observed_at", "target"}
    da, db = msgspec.structs.asdict(a), msgspec.structs.asdict(b)
    return a.target == target and all(da[k] == db[k] for k in da if k not in skip)


def _decide_accept(c: AcceptProposal, state: State, ctx: Context) -> list[GenericDelta]:
    rec = rules.known_proposal(state, c.proposal_id, "accept")
    p = rec.content
    rules.trust_boundary(state, ctx.provenance.kind, p.namespace, "accepting a proposal")
    rules.proposal_status_flow(rec, "accept")
    if c.intent is not None and c.intent.resolution_type == "abort":
        return []
    more_supersede, deprecate = _intent_ids(c.intent)
    fields = _DecisionFields(
        namespace=p.namespace, consequences=p.suggested_consequences, keywords=p.keywords,
        evidence_event_ids=p.evidence_event_ids, procedural=p.procedural, decision_id=c.decision_id)
    d = _record(state, ctx, fields, title=p.title, target=p.target, rationale=p.rationale,
                supersede=[*p.suggested_supersedes, *more_supersede], deprecate=deprecate,
                proposal_id=rec.proposal_id, confidence=p.confidence,
                resolution_rationale=(c.intent.rationale if c.intent is not None
                                      else f"accepted proposal {rec.proposal_id}"))
    if d is None:  # pragma: no cover - a draft's decision cannot exist yet
        return []
    accepted = ProposalAccepted(proposal_id=rec.proposal_id, decision_id=d.payload["decision_id"])
    return [d, _delta(ctx, "proposal_accepted", accepted)]


def _decide_close(c: RejectProposal | FalsifyProposal, state: State, ctx: Context) -> list[GenericDelta]:
    falsify = isinstance(c, FalsifyProposal)
    verb = "falsify" if falsify else "reject"
    rec = rules.known_proposal(state, c.proposal_id, verb)
    rules.trust_boundary(state, ctx.provenance.kind, rec.content.namespace, f"{verb}ing a proposal")
    target = ProposalStatus.FALSIFIED if falsify else ProposalStatus.REJECTED
    if rec.status is target and rec.reason == c.reason:
        return []  # already done
    if isinstance(c, FalsifyProposal):
        payload: Struct = ProposalFalsified(proposal_id=rec.proposal_id, reason=c.reason,
                                            counter_evidence_event_ids=tuple(c.counter_evidence_event_ids))
        return [_delta(ctx, "proposal_falsified", payload)]
    return [_delta(ctx, "proposal_rejected", ProposalRejected(proposal_id=rec.proposal_id, reason=c.reason))]


def _decide_use(c: UseDecision, state: State, ctx: Context) -> list[GenericDelta]:
    payload = DecisionUsed(decision_id=c.decision_id, context=c.context, note=c.note)
    return [_delta(ctx, "decision_used", payload, refs=Refs(deltas=(c.decision_id,)))]


def _decide_boundary(c: SetTrustBoundary, state: State, ctx: Context) -> list[GenericDelta]:
    rules.boundary_set_by_human(ctx.provenance.kind)
    current = state.default_boundary if c.namespace is None else state.boundaries.get(c.namespace)
    if current == c.boundary:
        return []
    return [_delta(ctx, "trust_boundary_set", TrustBoundarySet(boundary=c.boundary, namespace=c.namespace))]


def _decide_alias(c: RegisterTargetAlias, state: State, ctx: Context) -> list[GenericDelta]:
    if resolve_target(state, c.alias) == canonical_target(state, c.target):
        return []  # the alias already names that target
    return [_delta(ctx, "target_alias_registered", TargetAliasRegistered(alias=c.alias, target=c.target))]


def _decide_reflect(c: Reflect, state: State, ctx: Context) -> list[GenericDelta]:
    for rec in state.decisions.values():
        if c.namespace is not None and rec.namespace != c.namespace:
            continue
        since = rec.reviews[-1] if rec.reviews else None
        if any(e.ts <= ctx.now and (since is None or e.ts > since) for e in rec.evidence):
            return [_delta(ctx, "decisions_reflected", DecisionsReflected(namespace=c.namespace))]
    return []  # no stream has new evidence: nothing to review


_HANDLERS: dict[type, Callable[[Any, State, Context], list[GenericDelta]]] = {
    RecordDecision: _decide_record, SupersedeDecision: _decide_supersede,
    DraftProposal: _decide_draft, AcceptProposal: _decide_accept,
    RejectProposal: _decide_close, FalsifyProposal: _decide_close,
    UseDecision: _decide_use, SetTrustBoundary: _decide_boundary,
    RegisterTargetAlias: _decide_alias, Reflect: _decide_reflect,
}


def decide(command: Command, state: State, ctx: Context) -> list[GenericDelta]:
    """The deltas a command appends ([] when already done); Rejected or ValidationError to refuse."""
    handler = _HANDLERS.get(type(command))
    if handler is None:
        names = ", ".join(c.__name__ for c in _HANDLERS)
        raise ValidationError("command", f"{type(command).__name__} is not a decisions command; "
                                         f"use one of {names}")
    return handler(command, state, ctx)


DECIDER = Decider("decisions", version=3, initial=State(), evolve=evolve, decide=decide, state_type=State,
                  check=rules.check)
PROJECTIONS = [DECIDER]
