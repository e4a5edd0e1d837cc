"""Concurrency and caching for recall: a readers-writer lock and a byte-bounded LRU cache."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class RWLock:
    """Many concurrent queries, or one writer (catch-up, block build, save).

    A reader's fast path is one uncontended mutex round trip; only a reader that meets a writer
    waits on the condition.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._cv = threading.Condition(self._mutex)
        self._readers = 0
        self._writer = False

    # The reader's side takes the mutex by acquire and release, not ``with``: half the cost of a
    # context manager's entry and exit, on every query.
    def acquire_read(self) -> None:
        mutex = self._mutex
        mutex.acquire()
        try:
            while self._writer:
                self._cv.wait()
            self._readers += 1
        finally:
            mutex.release()

    def release_read(self) -> None:
        mutex = self._mutex
        mutex.acquire()
        try:
            self._readers -= 1
            if self._writer and not self._readers:
                self._cv.notify_all()
        finally:
            mutex.release()

    @contextmanager
    def read(self) -> Iterator[None]:
        self.acquire_read()
        try:
            yield
        finally:
            self.release_read()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._mutex:
            while self._writer:
                self._cv.wait()
            self._writer = True
            while self._readers:
                self._cv.wait()
        try:
            yield
        finally:
            with self._mutex:
                self._writer = False
                self._cv.notify_all()


class LRU:
    """A small least-recently-used cache bounded by the bytes of the arrays it holds."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Any, value: Any, size: int) -> None:
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = (value, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, s) = self._items.popitem(last=False)
                self._bytes -= s

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
