"""Which role a store plays: a replica (it follows a stream) until it is promoted.

A replica's log is written only by its stream. ``Replica`` marks its store on disk (a file
``replica-of`` in the store's directory, naming the stream); while the mark is there the store
refuses to ship, to append synchronously and (through the command line) to append, import or
erase: a local write would fork it from the stream, and a replica shipping as the writer of its
epoch fences the live writer out. ``promote`` makes the replica the writer and removes the mark.
A store in memory has no directory and no mark.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import ReplicationError

__all__ = ["MARK", "mark_replica", "replica_of", "unmark", "refuse_writes"]

MARK = "replica-of"


def _mark_path(store: Any) -> Path | None:
    """Where the mark of ``store`` (a store, a SyncLog, or a store's directory) would be."""
    if isinstance(store, (str, os.PathLike)):
        return Path(os.fspath(store)) / MARK
    path = getattr(getattr(store, "store", store), "path", None)  # a SyncLog wraps its store
    return None if path is None else Path(os.fspath(path)) / MARK


def mark_replica(store: Any, stream: str) -> None:
    """Mark ``store`` a replica of ``stream`` (a no-op in memory or when already marked)."""
    mark = _mark_path(store)
    if mark is not None and mark.parent.is_dir() and not mark.exists() and not getattr(store, "readonly", False):
        mark.write_text(stream + "\n", encoding="utf-8")


def replica_of(store: Any) -> str | None:
    """The stream ``store`` is a replica of, or None (a writer, or a store in memory)."""
    mark = _mark_path(store)
    try:
        return mark.read_text(encoding="utf-8").strip() or "?" if mark is not None else None
    except FileNotFoundError:
        return None


def unmark(store: Any) -> None:
    """Remove the mark: the store is a writer now (``promote``)."""
    mark = _mark_path(store)
    if mark is not None:
        mark.unlink(missing_ok=True)


def refuse_writes(store: Any, what: str) -> None:
    """Raise ReplicationError if ``store`` is a replica that was never promoted."""
    stream = replica_of(store)
    if stream is not None:
        raise ReplicationError(
            f"this store is a replica of stream {stream} and was never promoted: it cannot {what}; "
            "only its stream writes to it. Promote it to make it the writer (`braidlog promote`, "
            "docs/replication.md, Failover), or write to the writer's store",
            hint="braidlog promote --nats URL --stream NAME")
