"""KindSpec.reader: a fold's payload read equals braidlog.typed, faster."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from msgspec import Struct

import braidlog
from braidlog import GenericDelta, Provenance, Registry
from braidlog.projections import beads as B
from braidlog.projections import decisions as D
from braidlog.projections import fields as F

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _delta(kind: str, payload: dict, n: int = 1) -> GenericDelta:
    return GenericDelta(id=f"01J{n:023d}", braid_id="b", kind=kind, ts=T0,
                        provenance=Provenance("assistant"), confidence=1.0, payload=payload)


RECORDED = {"decision_id": "dec-1", "title": "Use LMDB", "target": "storage/log",
            "rationale": "One writer, many readers, no server.", "keywords": ["lmdb"]}
REVISED = {"topic_id": "t1", "field": "status", "field_type": "string", "value": "open",
           "provenance": "llm", "salience": 3}
VERSIONED = {"bead_id": "bead-1", "bead_version_id": "bead-1-v1", "bead_type": "memory_bead",
             "version": 1, "name": "n", "content": {"text": "x"}}


@pytest.mark.parametrize("kind, payload", [
    ("decision_recorded", RECORDED), ("field_revised", REVISED), ("bead_version", VERSIONED),
])
def test_reader_equals_typed_with_and_without_a_version_key(kind, payload):
    read = braidlog.REGISTRY[kind].reader()
    for p in (payload, {**payload, "_v": 1}):
        d = _delta(kind, p)
        assert read(d) == braidlog.typed(d)
        assert type(read(d)) is type(braidlog.typed(d))
    # salience 3 is converted to the schema's float, as typed does
    if kind == "field_revised":
        assert read(_delta(kind, payload)).salience == 3.0


def test_a_payload_of_another_schema_is_refused_by_typed_and_by_the_reader():
    d = _delta("decision_recorded", {**RECORDED, "title": ""})
    with pytest.raises(braidlog.ValidationError, match="title"):  # the public call: braidlog's error
        braidlog.typed(d)
    with pytest.raises(msgspec.ValidationError):  # the folds' fast path, whose callers catch it
        braidlog.REGISTRY["decision_recorded"].reader()(d)


def test_reader_upcasts_a_kind_past_version_1():
    class V1(Struct, forbid_unknown_fields=True):
        name: str

    class V2(Struct, forbid_unknown_fields=True):
        first: str
        last: str = ""

    reg = Registry()
    reg.declare("person", V1, owner="test")
    spec = reg.declare("person", V2, owner="test", version=2, previous={1: V1},
                       upcasters={1: lambda b: {"first": b["name"]}})
    read = spec.reader()
    assert read(_delta("person", {"name": "Ada"})) == V2(first="Ada")           # v1, upcast
    assert read(_delta("person", {"first": "Ada", "last": "L", "_v": 2})) == V2("Ada", "L")


def test_folds_read_a_payload_stamped_with_version_1_as_one_without():
    """A writer may stamp ``"_v": 1`` itself; the fold's fast path must not skip it."""
    plain = [_delta("decision_recorded", RECORDED, 1), _delta("field_revised", REVISED, 2),
             _delta("bead_version", VERSIONED, 3)]
    stamped = [_delta(d.kind, {**d.payload, "_v": 1}, n) for n, d in enumerate(plain, 1)]
    for projection in (D.DECIDER, F.PROJECTIONS[0], B.PROJECTIONS[0]):
        assert projection.fold(stamped) == projection.fold(plain), projection.name
    state = D.DECIDER.fold(stamped)
    assert state.decisions["dec-1"].keywords == ["lmdb"]
    assert state.active == {"default": {"storage/log": ["dec-1"]}}
    assert F.PROJECTIONS[0].fold(stamped).topics["t1"].fields["status"].salience == 3.0
    assert B.PROJECTIONS[0].fold(stamped).versions["bead-1-v1"].seq == 3


def test_bead_folds_skip_a_payload_they_cannot_read():
    """bead_write is a core kind: a log may hold one written before beads claimed it."""
    odd = _delta("bead_write", {"bead_id": "bead-1", "note": "no version id"}, 9)
    state = B.PROJECTIONS[0].fold([_delta("bead_version", VERSIONED, 1), odd])
    assert state.beads["bead-1"].activations == []
