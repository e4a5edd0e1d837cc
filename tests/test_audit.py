"""braidlog.audit: history, diff and explain over real LMDB stores.

A small projection defined here ("notes") exercises every rule; the real projection families
that import cleanly are checked through their demo pieces at the end.
"""

from __future__ import annotations

import importlib
import sys
import types
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from msgspec import Struct

import braidlog
from braidlog import Projection, Provenance, Refs, ValidationError, audit

T0 = datetime(2026, 2, 1, tzinfo=UTC)


class NoteWritten(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    note_id: str
    text: str
    status: str = "active"
    rationale: str | None = None


class NoteForgotten(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    note_id: str
    reason: str


braidlog.declare("audit_note_written", NoteWritten, owner="tests.test_audit",
                 refers=lambda p: [p.note_id])
braidlog.declare("audit_note_forgotten", NoteForgotten, owner="tests.test_audit",
                 refers=lambda p: [p.note_id])


class Note(Struct):
    text: str
    status: str
    tags: list[str] = []


class NotesState(Struct):
    notes: dict[str, Note] = {}
    writes: int = 0


def evolve(state: NotesState, d: braidlog.GenericDelta) -> NotesState:
    p = braidlog.typed(d)
    if d.kind == "audit_note_written":
        old = state.notes.get(p.note_id)
        state.notes[p.note_id] = Note(p.text, p.status, list(d.tags) + (old.tags if old else []))
        state.writes += 1
    else:
        state.notes.pop(p.note_id, None)
    return state


NOTES = Projection("notes", 1, NotesState(), evolve,
                   kinds=frozenset({"audit_note_written", "audit_note_forgotten"}))


def written(note_id: str, text: str, i: int, *, status: str = "active", rationale: str | None = None,
            prov: Provenance | str = "user", confidence: float = 1.0, tags=()) -> braidlog.GenericDelta:
    payload: dict[str, Any] = {"note_id": note_id, "text": text, "status": status}
    if rationale:
        payload["rationale"] = rationale
    return braidlog.delta("b1", "audit_note_written", payload, provenance=prov,
                          confidence=confidence, ts=T0 + timedelta(minutes=i), tags=tags)


def forgotten(note_id: str, reason: str, i: int) -> braidlog.GenericDelta:
    return braidlog.delta("b1", "audit_note_forgotten", {"note_id": note_id, "reason": reason},
                          ts=T0 + timedelta(minutes=i))


def noise(i: int) -> braidlog.GenericDelta:
    return braidlog.delta("b2", "message", {"text": f"unrelated {i}"}, ts=T0 + timedelta(minutes=i))


@pytest.fixture
def braid(tmp_path):
    """Notes n1 (written, edited, superseded), n2 (written, forgotten), n3 (written late)."""
    b = braidlog.open(tmp_path / "store", projections=[NOTES], checkpoint_every=3)
    b.append(written("n1", "use sqlite", 1, rationale="simplest thing that works",
                     prov=Provenance("user", source="chat")))                       # 1
    b.append(noise(2))                                                               # 2
    b.append(written("n2", "remember milk", 3, prov="assistant", confidence=0.6))    # 3
    b.append(written("n1", "use lmdb", 4, rationale="append-heavy workload, one writer",
                     prov=Provenance("assistant", model="m1"), confidence=0.8, tags=("db",)))  # 4
    for i in range(5, 9):
        b.append(noise(i))                                                           # 5..8
    b.append(forgotten("n2", "bought it already", 9))                                # 9
    b.append(written("n1", "use lmdb", 10, status="superseded",
                     rationale="replaced by the braidlog store"))                    # 10
    b.append(written("n3", "late note", 11))                                         # 11
    yield b
    b.close()


# -------------------------------------------------------------------------------- history

def test_history_lists_every_delta_about_the_entity_in_order(braid):
    h = audit.history(braid, "n1")
    assert [s.seq for s in h.steps] == [1, 4, 10]
    assert h.seq == 11 and h.head == str(braid.head())
    first, second, third = h.steps
    assert first.delta.ts == T0 + timedelta(minutes=1)
    assert first.delta.provenance == Provenance("user", source="chat")
    assert second.delta.confidence == 0.8 and second.delta.provenance.model == "m1"
    assert first.hash == braid.log.hash_at(1).hex()
    assert first.reasons == {"rationale": "simplest thing that works"}
    assert third.reasons == {"rationale": "replaced by the braidlog store"}


def test_history_gives_the_state_after_each_step_and_the_changes(braid):
    h = audit.history(braid, "n1")
    states = [s.states["notes"] for s in h.steps]
    assert states[0] == {"notes": {"text": "use sqlite", "status": "active", "tags": []}}
    assert states[1] == {"notes": {"text": "use lmdb", "status": "active", "tags": ["db"]}}
    assert states[2]["notes"]["status"] == "superseded"
    assert h.steps[0].changes["notes"] == [audit.Change("", "added", new=states[0])]
    assert h.steps[1].changes["notes"] == [
        audit.Change("notes.text", "changed", old="use sqlite", new="use lmdb"),
        audit.Change("notes.tags[0]", "added", new="db"),
    ]
    assert h.steps[2].changes["notes"] == [
        audit.Change("notes.status", "changed", old="active", new="superseded")]
    assert h.current == {"notes": states[2]}


def test_history_of_a_removed_entity_ends_without_a_current_value(braid):
    h = audit.history(braid, "n2")
    assert [s.seq for s in h.steps] == [3, 9]
    assert h.steps[0].states == {"notes": {"notes": {"text": "remember milk", "status": "active",
                                                     "tags": []}}}
    assert h.steps[1].states == {} and h.steps[1].reasons == {"reason": "bought it already"}
    assert h.steps[1].changes == {"notes": [audit.Change("", "removed", old=h.steps[0].states["notes"])]}
    assert h.current == {}


def test_history_as_of_a_view_stops_at_its_seq(braid):
    h = audit.history(braid.at(5), "n1")
    assert [s.seq for s in h.steps] == [1, 4]
    assert h.seq == 5 and h.head == str(braid.at(5).head())
    assert h.current["notes"]["notes"]["text"] == "use lmdb"
    assert h.ts == T0 + timedelta(minutes=5)


def test_history_uses_the_refers_index_never_a_scan(braid, monkeypatch):
    def no_scan(*a, **kw):
        raise AssertionError("history scanned the log")
    monkeypatch.setattr(braid.log, "scan", no_scan)
    h = audit.history(braid, "n1", states=False)
    assert [s.seq for s in h.steps] == [1, 4, 10] and h.steps[0].states == {}


def test_history_states_fold_from_checkpoints_not_from_the_start(braid, monkeypatch):
    braid.checkpoint()
    folded = []
    scan = braid.log.scan

    def counting(start=1, stop=None, **kw):
        for rec in scan(start, stop, **kw):
            folded.append(rec.seq)
            yield rec
    monkeypatch.setattr(braid.log, "scan", counting)
    h = audit.history(braid, "n3")
    assert [s.seq for s in h.steps] == [11]
    assert h.current == {"notes": {"notes": {"text": "late note", "status": "active", "tags": []}}}
    assert 1 not in folded and len(folded) <= 3  # the checkpoint at 9 or 11, then at most 2 deltas


def test_history_includes_the_delta_whose_id_is_the_entity(braid):
    d = braidlog.delta("b1", "message", {"text": "q"}, ts=T0 + timedelta(minutes=20))
    seq = braid.append(d)
    reply = braidlog.delta("b1", "message", {"text": "a"}, ts=T0 + timedelta(minutes=21),
                           refs=Refs(deltas=(d.id,)))
    seq2 = braid.append(reply)
    h = audit.history(braid, d.id)
    assert [s.seq for s in h.steps] == [seq, seq2]
    assert h.current == {}  # no projection keeps messages as entities


def test_history_of_an_unknown_id_is_empty_and_a_bad_id_is_refused(braid):
    h = audit.history(braid, "nobody")
    assert h.steps == [] and h.current == {}
    with pytest.raises(ValidationError, match="entity_id: must be a non-empty string"):
        audit.history(braid, "")


def test_a_module_entity_function_is_the_protocol(tmp_path):
    module = types.ModuleType("audit_hooked_projection")

    def entity(state, entity_id):
        note = state.notes.get(entity_id)
        return None if note is None else {"headline": note.text.upper()}
    module.entity = entity
    hooked_evolve = types.FunctionType(evolve.__code__, evolve.__globals__, "evolve")
    hooked_evolve.__module__ = module.__name__
    sys.modules[module.__name__] = module
    try:
        p = Projection("hooked", 1, NotesState(), hooked_evolve, kinds=NOTES.kinds)
        with braidlog.open(tmp_path / "s", projections=[p]) as b:
            b.append(written("n1", "use lmdb", 1))
            assert audit.history(b, "n1").current == {"hooked": {"headline": "USE LMDB"}}
            assert audit.history(b, "n1", entities={"hooked": lambda s, e: "override"}).current == {
                "hooked": "override"}
            assert audit.entity_value(p, b.state("hooked"), "n9") is None
    finally:
        del sys.modules[module.__name__]


def test_structural_lookup_finds_nested_keys_and_plain_dict_states(tmp_path):
    def nested(state, d):
        state.setdefault("groups", {}).setdefault("g1", {})[d.payload["note_id"]] = d.payload["text"]
        return state

    def flat(state, d):
        state[d.payload["note_id"]] = {"text": d.payload["text"]}
        return state
    ps = [Projection("nested", 1, {}, nested, kinds=NOTES.kinds),
          Projection("flat", 1, {}, flat, kinds=NOTES.kinds)]
    with braidlog.open(tmp_path / "s", projections=ps) as b:
        b.append(written("n1", "x", 1))
        assert audit.history(b, "n1").current == {"nested": {"groups.g1.n1": "x"},
                                                  "flat": {"text": "x"}}


# -------------------------------------------------------------------------------- reasons

def test_reasons_pulls_every_well_known_key_and_resolution_intents():
    payload = {"title": "t", "rationale": "because reasons", "why_changed": "handoff",
               "intent": {"resolution_type": "supersede", "target_decision_ids": ["d1", "d2"],
                          "rationale": "the old one was wrong"},
               "reason": "", "nested": {"deeper": {"why": "deep"}}}
    assert audit.reasons(payload) == {
        "rationale": "because reasons", "why_changed": "handoff",
        "intent.resolution_type": "supersede d1, d2", "intent.rationale": "the old one was wrong",
        "nested.deeper.why": "deep",
    }
    assert audit.reasons({"resolution_rationale": "simpler", "archive_reason": "stale",
                          "treason": "no", "why_not": "no"}) == {
        "resolution_rationale": "simpler", "archive_reason": "stale"}
    assert audit.reasons({"text": "no reason here"}) == {}


# -------------------------------------------------------------------------------- changes

def test_changes_are_field_by_field_with_minimal_list_edits():
    old = {"a": 1, "b": {"c": 2, "d": 3}, "revs": [{"v": 1}, {"v": 2}], "gone": True}
    new = {"a": 1, "b": {"c": 5, "d": 3}, "revs": [{"v": 0}, {"v": 1}, {"v": 2}], "new": "x"}
    assert audit.changes(old, new) == [
        audit.Change("b.c", "changed", old=2, new=5),
        audit.Change("revs[0]", "added", new={"v": 0}),
        audit.Change("gone", "removed", old=True),
        audit.Change("new", "added", new="x"),
    ]
    assert audit.changes([{"s": "a"}, 2], [{"s": "b"}, 2]) == [
        audit.Change("[0].s", "changed", old="a", new="b")]
    assert audit.changes(1, 1) == []
    assert audit.changes("x", 2) == [audit.Change("", "changed", old="x", new=2)]


# ----------------------------------------------------------------------------------- diff

def test_diff_reports_added_changed_superseded_removed_and_who(braid):
    d = audit.diff(braid, 3, 11)
    assert (d.a, d.b) == (3, 11)
    assert d.a_head == str(braid.at(3).head()) and d.b_head == str(braid.head())
    pd = d.projections["notes"]
    assert [(e.key, e.status) for e in pd.added] == [("n3", "added")]
    assert pd.added[0].new == {"text": "late note", "status": "active", "tags": []}
    assert [(e.key, e.status) for e in pd.superseded] == [("n1", "superseded")]
    assert pd.superseded[0].changes == [
        audit.Change("text", "changed", old="use sqlite", new="use lmdb"),
        audit.Change("status", "changed", old="active", new="superseded"),
        audit.Change("tags[0]", "added", new="db"),
    ]
    assert [r.seq for r in pd.superseded[0].deltas] == [4, 10]
    assert pd.superseded[0].deltas[0].reasons == {"rationale": "append-heavy workload, one writer"}
    assert [(e.key, e.status, e.old["text"]) for e in pd.removed] == [("n2", "removed", "remember milk")]
    assert [r.seq for r in pd.removed[0].deltas] == [9]
    assert pd.fields == [audit.Change("writes", "changed", old=2, new=5)]
    assert [r.seq for r in pd.deltas] == [4, 9, 10, 11]


def test_diff_of_a_plain_change_and_of_nothing(braid):
    pd = audit.diff(braid, 1, 4).projections["notes"]
    assert [(e.key, e.status) for e in pd.changed] == [("n1", "changed")]
    assert [(e.key, e.status) for e in pd.added] == [("n2", "added")]
    assert audit.diff(braid, 5, 8).projections["notes"].empty


def test_diff_takes_seqs_delta_ids_and_times(braid):
    id4 = braid.log.read(4).delta.id
    by_id = audit.diff(braid, id4, T0 + timedelta(minutes=9, seconds=30))
    assert (by_id.a, by_id.b) == (4, 9)
    assert [e.key for e in by_id.projections["notes"].removed] == ["n2"]


def test_diff_refuses_points_out_of_order_or_unknown(braid):
    with pytest.raises(ValidationError, match=r"b: must be at or after a \(a is seq 9, b is seq 2\)"):
        audit.diff(braid, 9, 2)
    with pytest.raises(ValidationError, match="seq 99 is outside the log"):
        audit.diff(braid, 1, 99)
    with pytest.raises(ValidationError, match="no projection 'nope'"):
        audit.diff(braid, 1, 2, projections=["nope"])


def test_diff_finds_responsible_deltas_for_keys_the_index_does_not_hold(tmp_path):
    def by_text(state, d):
        state[d.payload["text"]] = d.payload["note_id"]
        return state
    p = Projection("by_text", 1, {}, by_text, kinds=NOTES.kinds)
    with braidlog.open(tmp_path / "s", projections=[p]) as b:
        b.append(written("n1", "alpha", 1))
        b.append(written("n2", "beta", 2))
        pd = audit.diff(b, 1, 2).projections["by_text"]
        assert [(e.key, [r.seq for r in e.deltas]) for e in pd.added] == [("beta", [2])]


def test_diff_finds_responsible_deltas_a_projection_reads_by_provenance(tmp_path):
    """The fallback looks where the projection reads: here also dream deltas of any kind."""
    def by_text(state, d):
        state[d.payload["text"]] = d.kind
        return state
    p = Projection("by_text", 1, {}, by_text, kinds=NOTES.kinds, provenances={"dream"})
    with braidlog.open(tmp_path / "s", projections=[p]) as b:
        b.append(written("n1", "alpha", 1))
        b.append(braidlog.delta("b1", "observation", {"text": "dreamt"}, provenance="dream", ts=T0))
        b.append(braidlog.delta("b1", "observation", {"text": "seen"}, ts=T0))
        pd = audit.diff(b, 1, 3).projections["by_text"]
        assert [(e.key, [r.seq for r in e.deltas]) for e in pd.added] == [("dreamt", [2])]


# -------------------------------------------------------------------------------- explain

def test_explain_tells_the_value_the_chain_and_the_reasons(braid):
    text = audit.explain(braid, "n1", at=5)
    assert text.splitlines()[0] == (f"n1 as of seq 5, {(T0 + timedelta(minutes=5)).isoformat()} "
                                    f"(head {braid.at(5).head()})")
    assert 'notes: {"notes":{"status":"active","tags":["db"],"text":"use lmdb"}}' in text
    assert "how it got there: 2 delta(s), seq 1..4" in text
    assert "why (rationale): simplest thing that works" in text
    assert "notes.text: use sqlite -> use lmdb" in text
    assert "by assistant (model=m1)  confidence 0.80" in text
    assert "written by: assistant (model=m1); user (source=chat)" in text
    assert f"braidlog verify --against {braid.at(5).head()}" in text
    assert "superseded" not in text


def test_explain_says_when_nothing_refers_to_the_entity(braid):
    assert "no delta refers to 'n3' up to seq 10" in audit.explain(braid, "n3", at=10)


# ------------------------------------------------------------------ the real projections

FAMILIES = ("decisions", "beads", "knots", "episodes", "trust", "fields", "memories")
PIECES = ("braid", "episodes", "decisions", "fields", "memories")


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """Every projection family that imports, with every demo piece written into one store."""
    modules = []
    for family in FAMILIES:
        try:
            modules.append(importlib.import_module(f"braidlog.projections.{family}"))
        except ImportError:
            continue
    if not modules:
        pytest.skip("no projection family is importable yet")
    projections = [p for m in modules for p in m.PROJECTIONS]
    b = braidlog.open(tmp_path_factory.mktemp("real") / "store", projections=projections,
                      checkpoint_every=10)
    start, pieces = T0, 0
    for piece in PIECES:
        try:
            module = importlib.import_module(f"braidlog.projections.demos.{piece}")
        except ImportError:
            continue
        names = set(b.projections)
        try:
            module.write(b, start)
        except ValidationError as e:
            if "no projection" in str(e) and not names >= {p.name for p in projections}:
                continue
            raise
        start += timedelta(minutes=15)
        pieces += 1
    if not pieces:
        pytest.skip("no demo piece is importable yet")
    yield b
    b.close()


def test_diff_and_history_cover_every_real_projection(real):
    head = real.head().seq
    d = audit.diff(real, 0, head)
    assert set(d.projections) == set(real.projections)
    found = 0
    for name, pd in d.projections.items():
        for ec in pd.added:
            assert ec.status == "added" and ec.old is None
        indexed = [e for e in pd.added if next(real.log.scan_refs(e.key), None) is not None]
        if not indexed:
            continue
        # the indexed entity that most deltas changed: its history must show it here
        ec = max(indexed, key=lambda e: len(e.deltas))
        h = audit.history(real, ec.key)
        assert h.steps, (name, ec.key)
        assert [s.seq for s in h.steps] == sorted(s.seq for s in h.steps)
        assert {r.seq for r in ec.deltas} <= {s.seq for s in h.steps}
        assert name in h.current, (name, ec.key, h.current)
        found += 1
    assert found >= 1


def test_real_history_states_equal_fresh_folds(real):
    d = audit.diff(real, 0, real.head().seq)
    for name, pd in d.projections.items():
        candidates = [e for e in pd.added if next(real.log.scan_refs(e.key), None) is not None]
        if not candidates:
            continue
        ec = candidates[0]
        h = audit.history(real, ec.key, projections=[name])
        for step in h.steps:
            fresh = real.projection(name).fold(r.delta for r in real.log.scan(1, step.seq + 1))
            expected = audit.entity_value(real.projection(name), fresh, ec.key)
            assert step.states.get(name) == expected, (name, ec.key, step.seq)


def test_history_of_a_delta_id_in_lower_case_finds_what_refers_to_it(tmp_path):
    from braidlog import Refs, audit

    with braidlog.open(tmp_path / "s", projections=[]) as b:
        first = braidlog.delta("b", "message", {"text": "decide"})
        b.append(first)
        b.append(braidlog.delta("b", "message", {"text": "cites it"}, refs=Refs(deltas=(first.id,))))
        upper = [s.seq for s in audit.history(b, first.id).steps]
        assert upper == [1, 2]
        assert [s.seq for s in audit.history(b, first.id.lower()).steps] == upper
