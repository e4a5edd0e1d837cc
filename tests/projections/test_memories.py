"""Memories (after typedmem): slots, conflict policies, decay, profiles, versions, workspaces."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braidlog
from braidlog import ConflictError, Context, Rejected, ValidationError
from braidlog.projections import memories as M
from braidlog.projections.memories import (
    AddMemory,
    BindProfile,
    ConflictPolicy,
    DomainProfile,
    Memory,
    Source,
    TypeSpec,
    UpdateMemory,
)

from .given import Given as Harness

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
P = ConflictPolicy


class Given(Harness):
    """The shared harness with this family's decider by default."""

    def __init__(self, decider=None):
        super().__init__(decider or M.memories_decider(), start=T0)

    def add(self, **kw) -> list[braidlog.GenericDelta]:
        expected = kw.pop("expected_version", None)
        at = kw.pop("at", None)
        return self.when(AddMemory(memory=Memory(**kw), expected_version=expected), at=at)

    def only(self, **filters) -> Memory:
        (m,) = M.list_memories(self.state, **filters)
        return m


def src(doc, authority=1.0, chunk=None, span=None, at=T0) -> Source:
    return Source(document_id=doc, chunk_id=chunk, span=span, authority=authority, retrieved_at=at)


@pytest.fixture
def braid(tmp_path):
    b = braidlog.open(tmp_path / "store", projections=M.PROJECTIONS)
    yield b
    b.close()


def execute(braid, command, hours=0):
    return braid.execute("memories", command, braid_id="agent-1", now=T0 + timedelta(hours=hours))


# ------------------------------------------------------------------------------ Source, slots

def test_source_key_is_document_chunk_and_span():
    s = Source(document_id="paper_a.pdf", chunk_id="results", span=(120, 240), authority=0.95,
               uri="https://example.org/a", retrieved_at=T0)
    assert s.key() == ("paper_a.pdf", "results", (120, 240))
    assert Source(document_id="d").key() == ("d", None, None)


def test_retrieved_at_is_taken_from_the_context_when_not_given():
    g = Given()
    g.add(type="fact", content="Drug X exists", sources=[Source(document_id="a"), src("b", at=T0 - timedelta(days=3))])
    a, b = g.only().sources
    assert a.retrieved_at == T0 and b.retrieved_at == T0 - timedelta(days=3)


def test_an_added_memory_gets_an_id_version_1_the_timestamp_and_its_types_half_life():
    g = Given()
    (d,) = g.add(type="preference", content="likes tea", subject="user", confidence=0.7, tags=["drinks"])
    m = g.only()
    assert (d.kind, m.id, m.version, m.timestamp, m.updated_at) == ("memory_added", d.payload["id"], 1, T0, T0)
    assert (m.workspace, m.half_life_days, m.superseded_by, m.metadata) == ("default", 60.0, None, {})
    assert "policy" not in d.payload  # an empty slot: no conflict


def test_the_same_slot_in_another_workspace_does_not_collide():
    g = Given()
    g.add(type="preference", content="brief answers", subject="user", workspace="legal")
    g.add(type="preference", content="long answers", subject="user", workspace="medical")
    assert [m.content for m in M.list_memories(g.state, "legal")] == ["brief answers"]
    assert [m.content for m in M.list_memories(g.state, "medical")] == ["long answers"]
    assert M.list_memories(g.state) == []  # the default workspace is empty
    assert M.workspaces(g.state) == ["legal", "medical"]
    assert len(M.list_memories(g.state, None)) == 2


def test_memories_without_a_subject_never_collide():
    g = Given()
    g.add(type="goal", content="ship v1", confidence=0.9)
    g.add(type="goal", content="ship v2", confidence=0.5)  # REPLACE would have ignored this one
    assert sorted(m.content for m in M.list_memories(g.state)) == ["ship v1", "ship v2"]
    assert all(m.version == 1 for m in M.list_memories(g.state))


def test_a_goal_starts_active():
    g = Given()
    g.add(type="goal", content="learn Rust", subject="user")
    assert g.only().status == "active"
    g.add(type="task", content="write the report", subject="r", status="open")
    assert g.only(type="task").status == "open"


# ------------------------------------------------------------------------------------ REPLACE

def test_replace_keeps_the_id_and_takes_content_confidence_and_timestamp():
    g = Given()
    g.add(type="preference", content="likes tea", subject="user", confidence=0.7, tags=["drinks"],
          sources=[src("chat-1")], metadata={"channel": "chat"})
    first = g.only()
    (d,) = g.add(type="preference", content="likes coffee", subject="user", confidence=0.8,
                 tags=["morning", "drinks"], metadata={"mood": "tired"})
    m = g.only()
    assert d.kind == "memory_replaced" and d.payload["id"] == first.id
    assert (m.id, m.content, m.confidence, m.timestamp) == (first.id, "likes coffee", 0.8, T0 + timedelta(hours=1))
    assert m.tags == ["drinks", "morning"]
    assert [s.document_id for s in m.sources] == ["chat-1"]  # the incoming had none: kept
    assert m.version == 2 and m.metadata["replace_count"] == 1
    assert m.metadata["channel"] == "chat" and m.metadata["mood"] == "tired"
    (entry,) = m.metadata["replace_log"]
    assert entry == {"at": "2026-03-01T09:00:00+00:00", "delta_id": d.id, "incoming_id": d.payload["incoming_id"],
                     "previous_content": "likes tea", "previous_confidence": 0.7}
    g.add(type="preference", content="likes cocoa", subject="user", confidence=0.8, sources=[src("chat-2")])
    assert [s.document_id for s in g.only().sources] == ["chat-2"]  # the incoming had some: replaced


def test_replace_log_is_bounded_at_20_and_the_count_keeps_going():
    g = Given()
    for i in range(25):
        g.add(type="preference", content=f"v{i}", subject="user", confidence=0.5)
    m = g.only()
    assert m.metadata["replace_count"] == 24 and m.version == 25
    log = m.metadata["replace_log"]
    assert len(log) == M.REPLACE_LOG_LIMIT == 20
    assert [e["previous_content"] for e in log] == [f"v{i}" for i in range(4, 24)]


def test_replace_downgrades_to_ignore_when_the_incoming_is_weaker():
    g = Given()
    g.add(type="preference", content="likes tea", subject="user", confidence=0.7)
    assert g.add(type="preference", content="likes coffee", subject="user", confidence=0.69) == []
    m = g.only()
    assert (m.content, m.version, "replace_count" in m.metadata) == ("likes tea", 1, False)


def test_replace_downgrades_to_ignore_when_the_incoming_is_older():
    g = Given()
    g.add(type="preference", content="likes tea", subject="user", confidence=0.7, at=T0)
    assert g.add(type="preference", content="likes coffee", subject="user", confidence=0.9,
                 timestamp=T0 - timedelta(days=1), at=T0 + timedelta(hours=1)) == []
    assert (g.only().content, g.only().version) == ("likes tea", 1)


def test_replace_ties_replace():
    g = Given()
    g.add(type="preference", content="likes tea", subject="user", confidence=0.7, timestamp=T0)
    (d,) = g.add(type="preference", content="likes coffee", subject="user", confidence=0.7, timestamp=T0)
    assert d.kind == "memory_replaced" and g.only().content == "likes coffee"


def test_replace_downgrades_to_ignore_when_both_have_sources_and_the_incoming_authority_is_lower():
    g = Given()
    g.add(type="preference", content="vegetarian", subject="user", confidence=0.6,
          sources=[src("user-said", 0.95), src("inferred", 0.3)])
    assert g.add(type="preference", content="eats fish", subject="user", confidence=0.99,
                 sources=[src("model-guess", 0.9), src("model-guess-2", 0.5)]) == []
    assert g.only().content == "vegetarian"
    # equal best authority is not lower: newer and stronger replaces
    (d,) = g.add(type="preference", content="pescatarian", subject="user", confidence=0.9,
                 sources=[src("user-said-again", 0.95)])
    assert d.kind == "memory_replaced"


def test_replace_authority_guard_needs_sources_on_both_sides():
    g = Given()
    g.add(type="preference", content="vegetarian", subject="user", confidence=0.6, sources=[src("user-said", 0.95)])
    (d,) = g.add(type="preference", content="eats fish", subject="user", confidence=0.7)
    assert d.kind == "memory_replaced"
    g.add(type="goal", content="run 5k", subject="health", confidence=0.5)
    (d,) = g.add(type="goal", content="run 10k", subject="health", confidence=0.6, sources=[src("weak", 0.1)])
    assert d.kind == "memory_replaced"


def test_resolve_is_the_pure_downgrade_rule():
    old = Memory(type="preference", content="a", confidence=0.5, timestamp=T0)
    assert M.resolve(old, Memory(type="preference", content="b", confidence=0.5, timestamp=T0), P.REPLACE) is P.REPLACE
    assert M.resolve(old, Memory(type="preference", content="b", confidence=0.4, timestamp=T0), P.REPLACE) is P.IGNORE
    for policy in (P.KEEP_BOTH, P.SUPERSEDE, P.REINFORCE, P.FLAG, P.IGNORE):
        weaker = Memory(type="x", content="b", confidence=0.1, timestamp=T0 - timedelta(days=1))
        assert M.resolve(old, weaker, policy) is policy  # only REPLACE downgrades


# ---------------------------------------------------------------------- KEEP_BOTH, SUPERSEDE, FLAG

def test_keep_both_stores_both_without_a_link():
    g = Given()
    g.add(type="fact", content="Drug X lowers BP", subject="drug_x", confidence=0.9)
    (d,) = g.add(type="fact", content="Drug X raises BP", subject="drug_x", confidence=0.2)
    assert d.payload["policy"] == "keep_both"
    a, b = M.list_memories(g.state)
    assert (a.version, b.version) == (1, 1)
    assert a.superseded_by is b.superseded_by is None and a.metadata == b.metadata == {}


def test_supersede_links_the_old_to_the_new_and_listings_hide_the_old():
    g = Given()
    g.when(BindProfile(workspace="design", profile="engineering_design"))
    g.add(type="decision", content="use Postgres", subject="db", workspace="design")
    old = g.only(workspace="design")
    (d,) = g.add(type="decision", content="use LMDB", subject="db", workspace="design")
    assert (d.payload["policy"], d.payload["supersedes"]) == ("supersede", old.id)
    state = g.state
    assert [m.content for m in M.list_memories(state, "design")] == ["use LMDB"]
    both = M.list_memories(state, "design", include_superseded=True)
    assert [(m.content, m.superseded_by, m.version) for m in both] == \
        [("use Postgres", d.payload["id"], 2), ("use LMDB", None, 1)]
    assert [m.content for m in M.slot_memories(state, "design", "decision", "db")] == ["use LMDB"]
    # the next decision supersedes the active one, not the old one
    (d2,) = g.add(type="decision", content="use LMDB with a WAL", subject="db", workspace="design")
    assert d2.payload["supersedes"] == d.payload["id"]
    assert len(M.list_memories(g.state, "design", include_superseded=True)) == 3


def test_flag_stores_both_and_each_names_the_other():
    g = Given()
    g.when(BindProfile(workspace="design", profile="engineering_design"))
    g.add(type="risk", content="disk fills in a week", subject="disk", workspace="design")
    (d,) = g.add(type="risk", content="disk is fine for a year", subject="disk", workspace="design")
    a, b = M.list_memories(g.state, "design")
    assert d.payload["policy"] == "flag"
    assert a.metadata["conflicts_with"] == [b.id] and b.metadata["conflicts_with"] == [a.id]
    assert (a.version, b.version) == (2, 1)
    g.add(type="risk", content="disk fills in a month", subject="disk", workspace="design")
    a, b, c = M.list_memories(g.state, "design")
    assert b.metadata["conflicts_with"] == [a.id, c.id] and c.metadata["conflicts_with"] == [b.id]


IGNORING = DomainProfile(name="append_only", types={
    "reading": TypeSpec(name="reading", conflict_policy=P.IGNORE)})


def test_ignore_drops_the_incoming_and_leaves_the_existing_unchanged():
    g = Given(M.memories_decider(profiles=[IGNORING], default_profile="append_only"))
    g.add(type="reading", content="21.5 C", subject="sensor-1", confidence=0.5)
    before = g.only()
    assert g.add(type="reading", content="22.0 C", subject="sensor-1", confidence=1.0) == []
    after = g.only()
    assert after == before and after.version == 1


# ---------------------------------------------------------------------------------- REINFORCE

def _evidence(g: Given, content: str, confidence: float, sources, **kw):
    return g.add(type="evidence", content=content, subject="drug_x", workspace="papers",
                 confidence=confidence, sources=sources, **kw)


def test_reinforce_blends_confidence_by_the_authority_of_new_sources():
    g = Given()
    g.when(BindProfile(workspace="papers", profile="research_paper"))
    _evidence(g, "X lowers BP by 5 mmHg", 0.6, [src("a.pdf", 1.0, "results")])
    rid = g.only(workspace="papers").id
    # new unique: b.pdf (0.8) and a.pdf/methods (0.4; another chunk of a.pdf counts)
    # w = 1.2, bump = 0.5 * 1.2 * 0.5 = 0.3, c = 0.6 + 0.4 * 0.3 = 0.72; 0.5 < 0.72 keeps the content
    (d,) = _evidence(g, "X lowers BP", 0.5, [src("a.pdf", 1.0, "results"), src("b.pdf", 0.8),
                                              src("a.pdf", 0.4, "methods")])
    m = g.only(workspace="papers")
    assert d.kind == "memory_reinforced" and m.id == rid and m.version == 2
    assert d.payload["weight"] == pytest.approx(1.2) and d.payload["bump"] == pytest.approx(0.3)
    assert m.confidence == pytest.approx(0.72) and m.content == "X lowers BP by 5 mmHg"
    assert [s.key() for s in m.sources] == [("a.pdf", "results", None), ("b.pdf", None, None),
                                            ("a.pdf", "methods", None)]
    # no new source: w = all incoming = 1.0 + 0.8 = 1.8, bump = 0.9 * 1.8 * 0.5 = 0.81,
    # c = 0.72 + 0.28 * 0.81 = 0.9468; 0.9 < 0.9468 keeps the content
    (d,) = _evidence(g, "X lowers BP a lot", 0.9, [src("a.pdf", 1.0, "results"), src("b.pdf", 0.8)])
    m = g.only(workspace="papers")
    assert d.payload["weight"] == pytest.approx(1.8) and "sources" not in d.payload
    assert m.confidence == pytest.approx(0.9468) and len(m.sources) == 3
    # a new source of authority 0: w = 1.0, bump = 1.0 * 1.0 * 0.5, c = 0.9468 + 0.0532 * 0.5 = 0.9734;
    # 1.0 > 0.9734 replaces the content
    (d,) = _evidence(g, "X lowers systolic BP by 5 mmHg", 1.0, [src("c.pdf", 0.0)])
    m = g.only(workspace="papers")
    assert d.payload["weight"] == 1.0 and m.confidence == pytest.approx(0.9734)
    assert m.content == "X lowers systolic BP by 5 mmHg" and m.version == 4


def test_reinforce_caps_confidence_at_1():
    c, w, bump = M.reinforce_confidence(0.9, 1.0, [src("a", 1.0), src("b", 1.0), src("c", 1.0)])
    assert (w, bump, c) == (3.0, 1.5, 1.0)
    c, w, bump = M.reinforce_confidence(0.5, 0.4, [])
    assert (w, bump, c) == (1.0, 0.2, pytest.approx(0.6))


def test_reinforce_unions_tags_and_an_incoming_without_sources_weighs_1():
    profile = DomainProfile(name="loose", types={"evidence": TypeSpec(name="evidence", conflict_policy=P.REINFORCE)})
    g = Given(M.memories_decider(profiles=[profile], default_profile="loose"))
    g.add(type="evidence", content="e", subject="s", confidence=0.2, tags=["a"])
    (d,) = g.add(type="evidence", content="e", subject="s", confidence=0.4, tags=["b", "a"])
    m = g.only()
    assert d.payload["weight"] == 1.0 and m.confidence == pytest.approx(0.2 + 0.8 * 0.2)
    assert m.tags == ["a", "b"] and m.content == "e"


# -------------------------------------------------------------------------------------- decay

@pytest.mark.parametrize("type, days, expected", [
    ("preference", 60, 0.4),                          # one half-life of 60 days
    ("preference", 90, 0.8 * 0.5 ** 1.5),             # 0.28284...
    ("preference", 0, 0.8),
    ("preference", -5, 0.8),                          # as of before it was stored: no decay
    ("event", 7, 0.8 * 2 ** -0.5),                    # 14-day half-life
    ("event", 28, 0.2),
    ("observation", 14, 0.2),                         # 7-day half-life
    ("fact", 3650, 0.8),                              # no half-life: no decay
])
def test_confidence_decays_by_half_life_as_of_a_given_time(type, days, expected):
    g = Given()
    g.add(type=type, content="c", subject="s", confidence=0.8, at=T0)
    m = g.only()
    assert M.effective_confidence(m, T0 + timedelta(days=days)) == pytest.approx(expected)
    assert m.confidence == 0.8  # decay is a read, not a write


def test_decay_uses_the_timestamp_a_replace_carried_in():
    g = Given()
    g.add(type="preference", content="tea", subject="user", confidence=0.8, at=T0)
    g.add(type="preference", content="coffee", subject="user", confidence=0.8, at=T0 + timedelta(days=30))
    assert M.effective_confidence(g.only(), T0 + timedelta(days=90)) == pytest.approx(0.4)


def test_recall_orders_by_decayed_confidence_and_needs_an_aware_time():
    g = Given()
    g.add(type="fact", content="stable", subject="a", confidence=0.5, at=T0)
    g.add(type="observation", content="fresh", subject="b", confidence=0.9, at=T0)
    as_of = T0 + timedelta(days=7)
    assert [(m.content, round(c, 6)) for m, c in M.recall(g.state, as_of)] == [("stable", 0.5), ("fresh", 0.45)]
    assert [m.content for m, _ in M.recall(g.state, T0 + timedelta(days=14), min_confidence=0.3)] == ["stable"]
    with pytest.raises(ValidationError) as e:
        M.recall(g.state, datetime(2026, 3, 2))
    assert e.value.field == "as_of"


# ----------------------------------------------------------------------------------- profiles

def test_the_builtin_profiles_and_their_defaults():
    assert list(M.BUILTIN_PROFILES) == ["core", "personal", "research_paper", "engineering_design",
                                        "legal", "medical_literature", "child_development"]
    personal = DomainProfile.builtin("personal").all_types()
    assert {n: (s.conflict_policy, s.half_life_days) for n, s in personal.items()} == {
        "fact": (P.KEEP_BOTH, None), "note": (P.KEEP_BOTH, None), "goal": (P.REPLACE, None),
        "task": (P.REPLACE, None), "event": (P.KEEP_BOTH, 14.0),
        "preference": (P.REPLACE, 60.0), "observation": (P.KEEP_BOTH, 7.0)}
    assert set(DomainProfile.builtin("core").all_types()) == {"fact", "note", "goal", "task", "event"}
    eng = DomainProfile.builtin("engineering_design").policies()
    assert (eng["decision"], eng["constraint"], eng["assumption"], eng["todo"], eng["risk"]) == \
        (P.SUPERSEDE, P.REPLACE, P.REPLACE, P.REPLACE, P.FLAG)
    assert DomainProfile.builtin("research_paper").policies()["evidence"] is P.REINFORCE
    legal = DomainProfile.builtin("legal").all_types()
    assert legal["definition"].conflict_policy is P.SUPERSEDE and legal["deadline"].conflict_policy is P.REPLACE
    assert legal["obligation"].required_fields == ("source", "subject")
    med = DomainProfile.builtin("medical_literature").all_types()
    assert med["outcome"].conflict_policy is P.REINFORCE and med["outcome"].required_fields == ("source",)
    child = DomainProfile.builtin("child_development").all_types()
    assert child["observation"].allowed_tags == ("language", "motor", "emotional", "cognitive", "social")
    assert (child["concern"].conflict_policy, child["concern"].half_life_days) == (P.FLAG, 30.0)
    assert child["milestone"].required_fields == ("subject",)
    with pytest.raises(ValidationError):
        DomainProfile.builtin("astrology")


def test_an_unknown_type_is_refused():
    with pytest.raises(ValidationError) as e:
        Given().add(type="claim", content="c")  # a research_paper type, not in personal
    assert e.value.field == "memory.type" and "unknown type 'claim' in workspace 'default'" in e.value.rule


def test_required_fields_and_allowed_tags_are_enforced():
    g = Given()
    g.when(BindProfile(workspace="papers", profile="research_paper"))
    g.when(BindProfile(workspace="kid", profile="child_development"))
    g.when(BindProfile(workspace="law", profile="legal"))
    with pytest.raises(ValidationError) as e:
        g.add(type="evidence", content="e", workspace="papers")
    assert (e.value.field, e.value.rule) == ("memory.sources", "is required for type 'evidence'")
    with pytest.raises(ValidationError) as e:
        g.add(type="obligation", content="pay", workspace="law", sources=[src("contract")])
    assert e.value.field == "memory.subject"
    with pytest.raises(ValidationError) as e:
        g.add(type="observation", content="stacked blocks", workspace="kid", tags=["motor", "food"])
    assert e.value.field == "memory.tags" and "'food' is not allowed" in e.value.rule
    assert len(g.add(type="observation", content="stacked blocks", workspace="kid", tags=["motor"])) == 1


def test_a_workspace_takes_its_policies_from_its_bound_profile():
    g = Given()
    assert M.workspace_profile(g.state, "design") == "personal"
    (d,) = g.when(BindProfile(workspace="design", profile="engineering_design"))
    assert d.payload == {"workspace": "design", "profile": "engineering_design"}
    assert g.when(BindProfile(workspace="design", profile="engineering_design")) == []
    assert M.workspace_profile(g.state, "design") == "engineering_design"
    assert M.workspaces(g.state) == ["design"]
    with pytest.raises(ValidationError) as e:
        g.when(BindProfile(workspace="x", profile="astrology"))
    assert e.value.field == "profile"


def test_a_workspace_bound_to_a_profile_this_decider_lacks_is_refused():
    g = Given(M.memories_decider(profiles=[IGNORING]))
    g.when(BindProfile(workspace="w", profile="append_only"))
    other = Given()
    other.deltas = list(g.deltas)
    with pytest.raises(Rejected, match="bound to profile 'append_only'"):
        other.add(type="fact", content="c", workspace="w")


def test_type_specs_and_profiles_check_themselves():
    with pytest.raises(ValidationError):
        TypeSpec(name="x", half_life_days=0)
    with pytest.raises(ValidationError):
        TypeSpec(name="x", required_fields=("colour",))
    with pytest.raises(ValidationError):
        TypeSpec(name="x", conflict_policy="replace")
    with pytest.raises(ValidationError):
        DomainProfile(name="p", types={"a": TypeSpec(name="b")})
    with pytest.raises(ValidationError):
        M.memories_decider(default_profile="nope")


# ----------------------------------------------------------------------- versions, concurrency

def test_expected_version_on_add_is_checked_against_the_slot():
    g = Given()
    assert len(g.add(type="preference", content="tea", subject="user", confidence=0.5, expected_version=0)) == 1
    with pytest.raises(ConflictError) as e:
        g.add(type="preference", content="coffee", subject="user", confidence=0.6, expected_version=0)
    assert (e.value.expected, e.value.actual) == (0, 1)
    assert len(g.add(type="preference", content="coffee", subject="user", confidence=0.6, expected_version=1)) == 1
    assert g.only().version == 2
    assert len(g.add(type="fact", content="no subject", expected_version=0)) == 1


def test_update_changes_a_record_and_bumps_its_version():
    g = Given()
    g.add(type="goal", content="learn Rust", subject="user")
    m = g.only()
    (d,) = g.when(UpdateMemory(memory_id=m.id, expected_version=1, status="resolved",
                               metadata={"resolved_by": "finished the book"}))
    assert d.payload == {"id": m.id, "status": "resolved", "metadata": {"resolved_by": "finished the book"}}
    m = g.only()
    assert (m.status, m.version, m.metadata) == ("resolved", 2, {"resolved_by": "finished the book"})
    assert g.when(UpdateMemory(memory_id=m.id, status="resolved")) == []  # already done
    g.when(UpdateMemory(memory_id=m.id, content="learn Rust well", confidence=0.4, tags=["skills"]))
    m = g.only()
    assert (m.content, m.confidence, m.tags, m.version) == ("learn Rust well", 0.4, ["skills"], 3)


def test_stale_or_impossible_updates_are_refused():
    g = Given()
    g.when(BindProfile(workspace="design", profile="engineering_design"))
    g.add(type="decision", content="a", subject="db", workspace="design")
    old = g.only(workspace="design")
    g.add(type="decision", content="b", subject="db", workspace="design")
    with pytest.raises(ConflictError) as e:
        g.when(UpdateMemory(memory_id=old.id, expected_version=1, content="x"))
    assert (e.value.expected, e.value.actual) == (1, 2)
    with pytest.raises(Rejected, match="is superseded by"):
        g.when(UpdateMemory(memory_id=old.id, content="x"))
    with pytest.raises(Rejected, match="unknown memory 'nope'"):
        g.when(UpdateMemory(memory_id="nope", content="x"))
    g.when(BindProfile(workspace="kid", profile="child_development"))
    g.add(type="observation", content="o", workspace="kid", tags=["motor"])
    obs = g.only(workspace="kid")
    with pytest.raises(ValidationError) as e:
        g.when(UpdateMemory(memory_id=obs.id, tags=["food"]))
    assert e.value.field == "tags"
    with pytest.raises(ValidationError) as e:
        g.when(UpdateMemory(memory_id=obs.id, confidence=2))
    assert e.value.field == "confidence"
    with pytest.raises(ValidationError) as e:
        g.when(UpdateMemory(memory_id=obs.id, metadata={"conflicts_with": []}))
    assert e.value.field == "metadata.conflicts_with"


def test_a_stale_write_appends_nothing_in_the_store(braid):
    execute(braid, AddMemory(memory=Memory(type="preference", content="tea", subject="user")))
    head = braid.head()
    with pytest.raises(ConflictError) as e:
        execute(braid, AddMemory(memory=Memory(type="preference", content="coffee", subject="user"),
                                 expected_version=0), 1)
    assert (e.value.expected, e.value.actual) == (0, 1)
    m = M.list_memories(braid.state("memories"))[0]
    with pytest.raises(ConflictError):
        execute(braid, UpdateMemory(memory_id=m.id, expected_version=7, content="x"), 1)
    assert braid.head() == head
    assert M.list_memories(braid.state("memories"))[0].content == "tea"


# ------------------------------------------------------------------------- idempotency, refusals

def test_an_add_with_the_callers_id_is_idempotent():
    g = Given()
    mid = braidlog.new_id()
    assert len(g.add(id=mid, type="fact", content="c", subject="s")) == 1
    assert g.add(id=mid, type="fact", content="c", subject="s") == []
    absorbed = braidlog.new_id()
    assert g.add(id=absorbed, type="preference", content="tea", subject="u")[0].kind == "memory_added"
    repl = braidlog.new_id()
    (d,) = g.add(id=repl, type="preference", content="coffee", subject="u")
    assert d.kind == "memory_replaced" and d.payload["incoming_id"] == repl
    assert g.add(id=repl, type="preference", content="coffee", subject="u") == []
    assert M.get_memory(g.state, repl).id == absorbed
    with pytest.raises(Rejected, match=f"absorbed into '{absorbed}'"):
        g.when(UpdateMemory(memory_id=repl, content="x"))


@pytest.mark.parametrize("kw, field", [
    ({"content": ""}, "memory.content"),
    ({"content": None}, "memory.content"),
    ({"confidence": 1.5}, "memory.confidence"),
    ({"confidence": -0.1}, "memory.confidence"),
    ({"confidence": True}, "memory.confidence"),
    ({"type": ""}, "memory.type"),
    ({"subject": ""}, "memory.subject"),
    ({"workspace": ""}, "memory.workspace"),
    ({"tags": "a,b"}, "memory.tags"),
    ({"tags": [""]}, "memory.tags[0]"),
    ({"timestamp": datetime(2026, 3, 1)}, "memory.timestamp"),
    ({"superseded_by": "someone"}, "memory.superseded_by"),
    ({"version": 3}, "memory.version"),
    ({"half_life_days": 5.0}, "memory.half_life_days"),
    ({"metadata": {"replace_log": []}}, "memory.metadata.replace_log"),
    ({"metadata": {"when": datetime(2026, 1, 1, tzinfo=UTC)}}, "memory.metadata.when"),
    ({"metadata": []}, "memory.metadata"),
    ({"sources": [Source(document_id="")]}, "memory.sources[0].document_id"),
    ({"sources": [Source(document_id="d", authority=-1)]}, "memory.sources[0].authority"),
    ({"sources": [Source(document_id="d", authority=math.nan)]}, "memory.sources[0].authority"),
    ({"sources": [Source(document_id="d", span=(5, 2))]}, "memory.sources[0].span"),
    ({"sources": [Source(document_id="d", span=(-1, 2))]}, "memory.sources[0].span"),
    ({"sources": [Source(document_id="d", retrieved_at=datetime(2026, 1, 1))]}, "memory.sources[0].retrieved_at"),
    ({"sources": ["paper.pdf"]}, "memory.sources[0]"),
    ({"id": ""}, "memory.id"),
])
def test_bad_memories_are_refused_naming_the_field(kw, field):
    memory = {"type": "fact", "content": "c", **kw}
    with pytest.raises(ValidationError) as e:
        Given().add(**memory)
    assert e.value.field == field


@pytest.mark.parametrize("command", [
    AddMemory(memory=Memory(type="claim", content="c")),
    AddMemory(memory=Memory(type="fact", content="c", confidence=2)),
    AddMemory(memory=Memory(type="preference", content="late", subject="user"), expected_version=5),
    UpdateMemory(memory_id="missing", content="x"),
    BindProfile(workspace="w", profile="astrology"),
    "not a command",
])
def test_a_refused_command_appends_nothing(braid, command):
    execute(braid, AddMemory(memory=Memory(type="preference", content="tea", subject="user")))
    head = braid.head()
    with pytest.raises((ValidationError, Rejected, ConflictError)):
        execute(braid, command, 1)
    assert braid.head() == head


def test_an_ignored_add_appends_nothing_in_the_store(braid):
    execute(braid, AddMemory(memory=Memory(type="preference", content="tea", subject="user", confidence=0.9)))
    head = braid.head()
    assert execute(braid, AddMemory(memory=Memory(type="preference", content="coffee", subject="user",
                                                  confidence=0.1)), 1) == []
    assert braid.head() == head


def test_memories_may_be_given_as_dicts():
    g = Given()
    g.when(AddMemory(memory={"type": "fact", "content": "c", "sources": [{"document_id": "d", "span": [1, 4]}]}))
    assert g.only().sources[0].key() == ("d", None, (1, 4))
    with pytest.raises(ValidationError) as e:
        g.when(AddMemory(memory={"type": "fact"}))
    assert e.value.field == "memory"


# ------------------------------------------------------------------ refers, evolve, checkpoints

def test_every_memories_delta_is_indexed_under_the_records_it_touches(braid):
    execute(braid, BindProfile(workspace="design", profile="engineering_design"))
    (a,) = execute(braid, AddMemory(memory=Memory(type="decision", content="pg", subject="db", workspace="design")), 1)
    (b,) = execute(braid, AddMemory(memory=Memory(type="decision", content="lmdb", subject="db",
                                                  workspace="design")), 2)
    old, new = a.delta.payload["id"], b.delta.payload["id"]
    assert [r.seq for r in braid.log.scan_refs(old)] == [a.seq, b.seq]
    (c,) = execute(braid, AddMemory(memory=Memory(type="preference", content="tea", subject="u")), 3)
    (d,) = execute(braid, AddMemory(memory=Memory(type="preference", content="coffee", subject="u")), 4)
    pref = c.delta.payload["id"]
    assert [r.delta.kind for r in braid.log.scan_refs(pref)] == ["memory_added", "memory_replaced"]
    assert [r.seq for r in braid.log.scan_refs(d.delta.payload["incoming_id"])] == [d.seq]
    assert [r.seq for r in braid.log.scan_refs(new)] == [b.seq]


def test_evolve_is_total_on_deltas_it_does_not_expect():
    ctx = Context(now=T0, braid_id="agent-1")
    ghost = braidlog.new_id()
    deltas = [
        ctx.delta("memory_replaced", {"id": ghost, "incoming_id": "i", "content": "c", "confidence": 1.0,
                                      "timestamp": T0.isoformat()}),
        ctx.delta("memory_updated", {"id": ghost, "content": "c"}),
        ctx.delta("memory_added", {"id": "m1", "type": "fact", "content": "c", "confidence": 1.0,
                                   "workspace": "w", "timestamp": T0.isoformat(), "supersedes": ghost,
                                   "sources": [{"document_id": "d"}]}),
        ctx.delta("memory_added", {"id": "m1", "type": "fact", "content": "again", "confidence": 1.0,
                                   "workspace": "w", "timestamp": T0.isoformat()}),
        braidlog.delta("agent-1", "message", {"text": "hi"}, ts=T0),
    ]
    for d in deltas:
        braidlog.validate(d)
    state = M.PROJECTIONS[0].fold(deltas)
    (m,) = M.list_memories(state, "w")
    assert (m.id, m.content, m.version, m.sources[0].retrieved_at) == ("m1", "c", 1, T0)


def _every_policy() -> Given:
    g = Given()
    g.when(BindProfile(workspace="design", profile="engineering_design"))
    g.when(BindProfile(workspace="papers", profile="research_paper"))
    g.add(type="preference", content="tea", subject="user", confidence=0.6, tags=["drinks"],
          sources=[src("chat", 0.9, "turn-3", (0, 12))], metadata={"nested": {"a": [1, 2]}})
    g.add(type="preference", content="coffee", subject="user", confidence=0.7)           # REPLACE
    g.add(type="preference", content="water", subject="user", confidence=0.1)            # IGNORE
    g.add(type="fact", content="born 1990", subject="user")
    g.add(type="fact", content="born 1991", subject="user")                              # KEEP_BOTH
    g.add(type="decision", content="pg", subject="db", workspace="design")
    g.add(type="decision", content="lmdb", subject="db", workspace="design")             # SUPERSEDE
    g.add(type="risk", content="disk full", subject="disk", workspace="design")
    g.add(type="risk", content="disk fine", subject="disk", workspace="design")          # FLAG
    _evidence(g, "X works", 0.5, [src("a.pdf", 0.9)])
    _evidence(g, "X works", 0.6, [src("b.pdf", 0.7)])                                    # REINFORCE
    g.add(type="goal", content="ship", subject="team")
    g.when(UpdateMemory(memory_id=g.only(type="goal").id, status="resolved"))
    return g


def test_state_round_trips_through_checkpoint_encoding():
    state = _every_policy().state
    decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=M.State)
    assert decoded == state
    everything = dict(workspace=None, include_superseded=True)
    assert M.list_memories(decoded, **everything) == M.list_memories(state, **everything)


def test_time_travel_equals_a_fresh_fold_at_every_seq_in_a_log_mixing_families(tmp_path):
    from braidlog.projections import fields as F

    g = _every_policy()
    f = [F.PROJECTIONS[0].decide(F.ReviseField(topic_id="user", field="drink", value=v), F.State(),
                                 Context(now=T0 + timedelta(minutes=i), braid_id="agent-1"))[0]
         for i, v in enumerate(["tea", "coffee"])]
    chat = [braidlog.delta("agent-1", "message", {"text": t}, ts=T0) for t in ("hi", "bye")]
    mixed = g.deltas[:4] + f[:1] + chat[:1] + g.deltas[4:9] + f[1:] + g.deltas[9:] + chat[1:]
    projections = M.PROJECTIONS + F.PROJECTIONS
    with braidlog.open(tmp_path / "store", projections=projections, checkpoint_every=3) as b:
        b.append_batch(mixed)
        for seq in range(len(mixed) + 1):
            view = b.at(seq)
            records = [r.delta for r in b.log.scan(1, seq + 1)]
            assert view.state("memories") == M.PROJECTIONS[0].fold(records)
            assert view.state("fields") == F.PROJECTIONS[0].fold(records)
        assert b.state("memories") == g.state
        b.checkpoint()
    with braidlog.open(tmp_path / "store", projections=projections) as b:
        assert b.state("memories") == g.state
        assert F.get_field(b.state("fields"), "user", "drink").value == "coffee"


def test_the_demo_piece_writes_typed_memories_under_each_policy(tmp_path):
    from braidlog.projections.demos import memories as demo

    with braidlog.open(tmp_path / "store", projections=M.PROJECTIONS) as b:
        lines = demo.write(b, T0)
        policies = [r.delta.payload.get("policy") for r in b.log.scan_kind("memory_added")]
        kinds = {r.delta.kind for r in b.log.scan()}
        head = b.head()
    assert {"keep_both", "supersede", "flag"} <= set(policies)
    assert {"memory_replaced", "memory_reinforced"} <= kinds
    text = "\n".join(lines)
    for word in ("replace", "ignore (nothing appended)", "keep_both", "supersede", "flag", "reinforce"):
        assert word in text
    with braidlog.open(tmp_path / "again", projections=M.PROJECTIONS) as b:
        assert demo.write(b, T0) == lines and b.head().seq == head.seq


def test_the_demo_piece_can_run_twice_into_one_store(tmp_path):
    from braidlog.projections.demos import memories as demo

    with braidlog.open(tmp_path / "store", projections=M.PROJECTIONS) as b:
        first = demo.write(b, T0)
        again = demo.write(b, T0 + timedelta(days=1))
    assert "version 2, 1 replace(s)" in first[0] and "version 3, 2 replace(s)" in again[0]


# --------------------------------------------------------------------------------- properties

_memory = st.builds(
    Memory,
    type=st.sampled_from(["preference", "fact", "decision", "risk", "evidence"]),
    content=st.sampled_from(["a", "b", "c"]),
    confidence=st.floats(0, 1),
    subject=st.sampled_from([None, "s", "t"]),
    workspace=st.sampled_from(["default", "lab"]),
    sources=st.lists(st.builds(Source, document_id=st.sampled_from(["d1", "d2", "d3"]),
                               chunk_id=st.sampled_from([None, "c"]), authority=st.floats(0, 1)),
                     max_size=3),
)
LAB = DomainProfile(name="lab", types={
    "decision": TypeSpec(name="decision", conflict_policy=P.SUPERSEDE),
    "risk": TypeSpec(name="risk", conflict_policy=P.FLAG),
    "evidence": TypeSpec(name="evidence", conflict_policy=P.REINFORCE, half_life_days=3.0),
    "preference": TypeSpec(name="preference", conflict_policy=P.REPLACE, half_life_days=60.0),
})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_memory, st.integers(-48, 48)), max_size=20))
def test_any_sequence_of_adds_keeps_the_invariants(adds):
    g = Given(M.memories_decider(profiles=[LAB], default_profile="lab"))
    for m, hours in adds:
        g.when(AddMemory(memory=msgspec.structs.replace(m, timestamp=T0 + timedelta(hours=hours))))
    state = g.state
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=M.State) == state
    for m in state.memories.values():
        assert m.version >= 1 and 0.0 <= m.confidence <= 1.0
        assert len({s.key() for s in m.sources}) == len(m.sources)
        if m.superseded_by is not None:
            assert state.memories[m.superseded_by].type == m.type == "decision"
        for other in m.metadata.get("conflicts_with", []):
            assert m.id in state.memories[other].metadata["conflicts_with"]
        assert len(m.metadata.get("replace_log", [])) <= 20
    for key, ids in state.slots.items():
        _, type_, _ = msgspec.json.decode(key)
        active = [i for i in ids if state.memories[i].superseded_by is None]
        if type_ in ("preference", "evidence", "decision"):
            assert len(active) == 1  # REPLACE, REINFORCE and SUPERSEDE keep one active record a slot
