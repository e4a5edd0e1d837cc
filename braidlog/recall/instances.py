"""One Recall per (braid or store, space, metric), kept for the life of the braid; what
``Braid.recall`` and ``View.recall`` use."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ..errors import ValidationError
from ..store import FullStore, store_of
from .index import Metric, Recall
from .query import Hit

__all__ = ["recall_for", "recall_at", "close_for", "discard_for"]

_instances: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], Recall]] = weakref.WeakKeyDictionary()
_instances_lock = threading.Lock()


def _owner(braid: Any, field: str = "braid") -> Any:
    """``braid`` if it is a Braid or a store (what Recalls are kept for), else ValidationError."""
    if not isinstance(store_of(braid), FullStore):
        raise ValidationError(field, f"must be a Braid or a LogStore, not {type(braid).__name__}")
    return braid


def recall_for(braid: Any, space: str = "default", metric: Metric = "cosine", **options: Any) -> Recall:
    """The Recall of ``braid`` (a Braid or a store) for a space and metric, opened once and kept."""
    _owner(braid)
    if not isinstance(space, str) or not space:
        raise ValidationError("space", f"must be a non-empty string, not {type(space).__name__}")
    if not isinstance(metric, str):
        raise ValidationError("metric", f"must be a string, not {type(metric).__name__}")
    with _instances_lock:
        per = _instances.setdefault(braid, {})
        r = per.get((space, metric))
        if r is None:
            r = per[(space, metric)] = Recall(braid, space, metric, **options)
        return r


def recall_at(view: Any, query: Any, k: int = 10, *, space: str = "default", metric: Metric = "cosine",
              **filters: Any) -> list[Hit]:
    """Recall as of a ``View`` (``braid.at(point)``): only deltas up to the view's seq are eligible."""
    braid, seq = getattr(view, "braid", None), getattr(view, "seq", None)
    if braid is None or isinstance(seq, bool) or not isinstance(seq, int):
        raise ValidationError("view", f"must be a View (braid.at(point)), not {type(view).__name__}")
    return recall_for(braid, space, metric).recall(query, k, as_of=seq, **filters)


def close_for(braid: Any) -> None:
    """Save and forget every Recall opened for ``braid`` (call before closing it)."""
    _owner(braid)
    with _instances_lock:
        per = _instances.pop(braid, {})
    for r in per.values():
        r.close()


def discard_for(braid: Any) -> None:
    """Forget every Recall and keyword index opened for ``braid`` without saving them (an
    erasure: they hold text and vectors it drops; they are built again from the log on use)."""
    from . import keyword

    _owner(braid)
    with _instances_lock:
        _instances.pop(braid, None)
    with keyword._shared_lock:
        keyword._shared.pop(store_of(braid), None)
