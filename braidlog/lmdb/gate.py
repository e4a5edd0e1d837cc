"""``Gate``: lets ``set_mapsize`` wait until no transaction of this process is open (LMDB
requires it), lets a close wait for the threads inside, and tells a forked child whether a
thread was inside when its parent forked. env.py holds one per environment."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StorageError

__all__ = ["Gate", "Shared"]


class Gate:
    """Lets ``set_mapsize`` wait until no transaction of this process is open, and tells a
    forked child whether one was open when its parent forked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._active = 0
        self._exclusive = False
        self._closing = False  # a close waits for the other threads to leave
        self._closed: Path | None = None  # the store's path, once closed
        self._owner: int | None = None
        self._local = threading.local()
        self._shared = Shared(self)

    @property
    def idle(self) -> bool:
        """No thread is inside (read without the lock: for a forked child, where the thread that
        held it may be gone)."""
        return self._active == 0 and not self._exclusive

    def shared(self) -> Shared:
        """Held around every transaction (and anything else that must not meet a map resize);
        a thread already inside may enter again. One object serves every entry: it keeps its
        depth per thread, and costs a lock and no generator on the append path."""
        return self._shared

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """No other thread inside meanwhile; the holding thread may enter again (shared or
        exclusive), as an erasure does for the whole of its work."""
        me = threading.get_ident()
        if self._owner == me:
            yield
            return
        with self._cv:
            while self._exclusive:
                self._cv.wait()
            self._exclusive = True
            while self._active:
                self._cv.wait()
            self._owner = me
        try:
            yield
        finally:
            with self._cv:
                self._owner = None
                self._exclusive = False
                self._cv.notify_all()

    @contextmanager
    def closing(self, path: Path) -> Iterator[None]:
        """Held while the environment closes: waits until no other thread is inside (closing
        LMDB under another thread's transaction crashes the process; transactions are short,
        a scan takes one per chunk), and refuses every later entry with a StorageError."""
        depth = getattr(self._local, "depth", 0)
        with self._cv:
            self._closing = True
            while self._exclusive or self._active > depth:
                self._cv.wait()
            self._closed = path
        yield


class Shared:
    """``Gate.shared()``: entered by any number of threads at once, never while a resize is
    waiting for them to leave (unless the thread is already inside: no deadlock)."""

    __slots__ = ("gate",)

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    def __enter__(self) -> None:
        gate = self.gate
        local = gate._local
        depth = getattr(local, "depth", 0)
        with gate._lock:  # the thread holding it exclusively (an erasure) enters at once
            while gate._exclusive and not depth and gate._owner != threading.get_ident():
                gate._cv.wait()
            if gate._closed is not None:
                raise StorageError(f"the store at {gate._closed} is closed", hint="open it again")
            gate._active += 1
        local.depth = depth + 1

    def __exit__(self, *exc: object) -> None:
        gate = self.gate
        gate._local.depth -= 1
        with gate._lock:
            gate._active -= 1
            if gate._exclusive or gate._closing:  # a resize or a close waits for threads to leave
                gate._cv.notify_all()
