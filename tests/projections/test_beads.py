"""Beads: versioning, addressable old versions, BeadRef resolution, reasoning beads, refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

import braidlog
from braidlog import BeadRef, Context, Provenance, Refs, Rejected, ValidationError
from braidlog.projections import beads, knots, trust
from braidlog.projections.beads import Reasoning, ReasoningFields, RefBead, WriteBead

T0 = datetime(2026, 1, 1, tzinfo=UTC)
B = "b1"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def braid(tmp_path):
    b = braidlog.open(tmp_path / "store", projections=beads.PROJECTIONS + knots.PROJECTIONS + trust.PROJECTIONS)
    yield b
    b.close()


def run(b, command, seconds=0.0, provenance="system", decider="beads", **kw):
    return b.execute(decider, command, braid_id=B, provenance=provenance, now=at(seconds), **kw)


def refused(b, command, error, match, seconds=100.0, provenance="system", decider="beads"):
    """Run a command that must be refused; assert nothing was appended."""
    head = b.head()
    with pytest.raises(error, match=match):
        run(b, command, seconds, provenance, decider)
    assert b.head() == head
    return head


def ctx(seconds=0.0, provenance="system", confidence=1.0):
    return Context(now=at(seconds), braid_id=B, provenance=Provenance(provenance), confidence=confidence)


def roundtrip(state):
    return msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=beads.State)


THOUGHT = Reasoning(narrative="I compared both forecasts and picked the newer one.",
                    fields=ReasoningFields(goal="answer", decisions=("newer forecast",)))


# ------------------------------------------------------------------------------- writing, versions

def test_writing_a_bead_creates_its_first_version_and_activates_it(braid):
    recs = run(braid, WriteBead(bead_id="web", bead_type="tool_bead", name="web_search", content={"q": 1}))
    assert [r.delta.kind for r in recs] == ["bead_version", "bead_write"]
    version_id = recs[0].delta.payload["bead_version_id"]
    assert recs[1].delta.payload == {"type": "BeadWritten", "bead_id": "web", "bead_version_id": version_id,
                                     "bead_type": "tool_bead", "version": 1}
    assert recs[1].delta.refs == Refs(beads=(BeadRef("web", "created", version_id),))
    s = braid.state("beads")
    assert beads.active_version(s, "web") == version_id
    assert [v.body.version for v in beads.versions(s, "web")] == [1]


def test_an_update_is_a_new_version_and_a_delta_pointing_at_it(braid):
    v1 = run(braid, WriteBead(bead_id="web", bead_type="tool_bead", name="web_search", content={"p": ["q"]}))
    v2 = run(braid, WriteBead(bead_id="web", content={"p": ["q", "region"]}), 10)
    id1, id2 = v1[0].delta.payload["bead_version_id"], v2[0].delta.payload["bead_version_id"]
    assert id1 != id2
    assert v2[0].delta.payload["supersedes"] == id1 and v2[0].delta.payload["version"] == 2
    assert v2[1].delta.kind == "bead_write" and v2[1].delta.payload["bead_version_id"] == id2
    assert v2[1].delta.refs.beads[0].role == "updated"
    s = braid.state("beads")
    assert beads.active_version(s, "web") == id2
    old = beads.version(s, id1)  # every old version stays addressable by its BeadVersionID
    assert old is not None and old.body.content == {"p": ["q"]} and old.body.name == "web_search"
    assert [v.body.bead_version_id for v in beads.versions(s, "web")] == [id1, id2]
    assert [r.delta.id for r in braid.log.scan_refs(id1)] == [r.delta.id for r in v1]


def test_each_bead_type_is_accepted(braid):
    for i, t in enumerate(beads.BEAD_TYPES):
        extra = {"memory_type": "semantic"} if t == "memory_bead" else {}
        if t == "reasoning_bead":
            extra = {"reasoning": THOUGHT}
        run(braid, WriteBead(bead_id=t, bead_type=t, name=t, **extra), i)
    assert sorted(braid.state("beads").beads) == sorted(beads.BEAD_TYPES)


def test_writing_the_same_content_again_appends_nothing(braid):
    cmd = WriteBead(bead_id="web", bead_type="tool_bead", name="web_search", content={"q": [1, 2]})
    run(braid, cmd)
    head = braid.head()
    assert run(braid, cmd, 5) == []
    assert run(braid, WriteBead(bead_id="web", content={"q": (1, 2)}), 6) == []
    assert braid.head() == head


def test_a_retry_with_the_same_version_id_is_a_no_op_and_another_content_is_refused(braid):
    cmd = WriteBead(bead_id="web", bead_type="tool_bead", name="w", bead_version_id="v-1")
    run(braid, cmd)
    assert run(braid, cmd, 1) == []
    refused(braid, WriteBead(bead_id="web", name="other", bead_version_id="v-1"), Rejected,
            "^delta 0: bead-version-immutable: bead version v-1 already exists")


def test_expected_version_guards_an_update(braid):
    run(braid, WriteBead(bead_id="web", bead_type="tool_bead", name="w"))
    refused(braid, WriteBead(bead_id="web", name="w2", expected_version=2), Rejected,
            "at version 1, not the expected 2")
    assert run(braid, WriteBead(bead_id="web", name="w2", expected_version=1), 1)


@pytest.mark.parametrize("command, error, match", [
    (WriteBead(name="x"), ValidationError, "bead_type: is required to create a bead"),
    (WriteBead(bead_type="magic_bead", name="x"), ValidationError, "bead_type: must be one of"),
    (WriteBead(bead_type="tool_bead"), ValidationError, "name: is required"),
    (WriteBead(bead_type="memory_bead", name="m"), Rejected, "memory-type-for-memory-beads: a memory_bead needs"),
    (WriteBead(bead_type="memory_bead", name="m", memory_type="dreamy"), ValidationError, "memory_type"),
    (WriteBead(bead_type="tool_bead", name="t", memory_type="semantic"), Rejected,
     "memory-type-for-memory-beads: .* this tool_bead has 'semantic'"),
    (WriteBead(bead_type="reasoning_bead", name="r"), Rejected,
     "reasoning-for-reasoning-beads: a reasoning_bead needs"),
    (WriteBead(bead_type="skill_bead", name="s", reasoning=THOUGHT), Rejected,
     "reasoning-for-reasoning-beads: .* this is a skill_bead"),
    (WriteBead(bead_id="x" * 121, bead_type="tool_bead", name="t"), ValidationError, "payload.bead_id"),
])
def test_bad_writes_are_refused_and_nothing_is_appended(braid, command, error, match):
    refused(braid, command, error, match)


def test_a_bead_never_changes_type(braid):
    run(braid, WriteBead(bead_id="web", bead_type="tool_bead", name="w"))
    refused(braid, WriteBead(bead_id="web", bead_type="skill_bead", name="w2"), Rejected,
            "is a tool_bead; a bead's type never changes")


def test_memory_beads_keep_their_memory_type(braid):
    run(braid, WriteBead(bead_id="fact", bead_type="memory_bead", name="f", memory_type="semantic",
                         content={"text": "Paris is in France"}))
    run(braid, WriteBead(bead_id="fact", content={"text": "Paris is the capital of France"}), 1)
    v = beads.resolve(braid.state("beads"), BeadRef("fact", "used"))
    assert v.body.memory_type == "semantic" and v.body.version == 2


# --------------------------------------------------------------------------------- reasoning beads

@pytest.mark.parametrize("narrative", ["I checked the logs.", "I'm unsure yet.", "I\u2019ve seen this before.",
                                       "I'd retry once.", "I think so"])
def test_a_first_person_narrative_is_accepted(narrative):
    out = beads.decide(WriteBead(bead_type="reasoning_bead", name="t", reasoning=Reasoning(narrative=narrative)),
                       beads.State(), ctx())
    assert out[0].payload["reasoning"]["narrative"] == narrative


@pytest.mark.parametrize("narrative", ["The agent checked the logs.", "Ice is cold.", "I", "i checked",
                                       " I checked", "", "We checked."])
def test_a_narrative_that_is_not_first_person_is_refused(braid, narrative):
    cmd = WriteBead(bead_type="reasoning_bead", name="t", reasoning=Reasoning(narrative=narrative))
    refused(braid, cmd, ValidationError, "reasoning.narrative: must be a first-person narrative")


def test_the_narrative_rule_also_holds_for_raw_appends(braid):
    payload = {"bead_id": "r", "bead_version_id": "v", "bead_type": "reasoning_bead", "version": 1,
               "name": "t", "reasoning": {"narrative": "The model thought."}}
    head = braid.head()
    with pytest.raises(ValidationError, match=r"payload.reasoning.narrative"):
        braid.append(braidlog.delta(B, "bead_version", payload, ts=T0))
    assert braid.head() == head


def test_raw_chain_of_thought_is_refused_unless_the_flag_allows_it(braid):
    cot = Reasoning(narrative="I weighed A against B.", raw_cot="step 1 ... step 9")
    refused(braid, WriteBead(bead_id="r", bead_type="reasoning_bead", name="t", reasoning=cot), Rejected,
            "^delta 0: raw-cot-behind-flag: raw chain of thought is not stored")
    assert "r" not in braid.state("beads").beads


def test_raw_chain_of_thought_appended_raw_is_refused_too(braid):
    payload = {"bead_id": "r", "bead_version_id": "r-v1", "bead_type": "reasoning_bead", "version": 1,
               "name": "t", "reasoning": {"narrative": "I weighed it.", "raw_cot": "step 1"}}
    head = braid.head()
    with pytest.raises(Rejected, match="^delta 0: raw-cot-behind-flag"):
        braid.append(braidlog.delta(B, "bead_version", payload, ts=T0))
    assert braid.head() == head


@pytest.mark.parametrize("payloads, rule", [
    ([{"bead_id": "w", "bead_version_id": "w-1", "bead_type": "tool_bead", "version": 2, "name": "w"}],
     "bead-versions-in-order"),
    ([{"bead_id": "w", "bead_version_id": "w-1", "bead_type": "tool_bead", "version": 1, "name": "w"},
      {"bead_id": "w", "bead_version_id": "w-2", "bead_type": "skill_bead", "version": 2, "name": "w"}],
     "bead-type-fixed"),
    ([{"bead_id": "w", "bead_version_id": "w-9", "bead_type": "tool_bead", "version": 1}],
     "bead-write-names-a-version"),
])
def test_raw_bead_deltas_that_break_a_rule_are_refused(braid, payloads, rule):
    kinds = ["bead_write" if "name" not in p else "bead_version" for p in payloads]
    with pytest.raises(Rejected, match=f"^delta {len(payloads) - 1}: {rule}: "):
        braid.append_batch([braidlog.delta(B, k, p, ts=T0) for k, p in zip(kinds, payloads, strict=False)])
    assert braid.head().seq == 0


def test_raw_chain_of_thought_is_stored_with_the_flag_and_hidden_from_context_by_default(tmp_path):
    with braidlog.open(tmp_path / "s", projections=[beads.decider(allow_raw_cot=True)]) as b:
        cot = Reasoning(narrative="I weighed A against B.", raw_cot="step 1 ... step 9",
                        fields=ReasoningFields(assumptions=("A is cheaper",)))
        recs = run(b, WriteBead(bead_id="r", bead_type="reasoning_bead", name="t", reasoning=cot))
        assert recs[0].delta.payload["reasoning"]["raw_cot"] == "step 1 ... step 9"
        s = b.state("beads")
        view = beads.context_view(s, "r")
        assert view["narrative"] == "I weighed A against B."
        assert view["fields"] == {"assumptions": ["A is cheaper"]}
        assert "raw_cot" not in view and "step 1" not in repr(view)
        assert beads.context_view(s, "r", include_raw_cot=True)["raw_cot"] == "step 1 ... step 9"


def test_context_view_of_unknown_bead_is_none():
    assert beads.context_view(beads.State(), "nope") is None


# ------------------------------------------------------------------------------ BeadRef resolution

def test_a_ref_without_version_resolves_to_the_version_active_at_the_referring_delta(braid):
    v1 = run(braid, WriteBead(bead_id="web", bead_type="tool_bead", name="w", content={"n": 1}))
    r1 = run(braid, RefBead(bead_id="web", role="used"), 1)
    v2 = run(braid, WriteBead(bead_id="web", content={"n": 2}), 2)
    r2 = run(braid, RefBead(bead_id="web", role="evidence"), 3)
    id1, id2 = v1[0].delta.payload["bead_version_id"], v2[0].delta.payload["bead_version_id"]
    s = braid.state("beads")
    assert [(u.role, u.resolved, u.bead_version_id) for u in beads.uses(s, "web")] == [
        ("used", id1, None), ("evidence", id2, None)]
    ref = BeadRef("web", "used")
    assert beads.resolve(s, ref, seq=r1[0].seq).body.bead_version_id == id1
    assert beads.resolve(s, ref, seq=r2[0].seq).body.bead_version_id == id2
    assert beads.resolve(s, ref).body.bead_version_id == id2
    assert beads.resolve(s, ref, as_of=at(1.5)).body.bead_version_id == id1
    assert beads.resolve(s, ref, seq=0) is None
    # pinned refs resolve to their own version whenever they are read
    assert beads.resolve(s, BeadRef("web", "used", id1)).body.content == {"n": 1}
    assert beads.resolve(s, BeadRef("other", "used", id1)) is None


def test_resolution_works_the_same_under_time_travel(braid):
    v1 = run(braid, WriteBead(bead_id="web", bead_type="tool_bead", name="w", content={"n": 1}))
    r1 = run(braid, RefBead(bead_id="web"), 1)
    run(braid, WriteBead(bead_id="web", content={"n": 2}), 2)
    past = braid.at(r1[0].seq).state("beads")
    assert beads.resolve(past, BeadRef("web", "used")).body.bead_version_id == v1[0].delta.payload["bead_version_id"]
    assert [u.seq for u in beads.uses(past, "web")] == [r1[0].seq]
    assert beads.uses(past, "web") == beads.uses(braid.state("beads"), "web")


def test_refs_on_any_delta_are_recorded_with_their_resolution(braid):
    v1 = run(braid, WriteBead(bead_id="web", bead_type="tool_bead", name="w"))
    seq = braid.append(braidlog.delta(B, "message", {"text": "used it"}, ts=at(1),
                                      refs=Refs(beads=(BeadRef("web", "used"),)),
                                      provenance=Provenance("assistant", knot_id="k1")))
    use = beads.uses(braid.state("beads"), "web")[-1]
    assert (use.seq, use.kind, use.knot_id, use.resolved) == (seq, "message", "k1",
                                                              v1[0].delta.payload["bead_version_id"])


def test_ref_refusals(braid):
    refused(braid, RefBead(bead_id="ghost"), Rejected, "bead-ref-names-a-bead: no bead 'ghost'; write it first")
    run(braid, WriteBead(bead_id="web", bead_type="tool_bead", name="w"))
    run(braid, WriteBead(bead_id="map", bead_type="tool_bead", name="m"), 1)
    map_version = beads.active_version(braid.state("beads"), "map")
    refused(braid, RefBead(bead_id="web", bead_version_id=map_version), Rejected,
            "bead-ref-names-a-bead: .* is not a version of bead web")
    refused(braid, RefBead(bead_id="web", role=""), ValidationError, "payload.role")
    refused(braid, RefBead(bead_id="web", ref_id="not-a-ulid"), ValidationError, "ref_id: must be a ULID")


def test_a_ref_with_ref_id_is_idempotent(braid):
    run(braid, WriteBead(bead_id="web", bead_type="tool_bead", name="w"))
    rid = braidlog.new_id()
    recs = run(braid, RefBead(bead_id="web", ref_id=rid, note="first"), 1)
    assert recs[0].delta.id == rid and recs[0].delta.refs.beads == (BeadRef("web", "used"),)
    assert run(braid, RefBead(bead_id="web", ref_id=rid, note="first"), 2) == []
    assert len(beads.uses(braid.state("beads"), "web")) == 1


# ----------------------------------------------------------------------------- dream, provenance

def test_dream_writes_start_low_confidence(braid):
    recs = run(braid, WriteBead(bead_id="d", bead_type="memory_bead", memory_type="episodic", name="dream"),
               provenance="dream")
    assert {r.delta.confidence for r in recs} == {trust.DREAM_CONFIDENCE}
    refused(braid, WriteBead(bead_id="d2", bead_type="memory_bead", memory_type="episodic", name="x",
                             confidence=0.9), ValidationError, "dream-provenance content starts at confidence 0.3",
            provenance="dream")
    written = run(braid, WriteBead(bead_id="u", bead_type="tool_bead", name="u", confidence=0.9), 1)
    assert written[0].delta.confidence == 0.9


# ------------------------------------------------------------------------------ fold properties

def test_evolve_is_total_on_inconsistent_raw_facts():
    s = beads.State()
    write = braidlog.delta(B, "bead_write", {"bead_id": "x", "bead_version_id": "missing",
                                             "bead_type": "tool_bead", "version": 1}, ts=T0)
    ref = braidlog.delta(B, "bead_ref", {"bead_id": "nobody", "role": "used"}, ts=T0)
    broken = braidlog.delta(B, "bead_version", {"nonsense": True}, ts=T0)
    for seq, d in enumerate((write, ref, broken), 1):
        s = beads.evolve(s, d, seq)
    assert [a.seq for a in s.beads["x"].activations] == [1]
    assert beads.active_version(s, "x") == "missing" and beads.resolve(s, BeadRef("x", "used")) is None
    assert beads.context_view(s, "x") is None
    assert beads.uses(s, "nobody")[0].resolved is None


def test_seqs_are_log_positions_though_the_fold_skips_other_deltas(braid):
    braid.append(braidlog.delta("other", "tick", {}, ts=T0))
    run(braid, WriteBead(bead_id="web", bead_type="tool_bead", name="w"), 1)
    braid.append(braidlog.delta("other", "message", {"text": "hi"}, ts=at(2)))
    seq = braid.append(braidlog.delta("other", "message", {"text": "used it"}, ts=at(3),
                                      refs=Refs(beads=(BeadRef("web", "used"),))))
    s = braid.state("beads")
    assert seq == braid.head().seq == 5
    assert s.versions[beads.active_version(s, "web")].seq == 2
    assert [a.seq for a in s.beads["web"].activations] == [3]
    assert [u.seq for u in beads.uses(s, "web")] == [5]
    p = braid.projection("beads")
    assert p.positional and p.reads(braid.log.read(5).delta) and not p.reads(braid.log.read(4).delta)
    assert p.fold(r.delta for r in braid.log.scan()) == s


def test_state_round_trips_through_checkpoint_encoding(tmp_path):
    with braidlog.open(tmp_path / "s", projections=[beads.decider(allow_raw_cot=True)], checkpoint_every=2) as b:
        run(b, WriteBead(bead_id="r", bead_type="reasoning_bead", name="t",
                         reasoning=Reasoning(narrative="I did it.", raw_cot="x", fields=ReasoningFields(
                             decisions=("a", "b")))))
        run(b, WriteBead(bead_id="m", bead_type="memory_bead", memory_type="semantic", name="m",
                         content={"nested": {"list": [1, 2, {"k": None}]}}), 1)
        run(b, RefBead(bead_id="r", role="evidence"), 2)
        run(b, WriteBead(bead_id="m", content={"n": 2}), 3)
        s = b.state("beads")
        assert roundtrip(s) == s
        fresh = b.projection("beads").fold(r.delta for r in b.log.scan())
        assert fresh == s
    with braidlog.open(tmp_path / "s", projections=[beads.decider(allow_raw_cot=True)]) as b:
        assert b.state("beads") == s  # reloaded from the checkpoint


def test_decide_is_pure_and_deterministic_with_given_ids():
    c = WriteBead(bead_id="web", bead_type="tool_bead", name="w")
    one = beads.decide(c, beads.State(), Context(now=T0, braid_id=B, ids=iter(["V1", "D1", "D2"])))
    two = beads.decide(c, beads.State(), Context(now=T0, braid_id=B, ids=iter(["V1", "D1", "D2"])))
    assert one == two


def test_an_unknown_command_is_refused():
    with pytest.raises(ValidationError, match="command: beads cannot decide"):
        beads.decide(object(), beads.State(), ctx())
