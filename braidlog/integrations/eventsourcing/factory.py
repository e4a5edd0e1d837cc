"""``BraidlogFactory``: eventsourcing's infrastructure factory for a braidlog store.

Configured through eventsourcing's ``Environment``, so each setting may be prefixed with the
application's name (``BANKACCOUNTS_BRAIDLOG_STORE`` before ``BRAIDLOG_STORE``):

- ``BRAIDLOG_STORE``: the store's directory (required; created with a new store where none is);
- ``BRAIDLOG_DURABLE``: sync every commit to disk (default ``y``; ``n`` as ``braidlog.open``'s
  ``durable=False``: an OS crash may lose the last commits, never corrupt the store; ``wal``
  as ``durable="wal"``: one sync a commit through a write-ahead file, one writing process);
- ``ORIGINATOR_ID_TYPE``: ``uuid`` (the default) or ``text``, as for eventsourcing's SQLite module.

The factory does not open the store: its recorders open it on first use, in the process that
uses them, so an application constructed before ``fork`` works in the child.

At interpreter exit an application still referenced by a module's globals (a ``System`` run by
a ``SingleThreadedRunner`` in a script, say) is finalized after the standard library's modules
are torn down, and eventsourcing's ``Application.__del__`` then fails on ``contextlib.suppress``
being None ("Exception ignored in: <function Application.__del__ …>"). So the first factory made
in a process registers an exit hook that replaces it, for that last moment only, with one that
needs no module globals and swallows what closing fails on when nothing is left to report to.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Mapping
from typing import Any

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    InfrastructureFactory,
    InfrastructureFactoryError,
    ProcessRecorder,
    ProgrammingError,
)
from eventsourcing.utils import Environment, EnvType, resolve_topic, strtobool

from .recorders import (
    BraidlogAggregateRecorder,
    BraidlogApplicationRecorder,
    BraidlogProcessRecorder,
    BraidlogTrackingRecorder,
)
from .store import BraidlogDatastore

__all__ = ["BraidlogFactory"]

_exit_hook = threading.Lock()
_exit_hook_set = False


def _at_exit() -> None:
    """From now on (interpreter exit) an application's ``__del__`` closes it without module
    globals, and an error closing it then is not printed."""
    from eventsourcing.application import Application

    def __del__(self: Application[Any], _suppress: Any = contextlib.suppress) -> None:
        with _suppress(Exception):
            self.close()

    Application.__del__ = __del__  # type: ignore[method-assign]  # exit only: see the module doc


def _set_exit_hook() -> None:
    global _exit_hook_set
    with _exit_hook:
        if not _exit_hook_set:
            atexit.register(_at_exit)
            _exit_hook_set = True


class BraidlogFactory(InfrastructureFactory[BraidlogTrackingRecorder]):
    """Recorders on the braidlog store ``BRAIDLOG_STORE`` names (``PERSISTENCE_MODULE`` =
    ``braidlog.integrations.eventsourcing``)."""

    BRAIDLOG_STORE = "BRAIDLOG_STORE"
    BRAIDLOG_DURABLE = "BRAIDLOG_DURABLE"
    ORIGINATOR_ID_TYPE = "ORIGINATOR_ID_TYPE"
    CREATE_TABLE = "CREATE_TABLE"  # accepted, and nothing to do: a braid needs no table

    aggregate_recorder_class = BraidlogAggregateRecorder
    application_recorder_class = BraidlogApplicationRecorder
    tracking_recorder_class = BraidlogTrackingRecorder
    process_recorder_class = BraidlogProcessRecorder

    def __init__(self, env: Environment | EnvType | None) -> None:
        if env is not None and not isinstance(env, Mapping):
            raise InfrastructureFactoryError(
                f"env must be a mapping of setting names to values (an Environment or a dict), "
                f"not {type(env).__name__}")
        super().__init__(env)
        path = (self.env.get(self.BRAIDLOG_STORE) or "").strip()
        if not path:
            raise InfrastructureFactoryError(
                "braidlog store path not found in the environment with keys: "
                f"{', '.join(self.env.create_keys(self.BRAIDLOG_STORE))} (name the store's "
                "directory; a new store is created there when none exists)")
        wal = (self.env.get(self.BRAIDLOG_DURABLE) or "").strip().lower() == "wal"
        durable: bool | str = "wal" if wal else self._flag(self.BRAIDLOG_DURABLE, "y")
        id_type = (self.env.get(self.ORIGINATOR_ID_TYPE) or "uuid").strip().lower()
        if id_type not in ("uuid", "text"):
            raise InfrastructureFactoryError(
                f"{self.ORIGINATOR_ID_TYPE} must be 'uuid' or 'text', not {id_type!r}")
        self.datastore = BraidlogDatastore(path, durable=durable, originator_id_type=id_type)
        _set_exit_hook()

    def _flag(self, key: str, default: str) -> bool:
        value = self.env.get(key, default) or default
        try:
            return bool(strtobool(value))
        except ValueError:
            raise InfrastructureFactoryError(
                f"{key} must be a yes or no value (y, n, true, false, 1, 0), not {value!r}") from None

    def _prefix(self, default: str) -> str:
        return self.env.name.lower() or default

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        return self.aggregate_recorder_class(
            self.datastore, events_table_name=f"{self._prefix('stored')}_{purpose}",
            for_snapshots=purpose != "events")

    def application_recorder(self) -> ApplicationRecorder:
        cls = self._class(self.APPLICATION_RECORDER_TOPIC, self.application_recorder_class)
        return cls(self.datastore, events_table_name=f"{self._prefix('stored')}_events")

    def tracking_recorder(self, tracking_recorder_class: type[BraidlogTrackingRecorder] | None = None
                          ) -> BraidlogTrackingRecorder:
        if tracking_recorder_class is not None and not (
                isinstance(tracking_recorder_class, type)
                and issubclass(tracking_recorder_class, BraidlogTrackingRecorder)):
            raise ProgrammingError("tracking_recorder_class must be a subclass of BraidlogTrackingRecorder, "
                                   f"not {tracking_recorder_class!r}"[:200])
        cls = tracking_recorder_class or self._class(self.TRACKING_RECORDER_TOPIC,
                                                     self.tracking_recorder_class)
        return cls(self.datastore,
                   tracking_table_name=f"{self._prefix('notification')}_tracking")

    def process_recorder(self) -> ProcessRecorder:
        cls = self._class(self.PROCESS_RECORDER_TOPIC, self.process_recorder_class)
        return cls(self.datastore, events_table_name=f"{self._prefix('stored')}_events",
                   tracking_table_name=f"{self._prefix('notification')}_tracking")

    def _class(self, key: str, default: type) -> Any:
        topic = self.env.get(key)
        cls = resolve_topic(topic) if topic else default
        base = {self.APPLICATION_RECORDER_TOPIC: BraidlogApplicationRecorder,
                self.TRACKING_RECORDER_TOPIC: BraidlogTrackingRecorder,
                self.PROCESS_RECORDER_TOPIC: BraidlogProcessRecorder}[key]
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise InfrastructureFactoryError(f"{key} {topic!r} must name a subclass of {base.__name__}")
        return cls

    def close(self) -> None:
        self.datastore.close()
