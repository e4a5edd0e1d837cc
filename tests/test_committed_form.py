"""The committed form byte for byte (docs/format.md#the-committed-form), decoded by braidlog and
by the standalone verifier alike."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braidlog import DecodeError
from braidlog.delta import BeadRef, GenericDelta, Provenance, Refs, committed_form, decode_entry, encode
from braidlog.proofs import verify as v

T = datetime(2026, 1, 1, tzinfo=UTC)
DELTA = GenericDelta(id="01ARZ3NDEKTSV4RRFFQ69G5FAV", braid_id="b", kind="tick", ts=T,
                     provenance=Provenance("user"), confidence=1.0, payload={})


def test_the_documented_example_byte_for_byte():
    data = encode(DELTA)
    assert len(data) == 112
    commitment = hashlib.sha256(bytes(16) + data).digest()
    want = bytes.fromhex(
        "88" "a3736571" "01"
        "a26964" "ba" + b"01ARZ3NDEKTSV4RRFFQ69G5FAV".hex()
        + "a8" "62726169645f6964" "a162"
        "a46b696e64" "a47469636b"
        "a27473" "cf0006474846204000"
        "aa70726f76656e616e6365" "81a46b696e64a475736572"
        "aa636f6e666964656e6365" "cb3ff0000000000000"
        "aa636f6d6d69746d656e74" "c420") + commitment
    assert committed_form(1, DELTA, bytes(16), data) == want


def test_optional_fields_and_the_order_of_keys():
    d = GenericDelta(id="01ARZ3NDEKTSV4RRFFQ69G5FAV", braid_id="b", kind="message", ts=T,
                     provenance=Provenance("tool", tool="grep", model="m"), confidence=0.5,
                     payload={"text": "hotel"}, tags=("a", "b"),
                     refs=Refs(beads=(BeadRef("bead-1", "subject"),), deltas=("x",)))
    entry = committed_form(2**40, d, b"s" * 16, encode(d))
    read = v.read_entry(entry)
    assert list(read) == ["seq", "id", "braid_id", "kind", "ts", "provenance", "confidence", "refs",
                          "tags", "commitment"]
    assert read["seq"] == 2**40 and read["ts"] == 1767225600000000
    assert read["provenance"] == {"kind": "tool", "model": "m", "tool": "grep"}
    assert read["refs"] == {"beads": [{"bead_id": "bead-1", "role": "subject"}], "deltas": ["x"]}
    assert read["tags"] == ["a", "b"] and read["confidence"] == 0.5
    assert b"hotel" not in entry  # the payload is in it only through the commitment
    e = decode_entry(entry)
    assert (e.seq, e.tags, e.refs, e.commitment) == (2**40, ("a", "b"), d.refs, read["commitment"])
    v.check_commitment(entry, b"s" * 16, encode(d))
    with pytest.raises(v.VerificationError, match="do not give the committed form's commitment"):
        v.check_commitment(entry, b"t" * 16, encode(d))


def test_bytes_that_are_not_a_committed_form_are_refused():
    entry = committed_form(1, DELTA, bytes(16), encode(DELTA))
    for bad in (b"", entry[:-1], entry + b"\x00", b"\x90"):
        with pytest.raises(DecodeError):
            decode_entry(bad)
        with pytest.raises(v.VerificationError):
            v.read_entry(bad)


text = st.text(max_size=130)
envelopes = st.builds(
    GenericDelta, id=text, braid_id=text, kind=text,
    ts=st.datetimes(timezones=st.just(UTC)),
    provenance=st.builds(Provenance, kind=st.sampled_from(["user", "tool", "dream", "system"]),
                         source=st.none() | text, model=st.none() | text, tool=st.none() | text,
                         episode_id=st.none() | text, knot_id=st.none() | text),
    confidence=st.floats(0, 1),
    refs=st.none() | st.builds(Refs, knots=st.lists(text, max_size=3).map(tuple),
                               deltas=st.lists(text, max_size=3).map(tuple),
                               beads=st.lists(st.builds(BeadRef, bead_id=text),
                                              max_size=2).map(tuple)),
    tags=st.lists(text, max_size=3).map(tuple), payload=st.just({}))


@settings(max_examples=300, deadline=None)
@given(d=envelopes)
def test_a_committed_form_is_never_much_longer_than_its_delta(d):
    """check_entry_size builds the form only when the delta's bytes are long: the bound it
    relies on holds for any envelope, at the longest seq, with an empty payload."""
    from braidlog.delta import _ENTRY_OVER_DATA
    assert len(committed_form(2**64 - 1, d, bytes(16), b"")) <= len(encode(d)) + _ENTRY_OVER_DATA


@settings(max_examples=300, deadline=None)
@given(ts=st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                       timezones=st.timezones()))
def test_ts_micros_is_the_exact_count_of_microseconds_since_the_epoch(ts):
    from datetime import timedelta

    from braidlog.delta import EPOCH, ts_micros
    assert ts_micros(ts) == (ts - EPOCH) // timedelta(microseconds=1)
