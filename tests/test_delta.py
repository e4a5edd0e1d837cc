"""Every envelope rule gets a ValidationError naming the field and the rule; nothing is written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braidlog
from braidlog import BeadRef, GenericDelta, Provenance, Refs, ValidationError, Vector
from braidlog.delta import decode, encode, from_json, to_json, validate
from braidlog.kinds import Registry
from tests.support import T0, make_delta

GOOD = make_delta(0)


def _nested(depth):
    """A JSON value whose arrays nest ``depth`` deep."""
    value = 1
    for _ in range(depth):
        value = [value]
    return value


def bad(**changes):
    return msgspec.structs.replace(GOOD, **changes)


@pytest.mark.parametrize("changes, field, rule", [
    ({"kind": "no_such_kind"}, "kind", "unknown kind 'no_such_kind'"),
    ({"kind": ""}, "kind", "length >= 1"),
    ({"provenance": Provenance("robot")}, "provenance.kind",
     "must be one of user, assistant, tool, perception, system, dream"),
    ({"confidence": 1.01}, "confidence", "must be a number in [0, 1]"),
    ({"confidence": -0.1}, "confidence", "must be a number in [0, 1]"),
    ({"ts": datetime(2026, 1, 1)}, "ts", "must be a timezone-aware datetime"),
    ({"payload": {"text": ""}}, "payload.text", "length >= 1"),
    ({"payload": {"txt": "typo"}}, "payload", "unknown field `txt`"),
    ({"payload": {"text": 5}}, "payload.text", "Expected `str`, got `int`"),
    ({"id": "not-a-ulid"}, "id", "must be a ULID"),
    ({"id": "01ARZ3NDEKTSV4RRFFQ69G5FAU!"}, "id", "must be a ULID"),
    ({"id": "81ARZ3NDEKTSV4RRFFQ69G5FAV"}, "id", "must be a ULID"),
    ({"braid_id": ""}, "braid_id", "must be a non-empty string"),
    ({"braid_id": "x" * 121}, "braid_id", "at most 120 characters"),
    ({"refs": Refs(beads=(BeadRef("", "used"),))}, "refs.beads[0].bead_id", "length >= 1"),
    ({"refs": Refs(knots=("",))}, "refs.knots[0]", "length >= 1"),
    ({"tags": ("",)}, "tags[0]", "length >= 1"),
    ({"payload": {"text": object()}}, "payload.text", "must be a JSON value, not an object"),
    ({"kind": "observation", "payload": {"text": "t", "data": {"blob": b"\x00"}}},
     "payload.data.blob", "must be a JSON value, not bytes (store bytes as a base64 string)"),
    ({"payload": {"text": b"\x00"}}, "payload.text", "must be a JSON value, not bytes"),
    ({"kind": "observation", "payload": {"text": "t", "data": {"at": T0}}}, "payload.data.at",
     "not a datetime (store times as ISO 8601 strings)"),
    ({"kind": "observation", "payload": {"text": "t", "data": {"x": [1.0, float("nan")]}}},
     "payload.data.x[1]", "must be a finite number (JSON has no nan)"),
    ({"kind": "observation", "payload": {"text": "t", "data": {"x": float("-inf")}}},
     "payload.data.x", "must be a finite number (JSON has no -inf)"),
    ({"kind": "observation", "payload": {"text": "t", "data": {"x": _nested(15)}}},
     "payload.data.x" + "[0]" * 14, "nests objects and arrays more than 16 levels deep"),
    ({"vector": Vector(b"\x00\x00\x80\x7f")}, "vector.data", "must be finite"),
    ({"vector": Vector(b"\x00\x00\x80")}, "vector.data", "multiple of 4"),
])
def test_each_envelope_rule(log, changes, field, rule):
    with pytest.raises(ValidationError) as e:
        log.append(bad(**changes))
    assert e.value.field == field
    assert rule in e.value.rule
    assert str(e.value).startswith(f"delta 0: {field}: ")
    assert log.head().seq == 0


def test_payloads_nest_up_to_the_limit_and_store_json_as_json(log):
    # the payload object is level 1, "data" level 2, and x's arrays levels 3 to 16
    d = bad(kind="observation", payload={"text": "t", "data": {"x": _nested(14), "n": None}})
    log.append(d)
    assert log.read(1).delta.payload == {"text": "t", "data": {"x": _nested(14), "n": None}}
    assert from_json(to_json(log.read(1).delta)) == log.read(1).delta


def test_a_non_delta_is_refused(log):
    with pytest.raises(ValidationError, match="expected a GenericDelta, got dict"):
        log.append({"kind": "message"})
    assert log.head().seq == 0


def test_validation_error_is_a_value_error():
    assert issubclass(ValidationError, ValueError)


def test_id_is_generated_when_absent():
    a, b = make_delta(0), make_delta(0)
    assert a.id != b.id and len(a.id) == 26
    validate(a)


def test_canonical_bytes_do_not_depend_on_payload_key_order():
    a = make_delta(0, kind="observation", payload={"text": "t", "data": {"x": 1, "y": 2}})
    b = msgspec.structs.replace(a, payload={"data": {"y": 2, "x": 1}, "text": "t"})
    assert validate(a)[1] == validate(b)[1]


def test_encode_decode_round_trip_and_json_edges():
    d = make_delta(0, refs=Refs(beads=(BeadRef("b", "used", "v"),), deltas=(GOOD.id,)),
                   tags=("x",), vector=Vector.of([0.5, 1.5]))
    assert decode(encode(d)) == d
    assert from_json(to_json(d)) == d


def test_json_with_a_naive_time_is_refused_naming_ts():
    obj = msgspec.json.decode(to_json(GOOD))
    obj["ts"] = obj["ts"].rstrip("Z")
    text = msgspec.json.encode(obj)
    with pytest.raises(ValidationError) as e:
        from_json(text, index=3)
    assert e.value.field == "ts" and e.value.index == 3


def test_decode_error_for_bytes_that_are_not_a_delta():
    with pytest.raises(braidlog.DecodeError):
        decode(b"\x93\x01\x02")


def test_delta_builder_defaults():
    d = braidlog.delta("b", "message", {"text": "hi"}, provenance="assistant")
    assert d.provenance == Provenance("assistant") and d.ts.tzinfo is not None
    assert validate(d)[0].ts.utcoffset() == timedelta(0)


class V1(msgspec.Struct, forbid_unknown_fields=True):
    name: str


class V2(msgspec.Struct, forbid_unknown_fields=True):
    first: str
    last: str = ""


def upcast(p):
    first, _, last = p["name"].partition(" ")
    return {"first": first, "last": last}


def test_old_payloads_are_upcast_on_read_and_never_rewritten(tmp_path):
    reg = Registry()
    reg.declare("person", V1, owner="test")
    log = braidlog.LmdbLog(tmp_path / "s", registry=reg)
    old = GenericDelta(braid_id="b", kind="person", ts=T0, provenance=Provenance("user"),
                       confidence=1.0, payload={"name": "Ada Lovelace"})
    log.append(old)
    stored_before = log.body(1)
    reg.declare("person", V2, owner="test", version=2, previous={1: V1}, upcasters={1: upcast})
    assert reg["person"].typed(log.read(1).delta.payload) == V2("Ada", "Lovelace")
    new = msgspec.structs.replace(old, id=braidlog.new_id(), payload={"first": "Grace"})
    log.append(new)
    assert log.read(2).delta.payload == {"first": "Grace", "_v": 2}
    assert braidlog.typed(log.read(2).delta, reg) == V2("Grace")
    assert log.body(1) == stored_before
    with pytest.raises(ValidationError, match=r"payload._v"):
        log.append(msgspec.structs.replace(old, id=braidlog.new_id(), payload={"name": "x", "_v": 7}))
    log.close()


def test_registry_refuses_a_second_owner_and_bad_versions():
    reg = Registry()
    reg.declare("thing", V1, owner="a")
    with pytest.raises(ValidationError, match="already owned by 'a'"):
        reg.declare("thing", V1, owner="b")
    with pytest.raises(ValidationError, match="needs schemas and upcasters"):
        reg.declare("other", V2, owner="a", version=2)
    with pytest.raises(ValidationError, match="letters, digits"):
        reg.declare("bad kind!", V1, owner="a")


def test_minimum_kinds_are_declared():
    for kind in braidlog.MINIMUM_KINDS:
        assert kind in braidlog.REGISTRY


def test_the_strict_mirror_has_exactly_the_envelope_fields():
    """Every field a delta is written with; ``erased`` only reads set, so no delta written or
    imported can carry it."""
    from braidlog.delta import _StrictDelta

    assert _StrictDelta.__struct_fields__ + ("erased",) == GenericDelta.__struct_fields__
    assert _StrictDelta.__struct_defaults__[-3:] == GenericDelta.__struct_defaults__[-4:-1]


def test_a_delta_marked_erased_cannot_be_written():
    from braidlog.delta import Erasure

    d = braidlog.delta("b", "message", {"text": "hi"})
    marked = msgspec.structs.replace(d, erased=Erasure(3, bytes(32)))
    with pytest.raises(braidlog.ValidationError, match="erased"):
        braidlog.MemoryLog().append(marked)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(data=st.dictionaries(st.text(max_size=5), _json, max_size=4),
       confidence=st.sampled_from([0, 1, 0.5, 1.0]),
       tz=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]))
def test_the_stored_delta_is_what_reading_its_bytes_gives(data, confidence, tz):
    """validate builds the stored delta from the strict decode; it must be, type for type, what
    a plain decode of the delta's bytes gives, or a record folded live would differ from the
    same record read back (1, 1.0 and True are equal in Python: their JSON is not)."""
    d = bad(kind="observation", payload={"text": "t", "data": data}, confidence=confidence,
            ts=T0.astimezone(tz), tags=("a", "b"), refs=Refs(deltas=(GOOD.id,)))
    stored, data_bytes = validate(d)
    read_back = decode(encode(d))
    assert stored == read_back and to_json(stored) == to_json(read_back)
    assert type(stored.confidence) is float and stored.ts.utcoffset() == timedelta(0)
    assert decode(data_bytes) == stored


def _object_nested(levels, leaf):
    """A payload of ``levels`` levels (the payload itself is level 1): ``data`` an object, then
    arrays and objects in turn, ``leaf`` in the deepest."""
    if levels == 1:
        return {"text": "t"}
    value = leaf
    for j in reversed(range(levels - 1)):
        value = {"k": value} if j % 2 == 0 else [value, 1]
    return {"text": "t", "data": value}


def _leaf_path(levels):
    return "payload.data" + "".join(".k" if j % 2 == 0 else "[0]" for j in range(levels - 1))


@pytest.mark.parametrize("levels", range(1, 17))
def test_every_depth_up_to_the_limit_is_stored_alike_on_both_paths(levels):
    """The first levels are checked by the C decoder, deeper ones by a walk: a payload is
    accepted, stored and read back the same way whichever checks it, by validate and from_json."""
    d = bad(kind="observation", payload=_object_nested(levels, "leaf"))
    stored, data = validate(d)
    assert decode(data) == stored == decode(encode(d))
    assert from_json(to_json(d)) == stored


@pytest.mark.parametrize("levels", [17, 18, 40, 10_000])
def test_a_payload_deeper_than_the_limit_is_refused_naming_where(levels):
    d = bad(kind="observation", payload=_object_nested(levels - 1, [1]))
    with pytest.raises(ValidationError) as e:
        validate(d)
    assert (e.value.field, e.value.rule) == (  # the value at level 17
        _leaf_path(16), "nests objects and arrays more than 16 levels deep (the payload itself is level 1)")
    text = to_json(bad(kind="observation", payload={"text": "t", "data": {"k": "LEAF"}}))
    deep = text.replace(b'"LEAF"', b"[" * levels + b"]" * levels)
    with pytest.raises(ValidationError, match="more than 16 levels deep"):
        from_json(deep)


@pytest.mark.parametrize("levels", [3, 7, 12])
@pytest.mark.parametrize("leaf, rule", [
    (float("nan"), "must be a finite number (JSON has no nan)"),
    (b"\x00", "must be a JSON value, not bytes (store bytes as a base64 string)"),
    (T0, "must be a JSON value, not a datetime (store times as ISO 8601 strings)"),
    ({1: "x"}, "object keys must be strings, not int (1)"),
])
def test_a_non_json_value_is_named_at_any_depth(levels, leaf, rule):
    payload = _object_nested(levels, leaf)
    path = _leaf_path(levels)
    with pytest.raises(ValidationError) as e:
        validate(bad(kind="observation", payload=payload))
    assert (e.value.field, e.value.rule) == (path, rule)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(data=st.dictionaries(st.text(max_size=3), _json, max_size=4),
       confidence=st.sampled_from([0, 1, 0.5, 1.0]),
       tags=st.sampled_from([(), [], ("a",), ["a", "b"]]),
       refs=st.sampled_from([None, Refs(), Refs(knots=["k"]), Refs(knots=("k",)),
                             Refs(beads=(BeadRef("b", "used"),)), Refs(deltas=[])]),
       hours=st.sampled_from([0, 2, -5]))
def test_the_bytes_validate_returns_are_those_of_the_stored_delta(data, confidence, tags, refs, hours):
    """Whether validate re-encodes the stored delta or keeps the bytes it decoded, they are the
    stored delta's canonical bytes: reading it back and appending it again is a retry."""
    d = make_delta(0, kind="observation", payload={"text": "t", "data": data})
    d = msgspec.structs.replace(d, confidence=confidence, tags=tags, refs=refs,
                                ts=d.ts.astimezone(timezone(timedelta(hours=hours))))
    stored, data_ = validate(d)
    assert data_ == encode(stored)
    assert validate(decode(data_))[1] == data_
