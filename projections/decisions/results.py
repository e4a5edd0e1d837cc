"""MemoryDecision results: what an operation did, as LedgerMind's write operations report it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from braidlog import Provenance, Rejected, ValidationError

from .commands import Command
from .decide import DECIDER
from .model import MemoryDecision

__all__ = ["memory_decision", "execute"]


_PRIORITY = {"decision_recorded": 5, "proposal_accepted": 5, "proposal_drafted": 3,
             "proposal_rejected": 3, "proposal_falsified": 3, "trust_boundary_set": 5,
             "target_alias_registered": 5, "decision_used": 1}


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
        elif d.kind == "target_alias_registered":
            reasons.append(f"Target alias {p['alias']!r} registered for {p['target']!r}")
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

