"""Group commit: appenders in many threads share one transaction, and so one fsync.

``LmdbLog`` does this itself now (lmdb/env.py's writer queue, docs/operations.md). This wrapper, the
opt-in of earlier releases, is kept for code that uses it and for what the store's queue does not
do: over an ``LmdbLog`` it merges the queued appends into one batch before they reach the store
(one staging, no nested transaction each; docs/benchmarks.md's concurrent rows compare the two),
and over a ``SyncLog``, which holds its lock across each publish, it is what lets appends from
many threads share one commit and one acknowledged publish.

A durable commit costs an fsync, and LMDB admits one writer at a time, so N threads that each
append one delta pay N fsyncs one after another. ``GroupCommitter`` wraps a store: an appender
queues its batch; the first one to find no commit in progress becomes the leader, takes every
batch queued so far, appends them all in one transaction, and wakes their appenders with their
seqs. Those that queued while it was committing form the next group, led by the first of them
(LevelDB's writer queue, PostgreSQL's group commit).

Each appender keeps the semantics of its own ``append_batch``:

- Its batch is validated on its own before it joins a group, so a bad delta fails only the
  batch that holds it, with the store's ``ValidationError``.
- Batches are written in the order they were queued, each batch contiguous in seq.
- If the merged transaction is refused (an id reused with other bytes, a stale expected
  version, a delta id in two appenders' batches), nothing of it is written and every batch of
  the group is committed again alone, so only the batch at fault gets the error.
- A batch with an ``expected_version`` joins a group only when no earlier batch of that group
  appends to its braids, so its check sees the braid exactly as a lone append would.

It is a thin layer: the store does all the writing, through its public ``append_batch``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .delta import GenericDelta, validate
from .errors import BraidlogError
from .store import LogStore

__all__ = ["GroupCommitter", "DEFAULT_MAX_DELTAS"]

DEFAULT_MAX_DELTAS = 10_000


@dataclass(eq=False)
class _Batch:
    """One appender's batch, waiting in the queue for its seqs."""

    deltas: list[GenericDelta]
    expected: int | Mapping[str, int] | None
    braids: frozenset[str]
    event: threading.Event = field(default_factory=threading.Event)
    lead: bool = False
    done: bool = False
    seqs: list[int] | None = None
    error: BaseException | None = None

    def expectation(self) -> dict[str, int] | None:
        """The expected versions as a mapping, or None when there are none."""
        if self.expected is None:
            return None
        if isinstance(self.expected, Mapping):
            return dict(self.expected)
        return {next(iter(self.braids)): self.expected}


class GroupCommitter:
    """Appends from many threads through ``log``, many batches to one transaction.

    ``max_deltas`` caps the deltas of one group (a single larger batch still commits whole).
    ``commits`` counts the transactions that wrote, ``batches`` the appenders' batches written.
    """

    def __init__(self, log: LogStore, *, max_deltas: int = DEFAULT_MAX_DELTAS) -> None:
        if max_deltas < 1:
            raise ValueError("max_deltas must be at least 1")
        self.log = log
        self.max_deltas = max_deltas
        self.commits = 0
        self.batches = 0
        self._lock = threading.Lock()
        self._queue: deque[_Batch] = deque()
        self._leading = False

    def append(self, delta: GenericDelta, *, expected_version: int | None = None) -> int:
        """Append one delta; return its seq once its group is committed."""
        return self.append_batch([delta], expected_version=expected_version)[0]

    def append_batch(self, deltas: Iterable[GenericDelta], *,
                     expected_version: int | Mapping[str, int] | None = None) -> list[int]:
        """Append deltas atomically (in one group's transaction); return their seqs in order."""
        deltas = list(deltas)
        for i, d in enumerate(deltas):
            validate(d, self.log.registry, index=i)
        if not deltas:
            return []
        braids = frozenset(d.braid_id for d in deltas)
        if isinstance(expected_version, int) and len(braids) != 1:
            # The store names this rule; ask it alone so the appender gets its exact error.
            return self.log.append_batch(deltas, expected_version=expected_version)
        batch = _Batch(deltas, expected_version, braids)
        with self._lock:
            self._queue.append(batch)
            lead = not self._leading
            if lead:
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
        assert batch.seqs is not None
        return batch.seqs

    # -- the leader ------------------------------------------------------------------------------
    def _lead(self) -> None:
        """Commit the group at the head of the queue, then pass the lead on (or put it down)."""
        group: list[_Batch] = []
        try:
            with self._lock:
                group = self._take()
            self._commit(group)
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

    def _take(self) -> list[_Batch]:
        """Pop the next group off the queue, in order (called with the lock held)."""
        group: list[_Batch] = []
        touched: set[str] = set()
        size = 0
        while self._queue:
            b = self._queue[0]
            if group and size + len(b.deltas) > self.max_deltas:
                break
            if group and b.expected is not None and b.braids & touched:
                break
            group.append(self._queue.popleft())
            touched |= b.braids
            size += len(b.deltas)
        return group

    def _commit(self, group: list[_Batch]) -> None:
        if len(group) > 1:
            merged: dict[str, int] = {}
            for b in group:
                merged.update(b.expectation() or {})
            try:
                seqs = self.log.append_batch([d for b in group for d in b.deltas],
                                             expected_version=merged or None)
            except BraidlogError:
                pass  # someone's batch is at fault: commit each alone below
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
                b.seqs = self.log.append_batch(b.deltas, expected_version=b.expected)
            except BaseException as e:
                b.error = e
            else:
                self.commits += 1
                self.batches += 1
