"""A persistence module for the ``eventsourcing`` library (9.5): its applications on braidlog.

    PERSISTENCE_MODULE=braidlog.integrations.eventsourcing
    BRAIDLOG_STORE=/path/to/store      # or <APPNAME>_BRAIDLOG_STORE; created when none exists

Each aggregate's events are one braid of the store, each event a delta of kind
``eventsourcing.event``; notification ids are the store's seqs. So braidlog's command line, time
travel, proofs, export and replication work on an eventsourcing application's store.
docs/eventsourcing.md has the mapping, the settings and the errors.
"""

from ...errors import require_extra

try:
    from .. import eventsourcing_kinds  # noqa: F401  (declares the kinds this module stores)
    from .factory import BraidlogFactory
    from .recorders import (
        BraidlogAggregateRecorder,
        BraidlogApplicationRecorder,
        BraidlogProcessRecorder,
        BraidlogRecorder,
        BraidlogSubscription,
        BraidlogTrackingRecorder,
    )
    from .store import BraidlogDatastore
except ImportError as e:  # the extra not installed: say which to install, not a bare ModuleNotFoundError
    require_extra(e, "braidlog.integrations.eventsourcing", "eventsourcing", ("eventsourcing",))

__all__ = [
    "BraidlogFactory", "BraidlogDatastore", "BraidlogRecorder", "BraidlogAggregateRecorder",
    "BraidlogApplicationRecorder", "BraidlogTrackingRecorder", "BraidlogProcessRecorder",
    "BraidlogSubscription",
]
