"""The trust projection's rules (Braid seed 004, "Trust model", "Hypotheses and tests"), checked
where deltas enter.

Each rule is one function named after it, raising ``Rejected`` (``refuse``) or
``ValidationError`` whose message starts with the rule's name. ``checker(policy)`` builds the
check the boundary runs inside the write transaction for every delta the trust projection
reads, whatever the path (``Braid.append``, ``append_batch``, ``execute``, the CLI's ``append``
and ``import``, MCP): a raw delta obeys what ``decide`` would have decided.

| rule | kinds | seed |
|---|---|---|
| ``id_is_delta_id`` | hypothesis (proposed, tested) | (choice: a hypothesis's and a test's id is its delta's) |
| ``proposed_once`` | hypothesis (proposed) | hypotheses are first-class: one id, one statement |
| ``dream_starts_low`` | any delta of dream provenance | "Dream is hypothesis-first ... low-confidence by default" |
| ``hypothesis_known`` | hypothesis (tested, promoted, rejected) | "Hypotheses ... can be tested before promotion" |
| ``rejection_is_final`` | hypothesis (tested, promoted, rejected) | (choice 17) |
| ``dream_never_validates`` | hypothesis (tested, promoted) | dream "decays unless reinforced": no self-reinforcement |
| ``test_rules`` | hypothesis (tested) | the MVP-safe tests: consistency, re-derivation, outcome |
| ``required_tests_passed`` | hypothesis (promoted) | ``promotion_rules``: "tests required to promote" |
| ``promotion_threshold`` | hypothesis (promoted) | the reference's promote threshold 0.75 with no failed test |
| ``promoted_once`` | hypothesis (promoted) | |
| ``subject_known`` | trust | trust is kept for what the log holds |
| ``dream_rises_by_promotion`` | trust | "without forbidding promotion": dream content rises only by promotion |
"""

from __future__ import annotations

from typing import Any

import braidlog
from braidlog import Boundary, Check, GenericDelta, ValidationError, refuse

from .model import (
    DEFAULT_POLICY,
    Hypothesis,
    HypothesisPromoted,
    HypothesisProposed,
    HypothesisRejected,
    HypothesisTested,
    State,
    TrustAssessed,
    TrustPolicy,
)
from .queries import PROMOTION_THRESHOLD, _latest, hypothesis_trust, missing_tests

__all__ = ["checker", "id_is_delta_id", "proposed_once", "dream_starts_low", "hypothesis_known",
           "rejection_is_final", "dream_never_validates", "test_rules", "required_tests_passed",
           "promotion_threshold", "promoted_once", "subject_known", "dream_rises_by_promotion"]

EPSILON = 1e-9


def id_is_delta_id(d: GenericDelta, value: str, field: str) -> None:
    """A hypothesis's id (a test's id) is the id of the delta that proposed (recorded) it."""
    if value != d.id:
        raise ValidationError(f"payload.{field}", f"id_is_delta_id: must be the delta's id {d.id!r}, "
                                                  f"not {value!r}")


def proposed_once(state: State, hid: str) -> None:
    """A hypothesis is proposed once; a new statement is a new hypothesis under a new id."""
    if hid in state.hypotheses:
        raise refuse("proposed_once", f"hypothesis {hid} is already proposed; propose the new one "
                                      "under a new id")


def dream_starts_low(d: GenericDelta, policy: TrustPolicy) -> None:
    """Dream-provenance content states a confidence of the policy's cap (0.3) at most."""
    cap = policy.dream_confidence
    if d.provenance.kind == "dream" and d.confidence > cap + EPSILON:
        raise ValidationError("confidence", f"dream_starts_low: dream-provenance content starts at "
                                            f"confidence {cap} at most, got {d.confidence}; it rises only "
                                            "by promotion of a hypothesis that passed its tests")


def hypothesis_known(state: State, hid: str, verb: str) -> Hypothesis:
    """A test, promotion or rejection names a hypothesis proposed before it."""
    h = state.hypotheses.get(hid)
    if h is None:
        raise refuse("hypothesis_known", f"cannot {verb} hypothesis {hid!r}: it was never proposed; "
                                         "propose it first (a hypothesis delta HypothesisProposed)")
    return h


def rejection_is_final(h: Hypothesis, verb: str) -> None:
    """A rejected hypothesis is neither tested, promoted nor rejected again."""
    if h.rejections:
        raise refuse("rejection_is_final", f"cannot {verb} hypothesis {h.hypothesis_id}: it was rejected "
                                           f"({h.rejections[-1].reason}); propose a new hypothesis")


def dream_never_validates(d: GenericDelta, verb: str) -> None:
    """A dream proposes but never tests or promotes: no self-reinforcement."""
    if d.provenance.kind == "dream":
        raise refuse("dream_never_validates", f"a dream cannot {verb} a hypothesis: dream content is "
                                              "hypothesis-first and never validates itself; use another "
                                              "provenance (tool, user, system ...)")


def test_rules(p: Any, field: str = "payload.") -> None:
    """Consistency cannot pass while contradicted; re-derivation and grounding name their
    evidence to pass; outcome needs a reward or feedback, and cannot pass with a negative reward.

    ``p`` is a HypothesisTested payload at the boundary, or the command a decider is given
    (``field=""``: its fields are named as the command names them, without the rule's name)."""
    rule = "test_rules: " if field else ""
    if p.test == "consistency" and p.passed and p.contradicted_by:
        raise ValidationError(f"{field}passed", f"{rule}a consistency test cannot pass while "
                                                "contradicted_by names memory it contradicts")
    if p.test in ("rederivation", "grounding") and p.passed and not p.evidence:
        raise ValidationError(f"{field}evidence", f"{rule}a passed {p.test} test must name its "
                                                  "evidence (the microagent or tool deltas/beads)")
    if p.test == "outcome":
        if p.reward is None and not p.feedback:
            raise ValidationError(f"{field}reward", f"{rule}an outcome test needs a reward in "
                                                    "[-1, 1] or user feedback")
        if p.passed and p.reward is not None and p.reward < 0:
            raise ValidationError(f"{field}passed", f"{rule}an outcome test with negative reward "
                                                    f"{p.reward} cannot pass")


def required_tests_passed(state: State, h: Hypothesis, d: GenericDelta, p: HypothesisPromoted) -> None:
    """Every test the hypothesis was proposed with has passed (its latest non-dream result up to
    the promotion), and the promotion names those results."""
    missing = missing_tests(state, h.hypothesis_id, d.ts)
    if missing:
        raise refuse("required_tests_passed", f"hypothesis {h.hypothesis_id} cannot be promoted: required "
                                              f"test(s) {', '.join(missing)} have not passed")
    passed = {_latest(h, t, d.ts).test_id for t in h.required_tests}  # type: ignore[union-attr]  # every required test passed: checked above
    if set(p.tests) != passed:
        raise ValidationError("payload.tests", f"required_tests_passed: must name the passed results "
                                               f"{sorted(passed)}, not {sorted(p.tests)}")


def promotion_threshold(state: State, h: Hypothesis, d: GenericDelta, p: HypothesisPromoted,
                        at: Boundary | None = None) -> None:
    """Raw trust reaches 0.75 with no failed test; the promoted confidence is at most raw trust
    (the evidence the hypothesis names is read from the log as of just before the promotion)."""
    scored = hypothesis_trust(state, h.hypothesis_id, d.ts, at.log if at is not None else None)
    if scored is None or scored.status != "promoted":
        raw = scored.raw if scored else 0.0
        raise refuse("promotion_threshold", f"hypothesis {h.hypothesis_id} stays on probation: raw trust "
                                            f"{raw:.4f} (needs {PROMOTION_THRESHOLD} with no test failed)")
    if p.confidence > scored.raw + EPSILON:
        raise ValidationError("payload.confidence", f"promotion_threshold: a promotion holds at most the "
                                                    f"raw trust {scored.raw:.4f}, not {p.confidence}")


def promoted_once(h: Hypothesis) -> None:
    """A hypothesis is promoted once."""
    if h.promotions:
        raise refuse("promoted_once", f"hypothesis {h.hypothesis_id} is already promoted")


def subject_known(state: State, sid: str, at: Boundary | None) -> None:
    """Trust is assessed for a delta, bead, bead version or hypothesis the log knows."""
    if sid in state.subjects or sid in state.active:
        return
    log = at.log if at is not None else None
    if log is not None and (log.get(sid) is not None
                            or next(iter(log.scan_refs(sid, limit=1)), None) is not None):
        return
    raise refuse("subject_known", f"no subject {sid!r}: trust is assessed for a delta, a bead, a bead "
                                  "version or a hypothesis the log knows")


def dream_rises_by_promotion(state: State, p: TrustAssessed, policy: TrustPolicy) -> None:
    """Dream content is assessed above the cap only once a hypothesis about it was promoted."""
    s = state.subjects.get(p.subject_id)
    h = state.hypotheses.get(p.subject_id)
    if (s is not None and s.provenance == "dream" and p.confidence > policy.dream_confidence + EPSILON
            and not (h is not None and h.promotions)):
        raise refuse("dream_rises_by_promotion", f"{p.subject_id} is dream content: its trust rises above "
                                                 f"{policy.dream_confidence} only by promoting a hypothesis "
                                                 "that passed its tests")


# ------------------------------------------------------------------------------- checks by kind

def _hypothesis(state: State, d: GenericDelta, p: Any, at: Boundary | None, policy: TrustPolicy) -> None:
    if isinstance(p, HypothesisProposed):
        id_is_delta_id(d, p.hypothesis_id, "hypothesis_id")
        proposed_once(state, p.hypothesis_id)
        return
    verbs: dict[type, str] = {HypothesisTested: "test", HypothesisPromoted: "promote", HypothesisRejected: "reject"}
    verb = verbs[type(p)]
    h = hypothesis_known(state, p.hypothesis_id, verb)
    rejection_is_final(h, verb)
    if isinstance(p, HypothesisTested):
        id_is_delta_id(d, p.test_id, "test_id")
        dream_never_validates(d, "test")
        test_rules(p)
    elif isinstance(p, HypothesisPromoted):
        dream_never_validates(d, "promote")
        promoted_once(h)
        required_tests_passed(state, h, d, p)
        promotion_threshold(state, h, d, p, at)


def _trust(state: State, d: GenericDelta, p: TrustAssessed, at: Boundary | None, policy: TrustPolicy) -> None:
    subject_known(state, p.subject_id, at)
    dream_rises_by_promotion(state, p, policy)


def checker(policy: TrustPolicy = DEFAULT_POLICY) -> Check:
    """The boundary check of a trust projection deciding under ``policy``."""

    def check(state: State, d: GenericDelta, at: Boundary | None = None) -> None:
        dream_starts_low(d, policy)
        if d.kind == "hypothesis":
            _hypothesis(state, d, braidlog.typed(d), at, policy)
        elif d.kind == "trust":
            _trust(state, d, braidlog.typed(d), at, policy)

    return check
