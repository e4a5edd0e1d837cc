"""The trust commands and ``decide``: the deltas a command appends against the state.

The rules those deltas must obey are ``rules``'s, run at the boundary on every path a delta
takes in (``execute`` included); ``decide`` refuses early, with the command's own field names,
what the boundary would refuse, and builds the deltas.
"""

from __future__ import annotations

from typing import Any, cast

import msgspec

import braidlog
from braidlog import Context, GenericDelta, Refs, Rejected, ValidationError, check_payload

from .model import (
    DEFAULT_POLICY,
    TESTS,
    DecayPolicy,
    Hypothesis,
    HypothesisPromoted,
    HypothesisProposed,
    HypothesisRejected,
    HypothesisTested,
    State,
    TestKind,
    TrustAssessed,
    TrustPolicy,
    Ulid,
)
from .queries import PROMOTION_THRESHOLD, _latest, hypothesis_trust, missing_tests
from .rules import test_rules

__all__ = ["ProposeHypothesis", "RecordTest", "PromoteHypothesis", "RejectHypothesis", "AssessTrust",
           "decide", "dream_confidence"]

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
    required = cast("tuple[TestKind, ...]", tuple(dict.fromkeys(required)))  # each checked in TESTS above
    if c.hypothesis_id is not None and c.hypothesis_id in state.hypotheses:
        h = state.hypotheses[c.hypothesis_id]
        if h.statement == c.statement and tuple(h.required_tests) == required:
            return []
        raise Rejected(f"hypothesis {c.hypothesis_id} already exists with another statement or "
                       "tests; propose the new one under a new id")
    hid = _ulid(c.hypothesis_id, "hypothesis_id", ctx)
    confidence = dream_confidence(ctx, c.confidence, policy=policy)
    payload = check_payload("hypothesis", msgspec.to_builtins(HypothesisProposed(
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
    test_rules(c, field="")
    tid = _ulid(c.test_id, "test_id", ctx)
    payload = check_payload("hypothesis", msgspec.to_builtins(HypothesisTested(
        hypothesis_id=h.hypothesis_id, test_id=tid, test=c.test, passed=c.passed,  # type: ignore[arg-type]  # test: checked in TESTS above
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
    scored = hypothesis_trust(state, h.hypothesis_id, ctx.now, ctx.log)
    if scored is None or scored.status != "promoted":
        raise Rejected(f"hypothesis {h.hypothesis_id} stays on probation: raw trust "
                       f"{scored.raw if scored else 0:.4f} (needs {PROMOTION_THRESHOLD} with no test "
                       "failed); more evidence or passed tests raise it")
    confidence = scored.raw if c.confidence is None else min(c.confidence, scored.raw)
    if not 0.0 <= confidence <= 1.0:
        raise ValidationError("confidence", f"must be a number in [0, 1], got {confidence!r}")
    passed = [_latest(h, t, ctx.now).test_id for t in h.required_tests]  # type: ignore[union-attr]  # every required test passed: checked above
    payload = check_payload("hypothesis", msgspec.to_builtins(HypothesisPromoted(
        hypothesis_id=h.hypothesis_id, confidence=confidence, tests=tuple(passed))))
    return [ctx.delta("hypothesis", payload, refs=Refs(deltas=(h.hypothesis_id, *passed)))]


def _reject(c: RejectHypothesis, state: State, ctx: Context) -> list[GenericDelta]:
    h = _hypothesis(state, c.hypothesis_id)
    if h.rejections:
        return []
    payload = check_payload("hypothesis", msgspec.to_builtins(
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
    payload = check_payload("trust", msgspec.to_builtins(TrustAssessed(
        subject_id=c.subject_id, confidence=c.confidence, scope=c.scope,  # type: ignore[arg-type]  # scope: checked against the schema by check_payload
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
