"""The whole-log ``verify`` on two cores: a forked child checks the records of the log's first
part while this process checks the file's pages, then the rest of the records and the indexes.

Why a child, and why it takes the records: a damaged page can crash the process that reads
through it (LMDB trusts the offsets it finds), so no record is read in this process before the
page check has passed (check.py). The child reads at once; if a damaged page kills it, this
process, which has the page check's finding, reports that as it would have anyway.

The records of [1, X) go to the child and [X, head] to this process, each checked as one pass
checks them (records.check_records): the part from X chains from the hash record X - 1 holds, and
its tree from the nodes stored below it, both of which the child's part checks, so the two parts
check what one pass does. The child sends back its first damage, or the index entries of its
records (records.Keys) and how many each index must hold for them, having looked each up in its
own snapshot (records.lookups_below_mark); this process looks up those of its own records and
checks every table's count against the sum in one transaction, as the one-process verify does.
A damage of the child's part comes before one of this process's part, as it would in order.

Anything else the child meets (an error that is not an IntegrityError, a crash, no answer) or any
finding of the page check sends verify down its one-process path, as if no child had been
forked: what it reports is always what the one-process verify reports. The child is forked only
where that is safe and worth it: a POSIX system, no other thread running (a lock another thread
held at the fork would stay held in the child), a log of ``SPLIT_AT`` records or more.
"""

from __future__ import annotations

import mmap
import os
import pickle
import select
import signal
import struct
import sys
import threading
from collections.abc import Callable
from typing import Any

from ..errors import IntegrityError
from .access import LogAccess
from .records import Keys, check_records, lookups_below_mark

__all__ = ["SPLIT_AT", "SHARE", "Child", "fork"]

#: The smallest log verify splits: below it the fork and the child's start cost more than they save.
SPLIT_AT = 20_000
#: The child's share of the records. This process checks the pages and the rest of the records
#: while the child runs; the child also looks up its records' index entries, this process those
#: of its own after the wait. Measured on two cores, alternating: at 0.62 this process took 8.6 s
#: of CPU time at 1,000,000 records and the child 7.0 (0.87 and 0.72 s at 100,000), so the
#: two end together near 0.68.
SHARE = 0.68
_COUNT = struct.Struct("=Q")  # the child's count of records checked, in the shared counter
_EVERY = 8192  # records between two counts of the child
_TICK = 0.25  # seconds between two progress reports while the child is waited for


class Child:
    """A forked child checking records [1, ``stop``); ``result()`` waits for it, ``done()``
    says how many it has checked so far (a counter it writes in memory shared with it)."""

    def __init__(self, pid: int, fd: int, stop: int, counter: mmap.mmap) -> None:
        self.pid, self.fd, self.stop, self.counter = pid, fd, stop, counter

    def done(self) -> int:
        """The records the child has checked so far (by its last progress report)."""
        return int(_COUNT.unpack_from(self.counter)[0])

    def result(self, waiting: Callable[[], None] | None = None) -> tuple[str, Any]:
        """("keys", (the Keys' columns of its records, how many entries each index must hold
        for them as it looked them up, or None when it found one missing or they were not all
        below the indexed-to mark)), ("damage", the IntegrityError it met first), or ("failed",
        why) when it met anything else or died; ``waiting()`` is called every ``_TICK`` seconds
        until it answers."""
        chunks = []
        with os.fdopen(self.fd, "rb", buffering=0) as r:  # unbuffered: select sees what is left
            while True:
                if waiting is not None and not select.select([r], [], [], _TICK)[0]:
                    waiting()
                    continue
                chunk = r.read(1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        try:
            kind, value = pickle.loads(b"".join(chunks))
        except Exception:  # a child that died before it answered: an empty or cut pipe
            return "failed", f"the child ended with status {status} and no answer"
        if kind == "damage":
            message, seq, expected, found = value
            return kind, IntegrityError(message, seq=seq, expected=expected, found=found)
        return kind, value

    def stop_now(self) -> None:
        """End the child if it still runs (its work is not wanted)."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = 0
            try:
                os.close(self.fd)
            except OSError:
                pass


def fork(log: LogAccess, records: int) -> Child | None:
    """A child checking the first ``SHARE`` of the log's ``records`` (its count as the file
    records it: this process reads nothing through LMDB before the page check), or None where
    none is forked (see the module)."""
    if (records < SPLIT_AT or not hasattr(os, "fork") or sys.platform == "win32"
            or threading.active_count() != 1):
        return None
    stop = 1 + int(records * SHARE)
    counter = mmap.mmap(-1, _COUNT.size)  # anonymous and shared: the child's progress
    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(w)
        return Child(pid, r, stop, counter)
    try:  # the child: nothing of it returns to the caller's code
        os.close(r)
        answer = _check(log, stop, lambda n: _COUNT.pack_into(counter, 0, n))
        with os.fdopen(w, "wb") as out:
            out.write(answer)
    finally:
        os._exit(0)


def _check(log: LogAccess, stop: int, progress: Callable[[int], None]) -> bytes:
    try:
        with log.reopened() as mine:  # the parent's environment is not the child's to use
            acc = mine._access()
            keys = Keys(acc.registry)
            try:
                check_records(acc, 1, stop, progress, keys=keys, every=_EVERY)
            except IntegrityError as e:
                return pickle.dumps(("damage", (str(e), e.seq, e.expected, e.found)))
            tables = acc.tables  # its records' index entries looked up here, in its own snapshot
            wants = acc.read(lambda txn: lookups_below_mark(txn, tables, keys, stop), buffers=False)
            return pickle.dumps(("keys", (keys.columns(looked_up=wants is not None), wants)))
    except BaseException as e:  # anything else: the parent checks these records itself
        return pickle.dumps(("failed", f"{type(e).__name__}: {e}"))
