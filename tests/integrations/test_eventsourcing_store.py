"""braidlog's eventsourcing module beyond eventsourcing's own suite: what the store adds (one
braid per aggregate, notification ids = seqs, the CLI and other processes on the same store),
the settings, and bad input (eventsourcing's errors, nothing written)."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import threading
from uuid import UUID, uuid4

import pytest

pytest.importorskip("eventsourcing", reason="needs braidlog[eventsourcing]")

from datetime import UTC, datetime

from eventsourcing.persistence import (
    DataError,
    InfrastructureFactoryError,
    IntegrityError,
    PersistenceError,
    ProgrammingError,
    StoredEvent,
    Tracking,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import braidlog
from braidlog.integrations.eventsourcing import BraidlogApplicationRecorder, BraidlogDatastore, BraidlogProcessRecorder
from tests.support.eventsourcing import MODULE, DogSchool, env


@pytest.fixture
def recorder(tmp_path):
    ds = BraidlogDatastore(tmp_path / "store")
    yield BraidlogProcessRecorder(ds, events_table_name="app_events", tracking_table_name="app_tracking")
    ds.close()


def event_(oid, version, topic="topic", state=b"{}") -> StoredEvent:
    return StoredEvent(originator_id=oid, originator_version=version, topic=topic, state=state)


def test_each_aggregate_is_a_braid_and_notification_ids_count_the_events(tmp_path):
    app = DogSchool(env=env(tmp_path / "s"))
    fido = app.register("Fido")
    app.teach(fido, "roll over")
    rex = app.register("Rex")
    app.teach(fido, "play dead")
    assert [n.id for n in app.recorder.select_notifications(None, 10)] == [1, 2, 3, 4]
    app.close()
    with braidlog.LmdbLog(tmp_path / "s", readonly=True) as log:
        fido_braid = [r.delta for r in log.scan_braid(f"dogschool_events:{fido}")]
        assert [[e[0] for e in d.payload["events"]] for d in fido_braid] == [[1], [2], [3]]
        assert [d.tags for d in fido_braid] == [("n:1",), ("n:2",), ("n:4",)]
        assert {d.kind for d in fido_braid} == {"eventsourcing.events"}
        assert log.braid_head(f"dogschool_events:{rex}").version == 1
        assert log.verify().seq == 4


def test_one_save_of_an_aggregate_is_one_delta_its_tag_naming_the_ids(recorder):
    x, y = uuid4(), uuid4()
    assert recorder.insert_events([event_(x, v) for v in range(1, 101)]) == list(range(1, 101))
    # events of two aggregates, interleaved: a delta for each run, the ids in the call's order
    assert recorder.insert_events([event_(y, 1), event_(y, 2), event_(x, 101), event_(y, 3)]) == [
        101, 102, 103, 104]
    records = list(recorder.datastore.log.scan())
    assert [(r.delta.braid_id.split(":")[1], r.delta.tags) for r in records] == [
        (str(x), ("n:1-100",)), (str(y), ("n:101-102",)), (str(x), ("n:103",)), (str(y), ("n:104",))]
    assert [e.originator_version for e in recorder.select_events(x)] == list(range(1, 102))
    assert [e.originator_version for e in recorder.select_events(x, gt=98, lte=100)] == [99, 100]
    assert [e.originator_version for e in recorder.select_events(x, desc=True, limit=3)] == [101, 100, 99]
    assert [e.originator_version for e in recorder.select_events(x, lte=3)] == [1, 2, 3]
    assert [e.originator_version for e in recorder.select_events(y, gt=1)] == [2, 3]
    # a page of notifications that starts and stops inside deltas
    got = recorder.select_notifications(99, 4)
    assert [(n.id, n.originator_id, n.originator_version) for n in got] == [
        (99, x, 99), (100, x, 100), (101, y, 1), (102, y, 2)]
    got = recorder.select_notifications(50, 100, stop=51)
    assert [(n.id, n.originator_version) for n in got] == [(50, 50), (51, 51)]
    assert [n.id for n in recorder.select_notifications(102, 10, inclusive_of_start=False)] == [103, 104]
    assert recorder.max_notification_id() == 104


def test_two_applications_share_a_store_and_see_only_their_own_notifications(tmp_path):
    class Other(DogSchool):
        pass

    a, b = DogSchool(env=env(tmp_path / "s")), Other(env=env(tmp_path / "s"))
    a.register("a1")
    b.register("b1")
    a.register("a2")
    assert [n.id for n in a.recorder.select_notifications(None, 10)] == [1, 3]
    assert [n.id for n in b.recorder.select_notifications(None, 10)] == [2]
    assert (a.recorder.max_notification_id(), b.recorder.max_notification_id()) == (3, 2)
    a.close(), b.close()


def test_a_write_across_aggregates_is_atomic(recorder):
    x, y = uuid4(), uuid4()
    recorder.insert_events([event_(x, 1)])
    head = recorder.datastore.log.head()
    with pytest.raises(IntegrityError):
        recorder.insert_events([event_(y, 1), event_(y, 2), event_(x, 1)])
    with pytest.raises(IntegrityError):  # the tracking record conflicts: no event either
        recorder.insert_events([event_(y, 1)], tracking=Tracking("up", 5))
        recorder.insert_events([event_(y, 2)], tracking=Tracking("up", 5))
    assert recorder.select_events(y) == [event_(y, 1)]
    assert recorder.datastore.log.head().seq == head.seq + 2


def test_a_lower_version_than_the_last_is_a_conflict(recorder):
    x = uuid4()
    recorder.insert_events([event_(x, 1), event_(x, 5)])
    with pytest.raises(IntegrityError, match="only goes up"):
        recorder.insert_events([event_(x, 3)])
    with pytest.raises(IntegrityError, match="versions only go up"):
        recorder.insert_events([event_(x, 7), event_(x, 6)])


BAD_CALLS = [
    (ProgrammingError, lambda r: r.insert_events("not a list")),
    (ProgrammingError, lambda r: r.insert_events([object()])),
    (DataError, lambda r: r.insert_events([event_(uuid4(), "1")])),
    (DataError, lambda r: r.insert_events([event_(uuid4(), True)])),
    (DataError, lambda r: r.insert_events([event_(uuid4(), 2**64)])),
    (DataError, lambda r: r.insert_events([event_(uuid4(), 1, topic=3)])),
    (DataError, lambda r: r.insert_events([event_(uuid4(), 1, topic="")])),
    (DataError, lambda r: r.insert_events([event_(uuid4(), 1, state="text")])),
    (DataError, lambda r: r.insert_events([event_(5, 1)])),
    (DataError, lambda r: r.insert_events([event_("not-a-uuid", 1)])),
    (ProgrammingError, lambda r: r.insert_events([], tracking="up")),
    (DataError, lambda r: r.insert_events([], tracking=Tracking("", 1))),
    (DataError, lambda r: r.insert_events([], tracking=Tracking("up", "1"))),
    (DataError, lambda r: r.insert_events([], tracking=Tracking("x" * 200, 1))),
    (DataError, lambda r: r.select_events(5)),
    (DataError, lambda r: r.select_events(uuid4(), gt="1")),
    (DataError, lambda r: r.select_events(uuid4(), limit=-1)),
    (DataError, lambda r: r.select_notifications("1", 10)),
    (DataError, lambda r: r.select_notifications(1, -1)),
    (DataError, lambda r: r.select_notifications(1, 10, topics="topic")),
    (DataError, lambda r: r.select_notifications(1, 10, topics=[1])),
    (DataError, lambda r: r.max_tracking_id(3)),
    (DataError, lambda r: r.subscribe(gt="0")),
    (ProgrammingError, lambda r: r.record(Tracking("up", 1), "deltas")),
    (DataError, lambda r: r.record(Tracking("up", 1), [braidlog.delta("b", "no_such_kind", {})])),
]


@pytest.mark.parametrize("error, call", BAD_CALLS)
def test_bad_input_raises_an_eventsourcing_error_and_writes_nothing(recorder, error, call):
    with pytest.raises(error):
        call(recorder)
    assert recorder.datastore.log.head().seq == 0


def test_a_datastore_given_no_path_or_an_odd_setting_says_so(tmp_path):
    with pytest.raises(DataError, match="path must be"):
        BraidlogDatastore(3)
    with pytest.raises(DataError, match="originator_id_type"):
        BraidlogDatastore(tmp_path / "s", originator_id_type="int")
    file = tmp_path / "file"
    file.write_text("not a store")
    r = BraidlogApplicationRecorder(BraidlogDatastore(file), events_table_name="a_events")
    from eventsourcing.persistence import OperationalError
    with pytest.raises(OperationalError, match="not a braidlog store"):
        r.max_notification_id()


def test_text_ids_too_long_for_a_braid_id_are_refused(tmp_path):
    ds = BraidlogDatastore(tmp_path / "s", originator_id_type="text")
    r = BraidlogApplicationRecorder(ds, events_table_name="app_events")
    r.insert_events([event_("x" * 109, 1)])
    with pytest.raises(DataError, match="at most 109"):
        r.insert_events([event_("x" * 110, 1)])
    ds.close()


values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(), st.binary(),
                   st.uuids(), st.lists(st.integers(), max_size=2))


@settings(max_examples=150, deadline=None)
@given(oid=values, version=values, topic=values, state=values, tracking=st.one_of(
    st.none(), values, st.builds(Tracking, values, values)))
def test_arbitrary_values_raise_only_eventsourcing_errors(tmp_path_factory, oid, version, topic,
                                                          state, tracking):
    ds = BraidlogDatastore(tmp_path_factory.mktemp("h") / "s")
    r = BraidlogProcessRecorder(ds, events_table_name="a_events", tracking_table_name="a_tracking")
    try:
        r.insert_events([event_(oid, version, topic, state)], tracking=tracking)
    except PersistenceError:
        assert ds.log.head().seq == 0
    else:
        assert ds.log.head().seq == 1 + (tracking is not None)
    for call in (lambda: r.select_events(oid, gt=version), lambda: r.max_tracking_id(topic),
                 lambda: r.select_notifications(version, 10, topics=[topic] if topic else ())):
        try:
            call()
        except PersistenceError:
            pass
    ds.close()


def test_settings_come_from_the_environment_with_the_application_prefix(tmp_path):
    app = DogSchool(env={"PERSISTENCE_MODULE": MODULE, "DOGSCHOOL_BRAIDLOG_STORE": str(tmp_path / "d"),
                         "BRAIDLOG_STORE": str(tmp_path / "other"), "BRAIDLOG_DURABLE": "n"})
    assert not (tmp_path / "d").exists()  # opened on first use
    app.register("Fido")
    assert (tmp_path / "d" / "data.mdb").exists() and not (tmp_path / "other").exists()
    assert app.factory.datastore.durable is False
    app.close()
    with pytest.raises(InfrastructureFactoryError, match="BRAIDLOG_STORE"):
        DogSchool(env={"PERSISTENCE_MODULE": MODULE})
    with pytest.raises(InfrastructureFactoryError, match="BRAIDLOG_DURABLE"):
        DogSchool(env=env(tmp_path / "d", BRAIDLOG_DURABLE="sometimes"))
    with pytest.raises(InfrastructureFactoryError, match="ORIGINATOR_ID_TYPE"):
        DogSchool(env=env(tmp_path / "d", ORIGINATOR_ID_TYPE="int"))


def test_wal_durability_is_taken_from_the_environment(tmp_path):
    app = DogSchool(env=env(tmp_path / "d", BRAIDLOG_DURABLE="WAL"))
    dog = app.register("Fido")
    app.teach(dog, "roll over")
    assert app.factory.datastore.durable == "wal"
    assert (tmp_path / "d" / "wal").exists()
    app.close()
    again = DogSchool(env=env(tmp_path / "d", BRAIDLOG_DURABLE="wal"))
    assert again.repository.get(dog).tricks == ["roll over"]
    again.close()


def _register_in_child(app: DogSchool, queue) -> None:
    queue.put(str(app.register("Rex")))


def test_an_application_made_before_fork_works_in_the_child(tmp_path):
    app = DogSchool(env=env(tmp_path / "s"))
    app.register("Fido")
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_register_in_child, args=(app, queue))
    child.start()
    rex = UUID(queue.get(timeout=30))
    child.join(30)
    assert child.exitcode == 0
    assert app.repository.get(rex).name == "Rex"
    app.register("Spot")
    assert [n.id for n in app.recorder.select_notifications(None, 10)] == [1, 2, 3]
    app.close()


WRITER = """
import sys
from tests.support.eventsourcing import DogSchool, env
app = DogSchool(env=env(sys.argv[1]))
print(app.register("Rex"))
app.close()
"""


@pytest.mark.slow
def test_a_subscription_wakes_on_another_process_commit(tmp_path):
    app = DogSchool(env=env(tmp_path / "s"))
    app.register("Fido")
    got: list = []
    with app.recorder.subscribe(gt=1) as subscription:
        def follow() -> None:
            for n in subscription:
                got.append(n)
                break
        reader = threading.Thread(target=follow)
        reader.start()
        out = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path / "s")], check=True,
                             capture_output=True, text=True, cwd=_root()).stdout
        reader.join(10)
        assert not reader.is_alive()
    assert [(n.id, str(n.originator_id)) for n in got] == [(2, out.strip())]
    app.close()


def _root() -> str:
    from pathlib import Path

    return str(Path(__file__).resolve().parents[2])


@pytest.mark.slow
def test_the_command_line_reads_verifies_and_copies_the_store(tmp_path):
    app = DogSchool(env=env(tmp_path / "s", IS_SNAPSHOTTING_ENABLED="y"))
    fido = app.register("Fido")
    app.teach(fido, "sit")
    app.take_snapshot(fido)
    app.close()

    def cli(*args: str) -> str:
        return subprocess.run([sys.executable, "-m", "braidlog", *args], check=True,
                              capture_output=True, text=True).stdout

    assert cli("--store", str(tmp_path / "s"), "verify").startswith("ok: ")
    assert cli("--store", str(tmp_path / "s"), "log", "--braid", f"dogschool_events:{fido}",
               "--json").count("\n") == 2
    cli("--store", str(tmp_path / "s"), "export", str(tmp_path / "x.jsonl"))
    cli("--store", str(tmp_path / "copy"), "import", str(tmp_path / "x.jsonl"))
    copy = DogSchool(env=env(tmp_path / "copy", IS_SNAPSHOTTING_ENABLED="y"))
    assert copy.repository.get(fido).tricks == ["sit"]
    assert [s.originator_version for s in copy.snapshots.get(fido)] == [2]
    copy.close()


def test_time_travel_shows_an_aggregate_as_it_was(tmp_path):
    app = DogSchool(env=env(tmp_path / "s"))
    fido = app.register("Fido")
    app.teach(fido, "sit")
    app.teach(fido, "roll over")
    app.close()
    with braidlog.open(tmp_path / "s", projections=[]) as braid:
        then = braid.at(2).log
        assert [e[0] for r in then.scan_braid(f"dogschool_events:{fido}")
                for e in r.delta.payload["events"]] == [1, 2]


def test_the_delta_ids_made_in_bulk_are_ulids_of_now_in_order():
    from datetime import datetime, timedelta

    from ulid import ULID

    from braidlog.delta import ULID_PATTERN
    from braidlog.integrations.eventsourcing.recorders import _new_ids

    before = datetime.now(UTC) - timedelta(milliseconds=1)
    ids = _new_ids(1000)
    after = datetime.now(UTC) + timedelta(milliseconds=1)
    assert ids == sorted(ids) and len(set(ids)) == 1000
    import re
    for i in ids:
        assert re.match(ULID_PATTERN, i) and str(ULID.from_str(i)) == i
        assert before <= ULID.from_str(i).datetime <= after


def test_a_state_that_is_utf8_is_stored_as_its_text_any_other_in_base64(recorder):
    x = uuid4()
    states = [b'{"name":"Fido \\u00e9"}', "caf\u00e9".encode(), b"\xff\x00\x80", b""]
    for v, s in enumerate(states, 1):  # a save each: a delta each
        recorder.insert_events([event_(x, v, state=s)])
    assert [e.state for e in recorder.select_events(x)] == states
    payloads = [r.delta.payload for r in recorder.datastore.log.scan()]
    assert [p["events"][0][2] for p in payloads[:2]] == [s.decode() for s in states[:2]]
    assert [p.get("base64", False) for p in payloads] == [False, False, True, False]
    # one state that is not UTF-8 puts every state of its delta in base64
    recorder.insert_events([event_(x, 5, state=b"{}"), event_(x, 6, state=b"\xff")])
    assert recorder.datastore.log.read(5).delta.payload["base64"] is True
    assert [e.state for e in recorder.select_events(x, gt=4)] == [b"{}", b"\xff"]


@pytest.mark.slow
@pytest.mark.nats
def test_a_replica_rebuilt_from_nats_serves_the_application(tmp_path):
    """The application's store shipped to a real NATS JetStream and rebuilt on the other side:
    the same application reads the same dogs and snapshots from the replica."""
    pytest.importorskip("nats")
    from braidlog.replication import Replica, Shipper, Stream
    from tests.support.nats import NatsCluster, server_binary

    binary = server_binary()
    if binary is None:
        pytest.skip("needs nats-server >= 2.12 (pip install 'braidlog[replication]')")
    app = DogSchool(env=env(tmp_path / "w", IS_SNAPSHOTTING_ENABLED="y"))
    fido = app.register("Fido")
    app.teach(fido, "sit")
    app.take_snapshot(fido)
    rex = app.register("Rex")
    app.close()
    cluster = NatsCluster.start(binary, tmp_path / "nats", 1)
    try:
        stream = Stream(cluster.urls[0], "ESAPP")
        with braidlog.LmdbLog(tmp_path / "w") as writer, braidlog.LmdbLog(tmp_path / "r") as replica:
            Shipper(writer, stream).ship(timeout=20)
            assert Replica(replica, stream).catch_up(timeout=20) == writer.head()
        stream.close()
    finally:
        cluster.stop()
    copy = DogSchool(env=env(tmp_path / "r", IS_SNAPSHOTTING_ENABLED="y"))
    assert copy.repository.get(fido).tricks == ["sit"] and copy.repository.get(rex).name == "Rex"
    assert [s.originator_version for s in copy.snapshots.get(fido)] == [2]
    assert [n.id for n in copy.recorder.select_notifications(None, 10)] == [1, 2, 3]  # not the snapshot
    copy.close()


def test_a_relative_store_path_is_resolved_when_the_application_is_made(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = DogSchool(env=env("rel.lmdb"))
    monkeypatch.chdir(tmp_path.parent)
    app.register("Fido")
    app.close()
    assert (tmp_path / "rel.lmdb" / "data.mdb").exists()


def test_a_store_written_one_event_a_delta_reads_as_before_and_goes_on_counting(tmp_path):
    """Stores written before ``eventsourcing.events`` hold one event a delta of kind
    ``eventsourcing.event``, its notification id its seq: read as they are, never rewritten."""
    x, y = uuid4(), uuid4()
    old = [braidlog.delta(f"app_events:{oid}", "eventsourcing.event",
                          {"originator_id": str(oid), "originator_version": v, "topic": "t", "state": "{}"},
                          provenance=braidlog.Provenance("system", source="eventsourcing"), confidence=1.0)
           for oid, v in ((x, 1), (y, 1), (x, 2))]
    with braidlog.LmdbLog(tmp_path / "s") as log:
        log.append_batch(old[:2])
        log.append(braidlog.delta("other", "observation", {"text": "not an event"}))
        log.append(old[2])
    ds = BraidlogDatastore(tmp_path / "s")
    recorder = BraidlogApplicationRecorder(ds, events_table_name="app_events")
    try:
        assert [(n.id, n.originator_id) for n in recorder.select_notifications(None, 10)] == [
            (1, x), (2, y), (4, x)]  # their seqs
        assert recorder.max_notification_id() == 4
        assert recorder.insert_events([event_(x, 3), event_(x, 4)]) == [5, 6]  # counting on
        assert [e.originator_version for e in recorder.select_events(x)] == [1, 2, 3, 4]
        assert [n.id for n in recorder.select_notifications(2, 10)] == [2, 4, 5, 6]
        assert [n.id for n in recorder.select_notifications(5, 10)] == [5, 6]
        with pytest.raises(IntegrityError):
            recorder.insert_events([event_(y, 1)])
        assert [r.delta.kind for r in ds.log.scan()] == ["eventsourcing.event"] * 2 + [
            "observation", "eventsourcing.event", "eventsourcing.events"]
        assert ds.log.verify().seq == 5
    finally:
        ds.close()


def test_the_ids_of_an_erased_last_delta_are_not_given_again(tmp_path):
    ds = BraidlogDatastore(tmp_path / "s")
    recorder = BraidlogApplicationRecorder(ds, events_table_name="app_events")
    x, y = uuid4(), uuid4()
    recorder.insert_events([event_(x, 1)])
    recorder.insert_events([event_(y, 1), event_(y, 2), event_(y, 3)])
    ds.close()
    with braidlog.open(tmp_path / "s") as b:
        b.erase(braid=f"app_events:{y}", reason="asked")
    ds = BraidlogDatastore(tmp_path / "s")
    recorder = BraidlogApplicationRecorder(ds, events_table_name="app_events")
    try:
        assert [n.id for n in recorder.select_notifications(None, 10)] == [1]
        assert recorder.insert_events([event_(x, 2)]) == [5]  # 2..4 were y's: its tag keeps them
        assert [n.id for n in recorder.select_notifications(None, 10)] == [1, 5]
    finally:
        ds.close()


def test_what_a_datastore_wrote_last_is_not_trusted_once_another_has_written(tmp_path):
    """Each datastore remembers the versions and the next id its last commit left, and uses them
    only while the store's head is still that commit's last record."""
    one, two = BraidlogDatastore(tmp_path / "s"), BraidlogDatastore(tmp_path / "s")
    a = BraidlogApplicationRecorder(one, events_table_name="app_events")
    b = BraidlogApplicationRecorder(two, events_table_name="app_events")
    x = uuid4()
    try:
        assert a.insert_events([event_(x, 1)]) == [1]
        assert b.insert_events([event_(x, 2)]) == [2]
        with pytest.raises(IntegrityError, match="is at 2"):
            a.insert_events([event_(x, 2)])
        assert a.insert_events([event_(x, 3)]) == [3]
        assert a.insert_events([event_(x, 4)]) == [4]  # from what it remembers
        with pytest.raises(IntegrityError, match="is at 4"):
            a.insert_events([event_(x, 4)])
        assert [e.originator_version for e in b.select_events(x)] == [1, 2, 3, 4]
    finally:
        one.close()
        two.close()


def test_saves_sharing_a_commit_each_find_what_the_one_before_wrote(tmp_path, monkeypatch):
    """Saves of several threads share a commit (the store's writer queue). Each batch of the
    group finds the next id and versions the batch before it left, inside the transaction, so it
    does not read them back from the store; and the ids still count every event once."""
    from braidlog.integrations.eventsourcing import recorders

    ds = BraidlogDatastore(tmp_path / "s")
    rec = BraidlogApplicationRecorder(ds, events_table_name="app_events")
    log = ds.log
    reads = []
    monkeypatch.setattr(recorders, "_next_id", lambda log, f=recorders._next_id: reads.append(1) or f(log))
    x, others = uuid4(), [uuid4() for _ in range(3)]
    rec.insert_events([event_(x, 1)])  # a new datastore knows nothing yet: it reads the store
    assert reads == [1]
    reads.clear()
    held, go = threading.Event(), threading.Event()

    def hold(head, staged):
        held.set()
        assert go.wait(10)

    blocker = threading.Thread(target=lambda: log.commit(
        [braidlog.GenericDelta(braid_id="other", kind="message", payload={"text": "hi"}, ts=datetime.now(UTC),
                               provenance=braidlog.Provenance("user"), confidence=1.0)], admit=hold))
    blocker.start()
    assert held.wait(10)
    got: dict[int, object] = {}
    savers = [threading.Thread(target=lambda k=k: got.__setitem__(k, rec.insert_events([event_(others[k], 1)])))
              for k in range(3)]
    for k, t in enumerate(savers):
        t.start()
        while len(log._shared_env._queue) < k + 1:
            threading.Event().wait(0.001)
    before = log._env.info()["last_txnid"]
    go.set()
    for t in (blocker, *savers):
        t.join(10)
    assert log._env.info()["last_txnid"] - before == 2  # the held commit, then the three at once
    assert sorted(ids for k in range(3) for ids in got[k]) == [2, 3, 4]
    assert len(reads) == 1  # only the first of the group read the store: another wrote before it
    assert [n.id for n in rec.select_notifications(1, 10)] == [1, 2, 3, 4]
    ds.close()
