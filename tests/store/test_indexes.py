"""The Indexes contract: every braid's head, deltas per key of an index, the vector spaces.
Run against MemoryLog and LmdbLog."""

from __future__ import annotations

import pytest

from braidlog import Refs, ValidationError, Vector
from braidlog.store import Indexes
from tests.support import make_delta

ROLE = Indexes  # the ``log`` fixture (tests/store/conftest.py) checks each store implements it


def test_vectors_keep_one_dimension_per_space(log):
    assert log.spaces() == {}
    log.append(make_delta(0, vector=Vector.of([1.0, 2.0, 3.0])))
    with pytest.raises(ValidationError, match="dimension 3"):
        log.append(make_delta(1, vector=Vector.of([1.0, 2.0])))
    log.append(make_delta(2, vector=Vector.of([1.0, 2.0], space="small")))
    with pytest.raises(ValidationError, match="finite"):
        log.append(make_delta(3, vector=Vector.of([1.0, float("nan"), 0.0])))
    with pytest.raises(ValidationError, match="finite"):
        log.append(make_delta(4, vector=Vector.of([float("inf"), 0.0, 0.0])))
    assert log.head().seq == 2
    assert log.spaces() == {"default": 3, "small": 2}


def test_braids_and_counts_follow_the_indexes(log):
    assert log.braids() == {} and log.counts("kind") == {} == log.counts("braid")
    log.append_batch([make_delta(0, braid="a"), make_delta(1, braid="b", kind="tick", payload={}),
                      make_delta(2, braid="a"), make_delta(3, braid="a", kind="tick", payload={})])
    assert log.braids() == {"a": (3, 4), "b": (1, 2)}
    assert log.counts("kind") == {"message": 2, "tick": 2}
    assert log.counts("braid") == {"a": 3, "b": 1}
    assert log.counts("refs") == {}
    first = log.read(1).delta.id
    log.append(make_delta(4, braid="b", refs=Refs(deltas=(first,))))
    assert log.counts("refs") == {first: 1}
    with pytest.raises(ValidationError, match="index"):
        log.counts("ids")
