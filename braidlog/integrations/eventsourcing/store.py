"""The braidlog store under eventsourcing's recorders: opened lazily, per process, errors translated.

A ``BraidlogDatastore`` names a store; the store is opened (created where none exists) on first
use, in the process that uses it. A process forked after that opens it again on its first use
(an LMDB environment must never cross ``fork``). Every braidlog error a recorder meets leaves as
eventsourcing's own: a conflict as ``IntegrityError``, bad data as ``DataError``, a store that
cannot be opened or written as ``OperationalError``, a damaged store as ``InternalError``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from eventsourcing.persistence import (
    DatabaseError,
    DataError,
    IntegrityError,
    InternalError,
    OperationalError,
    ProgrammingError,
)

from ... import BraidlogError, ConflictError, LmdbLog, StorageError, ValidationError
from ... import IntegrityError as DamagedError

__all__ = ["BraidlogDatastore", "translated", "paged"]

#: Events to set after a commit, by store path: every datastore of a path in this process wakes
#: the subscriptions of every other (another process's commits are seen by polling).
_listeners: dict[str, set[threading.Event]] = {}
_listeners_pid = 0


@contextmanager
def translated() -> Iterator[None]:
    """Raise a braidlog error met inside as eventsourcing's error for it (the braidlog one as
    its cause)."""
    try:
        yield
    except BraidlogError as e:
        raise _translate(e) from e


def _translate(e: BraidlogError) -> DatabaseError:
    if isinstance(e, ConflictError):
        return IntegrityError(str(e))
    if isinstance(e, ValidationError):
        return DataError(str(e))
    if isinstance(e, DamagedError):
        return InternalError(f"{e} (the store is damaged: run `braidlog verify` on it)")
    if isinstance(e, StorageError):
        return OperationalError(str(e))
    return DatabaseError(str(e))


def _event(event: Any) -> threading.Event:
    if not isinstance(event, threading.Event):
        raise ProgrammingError(f"event must be a threading.Event, not {type(event).__name__}")
    return event


class BraidlogDatastore:
    """The braidlog store at ``path``, opened on first use in the process that uses it.

    ``durable`` as for ``braidlog.open``: every commit is synced to disk (the default).
    ``originator_id_type`` is ``"uuid"`` (ids read back as UUID) or ``"text"`` (as str).
    """

    def __init__(self, path: str | os.PathLike[str], *, durable: bool | str = True,
                 originator_id_type: str = "uuid") -> None:
        if originator_id_type not in ("uuid", "text"):
            raise DataError(f"originator_id_type must be 'uuid' or 'text', not {originator_id_type!r}")
        # resolved now: a relative path names the same store whatever the working directory
        # is when it is first used
        try:
            self.path = self._key = os.path.abspath(os.fspath(path))
        except TypeError:
            raise DataError(f"path must be a str or os.PathLike naming the store's directory, "
                            f"not {type(path).__name__}") from None
        self.durable = durable
        self.originator_id_type = originator_id_type
        self._log: LmdbLog | None = None
        self._pid = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._calls = 0  # calls inside ``using`` now, in process ``_calls_pid``
        self._calls_pid = os.getpid()
        self._closed = False
        #: what the recorders wrote last (their _Written), checked against the head before use
        self.written: Any = None

    @property
    def log(self) -> LmdbLog:
        """The open store (opened now if this process has not opened it yet). Use it inside
        ``using()``, which keeps ``close`` from closing it under a call."""
        log = self._log
        if log is not None and self._pid == os.getpid():
            return log
        with self._lock:
            if self._closed:
                raise OperationalError(f"the braidlog store {self.path} is closed (its "
                                       "application or factory was closed)")
            if self._log is None or self._pid != os.getpid():
                with translated():
                    self._log = LmdbLog(self.path, durable=self.durable)
                self._pid = os.getpid()
            return self._log

    @contextmanager
    def using(self) -> Iterator[LmdbLog]:
        """The open store, for one call: ``close`` waits until every such call has returned
        (closing an LMDB environment under another thread's transaction would crash it).
        Translates braidlog's errors to eventsourcing's."""
        with self._lock:
            if self._closed:
                raise OperationalError(f"the braidlog store {self.path} is closed (its "
                                       "application or factory was closed)")
            if self._calls_pid != os.getpid():  # a forked child: its parent's calls are not here
                self._calls, self._calls_pid = 0, os.getpid()
            self._calls += 1
        try:
            with translated():
                yield self.log
        finally:
            with self._lock:
                self._calls -= 1
                if not self._calls:
                    self._idle.notify_all()

    def _waiting(self) -> set[threading.Event]:
        global _listeners_pid
        if _listeners_pid != os.getpid():  # a forked child has none of its parent's threads
            _listeners.clear()
            _listeners_pid = os.getpid()
        return _listeners.setdefault(self._key, set())

    def listen(self, event: threading.Event) -> None:
        """Set ``event`` after each commit this process makes to the store."""
        self._waiting().add(_event(event))

    def unlisten(self, event: threading.Event) -> None:
        self._waiting().discard(_event(event))

    def committed(self) -> None:
        for event in list(self._waiting()):
            event.set()

    def close(self) -> None:
        """Close the store (once every call in progress has returned); a later call raises
        OperationalError."""
        with self._lock:
            self._closed = True
            while self._calls:
                self._idle.wait()
            log, self._log = self._log, None
            if log is not None and self._pid == os.getpid():
                log.close()

    def __repr__(self) -> str:
        return f"BraidlogDatastore({self.path!r})"


def paged(scan: Callable[..., Iterator[Any]], start: int = 1, stop: int | None = None, *,
          reverse: bool = False, first: int = 1) -> Iterator[Any]:
    """The records ``scan(start, stop, reverse=, limit=)`` gives, read in growing pages (``first``,
    then eight times more, up to 1,024): a caller that wants one record reads one, not a chunk."""
    n = first
    while True:
        rows = list(scan(start, stop, reverse=reverse, limit=n))
        yield from rows
        if len(rows) < n:
            return
        if reverse:
            stop = rows[-1].seq
        else:
            start = rows[-1].seq + 1
        n = min(n * 8, 1024)
