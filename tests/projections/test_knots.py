"""Knots: lifecycle, required fields, range rules, immutability, the two-pass rule, episodes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest

import braidlog
from braidlog import BeadRef, Context, Provenance, Rejected, ValidationError
from braidlog.projections import beads, knots, trust
from braidlog.projections.knots import BeginSpeak, CallTool, DeltaRange, Metrics, OpenKnot, PlannedTool, Speak, TieKnot

T0 = datetime(2026, 1, 1, tzinfo=UTC)
B = "b1"
ALL = beads.PROJECTIONS + knots.PROJECTIONS + trust.PROJECTIONS


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def braid(tmp_path):
    b = braidlog.open(tmp_path / "store", projections=ALL)
    yield b
    b.close()


def run(b, command, seconds=0.0, provenance="assistant", decider="knots", braid_id=B):
    return b.execute(decider, command, braid_id=braid_id, provenance=provenance, now=at(seconds))


def refused(b, command, error, match, seconds=500.0, provenance="assistant", decider="knots", braid_id=B):
    """Run a command that must be refused; assert nothing was appended."""
    head = b.head()
    with pytest.raises(error, match=match):
        run(b, command, seconds, provenance, decider, braid_id)
    assert b.head() == head


def append(b, kind, payload, seconds, provenance="user", braid_id=B, **kw):
    prov = provenance if isinstance(provenance, Provenance) else Provenance(provenance)
    d = braidlog.delta(braid_id, kind, payload, provenance=prov, ts=at(seconds), **kw)
    b.append(d)
    return d


def thought(b, seconds, bead_id="thought", narrative="I answered from the forecast.", knot_id=None):
    prov = Provenance("assistant", knot_id=knot_id)
    return run(b, beads.WriteBead(bead_id=bead_id, bead_type="reasoning_bead", name="thought",
                                  reasoning=beads.Reasoning(narrative=narrative)), seconds, prov, "beads")


def open_knot(b, knot_id="k1", seconds=1.0, **kw):
    return run(b, OpenKnot(knot_id=knot_id, **kw), seconds)


def full_knot(b, knot_id="k1", start=0.0, bead_id=None):
    """A whole knot: input, open, tool call + result, reasoning bead, speak, tie."""
    bead_id = bead_id or f"thought-{knot_id}"
    append(b, "message", {"text": "weather?"}, start)
    open_knot(b, knot_id, start + 1)
    run(b, CallTool(knot_id=knot_id, tool="web_search", args={"q": "weather"}, call_id="c-" + knot_id), start + 2)
    append(b, "tool_result", {"tool": "web_search", "output": "sun"}, start + 3,
           Provenance("tool", knot_id=knot_id))
    thought(b, start + 4, bead_id, knot_id=knot_id)
    run(b, Speak(knot_id=knot_id, text="Sunny."), start + 5)
    return run(b, TieKnot(knot_id=knot_id, summary="answered", thought_summary_bead_ref=BeadRef(bead_id, "used")),
               start + 6)


def roundtrip(state):
    return msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=knots.State)


# --------------------------------------------------------------------------------- default episode

def test_default_episode_id_is_session_at_timecode():
    assert knots.default_episode_id("b1", datetime(2026, 3, 1, 9, 30, 5, 123, tzinfo=UTC)) == \
        "session:b1@20260301T093005Z"
    cet = timezone(timedelta(hours=1))
    assert knots.default_episode_id("b1", datetime(2026, 3, 1, 10, 30, 5, tzinfo=cet)) == "session:b1@20260301T093005Z"
    long = "x" * 120
    eid = knots.default_episode_id(long, T0)
    assert len(eid) <= 120 and eid == knots.default_episode_id(long, T0) and eid.startswith("session:~")
    assert knots.is_default_episode_id(eid, long) and not knots.is_default_episode_id(eid, "b1")
    assert knots.is_default_episode_id("session:b1@20260101T000000Z", "b1")
    assert not knots.is_default_episode_id("ep-42")
    with pytest.raises(ValidationError, match="ts: must be a timezone-aware"):
        knots.default_episode_id("b1", datetime(2026, 1, 1))


def test_a_knot_without_episode_gets_the_default_session_episode(braid):
    rec = open_knot(braid, seconds=1)[0]
    assert rec.delta.payload["primary_episode_id"] == knots.default_episode_id(B, at(1))
    assert rec.delta.provenance.knot_id == "k1"
    assert rec.delta.provenance.episode_id == knots.default_episode_id(B, at(1))


def test_knots_of_one_session_share_the_default_episode_until_a_gap(braid):
    full_knot(braid, "k1", 0)
    full_knot(braid, "k2", 60)
    gap = knots.SESSION_GAP.total_seconds()
    full_knot(braid, "k3", 66 + gap + 1)
    s = braid.state("knots")
    eps = [knots.knot(s, k).tied.primary_episode_id for k in ("k1", "k2", "k3")]
    assert eps[0] == eps[1] == knots.default_episode_id(B, at(1))
    assert eps[2] == knots.default_episode_id(B, at(66 + gap + 2))


def test_an_explicit_episode_is_kept_and_not_continued_by_default(braid):
    append(braid, "message", {"text": "hi"}, 0)
    open_knot(braid, "k1", 1, primary_episode_id="ep-travel")
    thought(braid, 2)
    run(braid, TieKnot(knot_id="k1", summary="s", thought_summary_bead_ref=BeadRef("thought", "used")), 3)
    rec = open_knot(braid, "k2", 4)[0]
    assert knots.knot(braid.state("knots"), "k1").tied.primary_episode_id == "ep-travel"
    assert rec.delta.payload["primary_episode_id"] == knots.default_episode_id(B, at(4))


# ------------------------------------------------------------------------------------ lifecycle

def test_a_tied_knot_has_every_required_field(braid):
    full_knot(braid, "k1", 0)
    k = knots.knot(braid.state("knots"), "k1")
    t = k.tied
    log = braid.log
    msg, opened = log.read(1).delta, log.read(2).delta
    call, result = log.read(3).delta, log.read(4).delta
    assert (k.stage, k.braid_id) == ("tied", B)
    assert t.knot_id == "k1" and t.primary_episode_id == knots.default_episode_id(B, at(1))
    assert t.delta_range == DeltaRange(start_delta_id=msg.id, end_delta_id=log.read(log.head().seq - 1).delta.id)
    assert (t.start_ts, t.end_ts) == (at(1), at(6))
    assert t.inbox_watermark == msg.id
    assert t.arrivals_during == ()
    assert t.summary == "answered"
    assert t.thought_summary_bead_ref == BeadRef("thought-k1", "used")
    assert t.planned_tools == (PlannedTool(tool="web_search", call_id="c-k1"),)
    assert t.executed_tools == (result.id,)
    assert t.hypotheses == ()
    assert t.metrics == Metrics(latency_ms=5000.0)
    assert call.kind == "tool_call" and call.payload["knot_pass"] == "think"
    assert opened.payload["type"] == "KnotOpened"
    assert [m for m in k.spoken] == [log.read(log.head().seq - 1).delta.id]
    assert knots.open_knot(braid.state("knots"), B) is None


def test_the_knot_collects_arrivals_hypotheses_and_uses_explicit_fields(braid):
    append(braid, "message", {"text": "first"}, 0)
    open_knot(braid, seconds=1, planned_tools=(PlannedTool(tool="calc", args={"x": 1}),))
    late = append(braid, "message", {"text": "also this!"}, 2)
    append(braid, "observation", {"text": "mine"}, 2.5, Provenance("assistant", knot_id="k1"))
    h = run(braid, trust.ProposeHypothesis(statement="the user is in a hurry"), 3,
            Provenance("assistant", knot_id="k1"), "trust")
    thought(braid, 4, knot_id="k1")
    run(braid, TieKnot(knot_id="k1", summary="s", thought_summary_bead_ref=BeadRef("thought", "used"),
                       metrics=Metrics(token_estimate=321, fork_pending_count=1, extra={"recall_ms": 2.5})), 5)
    t = knots.knot(braid.state("knots"), "k1").tied
    assert t.arrivals_during == (late.id,)
    assert t.hypotheses == (h[0].delta.id,)
    assert t.planned_tools == (PlannedTool(tool="calc", args={"x": 1}),)
    assert t.metrics == Metrics(latency_ms=4000.0, token_estimate=321, fork_pending_count=1, extra={"recall_ms": 2.5})


def test_inbox_watermark_is_the_last_input_visible_at_open(braid):
    append(braid, "message", {"text": "one"}, 0)
    two = append(braid, "observation", {"text": "camera: door opened"}, 0.5, "perception")
    append(braid, "message", {"text": "said by the agent"}, 0.7, "assistant")
    append(braid, "message", {"text": "other braid"}, 0.8, braid_id="b2")
    assert open_knot(braid)[0].delta.payload["inbox_watermark"] == two.id


def test_opening_the_same_knot_twice_is_idempotent_while_open_and_refused_otherwise(braid):
    open_knot(braid)
    head = braid.head()
    assert open_knot(braid, seconds=2) == []
    assert braid.head() == head
    refused(braid, OpenKnot(knot_id="k1", primary_episode_id="ep-other"), Rejected,
            "knot-id-once: knot k1 already exists")
    refused(braid, OpenKnot(knot_id="k1"), Rejected, "knot-id-once: knot k1 already exists", braid_id="b2")
    thought(braid, 3)
    run(braid, TieKnot(knot_id="k1", summary="s", thought_summary_bead_ref=BeadRef("thought", "used")), 4)
    refused(braid, OpenKnot(knot_id="k1"), Rejected, r"knot-id-once: knot k1 already exists \(braid 'b1', tied\)")


def test_one_open_knot_per_braid(braid):
    open_knot(braid, "k1")
    refused(braid, OpenKnot(knot_id="k2"), Rejected, "one-open-knot: knot k1 is still open in braid 'b1'; tie it")
    assert run(braid, OpenKnot(knot_id="k3"), 2, braid_id="b2")  # other braids are independent


def test_commands_on_unknown_or_foreign_knots_are_refused(braid):
    refused(braid, BeginSpeak(knot_id="nope"), Rejected, "no knot 'nope'; open it first")
    open_knot(braid)
    refused(braid, CallTool(knot_id="k1", tool="x"), Rejected, "knot k1 belongs to braid 'b1', not 'b2'",
            braid_id="b2")


def test_begin_speak_is_idempotent_and_speak_begins_the_speak_pass(braid):
    open_knot(braid)
    recs = run(braid, Speak(knot_id="k1", text="Hello"), 2)
    assert [r.delta.kind for r in recs] == ["knot_lifecycle", "message"]
    assert recs[1].delta.payload == {"text": "Hello", "knot_pass": "speak"}
    assert recs[1].delta.provenance.knot_id == "k1"
    assert run(braid, BeginSpeak(knot_id="k1"), 3) == []
    mid = braidlog.new_id()
    assert len(run(braid, Speak(knot_id="k1", text="More", message_id=mid), 4)) == 1
    assert run(braid, Speak(knot_id="k1", text="More", message_id=mid), 5) == []
    refused(braid, Speak(knot_id="k1", text="x", message_id="bad"), ValidationError, "message_id: must be a ULID")
    refused(braid, Speak(knot_id="k1", text=""), ValidationError, "payload.text")


# ----------------------------------------------------------------------------------- two-pass rule

def test_a_tool_call_in_the_think_pass_is_appended_and_stamped(braid):
    open_knot(braid)
    recs = run(braid, CallTool(knot_id="k1", tool="web_search", args={"q": "x"}, call_id="c1"), 2)
    d = recs[0].delta
    assert (d.kind, d.provenance.knot_id, d.payload) == (
        "tool_call", "k1", {"tool": "web_search", "args": {"q": "x"}, "call_id": "c1", "knot_pass": "think"})
    assert run(braid, CallTool(knot_id="k1", tool="web_search", args={"q": "x"}, call_id="c1"), 3) == []
    assert [t.call_id for t in knots.knot(braid.state("knots"), "k1").tool_calls] == ["c1"]


def test_a_tool_call_in_the_speak_pass_is_refused_and_nothing_is_appended(braid):
    open_knot(braid)
    run(braid, BeginSpeak(knot_id="k1"), 2)
    refused(braid, CallTool(knot_id="k1", tool="web_search", call_id="c9"), Rejected,
            r"^delta 0: speak-pass-no-tools: tool_call \w+ is in the speak pass of knot k1: the speak "
            r"pass must not call tools \(two-pass rule\)")
    assert knots.knot(braid.state("knots"), "k1").tool_calls == []


def test_a_raw_tool_call_in_the_speak_pass_is_refused_at_the_boundary(braid):
    open_knot(braid)
    run(braid, BeginSpeak(knot_id="k1"), 2)
    head = braid.head()
    with pytest.raises(Rejected, match="^delta 0: speak-pass-no-tools: .* knot k1"):
        append(braid, "tool_call", {"tool": "web_search"}, 3, Provenance("assistant", knot_id="k1"))
    with pytest.raises(Rejected, match=r"^delta 1: speak-pass-no-tools: .* knot \(claimed\)"):
        braid.append_batch([braidlog.delta(B, "message", {"text": "fine"}, ts=at(4)),
                            braidlog.delta(B, "tool_call", {"tool": "calc", "knot_pass": "speak"}, ts=at(4))])
    assert braid.head() == head


def below(b, kind, payload, seconds, provenance="user", braid_id=B):
    """Append below the boundary (the bare store), as a replica or an old store would hold it."""
    prov = provenance if isinstance(provenance, Provenance) else Provenance(provenance)
    d = braidlog.delta(braid_id, kind, payload, provenance=prov, ts=at(seconds))
    b.log.append(d)
    return d


def test_a_tool_call_in_the_speak_pass_below_the_boundary_is_recorded_as_a_violation(braid):
    open_knot(braid)
    run(braid, BeginSpeak(knot_id="k1"), 2)
    bad = below(braid, "tool_call", {"tool": "web_search"}, 3, Provenance("assistant", knot_id="k1"))
    claimed = below(braid, "tool_call", {"tool": "calc", "knot_pass": "speak"}, 4)
    s = braid.state("knots")
    assert [(v.delta_id, v.knot_id, v.rule) for v in knots.violations(s)] == [
        (bad.id, "k1", "speak-pass-no-tools"), (claimed.id, None, "speak-pass-no-tools")]
    assert knots.knot(s, "k1").violations == [bad.id]
    assert knots.knot(s, "k1").tool_calls == []
    assert [v.delta_id for v in knots.violations(s, "k1")] == [bad.id]


# --------------------------------------------------------------------------------- immutability

def test_a_tied_knot_is_immutable(braid):
    full_knot(braid, "k1")
    tie = TieKnot(knot_id="k1", summary="answered", thought_summary_bead_ref=BeadRef("thought-k1", "used"))
    head = braid.head()
    assert run(braid, tie, 100) == []  # the same tie again is already done
    assert braid.head() == head
    refused(braid, msgspec.structs.replace(tie, summary="rewritten"), Rejected,
            "^delta 0: knot-tied-once: knot k1 is already tied; .* immutable once tied")
    refused(braid, msgspec.structs.replace(tie, metrics=Metrics(latency_ms=1.0)), Rejected, "knot-tied-once")
    refused(braid, BeginSpeak(knot_id="k1"), Rejected, "speak-after-think: .* knot k1 is tied")
    refused(braid, CallTool(knot_id="k1", tool="x"), Rejected, "knot-immutable: knot k1 is tied and immutable")
    refused(braid, Speak(knot_id="k1", text="x"), Rejected, "speak-after-think")


def test_a_second_write_to_a_knot_id_is_refused_whatever_the_path(braid):
    full_knot(braid, "k1")
    tied = braid.log.read(braid.head().seq).delta
    head = braid.head()
    for payload in ({**tied.payload, "summary": "changed"},
                    {"type": "KnotOpened", "knot_id": "k1", "primary_episode_id": "e",
                     "start_ts": "2026-01-01T00:01:00Z"}):
        with pytest.raises(Rejected, match="knot-tied-once|knot-id-once"):
            append(braid, "knot_lifecycle", payload, 50)
    with pytest.raises(Rejected, match="^delta 0: knot-tied-once: knot k-orphan was never opened"):
        append(braid, "knot_lifecycle", {**tied.payload, "knot_id": "k-orphan"}, 53)
    assert braid.head() == head


def test_lifecycle_anomalies_below_the_boundary_are_violations_not_errors(braid):
    full_knot(braid, "k1")
    tied = braid.log.read(braid.head().seq).delta
    again = braidlog.delta(B, "knot_lifecycle", {**tied.payload, "summary": "changed"}, ts=at(50))
    braid.log.append(again)
    reopen = below(braid, "knot_lifecycle", {"type": "KnotOpened", "knot_id": "k1", "primary_episode_id": "e",
                                              "start_ts": "2026-01-01T00:01:00Z"}, 51)
    speak = below(braid, "knot_lifecycle", {"type": "SpeakPassBegan", "knot_id": "ghost"}, 52)
    orphan = below(braid, "knot_lifecycle", {**tied.payload, "knot_id": "k-orphan"}, 53)
    two = below(braid, "knot_lifecycle", {"type": "KnotOpened", "knot_id": "k5", "primary_episode_id": "e",
                                           "start_ts": "2026-01-01T00:01:00Z"}, 54)
    three = below(braid, "knot_lifecycle", {"type": "KnotOpened", "knot_id": "k6", "primary_episode_id": "e",
                                             "start_ts": "2026-01-01T00:01:00Z"}, 55)
    foreign = below(braid, "knot_lifecycle", {**tied.payload, "knot_id": "k5"}, 56, braid_id="b2")
    s = braid.state("knots")
    assert [(v.delta_id, v.rule) for v in knots.violations(s)] == [
        (again.id, "knot-tied-once"), (reopen.id, "knot-id-once"), (speak.id, "speak-after-think"),
        (orphan.id, "knot-tied-once"), (three.id, "one-open-knot"), (foreign.id, "knot-tied-once")]
    assert knots.knot(s, "k1").tied.summary == "answered"  # first fact wins
    assert knots.knot(s, "k-orphan").stage == "tied"
    assert knots.open_knot(s, B).knot_id == "k5"
    assert knots.knot(s, "k6").stage == "think" and two.braid_id == B


def test_a_tool_call_after_the_tie_is_refused_and_below_the_boundary_a_violation(braid):
    full_knot(braid, "k1")
    with pytest.raises(Rejected, match="^delta 0: knot-immutable: knot k1 is tied"):
        append(braid, "tool_call", {"tool": "x"}, 50, Provenance("assistant", knot_id="k1"))
    late = below(braid, "tool_call", {"tool": "x"}, 50, Provenance("assistant", knot_id="k1"))
    assert [(v.delta_id, v.rule) for v in knots.violations(braid.state("knots"))] == [(late.id, "knot-immutable")]


# ----------------------------------------------------------------------------------- range rules

def _ready(b):
    """An open knot k1 in braid b1 with a thought bead, plus a delta in braid b2."""
    first = append(b, "message", {"text": "q"}, 0)
    other = append(b, "message", {"text": "elsewhere"}, 0.5, braid_id="b2")
    open_knot(b)
    thought(b, 2, knot_id="k1")
    return first, other


def _tie(rng=None, **kw):
    return TieKnot(knot_id="k1", summary="s", thought_summary_bead_ref=BeadRef("thought", "used"),
                   delta_range=rng, **kw)


def test_a_range_naming_an_unknown_delta_is_refused(braid):
    first, _ = _ready(braid)
    refused(braid, _tie(DeltaRange(start_delta_id=first.id, end_delta_id="nope")), Rejected,
            "knot-range-exists: delta_range.end_delta_id names no delta in the log")
    refused(braid, _tie(DeltaRange(start_delta_id=braidlog.new_id(), end_delta_id=first.id)), Rejected,
            "knot-range-exists: delta_range.start_delta_id names no delta in the log")


def test_a_range_naming_deltas_of_another_braid_is_refused(braid):
    first, other = _ready(braid)
    refused(braid, _tie(DeltaRange(start_delta_id=first.id, end_delta_id=other.id)), Rejected,
            "knot-range-exists: delta_range.end_delta_id: delta .* belongs to braid 'b2', not 'b1'")


def test_a_backwards_range_is_refused(braid):
    first, _ = _ready(braid)
    last = braid.log.read(braid.head().seq).delta
    refused(braid, _tie(DeltaRange(start_delta_id=last.id, end_delta_id=first.id)), Rejected,
            "knot-range-forward: delta_range starts at seq .* after it ends")


def test_a_range_that_leaves_out_the_knots_own_deltas_is_not_contiguous(braid):
    first, _ = _ready(braid)
    refused(braid, _tie(DeltaRange(start_delta_id=first.id, end_delta_id=first.id)), Rejected,
            "knot-range-contiguous: seqs 1..1 are not one contiguous range with knot k1's own deltas")


def test_a_raw_tie_over_a_backwards_or_broken_range_is_refused_at_the_boundary(braid):
    first, _ = _ready(braid)
    last = braid.log.read(braid.head().seq).delta
    tie = run(braid, _tie(DeltaRange(start_delta_id=first.id, end_delta_id=last.id)), 3)[0].delta
    # the same tie, written raw into a second store that has the same history up to it
    with braidlog.open(None, projections=ALL) as other:
        other.append_batch([r.delta for r in braid.log.scan(1, tie and braid.head().seq)])
        for rng, rule in (({"start_delta_id": last.id, "end_delta_id": first.id}, "knot-range-forward"),
                          ({"start_delta_id": first.id, "end_delta_id": first.id}, "knot-range-contiguous")):
            bad = braidlog.delta(B, "knot_lifecycle", {**tie.payload, "delta_range": rng},
                                 provenance=tie.provenance, ts=tie.ts)
            with pytest.raises(Rejected, match=f"^delta 0: {rule}: "):
                other.append(bad)
        assert other.head().seq == braid.head().seq - 1
        other.append(tie)
        assert knots.knot(other.state("knots"), "k1").stage == "tied"


def test_a_range_overlapping_an_earlier_knot_is_refused(braid):
    full_knot(braid, "k1", 0)
    t1 = knots.knot(braid.state("knots"), "k1").tied
    append(braid, "message", {"text": "next"}, 20)
    open_knot(braid, "k2", 21)
    thought(braid, 22, "thought-k2", knot_id="k2")
    rng = DeltaRange(start_delta_id=t1.delta_range.end_delta_id,
                     end_delta_id=braid.log.read(braid.head().seq).delta.id)
    refused(braid, TieKnot(knot_id="k2", summary="s", thought_summary_bead_ref=BeadRef("thought-k2", "used"),
                           delta_range=rng), Rejected, "knots-never-overlap: delta_range seqs .* overlaps knot k1")
    assert run(braid, TieKnot(knot_id="k2", summary="s", thought_summary_bead_ref=BeadRef("thought-k2", "used")), 23)
    t2 = knots.knot(braid.state("knots"), "k2").tied
    assert braid.log.seq_of(t2.delta_range.start_delta_id) > braid.log.seq_of(t1.delta_range.end_delta_id)


def test_an_explicit_contiguous_range_is_accepted(braid):
    first, _ = _ready(braid)
    last = braid.log.read(braid.head().seq).delta
    run(braid, _tie(DeltaRange(start_delta_id=first.id, end_delta_id=last.id)), 3)
    assert knots.knot(braid.state("knots"), "k1").tied.delta_range.start_delta_id == first.id


def test_tie_needs_the_log():
    s = knots.State()
    c = Context(now=T0, braid_id=B, provenance=Provenance("assistant"))
    for seq, d in enumerate(knots.decide(OpenKnot(knot_id="k1"), s, c), 1):
        s = knots.evolve(s, d, seq)
    with pytest.raises(Rejected, match="TieKnot without a delta_range takes the default range from the log"):
        knots.decide(TieKnot(knot_id="k1", summary="s", thought_summary_bead_ref=BeadRef("t", "used")), s, c)


# ---------------------------------------------------------------------------- thought summary ref

def test_the_thought_summary_must_be_a_written_reasoning_bead(braid):
    _ready(braid)
    run(braid, beads.WriteBead(bead_id="tool", bead_type="tool_bead", name="t"), 3, decider="beads")
    refused(braid, TieKnot(knot_id="k1", summary="s", thought_summary_bead_ref=BeadRef("tool", "used")),
            Rejected, "thought-summary-reasoning-bead: thought_summary_bead_ref must refer to a "
            "reasoning_bead; tool is a tool_bead")
    refused(braid, TieKnot(knot_id="k1", summary="s", thought_summary_bead_ref=BeadRef("ghost", "used")),
            Rejected, r"thought-summary-reasoning-bead: thought_summary_bead_ref.bead_id names no written bead")
    tool_version = beads.active_version(braid.state("beads"), "tool")
    refused(braid, TieKnot(knot_id="k1", summary="s",
                           thought_summary_bead_ref=BeadRef("thought", "used", tool_version)),
            Rejected, "thought_summary_bead_ref.bead_version_id .* is no version of bead 'thought'")
    refused(braid, TieKnot(knot_id="k1", summary="", thought_summary_bead_ref=BeadRef("thought", "used")),
            ValidationError, "payload.summary")


def test_an_unpinned_thought_ref_resolves_to_the_version_active_at_the_tie(braid):
    _ready(braid)
    v1 = beads.active_version(braid.state("beads"), "thought")
    run(braid, _tie(), 3)
    thought(braid, 4, narrative="I revised my answer later.")
    s_beads, s_knots = braid.state("beads"), braid.state("knots")
    assert beads.active_version(s_beads, "thought") != v1
    assert knots.thought_summary(s_knots, s_beads, "k1").body.bead_version_id == v1
    pinned_tie = braid.log.read(braid.log.seq_of(knots.knot(s_knots, "k1").tied_delta_id))
    view = braid.at(pinned_tie.seq)
    assert knots.thought_summary(view.state("knots"), view.state("beads"), "k1").body.bead_version_id == v1
    assert knots.thought_summary(s_knots, s_beads, "nope") is None
    open_knot(braid, "k2", 5)
    s_beads, s_knots = braid.state("beads"), braid.state("knots")
    current = beads.active_version(s_beads, "thought")
    assert knots.resolve_at_knot(s_knots, s_beads, "k2", BeadRef("thought", "used")).body.bead_version_id == current
    assert knots.resolve_at_knot(s_knots, s_beads, "k1", BeadRef("thought", "used")).body.bead_version_id == v1
    assert knots.thought_summary(s_knots, s_beads, "k2") is None
    assert knots.resolve_at_knot(s_knots, s_beads, "nope", BeadRef("thought", "used")) is None


def test_explicit_lists_must_name_deltas_of_the_right_kind(braid):
    first, other = _ready(braid)
    refused(braid, _tie(executed_tools=(first.id,)), Rejected,
            r"knot-lists-name-their-kind: executed_tools\[0\] must name a tool_result delta of braid 'b1'")
    refused(braid, _tie(hypotheses=("nope",)), Rejected, r"hypotheses\[0\] .* is no delta in the log")
    refused(braid, _tie(arrivals_during=(other.id,)), Rejected, r"arrivals_during\[0\] .*braid 'b2'")
    refused(braid, OpenKnot(knot_id="k9", inbox_watermark=first.id), Rejected,
            r"inbox_watermark\[0\] must name a message or observation delta of braid 'b2'", braid_id="b2")
    call = run(braid, CallTool(knot_id="k1", tool="x"), 3)[0].delta
    refused(braid, OpenKnot(knot_id="k9", inbox_watermark=call.id), Rejected, "inbox_watermark",
            braid_id="b2")


# ----------------------------------------------------------------------------- fold properties

def test_state_round_trips_and_equals_a_fresh_fold(tmp_path):
    with braidlog.open(tmp_path / "s", projections=ALL, checkpoint_every=3) as b:
        full_knot(b, "k1", 0)
        open_knot(b, "k2", 20)
        run(b, BeginSpeak(knot_id="k2"), 21)
        below(b, "tool_call", {"tool": "x"}, 22, Provenance("assistant", knot_id="k2"))
        s = b.state("knots")
        assert roundtrip(s) == s
        assert b.projection("knots").fold(r.delta for r in b.log.scan()) == s
        assert s.knots["k2"].opened_seq == b.log.seq_of(s.knots["k2"].opened_delta_id)
    with braidlog.open(tmp_path / "s", projections=ALL) as b:
        assert b.state("knots") == s


def test_time_travel_equals_a_fresh_fold_over_the_demo(tmp_path):
    from braidlog.projections.demos import braid as demo

    with braidlog.open(tmp_path / "s", projections=ALL, checkpoint_every=4) as b:
        lines = demo.write(b, datetime(2026, 3, 1, 9, tzinfo=UTC))
        assert any("two-pass rule" in line for line in lines)
        assert any("resolves to v2" in line and "now at v3" in line and "sees v1" in line for line in lines)
        assert any("0.30 at once, 0.150 after 1 day, 0.075 after 2 days" in line for line in lines)
        assert any("promotion refused" in line for line in lines)
        records = list(b.log.scan())
        for seq in range(0, len(records) + 1):
            view = b.at(seq)
            for p in ALL:
                assert view.state(p.name) == p.fold(r.delta for r in records[:seq]), (p.name, seq)


def test_the_demo_is_deterministic_given_start(tmp_path):
    from braidlog.projections.demos import braid as demo

    start = datetime(2026, 3, 1, 9, tzinfo=UTC)
    outs = []
    for name in ("a", "b"):
        with braidlog.open(tmp_path / name, projections=ALL) as b:
            lines = demo.write(b, start)
            kinds = [(r.delta.kind, r.delta.ts, r.delta.provenance.kind) for r in b.log.scan()]
            outs.append((kinds, [line for line in lines if "dream hypothesis" not in line and "promotion" not in line
                                 and "v1 stays addressable" not in line]))
    assert outs[0] == outs[1]


def test_the_demo_writes_every_delta_into_the_braid_it_is_given(tmp_path):
    from braidlog.projections.demos import braid as demo

    with braidlog.open(tmp_path / "s", projections=ALL) as b:
        lines = demo.write(b, datetime(2026, 3, 1, 9, tzinfo=UTC), braid_id="mine")
        assert {r.delta.braid_id for r in b.log.scan()} == {"mine"}
        k = next(iter(b.state("knots").knots.values()))
        assert len(k.tied.executed_tools) == 1, "the tool result joined the knot of its braid"
        assert any("nothing appended (speak-pass-no-tools)" in line for line in lines)


def test_an_unknown_command_is_refused():
    with pytest.raises(ValidationError, match="command: knots cannot decide"):
        knots.decide("tie it", knots.State(), Context(now=T0, braid_id=B))
