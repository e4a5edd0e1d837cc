"""eventsourcing's own shipped test cases, run on braidlog's persistence module.

Every case the library ships for a persistence module, subclassed as eventsourcing-sqlalchemy
does (with the text-id and snapshot variants eventsourcing runs for its SQLite module), each on
a new LMDB store on disk. The base classes are reached through their modules, so pytest does not
collect them on their own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, ClassVar

import pytest

pytest.importorskip("eventsourcing", reason="needs braidlog[eventsourcing]")

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    InfrastructureFactory,
    ProcessRecorder,
    Tracking,
    TrackingRecorder,
)
from eventsourcing.tests import application, persistence, projection
from eventsourcing.utils import Environment, clear_topic_cache

import braidlog
from braidlog.integrations.eventsourcing import (
    BraidlogAggregateRecorder,
    BraidlogApplicationRecorder,
    BraidlogDatastore,
    BraidlogFactory,
    BraidlogProcessRecorder,
    BraidlogTrackingRecorder,
)
from braidlog.integrations.eventsourcing_kinds import VIEW

MODULE = "braidlog.integrations.eventsourcing"


class OnDisk:
    """A new store in a temporary directory for each test, removed after it."""

    originator_id_type = "uuid"

    def new_store(self) -> str:
        tmp = tempfile.mkdtemp(prefix="braidlog-es-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)  # type: ignore[attr-defined]
        return os.path.join(tmp, "store")

    def datastore(self) -> BraidlogDatastore:
        ds = BraidlogDatastore(self.new_store(), originator_id_type=self.originator_id_type)
        self.addCleanup(ds.close)  # type: ignore[attr-defined]
        return ds


class WithTextOriginatorID:
    originator_id_type = "text"

    def new_originator_id(self) -> str:
        from uuid import uuid4

        return "test-" + str(uuid4())


# -- recorders ---------------------------------------------------------------------------------

class TestAggregateRecorder(OnDisk, persistence.AggregateRecorderTestCase):
    def create_recorder(self) -> AggregateRecorder:
        return BraidlogAggregateRecorder(self.datastore(), events_table_name="stored_events")


class TestAggregateRecorderWithTextOriginatorID(WithTextOriginatorID, TestAggregateRecorder):
    pass


class TestSnapshotRecorder(OnDisk, persistence.AggregateRecorderTestCase):
    def create_recorder(self) -> AggregateRecorder:
        return BraidlogAggregateRecorder(self.datastore(), events_table_name="stored_snapshots",
                                         for_snapshots=True)


class TestSnapshotRecorderWithTextOriginatorID(WithTextOriginatorID, TestSnapshotRecorder):
    pass


class TestApplicationRecorder(OnDisk, persistence.ApplicationRecorderTestCase):
    def create_recorder(self) -> ApplicationRecorder:
        return BraidlogApplicationRecorder(self.datastore(), events_table_name="stored_events")

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()


class TestApplicationRecorderWithTextOriginatorID(WithTextOriginatorID, TestApplicationRecorder):
    pass


class TestTrackingRecorder(OnDisk, persistence.TrackingRecorderTestCase):
    def create_recorder(self) -> TrackingRecorder:
        return BraidlogTrackingRecorder(self.datastore(), tracking_table_name="tracking")


class TestProcessRecorder(OnDisk, persistence.ProcessRecorderTestCase):
    def create_recorder(self) -> ProcessRecorder:
        return BraidlogProcessRecorder(self.datastore(), events_table_name="stored_events",
                                       tracking_table_name="tracking")


class TestProcessRecorderWithTextOriginatorID(WithTextOriginatorID, TestProcessRecorder):
    pass


class TestNonInterleavingNotificationIDs(OnDisk, persistence.NonInterleavingNotificationIDsBaseCase):
    def create_recorder(self) -> ApplicationRecorder:
        return BraidlogApplicationRecorder(self.datastore(), events_table_name="stored_events")


class TestNonInterleavingNotificationIDsWithTextOriginatorID(
        WithTextOriginatorID, TestNonInterleavingNotificationIDs):
    pass


# -- the factory -------------------------------------------------------------------------------

class TestFactory(OnDisk, persistence.InfrastructureFactoryTestCase[BraidlogFactory]):
    def expected_factory_class(self) -> type[BraidlogFactory]:
        return BraidlogFactory

    def expected_aggregate_recorder_class(self) -> type[AggregateRecorder]:
        return BraidlogAggregateRecorder

    def expected_application_recorder_class(self) -> type[ApplicationRecorder]:
        return BraidlogApplicationRecorder

    def expected_tracking_recorder_class(self) -> type[TrackingRecorder]:
        return BraidlogTrackingRecorder

    class TrackingRecorderSubclass(BraidlogTrackingRecorder):
        pass

    def tracking_recorder_subclass(self) -> type[TrackingRecorder]:
        return self.TrackingRecorderSubclass

    def expected_process_recorder_class(self) -> type[ProcessRecorder]:
        return BraidlogProcessRecorder

    def setUp(self) -> None:
        self.env = Environment("TestCase")
        self.env[InfrastructureFactory.PERSISTENCE_MODULE] = MODULE
        self.env[BraidlogFactory.BRAIDLOG_STORE] = self.new_store()
        super().setUp()


class TestFactoryWithTextOriginatorID(TestFactory):
    def setUp(self) -> None:
        super().setUp()
        self.env[BraidlogFactory.ORIGINATOR_ID_TYPE] = "text"


# -- an application ----------------------------------------------------------------------------

class TestExampleApplication(OnDisk, application.ExampleApplicationTestCase):
    expected_factory_topic = "braidlog.integrations.eventsourcing.factory:BraidlogFactory"

    def setUp(self) -> None:
        super().setUp()
        for key, value in ((InfrastructureFactory.PERSISTENCE_MODULE, MODULE),
                           (BraidlogFactory.BRAIDLOG_STORE, self.new_store())):
            self.addCleanup(_restore, key, os.environ.get(key))
            os.environ[key] = value
        clear_topic_cache()


def _restore(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value


# -- projections -------------------------------------------------------------------------------

class BraidlogEventCounters(BraidlogTrackingRecorder, projection.EventCountersView):
    """A materialised view on braidlog: each increment is a delta of kind eventsourcing.view in
    a braid per counter, written with the tracking record of the event counted; a counter's
    value is the number of deltas in its braid."""

    def _counter(self, name: str) -> str:
        return f"{self.tracking_table_name.removesuffix('_tracking')}_counters:{name}"

    def _count(self, name: str) -> int:
        with self.datastore.using() as log:
            return log.braid_head(self._counter(name)).version

    def _incr(self, name: str, tracking: Tracking) -> None:
        self.record(tracking, [braidlog.delta(self._counter(name), VIEW, {"counter": name, "by": 1},
                                              provenance="system", confidence=1.0)])

    def get_created_event_counter(self) -> int:
        return self._count("created")

    def get_subsequent_event_counter(self) -> int:
        return self._count("subsequent")

    def incr_created_event_counter(self, tracking: Tracking) -> None:
        self._incr("created", tracking)

    def incr_subsequent_event_counter(self, tracking: Tracking) -> None:
        self._incr("subsequent", tracking)


class TestEventCountersView(OnDisk, projection.EventCountersViewTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.factory = BraidlogFactory(Environment(name="eventcounters", env={
            InfrastructureFactory.PERSISTENCE_MODULE: MODULE,
            BraidlogFactory.BRAIDLOG_STORE: self.new_store()}))
        self.addCleanup(self.factory.close)

    def construct_event_counters_view(self) -> projection.EventCountersView:
        return self.factory.tracking_recorder(BraidlogEventCounters)


class TestAggregateEventCountersProjection(OnDisk, projection.AggregateEventCountersProjectionTestCase):
    view_class = BraidlogEventCounters

    def setUp(self) -> None:
        super().setUp()
        self.env: ClassVar[dict[str, Any]] = {  # type: ignore[misc]
            InfrastructureFactory.PERSISTENCE_MODULE: MODULE,
            BraidlogFactory.BRAIDLOG_STORE: self.new_store()}


class TestEventSourcedProjection(OnDisk, projection.EventSourcedProjectionTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.env: ClassVar[dict[str, Any]] = {  # type: ignore[misc]
            InfrastructureFactory.PERSISTENCE_MODULE: MODULE,
            BraidlogFactory.BRAIDLOG_STORE: self.new_store()}
