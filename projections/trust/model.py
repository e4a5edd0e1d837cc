"""The trust projection's model: its constants and policy, the payloads (declared in the
registry), the state and ``evolve`` (which checks nothing: what is in the log is a fact)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

import braidlog
from braidlog import Confidence, GenericDelta, Ident, Refs, Text, Ulid, typed_or_none

__all__ = [
    "DREAM_CONFIDENCE", "DREAM_HALF_LIFE", "TESTS", "DEFAULT_REQUIRED_TESTS", "TrustPolicy",
    "DEFAULT_POLICY", "DecayPolicy", "HypothesisProposed", "HypothesisTested", "HypothesisPromoted",
    "HypothesisRejected", "TrustAssessed", "KINDS", "Reinforcement", "Assessment", "Subject",
    "TestResult", "Promotion", "Rejection", "Hypothesis", "State", "evolve",
]

#: The most confidence dream-provenance content starts with (deciders refuse more; the fold clamps).
DREAM_CONFIDENCE = 0.3
#: Dream content halves its confidence this often unless reinforced (the reference: daily).
DREAM_HALF_LIFE = timedelta(days=1)
#: The seed's MVP-safe tests, plus the best-effort tool grounding test.
TESTS = ("consistency", "rederivation", "outcome", "grounding")
#: The tests a hypothesis must pass to be promoted unless it was proposed with others.
DEFAULT_REQUIRED_TESTS = ("consistency", "rederivation", "outcome")

TestKind = Literal["consistency", "rederivation", "outcome", "grounding"]
Reward = Annotated[float, Meta(ge=-1.0, le=1.0)]


class TrustPolicy(Struct, frozen=True, kw_only=True):
    """The knobs of the trust model; queries and deciders take one (``DEFAULT_POLICY``)."""

    dream_confidence: float = DREAM_CONFIDENCE
    dream_half_life: timedelta = DREAM_HALF_LIFE
    required_tests: tuple[str, ...] = DEFAULT_REQUIRED_TESTS


DEFAULT_POLICY = TrustPolicy()


# NOTE: payload class names are stored as tags; never rename one, add a new one.

class DecayPolicy(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Time-based decay: confidence halves every ``half_life_s`` seconds, towards ``floor``."""

    half_life_s: Annotated[float, Meta(gt=0)]
    floor: Confidence = 0.0


class HypothesisProposed(Struct, frozen=True, tag=True, forbid_unknown_fields=True, omit_defaults=True):
    """A hypothesis, first-class; its id is the id of this delta. Confidence is the delta's."""

    hypothesis_id: Ulid
    statement: Text
    required_tests: Annotated[tuple[TestKind, ...], Meta(min_length=1)]
    about: tuple[Ident, ...] = ()
    bead_id: Ident | None = None


class HypothesisTested(Struct, frozen=True, tag=True, forbid_unknown_fields=True, omit_defaults=True):
    """One test result of a hypothesis; ``test_id`` is the id of this delta."""

    hypothesis_id: Ulid
    test_id: Ulid
    test: TestKind
    passed: bool
    evidence: tuple[Ident, ...] = ()
    contradicted_by: tuple[Ident, ...] = ()
    reward: Reward | None = None
    feedback: str | None = None
    detail: str | None = None


class HypothesisPromoted(Struct, frozen=True, tag=True, forbid_unknown_fields=True, omit_defaults=True):
    """A hypothesis passed its required tests and now holds ``confidence``, without decay."""

    hypothesis_id: Ulid
    confidence: Confidence
    tests: tuple[Ulid, ...]


class HypothesisRejected(Struct, frozen=True, tag=True, forbid_unknown_fields=True, omit_defaults=True):
    """A hypothesis was falsified or withdrawn: its confidence is 0 from now on."""

    hypothesis_id: Ulid
    reason: Text


class TrustAssessed(Struct, frozen=True, tag=True, forbid_unknown_fields=True, omit_defaults=True):
    """An explicit trust level for a subject, global (the baseline) or local to this braid."""

    subject_id: Ident
    confidence: Confidence
    scope: Literal["global", "braid"] = "global"
    decay: DecayPolicy | None = None
    reason: str | None = None


HypothesisEvent = HypothesisProposed | HypothesisTested | HypothesisPromoted | HypothesisRejected


def _refers_hypothesis(p: Any) -> list[str]:
    ids = [p.hypothesis_id]
    if isinstance(p, HypothesisProposed):
        ids.extend(p.about)
        if p.bead_id:
            ids.append(p.bead_id)
    elif isinstance(p, HypothesisTested):
        ids.extend(p.evidence)
        ids.extend(p.contradicted_by)
    return ids


braidlog.declare("hypothesis", HypothesisEvent, owner="trust", refers=_refers_hypothesis)
braidlog.declare("trust", TrustAssessed, owner="trust", refers=lambda p: [p.subject_id])

#: The kinds the fold reads whatever their provenance or refs (a bead_write moves a bead's
#: active version, which a later citation of the bead as evidence resolves to).
KINDS = frozenset({"bead_write", "hypothesis", "trust"})


# ---------------------------------------------------------------------------------------- state

class Reinforcement(Struct, kw_only=True):
    """A later delta that cited the subject as evidence ("cited"), or a passed test ("test");
    ``confidence`` is the citing delta's (evidence for the trust formula, added to what a
    hypothesis names)."""

    ts: datetime
    delta_id: str
    how: str
    confidence: float | None = None


class Assessment(Struct, kw_only=True):
    """One ``TrustAssessed`` fact; ``braid_id`` is set for braid-scoped (strand-local) trust."""

    ts: datetime
    delta_id: str
    confidence: float
    braid_id: str | None = None
    decay: DecayPolicy | None = None
    provenance: str
    reason: str | None = None


# gc=False: a state is a tree (no record refers back to what holds it), so no record can be in
# a reference cycle, and the cyclic collector need not track the many a replay allocates.
class Subject(Struct, kw_only=True, gc=False):
    """What trust is kept about: its origin, stated confidence, assessments, reinforcements."""

    subject_id: str
    braid_id: str
    since: datetime
    provenance: str
    confidence: float
    assessments: list[Assessment] = []
    reinforcements: list[Reinforcement] = []


class TestResult(Struct, kw_only=True):
    """One recorded test of a hypothesis."""

    test_id: str
    test: str
    passed: bool
    ts: datetime
    provenance: str
    evidence: list[str] = []
    contradicted_by: list[str] = []
    reward: float | None = None
    feedback: str | None = None
    detail: str | None = None


class Promotion(Struct, kw_only=True):
    """A hypothesis's promotion: from ``ts`` on it holds ``confidence`` without decay."""

    ts: datetime
    delta_id: str
    confidence: float
    tests: list[str] = []


class Rejection(Struct, kw_only=True):
    """A hypothesis's rejection: from ``ts`` on its confidence is 0."""

    ts: datetime
    delta_id: str
    reason: str


class Hypothesis(Struct, kw_only=True, gc=False):
    """A hypothesis with its tests and, once decided, its promotion or rejection."""

    hypothesis_id: str
    statement: str
    braid_id: str
    provenance: str
    proposed_ts: datetime
    required_tests: list[str]
    about: list[str] = []
    bead_id: str | None = None
    knot_id: str | None = None
    tests: list[TestResult] = []
    promotions: list[Promotion] = []
    rejections: list[Rejection] = []


class State(Struct, kw_only=True):
    """Trust subjects and hypotheses by id; ``active`` maps each bead to its active version."""

    subjects: dict[str, Subject] = {}
    hypotheses: dict[str, Hypothesis] = {}
    active: dict[str, str] = {}


def _subject(state: State, sid: str, d: GenericDelta, confidence: float) -> Subject:
    s = state.subjects.get(sid)
    if s is None:
        s = state.subjects[sid] = Subject(subject_id=sid, braid_id=d.braid_id, since=d.ts,
                                          provenance=d.provenance.kind, confidence=confidence)
    return s


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def evolve(state: State, d: GenericDelta) -> State:
    """Track dream content, citations, hypotheses and assessments (in place; never raises).

    The fold shows it only what it reads: ``KINDS``, dream deltas, and deltas citing deltas or
    beads; any other delta would leave the state as it is.
    """
    kind, dream = d.kind, d.provenance.kind == "dream"
    if kind == "bead_write":
        payload = d.payload
        bead_id, version_id = _str(payload.get("bead_id")), _str(payload.get("bead_version_id"))
        if bead_id and version_id:
            state.active[bead_id] = version_id
    if dream and kind not in ("hypothesis", "trust"):
        _subject(state, d.id, d, d.confidence)
        if kind in ("bead_version", "bead_write"):
            version_id = _str(d.payload.get("bead_version_id"))
            if version_id:
                _subject(state, version_id, d, d.confidence)
    if kind == "hypothesis":
        _evolve_hypothesis(state, d)
    elif kind == "trust":
        p = typed_or_none(d)
        if isinstance(p, TrustAssessed):
            s = _subject(state, p.subject_id, d, p.confidence)
            s.assessments.append(Assessment(
                ts=d.ts, delta_id=d.id, confidence=p.confidence,
                braid_id=d.braid_id if p.scope == "braid" else None, decay=p.decay,
                provenance=d.provenance.kind, reason=p.reason))
    elif not dream and d.refs is not None and state.subjects:  # no subject yet: none to cite
        for sid in _cited(state, d.refs):
            cited = state.subjects.get(sid)
            if cited is not None and cited.subject_id != d.id:
                cited.reinforcements.append(Reinforcement(ts=d.ts, delta_id=d.id, how="cited",
                                                      confidence=d.confidence))
    return state


def _cited(state: State, refs: Refs) -> list[str]:
    """Ids cited as evidence: every delta id in refs.deltas, bead versions with role evidence."""
    out = list(dict.fromkeys(refs.deltas)) if refs.deltas else []
    for b in refs.beads:
        if b.role == "evidence":
            vid = b.bead_version_id or state.active.get(b.bead_id)
            if vid and vid not in out:
                out.append(vid)
    return out


def _evolve_hypothesis(state: State, d: GenericDelta) -> None:
    p = typed_or_none(d)
    if isinstance(p, HypothesisProposed):
        if p.hypothesis_id in state.hypotheses:
            return  # the first proposal of an id wins; a later one is not a new fact about it
        state.hypotheses[p.hypothesis_id] = Hypothesis(
            hypothesis_id=p.hypothesis_id, statement=p.statement, braid_id=d.braid_id,
            provenance=d.provenance.kind, proposed_ts=d.ts, required_tests=list(p.required_tests),
            about=list(p.about), bead_id=p.bead_id, knot_id=d.provenance.knot_id)
        _subject(state, p.hypothesis_id, d, d.confidence)
        return
    h = state.hypotheses.get(getattr(p, "hypothesis_id", ""))
    if h is None:
        return
    if isinstance(p, HypothesisTested):
        h.tests.append(TestResult(
            test_id=p.test_id, test=p.test, passed=p.passed, ts=d.ts, provenance=d.provenance.kind,
            evidence=list(p.evidence), contradicted_by=list(p.contradicted_by), reward=p.reward,
            feedback=p.feedback, detail=p.detail))
        s = state.subjects.get(h.hypothesis_id)
        if p.passed and s is not None and d.provenance.kind != "dream":
            s.reinforcements.append(Reinforcement(ts=d.ts, delta_id=d.id, how="test"))
    elif isinstance(p, HypothesisPromoted):
        h.promotions.append(Promotion(ts=d.ts, delta_id=d.id, confidence=p.confidence,
                                      tests=list(p.tests)))
    elif isinstance(p, HypothesisRejected):
        h.rejections.append(Rejection(ts=d.ts, delta_id=d.id, reason=p.reason))
