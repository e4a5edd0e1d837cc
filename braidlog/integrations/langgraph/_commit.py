"""Group commit for the saver: the deltas of ``put`` and ``put_writes`` calls made at once (from
LangGraph's background threads, or from many conversations' ``ainvoke``) share one durable
transaction, so one commit's syncs serve them all.

A call queues its deltas and waits. The first caller to find no commit under way leads: it
takes every batch queued so far, appends them in one ``append_batch`` (one transaction, durable
when it returns), and wakes each caller with its seqs; batches queued meanwhile form the next
group, led by the first of them (LevelDB's writer queue; braidlog/group_commit.py does the same
for any store). Each call still returns only once its deltas are durable, each batch is
contiguous in seq, and batches are written in the order they were queued. If the merged
append is refused, each batch of the group is appended again alone, so only the batch at fault
gets the error.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from ...errors import BraidlogError

__all__ = ["Committer"]

MAX_DELTAS = 4096  # deltas of one group at most (a single larger batch still commits whole)


class _Batch:
    __slots__ = ("deltas", "event", "lead", "done", "seqs", "error")

    def __init__(self, deltas: list[Any]) -> None:
        self.deltas = deltas
        self.event = threading.Event()
        self.lead = self.done = False
        self.seqs: list[int] = []
        self.error: BaseException | None = None


class Committer:
    """``commit(deltas)`` from any thread: their seqs once durable, through ``append(deltas)``
    called by one thread at a time with the deltas of every call queued meanwhile."""

    def __init__(self, append: Callable[[list[Any]], list[int]]) -> None:
        self._append = append
        self._lock = threading.Lock()
        self._queue: deque[_Batch] = deque()
        self._leading = False
        self.commits = 0  # transactions that wrote (for tests and the bench)
        self.batches = 0  # callers' batches they held

    def commit(self, deltas: list[Any]) -> list[int]:
        batch = _Batch(deltas)
        with self._lock:
            self._queue.append(batch)
            lead = not self._leading
            self._leading = True
        if lead:
            self._lead()
        while not batch.done:
            batch.event.wait()
            batch.event.clear()
            if batch.lead and not batch.done:
                batch.lead = False
                self._lead()
        if batch.error is not None:
            raise batch.error
        return batch.seqs

    def _lead(self) -> None:
        group: list[_Batch] = []
        try:
            with self._lock:
                size = 0
                while self._queue and (not group or size + len(self._queue[0].deltas) <= MAX_DELTAS):
                    b = self._queue.popleft()
                    group.append(b)
                    size += len(b.deltas)
            self._write(group)
        finally:
            for b in group:
                b.done = True
                b.event.set()
            with self._lock:
                if self._queue:
                    nxt = self._queue[0]
                    nxt.lead = True
                    nxt.event.set()
                else:
                    self._leading = False

    def _write(self, group: list[_Batch]) -> None:
        if len(group) > 1:
            try:
                seqs = self._append([d for b in group for d in b.deltas])
            except BraidlogError:
                pass  # one batch is at fault: each alone below, so only it fails
            except BaseException as e:
                for b in group:
                    b.error = e
                return
            else:
                at = 0
                for b in group:
                    b.seqs = seqs[at:at + len(b.deltas)]
                    at += len(b.deltas)
                self.commits += 1
                self.batches += len(group)
                return
        for b in group:
            try:
                b.seqs = self._append(b.deltas)
            except BaseException as e:
                b.error = e
            else:
                self.commits += 1
                self.batches += 1
