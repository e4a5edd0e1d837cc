"""As-of blocks: immutable hnswlib graphs over aligned runs of positions, so that a query as of
seq k searches exactly the graphs an index built from deltas ``1..k`` alone would have.

Block ``(level, i)`` covers positions ``[i*S, (i+1)*S)`` with ``S = block * fanout**level``. A
query over positions ``[0, m)`` searches the largest blocks that tile it from the left (at most
``fanout - 1`` per level) and searches the rest (fewer than ``block`` positions) exactly. A block
is built once, single-threaded with a fixed seed, from its own vectors only, so it is the same
graph in every index that has it. Each filled level holds every vector once more: the cost of
exact time travel, paid only when as-of queries (or ``seal``) ask for the blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np

from ..store import Progress
from .files import file_digest, save_graph

__all__ = ["Blocks", "new_graph"]

Block = tuple[int, int]


def new_graph(dim: int, capacity: int, *, M: int, ef_construction: int, seed: int, ef: int) -> Any:
    """An empty inner-product hnswlib graph (cosine vectors are normalised before they go in)."""
    g = hnswlib.Index(space="ip", dim=dim)
    g.init_index(max_elements=max(capacity, 1), M=M, ef_construction=ef_construction, random_seed=seed)
    g.set_ef(ef)
    g.set_num_threads(1)
    return g


class Blocks:
    """The as-of blocks of one index: cover arithmetic, building, loading and saving."""

    def __init__(self, *, block: int, fanout: int, M: int, ef_construction: int, seed: int,
                 threads: int, notice: Callable[[str], None]) -> None:
        self.block, self.fanout = block, fanout
        self.M, self.ef_construction, self.seed = M, ef_construction, seed
        self.threads = threads
        self.notice = notice
        self.graphs: dict[Block, Any] = {}
        self.digests: dict[str, bytes] = {}  # file name -> blake3, of the blocks saved on disk

    def clear(self) -> None:
        self.graphs.clear()
        self.digests.clear()

    def size(self, level: int) -> int:
        return self.block * self.fanout ** level

    def cover(self, m: int) -> tuple[list[Block], int]:
        """The largest aligned blocks that tile ``[0, m)`` from the left, and where the rest begins."""
        top = 0
        while self.size(top + 1) <= m:
            top += 1
        out, pos = [], 0
        for level in range(top, -1, -1):
            size = self.size(level)
            while pos + size <= m:
                out.append((level, pos // size))
                pos += size
        return out, pos

    def sealed(self, count: int) -> list[Block]:
        """Every block ``count`` positions fill."""
        out: list[Block] = []
        level = 0
        while self.size(level) <= count:
            out.extend((level, i) for i in range(count // self.size(level)))
            level += 1
        return out

    def nbytes(self, dim: int) -> int:
        """Bytes the built blocks hold (hnswlib's own layout: vector, links, label per element)."""
        return sum(_graph_bytes(g, dim, self.M) for g in self.graphs.values())

    @staticmethod
    def name(b: Block) -> str:
        return f"L{b[0]}-{b[1]}.hnsw"

    def build(self, wanted: list[Block], vectors: Callable[[int, int], np.ndarray], dim: int,
              directory: Path | None, progress: Progress | None = None,
              pool: ThreadPoolExecutor | None = None) -> None:
        """Load or build every block of ``wanted`` not held yet; ``vectors(lo, hi)`` gives the
        (normalised) vectors of positions [lo, hi). Blocks build in parallel, each single-threaded."""
        todo = []
        for b in wanted:
            if b in self.graphs:
                continue
            g = self._load(b, dim, directory)
            if g is not None:
                self.graphs[b] = g
            else:
                todo.append(b)
        if not todo:
            return

        def build(b: Block) -> tuple[Block, Any]:
            level, i = b
            size = self.size(level)
            g = new_graph(dim, size, M=self.M, ef_construction=self.ef_construction, seed=self.seed, ef=1)
            for lo in range(i * size, (i + 1) * size, 65536):  # bounded copies out of the head graph
                hi = min(lo + 65536, (i + 1) * size)
                g.add_items(vectors(lo, hi), np.arange(lo, hi, dtype=np.int64), num_threads=1)
            g.set_ef(1)  # a block's ef comes with each query (as knn_query's k)
            return b, g

        todo.sort(key=lambda b: (-b[0], b[1]))
        own = pool is None
        workers = pool if pool is not None else ThreadPoolExecutor(max_workers=max(1, min(self.threads, len(todo))))
        done = 0
        try:
            for b, g in workers.map(build, todo):
                self.graphs[b] = g
                self._store(b, g, directory)
                done += self.size(b[0])
                if progress is not None:
                    progress(done)
        finally:
            if own:
                workers.shutdown()

    def _load(self, b: Block, dim: int, directory: Path | None) -> Any:
        if directory is None:
            return None
        name = self.name(b)
        want = self.digests.get(name)
        path = directory / name
        if want is None or not path.exists():
            return None
        if file_digest(path) != want:
            self.notice(f"recall block {path} is damaged (digest mismatch); rebuilding it from the log")
            return None
        g = hnswlib.Index(space="ip", dim=dim)
        try:
            g.load_index(str(path), max_elements=self.size(b[0]))
        except RuntimeError as e:
            self.notice(f"recall block {path} does not load ({e}); rebuilding it from the log")
            return None
        if g.get_current_count() != self.size(b[0]):
            self.notice(f"recall block {path} holds {g.get_current_count()} vectors, not "
                        f"{self.size(b[0])}; rebuilding it from the log")
            return None
        g.set_ef(1)
        g.set_num_threads(1)
        return g

    def _store(self, b: Block, g: Any, directory: Path | None) -> None:
        if directory is None:
            return
        name = self.name(b)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self.digests[name] = save_graph(g, directory / name)
        except OSError as e:
            self.notice(f"cannot write recall block {name} ({e}); it stays in memory")
            self.digests.pop(name, None)


def _graph_bytes(g: Any, dim: int, M: int) -> int:
    """hnswlib's memory for a graph, from its layout (hnswalg.h): per slot, level 0 holds the
    vector, a link count, 2*M links of 4 bytes and an 8-byte label, plus a link-list pointer, a
    level and a mutex (about 52 bytes); per element, a label-map entry (about 40 bytes) and
    upper-level links (M links of 4 bytes plus a count) on 1/(M-1) levels on average."""
    slot = dim * 4 + 4 + 2 * M * 4 + 8 + 52
    return int(g.get_max_elements() * slot + g.get_current_count() * (40 + (M * 4 + 4) / (M - 1)))
