"""The query side shared by the vector and keyword indexes: results, query vectors, top-k
arithmetic and reciprocal-rank fusion for hybrid search."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from msgspec import Struct

from ..delta import GenericDelta, Vector
from ..errors import ValidationError
from ..store.arguments import whole
from .embedder import Embedder, default_embedder, queries

__all__ = ["Hit", "Mode", "MODES", "RRF_K", "fuse", "query_vector", "dots", "top", "normalised"]

Mode = Literal["vector", "keyword", "hybrid"]
MODES = ("vector", "keyword", "hybrid")

#: Reciprocal-rank fusion's constant (Cormack, Clarke and Büttcher, SIGIR 2009): a delta ranked
#: r-th (from 1) by one retriever adds ``1 / (RRF_K + r)`` to its hybrid score. 60 is the paper's
#: value and Elasticsearch's and OpenSearch's default; it keeps one retriever's top hit from
#: outweighing agreement between both.
RRF_K = 60

#: Vector recall's relevance floor: a hit scoring below it (a cosine or inner product below 0,
#: a vector pointing away from the query's) is no match, and is left out rather than padding
#: the answer to k. ``min_score=None`` turns the floor off.
RELEVANCE_FLOOR = 0.0


class Hit(Struct, frozen=True):
    """One recalled delta: its seq, id, score (higher is closer) and the delta.

    The score is the cosine (or inner product) in vector mode, BM25 in keyword mode and the
    reciprocal-rank fusion of both in hybrid mode.
    """

    seq: int
    delta_id: str
    score: float
    delta: GenericDelta | None = None


def fuse(rankings: Sequence[Sequence[tuple[int, str]]], k: int, c: int = RRF_K) -> list[tuple[int, str, float]]:
    """Reciprocal-rank fusion of best-first rankings of (seq, delta id): the k best
    (seq, id, score), score descending, then seq ascending."""
    whole(k, "k")
    if isinstance(c, bool) or not isinstance(c, numbers.Real) or not c >= 0:
        raise ValidationError("c", f"must be a number of at least 0, not {c!r}")
    if isinstance(rankings, (str, bytes)) or not isinstance(rankings, Sequence) or not all(
            isinstance(r, Sequence) and not isinstance(r, (str, bytes)) and all(
                isinstance(h, tuple) and len(h) == 2 and isinstance(h[1], str)
                and not isinstance(h[0], bool) and isinstance(h[0], numbers.Integral) for h in r)
            for r in rankings):
        raise ValidationError("rankings", "must be a list of rankings, each a list of (seq, delta id) pairs")
    score: dict[int, float] = {}
    ids: dict[int, str] = {}
    for ranking in rankings:
        for rank, (seq, delta_id) in enumerate(ranking, start=1):
            score[seq] = score.get(seq, 0.0) + 1.0 / (c + rank)
            ids[seq] = delta_id
    best = sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    return [(seq, ids[seq], s) for seq, s in best]


_F32 = np.dtype(np.float32)


def query_vector(query: Any, *, dim: int | None, metric: str, space: str,
                 embedder: Embedder | None) -> np.ndarray:
    """The query as a float32 vector of the space (embedding text with the embedder), normalised
    for cosine."""
    if type(query) is np.ndarray and query.dtype == _F32 and query.ndim == 1 and query.size == dim:
        # the common query, a float32 vector of the space: the same answer with fewer steps
        sq = float(query.dot(query))
        if 0.0 < sq < math.inf:
            # a Python float scales a float32 array in float32 (the same bits as np.float32(...))
            return query * (1.0 / math.sqrt(sq)) if metric == "cosine" else np.ascontiguousarray(query)
    if isinstance(query, str):
        if not query.strip():
            raise ValidationError("query", "is empty; give some text or a vector")
        embedder = embedder or default_embedder()
        if dim is not None and embedder.dim != dim:
            raise ValidationError(
                "embedder", f"{embedder.name} makes {embedder.dim}-dimensional vectors but space "
                f"{space!r} holds {dim}-dimensional ones; pass the embedder that wrote them (embedder=..., "
                "--embedder SPEC)")
        q = queries(embedder, [query])[0]
        if not q.any():
            raise ValidationError("query", f"{query!r} has no words to embed")
    else:
        if isinstance(query, Vector):
            query = np.frombuffer(query.data, dtype="<f4")
        try:
            q = np.asarray(query, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise ValidationError("query", f"must be a text or a sequence of floats ({e})") from None
        if q.ndim != 1:
            q = q.reshape(-1)
    if q.size == 0:
        raise ValidationError("query", "is an empty vector")
    if dim is not None and q.size != dim:
        raise ValidationError("query", f"has dimension {q.size}; space {space!r} holds {dim}")
    sq = float(q @ q)
    if not math.isfinite(sq):
        if not np.isfinite(q).all():
            raise ValidationError("query", "must be finite (no NaN or infinity)")
        sq = float(np.dot(q.astype(np.float64), q.astype(np.float64)))
    if metric == "cosine":
        if sq == 0:
            raise ValidationError("query", "is the zero vector, which has no direction for cosine")
        return q * np.float32(1.0 / math.sqrt(sq))
    return np.ascontiguousarray(q)


_vecdot = getattr(np, "vecdot", None)  # numpy >= 2


def dots(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``rows @ q`` one row at a time, in the calling thread.

    A matrix-vector product through a multi-threaded BLAS starts BLAS threads of its own; with
    two query threads on two cores that oversubscribes them and costs more than it gives.
    numpy < 2 has no vecdot; einsum's own loops also stay in the calling thread.
    """
    if _vecdot is not None:
        return _vecdot(rows, q)
    return np.einsum("ij,j->i", rows, q)


def top(pos: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (score descending, then position ascending)."""
    order = np.lexsort((pos, -scores))[:k]
    return pos[order], scores[order]


def normalised(block: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), float32."""
    norms = np.linalg.norm(block, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (block / norms).astype(np.float32, copy=False)
