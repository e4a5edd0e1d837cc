"""The decisions projection's rules: pure checks that a delta may enter a log whose state is ``state``.

Each rule is one function named after it, over the state and the delta, raising ``Rejected``
(or ``ValidationError`` for a payload that contradicts its envelope) whose message starts with
the rule's name. ``check(state, delta)`` runs every rule of the delta's kind; it is what the
boundary runs for each delta entering a store opened with this projection, and what ``decide``
runs on the deltas it makes, so a command and a raw append obey the same rules. The payload's
field rules (title >= 1, target >= 3, rationale >= 10 characters ...) are the kind's schema,
checked by the engine before any of these.

| rule | kinds | seed |
|---|---|---|
| ``id_is_delta_id`` | decision_recorded, proposal_drafted | (choice: a record's id is its delta's id) |
| ``trust_boundary`` | decision_recorded, proposal_* | 000, TrustBoundary |
| ``resolution_targets_active`` | decision_recorded | 000, ResolutionIntent |
| ``supersede_same_target`` | decision_recorded | LedgerMind v3.2.1 supersede_decision ("no longer active for target") |
| ``one_active_decision_per_target`` | decision_recorded | 000, ResolutionIntent; MemoryDecision "CONFLICT" |
| ``intervention_confidence`` | decision_recorded | LifecycleEngine.process_intervention |
| ``decision_known`` | decision_used | |
| ``proposal_status_flow`` | proposal_accepted/rejected/falsified, decision_recorded (from one) | 000, ProposalStatus |
| ``accepted_as_its_decision`` | proposal_accepted | |
| ``boundary_set_by_human`` | trust_boundary_set | 000, TrustBoundary (HUMAN_ONLY operations) |
| ``alias_names_one_target`` | target_alias_registered | LedgerMind TargetRegistry |
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from braidlog import GenericDelta, ValidationError, refuse

from .events import (
    READ,
    DecisionRecorded,
    DecisionUsed,
    ProposalAccepted,
    ProposalDrafted,
    ProposalFalsified,
    ProposalRejected,
    TargetAliasRegistered,
    TrustBoundarySet,
)
from .lifecycle import INTERVENTION_CONFIDENCE
from .model import HUMAN, ProposalStatus, TrustBoundary
from .state import ProposalRecord, State, evolve
from .targets import canonical_target, resolve_target

__all__ = [
    "check", "check_batch", "CHECKS",
    "id_is_delta_id", "trust_boundary", "resolution_targets_active", "supersede_same_target",
    "one_active_decision_per_target", "intervention_confidence", "decision_known",
    "known_proposal", "proposal_status_flow", "accepted_as_its_decision", "boundary_set_by_human",
    "alias_names_one_target",
]


# ------------------------------------------------------------------------------------ the rules

def id_is_delta_id(d: GenericDelta, record_id: str, field: str) -> None:
    """A decision's (or proposal's) id is the id of the delta that records it."""
    if record_id != d.id:
        raise ValidationError(f"payload.{field}", f"id_is_delta_id: must be the delta's id {d.id!r}, "
                                                  f"not {record_id!r}", where=f"delta {d.id}")


def trust_boundary(state: State, provenance_kind: str, namespace: str, operation: str) -> None:
    """Under HUMAN_ONLY only a human (provenance ``user``) may change a namespace's memory."""
    boundary = state.boundaries.get(namespace, state.default_boundary)
    if provenance_kind != HUMAN and boundary is TrustBoundary.HUMAN_ONLY:
        raise refuse("trust_boundary", f"namespace {namespace!r} is HUMAN_ONLY, so {operation} needs "
                                        f"provenance 'user', not {provenance_kind!r}; ask a human to do it")


def resolution_targets_active(state: State, supersedes: Sequence[str], deprecates: Sequence[str],
                              namespace: str) -> None:
    """Every decision an intent supersedes or deprecates is recorded, active, in the namespace,
    and named once (not both superseded and deprecated)."""
    both = set(supersedes) & set(deprecates)
    if both:
        raise refuse("resolution_targets_active", f"decisions {sorted(both)} cannot be both superseded "
                                                   "and deprecated; pick one")
    for verb, ids in (("supersede", supersedes), ("deprecate", deprecates)):
        for did in ids:
            old = state.decisions.get(did)
            if old is None:
                raise refuse("resolution_targets_active", f"cannot {verb} {did!r}: unknown decision; "
                                                           "name a recorded, active decision")
            if old.status != "active":
                by = old.superseded_by or old.deprecated_by
                raise refuse("resolution_targets_active", f"cannot {verb} {did!r}: it is {old.status}"
                              + (f" (by {by!r})" if by else "") + ", not active")
            if old.namespace != namespace:
                raise refuse("resolution_targets_active", f"cannot {verb} {did!r}: it is in namespace "
                                                           f"{old.namespace!r}, not {namespace!r}")


def supersede_same_target(state: State, supersedes: Sequence[str], target: str, namespace: str) -> None:
    """A decision supersedes only active decisions of its own target (matched through the
    registry) in its namespace: one on another target would leave that target with no active
    decision. Retiring a decision of another target is a deprecation."""
    key = canonical_target(state, target)
    for did in supersedes:
        old = state.decisions.get(did)
        if old is not None and old.status == "active" and old.target_key != key:
            raise refuse("supersede_same_target",
                          f"cannot supersede {did!r}: it is no longer active for target {target!r} in "
                          f"namespace {namespace!r} (it is the decision on target {old.target!r}); "
                          "supersede the decision of the same target, or deprecate this one")


def one_active_decision_per_target(state: State, target: str, namespace: str,
                                   resolved: Sequence[str], intent_given: bool = True) -> None:
    """A decision on a target (matched through the registry) whose namespace has an active
    decision must resolve every one of them: supersede or deprecate each (a ResolutionIntent)."""
    key = canonical_target(state, target)
    conflicts = state.active.get(namespace, {}).get(key, ())
    missing = [did for did in conflicts if did not in resolved]
    if not missing:
        return
    named = f"target {target!r}" + (f" (registered as {key!r})" if key != target else "")
    if not intent_given:
        raise refuse("one_active_decision_per_target",
                      f"CONFLICT: {named} in namespace {namespace!r} has the active decision(s) "
                      f"{list(conflicts)}; a ResolutionIntent is required (supersede or deprecate "
                      "naming every conflicting id)")
    raise refuse("one_active_decision_per_target",
                  f"CONFLICT: the ResolutionIntent does not cover the active decision(s) {missing} on "
                  f"{named} in namespace {namespace!r}; a ResolutionIntent is required that names "
                  "every conflicting id")


def intervention_confidence(d: GenericDelta, intervention: bool) -> None:
    """An intervention starts with confidence 0.7 (LifecycleEngine.process_intervention)."""
    if intervention and d.confidence != INTERVENTION_CONFIDENCE:
        raise refuse("intervention_confidence", f"an intervention is recorded with confidence "
                                                 f"{INTERVENTION_CONFIDENCE}, not {d.confidence}; "
                                                 f"set the delta's confidence to {INTERVENTION_CONFIDENCE}")


def decision_known(state: State, decision_id: str, verb: str = "use") -> None:
    """A use names a recorded decision."""
    if decision_id not in state.decisions:
        raise refuse("decision_known", f"cannot {verb} decision {decision_id!r}: unknown decision")


def known_proposal(state: State, proposal_id: str, verb: str) -> ProposalRecord:
    """The proposal an outcome names; refused when there is none."""
    rec = state.proposals.get(proposal_id)
    if rec is None:
        raise refuse("proposal_status_flow", f"cannot {verb} proposal {proposal_id!r}: no such "
                                              "proposal; draft it first")
    return rec


def proposal_status_flow(rec: ProposalRecord, verb: str) -> None:
    """A proposal moves once, from draft: DRAFT -> ACCEPTED or REJECTED or FALSIFIED."""
    if rec.status is not ProposalStatus.DRAFT:
        became = f" as decision {rec.decision_id!r}" if rec.decision_id else ""
        raise refuse("proposal_status_flow", f"cannot {verb} proposal {rec.proposal_id!r}: it is "
                                              f"{rec.status.value}{became}; only a draft proposal can be "
                                              "accepted, rejected or falsified")


def accepted_as_its_decision(state: State, proposal_id: str, decision_id: str) -> None:
    """An accepted proposal names the decision recorded from it (recorded first, in its batch)."""
    rec = state.decisions.get(decision_id)
    if rec is None or rec.proposal_id != proposal_id:
        raise refuse("accepted_as_its_decision",
                      f"proposal {proposal_id!r} cannot be accepted as {decision_id!r}: that is not a "
                      "decision recorded from it; record the decision (decision_recorded with "
                      "proposal_id) before proposal_accepted")


def boundary_set_by_human(provenance_kind: str) -> None:
    """Only a human sets a trust boundary."""
    if provenance_kind != HUMAN:
        raise refuse("boundary_set_by_human", f"only a human (provenance 'user') may set the trust "
                                               f"boundary, not {provenance_kind!r}")


def alias_names_one_target(state: State, alias: str, target: str) -> None:
    """An alias names one registered target: a name that already names another cannot alias."""
    named = resolve_target(state, alias)
    wanted = canonical_target(state, target)
    if named is not None and named != wanted:
        what = "is a target" if named.lower() == alias.lower() else f"already names target {named!r}"
        raise refuse("alias_names_one_target", f"{alias!r} {what}; it cannot also name {wanted!r}")


# ------------------------------------------------------------------------------- checks by kind

def _recorded(state: State, d: GenericDelta, p: DecisionRecorded) -> None:
    id_is_delta_id(d, p.decision_id, "decision_id")
    if p.decision_id in state.decisions:
        return  # the same delta again: an idempotent retry, which the store makes a no-op
    trust_boundary(state, d.provenance.kind, p.namespace, "recording a decision")
    intervention_confidence(d, p.intervention)
    if p.proposal_id is not None:
        proposal_status_flow(known_proposal(state, p.proposal_id, "accept"), "accept")
    resolution_targets_active(state, p.supersedes, p.deprecates, p.namespace)
    supersede_same_target(state, p.supersedes, p.target, p.namespace)
    one_active_decision_per_target(state, p.target, p.namespace, (*p.supersedes, *p.deprecates),
                                   intent_given=bool(p.supersedes or p.deprecates or p.resolution_rationale))


def _used(state: State, d: GenericDelta, p: DecisionUsed) -> None:
    decision_known(state, p.decision_id)


def _drafted(state: State, d: GenericDelta, p: ProposalDrafted) -> None:
    id_is_delta_id(d, p.proposal_id, "proposal_id")
    if p.proposal_id in state.proposals:
        return  # an idempotent retry
    if p.proposal_id in state.decisions:
        raise refuse("id_is_delta_id", f"{p.proposal_id!r} is a decision's id")
    trust_boundary(state, d.provenance.kind, p.namespace, "drafting a proposal")


def _closing(verb: str) -> Callable[[State, GenericDelta, Any], None]:
    def check_outcome(state: State, d: GenericDelta,
                      p: ProposalAccepted | ProposalRejected | ProposalFalsified) -> None:
        rec = known_proposal(state, p.proposal_id, verb)
        if rec.closed_by == d.id:
            return  # an idempotent retry
        trust_boundary(state, d.provenance.kind, rec.content.namespace, f"{verb}ing a proposal")
        proposal_status_flow(rec, verb)
        if isinstance(p, ProposalAccepted):
            accepted_as_its_decision(state, p.proposal_id, p.decision_id)
    return check_outcome


def _boundary_set(state: State, d: GenericDelta, p: TrustBoundarySet) -> None:
    boundary_set_by_human(d.provenance.kind)


def _alias_registered(state: State, d: GenericDelta, p: TargetAliasRegistered) -> None:
    alias_names_one_target(state, p.alias, p.target)


_BY_KIND: dict[str, Callable[[State, GenericDelta, Any], None]] = {
    "decision_recorded": _recorded, "decision_used": _used, "proposal_drafted": _drafted,
    "proposal_accepted": _closing("accept"), "proposal_rejected": _closing("reject"),
    "proposal_falsified": _closing("falsify"), "trust_boundary_set": _boundary_set,
    "target_alias_registered": _alias_registered,
}


def check(state: State, d: GenericDelta, at: Any = None) -> None:
    """Every rule of ``d``'s kind against ``state`` (the state of the log ``d`` would enter);
    nothing for kinds this projection does not own. Raises Rejected or ValidationError.
    ``at`` (where the delta stands in the log) is the boundary's; no rule here needs it."""
    rule = _BY_KIND.get(d.kind)
    if rule is None:
        return
    try:
        p = READ[d.kind](d)
    except msgspec.ValidationError as e:  # the engine checks the schema first; a direct call may not
        raise ValidationError("payload", str(e), where=f"delta {d.id}") from None
    rule(state, d, p)


#: the kinds ``check`` has rules for
CHECKS: frozenset[str] = frozenset(_BY_KIND)


def check_batch(state: State, deltas: Sequence[GenericDelta]) -> None:
    """``check`` each delta of a batch against the state after the ones before it.

    ``state`` is not touched: from the second delta on the checks run on a copy that the earlier
    deltas are folded into (the one multi-delta command, accepting a proposal, needs its
    decision recorded before ``proposal_accepted`` names it).
    """
    scratch = state
    for i, d in enumerate(deltas):
        if i:
            if scratch is state:
                scratch = msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=State)
            scratch = evolve(scratch, deltas[i - 1])
        check(scratch, d)
