"""A replica carries each vector space's embedder declaration: it is a delta of the log, shipped
like any other, so a replica knows which model wrote its vectors and refuses a query through
another, naming both."""

from __future__ import annotations

import pytest

pytest.importorskip("nats")
pytest.importorskip("braidlog.recall")

import braidlog
from braidlog.recall import Recall, append_embedded, recorded_embedder
from braidlog.replication import Replica, Shipper


def test_a_replica_knows_the_embedder_of_each_space(stores, open_stream):
    writer = stores("w")
    append_embedded(writer, [braidlog.delta("me", "observation", {"text": t})
                             for t in ("she likes oat milk flat whites", "allergic to peanuts")])
    append_embedded(writer, [braidlog.delta("me", "observation", {"text": "window seat"})], "hashing:64",
                    space="small")
    stream = open_stream()
    Shipper(writer, stream).ship(timeout=20)
    replica = stores("r")
    assert Replica(replica, stream).catch_up(timeout=20) == writer.head()
    for space in ("default", "small"):
        assert recorded_embedder(replica, space) == recorded_embedder(writer, space) is not None
    assert Recall(replica, "small", directory=False).recall("window", 1)[0].seq == 5  # the recorded one
    with pytest.raises(braidlog.ValidationError, match="holds vectors of hashing-v1-64 .* is another embedder"):
        Recall(replica, "small", embedder="hashing:128", directory=False).recall("window")
