"""Erasing records of an LMDB store so that no byte of them is left in any file of its directory.

LMDB never overwrites a page in place and keeps freed pages (and the unused gap inside a live
page) as they were, so an erased value would stay in data.mdb. An erasure therefore writes the
whole store again, record by record, into a new environment beside it (``Env.rewrite``), with
the erased records' rows replaced, the refers-to keys drawn from their payloads and the
projection checkpoints that saw them left out; appends the ``erased`` delta there; removes
the derived files that may hold their text (the recall indexes); and puts the new data.mdb in
place of the old with one rename. A crash before the rename leaves the store as it was (the
half-written copy is removed on the next open); after it, the store is erased and nothing of
the erased records is left in its directory.

It needs the store alone: no other process may have it open (refused, naming the remedy), and
any that opens it meanwhile waits until it is done (lmdb/env.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..errors import StorageError
from .format import U64, from_u64, open_tables

if TYPE_CHECKING:
    from .log import LmdbLog

__all__ = ["WORKDIR", "rewrite_erased", "clean_leftover"]

#: The directory inside the store where an erasure builds the new file (removed when it ends).
WORKDIR = ".erasing"
T = TypeVar("T")


def clean_leftover(path: Path) -> None:
    """Remove what an erasure killed midway left (its new file, unfinished): called on a
    writable open, which holds the shared lock, so no erasure is running."""
    work = path / WORKDIR
    if work.exists():
        shutil.rmtree(work, ignore_errors=True)


def rewrite_erased(log: LmdbLog, rows: dict[int, bytes], drop_refs: set[tuple[bytes, int]],
                   keep_checkpoints_below: int, append: Callable[[LmdbLog], T],
                   derived: list[Path]) -> T:
    """Write ``log``'s store again with the rows of ``rows`` (seq -> new row) in place of the
    old, the refers-to entries ``drop_refs`` (key, seq) left out and only the projection
    checkpoints below seq ``keep_checkpoints_below`` kept; run ``append(new log)`` on the new
    store (the erased delta); remove the files and directories ``derived``; put the new store
    in place. Returns what ``append`` returned. ``log`` stays open, on the new file."""
    from .log import LmdbLog

    env = log._shared_env
    log._alive()
    if log.readonly:
        raise StorageError("this store is open read-only", hint="open it without readonly=True")
    work = log.path / WORKDIR
    with env.alone(), env.gate.exclusive():
        clean_leftover(log.path)
        work.mkdir()
        new = work / "store"

        def edit(table: str, pairs: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
            if table == "log":
                return ((k, rows.get(from_u64(k), v)) for k, v in pairs)
            if table == "refs":
                return ((k, v) for k, v in pairs if (k, from_u64(v)) not in drop_refs)
            if table == "ckpt":
                return ((k, v) for k, v in pairs if from_u64(k[-U64:]) < keep_checkpoints_below)
            return pairs

        env.rewrite(new, edit)
        fresh = LmdbLog(new, durable=True, registry=log.registry)
        try:
            result = append(fresh)
        finally:
            fresh.close()
        for p in derived:  # before the swap: a crash after it must find none of them
            if p.is_dir():
                trash = work / ("derived-" + p.name)
                p.rename(trash)
                shutil.rmtree(trash)
            elif p.exists():
                p.unlink()
        env.replace_file(new / "data.mdb", open_tables)
        log._env, log._db = env.env, env.db
        shutil.rmtree(work, ignore_errors=True)
    return result

