"""A decision stream's lifecycle (LedgerMind's LifecycleEngine): metrics, vitality, decay, promotion.

Every function here is pure: a stream's metrics are a function of its record and an explicit
``as_of`` time; nothing reads the wall clock. The seed's names and numbers:

- vitality (seed 000, "Vitality Decay Rules"): ACTIVE under 7 idle days, DECAYING from 7 to
  under 30, DORMANT from 30 on (``vitality_for``);
- weekly decay: -0.05 per idle week while DECAYING, -0.2 while DORMANT (``decay_weeks``);
- phase (seed 000, "Phase Transition Logic"): PATTERN -> EMERGENT -> CANONICAL (``promote``);
- promotion recomputes confidence (LifecycleEngine.promote_stream): confidence =
  0.5 x old + 0.5 x (0.4 x utility + 0.3 x removal_cost + 0.3 x stability)
  (``promoted_confidence``, ``review``, ``promote_stream``), once per reflection over the batch
  of new evidence (ReflectionEngine.run_cycle; ``lifecycle``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

import msgspec
from msgspec import Struct

from braidlog import ValidationError

from .model import DecisionPhase, DecisionStream, DecisionVitality, PatternScope
from .state import DecisionRecord

__all__ = [
    "OBSERVATION_WINDOW_DAYS", "ACTIVE_BELOW_DAYS", "DORMANT_FROM_DAYS", "DECAYING_WEEKLY",
    "DORMANT_WEEKLY", "PROMOTION_MOMENTUM", "INTERVENTION_CONFIDENCE", "INTERVENTION_REMOVAL_COST",
    "INTERVENTION_UTILITY",
    "stability_score", "estimated_removal_cost", "estimated_utility", "vitality_for", "decay_weeks",
    "promote", "promoted_confidence", "Promotion", "review", "promote_stream", "Lifecycle", "lifecycle",
]

OBSERVATION_WINDOW_DAYS = 30.0  # coverage = lifetime / 30 days (LifecycleEngine's window)
ACTIVE_BELOW_DAYS = 7.0         # ACTIVE: last used less than 7 days ago
DORMANT_FROM_DAYS = 30.0        # DECAYING: 7 to under 30 days; DORMANT: 30 days or more
DECAYING_WEEKLY = 0.05          # confidence lost per idle week while DECAYING
DORMANT_WEEKLY = 0.2            # confidence lost per idle week while DORMANT
PROMOTION_MOMENTUM = 0.5        # promote_stream keeps half the old confidence
INTERVENTION_CONFIDENCE = 0.7   # LifecycleEngine.process_intervention
INTERVENTION_REMOVAL_COST = 0.8
INTERVENTION_UTILITY = 0.5

#: idle weeks charged at the DECAYING rate: week k ends at day 7k, DECAYING while 7k < 30
DECAYING_WEEKS = math.ceil(DORMANT_FROM_DAYS / 7) - 1
DAY_SECONDS = 86400.0


def _days(start: datetime, stop: datetime) -> float:
    return (stop - start).total_seconds() / DAY_SECONDS


def check_time(as_of: datetime) -> None:
    """Refuse an ``as_of`` that is not a timezone-aware datetime."""
    if not isinstance(as_of, datetime) or as_of.tzinfo is None:
        raise ValidationError("as_of", "must be a timezone-aware datetime (the time the metrics are for)")


def stability_score(dates: Sequence[datetime], lifetime_days: float) -> float:
    """1 - var(intervals in days) / (lifetime + 1), floored at 0; 0.3 with two dates, 0 with fewer."""
    if len(dates) < 2:
        return 0.0
    if len(dates) == 2:
        return 0.3
    ordered = sorted(dates)
    intervals = [_days(a, b) for a, b in zip(ordered, ordered[1:], strict=False)]
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
    """ACTIVE under 7 days since last use, DECAYING from 7 to under 30 days, DORMANT from 30."""
    if days_idle < ACTIVE_BELOW_DAYS:
        return DecisionVitality.ACTIVE
    if days_idle < DORMANT_FROM_DAYS:
        return DecisionVitality.DECAYING
    return DecisionVitality.DORMANT


def decay_weeks(days_idle: float) -> tuple[int, int]:
    """Completed idle weeks charged at the DECAYING rate and at the DORMANT rate.

    Week k ends at day 7k and costs the rate of the band the stream is in then: 0.05 while
    7k < 30 (weeks 1-4), 0.2 from week 5 (day 35) on.
    """
    weeks = int(max(days_idle, 0.0) // 7)
    decaying = min(weeks, DECAYING_WEEKS)
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


def promoted_confidence(confidence: float, *, utility: float, removal_cost: float,
                        stability: float) -> float:
    """promote_stream's confidence: 0.5 x old + 0.5 x (0.4 x utility + 0.3 x removal_cost + 0.3 x stability)."""
    computed = 0.4 * utility + 0.3 * removal_cost + 0.3 * stability
    return confidence * (1.0 - PROMOTION_MOMENTUM) + computed * PROMOTION_MOMENTUM


class Promotion(NamedTuple):
    """What one review gives: the phase, and the metrics it was judged on."""

    phase: DecisionPhase
    confidence: float
    removal_cost: float
    utility: float


def review(phase: DecisionPhase, *, confidence: float, frequency: int, unique_contexts: int,
           hit_count: int, consequences: int, scope: PatternScope | str, provenance: str,
           lifetime_days: float, coverage: float, stability: float,
           vitality: DecisionVitality = DecisionVitality.ACTIVE) -> Promotion:
    """One review of a stream, in LifecycleEngine.promote_stream's order.

    The removal cost is estimated with the old confidence, then the utility; the confidence is
    recomputed from both and the stability (``promoted_confidence``); the phase transitions are
    judged on the new confidence (``promote``).
    """
    cost = estimated_removal_cost(scope=scope, consequences=consequences, unique_contexts=unique_contexts,
                                  provenance=provenance, hit_count=hit_count, confidence=confidence)
    utility = estimated_utility(frequency=frequency, unique_contexts=unique_contexts, scope=scope)
    confidence = promoted_confidence(confidence, utility=utility, removal_cost=cost, stability=stability)
    phase = promote(phase, frequency=frequency, confidence=confidence, lifetime_days=lifetime_days,
                    coverage=coverage, stability=stability, removal_cost=cost, vitality=vitality)
    return Promotion(phase, confidence, cost, utility)


def promote_stream(stream: DecisionStream) -> DecisionStream:
    """LifecycleEngine.promote_stream: the stream with removal cost, utility, confidence and phase
    recomputed from its other fields (``review``)."""
    r = review(stream.phase, confidence=stream.confidence, frequency=stream.frequency,
               unique_contexts=stream.unique_contexts, hit_count=stream.hit_count,
               consequences=len(stream.consequences), scope=stream.scope, provenance=stream.provenance,
               lifetime_days=stream.lifetime_days, coverage=stream.coverage,
               stability=stream.stability_score, vitality=stream.vitality)
    return msgspec.structs.replace(stream, phase=r.phase, confidence=r.confidence,
                                   estimated_removal_cost=r.removal_cost, estimated_utility=r.utility)


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

    LedgerMind's reflection cycle, as of ``as_of``: the stream is reviewed (``review``,
    promote_stream's step) once per reflection over the batch of evidence new since the one
    before (``record.reviews``, the times of the ``decisions_reflected`` deltas that found new
    evidence for it), and the evidence no reflection has reviewed yet is one more batch, reviewed
    at its latest piece (what the next reflection will conclude; nothing is written by reading).
    A review takes the metrics of all the evidence up to it (frequency, contexts, stability over
    every interval), estimates the removal cost with the confidence it replaces, then the
    utility, recomputes the confidence and applies both phase transitions in turn; the phase
    only ever advances. Every idle gap (recording to first evidence, evidence to evidence, last
    evidence to ``as_of``) costs the weekly decay, charged as its weeks complete, whether a review
    falls inside the gap or not. ``estimated_removal_cost`` and ``estimated_utility`` are those the
    latest review used.
    """
    check_time(as_of)
    evidence = sorted((e for e in record.evidence if e.ts <= as_of), key=lambda e: e.ts)
    reviews = sorted(t for t in record.reviews if t <= as_of)
    consequences = len(record.consequences)
    first = last = record.recorded_at
    phase = DecisionPhase.EMERGENT if record.intervention else DecisionPhase.PATTERN
    confidence = record.confidence
    cost: float | None = None
    utility: float | None = None
    if record.intervention:
        cost, utility = INTERVENTION_REMOVAL_COST, INTERVENTION_UTILITY
    frequency = hits = 0
    contexts: set[str] = set()
    n_intervals, mean, m2 = 0, 0.0, 0.0  # Welford's running variance of the intervals
    prev: datetime | None = None
    charged = (0, 0)  # idle weeks of the current gap already charged (DECAYING, DORMANT)
    pending = False   # evidence since the last review

    def charge(until: datetime) -> None:
        nonlocal confidence, charged
        decaying, dormant = decay_weeks(_days(last, until))
        confidence = max(0.0, confidence - DECAYING_WEEKLY * (decaying - charged[0])
                         - DORMANT_WEEKLY * (dormant - charged[1]))
        charged = (decaying, dormant)

    def stability(lifetime: float) -> float:
        if frequency < 3:
            return 0.3 if frequency == 2 else 0.0
        return max(0.0, 1.0 - (m2 / (n_intervals - 1)) / (lifetime + 1.0))

    def reviewed(at: datetime) -> None:
        nonlocal phase, confidence, cost, utility, pending
        charge(at)
        lifetime = _days(first, last)
        phase, confidence, cost, utility = review(
            phase, confidence=confidence, frequency=frequency, unique_contexts=len(contexts),
            hit_count=hits, consequences=consequences, scope=record.scope,
            provenance=record.provenance, lifetime_days=lifetime,
            coverage=min(lifetime / OBSERVATION_WINDOW_DAYS, 1.0), stability=stability(lifetime),
            vitality=vitality_for(_days(last, at)))
        pending = False

    r = 0
    for e in evidence:
        while r < len(reviews) and reviews[r] < e.ts:
            if pending:
                reviewed(reviews[r])
            r += 1
        charge(e.ts)
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
        charged, pending = (0, 0), True
    while r < len(reviews) and pending:
        reviewed(reviews[r])
        r += 1
    if pending:
        reviewed(last)  # the batch no reflection has reviewed yet, at its latest piece

    charge(as_of)
    idle = max(_days(last, as_of), 0.0)
    lifetime = _days(first, last)
    if cost is None or utility is None:  # never reviewed: the formulas on what there is
        cost = estimated_removal_cost(scope=record.scope, consequences=consequences,
                                      unique_contexts=len(contexts), provenance=record.provenance,
                                      hit_count=hits, confidence=confidence)
        utility = estimated_utility(frequency=frequency, unique_contexts=len(contexts), scope=record.scope)
    return Lifecycle(
        as_of=as_of, frequency=frequency, unique_contexts=len(contexts), hit_count=hits,
        first_seen=first, last_seen=last, lifetime_days=lifetime,
        coverage=min(lifetime / OBSERVATION_WINDOW_DAYS, 1.0),
        reinforcement_density=frequency / max(lifetime, 0.01), stability_score=stability(lifetime),
        confidence=confidence, vitality=vitality_for(idle), phase=phase,
        estimated_removal_cost=cost, estimated_utility=utility,
    )
