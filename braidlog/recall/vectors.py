"""The index's one numpy copy of its vectors, in fixed-size chunks.

Exact search (the positions not in a graph yet, the rest of an as-of cover, a filtered subset)
and block builds read vectors from here: hnswlib's ``get_items`` copies through Python lists
(about 35 ms for 4,096 × 128), far too slow for a query. Chunks of ``CHUNK`` rows never move
once written, so growing the index never holds two copies (a doubling array would, briefly,
for its whole size). ``CHUNK`` is a multiple of the default block (4,096), so an exact part of a
query (shorter than a block and aligned to one) is one slice of one chunk, a view.

An index kept in a directory (``home``) holds its chunks in file-backed maps, not in the
process's anonymous memory: the chunks it writes in a scratch file there that has no name
(``tempfile.TemporaryFile``: gone with the process, whatever way it ends), with its blocks
reserved before a chunk is mapped (a full disk is an OSError then, not a SIGBUS on a write
later); the full chunks of a saved index read-only from its vectors file. Their pages are the
page cache's, which the kernel writes back and drops under pressure, as it does the log's and the
keyword index's: the process's own memory is then the graphs and the columns. Where a file
cannot be mapped (no room, no directory, not POSIX) the chunks are plain numpy arrays. A child
of ``fork`` that appends moves the chunk it would write into its own memory first, so that it
never writes into pages it shares with its parent.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

__all__ = ["Rows", "CHUNK", "trim_heap"]

CHUNK = 1 << 14  # 16,384 rows: at most one partly filled chunk (8 MB at 128 dimensions)
_F32 = np.dtype("<f4")


class Rows:
    """Append-only float32 rows of one dimension; in file-backed maps in ``home`` when given."""

    def __init__(self, dim: int, home: Path | None = None) -> None:
        self.dim = dim
        self.n = 0
        self._chunks: list[np.ndarray] = []
        self._home = home if os.name == "posix" else None
        self._scratch: Any = None  # the nameless file the chunks written here are mapped from
        self._scratch_chunks = 0
        self._pid = os.getpid()

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self._chunks)

    @property
    def mapped(self) -> int:
        """Bytes of the chunks that are file-backed maps (the page cache's), not anonymous memory."""
        return sum(c.nbytes for c in self._chunks if _in_map(c))

    def append(self, block: np.ndarray) -> None:
        """Add ``block`` (shape (m, dim), float32) after the rows held."""
        if self._pid != os.getpid():
            self._forked()
        at = 0
        while at < len(block):
            i, off = divmod(self.n, CHUNK)
            if i == len(self._chunks):
                self._chunks.append(self._new_chunk())
            take = min(CHUNK - off, len(block) - at)
            self._chunks[i][off:off + take] = block[at:at + take]
            self.n += take
            at += take

    def _new_chunk(self) -> np.ndarray:
        if self._home is not None:
            try:
                return self._mapped_chunk()
            except (OSError, ValueError):  # no room, no directory, no map: plain memory from now on
                self._home = None
        return np.empty((CHUNK, self.dim), dtype=np.float32)

    def _mapped_chunk(self) -> np.ndarray:
        size = CHUNK * self.dim * 4
        stride = -(-size // mmap.ALLOCATIONGRANULARITY) * mmap.ALLOCATIONGRANULARITY
        if self._scratch is None:
            assert self._home is not None
            self._home.mkdir(parents=True, exist_ok=True)
            self._scratch = tempfile.TemporaryFile(prefix="rows-scratch-", dir=self._home)
        fd = self._scratch.fileno()
        at = self._scratch_chunks * stride
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(fd, at, stride)
        else:
            os.ftruncate(fd, at + stride)
        chunk = np.frombuffer(mmap.mmap(fd, size, offset=at), dtype=_F32).reshape(CHUNK, self.dim)
        self._scratch_chunks += 1
        return chunk

    def _forked(self) -> None:
        """In a child of fork: the partly filled chunk, if mapped, is shared with the parent;
        copy it into this process's memory, and take new chunks from memory too."""
        self._pid = os.getpid()
        self._home, self._scratch = None, None
        i = self.n // CHUNK
        if i < len(self._chunks) and _in_map(self._chunks[i]):
            self._chunks[i] = self._chunks[i].copy()

    def slice(self, lo: int, hi: int) -> np.ndarray:
        """Rows [lo, hi): a view when they lie in one chunk, else a copy."""
        i, off = divmod(lo, CHUNK)
        if hi - lo <= CHUNK - off:
            return self._chunks[i][off:off + hi - lo]
        return np.concatenate([self.slice(a, min(hi, (a // CHUNK + 1) * CHUNK))
                               for a in [lo] + list(range((lo // CHUNK + 1) * CHUNK, hi, CHUNK))])

    def take(self, positions: np.ndarray) -> np.ndarray:
        """The rows at sorted ``positions`` (a copy)."""
        out = np.empty((len(positions), self.dim), dtype=np.float32)
        which = positions // CHUNK
        bounds = np.searchsorted(which, np.arange(len(self._chunks) + 1))
        for i in range(len(self._chunks)):
            a, b = bounds[i], bounds[i + 1]
            if a < b:
                out[a:b] = self._chunks[i][positions[a:b] - i * CHUNK]
        return out

    def write(self, f: BinaryIO) -> None:
        for lo in range(0, self.n, CHUNK):
            f.write(np.ascontiguousarray(self.slice(lo, min(lo + CHUNK, self.n))).data.cast("B"))

    @classmethod
    def read(cls, path: str | Path, dim: int, n: int, home: Path | None = None) -> Rows:
        """``n`` rows of ``dim`` float32 from a file ``write`` made; ValueError if its size
        differs. With ``home``, its full chunks are mapped read-only from the file (which must
        then never change in place: saved files are only ever replaced) and later chunks are
        mapped from a scratch file in ``home``."""
        r = cls(dim, home)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < n * dim * 4:
                raise ValueError("its vectors file is shorter than its meta says")
            if size > n * dim * 4:
                raise ValueError("its vectors file is longer than its meta says")
            full = n // CHUNK if r._home is not None else 0
            if full:
                whole = mmap.mmap(f.fileno(), full * CHUNK * dim * 4, access=mmap.ACCESS_READ)
                r._chunks = [np.frombuffer(whole, dtype=_F32, count=CHUNK * dim, offset=i * CHUNK * dim * 4)
                             .reshape(CHUNK, dim) for i in range(full)]
                r.n = full * CHUNK
                f.seek(r.n * dim * 4)
            for lo in range(r.n, n, CHUNK):
                m = min(CHUNK, n - lo)
                r.append(np.fromfile(f, dtype="<f4", count=m * dim).reshape(m, dim))
        return r


def _in_map(a: np.ndarray) -> bool:
    """Whether ``a`` is a view of a memory map."""
    base: Any = a
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(getattr(base, "obj", base), mmap.mmap)  # frombuffer's base: a memoryview


def _libc_trim() -> Any:  # malloc_trim, or None where there is none
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has none)
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return fn


_malloc_trim = _libc_trim()


def trim_heap() -> None:
    """Hand the C heap's free memory back to the system (glibc's ``malloc_trim``; elsewhere
    nothing). A catch-up decodes its deltas a chunk at a time, and the vectors' bytes, freed once
    copied into the rows, stay in the heap as free holes: at 30,000 x 384, some 30 MB of the
    process's memory after the build, which nothing would use again."""
    if _malloc_trim is not None:
        _malloc_trim(0)
