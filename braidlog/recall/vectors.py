"""The index's one numpy copy of its vectors, in fixed-size chunks.

Exact search (the positions not in a graph yet, the rest of an as-of cover, a filtered subset)
and block builds read vectors from here: hnswlib's ``get_items`` copies through Python lists
(about 35 ms for 4,096 × 128), far too slow for a query. Chunks of ``CHUNK`` rows never move
once written, so growing the index never holds two copies (a doubling array would, briefly,
for its whole size). ``CHUNK`` is a multiple of the default block (4,096), so an exact part of a
query (shorter than a block and aligned to one) is one slice of one chunk, a view.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np

__all__ = ["Rows", "CHUNK", "trim_heap"]

CHUNK = 1 << 14  # 16,384 rows: at most one partly filled chunk (8 MB at 128 dimensions)


class Rows:
    """Append-only float32 rows of one dimension."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.n = 0
        self._chunks: list[np.ndarray] = []

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self._chunks)

    def append(self, block: np.ndarray) -> None:
        """Add ``block`` (shape (m, dim), float32) after the rows held."""
        at = 0
        while at < len(block):
            i, off = divmod(self.n, CHUNK)
            if i == len(self._chunks):
                self._chunks.append(np.empty((CHUNK, self.dim), dtype=np.float32))
            take = min(CHUNK - off, len(block) - at)
            self._chunks[i][off:off + take] = block[at:at + take]
            self.n += take
            at += take

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

    def write(self, f) -> None:  # noqa: ANN001 (a binary file)
        for lo in range(0, self.n, CHUNK):
            f.write(memoryview(np.ascontiguousarray(self.slice(lo, min(lo + CHUNK, self.n)))).cast("B"))

    @classmethod
    def read(cls, path: str, dim: int, n: int) -> Rows:
        """``n`` rows of ``dim`` float32 from a file ``write`` made; ValueError if its size differs."""
        r = cls(dim)
        with open(path, "rb") as f:
            for lo in range(0, n, CHUNK):
                m = min(CHUNK, n - lo)
                block = np.fromfile(f, dtype="<f4", count=m * dim)
                if block.size != m * dim:
                    raise ValueError("its vectors file is shorter than its meta says")
                r.append(block.reshape(m, dim))
            if f.read(1):
                raise ValueError("its vectors file is longer than its meta says")
        return r


def _libc_trim():
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
