"""One entity as of any point: audit.entity_at equals the entity in a whole fold, and for a
local projection it folds only that entity's deltas."""

from __future__ import annotations

import json
from datetime import timedelta

import msgspec
import pytest

import braidlog
from braidlog import audit
from braidlog.cli import main
from braidlog.delta import referenced_ids
from tests.support import T0
from tests.support.mixed_log import build


@pytest.fixture(scope="module", params=[7, 3])
def mixed(request, tmp_path_factory):
    """The log of every kind the shipped projections read, two seeds."""
    return build(tmp_path_factory.mktemp("mixed") / "s", seed=request.param, every=40, noise=150)


def test_every_local_projection_folds_an_entity_alone_to_the_same_value(mixed):
    with braidlog.open(mixed.path, readonly=True) as b:
        head = b.head().seq
        ids = set()
        for r in b.log.scan():
            ids |= referenced_ids(r.delta, b.log.registry) | {r.delta.id}
        local = [p for p in b.projections.values() if p.local]
        assert {p.name for p in local} >= {"beads", "knots", "trust", "fields"}
        for seq in (head // 3, head // 2, head):
            view = b.at(seq)
            for p in b.projections.values():
                full = b.state_at(p.name, seq)
                seen = 0
                for e in sorted(ids):
                    want = audit.entity_value(p, full, e)
                    assert audit.entity_at(view, p.name, e) == want, (p.name, seq, e)
                    seen += want is not None
                assert seen or seq < head, p.name  # every projection holds entities at the head


class Counts(msgspec.Struct):
    by: dict[str, int] = {}


CALLS = []


def count(state, delta):
    CALLS.append(delta.id)
    for key in delta.refs.deltas:
        state.by[key] = state.by.get(key, 0) + 1
    return state


COUNTS = braidlog.Projection("counts", 1, Counts(), count, kinds=frozenset({"message"}),
                             local=True)


def test_a_hot_entity_starts_from_the_nearest_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setattr(audit, "LOCAL_FOLD_MAX", 10)
    with braidlog.open(tmp_path / "s", projections=[COUNTS], checkpoint_every=25) as b:
        deltas = [braidlog.delta("b", "message", {"text": str(i)}, ts=T0 + timedelta(seconds=i),
                                 refs=braidlog.Refs(deltas=("hot",) if i % 2 else ("cold",)))
                  for i in range(120)]
        for i, d in enumerate(deltas, 1):
            b.append(d)
            if i == 100:
                assert b.checkpoint() == 100
        CALLS.clear()
        assert audit.entity_at(b.at(101), "counts", "hot") == {"by": 50}
        assert len(CALLS) <= 25  # the deltas after the checkpoint at 100, not the 50 before
        CALLS.clear()
        assert audit.entity_at(b, "counts", "cold") == {"by": 60}
        assert audit.entity_at(b.at(0), "counts", "hot") is None
        assert audit.entity_at(b.at(2), "counts", "hot") == {"by": 1}


def test_a_projection_not_declared_local_is_folded_whole(tmp_path):
    whole = braidlog.Projection("whole", 1, Counts(), count, kinds=frozenset({"message"}))
    with braidlog.open(tmp_path / "s", projections=[whole]) as b:
        for _ in range(5):
            b.append(braidlog.delta("b", "message", {"text": "x"}, ts=T0,
                                    refs=braidlog.Refs(deltas=("e",))))
        CALLS.clear()
        assert audit.entity_at(b.at(3), "whole", "e") == {"by": 3}
    with pytest.raises(braidlog.ValidationError, match="entity_id"):
        audit.entity_at(b, "whole", "")


def test_state_entity_from_the_command_line(tmp_path, capsys):
    store = str(tmp_path / "s")
    from braidlog.projections import fields
    with braidlog.open(store) as b:
        b.execute("fields", fields.ReviseField(topic_id="atlas", field="owner", value="Priya",
                                               provenance="llm", why_changed="assigned"),
                  braid_id="b", now=T0)
    assert main(["--store", store, "state", "--projection", "fields", "--entity", "atlas",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["seq"] == 1 and got["entity"] == "atlas"
    assert "Priya" in json.dumps(got["value"])
    assert main(["--store", store, "state", "--entity", "atlas"]) == 1
    assert "--entity: needs --projection" in capsys.readouterr().err
