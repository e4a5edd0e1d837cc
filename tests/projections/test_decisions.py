"""Decisions after LedgerMind: given deltas / when command / then deltas, and the seed's numbers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braidlog
from braidlog import Context, GenericDelta, Provenance, Refs, Rejected, ValidationError
from braidlog.projections import decisions as D
from braidlog.projections.decisions import (
    AcceptProposal,
    DraftProposal,
    FalsifyProposal,
    PatternScope,
    ProposalContent,
    ProposalStatus,
    RecordDecision,
    RejectProposal,
    ResolutionIntent,
    SetTrustBoundary,
    SupersedeDecision,
    TrustBoundary,
    UseDecision,
)
from braidlog.projections.decisions import DecisionPhase as Phase
from braidlog.projections.decisions import DecisionVitality as Vit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HUMAN = Provenance("user", source="cli")
AGENT = Provenance("assistant", model="test-llm")
RATIONALE = "Because it is the simplest thing that works."


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def encoded(state: D.State) -> bytes:
    return msgspec.msgpack.encode(state)


class Session:
    """decide + the boundary + evolve without a store: every delta a command makes is validated
    and checked as the log would (``DECIDER.check`` against the state with the command's earlier
    deltas folded in), and a refused command appends nothing. ``append`` is a bare fold (a log
    written before the rules)."""

    def __init__(self) -> None:
        self.state = D.DECIDER.start()
        self.log: list[GenericDelta] = []

    def run(self, command, at: float = 0.0, who: Provenance = HUMAN, confidence: float = 1.0,
            braid_id: str = "b1") -> list[GenericDelta]:
        ctx = Context(now=day(at), braid_id=braid_id, provenance=who, confidence=confidence)
        before = encoded(self.state)
        try:
            deltas = D.decide(command, self.state, ctx)
        except (Rejected, ValidationError):
            assert encoded(self.state) == before, "a refusal must not touch the state"
            raise
        assert encoded(self.state) == before, "decide must not touch the state"
        stored = [braidlog.validate(d)[0] for d in deltas]
        try:
            D.check_batch(self.state, stored)
        except (Rejected, ValidationError):
            assert encoded(self.state) == before, "a check must not touch the state"
            raise
        for d in stored:
            self.append(d)
        return deltas

    def append(self, d: GenericDelta) -> GenericDelta:
        stored, _ = braidlog.validate(d)
        D.evolve(self.state, stored)
        self.log.append(stored)
        return stored

    def record(self, title="Use PostgreSQL", target="database", at=0.0, who=HUMAN, **kw) -> str:
        kw.setdefault("rationale", RATIONALE)
        (d,) = self.run(RecordDecision(title=title, target=target, **kw), at=at, who=who)
        return d.payload["decision_id"]

    def refused(self, command, match: str, error=Rejected, **kw) -> None:
        n = len(self.log)
        with pytest.raises(error, match=match):
            self.run(command, **kw)
        assert len(self.log) == n


def intent(kind: str, *ids: str) -> ResolutionIntent:
    return ResolutionIntent(resolution_type=kind, rationale="moving on", target_decision_ids=list(ids))


def cite(s: Session, *ids: str, at: float, episode: str | None = None, braid_id: str = "b1",
         kind: str = "message") -> GenericDelta:
    """A core delta citing decisions in refs.deltas: evidence for their streams."""
    payload = {"text": "following the decision"} if kind == "message" else {}
    return s.append(GenericDelta(
        braid_id=braid_id, kind=kind, ts=day(at), provenance=Provenance("assistant", episode_id=episode),
        confidence=1.0, payload=payload, refs=Refs(deltas=ids)))


# ------------------------------------------------------------------------ models and validation

GOOD = {"title": "X", "target": "abc", "rationale": "0123456789"}


@pytest.mark.parametrize("model, field, value", [
    (D.DecisionContent, "title", ""),
    (D.DecisionContent, "target", "db"),
    (D.DecisionContent, "rationale", "too short"),
    (D.DecisionContent, "status", "archived"),
    (D.ProposalContent, "title", ""),
    (D.ProposalContent, "target", "db"),
    (D.ProposalContent, "rationale", "123456789"),
    (D.ProposalContent, "confidence", 1.01),
    (D.ProposalContent, "confidence", -0.01),
    (D.ProposalContent, "status", "maybe"),
    (D.RecordDecisionRequest, "target", "ab"),
    (D.RecordDecisionRequest, "rationale", "short"),
    (D.SupersedeDecisionRequest, "old_decision_ids", []),
    (D.SupersedeDecisionRequest, "rationale", "short"),
])
def test_content_models_refuse_what_the_seed_refuses(model, field, value):
    kw = dict(GOOD, **({"old_decision_ids": ["x"]} if model is D.SupersedeDecisionRequest else {}))
    model(**kw)  # the boundary values are valid
    with pytest.raises(ValidationError) as e:
        model(**dict(kw, **{field: value}))
    assert e.value.field == field


def test_error_names_the_seed_rule():
    with pytest.raises(ValidationError) as e:
        D.DecisionContent(title="Use Postgres", target="db", rationale=RATIONALE)
    assert e.value.field == "target"
    assert "length >= 3" in e.value.rule and "TargetStr" in e.value.rule
    with pytest.raises(ValidationError) as e:
        D.RecordDecisionRequest(title="t", target="database", rationale="Too short")
    assert "RationaleStr: at least 10 characters" in e.value.rule


STREAM = dict(decision_id="d1", target="database", title="t", rationale=RATIONALE,
              first_seen=T0, last_seen=T0)


@pytest.mark.parametrize("field, bad, good", [
    ("confidence", 1.5, 1.0), ("confidence", -0.1, 0.0),
    ("coverage", 1.2, 1.0), ("coverage", -0.5, 0.0),
    ("stability_score", 1.01, 1.0), ("stability_score", -1.0, 0.0),
    ("frequency", -1, 0),
    ("decision_id", "", "x"),
    ("first_seen", datetime(2026, 1, 1), T0),
])
def test_decision_stream_ranges(field, bad, good):
    D.DecisionStream(**dict(STREAM, **{field: good}))
    with pytest.raises(ValidationError) as e:
        D.DecisionStream(**dict(STREAM, **{field: bad}))
    assert e.value.field == field


@pytest.mark.parametrize("kw, field", [
    ({"query": ""}, "query"), ({"limit": 0}, "limit"), ({"limit": 51}, "limit"),
    ({"offset": -1}, "offset"), ({"mode": "fuzzy"}, "mode"),
])
def test_search_request_ranges(kw, field):
    ok = D.SearchDecisionsRequest(query="database")
    assert (ok.limit, ok.offset, ok.namespace, ok.mode) == (5, 0, "default", "balanced")
    D.SearchDecisionsRequest(query="q", limit=50)
    with pytest.raises(ValidationError) as e:
        D.SearchDecisionsRequest(**dict({"query": "database"}, **kw))
    assert e.value.field == field


def test_memory_decision_and_intent_models():
    md = D.MemoryDecision(should_persist=True, store_type="semantic", reason="Decision recorded")
    assert (md.priority, md.metadata) == (0, {})
    for kw, field in [({"priority": 11}, "priority"), ({"priority": -1}, "priority"),
                      ({"store_type": "disk"}, "store_type")]:
        with pytest.raises(ValidationError) as e:
            D.MemoryDecision(**{"should_persist": False, "store_type": "none", "reason": "r", **kw})
        assert e.value.field == field
    with pytest.raises(ValidationError) as e:
        ResolutionIntent(resolution_type="merge", rationale="r", target_decision_ids=[])
    assert e.value.field == "resolution_type"
    with pytest.raises(ValidationError) as e:
        D.ProceduralContent(steps=[{"rationale": "x"}], target_task="t", success_evidence_ids=[])
    assert e.value.field.startswith("steps")


def test_models_coerce_like_pydantic():
    p = D.ProceduralContent(steps=[{"action": "x"}], target_task="t", success_evidence_ids=[])
    assert p.steps == [D.ProceduralStep(action="x")]
    c = RecordDecision(title="t", target="database", rationale=RATIONALE, scope="infra", confidence=1)
    assert c.scope is PatternScope.INFRA and type(c.confidence) is float


def test_models_decode_from_json_with_the_same_rules():
    ok = msgspec.json.decode(b'{"title":"t","target":"database","rationale":"0123456789"}',
                             type=D.RecordDecisionRequest)
    assert ok.namespace == "default" and ok.consequences == []
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"title":"t","target":"db","rationale":"0123456789"}',
                            type=D.RecordDecisionRequest)


def test_payload_schema_is_checked_on_append():
    bad = braidlog.delta("b1", "decision_recorded", {
        "decision_id": braidlog.new_id(), "title": "t", "target": "db", "rationale": RATIONALE})
    with pytest.raises(ValidationError) as e:
        braidlog.validate(bad)
    assert e.value.field == "payload.target"
    with pytest.raises(ValidationError):
        braidlog.validate(braidlog.delta("b1", "proposal_drafted", {
            "proposal_id": "p", "title": "t", "target": "database", "rationale": RATIONALE,
            "confidence": 2.0}))


def test_kinds_are_owned_by_decisions():
    assert set(braidlog.REGISTRY.owned_by("decisions")) == D.KINDS


# ------------------------------------------------------------------------- recording decisions

def test_record_a_decision():
    s = Session()
    did = s.record(scope="infra", consequences=["run migrations"], keywords=["sql"])
    (d,) = s.log
    assert d.id == did and d.kind == "decision_recorded"
    rec = s.state.decisions[did]
    assert (rec.status, rec.title, rec.target, rec.namespace, rec.scope) == (
        "active", "Use PostgreSQL", "database", "default", PatternScope.INFRA)
    assert D.active_decision(s.state, "database") == did
    content = D.decision(s.state, did)
    assert content == D.DecisionContent(title="Use PostgreSQL", target="database", rationale=RATIONALE,
                                        consequences=["run migrations"], keywords=["sql"])


def test_a_conflicting_decision_needs_a_resolution_intent():
    s = Session()
    old = s.record()
    s.refused(RecordDecision(title="Use MySQL", target="database", rationale=RATIONALE),
              "a ResolutionIntent is required")
    assert s.state.decisions[old].status == "active"


def test_an_intent_must_cover_every_conflicting_id():
    s = Session()
    s.record()
    other = s.record(target="cache")
    s.refused(RecordDecision(title="Use MySQL", target="database", rationale=RATIONALE,
                             intent=intent("deprecate", other)),
              "does not cover .* a ResolutionIntent is required")


@pytest.mark.parametrize("conflict", [True, False])
def test_abort_changes_nothing(conflict):
    s = Session()
    old = s.record(target="database" if conflict else "cache")
    cmd = RecordDecision(title="Use MySQL", target="database", rationale=RATIONALE,
                         intent=intent("abort", old))
    assert s.run(cmd) == []
    assert len(s.log) == 1 and s.state.decisions[old].status == "active"
    md = D.memory_decision(cmd, [])
    assert not md.should_persist and md.store_type == "none" and md.reason.startswith("ABORTED")


def test_supersede_links_both_ways_in_one_delta():
    s = Session()
    old = s.record()
    deltas = s.run(RecordDecision(title="Use MySQL", target="database", rationale=RATIONALE,
                                  intent=intent("supersede", old)), at=1)
    assert len(deltas) == 1  # one fact: atomic by construction
    new = deltas[0].id
    o, n = s.state.decisions[old], s.state.decisions[new]
    assert (o.status, o.superseded_by) == ("superseded", new)
    assert (n.status, n.supersedes) == ("active", [old])
    assert D.active_decision(s.state, "database") == new
    assert D.decision(s.state, old).superseded_by == new
    assert D.decision(s.state, new).supersedes == [old]


def test_deprecate_marks_old_decisions_deprecated():
    s = Session()
    old = s.record()
    (d,) = s.run(RecordDecision(title="Use MySQL", target="database", rationale=RATIONALE,
                                intent=intent("deprecate", old)))
    o = s.state.decisions[old]
    assert (o.status, o.superseded_by, o.deprecated_by) == ("deprecated", None, d.id)
    assert s.state.decisions[d.id].deprecates == [old] and s.state.decisions[d.id].supersedes == []
    assert D.active_decision(s.state, "database") == d.id


def test_superseding_unknown_inactive_or_foreign_decisions_is_refused():
    s = Session()
    old = s.record()
    s.run(SupersedeDecision(title="Use MySQL", target="database", rationale=RATIONALE,
                            old_decision_ids=[old]))
    s.refused(SupersedeDecision(title="Use SQLite", target="database", rationale=RATIONALE,
                                old_decision_ids=["01ARZ3NDEKTSV4RRFFQ69G5FAV"]), "unknown decision")
    s.refused(SupersedeDecision(title="Use SQLite", target="cache", rationale=RATIONALE,
                                old_decision_ids=[old]), "it is superseded .*not active")
    elsewhere = s.record(target="queue", namespace="ops")
    s.refused(SupersedeDecision(title="Use SQLite", target="queue", rationale=RATIONALE,
                                old_decision_ids=[elsewhere]), "namespace 'ops'")
    s.refused(RecordDecision(title="Use SQLite", target="cache", rationale=RATIONALE,
                             intent=intent("deprecate", old)), "cannot deprecate .* superseded")


def test_supersede_request_must_still_cover_the_target_conflict():
    s = Session()
    s.record(target="database")
    b = s.record(target="cache")
    s.refused(SupersedeDecision(title="Use Redis", target="cache", rationale=RATIONALE,
                                old_decision_ids=["01ARZ3NDEKTSV4RRFFQ69G5FAV"]),
              "cannot supersede '01ARZ3NDEKTSV4RRFFQ69G5FAV': unknown decision")
    (d,) = s.run(SupersedeDecision(title="Use Valkey", target="cache", rationale=RATIONALE,
                                   old_decision_ids=[b]))
    assert s.state.decisions[b].superseded_by == d.id


def test_a_supersede_across_targets_is_refused_as_ledgermind_does():
    """LedgerMind v3.2.1 Memory.supersede_decision: "Cannot supersede {id}: it is no longer
    active for target {target} in namespace {namespace}". A decision on one target cannot leave
    another target with no active decision; nothing is written."""
    s = Session()
    a = s.record(target="database")
    b = s.record(target="cache")
    for command in (SupersedeDecision(title="Use Redis", target="cache", rationale=RATIONALE,
                                      old_decision_ids=[a, b]),
                    RecordDecision(title="Use Redis", target="cache", rationale=RATIONALE,
                                   intent=intent("supersede", a, b))):
        s.refused(command, f"supersede_same_target: cannot supersede '{a}': it is no longer active for "
                           "target 'cache' in namespace 'default'")
    assert (s.state.decisions[a].status, s.state.decisions[b].status) == ("active", "active")
    # retiring the other target's decision is a deprecation
    (d,) = s.run(RecordDecision(title="One store", target="cache", rationale=RATIONALE,
                                intent=ResolutionIntent(resolution_type="deprecate", rationale=RATIONALE,
                                                        target_decision_ids=[a, b])))
    assert {s.state.decisions[x].deprecated_by for x in (a, b)} == {d.id}


def test_namespaces_keep_separate_active_decisions():
    s = Session()
    a = s.record(namespace="default")
    b = s.record(namespace="team-b")
    assert D.active_decision(s.state, "database") == a
    assert D.active_decision(s.state, "database", "team-b") == b


# ---------------------------------------------------------------------- rules over raw deltas

def raw(kind: str, payload: dict, *, at: float = 1.0, who: Provenance = HUMAN, confidence: float = 1.0,
        own_id: str | None = None) -> GenericDelta:
    """A hand-made delta; ``own_id`` names the payload field that must carry the delta's id."""
    d = GenericDelta(braid_id="b1", kind=kind, ts=day(at), provenance=who, confidence=confidence,
                     payload=payload)
    return msgspec.structs.replace(d, payload={**payload, own_id: d.id}) if own_id else d


def test_every_rule_refuses_a_raw_delta_that_breaks_it():
    """D.check is what the boundary runs for each delta: the same rules as the commands."""
    s = Session()
    old = s.record(target="database")
    (drafted,) = s.run(DraftProposal(proposal=ProposalContent(title="p", target="queue", rationale=RATIONALE)))
    pid = drafted.id
    s.run(RejectProposal(proposal_id=pid, reason="not now"), at=0.5)
    decision = {"title": "Use SQLite", "target": "database", "rationale": RATIONALE}
    cases = [
        (raw("decision_recorded", decision, own_id="decision_id"), "one_active_decision_per_target: CONFLICT"),
        (raw("decision_recorded", {**decision, "decision_id": old}), "id_is_delta_id: must be the delta's id"),
        (raw("decision_recorded", {**decision, "supersedes": ["nope"]}, own_id="decision_id"),
         "resolution_targets_active: cannot supersede 'nope': unknown decision"),
        (raw("decision_recorded", {**decision, "supersedes": [old], "deprecates": [old]}, own_id="decision_id"),
         "resolution_targets_active: decisions .* cannot be both superseded and deprecated"),
        (raw("decision_recorded", {**decision, "target": "queue", "intervention": True}, own_id="decision_id"),
         "intervention_confidence: an intervention is recorded with confidence 0.7, not 1.0"),
        (raw("decision_recorded", {**decision, "target": "queue", "proposal_id": pid}, own_id="decision_id"),
         f"proposal_status_flow: cannot accept proposal '{pid}': it is rejected"),
        (raw("decision_used", {"decision_id": "nope"}), "decision_known: cannot use decision 'nope'"),
        (raw("proposal_accepted", {"proposal_id": pid, "decision_id": old}),
         f"proposal_status_flow: cannot accept proposal '{pid}': it is rejected; only a draft proposal"),
        (raw("proposal_falsified", {"proposal_id": pid, "reason": "wrong"}),
         "proposal_status_flow: cannot falsify proposal"),
        (raw("proposal_rejected", {"proposal_id": "nope", "reason": "no"}),
         "proposal_status_flow: cannot reject proposal 'nope': no such proposal"),
        (raw("trust_boundary_set", {"boundary": "human_only"}, who=AGENT),
         "boundary_set_by_human: only a human"),
        (raw("target_alias_registered", {"alias": "DATABASE", "target": "queue"}),
         "alias_names_one_target: 'DATABASE' is a target"),
    ]
    for d, message in cases:
        stored, _ = braidlog.validate(d)  # every case passes the kind's schema: only a rule refuses it
        with pytest.raises((Rejected, ValidationError), match=message):
            D.check(s.state, stored)
    # the same deltas, made right, pass
    for d in [raw("decision_recorded", {**decision, "supersedes": [old]}, own_id="decision_id"),
              raw("decision_recorded", {**decision, "target": "queue", "intervention": True},
                  confidence=0.7, own_id="decision_id"),
              raw("decision_used", {"decision_id": old}),
              raw("trust_boundary_set", {"boundary": "human_only"})]:
        D.check(s.state, braidlog.validate(d)[0])


@pytest.mark.parametrize("store", ["memory", "lmdb"])
def test_raw_appends_that_break_a_rule_are_refused_with_nothing_of_the_batch_written(tmp_path, store):
    """The boundary: Braid.append and append_batch run the same rules as the commands."""
    path = None if store == "memory" else tmp_path / "store.lmdb"
    with braidlog.open(path, projections=D.PROJECTIONS) as braid:
        old = D.execute(braid, RecordDecision(title="Use PostgreSQL", target="database", rationale=RATIONALE),
                        braid_id="b1", provenance="user", now=T0).metadata["decision_id"]
        (pid,) = [r.delta.id for r in braid.execute(D.DECIDER, DraftProposal(proposal=ProposalContent(
            title="Shard", target="queue", rationale=RATIONALE)), braid_id="b1", provenance="user", now=day(0.1))]
        head = braid.head()
        decision = {"title": "Use SQLite", "target": "DataBase", "rationale": RATIONALE}
        fine = raw("message", {"text": "an unrelated delta first"}, at=1)
        for bad, message in [
            (raw("decision_recorded", decision, own_id="decision_id", at=1),
             "one_active_decision_per_target: CONFLICT: target 'DataBase' \\(registered as 'database'\\)"),
            (raw("decision_recorded", {**decision, "target": "queue", "rationale": "too short"},
                 own_id="decision_id", at=1), "rationale"),
            (raw("proposal_accepted", {"proposal_id": pid, "decision_id": old}, at=1),
             "accepted_as_its_decision: "),
            (raw("proposal_rejected", {"proposal_id": pid, "reason": "no"}, at=1, who=HUMAN), None),
        ]:
            if message is None:  # a draft may be rejected once; the status then cannot jump again
                braid.append(bad)
                head = braid.head()
                bad = raw("proposal_accepted", {"proposal_id": pid, "decision_id": old}, at=2)
                message = "proposal_status_flow: cannot accept proposal .*: it is rejected"
            with pytest.raises((Rejected, ValidationError), match=message):
                braid.append(bad)
            with pytest.raises((Rejected, ValidationError), match=message):
                braid.append_batch([fine, bad])
            assert braid.head() == head  # nothing of the batch was written
            assert braid.log.get(fine.id) is None
        state = braid.state("decisions")
        assert D.active_decisions(state, "database") == [old]
        # with the intent, the same raw decision enters
        ok = raw("decision_recorded", {**decision, "supersedes": [old]}, own_id="decision_id", at=3)
        braid.append_batch([fine, ok])
        assert D.active_decisions(braid.state("decisions"), "DATABASE") == [ok.id]
        assert braid.state("decisions").decisions[old].superseded_by == ok.id


def test_an_accepted_proposal_names_the_decision_recorded_from_it():
    s = Session()
    (drafted,) = s.run(DraftProposal(proposal=ProposalContent(title="p", target="queue", rationale=RATIONALE)))
    other = s.record(target="cache")
    with pytest.raises(Rejected, match="^accepted_as_its_decision: "):
        D.check(s.state, raw("proposal_accepted", {"proposal_id": drafted.id, "decision_id": other}))
    deltas = s.run(AcceptProposal(proposal_id=drafted.id), at=1)  # decision_recorded, proposal_accepted
    assert [d.kind for d in deltas] == ["decision_recorded", "proposal_accepted"]
    # the pair is checked in order: the second against the state after the first
    before = D.State()
    for d in s.log[:2]:
        D.evolve(before, d)
    D.check_batch(before, s.log[2:])
    with pytest.raises(Rejected, match="^accepted_as_its_decision: "):
        D.check_batch(before, s.log[3:])  # proposal_accepted without its decision


def test_a_retried_delta_passes_its_own_rules():
    """The store makes an identical retry a no-op; its rules must not refuse it first."""
    s = Session()
    (d,) = s.run(RecordDecision(title="t", target="database", rationale=RATIONALE))
    (p,) = s.run(DraftProposal(proposal=ProposalContent(title="p", target="queue", rationale=RATIONALE)))
    (r,) = s.run(RejectProposal(proposal_id=p.id, reason="no"))
    for x in (d, p, r):
        D.check(s.state, x)


# ------------------------------------------------------------------------------ target registry

def test_targets_are_matched_case_insensitively_before_conflict_detection():
    """LedgerMind's TargetRegistry.normalize: "DataBase" after "database" names the same target,
    so it is a conflict needing a ResolutionIntent, not a second active decision."""
    s = Session()
    old = s.record(target="database")
    s.refused(RecordDecision(title="Use SQLite", target="DataBase", rationale=RATIONALE),
              r"^one_active_decision_per_target: CONFLICT: target 'database' in namespace 'default' has "
              r"the active decision\(s\) \['" + old + r"'\]; a ResolutionIntent is required")
    # a raw delta that spells the target otherwise is matched the same way at the boundary
    raw = GenericDelta(braid_id="b1", kind="decision_recorded", ts=day(1), provenance=HUMAN, confidence=1.0,
                       payload={"decision_id": "x", "title": "Use SQLite", "target": "DataBase",
                                "rationale": RATIONALE})
    raw = msgspec.structs.replace(raw, payload={**raw.payload, "decision_id": raw.id})
    with pytest.raises(Rejected, match=r"^one_active_decision_per_target: CONFLICT: target 'DataBase' "
                                       r"\(registered as 'database'\) in namespace 'default'"):
        D.check(s.state, raw)
    new = s.record(title="Use SQLite", target="DATABASE", intent=intent("supersede", old), at=1)
    (d,) = [x for x in s.log if x.id == new]
    assert d.payload["target"] == "database"  # the command writes the registered name
    assert D.active_decisions(s.state, "Database") == [new]
    assert s.state.decisions[old].superseded_by == new


def test_an_alias_registered_by_a_delta_names_its_target():
    s = Session()
    old = s.record(target="database")
    (d,) = s.run(D.RegisterTargetAlias(alias="primary_store", target="DataBase"))
    assert (d.kind, d.payload) == ("target_alias_registered", {"alias": "primary_store", "target": "DataBase"})
    assert s.run(D.RegisterTargetAlias(alias="primary_store", target="database")) == []  # already so
    assert D.resolve_target(s.state, "primary_store") == "database"
    assert D.resolve_target(s.state, "PRIMARY_STORE") == "database"  # aliases match case-insensitively too
    assert D.active_decision(s.state, "Primary_Store") == old
    s.refused(RecordDecision(title="Use SQLite", target="primary_store", rationale=RATIONALE),
              "^one_active_decision_per_target: CONFLICT: target 'database' in namespace 'default'")
    # a name that already names a target cannot alias another
    s.record(target="queue", at=1)
    s.refused(D.RegisterTargetAlias(alias="Queue", target="database"),
              "^alias_names_one_target: 'Queue' is a target; it cannot also name 'database'")
    s.refused(D.RegisterTargetAlias(alias="primary_store", target="queue"),
              "^alias_names_one_target: 'primary_store' already names target 'database'")
    # an alias may register its target: a decision recorded there later uses that name
    s.run(D.RegisterTargetAlias(alias="bus_main", target="message_bus"))
    bus = s.record(target="BUS_MAIN", at=2)
    assert s.state.decisions[bus].target == "message_bus"


def test_target_matching_order_is_exact_then_alias_then_case_insensitive():
    """normalize: exact target, exact alias, case-insensitive target, case-insensitive alias."""
    state = D.State(targets={"logs": "logs", "cache": "Cache"}, aliases={"LOGS": "database"},
                    folded_aliases={"logs": "database"})
    assert D.resolve_target(state, "logs") == "logs"          # exact target
    assert D.resolve_target(state, "LOGS") == "database"      # exact alias before the folded target
    assert D.resolve_target(state, "Logs") == "logs"          # folded target before the folded alias
    assert D.resolve_target(state, "CACHE") == "Cache"
    assert D.resolve_target(state, "unknown") is None
    assert D.canonical_target(state, "unknown") == "unknown"  # a new target keeps its name


def test_an_alias_through_the_cli_append(tmp_path, capsys):
    """The CLI registers an alias as it appends any delta: `braidlog append` of the kind's JSON."""
    import json

    from braidlog.cli import main

    path = tmp_path / "store.lmdb"
    with braidlog.open(path, projections=D.PROJECTIONS) as braid:
        D.execute(braid, RecordDecision(title="Use PostgreSQL", target="database", rationale=RATIONALE),
                  braid_id="b1", provenance="user", now=T0)
    src = tmp_path / "alias.json"
    src.write_text(json.dumps({"braid_id": "b1", "kind": "target_alias_registered",
                               "ts": "2026-01-01T01:00:00Z", "provenance": {"kind": "user"}, "confidence": 1.0,
                               "payload": {"alias": "primary_store", "target": "database"}}))
    assert main(["--store", str(path), "append", str(src)]) == 0
    assert "appended 1 delta(s)" in capsys.readouterr().out
    with braidlog.open(path, projections=D.PROJECTIONS) as braid:
        assert D.resolve_target(braid.state("decisions"), "Primary_Store") == "database"
        md = D.execute(braid, RecordDecision(title="Use SQLite", target="primary_store", rationale=RATIONALE),
                       braid_id="b1", provenance="user", now=day(1))
        assert not md.should_persist and "a ResolutionIntent is required" in md.reason
        head = braid.head()
    # the CLI's append passes the same boundary: a second active decision through the alias is refused
    clash = raw("decision_recorded", {"title": "Use SQLite", "target": "PRIMARY_STORE", "rationale": RATIONALE},
                own_id="decision_id", at=2)
    src.write_bytes(braidlog.to_json(clash))
    capsys.readouterr()
    assert main(["--store", str(path), "append", str(src)]) != 0
    assert "one_active_decision_per_target: CONFLICT" in capsys.readouterr().err
    with braidlog.open(path, projections=D.PROJECTIONS) as braid:
        assert braid.head() == head


def test_requests_become_commands():
    s = Session()
    req = D.RecordDecisionRequest(title="Use PostgreSQL", target="database", rationale=RATIONALE,
                                  consequences=["backups"])
    (d,) = s.run(RecordDecision.from_request(req))
    sup = D.SupersedeDecisionRequest(title="Use MySQL", target="database", rationale=RATIONALE,
                                     old_decision_ids=[d.id])
    (e,) = s.run(SupersedeDecision.from_request(sup))
    assert s.state.decisions[d.id].superseded_by == e.id


# ------------------------------------------------------------------------------- idempotency

def test_recording_with_the_same_id_twice_is_a_no_op():
    s = Session()
    did = braidlog.new_id()
    cmd = RecordDecision(title="Use PostgreSQL", target="database", rationale=RATIONALE, decision_id=did)
    assert [d.id for d in s.run(cmd)] == [did]
    assert s.run(cmd, at=1) == []
    s.refused(RecordDecision(title="Use MySQL", target="cache", rationale=RATIONALE, decision_id=did),
              "already taken")


def test_recording_the_active_decision_again_is_a_no_op():
    s = Session()
    s.record()
    assert s.run(RecordDecision(title="Use PostgreSQL", target="database", rationale=RATIONALE)) == []
    md = D.memory_decision(RecordDecision(title="Use PostgreSQL", target="database", rationale=RATIONALE), [])
    assert not md.should_persist and md.reason.startswith("already done")


def test_superseding_again_is_a_no_op():
    s = Session()
    old = s.record()
    cmd = SupersedeDecision(title="Use MySQL", target="database", rationale=RATIONALE, old_decision_ids=[old])
    assert len(s.run(cmd)) == 1
    assert s.run(cmd, at=1) == []
    new_id = braidlog.new_id()
    cmd = RecordDecision(title="Use SQLite", target="database", rationale=RATIONALE, decision_id=new_id,
                         intent=intent("supersede", D.active_decision(s.state, "database")))
    assert len(s.run(cmd)) == 1
    assert s.run(cmd) == []


def test_proposal_commands_are_idempotent():
    s = Session()
    pid = braidlog.new_id()
    content = ProposalContent(title="Cache sessions", target="session_cache", rationale=RATIONALE)
    assert len(s.run(DraftProposal(proposal=content, proposal_id=pid))) == 1
    assert s.run(DraftProposal(proposal=content, proposal_id=pid)) == []
    assert s.run(DraftProposal(proposal=content)) == []  # the same draft is already waiting
    assert len(s.run(RejectProposal(proposal_id=pid, reason="not now"))) == 1
    assert s.run(RejectProposal(proposal_id=pid, reason="not now")) == []
    assert s.run(SetTrustBoundary(boundary=TrustBoundary.AGENT_WITH_INTENT)) == []


# ------------------------------------------------------------------------------- invariants

def test_evolve_never_changes_a_recorded_decision_or_reactivates_one():
    s = Session()
    old = s.record()
    new = s.record(title="Use MySQL", intent=intent("supersede", old), at=1)
    # hand-appended facts that decide would refuse: evolve stays total and keeps the invariants
    s.append(braidlog.delta("b1", "decision_recorded", {
        "decision_id": old, "title": "Changed", "target": "elsewhere", "rationale": "changed rationale"},
        ts=day(2)))
    third = braidlog.new_id()
    s.append(braidlog.delta("b1", "decision_recorded", {
        "decision_id": third, "title": "Use SQLite", "target": "database", "rationale": RATIONALE,
        "supersedes": [old]}, ts=day(3), id=third))
    o = s.state.decisions[old]
    assert (o.title, o.target, o.rationale) == ("Use PostgreSQL", "database", RATIONALE)
    assert (o.status, o.superseded_by) == ("superseded", new)
    assert s.state.decisions[third].supersedes == []  # the link it claimed was not made
    assert D.resolve_active_head(s.state, old).decision_id == new


def test_a_hand_appended_second_active_must_be_resolved_by_the_next_decision():
    s = Session()
    a = s.record()
    b = braidlog.new_id()
    s.append(braidlog.delta("b1", "decision_recorded", {
        "decision_id": b, "title": "Rogue", "target": "database", "rationale": RATIONALE}, id=b, ts=day(1)))
    assert s.state.active["default"]["database"] == [a, b]
    s.refused(RecordDecision(title="Fix", target="database", rationale=RATIONALE, intent=intent("supersede", a)),
              rf"does not cover the active decision\(s\) \['{b}'\]")
    (d,) = s.run(RecordDecision(title="Fix", target="database", rationale=RATIONALE,
                                intent=intent("supersede", a, b)))
    assert s.state.active["default"]["database"] == [d.id]


def test_proposal_outcomes_on_non_drafts_are_ignored_by_evolve():
    s = Session()
    (d,) = s.run(DraftProposal(proposal=ProposalContent(title="t", target="tgt", rationale=RATIONALE)))
    s.run(RejectProposal(proposal_id=d.id, reason="no"))
    s.append(braidlog.delta("b1", "proposal_accepted", {"proposal_id": d.id, "decision_id": "x"}))
    s.append(braidlog.delta("b1", "proposal_accepted", {"proposal_id": "missing", "decision_id": "x"}))
    assert s.state.proposals[d.id].status is ProposalStatus.REJECTED
    assert s.state.proposals[d.id].decision_id is None


def test_evolve_is_total_on_payloads_it_cannot_read():
    state = D.DECIDER.start()
    for kind, payload in [("decision_recorded", {}), ("decision_used", {"decision_id": 3}),
                          ("proposal_accepted", {"proposal_id": "p"}), ("trust_boundary_set", {"boundary": "x"})]:
        d = GenericDelta(braid_id="b1", kind=kind, ts=T0, provenance=HUMAN, confidence=1.0, payload=payload)
        assert D.evolve(state, d) is state
    assert (state.decisions, state.proposals, state.last_ts) == ({}, {}, T0)


def check_invariants(state: D.State, contents: dict, ever_inactive: set, statuses: dict) -> None:
    """Every invariant of the decisions projection, over any state decide can reach."""
    order = list(state.decisions)
    actives: dict[tuple[str, str], list[str]] = {}
    for did, rec in state.decisions.items():
        assert contents.setdefault(did, (rec.title, rec.target, rec.rationale)) == (
            rec.title, rec.target, rec.rationale), "target, title and rationale never change"
        if rec.status == "active":
            assert did not in ever_inactive, "a superseded decision never becomes active again"
            actives.setdefault((rec.namespace, rec.target_key), []).append(did)
            assert rec.target_key == D.canonical_target(state, rec.target), "filed under its registered name"
        else:
            ever_inactive.add(did)
        if rec.superseded_by is not None:
            assert rec.status == "superseded"
            assert did in state.decisions[rec.superseded_by].supersedes, "links go both ways"
            assert order.index(rec.superseded_by) > order.index(did), "successors are later: no cycle"
        for old in rec.supersedes:
            assert state.decisions[old].superseded_by == did, "links go both ways"
        seen, cur = set(), did
        while cur is not None:
            assert cur not in seen, "no cycles"
            seen.add(cur)
            cur = state.decisions[cur].superseded_by
    for key, ids in actives.items():
        assert len(ids) == 1, f"one active decision per (namespace, target): {key} has {ids}"
    index = {(ns, t): ids for ns, targets in state.active.items() for t, ids in targets.items()}
    assert index == actives
    for pid, prop in state.proposals.items():
        before = statuses.setdefault(pid, prop.status)
        assert before == prop.status or before is ProposalStatus.DRAFT, "proposals leave draft once"
        statuses[pid] = prop.status
        assert (prop.decision_id is not None) == (prop.status is ProposalStatus.ACCEPTED)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_invariants_hold_over_random_sessions(data):
    s = Session()
    contents, ever_inactive, statuses = {}, set(), {}
    targets = st.sampled_from(["alpha", "beta", "gamma"])
    namespaces = st.sampled_from(["default", "ops"])
    who = st.sampled_from([HUMAN, AGENT])
    for step in range(data.draw(st.integers(4, 30))):
        ids, pids = list(s.state.decisions), list(s.state.proposals)
        some = st.lists(st.sampled_from(ids), max_size=3) if ids else st.just([])
        op = data.draw(st.sampled_from(["record", "intent", "supersede", "draft", "accept", "reject",
                                        "falsify", "use", "cite", "boundary"]))
        kw = dict(title=data.draw(st.sampled_from(["A", "B"])), target=data.draw(targets),
                  rationale=RATIONALE, namespace=data.draw(namespaces))
        if op == "record":
            cmd = RecordDecision(**kw, intervention=data.draw(st.booleans()))
        elif op == "intent":
            kind = data.draw(st.sampled_from(["supersede", "deprecate", "abort"]))
            cmd = RecordDecision(**kw, intent=intent(kind, *data.draw(some)))
        elif op == "supersede":
            olds = data.draw(some)
            if not olds:
                continue
            cmd = SupersedeDecision(**kw, old_decision_ids=olds)
        elif op == "draft":
            cmd = DraftProposal(proposal=ProposalContent(
                title=kw["title"], target=kw["target"], rationale=RATIONALE, namespace=kw["namespace"],
                suggested_supersedes=data.draw(some)))
        elif op in ("accept", "reject", "falsify"):
            if not pids:
                continue
            pid = data.draw(st.sampled_from(pids))
            cmd = {"accept": AcceptProposal(proposal_id=pid),
                   "reject": RejectProposal(proposal_id=pid, reason="no"),
                   "falsify": FalsifyProposal(proposal_id=pid, reason="contradicted")}[op]
        elif op == "use":
            if not ids:
                continue
            cmd = UseDecision(decision_id=data.draw(st.sampled_from(ids)))
        elif op == "cite":
            if ids:
                cite(s, *data.draw(some), at=step)
            continue
        else:
            cmd = SetTrustBoundary(boundary=data.draw(st.sampled_from(list(TrustBoundary))),
                                   namespace=data.draw(st.none() | namespaces))
        try:
            s.run(cmd, at=step * 0.7, who=data.draw(who))
        except (Rejected, ValidationError):
            pass
        check_invariants(s.state, contents, ever_inactive, statuses)
    assert msgspec.msgpack.decode(encoded(s.state), type=D.State) == s.state
    assert D.DECIDER.fold(s.log) == s.state
    for did in s.state.decisions:
        head = D.resolve_active_head(s.state, did)
        assert head is not None and (head.status == "active" or head.superseded_by is None)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_invariants_hold_over_random_raw_deltas_through_the_boundary(data):
    """Whatever hand-made deltas are offered, the ones D.check lets in keep every invariant:
    one active decision per (namespace, registered target) whatever the spelling or alias."""
    s = Session()
    contents, ever_inactive, statuses = {}, set(), {}
    spellings = st.sampled_from(["alpha", "Alpha", "ALPHA", "beta", "BETA", "al_main", "AL_MAIN"])
    for step in range(data.draw(st.integers(4, 40))):
        ids, pids = list(s.state.decisions), list(s.state.proposals)
        some = st.lists(st.sampled_from(ids), max_size=3) if ids else st.just([])
        op = data.draw(st.sampled_from(["decision", "draft", "outcome", "alias", "use"]))
        who = data.draw(st.sampled_from([HUMAN, AGENT]))
        base = {"title": "t", "target": data.draw(spellings), "rationale": RATIONALE,
                "namespace": data.draw(st.sampled_from(["default", "ops"]))}
        if op == "decision":
            d = raw("decision_recorded", {**base, "supersedes": data.draw(some), "deprecates": data.draw(some)},
                    own_id="decision_id", who=who, at=step)
        elif op == "draft":
            d = raw("proposal_drafted", base, own_id="proposal_id", who=who, at=step)
        elif op == "outcome":
            if not pids:
                continue
            pid = data.draw(st.sampled_from(pids))
            kind = data.draw(st.sampled_from(["proposal_accepted", "proposal_rejected", "proposal_falsified"]))
            payload = ({"proposal_id": pid, "decision_id": data.draw(st.sampled_from(ids))}
                       if kind == "proposal_accepted" and ids else {"proposal_id": pid, "reason": "r"})
            if kind == "proposal_accepted" and "reason" in payload:
                continue
            d = raw(kind, payload, who=who, at=step)
        elif op == "alias":
            d = raw("target_alias_registered", {"alias": data.draw(spellings), "target": data.draw(spellings)},
                    who=who, at=step)
        else:
            if not ids:
                continue
            d = raw("decision_used", {"decision_id": data.draw(st.sampled_from(ids))}, who=who, at=step)
        stored = braidlog.validate(d)[0]
        before = encoded(s.state)
        try:
            D.check(s.state, stored)
        except (Rejected, ValidationError):
            assert encoded(s.state) == before, "a check must not touch the state"
            continue
        s.append(stored)
        check_invariants(s.state, contents, ever_inactive, statuses)


# ------------------------------------------------------------------------------ proposals

def draft(s: Session, at: float = 0.0, who: Provenance = AGENT, **kw) -> str:
    kw.setdefault("title", "Cache sessions in Redis")
    kw.setdefault("target", "session_cache")
    kw.setdefault("rationale", RATIONALE)
    (d,) = s.run(DraftProposal(proposal=ProposalContent(**kw)), at=at, who=who)
    return d.id


def test_a_proposal_is_written_as_draft():
    s = Session()
    pid = draft(s, at=2, confidence=0.6, strengths=["fast"])
    p = D.proposal(s.state, pid)
    assert p.status is ProposalStatus.DRAFT and p.confidence == 0.6 and p.strengths == ["fast"]
    assert p.first_observed_at == p.last_observed_at == day(2)
    s.refused(DraftProposal(proposal=ProposalContent(
        title="t", target="tgt", rationale=RATIONALE, status=ProposalStatus.ACCEPTED)),
        "written as draft", error=ValidationError)


def test_accepting_records_the_decision_and_supersedes_the_suggestions():
    s = Session()
    old = s.record(target="session_cache", title="Keep sessions in memory")
    pid = draft(s, suggested_supersedes=[old], suggested_consequences=["run redis"], confidence=0.8,
                keywords=["cache"])
    deltas = s.run(AcceptProposal(proposal_id=pid), at=1)
    assert [d.kind for d in deltas] == ["decision_recorded", "proposal_accepted"]
    new = deltas[0].id
    prop = s.state.proposals[pid]
    assert (prop.status, prop.decision_id) == (ProposalStatus.ACCEPTED, new)
    rec = s.state.decisions[new]
    assert (rec.title, rec.target, rec.consequences, rec.keywords, rec.proposal_id, rec.confidence) == (
        "Cache sessions in Redis", "session_cache", ["run redis"], ["cache"], pid, 0.8)
    assert (s.state.decisions[old].superseded_by, rec.supersedes) == (new, [old])
    md = D.memory_decision(AcceptProposal(proposal_id=pid), deltas)
    assert md.should_persist and md.metadata["delta_ids"] == [d.id for d in deltas]
    assert (md.metadata["decision_id"], md.metadata["proposal_id"]) == (new, pid)


def test_accept_only_from_draft():
    s = Session()
    s.refused(AcceptProposal(proposal_id="nope"), "no such proposal")
    accepted, rejected, falsified = draft(s, target="aaa"), draft(s, target="bbb"), draft(s, target="ccc")
    s.run(AcceptProposal(proposal_id=accepted))
    s.run(RejectProposal(proposal_id=rejected, reason="too costly"))
    s.run(FalsifyProposal(proposal_id=falsified, reason="contradicted by load tests"))
    s.refused(AcceptProposal(proposal_id=accepted), "it is accepted as decision .* only a draft")
    s.refused(AcceptProposal(proposal_id=rejected), "it is rejected")
    s.refused(AcceptProposal(proposal_id=falsified), "it is falsified")
    s.refused(RejectProposal(proposal_id=accepted, reason="late"), "only a draft")
    s.refused(FalsifyProposal(proposal_id=rejected, reason="late"), "only a draft")


def test_reject_and_falsify_keep_a_reason():
    s = Session()
    a, b = draft(s, target="aaa"), draft(s, target="bbb")
    s.run(RejectProposal(proposal_id=a, reason="too costly"))
    s.run(FalsifyProposal(proposal_id=b, reason="contradicted", counter_evidence_event_ids=[7]))
    assert (s.state.proposals[a].status, s.state.proposals[a].reason) == (ProposalStatus.REJECTED, "too costly")
    pb = D.proposal(s.state, b)
    assert (pb.status, pb.miss_count, pb.counter_evidence_event_ids) == (ProposalStatus.FALSIFIED, 1, [7])
    with pytest.raises(ValidationError) as e:
        RejectProposal(proposal_id=a, reason="")
    assert e.value.field == "reason"


def test_accepting_into_a_conflict_needs_an_intent():
    s = Session()
    old = s.record(target="session_cache")
    pid = draft(s)
    s.refused(AcceptProposal(proposal_id=pid), "a ResolutionIntent is required")
    assert s.state.proposals[pid].status is ProposalStatus.DRAFT
    deltas = s.run(AcceptProposal(proposal_id=pid, intent=intent("deprecate", old)))
    assert s.state.decisions[old].status == "deprecated"
    assert s.state.decisions[deltas[0].id].deprecates == [old]


def test_accepting_a_stale_suggestion_is_refused():
    s = Session()
    old = s.record(target="session_cache")
    pid = draft(s, suggested_supersedes=[old])
    s.record(target="session_cache", title="Newer", intent=intent("supersede", old))
    s.refused(AcceptProposal(proposal_id=pid), f"cannot supersede '{old}': it is superseded")


# --------------------------------------------------------------------------- trust boundary

def test_only_a_human_sets_the_trust_boundary():
    s = Session()
    s.refused(SetTrustBoundary(boundary=TrustBoundary.AGENT_WITH_INTENT), "^boundary_set_by_human: ", who=AGENT)
    assert D.trust_boundary(s.state, "default") is TrustBoundary.AGENT_WITH_INTENT
    s.run(SetTrustBoundary(boundary=TrustBoundary.HUMAN_ONLY, namespace="prod"))
    assert D.trust_boundary(s.state, "prod") is TrustBoundary.HUMAN_ONLY
    assert D.trust_boundary(s.state, "default") is TrustBoundary.AGENT_WITH_INTENT


def test_human_only_refuses_every_agent_operation():
    s = Session()
    old = s.record(target="database")
    pid = draft(s, target="database", suggested_supersedes=[old])
    s.run(SetTrustBoundary(boundary=TrustBoundary.HUMAN_ONLY))
    for cmd in [
        RecordDecision(title="t", target="queue", rationale=RATIONALE),
        RecordDecision(title="t", target="database", rationale=RATIONALE, intent=intent("supersede", old)),
        SupersedeDecision(title="t", target="database", rationale=RATIONALE, old_decision_ids=[old]),
        AcceptProposal(proposal_id=pid),
        RejectProposal(proposal_id=pid, reason="no"),
        FalsifyProposal(proposal_id=pid, reason="no"),
        DraftProposal(proposal=ProposalContent(title="t", target="queue", rationale=RATIONALE)),
    ]:
        s.refused(cmd, "^trust_boundary: ", who=AGENT)
    assert len(s.run(AcceptProposal(proposal_id=pid), who=HUMAN)) == 2
    assert len(s.run(UseDecision(decision_id=old), who=AGENT)) == 1  # using is not a memory operation


def test_agent_with_intent_allows_agents_with_an_intent_where_a_conflict_needs_one():
    s = Session()
    s.run(SetTrustBoundary(boundary=TrustBoundary.HUMAN_ONLY, namespace="prod"))
    old = s.record(target="database", who=AGENT)  # default namespace: AGENT_WITH_INTENT
    s.refused(RecordDecision(title="t", target="database", rationale=RATIONALE),
              "a ResolutionIntent is required", who=AGENT)
    s.record(title="t", target="database", intent=intent("supersede", old), who=AGENT)
    s.refused(RecordDecision(title="t", target="database", rationale=RATIONALE, namespace="prod"),
              "^trust_boundary: ", who=AGENT)


def test_trust_boundary_refusal_appends_nothing_to_the_store(tmp_path):
    with braidlog.open(tmp_path / "store", projections=D.PROJECTIONS) as braid:
        braid.execute(D.DECIDER, SetTrustBoundary(boundary=TrustBoundary.HUMAN_ONLY),
                      braid_id="b1", provenance="user", now=T0)
        head = braid.head()
        md = D.execute(braid, RecordDecision(title="t", target="database", rationale=RATIONALE),
                       braid_id="b1", provenance="assistant", now=day(1))
        assert (md.should_persist, md.store_type) == (False, "none") and md.reason.startswith("trust_boundary: ")
        with pytest.raises(Rejected, match="^trust_boundary: "):
            braid.execute(D.DECIDER, RecordDecision(title="t", target="database", rationale=RATIONALE),
                          braid_id="b1", provenance="tool", now=day(1))
        assert braid.head() == head
        assert D.execute(braid, RecordDecision(title="t", target="database", rationale=RATIONALE),
                         braid_id="b1", provenance="user", now=day(1)).should_persist


# --------------------------------------------------------------------------- MemoryDecision

def test_every_operation_derives_a_memory_decision():
    s = Session()
    cmd = RecordDecision(title="Use PostgreSQL", target="database", rationale=RATIONALE)
    deltas = s.run(cmd)
    md = D.memory_decision(cmd, deltas)
    assert md == D.MemoryDecision(should_persist=True, store_type="semantic", reason="Decision recorded",
                                  priority=5, metadata={"delta_ids": [deltas[0].id],
                                                        "decision_id": deltas[0].id})
    sup = SupersedeDecision(title="Use MySQL", target="database", rationale=RATIONALE,
                            old_decision_ids=[deltas[0].id])
    out = s.run(sup)
    md = D.memory_decision(sup, out)
    assert md.metadata["superseded"] == [deltas[0].id] and "superseded" in md.reason
    use = UseDecision(decision_id=out[0].id)
    md = D.memory_decision(use, s.run(use))
    assert (md.store_type, md.priority) == ("episodic", 1)
    err = Rejected("CONFLICT: a ResolutionIntent is required")
    md = D.memory_decision(cmd, err)
    assert md == D.MemoryDecision(should_persist=False, store_type="none", reason=str(err),
                                  metadata={"delta_ids": [], "error": "Rejected"})


def test_execute_returns_the_memory_decision_with_the_appended_ids(tmp_path):
    with braidlog.open(tmp_path / "store", projections=D.PROJECTIONS) as braid:
        md = D.execute(braid, RecordDecision(title="Use PostgreSQL", target="database", rationale=RATIONALE),
                       braid_id="b1", provenance="user", now=T0)
        assert md.should_persist and md.metadata["delta_ids"] == [braid.log.read(1).delta.id]
        head = braid.head()
        md = D.execute(braid, RecordDecision(title="Use MySQL", target="database", rationale=RATIONALE),
                       braid_id="b1", provenance="user", now=T0)
        assert not md.should_persist and "a ResolutionIntent is required" in md.reason
        md = D.execute(braid, AcceptProposal(proposal_id="missing"), braid_id="b1", provenance="user", now=T0)
        assert not md.should_persist and "no such proposal" in md.reason
        assert braid.head() == head


def test_execute_needs_a_braid_with_the_decisions_projection():
    with braidlog.open(None, projections=[]) as braid:
        with pytest.raises(ValidationError, match="no decisions projection"):
            D.execute(braid, UseDecision(decision_id="x"), braid_id="b1")


def test_unknown_commands_are_refused():
    with pytest.raises(ValidationError, match="not a decisions command"):
        D.decide(object(), D.State(), Context(now=T0, braid_id="b1"))


# ------------------------------------------------------------------------- lifecycle formulas

def test_stability_score():
    assert D.stability_score([], 0) == 0.0
    assert D.stability_score([T0], 0) == 0.0
    assert D.stability_score([T0, day(5)], 5) == 0.3
    # intervals 1 and 2 days: sample variance 0.5; lifetime 3 -> 1 - 0.5 / 4
    assert D.stability_score([T0, day(1), day(3)], 3) == pytest.approx(0.875)
    # intervals 0.1 and 9.9: variance 48.02; lifetime 10 -> 1 - 48.02 / 11 < 0 -> 0
    assert D.stability_score([T0, day(0.1), day(10)], 10) == 0.0


def test_estimated_removal_cost():
    # SYSTEM 0.3 + 2 consequences 0.1 + 1 context 0.05 + 5 hits 0.05 + confidence 1.0 * 0.1
    assert D.estimated_removal_cost(scope="system", consequences=2, unique_contexts=1, provenance="internal",
                                    hit_count=5, confidence=1.0) == pytest.approx(0.6)
    # LOCAL, nothing else, confidence 0.5 -> 0.05
    assert D.estimated_removal_cost(scope="local", consequences=0, unique_contexts=0, provenance="internal",
                                    hit_count=0, confidence=0.5) == pytest.approx(0.05)
    # INFRA 0.5 + consequences capped 0.2 + contexts capped 0.3 + external 0.4 + hits capped 0.2 -> 1
    assert D.estimated_removal_cost(scope=PatternScope.INFRA, consequences=9, unique_contexts=9,
                                    provenance="external", hit_count=90, confidence=0.8) == 1.0
    # caps alone: 0.2 + 0.3 + 0.2 + 0.08 = 0.78
    assert D.estimated_removal_cost(scope="local", consequences=9, unique_contexts=9, provenance="internal",
                                    hit_count=90, confidence=0.8) == pytest.approx(0.78)


def test_estimated_utility():
    assert D.estimated_utility(frequency=2, unique_contexts=1, scope="local") == pytest.approx(0.4)
    assert D.estimated_utility(frequency=10, unique_contexts=5, scope="infra") == pytest.approx(0.9)
    assert D.estimated_utility(frequency=3, unique_contexts=4, scope="system") == pytest.approx(0.3 + 0.3 + 0.2)
    assert D.estimated_utility(frequency=0, unique_contexts=0, scope="local") == 0.0


@pytest.mark.parametrize("days, vitality", [
    (0, Vit.ACTIVE), (6.99, Vit.ACTIVE), (7, Vit.DECAYING), (29.99, Vit.DECAYING), (30, Vit.DORMANT),
    (30.01, Vit.DORMANT),
])
def test_vitality_thresholds(days, vitality):
    """Seed 000: ACTIVE under 7 idle days, DECAYING 7-30, DORMANT from 30 (LifecycleEngine:
    ``days < 7`` ACTIVE, ``days < 30`` DECAYING, else DORMANT: exactly 30 days is DORMANT)."""
    assert D.vitality_for(days) is vitality


@pytest.mark.parametrize("days, weeks", [
    (6.9, (0, 0)), (7, (1, 0)), (29, (4, 0)), (34.9, (4, 0)), (35, (4, 1)), (50, (4, 3)),
])
def test_weekly_decay(days, weeks):
    assert D.decay_weeks(days) == weeks


def test_promotion_rules():
    base = dict(frequency=0, confidence=0.0, lifetime_days=0.0, coverage=0.0, stability=0.0,
                removal_cost=0.0, vitality=Vit.ACTIVE)
    P, E, C = Phase.PATTERN, Phase.EMERGENT, Phase.CANONICAL
    assert D.promote(P, **dict(base, frequency=3, lifetime_days=0.6)) is E
    assert D.promote(P, **dict(base, confidence=0.5, lifetime_days=0.6)) is E
    assert D.promote(P, **dict(base, frequency=5)) is E
    assert D.promote(P, **dict(base, frequency=3, lifetime_days=0.5)) is P  # lifetime must exceed 0.5
    assert D.promote(P, **dict(base, frequency=2, confidence=0.49, lifetime_days=9)) is P
    canon = dict(base, coverage=0.31, stability=0.61, removal_cost=0.51)
    assert D.promote(E, **canon) is C
    for k, v in [("coverage", 0.3), ("stability", 0.6), ("removal_cost", 0.5), ("vitality", Vit.DECAYING)]:
        assert D.promote(E, **dict(canon, **{k: v})) is E
    assert D.promote(C, **base) is C  # never back


def test_lifecycle_from_the_log():
    """A reflection after each piece of evidence: each is a promote_stream review: removal cost
    (with the old confidence), utility, then confidence = 0.5 x old + 0.5 x (0.4 u + 0.3 rc +
    0.3 s). LOCAL, 2 consequences: removal cost = 0.1 + 0.05 x contexts + hits/100 + 0.1 x confidence."""
    s = Session()
    did = s.record(consequences=["a", "b"])  # LOCAL, confidence 1.0, recorded at day 0
    s.run(UseDecision(decision_id=did, context="ctx-a"), at=1, who=AGENT)
    s.run(D.Reflect(), at=1)
    cite(s, did, at=2, episode="ctx-b")
    s.run(D.Reflect(), at=2)
    assert s.run(D.Reflect(), at=3) == []  # nothing new to review: nothing to write
    cite(s, did, did, at=4, episode="ctx-a")  # cited twice by one delta: one piece of evidence
    s.run(D.Reflect(), at=4)
    # day 1: f 1, 1 context, 1 hit: rc = 0.1 + 0.05 + 0.01 + 0.1 = 0.26, u = 0.1 + 0.2 = 0.3, s = 0
    #        conf = 0.5 + 0.5 x (0.12 + 0.078) = 0.599 -> EMERGENT (conf >= 0.5, lifetime 1 > 0.5)
    # day 2: f 2, 2 contexts: rc = 0.21 + 0.0599 = 0.2699, u = 0.2 + 0.3 = 0.5, s = 0.3
    #        conf = 0.2995 + 0.5 x (0.2 + 0.08097 + 0.09) = 0.484985
    # day 4: f 3, intervals 1, 2 (variance 0.5), lifetime 4: s = 1 - 0.5 / 5 = 0.9
    #        rc = 0.21 + 0.0484985 = 0.2584985, u = 0.3 + 0.3 = 0.6
    #        conf = 0.2424925 + 0.5 x (0.24 + 0.07754955 + 0.27) = 0.536267275
    m = D.lifecycle(s.state.decisions[did], day(5))
    assert (m.frequency, m.unique_contexts, m.hit_count) == (3, 2, 1)
    assert (m.first_seen, m.last_seen, m.lifetime_days) == (T0, day(4), 4.0)
    assert m.coverage == pytest.approx(4 / 30)
    assert m.reinforcement_density == pytest.approx(3 / 4)
    assert m.stability_score == pytest.approx(0.9)
    assert (m.vitality, m.phase) == (Vit.ACTIVE, Phase.EMERGENT)
    assert m.confidence == pytest.approx(0.536267275)
    # the removal cost and utility the day-4 review used (with the confidence it replaced)
    assert m.estimated_removal_cost == pytest.approx(0.21 + 0.0484985)
    assert m.estimated_utility == pytest.approx(0.3 + 0.3)  # 3/10, and 2/5 capped at 0.3
    # 8 idle days: DECAYING, one week charged
    m = D.lifecycle(s.state.decisions[did], day(12))
    assert (m.vitality, m.confidence) == (Vit.DECAYING, pytest.approx(0.536267275 - 0.05))
    assert m.estimated_removal_cost == pytest.approx(0.21 + 0.0484985)  # no review since day 4
    # 36 idle days: DORMANT, weeks 1-4 at 0.05 and week 5 at 0.2
    m = D.lifecycle(s.state.decisions[did], day(40))
    assert (m.vitality, m.confidence) == (Vit.DORMANT, pytest.approx(0.136267275))
    # evidence before as_of only
    m = D.lifecycle(s.state.decisions[did], day(1.5))
    assert (m.frequency, m.last_seen, m.phase, m.confidence) == (1, day(1), Phase.EMERGENT,
                                                                 pytest.approx(0.599))
    # new evidence makes the stream ACTIVE again and is reviewed on the decayed confidence:
    # day 41: 37 idle days cost 0.4 -> 0.136267275; f 4, 3 contexts (ctx-a, ctx-b, braid b1),
    # intervals 1, 2, 37 (variance 420.33 > lifetime 42: s = 0); rc = 0.26 + 0.0136267275,
    # u = 0.4 + 0.3 = 0.7; conf = 0.0681336375 + 0.5 x (0.28 + 0.3 x 0.2736267275) = 0.249177646625
    cite(s, did, at=41)
    m = D.lifecycle(s.state.decisions[did], day(42))
    assert (m.vitality, m.confidence, m.frequency) == (Vit.ACTIVE, pytest.approx(0.249177646625), 4)
    st_ = D.stream(s.state, did, day(42))
    assert (st_.frequency, st_.vitality, st_.confidence, st_.phase) == (
        4, Vit.ACTIVE, pytest.approx(0.249177646625), Phase.EMERGENT)
    assert D.stream(s.state, "unknown", day(1)) is None


def test_promote_stream_recomputes_confidence():
    """LifecycleEngine.promote_stream: confidence = 0.5 x old + 0.5 x (0.4 x utility + 0.3 x
    removal_cost + 0.3 x stability): 0.5 x 0.6 + 0.5 x (0.32 + 0.171 + 0.27) = 0.6805."""
    assert D.promoted_confidence(0.6, utility=0.8, removal_cost=0.57, stability=0.9) == pytest.approx(0.6805)
    # the same through the seed's model: SYSTEM 0.3 + 2 consequences 0.1 + 1 context 0.05 + 6 hits
    # 0.06 + 0.1 x 0.6 = 0.57 (with the old confidence); utility 0.4 + 0.2 + 0.2 = 0.8
    stream = D.DecisionStream(
        decision_id="d1", target="database", title="t", rationale=RATIONALE, scope="system",
        confidence=0.6, frequency=6, unique_contexts=1, hit_count=6, consequences=["a", "b"],
        stability_score=0.9, lifetime_days=5.0, coverage=5 / 30, first_seen=T0, last_seen=day(5))
    promoted = D.promote_stream(stream)
    assert promoted.estimated_removal_cost == pytest.approx(0.57)
    assert promoted.estimated_utility == pytest.approx(0.8)
    assert promoted.confidence == pytest.approx(0.6805)
    assert promoted.phase is Phase.EMERGENT  # frequency 6 >= 3 and lifetime 5 > 0.5; coverage 1/6
    # the phase is judged on the new confidence: 0.45 alone is below 0.5, promoted it is not
    low = msgspec.structs.replace(stream, confidence=0.45, frequency=2, hit_count=2)
    # rc = 0.3 + 0.1 + 0.05 + 0.02 + 0.045 = 0.515; u = 0.2 + 0.2 + 0.2 = 0.6
    # conf = 0.225 + 0.5 x (0.24 + 0.1545 + 0.27) = 0.55725 >= 0.5 -> EMERGENT
    promoted = D.promote_stream(low)
    assert (promoted.confidence, promoted.phase) == (pytest.approx(0.55725), Phase.EMERGENT)
    assert D.promote(Phase.PATTERN, frequency=2, confidence=0.45, lifetime_days=5.0, coverage=5 / 30,
                     stability=0.9, removal_cost=0.515, vitality=Vit.ACTIVE) is Phase.PATTERN


def test_a_decision_without_evidence_ages_but_does_not_mature():
    s = Session()
    did = s.record()
    m = D.lifecycle(s.state.decisions[did], day(100))
    assert (m.frequency, m.lifetime_days, m.stability_score, m.reinforcement_density) == (0, 0.0, 0.0, 0.0)
    assert (m.phase, m.vitality) == (Phase.PATTERN, Vit.DORMANT)
    assert m.confidence == pytest.approx(max(0.0, 1 - 4 * 0.05 - 10 * 0.2))  # 14 weeks idle


def test_canonical_promotion_is_sticky():
    s = Session()
    did = s.record(scope="infra")  # removal cost 0.5 + one context 0.05 + 0.1 x confidence
    for n in (2, 4, 6, 8, 10, 12):
        cite(s, did, at=n)
        s.run(D.Reflect(), at=n)  # a reflection after each piece of evidence
    rec = s.state.decisions[did]
    # reviews (u, rc, s -> confidence): day 2: 0.5, 0.65, 0 -> 0.6975 (EMERGENT);
    # day 4: 0.6, 0.619750, 0.3 -> 0.6067125; day 6: 0.7, 0.61067125, 1.0 -> 0.6849569375;
    # day 8: 0.8, 0.61849569375, 1.0 -> 0.7452528228125 (coverage 8/30 still <= 0.3);
    # day 10: 0.8, 0.62452528228125, 1.0 -> 0.7763052037484375, coverage 10/30 > 0.3: CANONICAL
    assert D.lifecycle(rec, day(9)).phase is Phase.EMERGENT
    m = D.lifecycle(rec, day(10))
    assert (m.phase, m.stability_score) == (Phase.CANONICAL, 1.0)
    assert m.confidence == pytest.approx(0.7763052037484375)
    assert m.estimated_removal_cost == pytest.approx(0.55 + 0.07452528228125)  # with the replaced 0.745...
    assert D.lifecycle(rec, day(200)).phase is Phase.CANONICAL  # DORMANT now, still CANONICAL
    phases = [D.lifecycle(rec, day(n / 2)).phase for n in range(0, 400)]
    order = [Phase.PATTERN, Phase.EMERGENT, Phase.CANONICAL]
    assert [order.index(p) for p in phases] == sorted(order.index(p) for p in phases)


def test_low_confidence_needs_three_observations_and_a_long_enough_life():
    s = Session()
    did = s.record(confidence=0.2)
    for n in range(5):
        cite(s, did, at=n / 1000)  # a burst: lifetime far below half a day
        phase = D.lifecycle(s.state.decisions[did], day(1)).phase
        assert phase is (Phase.EMERGENT if n == 4 else Phase.PATTERN)  # frequency >= 5 at the fifth


def test_an_intervention_starts_emergent_with_the_seed_values():
    s = Session()
    did = s.record(intervention=True)
    (d,) = [x for x in s.log if x.id == did]
    assert d.confidence == 0.7
    m = D.lifecycle(s.state.decisions[did], day(1))
    assert (m.phase, m.vitality, m.estimated_removal_cost, m.estimated_utility, m.confidence) == (
        Phase.EMERGENT, Vit.ACTIVE, 0.8, 0.5, 0.7)
    cite(s, did, at=2)  # evidence: the seed's formulas take over
    # review: rc = 0.05 + 0.07 = 0.12, u = 0.3, s = 0 -> conf = 0.35 + 0.5 x (0.12 + 0.036) = 0.428
    m = D.lifecycle(s.state.decisions[did], day(2))
    assert m.estimated_utility == pytest.approx(0.1 + 0.2)
    assert m.confidence == pytest.approx(0.428)
    assert m.estimated_removal_cost == pytest.approx(0.05 + 0.07)  # with the replaced 0.7
    s.refused(RecordDecision(title="t", target="queue", rationale=RATIONALE, intervention=True, confidence=0.9),
              "an intervention sets confidence 0.7", error=ValidationError)


def test_confidence_comes_from_the_command_or_the_context():
    s = Session()
    a = s.record(target="aaa", confidence=0.4)
    (d,) = s.run(RecordDecision(title="t", target="bbb", rationale=RATIONALE), confidence=0.9)
    assert (s.state.decisions[a].confidence, s.state.decisions[d.id].confidence) == (0.4, 0.9)


def test_as_of_must_be_timezone_aware():
    s = Session()
    did = s.record()
    with pytest.raises(ValidationError) as e:
        D.lifecycle(s.state.decisions[did], datetime(2026, 1, 2))
    assert e.value.field == "as_of"


# ------------------------------------------------------------------------------- evidence

def test_evidence_is_any_delta_citing_the_stream():
    s = Session()
    did = s.record()
    other = s.record(target="cache")
    cite(s, did, at=1)                                     # braid b1 is the context
    cite(s, did, at=2, braid_id="b2")                      # another braid, another context
    s.append(GenericDelta(braid_id="b1", kind="tool_result", ts=day(3), confidence=1.0,
                          provenance=Provenance("tool", knot_id="k1"), payload={"tool": "psql"},
                          refs=Refs(deltas=(did, other))))
    s.append(braidlog.delta("b1", "message", {"text": "not citing"}, ts=day(4)))
    s.run(UseDecision(decision_id=did, context="deploy"), at=5)
    ev = s.state.decisions[did].evidence
    assert [(e.context, e.hit) for e in ev] == [("b1", False), ("b2", False), ("k1", False), ("deploy", True)]
    assert len(s.state.decisions[other].evidence) == 1
    s.refused(UseDecision(decision_id="unknown"), "unknown decision")


def test_citing_before_the_decision_exists_is_not_evidence():
    s = Session()
    did = braidlog.new_id()
    cite(s, did, at=0)
    s.run(RecordDecision(title="t", target="database", rationale=RATIONALE, decision_id=did), at=1)
    assert s.state.decisions[did].evidence == []


def test_history_of_a_decision_through_the_refers_index(tmp_path):
    with braidlog.open(tmp_path / "store", projections=D.PROJECTIONS) as braid:
        def run(cmd, t, who="user"):
            return braid.execute(D.DECIDER, cmd, braid_id="b1", provenance=who, now=day(t))
        (old,) = run(RecordDecision(title="Use PostgreSQL", target="database", rationale=RATIONALE), 0)
        did = old.delta.id
        run(UseDecision(decision_id=did), 1, "assistant")
        braid.append(braidlog.delta("b1", "message", {"text": "as decided"}, ts=day(2),
                                    refs=Refs(deltas=(did,))))
        (new,) = run(SupersedeDecision(title="Use MySQL", target="database", rationale=RATIONALE,
                                       old_decision_ids=[did]), 3)
        assert [r.seq for r in braid.log.scan_refs(did)] == [1, 2, 3, 4]
        assert [r.seq for r in braid.log.scan_refs(new.delta.id)] == [4]


# -------------------------------------------------------------------------------- search

def test_resolve_active_head_follows_the_chain():
    s = Session()
    ids = [s.record(title="v0")]
    for i in range(1, 21):
        ids.append(s.record(title=f"v{i}", intent=intent("supersede", ids[-1]), at=i))
    # 21 records: from ids[1] the chain holds 20 records (resolves), from ids[0] 21 (nothing)
    assert D.resolve_active_head(s.state, ids[1]).decision_id == ids[-1]
    assert D.resolve_active_head(s.state, ids[0]) is None
    assert D.resolve_active_head(s.state, ids[-1]).decision_id == ids[-1]
    assert D.resolve_active_head(s.state, "unknown") is None


def test_resolve_active_head_stops_on_a_cycle_and_keeps_deprecated_records():
    s = Session()
    a = s.record()
    b = s.record(title="B", intent=intent("deprecate", a))
    assert D.resolve_active_head(s.state, a).decision_id == a  # deprecated, no successor
    looped = msgspec.msgpack.decode(encoded(s.state), type=D.State)  # a state no log can produce
    for x, y in ((a, b), (b, a)):
        looped.decisions[x].status, looped.decisions[x].superseded_by = "superseded", y
    assert D.resolve_active_head(looped, a) is None
    assert D.search_candidates(looped, mode="balanced", as_of=day(1)) == []


def session_for_search() -> tuple[Session, dict[str, str]]:
    s = Session()
    ids = {}
    ids["old"] = s.record(title="Use PostgreSQL")
    ids["new"] = s.record(title="Use MySQL", intent=intent("supersede", ids["old"]), at=1)
    ids["gone"] = s.record(title="Use memcached", target="cache")
    ids["cache"] = s.record(title="Use Redis", target="cache", intent=intent("deprecate", ids["gone"]))
    ids["ops"] = s.record(title="Use Kafka", target="queue", namespace="ops")
    ids["draft"] = draft(s, target="tracing")
    ids["rejected"] = draft(s, target="logging")
    ids["accepted"] = draft(s, target="metrics")
    s.run(RejectProposal(proposal_id=ids["rejected"], reason="no"))
    s.run(AcceptProposal(proposal_id=ids["accepted"]))
    ids["from_proposal"] = s.state.proposals[ids["accepted"]].decision_id
    return s, ids


def test_strict_mode_returns_active_decisions_only():
    s, ids = session_for_search()
    got = {c.id for c in D.search_candidates(s.state, mode="strict", as_of=day(2))}
    assert got == {ids["new"], ids["cache"], ids["ops"], ids["from_proposal"]}
    got = {c.id for c in D.search_candidates(s.state, namespace="ops", mode="strict", as_of=day(2))}
    assert got == {ids["ops"]}


def test_balanced_mode_resolves_to_heads_and_weighs():
    s, ids = session_for_search()
    cands = {c.id: c for c in D.search_candidates(s.state, namespace="default", mode="balanced", as_of=day(2))}
    assert cands[ids["old"]].result_id == ids["new"] and cands[ids["old"]].preview == "Use MySQL"
    assert cands[ids["old"]].text.startswith("Use PostgreSQL")  # the matched record's text
    assert cands[ids["gone"]].result_id == ids["gone"] and cands[ids["gone"]].status == "deprecated"
    assert cands[ids["gone"]].weight == pytest.approx(1.35 * 0.3)
    assert cands[ids["new"]].weight == pytest.approx(1.35)
    assert cands[ids["rejected"]].weight == pytest.approx(0.2)
    assert cands[ids["draft"]].weight == 1.0 and cands[ids["draft"]].kind == "proposal"
    assert ids["accepted"] not in cands and ids["ops"] not in cands
    item = D.result_item(cands[ids["old"]], 0.9)
    assert item == D.SearchResultItem(id=ids["new"], score=0.9, status="active", preview="Use MySQL",
                                      kind="decision")


def test_audit_mode_returns_records_as_they_are():
    s, ids = session_for_search()
    cands = {c.id: c for c in D.search_candidates(s.state, mode="audit", as_of=day(2))}
    assert set(cands) == set(ids.values())
    assert cands[ids["old"]].result_id == ids["old"] and cands[ids["old"]].status == "superseded"
    assert cands[ids["accepted"]].status == "accepted"
    with pytest.raises(ValidationError):
        D.search_candidates(s.state, mode="fuzzy")
    assert D.search_candidates(D.State()) == []
    assert {c.id for c in D.search_candidates(s.state, mode="audit")} == set(ids.values())  # as_of: last delta


def test_rank_weights():
    s = Session()
    did = s.record(scope="infra")
    for n in (2, 4, 6, 8, 10, 12):
        cite(s, did, at=n)
        s.run(D.Reflect(), at=n)  # a reflection after each piece of evidence
    rec = s.state.decisions[did]
    assert D.rank_weight(rec, day(12)) == pytest.approx(1.5 * 1.0 * 1.35)   # CANONICAL, ACTIVE
    assert D.rank_weight(rec, day(20)) == pytest.approx(1.5 * 0.5 * 1.35)   # DECAYING
    assert D.rank_weight(rec, day(50)) == pytest.approx(1.5 * 0.2 * 1.35)   # DORMANT
    young = s.state.decisions[s.record(target="cache", at=12)]
    assert D.rank_weight(young, day(13)) == pytest.approx(1.35)             # PATTERN, ACTIVE
    sup = s.state.decisions[s.record(target="cache", title="B", at=13, intent=intent("supersede", young.decision_id))]
    assert D.rank_weight(young, day(14)) == pytest.approx(1.35 * 0.3)
    assert D.rank_weight(sup, day(14)) == pytest.approx(1.35)
    pid = draft(s, target="queue")
    assert D.rank_weight(s.state.proposals[pid], day(14)) == 1.0
    s.run(FalsifyProposal(proposal_id=pid, reason="contradicted"))
    assert D.rank_weight(s.state.proposals[pid], day(14)) == pytest.approx(0.2)


# ---------------------------------------------------------------- checkpoints and time travel

def rich_session() -> Session:
    s, ids = session_for_search()
    s.run(UseDecision(decision_id=ids["new"], context="c1"), at=3, who=AGENT)
    cite(s, ids["new"], ids["cache"], at=4, episode="e1")
    s.run(SetTrustBoundary(boundary=TrustBoundary.HUMAN_ONLY, namespace="ops"), at=5)
    s.run(FalsifyProposal(proposal_id=ids["draft"], reason="contradicted", counter_evidence_event_ids=[3]), at=6)
    s.run(DraftProposal(proposal=ProposalContent(
        title="t", target="runbook", rationale=RATIONALE, procedural=D.ProceduralContent(
            steps=[D.ProceduralStep(action="migrate", rationale="schema")], target_task="db",
            success_evidence_ids=[1, 2]))), at=7)
    s.record(title="Intervene", target="deploys", intervention=True, at=8,
             attachments=[{"name": "plan.md"}], procedural=D.ProceduralContent(
                 steps=[], target_task="deploy", success_evidence_ids=[]))
    return s


def test_state_round_trips_through_checkpoint_encoding():
    s = rich_session()
    decoded = msgspec.msgpack.decode(encoded(s.state), type=D.State)
    assert decoded == s.state
    # folding on from a decoded checkpoint equals folding everything
    half = len(s.log) // 2
    ckpt = msgspec.msgpack.decode(encoded(D.DECIDER.fold(s.log[:half])), type=D.State)
    assert D.DECIDER.fold(s.log[half:], ckpt) == D.DECIDER.fold(s.log) == s.state


def test_time_travel_over_a_store_mixing_kinds(tmp_path):
    s = rich_session()
    with braidlog.open(tmp_path / "store", projections=D.PROJECTIONS, checkpoint_every=7) as braid:
        for i, d in enumerate(s.log):
            braid.append(d)
            if i % 3 == 0:
                braid.append(braidlog.delta("b1", "observation", {"text": "noise"}, ts=d.ts))
        deltas = [r.delta for r in braid.log.scan()]
        assert braid.state("decisions") == s.state == D.DECIDER.fold(deltas)
        for seq in range(0, len(deltas) + 1):
            assert braid.at(seq).state("decisions") == D.DECIDER.fold(deltas[:seq])
    with braidlog.open(tmp_path / "store", projections=D.PROJECTIONS) as braid:  # from checkpoints
        assert braid.state("decisions") == s.state


def test_refusals_through_the_store_append_nothing(tmp_path):
    with braidlog.open(tmp_path / "store", projections=D.PROJECTIONS) as braid:
        def run(cmd, who="user"):
            return braid.execute(D.DECIDER, cmd, braid_id="b1", provenance=who, now=T0)
        (d,) = run(RecordDecision(title="Use PostgreSQL", target="database", rationale=RATIONALE))
        head = braid.head()
        for cmd in [
            RecordDecision(title="Use MySQL", target="database", rationale=RATIONALE),
            RecordDecision(title="Use MySQL", target="database", rationale=RATIONALE,
                           intent=intent("supersede", "01ARZ3NDEKTSV4RRFFQ69G5FAV")),
            SupersedeDecision(title="Use MySQL", target="cache", rationale=RATIONALE,
                              old_decision_ids=["01ARZ3NDEKTSV4RRFFQ69G5FAV"]),
            AcceptProposal(proposal_id="missing"),
            RejectProposal(proposal_id="missing", reason="no"),
            UseDecision(decision_id="missing"),
        ]:
            with pytest.raises(Rejected):
                run(cmd)
        assert run(RecordDecision(title="Use MySQL", target="database", rationale=RATIONALE,
                                  intent=intent("abort", d.delta.id))) == []
        assert braid.head() == head


# ----------------------------------------------------------------------------------- demo

def test_demo_piece():
    from braidlog.projections.demos import decisions as demo

    start = datetime(2026, 3, 1, 9, tzinfo=UTC)
    outputs = []
    for _ in range(2):
        with braidlog.open(None, projections=D.PROJECTIONS) as braid:
            lines = demo.write(braid, start)
            state = braid.state("decisions")
            outputs.append(lines)
    assert outputs[0] == outputs[1]  # deterministic given start
    assert len(lines) == 5 and "a ResolutionIntent is required" in lines[1]
    statuses = sorted(r.status for r in state.decisions.values())
    assert statuses == ["active", "active", "superseded"]
    (prop,) = state.proposals.values()
    assert prop.status is ProposalStatus.ACCEPTED and prop.decision_id in state.decisions


def _seed_fixture_stream(reflect_each: bool = False) -> tuple[Session, str]:
    """Old confidence 0.6, SYSTEM scope, 2 consequences, six uses in one context (five on day 5,
    one on day 7): utility 0.4 + 0.2 + 0.2 = 0.8, removal cost 0.3 + 0.1 + 0.05 + 0.06 + 0.1 x 0.6
    = 0.57, stability over the intervals 0, 0, 0, 0, 2 (variance 0.8) and lifetime 7: 1 - 0.8 / 8 = 0.9."""
    s = Session()
    did = s.record(scope="system", consequences=["a", "b"], confidence=0.6)
    for at in (5, 5, 5, 5, 5, 7):
        s.run(UseDecision(decision_id=did, context="ctx"), at=at)
        if reflect_each:
            s.run(D.Reflect(), at=at)
    return s, did


def test_promote_stream_runs_once_per_reflection_over_the_batch_of_new_evidence():
    """LedgerMind v3.2.1: ReflectionEngine.run_cycle merges the new evidence into the stream
    (calculate_temporal_signals) and calls promote_stream once (test_lifecycle.py::
    test_burst_protection): 0.5 x 0.6 + 0.5 x (0.4 x 0.8 + 0.3 x 0.57 + 0.3 x 0.9) = 0.6805."""
    s, did = _seed_fixture_stream()
    m = D.lifecycle(s.state.decisions[did], day(7))
    assert (m.frequency, m.unique_contexts, m.hit_count, m.lifetime_days) == (6, 1, 6, 7.0)
    assert m.stability_score == pytest.approx(0.9)
    assert m.estimated_utility == pytest.approx(0.8)
    assert m.estimated_removal_cost == pytest.approx(0.57)  # with the confidence it replaced
    assert m.confidence == pytest.approx(0.6805)
    assert m.phase is Phase.EMERGENT  # coverage 7/30 <= 0.3: not CANONICAL
    st_ = D.stream(s.state, did, day(7))
    assert (st_.confidence, st_.estimated_removal_cost, st_.estimated_utility) == (
        pytest.approx(0.6805), pytest.approx(0.57), pytest.approx(0.8))
    # a reflection recorded after the batch reviews it once: the same numbers
    s.run(D.Reflect(), at=8)
    assert D.lifecycle(s.state.decisions[did], day(8)).confidence == pytest.approx(0.6805)
    assert s.state.decisions[did].reviews == [day(8)]
    # a review at each time evidence came (day 5, then day 7) reads otherwise
    each, did_each = _seed_fixture_stream(reflect_each=True)
    assert each.state.decisions[did_each].reviews == [day(5), day(7)]
    assert D.lifecycle(each.state.decisions[did_each], day(7)).confidence != pytest.approx(0.6805)


def test_a_burst_is_one_batch_and_stays_emergent():
    """LedgerMind's test_burst_protection: 100 uses an hour apart, one reflection: coverage
    about 4 days / 30 keeps the stream out of CANONICAL."""
    s = Session()
    did = s.record(scope="infra")
    for h in range(100):
        s.run(UseDecision(decision_id=did, context="burst"), at=h / 24)
    s.run(D.Reflect(), at=100 / 24)
    m = D.lifecycle(s.state.decisions[did], day(100 / 24))
    assert (m.frequency, m.phase) == (100, Phase.EMERGENT)
    assert m.coverage < 0.2
    assert len(s.state.decisions[did].reviews) == 1


def test_a_reflection_reviews_only_its_namespace_and_only_new_evidence():
    s = Session()
    a = s.record(target="database")
    b = s.record(target="database", namespace="other")
    s.run(UseDecision(decision_id=a), at=1)
    s.run(UseDecision(decision_id=b), at=1)
    s.run(D.Reflect(namespace="other"), at=2)
    assert (s.state.decisions[a].reviews, s.state.decisions[b].reviews) == ([], [day(2)])
    s.run(D.Reflect(), at=3)
    assert (s.state.decisions[a].reviews, s.state.decisions[b].reviews) == ([day(3)], [day(2)])
    assert s.run(D.Reflect(), at=4) == []
