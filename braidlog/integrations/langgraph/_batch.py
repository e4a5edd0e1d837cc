"""The async methods' writes, committed in batches by threads of the saver's own.

``aput`` and ``aput_writes`` queue their call and wait for its future. A batch thread takes
everything queued, prepares each call (checks, serialization, placing a checkpoint's values
against its thread's last one), appends all of it in one ``append_batch`` and then resolves the
futures, all of one event loop's in one callback. There are four such threads, one preparing
at a time (so a batch holds everything that came while the one before it was prepared): while
one's commit is being synced, another takes and prepares what came meanwhile, and the store's
writer queue gives the appends waiting the next commit, together. So sixteen conversations
stepping at once cost a thread hop and a commit a batch, not one of each a call, and the event
loop runs LangGraph while a batch is synced (the sync releases the GIL).

What each call is promised does not change: it returns once its own record is durable, or
raises its own error. A call whose arguments are bad fails alone before its batch is appended;
a batch the store refuses is committed again one call at a time, so that only a bad one fails.
Two puts of one thread are never in flight at once: a put is placed against its thread's last
checkpoint, so the second stays queued until the first is committed. Each put of a batch holds
its thread's put lock from placing to committing, as a sync ``put`` does, so sync and async
calls of one thread can be mixed.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict, deque
from typing import Any

from ...errors import BraidlogError
from ._checks import where as _where
from ._puts import put_args

__all__ = ["Batches", "BATCH", "IDLE", "THREADS"]

BATCH = 256  # calls a batch takes at most
THREADS = 4  # batch threads: others take and prepare what comes while one's commit syncs
IDLE = 5.0  # seconds a batch thread waits for work before it stops


class _Call:
    __slots__ = ("put", "args", "tid", "loop", "future", "result", "error")

    def __init__(self, put: bool, args: tuple[Any, ...], loop: asyncio.AbstractEventLoop) -> None:
        self.put, self.args, self.loop = put, args, loop
        self.tid: str | None = None
        if put:
            try:
                self.tid = _where(args[0])[1]
            except Exception:  # a bad config: its put fails when prepared, as a sync put would
                pass
        self.future: asyncio.Future[Any] = loop.create_future()
        self.result: Any = None
        self.error: BaseException | None = None


def _resolve(calls: list[_Call]) -> None:
    for c in calls:
        if c.future.done():  # its caller was cancelled: nothing to tell
            continue
        if c.error is not None:
            c.future.set_exception(c.error)
        else:
            c.future.set_result(c.result)


class Batches:
    """The queue of one saver's async writes and the threads that commit them."""

    def __init__(self, saver: Any) -> None:
        self._saver = saver
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[_Call] = deque()
        self._putting: set[str] = set()  # threads with a put in a batch being committed
        self._preparer: int | None = None  # the batch thread preparing its batch, if one is
        self._threads: list[threading.Thread] = []
        self._closed = False

    async def call(self, put: bool, *args: Any) -> Any:
        """Queue a put (``put``) or a put_writes with these arguments; its result once durable."""
        c = _Call(put, args, asyncio.get_running_loop())
        with self._cond:
            self._queue.append(c)
            self._start()
            if self._preparer is None:  # else the one preparing wakes a thread when it is done
                self._cond.notify()
        return await c.future

    def _start(self) -> None:
        """Start the threads missing (each stops after IDLE seconds without work, so a saver
        left unclosed does not keep them); the caller holds the lock."""
        while len(self._threads) < THREADS:
            t = threading.Thread(target=self._run, name="braidlog-saver-batches", daemon=True)
            self._threads.append(t)
            t.start()

    def close(self) -> None:
        """Commit what is queued, then stop the threads (a later call starts them again)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            threads = list(self._threads)
        for t in threads:
            t.join()
        with self._cond:
            self._closed = False
            if self._queue:  # queued while the threads were stopping, after their last look
                self._start()

    def _take(self) -> list[_Call]:
        """The calls queued, up to BATCH, less the puts of a thread whose put is being
        committed (they stay queued, in order, for a later batch); the caller holds the lock."""
        calls: list[_Call] = []
        kept: list[_Call] = []
        while self._queue and len(calls) < BATCH:
            c = self._queue.popleft()
            if c.tid is not None:
                if c.tid in self._putting:
                    kept.append(c)
                    continue
                self._putting.add(c.tid)
            calls.append(c)
        self._queue.extendleft(reversed(kept))
        return calls

    def _run(self) -> None:
        me = threading.get_ident()
        while True:
            with self._cond:
                calls: list[_Call] = []
                while not calls:
                    if self._preparer is None:  # one thread prepares at a time: batches stay whole
                        calls = self._take()
                        if calls:
                            break
                    if self._closed and not self._queue:
                        self._threads.remove(threading.current_thread())
                        return
                    if not self._cond.wait(IDLE) and not self._queue:  # nothing came: stop
                        self._threads.remove(threading.current_thread())
                        return
                self._preparer = me
            try:
                self._commit(calls)
            finally:
                with self._cond:
                    if self._preparer == me:
                        self._preparer = None
                    self._putting.difference_update(c.tid for c in calls if c.tid is not None)
                    self._cond.notify()  # a put of these threads may be queued: one may take it

    def _prepared(self) -> None:
        """This thread's batch is prepared: the next may be taken while it commits."""
        with self._cond:
            self._preparer = None
            self._cond.notify()

    def _commit(self, calls: list[_Call]) -> None:
        """Prepare ``calls``, append them and resolve their futures."""
        saver = self._saver
        batch: list[tuple[_Call, Any, Any]] = []  # (call, delta, Put or None)
        locks: list[threading.Lock] = []
        done: list[_Call] = []
        try:
            for c in calls:
                try:
                    if c.put:
                        op = put_args(saver.serde, *c.args)
                        lock = saver._put_lock(op.tid)
                        lock.acquire()  # a sync put of the thread may hold it: wait for it
                        locks.append(lock)
                        batch.append((c, saver._put_delta(op), op))
                    else:
                        got = saver._writes_delta(*c.args)
                        if got is None:
                            done.append(c)
                        else:
                            batch.append((c, got[1], None))
                except BaseException as e:  # handed to its caller's future
                    c.error = e
                    done.append(c)
            self._prepared()
            self._append(batch)
            done.extend(c for c, _, _ in batch)
        finally:
            for lock in locks:
                lock.release()
            self._tell(done)

    def _append(self, batch: list[tuple[_Call, Any, Any]]) -> None:
        """Append the batch in one commit, or (refused) each call alone; keep each put done."""
        if not batch:
            return
        saver = self._saver
        try:
            seqs: list[int | None] = list(saver._append([d for _, d, _ in batch]))
        except BraidlogError:
            seqs = []
            for c, delta, _ in batch:
                try:
                    seqs.append(saver._append([delta])[0])
                except BaseException as e:  # handed to its caller's future
                    c.error = e
                    seqs.append(None)
        except BaseException as e:  # nothing of the batch was written: each is told
            for c, _, _ in batch:
                c.error = e
            return
        for (c, _, op), seq in zip(batch, seqs, strict=True):
            if seq is None:
                continue
            if op is not None:
                saver._put_done(op, seq)
                c.result = op.returned

    @staticmethod
    def _tell(calls: list[_Call]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[_Call]] = defaultdict(list)
        for c in calls:
            by_loop[c.loop].append(c)
        for loop, theirs in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve, theirs)
            except RuntimeError:  # the loop is closed: no one waits for these
                pass
