"""One Recall per (braid or store, space, metric), kept for the life of the braid; what
``Braid.recall`` and ``View.recall`` use."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ..store import store_of
from .index import Metric, Recall
from .query import Hit

__all__ = ["recall_for", "recall_at", "close_for", "discard_for"]

_instances: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], Recall]] = weakref.WeakKeyDictionary()
_instances_lock = threading.Lock()


def recall_for(braid: Any, space: str = "default", metric: Metric = "cosine", **options: Any) -> Recall:
    """The Recall of ``braid`` (a Braid or a store) for a space and metric, opened once and kept."""
    with _instances_lock:
        per = _instances.setdefault(braid, {})
        r = per.get((space, metric))
        if r is None:
            r = per[(space, metric)] = Recall(braid, space, metric, **options)
        return r


def recall_at(view: Any, query: Any, k: int = 10, *, space: str = "default", metric: Metric = "cosine",
              **filters: Any) -> list[Hit]:
    """Recall as of a ``View`` (``braid.at(point)``): only deltas up to the view's seq are eligible."""
    return recall_for(view.braid, space, metric).recall(query, k, as_of=view.seq, **filters)


def close_for(braid: Any) -> None:
    """Save and forget every Recall opened for ``braid`` (call before closing it)."""
    with _instances_lock:
        per = _instances.pop(braid, {})
    for r in per.values():
        r.close()


def discard_for(braid: Any) -> None:
    """Forget every Recall and keyword index opened for ``braid`` without saving them (an
    erasure: they hold text and vectors it drops; they are built again from the log on use)."""
    from . import keyword

    with _instances_lock:
        _instances.pop(braid, None)
    with keyword._shared_lock:
        keyword._shared.pop(store_of(braid), None)
