"""Recall: a derived HNSW index over the vectors in the log. The only module that imports hnswlib.

The index is a function of the log. It holds, per vector space, every vector of deltas
``1..covered_seq`` in seq order (a vector's *position* is its rank in that order) and
answers two kinds of query:

- **At the head** (``as_of=None``): one hnswlib graph over every position (the *head graph*),
  grown in place as the log grows, plus an exact numpy search over positions not yet in it.
  Below ``block`` vectors there is no graph and every query is exact.
- **As of seq k** (an explicit ``as_of``): the positions ``0..m`` of deltas ``1..k`` are cut into
  aligned, immutable *blocks*: block ``(level, i)`` covers positions ``[i*S, (i+1)*S)`` with
  ``S = block * fanout**level``. The query searches the largest blocks that fit in ``[0, m)``
  (at most ``fanout - 1`` per level, each at its share of ``ef``) and an exact numpy search over
  the rest (fewer than ``block`` positions). A block is built once, single-threaded with a fixed
  seed, from its own vectors only, so it is the same graph in every index that has it.

"Exactly as of k" therefore means: the eligible set is exactly the vectors of deltas ``1..k``
that pass the filters; positions outside any block are searched exactly; the positions inside
blocks are searched with the very graphs an index built from deltas ``1..k`` alone has. So a
query as of k returns the same hits, in the same order, whether the index was built from the
whole log, from deltas ``1..k`` only, or caught up append by append (same hnswlib build, same
parameters). Approximate stays approximate (recall@10 is measured in bench/test_recall.py);
what never varies is the answer.

Filters (braid, kind, tags, namespace, workspace, a set of eligible delta ids or a predicate over
delta ids) are applied before the top k is cut: each graph is over-fetched in proportion to how
few of its positions are eligible, and a part whose eligible positions are few is searched
exactly over just those, so a query returns k eligible hits whenever k exist.

The index is persisted beside an LMDB store in ``<store>/recall/<space>.<metric>/`` with the
seq and chain hash it covers and a blake3 digest of every file; it is caught up from the log on
open and after appends, and rebuilt when missing, stale (its chain hash is not the log's) or
damaged. For a store in memory it lives in memory. docs/recall.md has the long form.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
import threading
import unicodedata
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import hnswlib
import msgspec
import numpy as np
from msgspec import Struct

from .chain import digest
from .delta import GenericDelta, Vector, new_id
from .errors import ValidationError
from .store import LogStore, Progress, resolve_point

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "Hit",
    "Recall",
    "RecallWarning",
    "Metric",
    "delta_text",
    "embed_delta",
    "recall_for",
    "recall_at",
    "close_for",
    "FORMAT",
]

FORMAT = 1
Metric = Literal["cosine", "ip"]
METRICS = ("cosine", "ip")
DEFAULT_DIM = 512


class RecallWarning(UserWarning):
    """The recall index on disk was ignored and rebuilt from the log; the message says why."""


# -- embedders ---------------------------------------------------------------------------------

@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors: ``embed(texts)`` is a float32 array of shape (len(texts), dim)."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


_WORD = re.compile(r"\w+")
_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have i in is it its of on or that the this to was "
    "we were will with you our your they them their which what who how should would can".split())


def _hash64(feature: str) -> int:
    return int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")


class HashingEmbedder:
    """Hashed words, word pairs and character n-grams in ``dim`` signed buckets, L2-normalised.

    Deterministic, offline and model-free: the same text gives the same vector on every machine.
    It matches shared words and word pieces (``databases`` ~ ``database``), not meaning; plug in
    a real model for that (see docs/recall.md).
    """

    def __init__(self, dim: int = DEFAULT_DIM, *, char_ngrams: tuple[int, ...] = (3, 4, 5),
                 word_weight: float = 1.0, pair_weight: float = 0.5, char_weight: float = 0.6,
                 stopword_weight: float = 0.1) -> None:
        if not isinstance(dim, int) or dim < 8:
            raise ValidationError("dim", f"must be an int of at least 8, not {dim!r}")
        self.dim = dim
        self.char_ngrams = tuple(char_ngrams)
        self.word_weight = word_weight
        self.pair_weight = pair_weight
        self.char_weight = char_weight
        self.stopword_weight = stopword_weight
        self.name = f"hashing-v1-{dim}"
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"

    def _bucket(self, feature: str, weight: float) -> tuple[int, float]:
        h = _hash64(feature)
        return h % self.dim, weight if (h >> 63) & 1 else -weight

    def _word(self, word: str) -> tuple[np.ndarray, np.ndarray]:
        hit = self._cache.get(word)
        if hit is not None:
            return hit
        feats = [self._bucket("w:" + word, self.stopword_weight if word in _STOPWORDS else self.word_weight)]
        padded = f"<{word}>"
        grams = [padded[i:i + n] for n in self.char_ngrams for i in range(len(padded) - n + 1)]
        if grams:
            w = self.char_weight / math.sqrt(len(grams))
            feats.extend(self._bucket("c:" + g, w) for g in grams)
        idx = np.fromiter((f[0] for f in feats), dtype=np.intp, count=len(feats))
        val = np.fromiter((f[1] for f in feats), dtype=np.float32, count=len(feats))
        if len(self._cache) < 200_000:
            self._cache[word] = (idx, val)
        return idx, val

    def words(self, text: str) -> list[str]:
        """The normalised words of a text (NFKC, case-folded)."""
        return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per text; a text without words gives a zero row."""
        if isinstance(texts, str):
            raise ValidationError("texts", "must be a sequence of strings; wrap one text in a list")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in zip(out, texts):
            words = self.words(text)
            for w in words:
                idx, val = self._word(w)
                np.add.at(row, idx, val)
            for a, b in zip(words, words[1:]):
                if a in _STOPWORDS or b in _STOPWORDS:
                    continue
                i, v = self._bucket(f"p:{a} {b}", self.pair_weight)
                row[i] += v
            norm = float(np.linalg.norm(row))
            if norm > 0:
                row /= norm
        return out


_TEXT_KEYS = ("title", "text", "content", "summary", "rationale", "statement", "value", "note",
              "description", "output", "label")


def delta_text(d: GenericDelta) -> str:
    """The text of a delta worth embedding: its known text fields, else every string in its payload."""
    p = d.payload
    parts = [p[k] for k in _TEXT_KEYS if isinstance(p.get(k), str) and p[k].strip()]
    if not parts:
        parts = [s for s in _strings(p) if s.strip()]
    return "\n".join(parts)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            if not (isinstance(key, str) and (key == "id" or key.endswith("_id") or key.startswith("_"))):
                yield from _strings(value[key])
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def embed_delta(d: GenericDelta, embedder: Embedder | None = None, *, space: str = "default") -> GenericDelta:
    """The delta with its vector filled from its text (unchanged if it already has one).

    The vector becomes part of the delta, stored and covered by the hash chain, so recall is
    reproducible from the log alone, without the embedder.
    """
    if d.vector is not None:
        return d
    text = delta_text(d)
    if not text:
        raise ValidationError("payload", f"kind {d.kind!r} delta {d.id} has no text to embed; "
                              "give it a text field or pass a vector")
    embedder = embedder or _default_embedder()
    row = np.asarray(embedder.embed([text]), dtype=np.float32)
    if row.shape != (1, embedder.dim):
        raise ValidationError("embedder", f"returned shape {row.shape}, expected (1, {embedder.dim})")
    return msgspec.structs.replace(d, vector=Vector.of(row[0], space))


# -- results -----------------------------------------------------------------------------------

class Hit(Struct, frozen=True):
    """One recalled delta: its seq, id, similarity score (higher is closer) and the delta."""

    seq: int
    delta_id: str
    score: float
    delta: GenericDelta | None = None


# -- what the index reads from the log ---------------------------------------------------------

class _Scope(Struct):
    namespace: Any = None
    workspace: Any = None


class _Body(Struct):
    id: str
    braid_id: str
    kind: str
    payload: _Scope
    tags: tuple[str, ...] = ()
    vector: Vector | None = None


_body_decoder = msgspec.msgpack.Decoder(_Body)


class _Meta(Struct, frozen=True):
    """The persisted index's facts: what it covers and the digest of every file it names."""

    format: int
    space: str
    metric: str
    params: dict[str, int]
    dim: int
    count: int
    covered_seq: int
    covered_hash: bytes
    generation: str
    files: dict[str, bytes]
    head_count: int


class _Rows(Struct):
    ids: list[str]
    seqs: list[int]
    braid: list[str]
    kind: list[str]
    namespace: list[str]
    workspace: list[str]
    tags: list[list[str]]


_meta_encoder = msgspec.msgpack.Encoder()


def _scope(value: Any) -> str:
    return value if isinstance(value, str) and value else "default"


# -- locking -----------------------------------------------------------------------------------

class _RWLock:
    """Many concurrent queries, or one writer (catch-up, block build, save).

    A reader's fast path is one uncontended mutex round trip; only a reader that meets a writer
    waits on the condition.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._cv = threading.Condition(self._mutex)
        self._readers = 0
        self._writer = False

    def acquire_read(self) -> None:
        with self._mutex:
            while self._writer:
                self._cv.wait()
            self._readers += 1

    def release_read(self) -> None:
        with self._mutex:
            self._readers -= 1
            if self._writer and not self._readers:
                self._cv.notify_all()

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


# -- filters -----------------------------------------------------------------------------------

Where = Collection[str] | Callable[[str], bool] | None


def _names(field: str, value: str | Iterable[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset((value,))
    try:
        out = frozenset(value)
    except TypeError:
        raise ValidationError(field, f"must be a string or an iterable of strings, not {type(value).__name__}") from None
    if not all(isinstance(v, str) for v in out):
        raise ValidationError(field, "must hold strings only")
    return out


class _Filter(Struct, frozen=True):
    braid: frozenset[str] | None = None
    kinds: frozenset[str] | None = None
    tags: frozenset[str] | None = None
    namespace: frozenset[str] | None = None
    workspace: frozenset[str] | None = None
    ids: frozenset[str] | None = None

    def empty(self) -> bool:
        return all(v is None for v in (self.braid, self.kinds, self.tags, self.namespace,
                                       self.workspace, self.ids))

    def key(self) -> tuple:
        return (self.braid, self.kinds, self.tags, self.namespace, self.workspace, self.ids)


def _filter(braid, kinds, tags, namespace, workspace, where) -> tuple[_Filter, Callable[[str], bool] | None]:
    pred = None
    ids = None
    if callable(where):
        pred = where
    elif where is not None:
        ids = _names("where", where)
    return _Filter(_names("braid", braid), _names("kinds", kinds), _names("tags", tags),
                   _names("namespace", namespace), _names("workspace", workspace), ids), pred


_NO_FILTER = _Filter()


class _LRU:
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


# -- the index ---------------------------------------------------------------------------------

_EMPTY_POS = np.zeros(0, dtype=np.int64)
_EMPTY_SCORE = np.zeros(0, dtype=np.float32)


class Recall:
    """The recall index of one vector space of a store (or a Braid's store).

    ``recall(text_or_vector, k, as_of=..., braid=..., kinds=..., tags=..., namespace=...,
    workspace=..., where=...)`` returns up to k ``Hit``s, best first. ``metric`` is "cosine"
    (vectors are normalised) or "ip" (raw inner product). ``directory`` overrides where the index
    is kept (default: ``<store>/recall/`` for an LMDB store, memory otherwise); ``False`` keeps
    it in memory. Tuning: ``M`` and ``ef_construction`` shape the graphs, ``ef`` the search;
    ``block`` and ``fanout`` the as-of blocks; ``exact_max`` and ``exact_ratio`` when a filtered
    part is searched exactly (docs/recall.md). ``follow`` (default True) reads the log head on
    every query at the head and catches up first; with False only ``catch_up()`` advances it.
    """

    def __init__(self, source: Any, space: str = "default", metric: Metric = "cosine",
                 embedder: Embedder | None = None, *, directory: str | os.PathLike[str] | bool | None = None,
                 M: int = 16, ef_construction: int = 100, ef: int = 64, block: int = 4096,
                 fanout: int = 2, exact_max: int = 2048, exact_ratio: float = 0.05,
                 seed: int = 100, threads: int | None = None, save_every: int | None = None,
                 follow: bool = True, progress: Progress | None = None) -> None:
        if metric not in METRICS:
            raise ValidationError("metric", f"must be one of {', '.join(METRICS)}, not {metric!r}")
        if not isinstance(space, str) or not space:
            raise ValidationError("space", "must be a non-empty string")
        for name, value, low in (("M", M, 2), ("ef_construction", ef_construction, 1), ("ef", ef, 1),
                                 ("block", block, 2), ("fanout", fanout, 2), ("exact_max", exact_max, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValidationError(name, f"must be an int of at least {low}, not {value!r}")
        if not 0.0 <= exact_ratio <= 1.0:
            raise ValidationError("exact_ratio", f"must be in [0, 1], not {exact_ratio!r}")
        self.store: LogStore = getattr(source, "log", source)
        if not all(hasattr(self.store, a) for a in ("scan_bodies", "hash_at", "head", "read")):
            raise ValidationError("source", f"must be a Braid or a LogStore, not {type(source).__name__}; "
                                  "for a view (braid.at(point)) use recall_at(view, ...)")
        self.space = space
        self.metric = metric
        self.embedder = embedder
        self.M, self.ef_construction, self._ef = M, ef_construction, ef
        self.block, self.fanout, self.seed = block, fanout, seed
        self.exact_max, self.exact_ratio = exact_max, exact_ratio
        self.threads = threads or os.cpu_count() or 1
        self.save_every = save_every if save_every is not None else block
        self.follow = follow
        self.notices: list[str] = []
        self.directory = self._directory(directory)
        self._lock = _RWLock()
        self._cache = _LRU(64 << 20)
        self._reset()
        if self.directory is not None:
            self._load()
        self.catch_up(progress=progress)

    # -- state ---------------------------------------------------------------------------------
    @property
    def params(self) -> dict[str, int]:
        """The parameters the graphs depend on; an index built with others is rebuilt."""
        return {"M": self.M, "ef_construction": self.ef_construction, "block": self.block,
                "fanout": self.fanout, "seed": self.seed}

    def _reset(self) -> None:
        self.dim: int | None = None
        self.count = 0
        self.covered_seq = 0
        self.covered_hash = self.store.hash_at(0)
        self._vecs = np.zeros((0, 0), dtype=np.float32)
        self._seqs = np.zeros(0, dtype=np.int64)
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._cols: dict[str, list[str]] = {"braid": [], "kind": [], "namespace": [], "workspace": []}
        self._tags: list[list[str]] = []
        self._post: dict[tuple[str, str], list[int]] = {}
        self._head: Any = None
        self._head_count = 0
        self._blocks: dict[tuple[int, int], Any] = {}
        self._block_digests: dict[str, bytes] = {}
        self._saved_count = 0
        self._generation = ""
        self._dirty = False
        self._cache.clear()

    @property
    def ef(self) -> int:
        return self._ef

    @ef.setter
    def ef(self, value: int) -> None:
        if not isinstance(value, int) or value < 1:
            raise ValidationError("ef", f"must be an int of at least 1, not {value!r}")
        with self._lock.write():
            self._ef = value
            if self._head is not None:
                self._head.set_ef(value)

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return (f"Recall(space={self.space!r}, metric={self.metric!r}, vectors={self.count}, "
                f"covered_seq={self.covered_seq})")

    def _notice(self, message: str) -> None:
        self.notices.append(message)
        warnings.warn(message, RecallWarning, stacklevel=3)

    # -- following the log -----------------------------------------------------------------------
    def catch_up(self, *, progress: Progress | None = None) -> int:
        """Add the vectors of every delta appended since the covered seq; the seq now covered."""
        head = self.store.head()
        if head.seq == self.covered_seq:
            return head.seq
        with self._lock.write():
            self._catch_up(head.seq, progress)
            due = self.count - self._saved_count >= self.save_every
        if due and self.directory is not None:
            self.save()
        return self.covered_seq

    def _catch_up(self, stop: int, progress: Progress | None, *, grow: bool = True) -> None:
        if stop <= self.covered_seq:
            return
        spaces = getattr(self.store, "spaces", None)
        if not self.count and spaces is not None and self.space not in spaces():
            # No vector of this space in the store (listed after the head ``stop`` was read, so a
            # space with a vector at or before it is there): nothing to scan, nothing to save.
            self.covered_seq, self.covered_hash = stop, self.store.hash_at(stop)
            return
        start = self.covered_seq + 1
        rows: list[tuple[int, _Body]] = []
        last_hash = self.covered_hash
        for seq, h, body in self.store.scan_bodies(start, stop + 1):
            last_hash = h
            b = _body_decoder.decode(memoryview(body)[8:])
            if b.vector is not None and b.vector.space == self.space:
                rows.append((seq, b))
        if rows:
            self._add_rows(rows)
            if grow:
                self._grow_head(progress)
        self.covered_seq = stop
        self.covered_hash = last_hash
        self._dirty = True
        if progress is not None:
            progress(stop)

    def _add_rows(self, rows: list[tuple[int, _Body]]) -> None:
        if self.dim is None:
            self.dim = rows[0][1].vector.dim  # type: ignore[union-attr]
        n, need = self.count, self.count + len(rows)
        if need > len(self._vecs):
            cap = max(need, 2 * len(self._vecs), 1024)
            vecs = np.zeros((cap, self.dim), dtype=np.float32)
            if n:
                vecs[:n] = self._vecs[:n]
            seqs = np.zeros(cap, dtype=np.int64)
            seqs[:n] = self._seqs[:n]
            self._vecs, self._seqs = vecs, seqs
        block = np.frombuffer(b"".join(b.vector.data for _, b in rows), dtype="<f4")  # type: ignore[union-attr]
        if block.size != len(rows) * self.dim:
            raise ValidationError("vector", f"space {self.space!r} holds vectors of different dimensions "
                                  "in the log; the log was not written by braidlog")
        block = block.reshape(len(rows), self.dim)
        if self.metric == "cosine":
            block = _normalised(block)
        self._vecs[n:need] = block
        for i, (seq, b) in enumerate(rows, start=n):
            self._seqs[i] = seq
            self._index_row(i, b.id, b.braid_id, b.kind, _scope(b.payload.namespace),
                            _scope(b.payload.workspace), list(b.tags))
        self.count = need

    def _index_row(self, i: int, delta_id: str, braid: str, kind: str, namespace: str,
                   workspace: str, tags: list[str]) -> None:
        self._ids.append(delta_id)
        self._pos[delta_id] = i
        post = self._post
        for field, value in (("braid", braid), ("kind", kind), ("namespace", namespace),
                             ("workspace", workspace)):
            self._cols[field].append(value)
            post.setdefault((field, value), []).append(i)
        self._tags.append(tags)
        for t in set(tags):
            post.setdefault(("tag", t), []).append(i)

    def _grow_head(self, progress: Progress | None) -> None:
        """Insert the positions not yet in the head graph (once there are ``block`` vectors)."""
        if self.count < self.block or self._head_count == self.count:
            return
        if self._head is None:
            self._head = self._graph(max(self.count, 2 * self.block))
        g = self._head
        if g.get_max_elements() < self.count:
            g.resize_index(max(self.count, 2 * g.get_max_elements()))
        chunk = 4096
        for lo in range(self._head_count, self.count, chunk):
            hi = min(lo + chunk, self.count)
            g.add_items(self._vecs[lo:hi], np.arange(lo, hi, dtype=np.int64), num_threads=1)
            self._head_count = hi
            if progress is not None:
                progress(int(self._seqs[hi - 1]))

    def _graph(self, capacity: int) -> Any:
        g = hnswlib.Index(space="ip", dim=self.dim)
        g.init_index(max_elements=max(capacity, 1), M=self.M, ef_construction=self.ef_construction,
                     random_seed=self.seed)
        g.set_ef(self._ef)
        g.set_num_threads(1)
        return g

    # -- blocks ----------------------------------------------------------------------------------
    def _size(self, level: int) -> int:
        return self.block * self.fanout ** level

    def _cover(self, m: int) -> tuple[list[tuple[int, int]], int]:
        """The largest aligned blocks that tile ``[0, m)`` from the left, and where the rest begins."""
        top = 0
        while self._size(top + 1) <= m:
            top += 1
        out, pos = [], 0
        for level in range(top, -1, -1):
            size = self._size(level)
            while pos + size <= m:
                out.append((level, pos // size))
                pos += size
        return out, pos

    def sealed(self) -> list[tuple[int, int]]:
        """Every block the covered vectors fill: (level, index) pairs."""
        out = []
        level = 0
        while self._size(level) <= self.count:
            out.extend((level, i) for i in range(self.count // self._size(level)))
            level += 1
        return out

    def seal(self, *, progress: Progress | None = None) -> int:
        """Build every filled block now (as-of queries then never wait for one); the number built."""
        self.catch_up()
        with self._lock.write():
            missing = [b for b in self.sealed() if b not in self._blocks]
            self._build_blocks(missing, progress)
        if missing and self.directory is not None:
            self.save()
        return len(missing)

    def _ensure_blocks(self, wanted: list[tuple[int, int]]) -> None:
        if all(b in self._blocks for b in wanted):
            return
        with self._lock.write():
            self._build_blocks([b for b in wanted if b not in self._blocks], None)

    def _build_blocks(self, wanted: list[tuple[int, int]], progress: Progress | None,
                      pool: ThreadPoolExecutor | None = None) -> None:
        todo = []
        for b in wanted:
            g = self._load_block(b)
            if g is not None:
                self._blocks[b] = g
            else:
                todo.append(b)
        if not todo:
            return

        def build(b: tuple[int, int]) -> tuple[tuple[int, int], Any]:
            level, i = b
            size = self._size(level)
            g = self._graph(size)
            g.add_items(self._vecs[i * size:(i + 1) * size],
                        np.arange(i * size, (i + 1) * size, dtype=np.int64), num_threads=1)
            g.set_ef(1)  # a block's ef comes with each query (as knn_query's k)
            return b, g

        todo.sort(key=lambda b: (-b[0], b[1]))
        own = pool is None
        if own:
            pool = ThreadPoolExecutor(max_workers=max(1, min(self.threads, len(todo))))
        done = 0
        try:
            for b, g in pool.map(build, todo):  # type: ignore[union-attr]
                self._blocks[b] = g
                self._store_block(b, g)
                done += self._size(b[0])
                if progress is not None:
                    progress(done)
        finally:
            if own:
                pool.shutdown()  # type: ignore[union-attr]

    @staticmethod
    def _block_name(b: tuple[int, int]) -> str:
        return f"L{b[0]}-{b[1]}.hnsw"

    def _load_block(self, b: tuple[int, int]) -> Any:
        if self.directory is None:
            return None
        name = self._block_name(b)
        want = self._block_digests.get(name)
        path = self.directory / name
        if want is None or not path.exists():
            return None
        if _file_digest(path) != want:
            self._notice(f"recall block {path} is damaged (digest mismatch); rebuilding it from the log")
            return None
        g = hnswlib.Index(space="ip", dim=self.dim)
        try:
            g.load_index(str(path), max_elements=self._size(b[0]))
        except RuntimeError as e:
            self._notice(f"recall block {path} does not load ({e}); rebuilding it from the log")
            return None
        if g.get_current_count() != self._size(b[0]):
            self._notice(f"recall block {path} holds {g.get_current_count()} vectors, not "
                         f"{self._size(b[0])}; rebuilding it from the log")
            return None
        g.set_ef(1)
        g.set_num_threads(1)
        return g

    def _store_block(self, b: tuple[int, int], g: Any) -> None:
        if self.directory is None:
            return
        name = self._block_name(b)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._block_digests[name] = _save_graph(g, self.directory / name)
        except OSError as e:
            self._notice(f"cannot write recall block {name} ({e}); it stays in memory")
            self._block_digests.pop(name, None)

    # -- persistence -----------------------------------------------------------------------------
    def _directory(self, directory: Any) -> Path | None:
        if directory is False:
            return None
        if directory is None or directory is True:
            root = getattr(self.store, "path", None)
            if root is None:
                if directory is True:
                    raise ValidationError("directory", "this store lives in memory; pass a directory path")
                return None
            base = Path(root) / "recall"
        else:
            base = Path(directory)
        slug = re.sub(r"[^A-Za-z0-9_.-]", "_", self.space)[:40]
        if slug != self.space:
            slug += "-" + digest(self.space.encode()).hex()[:12]
        return base / f"{slug}.{self.metric}"

    def save(self) -> bool:
        """Write the index beside the store (atomically: the meta file is replaced last); True if
        written. A space that holds no vector yet leaves no directory behind (a mistyped space
        name must not litter the store)."""
        if self.directory is None or (self.count == 0 and not self.directory.exists()):
            return False
        with self._lock.write():
            try:
                self._save()
            except OSError as e:
                self._notice(f"cannot write the recall index to {self.directory} ({e}); it stays in memory")
                return False
        return True

    def _save(self) -> None:
        d = self.directory
        assert d is not None
        d.mkdir(parents=True, exist_ok=True)
        gen = new_id()
        files: dict[str, bytes] = {}
        n = self.count
        rows = _Rows(self._ids[:n], [int(s) for s in self._seqs[:n]], self._cols["braid"][:n],
                     self._cols["kind"][:n], self._cols["namespace"][:n], self._cols["workspace"][:n],
                     self._tags[:n])
        files[f"rows-{gen}.msgpack"] = _write(d / f"rows-{gen}.msgpack", msgspec.msgpack.encode(rows))
        files[f"vectors-{gen}.f32"] = _write(d / f"vectors-{gen}.f32", self._vecs[:n].tobytes())
        if self._head is not None:
            files[f"head-{gen}.hnsw"] = _save_graph(self._head, d / f"head-{gen}.hnsw")
        files.update(self._block_digests)
        meta = _Meta(FORMAT, self.space, self.metric, self.params, self.dim or 0, n,
                     self.covered_seq, self.covered_hash, gen, files, self._head_count)
        _write(d / "meta.msgpack", _meta_encoder.encode(meta))
        for p in d.iterdir():
            if p.name != "meta.msgpack" and p.name not in files and p.name.split("-")[0] in ("rows", "vectors", "head") \
                    and not p.name.endswith(".tmp"):
                p.unlink(missing_ok=True)
        self._saved_count = n
        self._generation = gen
        self._dirty = False

    def _load(self) -> None:
        d = self.directory
        assert d is not None
        path = d / "meta.msgpack"
        if not path.exists():
            return
        why = self._load_from(d)
        if why is not None:
            self._notice(f"recall index at {d} ignored: {why}; rebuilding it from the log")
            self._reset()
            shutil.rmtree(d, ignore_errors=True)

    def _load_from(self, d: Path) -> str | None:
        try:
            meta = msgspec.msgpack.decode((d / "meta.msgpack").read_bytes(), type=_Meta)
        except (OSError, msgspec.DecodeError) as e:
            return f"its meta file does not decode ({e})"
        if meta.format != FORMAT:
            return f"format {meta.format}, this braidlog reads {FORMAT}"
        if meta.space != self.space or meta.metric != self.metric:
            return f"it indexes space {meta.space!r} with {meta.metric}"
        if meta.params != self.params:
            return f"it was built with {meta.params}, this index uses {self.params}"
        head = self.store.head()
        if meta.covered_seq > head.seq:
            return f"it covers seq {meta.covered_seq} but the log ends at {head.seq} (stale)"
        if self.store.hash_at(meta.covered_seq) != meta.covered_hash:
            return (f"its chain hash at seq {meta.covered_seq} is not the log's (stale: the log it "
                    "was built from is not this one)")
        for name, want in meta.files.items():
            if name.startswith(("rows-", "vectors-", "head-")):
                p = d / name
                if not p.exists():
                    return f"{name} is missing"
                if _file_digest(p) != want:
                    return f"{name} is damaged (digest mismatch)"
        gen = meta.generation
        n = meta.count
        try:
            rows = msgspec.msgpack.decode((d / f"rows-{gen}.msgpack").read_bytes(), type=_Rows)
        except msgspec.DecodeError as e:
            return f"its rows do not decode ({e})"
        vecs = np.fromfile(d / f"vectors-{gen}.f32", dtype=np.float32)
        if n and (meta.dim <= 0 or vecs.size != n * meta.dim or len(rows.ids) != n):
            return "its rows and vectors disagree on the count"
        if n:
            self.dim = meta.dim
            self._vecs = vecs.reshape(n, meta.dim).copy()
            self._seqs = np.asarray(rows.seqs, dtype=np.int64)
            for i in range(n):
                self._index_row(i, rows.ids[i], rows.braid[i], rows.kind[i], rows.namespace[i],
                                rows.workspace[i], rows.tags[i])
            self.count = n
        if meta.head_count:
            g = hnswlib.Index(space="ip", dim=meta.dim)
            try:
                g.load_index(str(d / f"head-{gen}.hnsw"), max_elements=max(n, 2 * self.block))
            except RuntimeError as e:
                return f"its head graph does not load ({e})"
            if g.get_current_count() != meta.head_count:
                return "its head graph holds another count than its meta says"
            g.set_ef(self._ef)
            g.set_num_threads(1)
            self._head, self._head_count = g, meta.head_count
        self._block_digests = {k: v for k, v in meta.files.items() if k.startswith("L")}
        self.covered_seq, self.covered_hash = meta.covered_seq, meta.covered_hash
        self._saved_count = n
        self._generation = gen
        return None

    def rebuild(self, *, progress: Progress | None = None, blocks: bool = True) -> int:
        """Drop the index and build it again from the log; the seq covered.

        ``progress(seq)`` follows the head graph; with ``blocks`` (the default) every filled
        block is built too, in parallel with it, so as-of queries never wait for one.
        """
        with self._lock.write():
            self._reset()
            if self.directory is not None:
                shutil.rmtree(self.directory, ignore_errors=True)
            self._catch_up(self.store.head().seq, None, grow=False)
            with ThreadPoolExecutor(max_workers=max(1, self.threads)) as pool:
                head = pool.submit(self._grow_head, progress)
                if blocks:
                    self._build_blocks(self.sealed(), None, pool)
                head.result()
            if progress is not None:
                progress(self.covered_seq)
        if self.directory is not None:
            self.save()
        return self.covered_seq

    def close(self) -> None:
        """Save the index if it changed since it was last saved."""
        if self._dirty and self.directory is not None:
            self.save()

    # -- querying --------------------------------------------------------------------------------
    def vector(self, query: str | Sequence[float] | np.ndarray | Vector) -> np.ndarray:
        """The query as a float32 vector of this space (embedding text with the embedder)."""
        if isinstance(query, str):
            if not query.strip():
                raise ValidationError("query", "is empty; give some text or a vector")
            embedder = self.embedder or _default_embedder()
            if self.dim is not None and embedder.dim != self.dim:
                raise ValidationError(
                    "embedder", f"{embedder.name} makes {embedder.dim}-dimensional vectors but space "
                    f"{self.space!r} holds {self.dim}-dimensional ones; pass the embedder that wrote them")
            q = np.asarray(embedder.embed([query]), dtype=np.float32)[0]
            if not q.any():
                raise ValidationError("query", f"{query!r} has no words to embed")
        else:
            if isinstance(query, Vector):
                query = np.frombuffer(query.data, dtype="<f4")
            q = np.asarray(query, dtype=np.float32)
            if q.ndim != 1:
                q = q.reshape(-1)
        if q.size == 0:
            raise ValidationError("query", "is an empty vector")
        if self.dim is not None and q.size != self.dim:
            raise ValidationError("query", f"has dimension {q.size}; space {self.space!r} holds {self.dim}")
        sq = float(q @ q)
        if not math.isfinite(sq):
            if not np.isfinite(q).all():
                raise ValidationError("query", "must be finite (no NaN or infinity)")
            sq = float(np.dot(q.astype(np.float64), q.astype(np.float64)))
        if self.metric == "cosine":
            if sq == 0:
                raise ValidationError("query", "is the zero vector, which has no direction for cosine")
            return q * np.float32(1.0 / math.sqrt(sq))
        return np.ascontiguousarray(q)

    def resolve(self, point: int | str | datetime | None) -> int | None:
        """The seq an as-of point names (a seq, a delta id or a datetime); None for the head."""
        if point is None:
            return None
        return resolve_point(self.store, point, "as_of")

    def search(self, query: Any, k: int = 10, *, as_of: int | str | datetime | None = None,
               braid: str | Iterable[str] | None = None, kinds: str | Iterable[str] | None = None,
               tags: str | Iterable[str] | None = None, namespace: str | Iterable[str] | None = None,
               workspace: str | Iterable[str] | None = None, where: Where = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """The top k as two arrays, best first: seqs (int64) and scores (float32)."""
        pos, scores = self._query(query, k, as_of, braid, kinds, tags, namespace, workspace, where)
        return self._seqs[pos], scores

    def recall(self, query: Any, k: int = 10, *, as_of: int | str | datetime | None = None,
               braid: str | Iterable[str] | None = None, kinds: str | Iterable[str] | None = None,
               tags: str | Iterable[str] | None = None, namespace: str | Iterable[str] | None = None,
               workspace: str | Iterable[str] | None = None, where: Where = None,
               deltas: bool = True) -> list[Hit]:
        """The k deltas closest to ``query`` (text or vector) among those the filters admit, best first.

        ``as_of`` (a seq, delta id or datetime) sees only deltas up to it. ``braid``, ``kinds``,
        ``namespace`` and ``workspace`` admit any of the values given; ``tags`` requires every tag
        given; ``where`` is a collection of eligible delta ids or a predicate over delta ids (for
        projection state, e.g. only active decisions). Every filter applies before the top k is cut.
        """
        pos, scores = self._query(query, k, as_of, braid, kinds, tags, namespace, workspace, where)
        read = self.store.read
        return [Hit(int(self._seqs[p]), self._ids[p], float(s), read(int(self._seqs[p])).delta if deltas else None)
                for p, s in zip(pos.tolist(), scores.tolist())]

    def _query(self, query, k, as_of, braid, kinds, tags, namespace, workspace, where):
        if type(k) is not int and not isinstance(k, np.integer) or isinstance(k, bool) or k < 1:
            raise ValidationError("k", f"must be an int of at least 1, not {k!r}")
        k = int(k)
        if braid is None and kinds is None and tags is None and namespace is None and workspace is None \
                and where is None:
            flt, pred = _NO_FILTER, None
        else:
            flt, pred = _filter(braid, kinds, tags, namespace, workspace, where)
        if as_of is None:
            seq = None
            if self.follow and self.store.head().seq != self.covered_seq:
                self.catch_up()
        else:
            seq = self.resolve(as_of)
            if seq > self.covered_seq:
                self.catch_up()
        q = self.vector(query)
        lock = self._lock
        while True:
            lock.acquire_read()
            try:
                if not self.count:
                    return _EMPTY_POS, _EMPTY_SCORE
                if seq is None:
                    return self._search(q, k, self.count, None, flt, pred)
                m = int(np.searchsorted(self._seqs[:self.count], seq, side="right"))
                blocks = self._cover(m)[0]
                if all(b in self._blocks for b in blocks):
                    return self._search(q, k, m, blocks, flt, pred)
            finally:
                lock.release_read()
            self._ensure_blocks(blocks)

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
            size = self._size(level)
            parts.append((self._blocks[(level, i)], i * size, (i + 1) * size, max(1, -(-self._ef * size // m))))
        lo = parts[-1][2] if parts else 0
        return parts + ([(None, lo, m, 0)] if m > lo else [])

    def _search(self, q: np.ndarray, k: int, m: int, blocks: list[tuple[int, int]] | None,
                flt: _Filter, pred: Callable[[str], bool] | None) -> tuple[np.ndarray, np.ndarray]:
        if not m:
            return _EMPTY_POS, _EMPTY_SCORE
        elig = None if flt is _NO_FILTER or flt.empty() else self._eligible(flt)
        if elig is not None:
            elig = elig[: int(np.searchsorted(elig, m))]
            if not len(elig):
                return _EMPTY_POS, _EMPTY_SCORE
        parts = self._parts(m, blocks)
        if len(parts) == 1 and elig is None and pred is None and parts[0][0] is not None:
            g, lo, hi, ef = parts[0]
            try:
                labels, dist = g.knn_query(q, k=min(max(k, ef) if blocks else k, hi - lo), num_threads=1)
            except RuntimeError:  # the graph could not find k: search the part exactly
                return self._exact(q, k, lo, hi, None, None, flt)
            return labels[0, :k], 1.0 - dist[0, :k]
        found = [self._part(g, lo, hi, ef, q, k, elig, pred, flt) for g, lo, hi, ef in parts]
        pos = np.concatenate([f[0] for f in found])
        scores = np.concatenate([f[1] for f in found])
        return _top(pos, scores, k)

    def _part(self, g: Any, lo: int, hi: int, ef: int, q: np.ndarray, k: int, elig: np.ndarray | None,
              pred: Callable[[str], bool] | None, flt: _Filter) -> tuple[np.ndarray, np.ndarray]:
        """The best of positions [lo, hi) the filters admit: from graph ``g`` searched at ``ef``
        (the head graph's own ef is ``self.ef``; a block's is passed as knn_query's k), or exactly."""
        size = hi - lo
        if elig is not None:
            sub = elig[int(np.searchsorted(elig, lo)):int(np.searchsorted(elig, hi))]
            e = len(sub)
            if not e:
                return _EMPTY_POS, _EMPTY_SCORE
        else:
            sub, e = None, size
        if g is None or (sub is not None and (e <= self.exact_max or e < self.exact_ratio * size)):
            return self._exact(q, k, lo, hi, sub, pred, flt)
        head = g is self._head
        want = min(k, e)
        if sub is None and pred is None:
            fetch = k if head else max(k, ef)
        else:
            fetch = max(ef, k, math.ceil(2 * k * size / e))
        while True:
            try:
                labels, dist = g.knn_query(q, k=min(fetch, size), num_threads=1)
            except RuntimeError:  # the graph could not find that many: search the part exactly
                break
            pos = labels[0].astype(np.int64)
            scores = (1.0 - dist[0]).astype(np.float32)
            if sub is not None:
                at = np.minimum(np.searchsorted(sub, pos), e - 1)
                ok = sub[at] == pos
                pos, scores = pos[ok], scores[ok]
            if pred is not None:
                ok = np.fromiter((bool(pred(self._ids[p])) for p in pos.tolist()), dtype=bool, count=len(pos))
                pos, scores = pos[ok], scores[ok]
            if len(pos) >= want:
                return pos[:k], scores[:k]
            fetch *= 4
            if fetch > size // 4:
                break
        return self._exact(q, k, lo, hi, sub, pred, flt)

    def _exact(self, q: np.ndarray, k: int, lo: int, hi: int, sub: np.ndarray | None,
               pred: Callable[[str], bool] | None, flt: _Filter) -> tuple[np.ndarray, np.ndarray]:
        if sub is None:
            scores = _dots(self._vecs[lo:hi], q)
            pos = None
        else:
            key = ("rows", flt.key(), lo, hi)
            got = self._cache.get(key)
            if got is None:
                rows = self._vecs[sub]
                self._cache.put(key, rows, rows.nbytes)
            else:
                rows = got[0]
            scores = _dots(rows, q)
            pos = sub
        if pred is None:
            n = len(scores)
            idx = np.arange(n) if n <= k else np.argpartition(-scores, k - 1)[:k]
            return (idx + lo if pos is None else pos[idx]), scores[idx]
        order = np.argsort(-scores, kind="stable")
        keep: list[int] = []
        for i in order.tolist():
            p = i + lo if pos is None else int(pos[i])
            if pred(self._ids[p]):
                keep.append(i)
                if len(keep) == k:
                    break
        idx = np.asarray(keep, dtype=np.int64)
        return ((idx + lo) if pos is None else pos[idx]).astype(np.int64), scores[idx]

    def _eligible(self, flt: _Filter) -> np.ndarray:
        """The sorted positions the structured filters admit, over every covered vector."""
        key = ("elig", flt.key(), self.count)
        got = self._cache.get(key)
        if got is not None:
            return got[0]
        sets: list[np.ndarray] = []
        for field, values in (("braid", flt.braid), ("kind", flt.kinds), ("namespace", flt.namespace),
                              ("workspace", flt.workspace)):
            if values is not None:
                sets.append(self._union(field, values))
        if flt.tags is not None:
            for t in sorted(flt.tags):
                sets.append(self._posting("tag", t))
        if flt.ids is not None:
            pos = self._pos
            sets.append(np.asarray(sorted(pos[i] for i in flt.ids if i in pos), dtype=np.int64))
        out = sets[0]
        for s in sets[1:]:
            out = np.intersect1d(out, s, assume_unique=True)
        self._cache.put(key, out, out.nbytes + 64)
        return out

    def _posting(self, field: str, value: str) -> np.ndarray:
        return np.asarray(self._post.get((field, value), ()), dtype=np.int64)

    def _union(self, field: str, values: frozenset[str]) -> np.ndarray:
        arrays = [self._posting(field, v) for v in sorted(values)]
        if not arrays:
            return _EMPTY_POS
        if len(arrays) == 1:
            return arrays[0]
        return np.unique(np.concatenate(arrays))


_DEFAULT: list[HashingEmbedder] = []


def _default_embedder() -> HashingEmbedder:
    """One shared default embedder (its word cache is worth keeping)."""
    if not _DEFAULT:
        _DEFAULT.append(HashingEmbedder())
    return _DEFAULT[0]


_vecdot = getattr(np, "vecdot", None)  # numpy >= 2


def _dots(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``rows @ q`` one row at a time, in the calling thread.

    A matrix-vector product through a multi-threaded BLAS starts BLAS threads of its own; with
    two query threads on two cores that oversubscribes them and costs more than it gives.
    numpy < 2 has no vecdot; einsum's own loops also stay in the calling thread.
    """
    if _vecdot is not None:
        return _vecdot(rows, q)
    return np.einsum("ij,j->i", rows, q)


def _top(pos: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (score descending, then position ascending)."""
    order = np.lexsort((pos, -scores))[:k]
    return pos[order], scores[order]


def _normalised(block: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(block, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (block / norms).astype(np.float32)


def _file_digest(path: Path) -> bytes:
    from blake3 import blake3

    h = blake3()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.digest()


def _write(path: Path, data: bytes) -> bytes:
    tmp = path.with_name(path.name + f".{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return digest(data)


def _save_graph(g: Any, path: Path) -> bytes:
    tmp = path.with_name(path.name + f".{os.getpid()}.{threading.get_ident()}.tmp")
    g.save_index(str(tmp))
    d = _file_digest(tmp)
    os.replace(tmp, path)
    return d


# -- the facade's helpers ------------------------------------------------------------------------

_instances: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], Recall]] = weakref.WeakKeyDictionary()
_instances_lock = threading.Lock()


def recall_for(braid: Any, space: str = "default", metric: Metric = "cosine", **options: Any) -> Recall:
    """The Recall of ``braid`` (a Braid or a store) for a space and metric, opened once and kept."""
    with _instances_lock:
        per = _instances.setdefault(braid, {})
        r = per.get((space, metric))
        if r is None:
            r = per[(space, metric)] = Recall(braid, space, metric, **options)
        return r


def recall_at(view: Any, query: Any, k: int = 10, *, space: str = "default", metric: Metric = "cosine",
              **filters: Any) -> list[Hit]:
    """Recall as of a ``View`` (``braid.at(point)``): only deltas up to the view's seq are eligible."""
    return recall_for(view.braid, space, metric).recall(query, k, as_of=view.seq, **filters)


def close_for(braid: Any) -> None:
    """Save and forget every Recall opened for ``braid`` (call before closing it)."""
    with _instances_lock:
        per = _instances.pop(braid, {})
    for r in per.values():
        r.close()
