"""Fields (after MemState): given deltas / when command / then deltas, plus the store around them."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braidlog
from braidlog import Context, Rejected, ValidationError
from braidlog.projections import fields as F
from braidlog.projections.fields import ArchiveTopic, ArchiveTopics, BumpSalience, RestoreTopic, ReviseField

from .given import Given as Harness

T0 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)


class Given(Harness):
    """The shared harness with this family's decider by default; the deltas a command makes pass
    the boundary's checks (``decider.check``) before they are kept, as in a store."""

    def __init__(self, decider=None):
        super().__init__(decider or F.fields_decider(), start=T0)

    def when(self, command, *, at=None):
        state, kept = self.state, len(self.deltas)
        out = super().when(command, at=at)
        try:
            for d in out:
                self.decider.check(state, d, None)
                state = self.decider.apply(state, d, 0)
        except BaseException:
            del self.deltas[kept:]
            raise
        return out


def revise(topic="atlas", field="owner", value="Aya", **kw) -> ReviseField:
    return ReviseField(topic_id=topic, field=field, value=value, **kw)


@pytest.fixture
def braid(tmp_path):
    b = braidlog.open(tmp_path / "store", projections=F.PROJECTIONS)
    yield b
    b.close()


def execute(braid, command, hours=0):
    return braid.execute("fields", command, braid_id="agent-1", now=T0 + timedelta(hours=hours))


# ------------------------------------------------------------------------------ revision stacks

def test_a_field_is_a_stack_of_revisions_newest_first_and_reads_return_the_current_one():
    g = Given()
    first = g.when(revise(value="unassigned", provenance="api"))
    g.when(revise(value="Priya", provenance="llm"))
    last = g.when(revise(value="Aya", provenance="ui", why_changed="handoff from Priya",
                         impact_expected="Aya runs the weekly review"))
    view = F.get_field(g.state, "atlas", "owner")
    assert (view.value, view.provenance, view.why_changed) == ("Aya", "ui", "handoff from Priya")
    assert view.impact_expected == "Aya runs the weekly review"
    assert view.revision_id == last[0].id and view.valid_from == last[0].ts
    assert view.history is None and view.revision_count == 3
    full = F.get_field(g.state, "atlas", "owner", history=True)
    assert [r.value for r in full.history] == ["Aya", "Priya", "unassigned"]
    assert [r.provenance for r in full.history] == ["ui", "llm", "api"]
    assert full.history[-1].id == first[0].id and full.history[-1].valid_from == T0
    assert full.history[-1].why_changed is None


def test_a_revision_is_one_delta_whose_id_and_ts_are_the_revision_id_and_valid_from():
    g = Given()
    (d,) = g.when(revise(value="Aya"))
    assert d.kind == "field_revised"
    assert d.payload == {"topic_id": "atlas", "field": "owner", "field_type": "string",
                         "value": "Aya", "provenance": "api"}
    rev = F.get_field(g.state, "atlas", "owner", history=True).history[0]
    assert (rev.id, rev.valid_from) == (d.id, d.ts)


def test_history_limit_shortens_the_view_newest_first():
    g = Given()
    for v in range(5):
        g.when(revise(field="n", value=v, field_type="int"))
    view = F.get_field(g.state, "atlas", "n", history=True, limit=2)
    assert [r.value for r in view.history] == [4, 3]
    with pytest.raises(ValidationError) as e:
        F.get_field(g.state, "atlas", "n", history=True, limit=-1)
    assert e.value.field == "limit"


def test_get_topic_returns_every_field_current_only_unless_history_is_asked():
    g = Given()
    g.when(revise(field="owner", value="Priya"))
    g.when(revise(field="owner", value="Aya"))
    g.when(revise(field="budget", value=1200.5, field_type="float"))
    topic = F.get_topic(g.state, "atlas")
    assert {n: f.value for n, f in topic.fields.items()} == {"owner": "Aya", "budget": 1200.5}
    assert all(f.history is None for f in topic.fields.values())
    topic = F.get_topic(g.state, "atlas", history=True)
    assert [r.value for r in topic.fields["owner"].history] == ["Aya", "Priya"]
    assert F.get_topic(g.state, "nope") is None
    assert F.get_field(g.state, "atlas", "nope") is None


# -------------------------------------------------------------------------------------- types

@pytest.mark.parametrize("field_type, value, stored", [
    ("string", "free text", "free text"),
    ("int", 42, 42),
    ("int", -7, -7),
    ("float", 2.5, 2.5),
    ("float", 3, 3.0),
    ("bool", True, True),
    ("bool", False, False),
    ("date", "2026-04-22", "2026-04-22"),
    ("date", "next tuesday", "next tuesday"),  # convention-based: not parsed
    ("date", date(2026, 4, 22), "2026-04-22"),
    ("datetime", "2026-04-22T12:00:00+00:00", "2026-04-22T12:00:00+00:00"),
    ("datetime", datetime(2026, 4, 22, 12, tzinfo=UTC), "2026-04-22T12:00:00+00:00"),
    ("list", ["a", 1, {"b": [2]}], ["a", 1, {"b": [2]}]),
    ("list", ("a", "b"), ["a", "b"]),
    ("list", [], []),
    ("json", {"k": [1, 2.5, None, True]}, {"k": [1, 2.5, None, True]}),
    ("json", None, None),
    ("json", "just a string", "just a string"),
])
def test_each_supported_type_is_stored_as_its_json_value(field_type, value, stored):
    g = Given()
    (d,) = g.when(revise(field="f", value=value, field_type=field_type))
    assert d.payload["value"] == stored and type(d.payload["value"]) is type(stored)
    view = F.get_field(g.state, "atlas", "f")
    assert (view.field_type, view.value) == (field_type, stored)


def test_the_type_defaults_to_string_and_later_revisions_keep_the_fields_type():
    g = Given()
    g.when(revise(field="count", value=1, field_type="int"))
    (d,) = g.when(revise(field="count", value=2))
    assert d.payload["field_type"] == "int"
    (d,) = g.when(revise(field="name", value="x"))
    assert d.payload["field_type"] == "string"
    with pytest.raises(ValidationError) as e:
        g.when(revise(field="other", value=5))  # no type given: string, and 5 is not a string
    assert e.value.field == "value"


def test_an_unknown_type_is_stored_as_string_with_the_requested_type_kept():
    """MemState's TopicField coerces a field_type it does not know to "string"
    (test_field_type_coercion); the revision keeps the type asked for."""
    g = Given()
    (d,) = g.when(revise(value="6f3a-11", field_type="uuid"))
    assert d.payload == {"topic_id": "atlas", "field": "owner", "field_type": "string",
                         "value": "6f3a-11", "provenance": "api", "requested_type": "uuid"}
    view = F.get_field(g.state, "atlas", "owner", history=True)
    assert (view.field_type, view.requested_type, view.value) == ("string", "uuid", "6f3a-11")
    assert view.history[0].requested_type == "uuid"
    # the field is a string field now: a known type is stored as asked, and it is "string"
    (d,) = g.when(revise(value="7b2c-40", field_type="string"))
    assert "requested_type" not in d.payload
    assert F.get_field(g.state, "atlas", "owner").requested_type is None
    assert g.when(revise(value="7b2c-40")) == []  # already so
    assert [r.requested_type for r in F.get_field(g.state, "atlas", "owner", history=True).history] == [
        None, "uuid"]
    # a value that is not a string cannot be stored as one
    with pytest.raises(ValidationError) as e:
        g.when(revise(field="weight", value=5, field_type="number"))
    assert e.value.field == "value"
    assert e.value.rule.startswith("must be a string: field_type 'number' is not a MemState type, so the "
                                   "field is stored as 'string' (got int 5)")
    # an int field stays an int field, whatever type is asked for
    g.when(revise(field="count", value=3, field_type="int"))
    with pytest.raises(Rejected, match="^field_type_never_changes: field 'atlas/count' has type 'int', "
                                       "not 'string'"):
        g.when(revise(field="count", value="three", field_type="counter"))
    with pytest.raises(ValidationError, match="must be a type name"):
        g.when(revise(value="x", field_type=""))
    assert F.stored_type("json") == ("json", None) and F.stored_type("money") == ("string", "money")


def test_raw_appends_that_break_a_fields_rule_are_refused_with_nothing_written(braid):
    execute(braid, revise(field="count", value=3, field_type="int"))
    head = braid.head()

    def raw(payload, kind="field_revised"):
        return braidlog.GenericDelta(braid_id="agent-1", kind=kind, ts=T0 + timedelta(hours=1),
                                     provenance=braidlog.Provenance("user"), confidence=1.0, payload=payload)

    fine = raw({"topic_id": "atlas", "field": "owner", "field_type": "string", "value": "Aya", "provenance": "ui"})
    for bad, message in [
        (raw({"topic_id": "atlas", "field": "count", "field_type": "string", "value": "3", "provenance": "ui"}),
         "field_type_never_changes"),
        (raw({"topic_id": "atlas", "field": "count", "field_type": "int", "value": "3", "provenance": "ui"}),
         "value_matches_field_type"),
        (raw({"topic_id": "nope"}, kind="topic_restored"), "topic_known"),
    ]:
        with pytest.raises((ValidationError, Rejected), match=message):
            braid.append(bad)
        with pytest.raises((ValidationError, Rejected), match=message):
            braid.append_batch([fine, bad])
        assert braid.head() == head and braid.log.get(fine.id) is None
    # an unknown type, stored as string with the requested type kept, enters raw as well
    braid.append(raw({"topic_id": "atlas", "field": "sku", "field_type": "string", "value": "A1",
                      "provenance": "ui", "requested_type": "sku_code"}))
    assert F.get_field(braid.state("fields"), "atlas", "sku").requested_type == "sku_code"


def test_every_fields_rule_refuses_a_raw_delta_that_breaks_it():
    """F.check is what the boundary runs for each delta: the same rules as the commands."""
    g = Given()
    g.when(revise(field="count", value=3, field_type="int"))
    g.when(revise(topic="old", value="x"))
    g.when(ArchiveTopic(topic_id="old"))

    def raw(kind, payload):
        d = braidlog.GenericDelta(braid_id="agent-1", kind=kind, ts=T0 + timedelta(days=1),
                                  provenance=braidlog.Provenance("user"), confidence=1.0, payload=payload)
        return braidlog.validate(d)[0]  # the kind's schema accepts each: only a rule refuses it

    revised = {"topic_id": "atlas", "field": "count", "field_type": "int", "value": 4, "provenance": "api"}
    cases = [
        (raw("field_revised", {**revised, "value": "four"}), ValidationError,
         "value_matches_field_type: must be an int"),
        (raw("field_revised", {**revised, "field_type": "string", "value": "4"}), Rejected,
         "^field_type_never_changes: "),
        (raw("field_revised", {**revised, "field": "n", "requested_type": "int"}), ValidationError,
         "requested_type_is_stored_as_string: 'int' with field_type 'int'"),
        (raw("field_revised", {**revised, "topic_id": "old", "field": "x"}), Rejected,
         "^archived_topic_is_read_only: topic 'old' is archived"),
        (raw("field_salience_bumped", {"topic_id": "atlas", "field": "nope", "by": 1.0}), Rejected,
         "^field_known: topic 'atlas' has no field 'nope'"),
        (raw("topic_archived", {"topic_id": "nope", "salience": 1.0}), Rejected, "^topic_known: "),
        (raw("topic_restored", {"topic_id": "nope"}), Rejected, "^topic_known: "),
    ]
    for d, error, message in cases:
        with pytest.raises(error, match=message):
            F.check(g.state, d)
    for d in [raw("field_revised", revised),
              raw("field_revised", {**revised, "field": "code", "field_type": "string", "value": "A1",
                                    "requested_type": "sku"}),
              raw("topic_restored", {"topic_id": "old"})]:
        F.check(g.state, d)


@pytest.mark.parametrize("field_type, value", [
    ("string", 5), ("string", None),
    ("int", "5"), ("int", True), ("int", 1.5),
    ("float", "2.5"), ("float", False), ("float", math.nan), ("float", math.inf),
    ("bool", 1), ("bool", "true"),
    ("date", 20260422), ("date", datetime(2026, 4, 22, tzinfo=UTC)),
    ("datetime", 1714000000),
    ("list", "a,b"), ("list", {"a": 1}), ("list", [object()]),
    ("json", {1: "int key"}), ("json", {1, 2}), ("json", [math.nan]),
])
def test_a_value_that_does_not_match_its_type_is_refused(field_type, value):
    with pytest.raises(ValidationError) as e:
        Given().when(revise(field="f", value=value, field_type=field_type))
    assert e.value.field.startswith("value")


def test_a_fields_type_never_changes():
    g = Given()
    g.when(revise(field="count", value=1, field_type="int"))
    with pytest.raises(Rejected) as e:
        g.when(revise(field="count", value="one", field_type="string"))
    assert "has type 'int', not 'string'" in e.value.reason


@pytest.mark.parametrize("command, field", [
    (revise(topic="a/b"), "topic_id"),
    (revise(topic=""), "topic_id"),
    (revise(topic="t" * 61), "topic_id"),
    (revise(field=""), "field"),
    (revise(field="f" * 60), "field"),
    (revise(provenance="email"), "provenance"),
    (revise(why_changed=""), "why_changed"),
    (revise(impact_expected=3), "impact_expected"),
    (revise(salience=math.nan), "salience"),
    (revise(salience="high"), "salience"),
    (revise(ref_topic_id="x/y"), "ref_topic_id"),
])
def test_bad_revisions_are_refused_naming_the_field(command, field):
    with pytest.raises(ValidationError) as e:
        Given().when(command)
    assert e.value.field == field


def test_every_provenance_of_the_seed_is_accepted():
    g = Given()
    for p in ("api", "ui", "llm", "mcp", "internal"):
        g.when(revise(value=p, provenance=p))
    assert [r.provenance for r in F.get_field(g.state, "atlas", "owner", history=True).history] == \
        ["internal", "mcp", "llm", "ui", "api"]


def test_ref_topic_id_is_kept_on_the_field():
    g = Given()
    g.when(revise(field="parent", value="orion", ref_topic_id="orion"))
    assert F.get_field(g.state, "atlas", "parent").ref_topic_id == "orion"


# -------------------------------------------------------------------------------- idempotency

def test_repeating_the_current_revision_appends_nothing_but_a_changed_reason_does():
    g = Given()
    assert len(g.when(revise(value="Aya", why_changed="handoff"))) == 1
    assert g.when(revise(value="Aya", why_changed="handoff")) == []
    assert len(g.when(revise(value="Aya", why_changed="confirmed"))) == 1
    assert len(g.when(revise(value="Aya", why_changed="confirmed", provenance="ui"))) == 1
    g.when(revise(field="n", value=1, field_type="json"))
    assert len(g.when(revise(field="n", value=True, field_type="json"))) == 1  # True is not 1
    assert F.get_field(g.state, "atlas", "owner").revision_count == 3


def test_writing_back_an_older_value_is_a_new_revision():
    g = Given()
    g.when(revise(value="Priya"))
    g.when(revise(value="Aya"))
    assert len(g.when(revise(value="Priya"))) == 1
    assert [r.value for r in F.get_field(g.state, "atlas", "owner", history=True).history] == \
        ["Priya", "Aya", "Priya"]


# -------------------------------------------------------------------------------- history cap

def test_the_default_history_cap_is_500_and_bounds_the_view_not_the_count():
    assert F.DEFAULT_MAX_FIELD_HISTORY == 500
    g = Given()
    ctx = Context(now=T0, braid_id="agent-1")
    deltas = [ctx.delta("field_revised", {"topic_id": "t", "field": "n", "field_type": "int",
                                          "value": i, "provenance": "internal"}) for i in range(501)]
    view = F.get_field(g.decider.fold(deltas), "t", "n", history=True)
    assert len(view.history) == 500 and view.revision_count == 501
    assert (view.history[0].value, view.history[-1].value) == (500, 1)  # revision 0 trimmed


def test_the_history_cap_is_configurable_and_the_log_keeps_every_revision(tmp_path):
    capped = F.fields_decider(max_field_history=3, name="fields_h3")
    with braidlog.open(tmp_path / "store", projections=[capped]) as b:
        first = None
        for i in range(5):
            recs = b.execute(capped, revise(field="n", value=i, field_type="int"), braid_id="agent-1",
                             now=T0 + timedelta(hours=i))
            first = first or recs[0]
        view = F.get_field(b.state("fields_h3"), "atlas", "n", history=True)
        assert [r.value for r in view.history] == [4, 3, 2] and view.revision_count == 5
        assert [r.value for r in F.log_history(b.log, "atlas", "n")] == [4, 3, 2, 1, 0]
        assert [r.id for r in F.log_history(b.log, "atlas", "n")][-1] == first.delta.id
        assert F.get_field(b.at(first.seq).state("fields_h3"), "atlas", "n").value == 0
        assert [r.value for r in F.log_history(b.at(first.seq + 1).log, "atlas", "n")] == [1, 0]


@pytest.mark.parametrize("cap", [0, -1, 2.5, True])
def test_a_bad_history_cap_is_refused(cap):
    with pytest.raises(ValidationError) as e:
        F.fields_decider(max_field_history=cap)
    assert e.value.field == "max_field_history"


# ----------------------------------------------------------------------------------- salience

def test_field_salience_defaults_to_1_and_is_clamped_to_0_10():
    g = Given()
    g.when(revise(field="a", value="x"))
    g.when(revise(field="b", value="x", salience=12))
    g.when(revise(field="c", value="x", salience=-3))
    g.when(revise(field="d", value="x", salience=7.5))
    fields = F.get_topic(g.state, "atlas").fields
    assert {n: f.salience for n, f in fields.items()} == {"a": 1.0, "b": 10.0, "c": 0.0, "d": 7.5}
    assert g.deltas[1].payload["salience"] == 10.0


def test_topic_salience_is_the_mean_of_its_fields_and_1_with_none():
    g = Given()
    g.when(revise(field="a", value="x", salience=2))
    g.when(revise(field="b", value="x", salience=5))
    g.when(revise(field="c", value="x", salience=8))
    assert F.topic_salience(g.state, "atlas") == 5.0
    assert F.get_topic(g.state, "atlas").salience == 5.0
    assert F.topic_salience(g.state, "unknown") is None
    empty = F.State(topics={"e": F.Topic(topic_id="e", created_at=T0, updated_at=T0)})
    assert F.topic_salience(empty, "e") == F.EMPTY_TOPIC_SALIENCE == 1.0


def test_a_salience_bump_is_an_explicit_delta_and_is_clamped():
    g = Given()
    g.when(revise(field="a", value="x", salience=9))
    (d,) = g.when(BumpSalience(topic_id="atlas", field="a", by=0.5))
    assert (d.kind, d.payload) == ("field_salience_bumped", {"topic_id": "atlas", "field": "a", "by": 0.5})
    assert F.get_field(g.state, "atlas", "a").salience == 9.5
    g.when(BumpSalience(topic_id="atlas", field="a", by=3))
    assert F.get_field(g.state, "atlas", "a").salience == 10.0
    assert g.when(BumpSalience(topic_id="atlas", field="a", by=1)) == []  # already at the top
    g.when(BumpSalience(topic_id="atlas", field="a", by=-25))
    assert F.get_field(g.state, "atlas", "a").salience == 0.0
    assert g.when(BumpSalience(topic_id="atlas", field="a", by=-1)) == []
    assert g.when(BumpSalience(topic_id="atlas", field="a", by=0)) == []


def test_bad_bumps_are_refused():
    g = Given()
    g.when(revise(field="a", value="x"))
    with pytest.raises(ValidationError) as e:
        g.when(BumpSalience(topic_id="atlas", field="a", by=math.inf))
    assert e.value.field == "by"
    with pytest.raises(Rejected, match="has no field 'b'"):
        g.when(BumpSalience(topic_id="atlas", field="b", by=1))
    with pytest.raises(Rejected, match="unknown topic 'zeta'"):
        g.when(BumpSalience(topic_id="zeta", field="a", by=1))


def test_reads_never_write(braid):
    execute(braid, revise(value="Aya"))
    head = braid.head()
    state = braid.state("fields")
    for _ in range(3):
        F.get_field(state, "atlas", "owner", history=True)
        F.get_topic(state, "atlas")
        F.list_topics(state)
    assert braid.head() == head
    assert F.get_field(braid.state("fields"), "atlas", "owner").salience == 1.0
    execute(braid, BumpSalience(topic_id="atlas", field="owner", by=0.25))
    assert braid.head().seq == head.seq + 1
    assert F.get_field(braid.state("fields"), "atlas", "owner").salience == 1.25


# ---------------------------------------------------------------------------------- archiving

def _three_topics() -> Given:
    g = Given()
    g.when(revise(topic="hot", field="a", value="x", salience=6))
    g.when(revise(topic="cold", field="a", value="x", salience=0.2))
    g.when(revise(topic="cold", field="b", value="x", salience=0.4))
    g.when(revise(topic="edge", field="a", value="x", salience=1.0))
    return g


def test_archive_topics_archives_every_live_topic_strictly_below_the_threshold():
    g = _three_topics()
    out = g.when(ArchiveTopics(below=1.0, reason="weekly forgetting"))
    assert [(d.kind, d.payload["topic_id"]) for d in out] == [("topic_archived", "cold")]
    assert out[0].payload == {"topic_id": "cold", "salience": pytest.approx(0.3), "below": 1.0,
                              "reason": "weekly forgetting"}
    assert g.when(ArchiveTopics(below=1.0)) == []  # already done
    assert [t.topic_id for t in F.list_topics(g.state)] == ["hot", "edge"]
    assert [t.topic_id for t in F.list_topics(g.state, include_archived=True)] == ["hot", "edge", "cold"]
    assert F.get_topic(g.state, "cold") is None
    assert F.get_field(g.state, "cold", "a") is None
    assert F.get_topic(g.state, "cold", include_archived=True).archived
    assert F.get_field(g.state, "cold", "a", include_archived=True).value == "x"


def test_list_topics_filters_by_salience_most_salient_first():
    g = _three_topics()
    assert [t.topic_id for t in F.list_topics(g.state)] == ["hot", "edge", "cold"]
    assert [t.topic_id for t in F.list_topics(g.state, min_salience=1.0)] == ["hot", "edge"]


def test_archive_one_topic_and_restore_it():
    g = _three_topics()
    (d,) = g.when(ArchiveTopic(topic_id="hot"))
    assert d.payload == {"topic_id": "hot", "salience": 6.0}
    assert g.when(ArchiveTopic(topic_id="hot")) == []
    with pytest.raises(Rejected, match="is archived; restore it"):
        g.when(revise(topic="hot", field="a", value="y"))
    (d,) = g.when(RestoreTopic(topic_id="hot", reason="needed again"))
    assert (d.kind, d.payload) == ("topic_restored", {"topic_id": "hot", "reason": "needed again"})
    assert g.when(RestoreTopic(topic_id="hot")) == []
    assert F.get_topic(g.state, "hot").archived is False
    assert len(g.when(revise(topic="hot", field="a", value="y"))) == 1


def test_archiving_or_restoring_an_unknown_topic_is_refused():
    g = Given()
    with pytest.raises(Rejected, match="unknown topic 'nope'"):
        g.when(ArchiveTopic(topic_id="nope"))
    with pytest.raises(Rejected, match="unknown topic 'nope'"):
        g.when(RestoreTopic(topic_id="nope"))
    with pytest.raises(ValidationError) as e:
        g.when(ArchiveTopics(below=math.nan))
    assert e.value.field == "below"


def test_an_unknown_command_is_refused():
    with pytest.raises(ValidationError) as e:
        Given().when("revise please")
    assert e.value.field == "command"


# ----------------------------------------------------------------------- refusals in the store

@pytest.mark.parametrize("command", [
    revise(value=5, field_type="uuid"),
    revise(value=5, field_type="string"),
    revise(field="owner", value=3, field_type="int"),  # type change
    revise(topic="archived", value="x"),
    BumpSalience(topic_id="atlas", field="missing", by=1),
    ArchiveTopic(topic_id="missing"),
])
def test_a_refused_command_appends_nothing(braid, command):
    execute(braid, revise(value="Aya"))
    execute(braid, revise(topic="archived", value="x"))
    execute(braid, ArchiveTopic(topic_id="archived"))
    head = braid.head()
    with pytest.raises((ValidationError, Rejected)):
        execute(braid, command, hours=1)
    assert braid.head() == head


def test_an_already_done_command_appends_nothing_in_the_store(braid):
    assert len(execute(braid, revise(value="Aya"))) == 1
    head = braid.head()
    assert execute(braid, revise(value="Aya"), hours=1) == []
    assert braid.head() == head


# ------------------------------------------------------------------------ refers and the index

def test_every_fields_delta_is_indexed_under_its_topic_and_field(braid):
    execute(braid, revise(field="owner", value="Priya"))
    execute(braid, revise(field="owner", value="Aya"), 1)
    execute(braid, revise(field="budget", value=3, field_type="int"), 2)
    execute(braid, BumpSalience(topic_id="atlas", field="owner", by=1), 3)
    execute(braid, ArchiveTopic(topic_id="atlas"), 4)
    kinds = [r.delta.kind for r in braid.log.scan_refs("atlas")]
    assert kinds == ["field_revised"] * 3 + ["field_salience_bumped", "topic_archived"]
    assert [r.delta.kind for r in braid.log.scan_refs(F.field_id("atlas", "owner"))] == \
        ["field_revised", "field_revised", "field_salience_bumped"]
    assert F.split_field_id("atlas/owner/sub") == ("atlas", "owner/sub")
    with pytest.raises(ValidationError):
        F.split_field_id("no-slash")


# ------------------------------------------------------------- evolve, checkpoints, time travel

def test_evolve_is_total_on_deltas_it_does_not_expect():
    ctx = Context(now=T0, braid_id="agent-1")
    deltas = [
        ctx.delta("field_salience_bumped", {"topic_id": "ghost", "field": "a", "by": 1.0}),
        ctx.delta("topic_archived", {"topic_id": "ghost", "salience": 0.0}),
        ctx.delta("field_revised", {"topic_id": "t", "field": "a", "field_type": "string",
                                    "value": "x", "provenance": "api"}),
        ctx.delta("field_salience_bumped", {"topic_id": "t", "field": "missing", "by": 1.0}),
        ctx.delta("field_salience_bumped", {"topic_id": "t", "field": "a", "by": math.nan}),
        braidlog.delta("agent-1", "message", {"text": "hello"}, ts=T0),
    ]
    state = F.evolve(F.State(), deltas[-1])
    assert state == F.State()
    state = F.PROJECTIONS[0].fold(deltas)
    assert list(state.topics) == ["t"] and F.get_field(state, "t", "a").salience == 1.0


def _rich_history() -> Given:
    g = Given()
    g.when(revise(field="owner", value="Priya", provenance="llm", why_changed="assigned"))
    g.when(revise(field="owner", value="Aya", provenance="ui", impact_expected="new reviewer"))
    g.when(revise(field="budget", value=10, field_type="float", salience=3.5))
    g.when(revise(field="tags", value=("a", "b"), field_type="list"))
    g.when(revise(field="spec", value={"k": [1, {"n": None}], "f": 2.5}, field_type="json"))
    g.when(revise(field="due", value=date(2026, 5, 1), field_type="date"))
    g.when(revise(field="done", value=False, field_type="bool"))
    g.when(revise(topic="old", field="x", value="x", salience=0.1))
    g.when(BumpSalience(topic_id="atlas", field="owner", by=2))
    g.when(ArchiveTopics(below=0.5))
    return g


def test_state_round_trips_through_checkpoint_encoding():
    state = _rich_history().state
    decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=F.State)
    assert decoded == state
    assert F.get_topic(decoded, "atlas", history=True) == F.get_topic(state, "atlas", history=True)


def test_time_travel_equals_a_fresh_fold_at_every_seq(tmp_path):
    g = _rich_history()
    with braidlog.open(tmp_path / "store", projections=F.PROJECTIONS, checkpoint_every=4) as b:
        b.append_batch(g.deltas)
        for seq in range(len(g.deltas) + 1):
            fresh = F.PROJECTIONS[0].fold(r.delta for r in b.log.scan(1, seq + 1))
            assert b.at(seq).state("fields") == fresh
    with braidlog.open(tmp_path / "store", projections=F.PROJECTIONS) as b:  # from checkpoints
        assert b.state("fields") == g.state
        assert F.get_field(b.at(1).state("fields"), "atlas", "owner").value == "Priya"


def test_the_demo_piece_writes_a_field_with_history(tmp_path):
    from braidlog.projections.demos import fields as demo

    with braidlog.open(tmp_path / "store", projections=F.PROJECTIONS) as b:
        lines = demo.write(b, T0)
        state = b.state("fields")
        owner = F.get_field(state, "project-atlas", "owner", history=True)
        assert [r.value for r in owner.history] == ["Aya", "Priya", "unassigned"]
        assert F.get_topic(state, "scratch-notes") is None
        assert F.get_topic(state, "scratch-notes", include_archived=True).archived
        assert lines[0].startswith("fields: project-atlas.owner is 'Aya'")
        assert "owner = 'Priya'" in lines[2]
        head = b.head()
    with braidlog.open(tmp_path / "again", projections=F.PROJECTIONS) as b:
        assert demo.write(b, T0) == lines and b.head().seq == head.seq  # deterministic given start


def test_the_demo_piece_can_run_twice_into_one_store(tmp_path):
    from braidlog.projections.demos import fields as demo

    with braidlog.open(tmp_path / "store", projections=F.PROJECTIONS) as b:
        demo.write(b, T0)
        lines = demo.write(b, T0 + timedelta(days=1))
        assert lines[0].startswith("fields: project-atlas.owner is 'Aya'")
        assert "(scratch-notes)" in lines[-1]


# --------------------------------------------------------------------------------- properties

_commands = st.one_of(
    st.builds(ReviseField, topic_id=st.sampled_from(["a", "b", "c"]), field=st.sampled_from(["x", "y"]),
              value=st.one_of(st.text(max_size=3), st.integers(-3, 3)),
              provenance=st.sampled_from(F.REVISION_PROVENANCES),
              salience=st.none() | st.floats(-5, 15)),
    st.builds(BumpSalience, topic_id=st.sampled_from(["a", "b"]), field=st.sampled_from(["x", "y"]),
              by=st.floats(-4, 4)),
    st.builds(ArchiveTopics, below=st.floats(0, 3)),
    st.builds(RestoreTopic, topic_id=st.sampled_from(["a", "b", "c"])),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_commands, max_size=25))
def test_any_command_sequence_keeps_the_invariants(commands):
    g = Given(F.fields_decider(max_field_history=3, name="fields_h3"))
    for c in commands:
        try:
            g.when(c)
        except (Rejected, ValidationError):
            pass
    state = g.state
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=F.State) == state
    for topic in state.topics.values():
        for f in topic.fields.values():
            assert 0.0 <= f.salience <= 10.0
            assert len(f.revisions) == min(3, f.revision_count)
            assert [r.valid_from for r in f.revisions] == sorted(r.valid_from for r in f.revisions)
        if topic.fields:
            mean = sum(f.salience for f in topic.fields.values()) / len(topic.fields)
            assert F.topic_salience(state, topic.topic_id) == pytest.approx(mean)
    live = {t.topic_id for t in F.list_topics(state)}
    assert live == {t for t, v in state.topics.items() if not v.archived}


def test_entity_names_topics_and_fields_for_audit():
    g = Given()
    g.when(revise(value="Priya"))
    g.when(revise(value="Aya"))
    assert F.entity(g.state, "atlas/owner").value == "Aya"
    assert F.entity(g.state, "atlas").topic_id == "atlas"
    assert F.entity(g.state, "atlas/nope") is None and F.entity(g.state, "nope") is None
