"""Writes that ride in the commit of their thread's next checkpoint.

LangGraph saves a step's task writes while the step's checkpoint is still being put, and puts
the next checkpoint right after that one returns: a ``put``, the writes, the next ``put``, each
waiting for a durable commit of its own. When a task's writes arrive while a ``put`` of their
thread is in flight, they wait (at most ``WAIT`` seconds) for the thread's next ``put``, which
appends them with its checkpoint in one batch: one durable commit where there were two. Each
``put_writes`` still returns only once its record is durable; one whose ride does not come, or
whose ride's batch is refused, commits alone. With no ``put`` in flight (a saver called one call
at a time, a single worker thread) writes never wait.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Rides", "WAIT"]

WAIT = 0.05  # seconds a task's writes wait for their thread's next put, at most


class _Rider:
    __slots__ = ("delta", "event", "taken", "alone")

    def __init__(self, delta: Any) -> None:
        self.delta = delta
        self.event = threading.Event()
        self.taken = self.alone = False


class Rides:
    """The writes waiting for their thread's next put, and the puts in flight, per thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, list[_Rider]] = {}
        self._putting: dict[str, int] = {}

    def putting(self, tid: str, delta: int) -> None:
        """A put of thread ``tid`` begins (+1) or ends (-1)."""
        with self._lock:
            n = self._putting.get(tid, 0) + delta
            if n:
                self._putting[tid] = n
            else:
                self._putting.pop(tid, None)

    def write(self, tid: str, delta: Any, commit: Callable[[list[Any]], Any]) -> None:
        """Make ``delta`` (a task's writes) durable: in the next put's commit when a put of the
        thread is in flight, else (or when none takes it in time) in a commit of its own."""
        rider = _Rider(delta)
        with self._lock:
            ride = tid in self._putting
            if ride:
                self._waiting.setdefault(tid, []).append(rider)
        if not ride:
            commit([delta])
            return
        if not rider.event.wait(WAIT):
            with self._lock:
                if not rider.taken:  # no put came: commit alone
                    self._waiting[tid].remove(rider)
                    if not self._waiting[tid]:
                        del self._waiting[tid]
                    rider.alone = True
            if rider.alone:
                commit([delta])
                return
            rider.event.wait()  # taken just now: its put is committing it
        if rider.alone:  # the put's batch was refused: commit alone, so only a bad one fails
            commit([delta])

    def take(self, tid: str) -> list[_Rider]:
        """The writes of thread ``tid`` waiting for this put, which must then ``settle`` them."""
        with self._lock:
            riders = self._waiting.pop(tid, [])
            for r in riders:
                r.taken = True
            return riders

    @staticmethod
    def settle(riders: list[_Rider], *, committed: bool) -> None:
        """Wake the riders: their writes are durable, or (not committed) to commit alone."""
        for r in riders:
            r.alone = not committed
            r.event.set()
