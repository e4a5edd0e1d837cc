"""``LogAccess``: the named seam through which the LMDB-only operations (verify and repair in
check.py, the erasure in erase.py) use an ``LmdbLog``, instead of its private members. The log
hands one out (``LmdbLog._access``); nothing else of the log is reached.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from ..kinds import Registry
from ..store import FullStore, Head, Record
from .env import Env

__all__ = ["LogAccess"]

T = TypeVar("T")


class LogAccess(NamedTuple):
    """What the checks (check.py) and the erasure (erase.py) use of an LmdbLog, and nothing
    more: the store as every store is (its ports), the file it lives in, and its tables inside
    the log's own transactions."""

    store: FullStore
    path: Path  # the store's directory
    readonly: bool
    registry: Registry
    tables: Mapping[str, Any]  # the open LMDB tables by name (lmdb.format.TABLES)
    env: Env  # the shared environment: pinned(), tree_findings(), alone(), rewrite() …
    read: Callable[..., Any]  # read(fn, *, buffers=True): fn(txn) in a read transaction
    write: Callable[[Callable[[Any], T]], T]  # fn(txn) in the write transaction
    head_in: Callable[[Any], tuple[Head, int]]  # (head, high-water time) seen by txn
    decoded: Callable[[int, Any], Record]  # the record of a stored value, or DecodeError
    landed: Callable[[Any, str, str, int], Any]  # the value of the record an index entry names
    alive: Callable[[], Env]  # the environment; StorageError unless the log is open (and not across fork)
    rebind: Callable[[], None]  # take the environment's table handles again (a new file)
    reopened: Callable[[], Any]  # the store opened again, read-only (a forked child's own LmdbLog)
