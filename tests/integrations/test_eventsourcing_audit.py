"""eventsourcing aggregates are entities for braidlog's audit commands: `history`, `explain` and
`log --entity` find an aggregate by its originator id and say which versions each delta holds."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("eventsourcing")

from braidlog.cli import main
from tests.support.eventsourcing import DogSchool, env


@pytest.fixture
def school(tmp_path):
    app = DogSchool(env=env(tmp_path / "dogs.lmdb"))
    fido = app.register("Fido")
    app.teach(fido, "sit")
    dog = app.repository.get(fido)
    dog.add_trick("roll over")
    dog.add_trick("play dead")
    app.save(dog)  # one save, two events: one delta
    rex = app.register("Rex")
    app.close()
    return tmp_path / "dogs.lmdb", fido, rex


def run(capsys, *argv: object) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().out


def test_history_of_an_aggregate_by_its_originator_id_shows_its_versions(school, capsys):
    store, fido, rex = school
    code, out = run(capsys, "--store", store, "history", fido)
    assert code == 0
    assert out.splitlines()[0].startswith(f"{fido}: 3 delta(s) as of seq 4")
    described = [line.strip() for line in out.splitlines() if line.strip().startswith("version")]
    assert described == ["version 1: v1 Dog.Registered", "version 2: v2 Dog.TrickAdded",
                         "versions 3..4: v3 Dog.TrickAdded, v4 Dog.TrickAdded"]
    assert str(rex) not in out
    code, out = run(capsys, "--store", store, "history", rex)
    assert code == 0 and "version 1: v1 Dog.Registered" in out


def test_explain_tells_how_an_aggregate_got_to_its_version(school, capsys):
    store, fido, _ = school
    code, out = run(capsys, "--store", store, "explain", fido, "--at", "2")
    assert code == 0
    assert "how it got there: 2 delta(s), seq 1..2" in out
    assert "version 2: v2 Dog.TrickAdded" in out and "v3" not in out


def test_log_lists_an_aggregates_deltas_by_originator_id(school, capsys):
    store, fido, rex = school
    code, out = run(capsys, "--store", store, "log", "--entity", fido, "--json")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["seq"] for r in rows] == [1, 2, 3]
    assert [[e[0] for e in r["delta"]["payload"]["events"]] for r in rows] == [[1], [2], [3, 4]]
    code, out = run(capsys, "--store", store, "log", "--entity", fido, "--entity", rex, "--json")
    assert [json.loads(line)["seq"] for line in out.splitlines()] == [1, 2, 3, 4]


def test_an_aggregate_of_a_store_written_one_event_a_delta_has_a_history_too(tmp_path, capsys):
    import braidlog

    fido = "6f1f3c2e-6c3e-4f8e-9a53-3d1f0b2f4a10"
    with braidlog.LmdbLog(tmp_path / "s") as log:  # as stores before eventsourcing.events hold them
        log.append_batch([braidlog.delta(
            f"dogschool_events:{fido}", "eventsourcing.event",
            {"originator_id": fido, "originator_version": v, "topic": f"__main__:Dog.{t}", "state": "{}"},
            provenance="system", confidence=1.0) for v, t in ((1, "Registered"), (2, "TrickAdded"))])
    code, out = run(capsys, "--store", tmp_path / "s", "history", fido)
    assert code == 0
    assert [line.strip() for line in out.splitlines() if line.strip().startswith("version")] == [
        "version 1: Dog.Registered", "version 2: Dog.TrickAdded"]
    code, out = run(capsys, "--store", tmp_path / "s", "log", "--entity", fido, "--json")
    assert [json.loads(line)["seq"] for line in out.splitlines()] == [1, 2]
