"""eventsourcing on braidlog after an aggregate's braid is erased: the recorders read its events
as never written, the notification log leaves them out, and its events' state is in no file of
the store (docs/eventsourcing.md#forgetting)."""

from __future__ import annotations

import pytest

pytest.importorskip("eventsourcing")

from eventsourcing.application import AggregateNotFoundError

import braidlog
from tests.support.eventsourcing import DogSchool
from tests.support.forgetting import files_holding


def test_an_erased_aggregate_reads_as_never_written(tmp_path):
    path = tmp_path / "dogs.lmdb"
    settings = {"PERSISTENCE_MODULE": "braidlog.integrations.eventsourcing",
                "BRAIDLOG_STORE": str(path)}
    school = DogSchool(env=settings)
    rex = school.register("Rex, of flat 4b")
    school.teach(rex, "sit")
    fido = school.register("Fido")
    school.close()
    with braidlog.open(path) as b:  # the events' state, as stored (base64 in the payload)
        states = [state for r in b.log.scan_braid(f"dogschool_events:{rex}")
                  for _, _, state in r.delta.payload["events"]]
    assert len(states) == 2 and files_holding(path, *states)
    with braidlog.open(path) as b:
        report = b.erase(braid=f"dogschool_events:{rex}", reason="owner asked")
        assert len(report.seqs) == 2
    assert files_holding(path, *states) == {}
    school = DogSchool(env=settings)
    try:
        with pytest.raises(AggregateNotFoundError):
            school.repository.get(rex)
        assert school.repository.get(fido).name == "Fido"
        notes = school.notification_log.select(start=1, limit=10)
        assert [n.originator_id for n in notes] == [fido]
        school.teach(fido, "fetch")  # the application goes on
        assert school.repository.get(fido).tricks == ["fetch"]
    finally:
        school.close()
