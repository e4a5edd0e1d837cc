"""What the tools share: one open Braid, a lock around it, and the server's provenance policy.

Every tool call runs on a worker thread of the SDK; the lock makes the calls of one server take
turns on the Braid (its live states are not for two threads at once). Other processes may
write to the same store meanwhile: reads catch up with the log first, and commands are decided
and appended in one write transaction (``Braid.execute``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

import msgspec

from ..braid import Braid, Point
from ..delta import PROVENANCE_KINDS, Provenance
from ..errors import StorageError, ValidationError
from ..store import resolve_point

__all__ = ["Backend", "SOURCE", "DEFAULT_KIND", "DEFAULT_ALLOWED", "parse_point", "recall_installed"]

#: ``provenance.source`` of every delta written over MCP.
SOURCE = "mcp"
#: The provenance kind of a delta written over MCP when the call names none.
DEFAULT_KIND = "assistant"
#: The kinds a call may claim unless the server allows more: none that a human or the system
#: would be trusted with ("user" passes a HUMAN_ONLY trust boundary, "system" is the engine's).
DEFAULT_ALLOWED = frozenset({"assistant", "tool", "perception", "dream"})


def recall_installed() -> bool:
    """Whether the ``recall`` extra is installed: the recall and search tools and embedding on
    append need it; without it the server serves the rest."""
    try:
        import braidlog.recall  # noqa: F401  (only whether it loads)
    except ImportError:
        return False
    return True


def parse_point(value: int | str | None, field: str = "at") -> Point | None:
    """A seq (an int, or digits), a delta id (a ULID) or an ISO-8601 time with a timezone."""
    if value is None or isinstance(value, int):
        return value
    text = value.strip()
    if text.isdigit():
        return int(text)
    if len(text) == 26 and text.isalnum():
        return text.upper()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(field, f"{value!r} is not a seq, a delta id or an ISO-8601 time") from None
    if when.tzinfo is None:
        raise ValidationError(field, f"{value!r} has no timezone; give one, e.g. "
                              f"{when.isoformat(timespec='seconds')}+00:00")
    return when


def _open(path: str, read_only: bool, apps: Iterable[str] | None) -> Braid:
    """The store with the projections it is used with (as ``braidlog.open`` finds them), and
    those of the application modules ``apps`` (``--app``); a recorded projection that cannot be
    found is named on standard error."""
    from ..apps import APP_ENV, discover, for_store
    from ..lmdb.log import LmdbLog

    store = LmdbLog(path, readonly=read_only, create=not read_only)
    try:
        projections, missing = for_store(discover(apps), store.projections_used())
        if missing:
            sys.stderr.write(f"braidlog mcp: note: the store is used with {', '.join(map(repr, missing))}, "
                             f"not found here; name the application with --app MODULE or {APP_ENV}\n")
        return Braid(store, projections)
    except BaseException:
        store.close()
        raise


class Backend:
    """The store a server serves, opened once; ``read()`` and ``write()`` lend its Braid."""

    def __init__(self, path: str, *, read_only: bool = False,
                 allow_provenance: Iterable[str] = DEFAULT_ALLOWED,
                 apps: Iterable[str] | None = None, embedder: str | None = None) -> None:
        allowed = frozenset(allow_provenance) | {DEFAULT_KIND}
        unknown = sorted(allowed - set(PROVENANCE_KINDS))
        if unknown:
            raise ValidationError("allow_provenance", f"unknown provenance kind(s) {unknown}; "
                                  f"use {', '.join(PROVENANCE_KINDS)}")
        self.path = path
        self.read_only = read_only
        self.allowed = allowed
        self._lock = threading.RLock()
        self._recall: dict[str, Any] = {}
        # the embedder of appends and recall queries: the one named (loaded now: a model that is
        # not on this machine fails the start, not a call), else each space's recorded one
        self.embedder: Any = None
        if embedder is not None:
            if not recall_installed():
                raise ValidationError("embedder", "needs braidlog's recall extra (pip install '.[recall]')")
            from ..recall import embedder as load_embedder

            self.embedder = load_embedder(embedder)
        self.braid: Braid = _open(path, read_only, apps)

    # -- access ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def read(self) -> Iterator[Braid]:
        with self._lock:
            yield self.braid

    @contextlib.contextmanager
    def write(self) -> Iterator[Braid]:
        if self.read_only:  # the write tools are not served; this guards against a slip
            raise StorageError("this server is read-only", hint="start it without --read-only")
        with self._lock:
            yield self.braid

    @staticmethod
    def seq(braid: Braid, at: int | str | None, field: str = "at") -> int:
        """The seq a point names (the head when None); a bad point names ``field``."""
        point = parse_point(at, field)
        return braid.head().seq if point is None else resolve_point(braid.log, point, field)

    def state(self, braid: Braid, name: str, at: int | str | None, field: str = "at") -> tuple[int, Any]:
        """``(seq, state)`` of projection ``name`` as of a point, or live at the head (do not
        mutate it)."""
        if at is None:
            state = braid.state(name)
            return braid.seq, state
        seq = self.seq(braid, at, field)
        braid.projection(name)
        return seq, braid.at(seq).state(name)

    def recall(self, space: str) -> Any:
        """The recall index of a vector space, opened on first use. A read-only server keeps
        it in memory: it writes nothing into the store's directory."""
        index = self._recall.get(space)
        if index is None:
            from ..recall import Recall

            index = Recall(self.braid, space, embedder=self.embedder,
                           directory=False if self.read_only else None)
            self._recall[space] = index
        return index

    # -- provenance ------------------------------------------------------------------------------
    def provenance(self, given: Provenance | None = None, kind: str | None = None, *,
                   field: str = "provenance") -> Provenance:
        """The provenance of a delta written over MCP: the one given (kind ``assistant`` when
        none), checked against the kinds this server lets a caller claim, with source ``mcp``."""
        if given is None:
            given = Provenance(kind or DEFAULT_KIND)  # type: ignore[arg-type]  # any str: checked against the allowed kinds below
            kind_field = field if field.endswith("kind") else f"{field}.kind"
        else:
            kind_field = f"{field}.kind"
            if given.source not in (None, SOURCE):
                raise ValidationError(f"{field}.source", f"is stamped {SOURCE!r} on every delta "
                                      f"written over MCP; leave it out (got {given.source!r})")
        if given.kind not in self.allowed:
            raise ValidationError(kind_field, f"this server does not let a caller claim provenance "
                                  f"{given.kind!r}; it allows {', '.join(sorted(self.allowed))} "
                                  f"(start it with --allow-provenance {given.kind} to allow it)")
        return msgspec.structs.replace(given, source=SOURCE)

    def close(self) -> None:
        with self._lock:
            try:
                for index in self._recall.values():
                    index.close()
            finally:
                self._recall.clear()
                self.braid.close()
