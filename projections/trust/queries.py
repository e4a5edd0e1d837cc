"""Reads of the trust state: effective trust as of a time, test status, and the trust formula."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from msgspec import Struct

from braidlog import ValidationError

from .model import (
    DEFAULT_POLICY,
    TESTS,
    DecayPolicy,
    Hypothesis,
    Reinforcement,
    State,
    Subject,
    TestResult,
    TrustPolicy,
)

__all__ = ["TrustView", "trust_of", "confidence_at", "hypothesis_status", "missing_tests", "promotable",
           "PROVENANCE_WEIGHTS", "PROMOTION_THRESHOLD", "NO_TEST_SCORE", "NO_EVIDENCE_SCORE",
           "TRUST_HALF_LIFE", "HypothesisTrust", "hypothesis_trust", "named_evidence", "test_score"]

class TrustView(Struct, frozen=True, kw_only=True):
    """A subject's trust as of a time: the value, where it comes from and whether it decays."""

    subject_id: str
    confidence: float
    base: float
    source: str  # "stated", "dream", "assessed", "promoted" or "rejected"
    provenance: str
    clock: datetime
    half_life: timedelta | None
    reinforced: int


def _half_life(decay: DecayPolicy | None) -> timedelta | None:
    return None if decay is None else timedelta(seconds=decay.half_life_s)


def trust_of(state: State, subject_id: str, as_of: datetime, *, braid_id: str | None = None,
             policy: TrustPolicy = DEFAULT_POLICY) -> TrustView | None:
    """The trust of a subject (or of a bead's active version) as of ``as_of``; None if unknown then.

    The base is the latest of: the stated confidence (dream content capped, decaying), the
    hypothesis's promotion or rejection, and an assessment (inside ``braid_id`` a braid-scoped
    assessment wins over the global baseline). The base's event starts the decay clock; each
    reinforcement after it and up to ``as_of`` restarts the clock.
    """
    s = state.subjects.get(subject_id)
    if s is None and subject_id in state.active:
        s = state.subjects.get(state.active[subject_id])
    if s is None or s.since > as_of:
        return None
    dream, cap = s.provenance == "dream", policy.dream_confidence
    base, source, clock = (min(s.confidence, cap), "dream", s.since) if dream else (s.confidence, "stated", s.since)
    half_life, floor = (policy.dream_half_life if dream else None), 0.0
    promoted = False
    h = state.hypotheses.get(s.subject_id)
    if h is not None:
        decided = [(p.ts, 0, "promoted", p.confidence) for p in h.promotions if p.ts <= as_of]
        decided += [(r.ts, 1, "rejected", 0.0) for r in h.rejections if r.ts <= as_of]
        if decided:
            clock, _, source, base = max(decided)
            promoted = source == "promoted"
            half_life = TRUST_HALF_LIFE if promoted else None  # read-time decay of trust
    scoped = [a for a in s.assessments if a.ts <= as_of and braid_id is not None and a.braid_id == braid_id]
    chosen = scoped or [a for a in s.assessments if a.ts <= as_of and a.braid_id is None]
    if chosen and chosen[-1].ts >= clock and source != "rejected":
        a = chosen[-1]
        capped = dream and not promoted
        base, source, clock = (min(a.confidence, cap) if capped else a.confidence), "assessed", a.ts
        if a.decay is not None:
            half_life, floor = _half_life(a.decay), a.decay.floor
        else:
            half_life, floor = (policy.dream_half_life if capped else None), 0.0
    reinforced = [r for r in s.reinforcements if r.ts <= as_of]
    if source != "rejected":
        clock = max([clock, *(r.ts for r in reinforced)])
    value = base
    if half_life is not None and as_of > clock and base > floor:
        value = floor + (base - floor) * 0.5 ** ((as_of - clock) / half_life)
    return TrustView(subject_id=s.subject_id, confidence=value, base=base, source=source,
                     provenance=s.provenance, clock=clock, half_life=half_life,
                     reinforced=len(reinforced))


def confidence_at(state: State, subject_id: str, as_of: datetime, *, braid_id: str | None = None,
                  policy: TrustPolicy = DEFAULT_POLICY) -> float | None:
    """Just the confidence of ``trust_of`` (None when the subject is unknown at ``as_of``)."""
    view = trust_of(state, subject_id, as_of, braid_id=braid_id, policy=policy)
    return None if view is None else view.confidence


def _latest(h: Hypothesis, test: str, as_of: datetime) -> TestResult | None:
    """The latest non-dream result of ``test`` up to ``as_of`` (dream tests never count)."""
    found = None
    for t in h.tests:
        if t.test == test and t.ts <= as_of and t.provenance != "dream":
            found = t
    return found


def missing_tests(state: State, hypothesis_id: str, as_of: datetime) -> list[str]:
    """The required tests whose latest result up to ``as_of`` is missing or failed."""
    h = state.hypotheses[hypothesis_id]
    out = []
    for test in h.required_tests:
        t = _latest(h, test, as_of)
        if t is None or not t.passed:
            out.append(test)
    return out


def promotable(state: State, hypothesis_id: str, as_of: datetime) -> bool:
    """True when every required test has passed as of ``as_of`` and nothing rejected it."""
    h = state.hypotheses.get(hypothesis_id)
    if h is None or any(r.ts <= as_of for r in h.rejections):
        return False
    return not missing_tests(state, hypothesis_id, as_of)


def hypothesis_status(state: State, hypothesis_id: str, as_of: datetime) -> str | None:
    """"proposed", "testing", "promoted" or "rejected" as of ``as_of``; None if not yet proposed."""
    h = state.hypotheses.get(hypothesis_id)
    if h is None or h.proposed_ts > as_of:
        return None
    last: tuple[datetime, str] | None = None
    for p in h.promotions:
        if p.ts <= as_of and (last is None or p.ts >= last[0]):
            last = (p.ts, "promoted")
    for r in h.rejections:
        if r.ts <= as_of and (last is None or r.ts >= last[0]):
            last = (r.ts, "rejected")
    if last is not None:
        return last[1]
    return "testing" if any(t.ts <= as_of for t in h.tests) else "proposed"


#: Provenance weights of the trust formula (the Braid reference implementation's).
PROVENANCE_WEIGHTS: dict[str, float] = {"user": 1.0, "assistant": 0.85, "tool": 0.95,
                                        "perception": 0.9, "system": 0.8, "dream": 0.6}
#: A hypothesis is promoted when its raw trust reaches this and no test failed.
PROMOTION_THRESHOLD = 0.75
#: The test part of the formula when no test has run.
NO_TEST_SCORE = 0.5
#: The evidence part of the formula when the hypothesis names no delta as evidence.
NO_EVIDENCE_SCORE = 0.5
#: Trust halves every day since the last fact that fed it (read-time decay).
TRUST_HALF_LIFE = timedelta(days=1)


class HypothesisTrust(Struct, frozen=True, kw_only=True):
    """A hypothesis's trust as of a time, by the formula (``hypothesis_trust``), with its parts:
    ``evidence`` the confidences averaged, of the deltas ``sources`` (in that order)."""

    hypothesis_id: str
    raw: float
    confidence: float
    status: str  # "promoted" or "probation"
    evidence: tuple[float, ...]
    sources: tuple[str, ...]
    scores: tuple[float, ...]
    failed: bool
    weight: float
    clock: datetime


def test_score(t: TestResult) -> float:
    """A test's score: (reward + 1) / 2 when it carries a reward in [-1, 1], else 1 passed, 0 failed."""
    if t.reward is not None:
        return (t.reward + 1.0) / 2.0
    return 1.0 if t.passed else 0.0


def named_evidence(state: State, hypothesis_id: str, as_of: datetime) -> list[str]:
    """The ids a hypothesis names as its evidence up to ``as_of``: its ``about``, then each of
    its tests' ``evidence`` (recorded up to ``as_of``), each once, in that order."""
    h = state.hypotheses[hypothesis_id]
    ids = list(h.about)
    for t in h.tests:
        if t.ts <= as_of:
            ids.extend(t.evidence)
    return list(dict.fromkeys(ids))


def _evidence(state: State, h: Hypothesis, s: Subject, as_of: datetime,
              log: Any) -> list[tuple[str, float]]:
    """The deltas whose confidences are the evidence, as (id, confidence): first the deltas
    the hypothesis names (read from ``log``; an id that names no delta there, or one dated after
    ``as_of``, is no evidence), then, only when it names some, the later non-dream deltas that
    cite it as evidence."""
    named = named_evidence(state, h.hypothesis_id, as_of)
    if named and log is None:
        raise ValidationError("log", f"hypothesis {h.hypothesis_id} names evidence "
                              f"({', '.join(named[:3])}{' …' if len(named) > 3 else ''}): its trust "
                              "reads their confidences from the log; pass the log (braid.log, or a "
                              "view's .log)")
    found: list[tuple[str, float]] = []
    for delta_id in named:
        rec = log.get(delta_id) if isinstance(delta_id, str) and delta_id else None
        if rec is not None and rec.delta.ts <= as_of:
            found.append((delta_id, float(rec.delta.confidence)))
    if not found:
        return []
    have = {i for i, _ in found}
    cited: list[Reinforcement] = [r for r in s.reinforcements if r.how == "cited" and r.ts <= as_of
                                  and r.confidence is not None and r.delta_id not in have]
    return found + [(r.delta_id, r.confidence) for r in cited if r.confidence is not None]


def hypothesis_trust(state: State, hypothesis_id: str, as_of: datetime,
                     log: Any = None) -> HypothesisTrust | None:
    """The Braid reference formula, as of ``as_of`` (None before the proposal):

    raw = 0.5 × mean(evidence confidences) + 0.5 × mean(test scores), with 0.5 for either part
    when it has nothing to average; halved when any test failed; times the provenance weight of
    the hypothesis (``PROVENANCE_WEIGHTS``). The evidence is the deltas the hypothesis names (its
    ``about`` and each of its tests' ``evidence``; their confidences are read from ``log``, the
    store or a view of it, needed whenever the hypothesis names any) and, only when it names
    some, the later non-dream deltas that cite it as evidence; never the hypothesis's own stated
    confidence (the reference, elyra's ``TrustEngine.score_for_bead``, averages the confidences
    of the evidence deltas it is given, 0.5 for none). Tests are the latest non-dream result of
    each kind. ``status`` is ``promoted`` when raw ≥ 0.75 and no test failed, else
    ``probation``. ``confidence`` = raw × 0.5^(age / 1 day), age since the last proposal,
    citation (whether or not it counts as evidence) or test.
    """
    h = state.hypotheses.get(hypothesis_id)
    s = state.subjects.get(hypothesis_id)
    if h is None or s is None or h.proposed_ts > as_of:
        return None
    evidence = _evidence(state, h, s, as_of, log)
    latest = [t for t in (_latest(h, k, as_of) for k in TESTS) if t is not None]
    scores = tuple(test_score(t) for t in latest)
    failed = any(not t.passed for t in latest)
    tests_part = sum(scores) / len(scores) if scores else NO_TEST_SCORE
    confidences = tuple(c for _, c in evidence)
    evidence_part = sum(confidences) / len(confidences) if confidences else NO_EVIDENCE_SCORE
    raw = 0.5 * evidence_part + 0.5 * tests_part
    if failed:
        raw *= 0.5
    weight = PROVENANCE_WEIGHTS.get(h.provenance, PROVENANCE_WEIGHTS["system"])
    raw *= weight
    cited = [r.ts for r in s.reinforcements if r.how == "cited" and r.ts <= as_of]
    clock = max([h.proposed_ts, *cited, *(t.ts for t in latest)])
    confidence = raw * 0.5 ** ((as_of - clock) / TRUST_HALF_LIFE)
    status = "promoted" if raw >= PROMOTION_THRESHOLD and not failed else "probation"
    return HypothesisTrust(hypothesis_id=hypothesis_id, raw=raw, confidence=confidence,
                           status=status, evidence=confidences, sources=tuple(i for i, _ in evidence),
                           scores=scores, failed=failed, weight=weight, clock=clock)
