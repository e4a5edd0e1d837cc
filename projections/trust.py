"""Trust and hypotheses, after the Braid seed ("Trust model", "Hypotheses and tests").

Trust is orthogonal to provenance: provenance says where a delta came from, trust says how much
to believe it. A *subject* is anything trust is kept for: a dream-provenance delta, a bead version
written by a dream, a hypothesis, or any id an explicit ``TrustAssessed`` names.

Dream is hypothesis-first. Dream-provenance content is stored and recallable, but its confidence
starts at ``DREAM_CONFIDENCE`` (0.3) at most and halves every ``dream_half_life`` (1 day) unless
it is reinforced: a later non-dream delta that cites it as evidence (in ``refs.deltas``, or in
``refs.beads`` with role ``"evidence"``), or a passed test of the hypothesis. Reinforcement
restarts the decay clock; only promotion through tests lifts dream content above the cap.

A hypothesis's id is the id of the delta that proposed it, so any delta can cite it. Tests
(consistency, rederivation, outcome, and the best-effort grounding) are ``hypothesis`` deltas;
promotion requires every test the hypothesis was proposed with to have passed (the latest result
of each counts). A dream can propose, but never test or promote: no self-reinforcement.

Decay and promotability are pure functions of the state and an explicit ``as_of`` time; events
after ``as_of`` are ignored, and ``braid.at(t).state("trust")`` gives the state at any point.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

import braidlog
from braidlog import BraidlogError, Context, Decider, GenericDelta, Refs, Rejected, ValidationError

__all__ = [
    "DREAM_CONFIDENCE", "DREAM_HALF_LIFE", "TESTS", "DEFAULT_REQUIRED_TESTS",
    "TrustPolicy", "DEFAULT_POLICY",
    "DecayPolicy", "HypothesisProposed", "HypothesisTested", "HypothesisPromoted",
    "HypothesisRejected", "TrustAssessed",
    "Reinforcement", "Assessment", "Subject", "TestResult", "Promotion", "Rejection", "Hypothesis",
    "State", "evolve",
    "ProposeHypothesis", "RecordTest", "PromoteHypothesis", "RejectHypothesis", "AssessTrust",
    "decide", "dream_confidence",
    "TrustView", "trust_of", "confidence_at", "hypothesis_status", "missing_tests", "promotable",
    "PROVENANCE_WEIGHTS", "PROMOTION_THRESHOLD", "NO_TEST_SCORE", "NO_EVIDENCE_SCORE", "TRUST_HALF_LIFE",
    "HypothesisTrust", "hypothesis_trust", "test_score",
    "decider", "PROJECTIONS",
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
Ident = Annotated[str, Meta(min_length=1, max_length=120)]
Ulid = Annotated[str, Meta(pattern="^[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
Text = Annotated[str, Meta(min_length=1)]
Confidence = Annotated[float, Meta(ge=0.0, le=1.0)]
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
    ``confidence`` is the citing delta's (evidence for the trust formula)."""

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


def _typed(d: GenericDelta) -> Any:
    try:
        return braidlog.typed(d)
    except (BraidlogError, msgspec.MsgspecError, TypeError, ValueError, KeyError):
        return None


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
        bead_id, version_id = _str(d.payload.get("bead_id")), _str(d.payload.get("bead_version_id"))
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
        p = _typed(d)
        if isinstance(p, TrustAssessed):
            s = _subject(state, p.subject_id, d, p.confidence)
            s.assessments.append(Assessment(
                ts=d.ts, delta_id=d.id, confidence=p.confidence,
                braid_id=d.braid_id if p.scope == "braid" else None, decay=p.decay,
                provenance=d.provenance.kind, reason=p.reason))
    elif not dream and d.refs is not None:
        for sid in _cited(state, d.refs):
            s = state.subjects.get(sid)
            if s is not None and s.subject_id != d.id:
                s.reinforcements.append(Reinforcement(ts=d.ts, delta_id=d.id, how="cited",
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
    p = _typed(d)
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


# ------------------------------------------------------------------------------------- commands

class ProposeHypothesis(braidlog.Command, frozen=True, kw_only=True):
    """Propose a hypothesis; ``required_tests`` defaults to the policy's (all three MVP tests)."""

    statement: str
    hypothesis_id: str | None = None
    required_tests: tuple[str, ...] | None = None
    about: tuple[str, ...] = ()
    bead_id: str | None = None
    confidence: float | None = None


class RecordTest(braidlog.Command, frozen=True, kw_only=True):
    """Record one test result of a hypothesis."""

    hypothesis_id: str
    test: str
    passed: bool
    test_id: str | None = None
    evidence: tuple[str, ...] = ()
    contradicted_by: tuple[str, ...] = ()
    reward: float | None = None
    feedback: str | None = None
    detail: str | None = None


class PromoteHypothesis(braidlog.Command, frozen=True, kw_only=True):
    """Promote a hypothesis whose required tests have all passed."""

    hypothesis_id: str
    confidence: float | None = None


class RejectHypothesis(braidlog.Command, frozen=True, kw_only=True):
    """Reject (falsify or withdraw) a hypothesis."""

    hypothesis_id: str
    reason: str


class AssessTrust(braidlog.Command, frozen=True, kw_only=True):
    """Set a subject's trust, as the global baseline or (scope="braid") for this braid only."""

    subject_id: str
    confidence: float
    scope: str = "global"
    decay: DecayPolicy | None = None
    reason: str | None = None


def dream_confidence(ctx: Context, requested: float | None, *, field: str = "confidence",
                     policy: TrustPolicy = DEFAULT_POLICY) -> float | None:
    """The confidence of a delta decided in ``ctx``: dream provenance is capped at the policy's.

    With dream provenance an unstated confidence becomes ``min(ctx.confidence, cap)`` and a
    stated one above the cap is refused; otherwise the stated one, else the context's.
    """
    if requested is not None and not 0.0 <= requested <= 1.0:
        raise ValidationError(field, f"must be a number in [0, 1], got {requested!r}")
    if ctx.provenance.kind != "dream":
        return ctx.confidence if requested is None else requested  # None: the kind's default
    cap = policy.dream_confidence
    if requested is None:
        return cap if ctx.confidence is None else min(ctx.confidence, cap)
    if requested > cap:
        raise ValidationError(
            field, f"dream-provenance content starts at confidence {cap} at most, got {requested}; "
                   "it rises only by promotion of a hypothesis that passed its tests")
    return requested


def _ulid(value: str | None, field: str, ctx: Context) -> str:
    if value is None:
        return ctx.new_id()
    try:
        return msgspec.convert(value, Ulid)
    except msgspec.ValidationError:
        raise ValidationError(field, f"must be a ULID (it becomes the id of the delta), got {value!r}") from None


def _hypothesis(state: State, hid: str) -> Hypothesis:
    h = state.hypotheses.get(hid)
    if h is None:
        raise Rejected(f"no hypothesis {hid!r}; propose it first with ProposeHypothesis")
    return h


def _no_dream(ctx: Context, what: str) -> None:
    if ctx.provenance.kind == "dream":
        raise Rejected(f"a dream cannot {what}: dream content is hypothesis-first and never "
                       "validates itself; run this with another provenance (tool, user, system ...)")


def _check(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    braidlog.REGISTRY[kind].check(payload)
    return payload


def decide(command: Any, state: State, ctx: Context, policy: TrustPolicy = DEFAULT_POLICY
           ) -> list[GenericDelta]:
    """Decide a trust or hypothesis command: [] when already done; Rejected/ValidationError to refuse."""
    if isinstance(command, ProposeHypothesis):
        return _propose(command, state, ctx, policy)
    if isinstance(command, RecordTest):
        return _record_test(command, state, ctx)
    if isinstance(command, PromoteHypothesis):
        return _promote(command, state, ctx, policy)
    if isinstance(command, RejectHypothesis):
        return _reject(command, state, ctx)
    if isinstance(command, AssessTrust):
        return _assess(command, state, ctx, policy)
    raise ValidationError("command", f"trust cannot decide {type(command).__name__}; use one of "
                          "ProposeHypothesis, RecordTest, PromoteHypothesis, RejectHypothesis, AssessTrust")


def _propose(c: ProposeHypothesis, state: State, ctx: Context, policy: TrustPolicy) -> list[GenericDelta]:
    required = tuple(c.required_tests) if c.required_tests is not None else policy.required_tests
    unknown = [t for t in required if t not in TESTS]
    if not required or unknown:
        raise ValidationError("required_tests", f"must be a non-empty selection of {', '.join(TESTS)}"
                              + (f"; unknown {unknown}" if unknown else ""))
    required = tuple(dict.fromkeys(required))
    if c.hypothesis_id is not None and c.hypothesis_id in state.hypotheses:
        h = state.hypotheses[c.hypothesis_id]
        if h.statement == c.statement and tuple(h.required_tests) == required:
            return []
        raise Rejected(f"hypothesis {c.hypothesis_id} already exists with another statement or "
                       "tests; propose the new one under a new id")
    hid = _ulid(c.hypothesis_id, "hypothesis_id", ctx)
    confidence = dream_confidence(ctx, c.confidence, policy=policy)
    payload = _check("hypothesis", msgspec.to_builtins(HypothesisProposed(
        hypothesis_id=hid, statement=c.statement, required_tests=required, about=tuple(c.about),
        bead_id=c.bead_id)))
    d = ctx.delta("hypothesis", payload, confidence=confidence)
    return [msgspec.structs.replace(d, id=hid)]


def _record_test(c: RecordTest, state: State, ctx: Context) -> list[GenericDelta]:
    h = _hypothesis(state, c.hypothesis_id)
    if c.test_id is not None:
        for t in h.tests:
            if t.test_id == c.test_id:
                if (t.test, t.passed) == (c.test, c.passed):
                    return []
                raise Rejected(f"test {c.test_id} of hypothesis {h.hypothesis_id} is already "
                               f"recorded as {t.test} passed={t.passed}; record a new test instead")
    _no_dream(ctx, "test a hypothesis")
    if h.rejections:
        raise Rejected(f"hypothesis {h.hypothesis_id} was rejected ({h.rejections[-1].reason}); "
                       "propose a new hypothesis to test it again")
    if c.test not in TESTS:
        raise ValidationError("test", f"must be one of {', '.join(TESTS)}, got {c.test!r}")
    if c.test == "consistency" and c.passed and c.contradicted_by:
        raise ValidationError("passed", "a consistency test cannot pass while contradicted_by names "
                              "high-confidence semantic memory it contradicts; record passed=False")
    if c.test in ("rederivation", "grounding") and c.passed and not c.evidence:
        raise ValidationError("evidence", f"a passed {c.test} test must name its evidence: the "
                              "microagent or tool deltas/beads that reproduced the hypothesis")
    if c.test == "outcome":
        if c.reward is None and not c.feedback:
            raise ValidationError("reward", "an outcome test needs a reward in [-1, 1] or user feedback")
        if c.passed and c.reward is not None and c.reward < 0:
            raise ValidationError("passed", f"an outcome test with negative reward {c.reward} cannot pass")
    tid = _ulid(c.test_id, "test_id", ctx)
    payload = _check("hypothesis", msgspec.to_builtins(HypothesisTested(
        hypothesis_id=h.hypothesis_id, test_id=tid, test=c.test, passed=c.passed,  # type: ignore[arg-type]
        evidence=tuple(c.evidence), contradicted_by=tuple(c.contradicted_by), reward=c.reward,
        feedback=c.feedback, detail=c.detail)))
    d = ctx.delta("hypothesis", payload, refs=Refs(deltas=(h.hypothesis_id,)))
    return [msgspec.structs.replace(d, id=tid)]


def _promote(c: PromoteHypothesis, state: State, ctx: Context, policy: TrustPolicy) -> list[GenericDelta]:
    h = _hypothesis(state, c.hypothesis_id)
    if h.rejections:
        raise Rejected(f"hypothesis {h.hypothesis_id} was rejected ({h.rejections[-1].reason}); "
                       "it cannot be promoted")
    if h.promotions:
        return []
    _no_dream(ctx, "promote a hypothesis")
    missing = missing_tests(state, h.hypothesis_id, ctx.now)
    if missing:
        raise Rejected(f"hypothesis {h.hypothesis_id} cannot be promoted: required test(s) "
                       f"{', '.join(missing)} have not passed; record them with RecordTest")
    scored = hypothesis_trust(state, h.hypothesis_id, ctx.now)
    if scored is None or scored.status != "promoted":
        raise Rejected(f"hypothesis {h.hypothesis_id} stays on probation: raw trust "
                       f"{scored.raw if scored else 0:.4f} (needs {PROMOTION_THRESHOLD} with no test "
                       "failed); more evidence or passed tests raise it")
    confidence = scored.raw if c.confidence is None else min(c.confidence, scored.raw)
    if not 0.0 <= confidence <= 1.0:
        raise ValidationError("confidence", f"must be a number in [0, 1], got {confidence!r}")
    passed = [_latest(h, t, ctx.now).test_id for t in h.required_tests]  # type: ignore[union-attr]
    payload = _check("hypothesis", msgspec.to_builtins(HypothesisPromoted(
        hypothesis_id=h.hypothesis_id, confidence=confidence, tests=tuple(passed))))
    return [ctx.delta("hypothesis", payload, refs=Refs(deltas=(h.hypothesis_id, *passed)))]


def _reject(c: RejectHypothesis, state: State, ctx: Context) -> list[GenericDelta]:
    h = _hypothesis(state, c.hypothesis_id)
    if h.rejections:
        return []
    payload = _check("hypothesis", msgspec.to_builtins(
        HypothesisRejected(hypothesis_id=h.hypothesis_id, reason=c.reason)))
    return [ctx.delta("hypothesis", payload, refs=Refs(deltas=(h.hypothesis_id,)))]


def _assess(c: AssessTrust, state: State, ctx: Context, policy: TrustPolicy) -> list[GenericDelta]:
    if c.scope not in ("global", "braid"):
        raise ValidationError("scope", f"must be 'global' (the baseline) or 'braid' (this braid only), "
                              f"got {c.scope!r}")
    if not 0.0 <= c.confidence <= 1.0:
        raise ValidationError("confidence", f"must be a number in [0, 1], got {c.confidence!r}")
    s = state.subjects.get(c.subject_id)
    if s is None and not _known_to_log(ctx, c.subject_id):
        raise Rejected(f"no subject {c.subject_id!r}: trust is assessed for a delta, a bead, a bead "
                       "version or a hypothesis the log knows")
    cap = policy.dream_confidence
    if ctx.provenance.kind == "dream" and c.confidence > cap:
        raise ValidationError("confidence", f"a dream assesses trust at {cap} at most, got {c.confidence}")
    if s is not None and s.provenance == "dream" and c.confidence > cap and not _promoted(state, s.subject_id):
        raise Rejected(f"{c.subject_id} is dream content: its trust rises above {cap} only by promoting "
                       "a hypothesis that passed its tests (ProposeHypothesis, RecordTest, PromoteHypothesis)")
    braid = ctx.braid_id if c.scope == "braid" else None
    if s is not None:
        last = next((a for a in reversed(s.assessments) if a.braid_id == braid), None)
        if last is not None and (last.confidence, last.decay, last.reason) == (c.confidence, c.decay, c.reason):
            return []
    payload = _check("trust", msgspec.to_builtins(TrustAssessed(
        subject_id=c.subject_id, confidence=c.confidence, scope=c.scope,  # type: ignore[arg-type]
        decay=c.decay, reason=c.reason)))
    return [ctx.delta("trust", payload)]


def _known_to_log(ctx: Context, sid: str) -> bool:
    log = ctx.log
    if log is None:
        return False
    return log.get(sid) is not None or next(iter(log.scan_refs(sid, limit=1)), None) is not None


def _promoted(state: State, sid: str) -> bool:
    h = state.hypotheses.get(sid)
    return h is not None and bool(h.promotions)


# ---------------------------------------------------------------------------------------- queries

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
#: The evidence part of the formula when no delta is evidence for the hypothesis.
NO_EVIDENCE_SCORE = 0.5
#: Trust halves every day since the last fact that fed it (read-time decay).
TRUST_HALF_LIFE = timedelta(days=1)


class HypothesisTrust(Struct, frozen=True, kw_only=True):
    """A hypothesis's trust as of a time, by the formula (``hypothesis_trust``), with its parts."""

    hypothesis_id: str
    raw: float
    confidence: float
    status: str  # "promoted" or "probation"
    evidence: tuple[float, ...]
    scores: tuple[float, ...]
    failed: bool
    weight: float
    clock: datetime


def test_score(t: TestResult) -> float:
    """A test's score: (reward + 1) / 2 when it carries a reward in [-1, 1], else 1 passed, 0 failed."""
    if t.reward is not None:
        return (t.reward + 1.0) / 2.0
    return 1.0 if t.passed else 0.0


def hypothesis_trust(state: State, hypothesis_id: str, as_of: datetime) -> HypothesisTrust | None:
    """The Braid reference formula, as of ``as_of`` (None before the proposal):

    raw = 0.5 × mean(evidence confidences) + 0.5 × mean(test scores), with 0.5 for either part
    when it has nothing to average; halved when any test failed; times the provenance weight of
    the hypothesis (``PROVENANCE_WEIGHTS``). Evidence is the confidence of every non-dream delta
    the log links to the hypothesis as evidence (citing it in ``refs.deltas``, or its bead in
    ``refs.beads`` with role ``evidence``), never the hypothesis's own stated confidence (the
    reference, elyra's ``TrustEngine.score_for_bead``, averages its evidence deltas alone and
    takes 0.5 when there are none); tests are the latest non-dream result of each kind.
    ``status`` is ``promoted`` when raw ≥ 0.75 and no test failed, else ``probation``.
    ``confidence`` = raw × 0.5^(age / 1 day), age since the last proposal, citation or test.
    """
    h = state.hypotheses.get(hypothesis_id)
    s = state.subjects.get(hypothesis_id)
    if h is None or s is None or h.proposed_ts > as_of:
        return None
    cited = [r for r in s.reinforcements if r.how == "cited" and r.ts <= as_of]
    evidence = tuple(r.confidence for r in cited if r.confidence is not None)
    latest = [t for t in (_latest(h, k, as_of) for k in TESTS) if t is not None]
    scores = tuple(test_score(t) for t in latest)
    failed = any(not t.passed for t in latest)
    tests_part = sum(scores) / len(scores) if scores else NO_TEST_SCORE
    evidence_part = sum(evidence) / len(evidence) if evidence else NO_EVIDENCE_SCORE
    raw = 0.5 * evidence_part + 0.5 * tests_part
    if failed:
        raw *= 0.5
    weight = PROVENANCE_WEIGHTS.get(h.provenance, PROVENANCE_WEIGHTS["system"])
    raw *= weight
    clock = max([h.proposed_ts, *(r.ts for r in cited), *(t.ts for t in latest)])
    confidence = raw * 0.5 ** ((as_of - clock) / TRUST_HALF_LIFE)
    status = "promoted" if raw >= PROMOTION_THRESHOLD and not failed else "probation"
    return HypothesisTrust(hypothesis_id=hypothesis_id, raw=raw, confidence=confidence,
                           status=status, evidence=evidence, scores=scores, failed=failed,
                           weight=weight, clock=clock)


def decider(policy: TrustPolicy = DEFAULT_POLICY) -> Decider:
    """The trust projection deciding under ``policy`` (the cap, half-life and required tests)."""
    return Decider(name="trust", version=2, initial=State(), evolve=evolve, state_type=State,
                   kinds=KINDS, refs=frozenset({"deltas", "beads"}), provenances=frozenset({"dream"}),
                   local=True, decide=lambda command, state, ctx: decide(command, state, ctx, policy))


PROJECTIONS = [decider()]
