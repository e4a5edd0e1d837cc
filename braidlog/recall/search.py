"""The search of a vector index: its head graph, its as-of blocks or a braid's own graph, each
over-fetched in proportion to how few of its positions the filters admit, with an exact numpy
search wherever a graph cannot find enough (hnswlib gives up) or few positions are eligible.

``GraphSearch`` is a part of ``Recall`` (index.py): it reads the index's state (the attributes
declared on it) and never changes it, under the read lock the caller holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .columns import NO_FILTER, Filter
from .query import dots, top

__all__ = ["GraphSearch", "EMPTY", "knn"]

_EMPTY_POS = np.zeros(0, dtype=np.int64)
_EMPTY_SCORE = np.zeros(0, dtype=np.float32)
EMPTY = (_EMPTY_POS, _EMPTY_SCORE)
_I64 = np.dtype(np.int64)
_ONE = np.float32(1.0)  # a float32 scalar: no conversion of a Python float on every query


class GraphSearch:
    """The top k positions below m nearest a query, filtered, from the index's graphs."""

    # the state of the index it reads (kept by Recall)
    store: Any
    count: int
    exact_max: int
    exact_ratio: float
    braid_graphs: bool
    _head: Any
    _head_count: int
    _ef: int
    _blocks: Any
    _cols: Any
    _rows: Any
    _cache: Any
    _braid_graph: Callable[[int], tuple[Any, int]]

    def _parts(self, m: int, blocks: list[tuple[int, int]] | None) -> list[tuple[Any, int, int, int]]:
        """(graph or None for exact, lo, hi, ef) of each part of a search over positions [0, m).

        A block's ef is its share of the query's ef (at least 1; knn_query raises it to k): the
        blocks of an as-of query together spend about what one search at the head spends.
        """
        if blocks is None:
            h = min(self._head_count, m) if self._head is not None else 0
            parts = [(self._head, 0, h, self._ef)] if h else []
            return parts + ([(None, h, m, 0)] if m > h else [])
        parts = []
        for level, i in blocks:
            size = self._blocks.size(level)
            parts.append((self._blocks.graphs[(level, i)], i * size, (i + 1) * size,
                          max(1, -(-self._ef * size // m))))
        lo = parts[-1][2] if parts else 0
        return parts + ([(None, lo, m, 0)] if m > lo else [])

    def _search(self, q: np.ndarray, k: int, m: int, blocks: list[tuple[int, int]] | None,
                flt: Filter, pred: Callable[[str], bool] | None) -> tuple[np.ndarray, np.ndarray]:
        if not m:
            return _EMPTY_POS, _EMPTY_SCORE
        head = self._head
        if blocks is None and flt is NO_FILTER and pred is None and m == self._head_count \
                and head is not None:  # the common query: the whole head graph, unfiltered
            found = knn(head, q, min(k, m))
            return self._exact(q, k, 0, m, None, None, flt) if found is None else found
        elig = None if flt is NO_FILTER else self._eligible(flt)
        if elig is not None:
            elig = elig[: int(elig.searchsorted(m))]
            if not len(elig):
                return _EMPTY_POS, _EMPTY_SCORE
            braid = flt.one_braid() if self.braid_graphs and blocks is None and pred is None else None
            if braid is not None and head is not None and len(elig) > self.exact_max:
                return self._in_braid(q, k, m, elig, flt, braid)
        parts = self._parts(m, blocks)
        if len(parts) == 1 and elig is None and pred is None and parts[0][0] is not None \
                and (blocks is not None or parts[0][2] >= self._head_count):
            g, lo, hi, ef = parts[0]
            found = knn(g, q, min(max(k, ef) if blocks else k, hi - lo))
            if found is None:
                return self._exact(q, k, lo, hi, None, None, flt)
            return found[0][:k], found[1][:k]
        each = [self._part(g, lo, hi, ef, q, k, elig, pred, flt) for g, lo, hi, ef in parts]
        pos = np.concatenate([f[0] for f in each])
        scores = np.concatenate([f[1] for f in each])
        return top(pos, scores, k)

    def _in_braid(self, q: np.ndarray, k: int, m: int, elig: np.ndarray, flt: Filter, braid: str
                  ) -> tuple[np.ndarray, np.ndarray]:
        """The best of one braid's positions below ``m`` (``elig``): its graph, over-fetched when
        ``m`` leaves out some of its positions, and the tail not yet in the head graph exactly."""
        g, nodes = self._braid_graph(self._cols.braid_code(braid))
        h = min(m, self._head_count)
        e = int(elig.searchsorted(h))  # the eligible positions the braid graph holds
        found = []
        if e:
            fetch = k if e == nodes else max(k, math.ceil(2 * k * nodes / e))
            while True:
                near = knn(g, q, min(fetch, nodes))
                if near is None:
                    found.append(self._exact(q, k, 0, h, elig[:e], None, flt))
                    break
                pos, scores = near
                if e < nodes:
                    ok = pos < h
                    pos, scores = pos[ok], scores[ok]
                if len(pos) >= min(k, e) or fetch >= nodes:
                    found.append((pos[:k], scores[:k]))
                    break
                fetch *= 2
        if len(elig) > e:
            found.append(self._exact(q, k, h, m, elig[e:], None, flt))
        if len(found) == 1:
            return found[0]
        return top(np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found]), k)

    def _part(self, g: Any, lo: int, hi: int, ef: int, q: np.ndarray, k: int, elig: np.ndarray | None,
              pred: Callable[[str], bool] | None, flt: Filter) -> tuple[np.ndarray, np.ndarray]:
        """The best of positions [lo, hi) the filters admit: from graph ``g`` searched at ``ef``
        (the head graph's own ef is ``self.ef``; a block's is passed as knn_query's k), or exactly.
        The head graph may hold positions past ``hi`` (an as-of query): they are not eligible."""
        size = hi - lo
        head = g is self._head
        nodes = self._head_count if head else size  # what the graph holds
        if elig is not None:
            sub = elig[int(elig.searchsorted(lo)):int(elig.searchsorted(hi))]
            e = len(sub)
            if not e:
                return _EMPTY_POS, _EMPTY_SCORE
        else:
            sub, e = None, size
        if g is None or ((sub is not None or size < nodes)
                         and (e <= self.exact_max or e < self.exact_ratio * nodes)):
            return self._exact(q, k, lo, hi, sub, pred, flt)
        want = min(k, e)
        if sub is None and pred is None and size == nodes:
            fetch = k if head else max(k, ef)
        else:  # the head graph searches at max(its ef, fetch) anyway: ask only for what is needed
            fetch = max(0 if head else ef, k, math.ceil(2 * k * nodes / e))
        while True:
            near = knn(g, q, min(fetch, nodes))
            if near is None:
                break
            pos, scores = near
            if size < nodes and sub is None:
                ok = pos < hi
                pos, scores = pos[ok], scores[ok]
            if sub is not None:
                at = np.minimum(np.searchsorted(sub, pos), e - 1)
                ok = sub[at] == pos
                pos, scores = pos[ok], scores[ok]
            if pred is not None:
                ok = np.fromiter((bool(pred(self._cols.id(p))) for p in pos.tolist()), dtype=bool, count=len(pos))
                pos, scores = pos[ok], scores[ok]
            if len(pos) >= want:
                return pos[:k], scores[:k]
            fetch *= 2
            if fetch > nodes // 4:
                break
        return self._exact(q, k, lo, hi, sub, pred, flt)

    def _exact(self, q: np.ndarray, k: int, lo: int, hi: int, sub: np.ndarray | None,
               pred: Callable[[str], bool] | None, flt: Filter) -> tuple[np.ndarray, np.ndarray]:
        rows_of = self._rows
        assert rows_of is not None
        if sub is None:
            scores = dots(rows_of.slice(lo, hi), q)
            pos = None
        else:
            key = ("rows", flt.key(), lo, hi)
            got = self._cache.get(key)
            if got is None:
                rows = rows_of.take(sub)
                self._cache.put(key, rows, rows.nbytes)
            else:
                rows = got[0]
            scores = dots(rows, q)
            pos = sub
        if pred is None:  # the k best, best first (ties by position), as every answer is
            n = len(scores)
            idx = np.arange(n) if n <= k else np.argpartition(-scores, k - 1)[:k]
            return top(idx + lo if pos is None else pos[idx], scores[idx], k)
        order = np.argsort(-scores, kind="stable")
        keep: list[int] = []
        for i in order.tolist():
            p = i + lo if pos is None else int(pos[i])
            if pred(self._cols.id(p)):
                keep.append(i)
                if len(keep) == k:
                    break
        idx = np.asarray(keep, dtype=np.int64)
        return ((idx + lo) if pos is None else pos[idx]).astype(np.int64), scores[idx]

    def _eligible(self, flt: Filter) -> np.ndarray:
        """The sorted positions the structured filters admit, over every covered vector."""
        key = ("elig", flt.key(), self.count)
        got = self._cache.get(key)
        if got is not None:
            return got[0]
        out = self._cols.eligible(flt, self.store.seq_of)
        self._cache.put(key, out, out.nbytes + 64)
        return out


def knn(g: Any, q: np.ndarray, fetch: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``fetch`` positions of graph ``g`` nearest ``q`` and their similarities, or None when
    the graph cannot find that many (hnswlib raises RuntimeError): every caller then searches
    the same positions exactly."""
    try:
        labels, dist = g.knn_query(q, fetch, 1)  # (k, num_threads): positional is quicker
    except RuntimeError:
        return None
    # Both arrays are fresh (hnswlib's own): read the labels (uint64, below 2**63) as int64 and
    # turn distances into similarities in place, float32 as hnswlib's, with no further copy.
    return labels.view(_I64)[0], np.subtract(_ONE, dist, dist)[0]
