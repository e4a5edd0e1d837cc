"""Trust and hypotheses: dream defaults, decay, reinforcement, tests, promotion, assessments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

import braidlog
from braidlog import BeadRef, Context, Provenance, Refs, Rejected, ValidationError
from braidlog.projections import beads, knots, trust
from braidlog.projections.trust import (
    AssessTrust,
    DecayPolicy,
    PromoteHypothesis,
    ProposeHypothesis,
    RecordTest,
    RejectHypothesis,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
B = "b1"
DAY = timedelta(days=1)
HALF = trust.DREAM_HALF_LIFE  # one day: trust halves daily (the Braid reference)
ALL = beads.PROJECTIONS + knots.PROJECTIONS + trust.PROJECTIONS


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def braid(tmp_path):
    b = braidlog.open(tmp_path / "store", projections=ALL)
    yield b
    b.close()


def run(b, command, when=T0, provenance="system", decider="trust", braid_id=B, **kw):
    when = at(when) if isinstance(when, (int, float)) else when
    return b.execute(decider, command, braid_id=braid_id, provenance=provenance, now=when, **kw)


def refused(b, command, error, match, when=T0 + 30 * DAY, provenance="system", braid_id=B):
    """Run a command that must be refused; assert nothing was appended."""
    head = b.head()
    with pytest.raises(error, match=match):
        run(b, command, when, provenance, braid_id=braid_id)
    assert b.head() == head


def propose(b, when=T0, provenance="dream", **kw):
    kw.setdefault("statement", "The user prefers mornings.")
    return run(b, ProposeHypothesis(**kw), when, provenance)[0].delta.id


def conf(b, sid, when, **kw):
    return trust.confidence_at(b.state("trust"), sid, when, **kw)


def pass_all(b, hid, when, tests=trust.DEFAULT_REQUIRED_TESTS):
    # the microagent run that rederived the hypothesis cites it: evidence at confidence 0.9
    ev = b.append(braidlog.delta(B, "microagent", {"name": "rederive"}, ts=when, confidence=0.9,
                                 refs=Refs(deltas=(hid,))))
    evidence = b.log.read(ev).delta.id
    for t in tests:
        extra = {"evidence": (evidence,)} if t in ("rederivation", "grounding") else {}
        if t == "outcome":
            extra = {"reward": 1.0}
        run(b, RecordTest(hypothesis_id=hid, test=t, passed=True, **extra), when, "tool")


# ------------------------------------------------------------------------------- dream defaults

def test_a_dream_hypothesis_starts_at_the_dream_cap(braid):
    hid = propose(braid)
    d = braid.log.get(hid).delta
    assert d.confidence == trust.DREAM_CONFIDENCE == 0.3
    assert d.payload["hypothesis_id"] == hid  # a hypothesis's id is its proposing delta's id
    view = trust.trust_of(braid.state("trust"), hid, T0)
    assert (view.confidence, view.source, view.provenance) == (0.3, "dream", "dream")
    assert trust.hypothesis_status(braid.state("trust"), hid, T0) == "proposed"


def test_a_dream_cannot_state_more_than_the_cap(braid):
    refused(braid, ProposeHypothesis(statement="s", confidence=0.5), ValidationError,
            "confidence: dream-provenance content starts at confidence 0.3 at most", provenance="dream")
    hid = run(braid, ProposeHypothesis(statement="s", confidence=0.2), T0, "dream")[0].delta.id
    assert braid.log.get(hid).delta.confidence == 0.2
    low = run(braid, ProposeHypothesis(statement="t"), T0, "dream", confidence=0.1)[0].delta
    assert low.confidence == 0.1


def test_non_dream_hypotheses_take_their_stated_confidence(braid):
    hid = propose(braid, provenance="assistant", confidence=0.8)
    assert conf(braid, hid, T0 + 365 * DAY) == 0.8  # no decay for non-dream content


def test_a_raw_dream_delta_above_the_cap_is_refused_and_a_logged_one_is_clamped(braid, tmp_path):
    d = braidlog.delta(B, "observation", {"text": "a dream image"}, provenance="dream", confidence=0.95, ts=T0)
    head = braid.head()
    with pytest.raises(ValidationError, match="confidence: dream_starts_low: dream-provenance content "
                                              "starts at confidence 0.3 at most, got 0.95"):
        braid.append(d)
    assert braid.head() == head
    # a log written before the rule: the fold clamps it to the cap, and it decays
    state = trust.PROJECTIONS[0].fold([d])
    assert trust.confidence_at(state, d.id, T0) == 0.3
    assert trust.confidence_at(state, d.id, T0 + HALF) == pytest.approx(0.15)


# --------------------------------------------------------------------------------------- decay

def test_dream_content_decays_with_a_one_day_half_life(braid):
    hid = propose(braid)
    s = braid.state("trust")
    assert trust.confidence_at(s, hid, T0 - DAY) is None  # not yet proposed then
    assert trust.confidence_at(s, hid, T0) == 0.3
    assert trust.confidence_at(s, hid, T0 + HALF) == pytest.approx(0.15)
    assert trust.confidence_at(s, hid, T0 + 2 * HALF) == pytest.approx(0.075)
    assert trust.confidence_at(s, hid, T0 + HALF / 2) == pytest.approx(0.3 * 2 ** -0.5)
    policy = trust.TrustPolicy(dream_half_life=DAY, dream_confidence=0.2)
    assert trust.confidence_at(s, hid, T0 + DAY, policy=policy) == pytest.approx(0.1)


def test_a_later_citation_reinforces_and_restarts_the_decay_clock(braid):
    hid = propose(braid)
    cite = braidlog.delta(B, "message", {"text": "that was right"}, ts=T0 + HALF, refs=Refs(deltas=(hid,)))
    braid.append(cite)
    s = braid.state("trust")
    assert trust.confidence_at(s, hid, T0 + HALF) == 0.3
    assert trust.confidence_at(s, hid, T0 + 2 * HALF) == pytest.approx(0.15)
    assert trust.confidence_at(s, hid, T0 + HALF * 6 / 7) == pytest.approx(0.3 * 2 ** (-6 / 7))  # as of before it
    view = trust.trust_of(s, hid, T0 + 2 * HALF)
    assert (view.clock, view.reinforced) == (T0 + HALF, 1)


def test_dream_citations_and_non_evidence_bead_roles_do_not_reinforce(braid):
    hid = propose(braid)
    braid.append(braidlog.delta(B, "message", {"text": "dreaming on"}, provenance="dream", ts=T0 + DAY,
                                refs=Refs(deltas=(hid,))))
    assert conf(braid, hid, T0 + HALF) == pytest.approx(0.15)
    run(braid, beads.WriteBead(bead_id="d", bead_type="memory_bead", memory_type="semantic", name="dreamt fact"),
        T0, "dream", "beads")
    vid = beads.active_version(braid.state("beads"), "d")
    braid.append(braidlog.delta(B, "message", {"text": "used it"}, ts=T0 + 2 * DAY,
                                refs=Refs(beads=(BeadRef("d", "used"),))))
    assert conf(braid, "d", T0 + HALF) == pytest.approx(0.15)
    braid.append(braidlog.delta(B, "message", {"text": "it holds"}, ts=T0 + HALF,
                                refs=Refs(beads=(BeadRef("d", "evidence"),))))
    assert conf(braid, "d", T0 + HALF) == 0.3 and conf(braid, vid, T0 + HALF) == 0.3


def test_a_passed_test_reinforces(braid):
    hid = propose(braid)
    run(braid, RecordTest(hypothesis_id=hid, test="outcome", passed=False, reward=-0.5), T0 + DAY, "user")
    assert conf(braid, hid, T0 + HALF) == pytest.approx(0.15)
    run(braid, RecordTest(hypothesis_id=hid, test="outcome", passed=True, feedback="yes!"), T0 + HALF, "user")
    assert conf(braid, hid, T0 + HALF) == 0.3


def test_time_travel_shows_the_trust_a_subject_had_at_any_point(braid):
    hid = propose(braid)
    seq = braid.head().seq
    braid.append(braidlog.delta(B, "message", {"text": "confirmed"}, ts=T0 + HALF, refs=Refs(deltas=(hid,))))
    past = braid.at(seq).state("trust")
    later = T0 + 2 * HALF
    assert trust.confidence_at(past, hid, later) == pytest.approx(0.075)  # the log then: never reinforced
    assert conf(braid, hid, later) == pytest.approx(0.15)
    assert braid.at(T0 + HALF / 2).state("trust") == past   # a time before the citation


# --------------------------------------------------------------------------------- hypothesis tests

def test_promotion_requires_every_configured_test_to_pass(braid):
    hid = propose(braid, provenance="user", confidence=0.9)
    refused(braid, PromoteHypothesis(hypothesis_id=hid), Rejected,
            "cannot be promoted: required test\\(s\\) consistency, rederivation, outcome have not passed")
    run(braid, RecordTest(hypothesis_id=hid, test="consistency", passed=True, evidence=("sem-1",)), T0 + DAY)
    assert trust.hypothesis_status(braid.state("trust"), hid, T0 + DAY) == "testing"
    refused(braid, PromoteHypothesis(hypothesis_id=hid), Rejected, "rederivation, outcome have not passed")
    pass_all(braid, hid, T0 + 2 * DAY, ("rederivation", "outcome"))
    assert not trust.promotable(braid.state("trust"), hid, T0 + DAY)  # as of before the tests
    assert trust.promotable(braid.state("trust"), hid, T0 + 2 * DAY)
    recs = run(braid, PromoteHypothesis(hypothesis_id=hid), T0 + 3 * DAY)
    p = recs[0].delta.payload
    # raw = 0.5 x mean(0.9) + 0.5 x mean(1, 1, 1) = 0.95, x user weight 1.0
    assert p["type"] == "HypothesisPromoted" and p["confidence"] == pytest.approx(0.95) and len(p["tests"]) == 3
    s = braid.state("trust")
    assert trust.hypothesis_status(s, hid, T0 + 3 * DAY) == "promoted"
    assert trust.hypothesis_status(s, hid, T0 + 2 * DAY) == "testing"
    assert trust.confidence_at(s, hid, T0 + 3 * DAY) == pytest.approx(0.95)
    assert trust.confidence_at(s, hid, T0 + 4 * DAY) == pytest.approx(0.475)  # halves each day
    assert run(braid, PromoteHypothesis(hypothesis_id=hid), T0 + 4 * DAY) == []


def test_the_latest_result_of_each_test_counts(braid):
    hid = propose(braid)
    pass_all(braid, hid, T0 + DAY)
    run(braid, RecordTest(hypothesis_id=hid, test="outcome", passed=False, feedback="wrong"), T0 + 2 * DAY, "user")
    assert trust.missing_tests(braid.state("trust"), hid, T0 + 2 * DAY) == ["outcome"]
    assert trust.missing_tests(braid.state("trust"), hid, T0 + DAY) == []
    refused(braid, PromoteHypothesis(hypothesis_id=hid), Rejected, "outcome have not passed")


def test_configured_tests_narrow_what_promotion_needs(braid):
    seen = braid.append(braidlog.delta(B, "observation", {"text": "it happened"}, ts=T0, confidence=0.9))
    hid = propose(braid, required_tests=("outcome", "outcome"), provenance="user", confidence=0.9,
                  about=(braid.log.read(seen).delta.id,))
    assert braid.log.get(hid).delta.payload["required_tests"] == ["outcome"]
    run(braid, RecordTest(hypothesis_id=hid, test="outcome", passed=True, reward=0.4), T0 + DAY, "user")
    # raw = 0.5 x 0.9 (the observation it is about) + 0.5 x (0.4 + 1) / 2 = 0.45 + 0.35 = 0.8;
    # a stated 0.9 is capped at raw
    recs = run(braid, PromoteHypothesis(hypothesis_id=hid, confidence=0.9), T0 + DAY)
    assert recs[0].delta.payload["confidence"] == pytest.approx(0.8)


def test_a_decider_policy_sets_the_default_required_tests(tmp_path):
    policy = trust.TrustPolicy(required_tests=("grounding",))
    with braidlog.open(tmp_path / "s", projections=[trust.decider(policy)]) as b:
        hid = propose(b, provenance="user", confidence=0.7)
        assert b.log.get(hid).delta.payload["required_tests"] == ["grounding"]
        refused(b, PromoteHypothesis(hypothesis_id=hid), Rejected, "grounding have not passed")
        grounded = b.append(braidlog.delta(B, "observation", {"text": "grounded"}, ts=T0, confidence=0.7,
                                           provenance="tool"))
        run(b, RecordTest(hypothesis_id=hid, test="grounding", passed=True,
                          evidence=(b.log.read(grounded).delta.id,)), T0, "tool")
        # raw = 0.5 x 0.7 (the observation the test names as evidence) + 0.5 x 1.0 = 0.85
        assert run(b, PromoteHypothesis(hypothesis_id=hid), T0)[0].delta.payload["confidence"] == pytest.approx(0.85)


@pytest.mark.parametrize("command, error, match", [
    (dict(test="consistency", passed=True, contradicted_by=("sem-9",)), ValidationError,
     "passed: a consistency test cannot pass while contradicted_by"),
    (dict(test="rederivation", passed=True), ValidationError, "evidence: a passed rederivation test must name"),
    (dict(test="grounding", passed=True), ValidationError, "evidence: a passed grounding test"),
    (dict(test="outcome", passed=True), ValidationError, "reward: an outcome test needs a reward"),
    (dict(test="outcome", passed=True, reward=-0.2), ValidationError, "passed: an outcome test with negative reward"),
    (dict(test="outcome", passed=True, reward=2.0), ValidationError, "payload.reward"),
    (dict(test="vibes", passed=True), ValidationError, "test: must be one of consistency"),
    (dict(test="outcome", passed=True, reward=1.0, test_id="x"), ValidationError, "test_id: must be a ULID"),
])
def test_bad_test_records_are_refused(braid, command, error, match):
    hid = propose(braid)
    refused(braid, RecordTest(hypothesis_id=hid, **command), error, match)


def test_failed_tests_are_recorded_and_test_ids_make_retries_no_ops(braid):
    hid = propose(braid)
    tid = braidlog.new_id()
    cmd = RecordTest(hypothesis_id=hid, test="consistency", passed=False, contradicted_by=("sem-9",), test_id=tid)
    recs = run(braid, cmd, T0 + DAY)
    assert recs[0].delta.id == tid and recs[0].delta.refs == Refs(deltas=(hid,))
    assert run(braid, cmd, T0 + DAY) == []
    refused(braid, msgspec.structs.replace(cmd, passed=True, contradicted_by=()), Rejected,
            "already recorded as consistency passed=False")
    h = braid.state("trust").hypotheses[hid]
    assert [(t.test, t.passed, t.contradicted_by) for t in h.tests] == [("consistency", False, ["sem-9"])]


def test_a_dream_cannot_test_or_promote(braid):
    hid = propose(braid)
    refused(braid, RecordTest(hypothesis_id=hid, test="outcome", passed=True, reward=1.0), Rejected,
            "a dream cannot test a hypothesis", provenance="dream")
    pass_all(braid, hid, T0 + DAY)
    refused(braid, PromoteHypothesis(hypothesis_id=hid), Rejected, "a dream cannot promote", provenance="dream")
    tid = braidlog.new_id()
    raw = msgspec.structs.replace(braidlog.delta(
        B, "hypothesis", {"type": "HypothesisTested", "hypothesis_id": hid, "test_id": tid,
                          "test": "outcome", "passed": False, "feedback": "no"},
        provenance="dream", ts=T0 + 2 * DAY), id=tid)
    with pytest.raises(Rejected, match="dream_never_validates: a dream cannot test a hypothesis"):
        braid.append(raw)  # the boundary refuses it on a raw append too
    # a log written before the rule: the fold never counts a dream's test
    state = trust.PROJECTIONS[0].fold([*(r.delta for r in braid.log.scan()), raw])
    assert trust.missing_tests(state, hid, T0 + 3 * DAY) == []


def test_rejection_is_final(braid):
    hid = propose(braid)
    run(braid, RejectHypothesis(hypothesis_id=hid, reason="contradicted by the calendar"), T0 + DAY)
    assert run(braid, RejectHypothesis(hypothesis_id=hid, reason="again"), T0 + DAY) == []
    s = braid.state("trust")
    assert trust.hypothesis_status(s, hid, T0 + DAY) == "rejected"
    assert trust.confidence_at(s, hid, T0 + DAY) == 0.0
    assert trust.confidence_at(s, hid, T0) == 0.3
    refused(braid, RecordTest(hypothesis_id=hid, test="outcome", passed=True, reward=1.0), Rejected, "was rejected")
    refused(braid, PromoteHypothesis(hypothesis_id=hid), Rejected, "was rejected .* cannot be promoted")
    other = propose(braid, statement="other")
    refused(braid, RejectHypothesis(hypothesis_id=other, reason=""), ValidationError, "payload.reason")
    refused(braid, RejectHypothesis(hypothesis_id="nope", reason="x"), Rejected, "no hypothesis 'nope'")


def test_proposals_are_idempotent_by_id(braid):
    hid = braidlog.new_id()
    assert propose(braid, hypothesis_id=hid) == hid
    head = braid.head()
    assert run(braid, ProposeHypothesis(statement="The user prefers mornings.", hypothesis_id=hid), T0, "dream") == []
    assert braid.head() == head
    refused(braid, ProposeHypothesis(statement="other", hypothesis_id=hid), Rejected, "already exists")
    refused(braid, ProposeHypothesis(statement="s", hypothesis_id="h-1"), ValidationError,
            "hypothesis_id: must be a ULID")
    refused(braid, ProposeHypothesis(statement="s", required_tests=()), ValidationError,
            "required_tests: must be a non-empty")
    refused(braid, ProposeHypothesis(statement="s", required_tests=("vibes",)), ValidationError,
            "unknown \\['vibes'\\]")
    refused(braid, ProposeHypothesis(statement=""), ValidationError, "payload.statement")
    refused(braid, RecordTest(hypothesis_id="nope", test="outcome", passed=True, reward=1.0), Rejected,
            "no hypothesis 'nope'; propose it first")


# ------------------------------------------------------------------------------------- assessments

def test_trust_is_orthogonal_to_provenance(braid):
    said = braidlog.delta(B, "message", {"text": "the moon is cheese"}, provenance="user", ts=T0)
    braid.append(said)
    run(braid, AssessTrust(subject_id=said.id, confidence=0.1, reason="implausible"), T0 + DAY)
    assert conf(braid, said.id, T0 + DAY) == 0.1
    assert conf(braid, said.id, T0) is None  # no trust record before the assessment
    hid = propose(braid, provenance="tool", confidence=0.9)
    pass_all(braid, hid, T0 + DAY)
    run(braid, PromoteHypothesis(hypothesis_id=hid), T0 + DAY)
    view = trust.trust_of(braid.state("trust"), hid, T0 + DAY)
    # raw = (0.5 x 0.9 + 0.5 x 1.0) x tool weight 0.95 = 0.9025
    assert (view.provenance, view.source) == ("tool", "promoted")
    assert view.confidence == pytest.approx(0.9025)


def test_braid_scoped_trust_overrides_the_global_baseline_inside_its_braid(braid):
    said = braidlog.delta(B, "message", {"text": "use tool X"}, ts=T0)
    braid.append(said)
    run(braid, AssessTrust(subject_id=said.id, confidence=0.9), T0)
    run(braid, AssessTrust(subject_id=said.id, confidence=0.2, scope="braid"), 1, braid_id="b2")
    run(braid, AssessTrust(subject_id=said.id, confidence=0.8), 2)
    s = braid.state("trust")
    assert trust.confidence_at(s, said.id, at(3)) == 0.8
    assert trust.confidence_at(s, said.id, at(3), braid_id="b2") == 0.2
    assert trust.confidence_at(s, said.id, at(3), braid_id=B) == 0.8


def test_assessment_rules(braid):
    hid = propose(braid)
    refused(braid, AssessTrust(subject_id="ghost", confidence=0.5), Rejected, "no subject 'ghost'")
    refused(braid, AssessTrust(subject_id=hid, confidence=0.5, scope="galaxy"), ValidationError, "scope: must be")
    refused(braid, AssessTrust(subject_id=hid, confidence=1.5), ValidationError, "confidence: must be a number")
    refused(braid, AssessTrust(subject_id=hid, confidence=0.9), Rejected,
            "is dream content: its trust rises above 0.3 only by promoting")
    said = braidlog.delta(B, "message", {"text": "x"}, ts=T0)
    braid.append(said)
    refused(braid, AssessTrust(subject_id=said.id, confidence=0.9), ValidationError,
            "a dream assesses trust at 0.3 at most", provenance="dream")
    run(braid, AssessTrust(subject_id=hid, confidence=0.1), T0 + DAY)
    assert run(braid, AssessTrust(subject_id=hid, confidence=0.1), T0 + 2 * DAY) == []
    assert conf(braid, hid, T0 + DAY) == 0.1
    assert conf(braid, hid, T0 + 2 * DAY) == pytest.approx(0.05)  # dream content keeps decaying
    pass_all(braid, hid, T0 + 3 * DAY)
    # a dream hypothesis stays on probation: raw = (0.5 x 0.9 + 0.5 x 1) x 0.6 = 0.57 < 0.75
    refused(braid, PromoteHypothesis(hypothesis_id=hid), Rejected, "stays on probation: raw trust 0.5700")
    refused(braid, AssessTrust(subject_id=hid, confidence=0.9), Rejected, "is dream content")


def test_an_assessment_can_set_a_decay_policy_with_a_floor(braid):
    said = braidlog.delta(B, "message", {"text": "rumour"}, ts=T0)
    braid.append(said)
    run(braid, AssessTrust(subject_id=said.id, confidence=0.8, decay=DecayPolicy(half_life_s=86400, floor=0.2)), T0)
    assert conf(braid, said.id, T0 + DAY) == pytest.approx(0.5)
    assert conf(braid, said.id, T0 + 100 * DAY) == pytest.approx(0.2)
    head = braid.head()
    with pytest.raises(ValidationError, match="payload.decay.half_life_s"):
        run(braid, AssessTrust(subject_id=said.id, confidence=0.8, decay=DecayPolicy(half_life_s=0)), T0)
    assert braid.head() == head


def test_beads_are_assessable_subjects_known_to_the_log(braid):
    run(braid, beads.WriteBead(bead_id="web", bead_type="tool_bead", name="w"), T0, "system", "beads")
    run(braid, AssessTrust(subject_id="web", confidence=0.6), T0)
    assert conf(braid, "web", T0) == 0.6


# ------------------------------------------------------------------------------- fold properties

def test_evolve_is_total_on_inconsistent_raw_facts():
    s = trust.State()
    ghost = braidlog.new_id()
    for payload in ({"type": "HypothesisPromoted", "hypothesis_id": ghost, "confidence": 0.9, "tests": []},
                    {"type": "Nonsense"}, {}):
        s = trust.evolve(s, braidlog.delta(B, "hypothesis", payload, ts=T0))
    s = trust.evolve(s, braidlog.delta(B, "trust", {"bad": 1}, ts=T0))
    dreamt = braidlog.delta(B, "bead_write", {"bead_id": 5}, ts=T0, provenance="dream")
    s = trust.evolve(s, dreamt)
    assert s.hypotheses == {} and list(s.subjects) == [dreamt.id] and s.active == {}


def test_state_round_trips_and_equals_a_fresh_fold(tmp_path):
    with braidlog.open(tmp_path / "s", projections=ALL, checkpoint_every=2) as b:
        hid = propose(b, provenance="user", confidence=0.9)
        pass_all(b, hid, T0 + DAY)
        run(b, PromoteHypothesis(hypothesis_id=hid), T0 + DAY)
        other = propose(b, statement="other")
        run(b, RejectHypothesis(hypothesis_id=other, reason="no"), T0 + DAY)
        said = braidlog.delta(B, "message", {"text": "x"}, ts=T0, refs=Refs(deltas=(other,)))
        b.append(said)
        run(b, AssessTrust(subject_id=said.id, confidence=0.4, scope="braid",
                           decay=DecayPolicy(half_life_s=60.0)), T0)
        s = b.state("trust")
        assert msgspec.msgpack.decode(msgspec.msgpack.encode(s), type=trust.State) == s
        assert b.projection("trust").fold(r.delta for r in b.log.scan()) == s
    with braidlog.open(tmp_path / "s", projections=ALL) as b:
        assert b.state("trust") == s


def test_decide_is_pure_and_refuses_unknown_commands():
    c = Context(now=T0, braid_id=B, provenance=Provenance("dream"), ids=iter([braidlog.new_id()] * 2))
    one = trust.decide(ProposeHypothesis(statement="s"), trust.State(), c)
    assert one[0].confidence == 0.3 and one[0].id == one[0].payload["hypothesis_id"]
    with pytest.raises(ValidationError, match="command: trust cannot decide"):
        trust.decide(object(), trust.State(), c)


# ------------------------------------------------------------------- the trust formula, by hand

def test_the_trust_formula_with_hand_computed_numbers(braid):
    seen = braid.append(braidlog.delta(B, "message", {"text": "seen it"}, provenance="assistant",
                                       confidence=0.9, ts=T0))
    seen_id = braid.log.read(seen).delta.id
    hid = propose(braid, provenance="user", confidence=0.8, about=(seen_id,))
    h = trust.hypothesis_trust(braid.state("trust"), hid, T0, braid.log)
    # evidence (0.9,): the message it is about; no test: 0.5 x 0.9 + 0.5 x 0.5 = 0.7, x user 1.0
    # -> probation (< 0.75); the stated 0.8 is the hypothesis's own claim, not evidence
    assert (h.raw, h.status, h.scores, h.evidence, h.sources) == (
        pytest.approx(0.7), "probation", (), (0.9,), (seen_id,))
    run(braid, RecordTest(hypothesis_id=hid, test="consistency", passed=True), T0 + DAY, "user")
    run(braid, RecordTest(hypothesis_id=hid, test="outcome", passed=True, reward=0.6), T0 + DAY, "user")
    h = trust.hypothesis_trust(braid.state("trust"), hid, T0 + DAY, braid.log)
    # evidence (0.9,): 0.9; scores (1.0, (0.6 + 1) / 2 = 0.8): 0.9; raw = 0.45 + 0.45 = 0.9
    assert h.evidence == (0.9,) and h.scores == (1.0, pytest.approx(0.8))
    assert (h.raw, h.status) == (pytest.approx(0.9), "promoted")
    later = trust.hypothesis_trust(braid.state("trust"), hid, T0 + 3 * DAY, braid.log)
    assert later.confidence == pytest.approx(0.9 * 0.25)        # two days: x 0.5^2 = 0.225
    run(braid, RecordTest(hypothesis_id=hid, test="outcome", passed=False, reward=-0.5), T0 + 2 * DAY, "user")
    h = trust.hypothesis_trust(braid.state("trust"), hid, T0 + 2 * DAY, braid.log)
    # scores (1.0, 0.25): 0.625; (0.45 + 0.3125) = 0.7625, halved for the failed test: 0.38125
    assert (h.raw, h.status, h.failed) == (pytest.approx(0.38125), "probation", True)


@pytest.mark.parametrize("provenance, weight", [
    ("user", 1.0), ("assistant", 0.85), ("tool", 0.95), ("perception", 0.9), ("system", 0.8)])
def test_the_provenance_weights(braid, provenance, weight):
    hid = propose(braid, provenance=provenance, confidence=0.6)
    h = trust.hypothesis_trust(braid.state("trust"), hid, T0)
    # no evidence, no test: (0.5 x 0.5 + 0.5 x 0.5) x weight; the stated 0.6 is no evidence
    assert (h.weight, h.raw) == (weight, pytest.approx(0.5 * weight))


def test_a_dream_hypothesis_starts_low_and_weighs_0_6(braid):
    hid = propose(braid, confidence=0.3)
    h = trust.hypothesis_trust(braid.state("trust"), hid, T0)
    assert (h.weight, h.raw, h.status) == (0.6, pytest.approx((0.25 + 0.25) * 0.6), "probation")  # 0.3


def observed(b, *confidences, ts=T0):
    """Deltas of the given confidences, to be named as evidence; their ids."""
    seqs = [b.append(braidlog.delta(B, "observation", {"text": "seen"}, ts=ts, confidence=c,
                                    provenance="perception")) for c in confidences]
    return tuple(b.log.read(s).delta.id for s in seqs)


def test_trust_follows_the_reference_a_promoted_hypothesis(braid):
    """The reference (elyra's TrustEngine.score_for_bead) with the issue's first fixture: the
    hypothesis names evidence of confidence 1.0 and 0.8, tests pass with scores 1.0, 0.9 and 0.8,
    tool provenance 0.95: (0.5 x 0.9 + 0.5 x 0.9) x 0.95 = 0.855, promoted."""
    first, second = observed(braid, 1.0, 0.8)
    hid = propose(braid, provenance="tool", confidence=1.0, about=(first,))
    run(braid, RecordTest(hypothesis_id=hid, test="consistency", passed=True), T0, "tool")   # 1.0
    run(braid, RecordTest(hypothesis_id=hid, test="outcome", passed=True, reward=0.8), T0, "tool")  # 0.9
    run(braid, RecordTest(hypothesis_id=hid, test="rederivation", passed=True, reward=0.6,
                          evidence=(second, "microagent-1")), T0, "tool")                   # 0.8
    h = trust.hypothesis_trust(braid.state("trust"), hid, T0, braid.log)
    # "microagent-1" names no delta of the log: it is no evidence
    assert h.evidence == (1.0, 0.8) and h.sources == (first, second)
    assert h.scores == (1.0, pytest.approx(0.8), pytest.approx(0.9))  # consistency, rederivation, outcome
    assert (h.raw, h.weight, h.status) == (pytest.approx(0.855), 0.95, "promoted")
    p = run(braid, PromoteHypothesis(hypothesis_id=hid), T0)[0].delta.payload
    assert p["confidence"] == pytest.approx(0.855)


def test_trust_follows_the_reference_a_hypothesis_on_probation(braid):
    """The issue's second fixture: evidence 0.8 and 0.7 (0.75), tests 1.0 and a failed 0.5
    (0.75), assistant provenance 0.85: (0.375 + 0.375) x 0.5 (a test failed) x 0.85 = 0.31875."""
    ids = observed(braid, 0.8, 0.7)
    hid = propose(braid, provenance="assistant", confidence=0.9, about=ids)
    run(braid, RecordTest(hypothesis_id=hid, test="consistency", passed=True), T0, "tool")      # 1.0
    run(braid, RecordTest(hypothesis_id=hid, test="outcome", passed=False, reward=0.0), T0, "user")  # 0.5
    h = trust.hypothesis_trust(braid.state("trust"), hid, T0, braid.log)
    assert (h.evidence, h.scores, h.failed) == ((0.8, 0.7), (1.0, 0.5), True)
    assert (h.raw, h.status) == (pytest.approx(0.31875), "probation")
    refused(braid, PromoteHypothesis(hypothesis_id=hid), Rejected, "outcome have not passed")


def test_citations_add_evidence_but_are_never_its_only_source(braid):
    hid = propose(braid, provenance="user", confidence=1.0)
    braid.append(braidlog.delta(B, "message", {"text": "agreed"}, ts=T0, confidence=0.9,
                                provenance="assistant", refs=Refs(deltas=(hid,))))
    h = trust.hypothesis_trust(braid.state("trust"), hid, T0, braid.log)
    # it names no evidence: 0.5, whatever cites it (the reference: 0.5 when there is none)
    assert (h.evidence, h.raw) == ((), pytest.approx(0.5))
    (named,) = observed(braid, 0.5)
    other = propose(braid, statement="another", provenance="user", confidence=1.0, about=(named,))
    cite = braid.append(braidlog.delta(B, "message", {"text": "agreed"}, ts=T0 + DAY, confidence=0.9,
                                       provenance="assistant", refs=Refs(deltas=(other,))))
    h = trust.hypothesis_trust(braid.state("trust"), other, T0 + DAY, braid.log)
    # it names one (0.5): the later citation (0.9) adds to it: mean 0.7; 0.35 + 0.25 = 0.6
    assert h.evidence == (0.5, 0.9) and h.sources == (named, braid.log.read(cite).delta.id)
    assert h.raw == pytest.approx(0.6)
    # as of before the citation, only what it names
    assert trust.hypothesis_trust(braid.state("trust"), other, T0, braid.log).evidence == (0.5,)
    with pytest.raises(ValidationError, match="log: hypothesis .* names evidence"):
        trust.hypothesis_trust(braid.state("trust"), other, T0)


def test_a_user_hypothesis_with_no_evidence_and_no_test_is_not_promoted(braid):
    hid = propose(braid, provenance="user", confidence=1.0, required_tests=("outcome",))
    h = trust.hypothesis_trust(braid.state("trust"), hid, T0)
    assert (h.raw, h.status) == (pytest.approx(0.5), "probation")
    assert trust.hypothesis_status(braid.state("trust"), hid, T0) == "proposed"
    refused(braid, PromoteHypothesis(hypothesis_id=hid), Rejected, "outcome have not passed")
