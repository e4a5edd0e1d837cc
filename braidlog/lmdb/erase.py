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

It uses the log through its ``LogAccess`` (access.py) and its ports, never its private members.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ..delta import GenericDelta, decode_entry
from ..erasure import payload_refs
from ..errors import StorageError, ValidationError
from ..store import FullStore, Record, check_batch
from .access import LogAccess
from .format import U64, delta_of, erased_row, from_u64, open_tables, row_data, row_entry, row_erased_by, u64

__all__ = ["LmdbErasure", "WORKDIR", "rewrite_erased", "clean_leftover", "erase_records", "apply_erasures"]

#: The directory inside the store where an erasure builds the new file (removed when it ends).
WORKDIR = ".erasing"
T = TypeVar("T")


class LmdbErasure:
    """``LmdbLog``'s erase and apply_erasures (``MemoryLog`` has the same two)."""

    def erase(self, seqs: Any, delta: GenericDelta) -> tuple[Record, list[bytes]]:
        """Erase the records at ``seqs`` and append ``delta`` (their ``erased`` delta), leaving
        nothing of them in any file of the store; the erased delta's record and the erased
        records' commitments. Needs the store alone."""
        return erase_records(self._access(), seqs, delta)  # type: ignore[attr-defined]  # the mixin's LmdbLog has _access

    def apply_erasures(self, erase: Any, append: Callable[[Any], T]) -> tuple[T, list[bytes]]:
        """Erase the records ``erase`` names (seq -> the seq of the erased delta) and run
        ``append(store)`` (the batch that holds those erased deltas, written elsewhere: an
        import, a replica's) in one step; what ``append`` returned and the commitments."""
        return apply_erasures(self._access(), dict(erase), append)  # type: ignore[attr-defined]  # the mixin's LmdbLog has _access


def erase_records(log: LogAccess, seqs: Any, delta: GenericDelta) -> tuple[Record, list[bytes]]:
    """``LmdbLog.erase``: the records at ``seqs`` erased and ``delta`` appended, in a new file
    put in place of the old (``rewrite_erased``); the record of ``delta`` and the commitments
    of the erased records, in seq order."""
    seqs = sorted(set(seqs))
    if not seqs:
        raise ValidationError("seqs", "must name at least one seq to erase")
    check_batch([delta], log.registry, erasure=True)  # refused before anything is rewritten

    def append(fresh: FullStore) -> Record:
        # ``salts`` given (none: fresh ones) is how a store is told that the batch is written
        # by an erasure (or reproduced), the only writer an ``erased`` delta may come from
        return fresh.commit([delta], expected_head=fresh.head().seq, salts={})[0]

    return apply_erasures(log, {s: 0 for s in seqs}, append)


def apply_erasures(log: LogAccess, erase: dict[int, int], append: Callable[[Any], T]
                   ) -> tuple[T, list[bytes]]:
    """The records ``erase`` names (seq -> the seq of the erased delta that erases it; 0: the
    first seq ``append`` writes) erased, and ``append(new store)`` run, in a new file put in
    place of the old; what ``append`` returned and the erased records' commitments."""
    seqs = sorted(erase)
    if not seqs:
        raise ValidationError("erase", "must name at least one seq to erase")
    log_db = log.tables["log"]
    values = log.read(lambda txn: {s: txn.get(u64(s), db=log_db) if 1 <= s < 2**63 else None
                                    for s in seqs}, buffers=False)
    drop: set[tuple[bytes, int]] = set()
    commitments = []
    for s, value in values.items():
        if value is None:
            raise ValidationError("seq", f"seq {s} is not in the log")
        if row_erased_by(value) or not row_data(value):
            raise ValidationError("seq", f"seq {s} is already erased")
        drop |= {(key.encode(), s) for key in payload_refs(delta_of(s, value), log.registry)}
        commitments.append(decode_entry(row_entry(value)).commitment)

    def rows(head: int) -> dict[int, bytes]:
        if seqs[-1] > head:  # only a store that shrank: erase holds it alone
            raise ValidationError("seq", f"seq {seqs[-1]} is not in the log (1..{head})")
        return {s: erased_row(values[s], erase[s] or head + 1) for s in seqs}

    derived = [log.path / "recall"]
    return rewrite_erased(log, rows, drop, seqs[0], append, derived), commitments


def clean_leftover(path: Path) -> None:
    """Remove what an erasure killed midway left (its new file, unfinished): called on a
    writable open, which holds the shared lock, so no erasure is running."""
    work = path / WORKDIR
    if work.exists():
        shutil.rmtree(work, ignore_errors=True)


def rewrite_erased(log: LogAccess, rows: Callable[[int], dict[int, bytes]],
                   drop_refs: set[tuple[bytes, int]],
                   keep_checkpoints_below: int, append: Callable[[Any], T],
                   derived: list[Path]) -> T:
    """Write ``log``'s store again with the rows of ``rows(head)`` (seq -> new row) in place of
    the old, the refers-to entries ``drop_refs`` (key, seq) left out and only the projection
    checkpoints below seq ``keep_checkpoints_below`` kept; run ``append(new log)`` on the new
    store (the erased delta); remove the files and directories ``derived``; put the new store
    in place. Returns what ``append`` returned. ``log`` stays open, on the new file."""
    env = log.alive()
    if log.readonly:
        raise StorageError("this store is open read-only", hint="open it without readonly=True")
    work = log.path / WORKDIR
    with env.alone(), env.gate.exclusive():
        clean_leftover(log.path)
        work.mkdir()
        new = work / "store"
        replaced = rows(log.store.head().seq)

        def edit(table: str, pairs: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
            if table == "log":
                return ((k, replaced.get(from_u64(k), v)) for k, v in pairs)
            if table == "refs":
                return ((k, v) for k, v in pairs if (k, from_u64(v)) not in drop_refs)
            if table == "ckpt":
                return ((k, v) for k, v in pairs if from_u64(k[-U64:]) < keep_checkpoints_below)
            return pairs

        env.rewrite(new, edit)
        opener: Any = type(log.store)  # LmdbLog (log.py imports this module, not back)
        fresh = opener(new, durable=True, registry=log.registry)
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
        log.rebind()
        shutil.rmtree(work, ignore_errors=True)
    return result

