"""``Recall``: the derived recall index of one vector space of a store.

The index is a function of the log. It holds, per vector space, every vector of deltas
``1..covered_seq`` in seq order (a vector's *position* is its rank in that order) and answers:

- **At the head** (``as_of=None``): one hnswlib graph over every position (the *head graph*),
  grown in place as the log grows, plus an exact numpy search over positions not yet in it.
  Below ``block`` vectors there is no graph and every query is exact.
- **As of seq k**: the as-of blocks of ``blocks.py`` over positions ``0..m`` of deltas ``1..k``,
  plus an exact search over the rest. A query as of k returns the same hits, in the same order,
  whether the index was built from the whole log, from deltas ``1..k`` only, or caught up append
  by append.

Filters (braid, kind, tags, namespace, workspace, a set of eligible delta ids or a predicate over
delta ids) apply before the top k is cut: each graph is over-fetched in proportion to how few of
its positions are eligible, and a part whose eligible positions are few is searched exactly.

``recall(..., mode="keyword" | "hybrid")`` also asks the keyword index (``keyword.py``), opened
on first use; hybrid fuses both rankings by reciprocal rank (``query.RRF_K``).

Memory (docs/recall.md): one hnswlib graph, one numpy copy of the vectors (exact search reads
it; beside a store, a file-backed map: page cache, not the process's own memory), about 60 bytes
of columns per vector; the as-of blocks only once an as-of query (or
``seal``) asks for them. Persistence: ``<store>/recall/<space>.<metric>/`` with the covered seq,
chain hash and a blake3 digest of every file (``saved.py``, ``files.py``).
"""

from __future__ import annotations

import math
import os
import shutil
import threading
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Literal

import msgspec
import numpy as np

from ..errors import RecallWarning, ValidationError
from ..kind_schema import recorded_embedder
from ..store import HW_SIZE, FullStore, OnDisk, Progress, resolve_point, store_of
from ..store.arguments import _progress, flag
from . import otel
from ._sync import LRU, RWLock
from .blocks import Blocks, new_graph
from .columns import NO_FILTER, UNFILTERED, Body, Columns, Filter, Where, make_filter
from .embedder import Embedder, delta_text
from .files import index_directory
from .query import MODES, Hit, Mode, fuse, normalised, query_vector
from .receipts import Hits, recall_request, record_hits
from .recorded import embedder_for
from .saved import FORMAT, Saved, read_index, write_index
from .search import EMPTY, GraphSearch, knn
from .specs import embedder as load_embedder
from .vectors import Rows, trim_heap

__all__ = ["Recall", "Metric", "METRICS", "FORMAT"]

Metric = Literal["cosine", "ip"]
METRICS = ("cosine", "ip")
SCAN_CHUNK = 8192  # deltas read while catching up before the log's pages are let go
# Vectored deltas decoded before they are added: bounds the Python objects alive at once, and so
# what Python's allocator keeps after the scan (its arenas are given back only once empty): at
# 20,000 x 128, 3.8 MB with 1,024 against 7.6 MB with 8,192.
ADD_CHUNK = 1024

_body_decoder = msgspec.msgpack.Decoder(Body)


class Recall(GraphSearch):
    """The recall index of one vector space of a store (or a Braid's store).

    ``recall(text_or_vector, k, mode=..., as_of=..., braid=..., kinds=..., tags=...,
    namespace=..., workspace=..., where=...)`` returns up to k ``Hit``s, best first. ``metric``
    is "cosine" (vectors are normalised) or "ip" (raw inner product). ``directory`` overrides
    where the index is kept (default: ``<store>/recall/`` for an LMDB store, memory otherwise);
    ``False`` keeps it in memory. Tuning: ``M`` and ``ef_construction`` shape the graphs, ``ef``
    the search; ``block`` and ``fanout`` the as-of blocks; ``exact_max`` and ``exact_ratio`` when
    a filtered part is searched exactly (docs/recall.md). ``follow`` (default True) reads the log
    head on every query at the head and catches up first; with False only ``catch_up()`` does.
    """

    def __init__(self, source: Any, space: str = "default", metric: Metric = "cosine",
                 embedder: Embedder | str | None = None, *, directory: str | os.PathLike[str] | bool | None = None,
                 M: int = 16, ef_construction: int = 100, ef: int = 64, block: int = 4096,
                 fanout: int = 2, exact_max: int = 2048, exact_ratio: float = 0.05,
                 seed: int = 100, threads: int | None = None, save_every: int | None = None,
                 follow: bool = True, braid_graphs: bool = True, progress: Progress | None = None) -> None:
        if metric not in METRICS:
            raise ValidationError("metric", f"must be one of {', '.join(METRICS)}, not {metric!r}")
        if not isinstance(space, str) or not space:
            raise ValidationError("space", "must be a non-empty string")
        for name, value, low in (("M", M, 2), ("ef_construction", ef_construction, 1), ("ef", ef, 1),
                                 ("block", block, 2), ("fanout", fanout, 2), ("exact_max", exact_max, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValidationError(name, f"must be an int of at least {low}, not {value!r}")
        if not isinstance(exact_ratio, (int, float)) or not 0.0 <= exact_ratio <= 1.0:
            raise ValidationError("exact_ratio", f"must be in [0, 1], not {exact_ratio!r}")
        self.store: FullStore = store_of(source)
        self._writer = source  # where a receipt goes: a Braid (its boundary) or the store
        if not isinstance(self.store, FullStore):
            raise ValidationError("source", f"must be a Braid or a LogStore, not {type(source).__name__}; "
                                  "for a view (braid.at(point)) use recall_at(view, ...)")
        self.space = space
        self.metric = metric
        # the embedder of text queries: given (an object or a spec), else the space's recorded one
        self.embedder = None if embedder is None else load_embedder(embedder)
        self._text: tuple[int, Embedder] | None = None  # (seq looked up to, embedder); final once declared
        self.M, self.ef_construction, self._ef = M, ef_construction, ef
        self.block, self.fanout, self.seed = block, fanout, seed
        self.exact_max, self.exact_ratio = exact_max, exact_ratio
        self.threads = threads or os.cpu_count() or 1
        self.save_every = save_every if save_every is not None else block
        self.follow = follow
        self.braid_graphs = braid_graphs
        self._braid_lock = threading.Lock()  # builds one braid graph at a time, under a read lock
        # a cheap "written since?" when the store has one
        self._last_commit = self.store.last_commit if isinstance(self.store, OnDisk) else None
        self._seen_commit: int | None = None
        self.notices: list[str] = []
        self._directory_option = directory
        self.directory = index_directory(self.store, directory, space, metric)
        self._lock = RWLock()
        self._cache = LRU(64 << 20)
        self._blocks = Blocks(block=block, fanout=fanout, M=M, ef_construction=ef_construction,
                              seed=seed, threads=self.threads, notice=self._notice)
        self._keyword: Any = None
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
        self._rows: Rows | None = None
        self._cols = Columns()
        self._head: Any = None
        self._head_count = 0
        self._braids: dict[int, tuple[Any, int]] = {}  # braid code -> (its graph, positions in it)
        self._blocks.clear()
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

    def memory(self) -> dict[str, int]:
        """Bytes held, by part: the numpy vectors, the columns, the head graph, the braid graphs,
        the as-of blocks."""
        from .blocks import _graph_bytes

        dim = self.dim or 0
        return {"vectors": self._rows.nbytes if self._rows is not None else 0,
                "columns": self._cols.nbytes(),
                "head graph": _graph_bytes(self._head, dim, self.M) if self._head is not None else 0,
                "braid graphs": sum(_graph_bytes(g, dim, self.M) for g, _ in self._braids.values()),
                "as-of blocks": self._blocks.nbytes(dim)}

    # -- following the log -----------------------------------------------------------------------
    def catch_up(self, *, progress: Progress | None = None) -> int:
        """Add the vectors of every delta appended since the covered seq; the seq now covered."""
        _progress(progress, "progress")
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
        if not self.count and self.space not in self.store.spaces():
            # No vector of this space in the store (listed after the head ``stop`` was read, so a
            # space with a vector at or before it is there): nothing to scan, nothing to save.
            self.covered_seq, self.covered_hash = stop, self.store.hash_at(stop)
            return
        start = self.covered_seq + 1
        seqs: list[int] = []
        bodies: list[Body] = []
        last_hash = self.covered_hash
        added = False
        # the log's file pages, once copied (a store in memory has none to let go)
        release = self.store.release_pages if isinstance(self.store, OnDisk) else (lambda: None)
        for n, (seq, h, body) in enumerate(self.store.scan_bodies(start, stop + 1), start=1):
            last_hash = h
            b = _body_decoder.decode(memoryview(body)[HW_SIZE:])
            if b.vector is not None and b.vector.space == self.space:
                seqs.append(seq)
                bodies.append(b)
                if len(bodies) == ADD_CHUNK:
                    self._add(seqs, bodies)
                    seqs, bodies, added = [], [], True
            if n % SCAN_CHUNK == 0:
                release()
        if bodies:
            self._add(seqs, bodies)
            added = True
        release()
        if stop - start >= SCAN_CHUNK:  # a long scan: its decoded copies leave holes in the heap
            seqs, bodies = [], []
            trim_heap()
        if added and grow:  # a long catch-up (an index built on open) uses every thread
            many = self.count - self._head_count >= 4 * self.block
            self._grow_head(progress, threads=self.threads if many else 1)
        self.covered_seq = stop
        self.covered_hash = last_hash
        self._dirty = True
        if progress is not None and grow:
            progress(stop)

    def _add(self, seqs: list[int], bodies: list[Body]) -> None:
        if self.dim is None:
            self.dim = bodies[0].vector.dim  # type: ignore[union-attr]  # bodies with vectors only
            self._rows = Rows(self.dim, self.directory)
        block = np.frombuffer(b"".join(b.vector.data for b in bodies), dtype="<f4")  # type: ignore[union-attr]  # bodies with vectors only
        if block.size != len(bodies) * self.dim:
            raise ValidationError("vector", f"space {self.space!r} holds vectors of different dimensions "
                                  "in the log; the log was not written by braidlog")
        block = block.reshape(len(bodies), self.dim)
        if self.metric == "cosine":
            block = normalised(block)
        self._rows.append(block)  # type: ignore[union-attr]  # set with dim, above
        self._cols.add(seqs, bodies)
        self.count += len(bodies)

    def _grow_head(self, progress: Progress | None, threads: int = 1) -> None:
        """Insert the positions not yet in the head graph (once there are ``block`` vectors)."""
        if self.count < self.block or self._head_count == self.count:
            return
        if self._head is None:
            self._head = new_graph(self.dim, max(self.count, 2 * self.block), M=self.M,  # type: ignore[arg-type]  # dim: set by the first vectors
                                   ef_construction=self.ef_construction, seed=self.seed, ef=self._ef)
        g = self._head
        if g.get_max_elements() < self.count:
            g.resize_index(max(self.count, 2 * g.get_max_elements()))
        chunk = 4096 * threads
        for lo in range(self._head_count, self.count, chunk):
            hi = min(lo + chunk, self.count)
            g.add_items(self._rows.slice(lo, hi), np.arange(lo, hi, dtype=np.int64),  # type: ignore[union-attr]  # rows exist once vectors do
                        num_threads=threads)
            for code, (bg, n) in list(self._braids.items()):  # each braid graph keeps up
                self._braids[code] = (bg, n + self._add_to(bg, self._cols.of_braid(code, lo, hi), threads))
            self._head_count = hi
            if progress is not None:
                progress(self._cols.seq(hi - 1))

    def _add_to(self, g: Any, positions: np.ndarray, threads: int) -> int:
        if len(positions):
            if g.get_max_elements() < g.get_current_count() + len(positions):
                g.resize_index(max(g.get_current_count() + len(positions), 2 * g.get_max_elements()))
            g.add_items(self._rows.take(positions), positions, num_threads=threads)  # type: ignore[union-attr]  # rows exist once vectors do
        return len(positions)

    def _braid_graph(self, code: int) -> tuple[Any, int]:
        """The graph of one braid's positions in the head graph (positions as labels), built on
        the first query filtered by that braid alone and kept in step as the head graph grows."""
        got = self._braids.get(code)
        if got is not None:
            return got
        with self._braid_lock:
            got = self._braids.get(code)
            if got is None:
                positions = self._cols.of_braid(code, 0, self._head_count)
                g = new_graph(self.dim, max(len(positions), 1), M=self.M,  # type: ignore[arg-type]  # dim: set by the first vectors
                              ef_construction=self.ef_construction, seed=self.seed, ef=self._ef)
                got = self._braids[code] = (g, self._add_to(g, positions, self.threads))
        return got

    # -- as-of blocks ----------------------------------------------------------------------------
    def sealed(self) -> list[tuple[int, int]]:
        """Every block the covered vectors fill: (level, index) pairs."""
        return self._blocks.sealed(self.count)

    def seal(self, *, progress: Progress | None = None) -> int:
        """Build every filled block now (as-of queries then never wait for one); the number built."""
        _progress(progress, "progress")
        self.catch_up()
        with self._lock.write():
            missing = [b for b in self.sealed() if b not in self._blocks.graphs]
            self._build_blocks(missing, progress)
        if missing and self.directory is not None:
            self.save()
        return len(missing)

    def _build_blocks(self, wanted: list[tuple[int, int]], progress: Progress | None,
                      pool: ThreadPoolExecutor | None = None) -> None:
        if not wanted:  # nothing to build (and no rows yet when nothing has a vector)
            return
        self._blocks.build(wanted, self._rows.slice, self.dim, self.directory, progress, pool)  # type: ignore[union-attr]  # rows exist once vectors do

    def _ensure_blocks(self, wanted: list[tuple[int, int]]) -> None:
        if all(b in self._blocks.graphs for b in wanted):
            return
        with self._lock.write():
            self._build_blocks(wanted, None)

    # -- persistence -----------------------------------------------------------------------------
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
        assert self.directory is not None
        index = Saved(self.dim or 0, self.count, self._cols, self._rows, self._head, self._head_count,
                      self._blocks.digests, self.covered_seq, self.covered_hash, "")
        self._generation = write_index(self.directory, index, space=self.space, metric=self.metric,
                                       params=self.params)
        self._saved_count = self.count
        self._dirty = False

    def _load(self) -> None:
        d = self.directory
        assert d is not None
        if not (d / "meta.msgpack").exists():
            return
        got = read_index(d, space=self.space, metric=self.metric, params=self.params,
                         store=self.store, min_capacity=2 * self.block, ef=self._ef)
        if isinstance(got, str):
            self._notice(f"recall index at {d} ignored: {got}; rebuilding it from the log")
            self._reset()
            shutil.rmtree(d, ignore_errors=True)
            return
        if got.count:
            self.dim, self._rows, self._cols, self.count = got.dim, got.rows, got.cols, got.count
        if got.head is not None:
            self._head, self._head_count = got.head, got.head_count
        self._blocks.digests = got.block_digests
        self.covered_seq, self.covered_hash = got.covered_seq, got.covered_hash
        self._saved_count = got.count
        self._generation = got.generation

    def rebuild(self, *, progress: Progress | None = None, blocks: bool = False) -> int:
        """Drop the index and build it again from the log; the seq covered.

        ``progress(seq)`` follows the scan, then the head graph, which is built with every
        thread. With ``blocks`` every filled as-of block is built too (as ``seal`` does), so
        as-of queries never wait for one; that holds each vector once more per block level.
        """
        _progress(progress, "progress")
        flag(blocks, "blocks")
        with self._lock.write():
            self._reset()
            if self.directory is not None:
                shutil.rmtree(self.directory, ignore_errors=True)
            self._catch_up(self.store.head().seq, progress, grow=False)
            self._grow_head(progress, threads=self.threads)
            if blocks:
                self._build_blocks(self.sealed(), None)
            if progress is not None:
                progress(self.covered_seq)
        if self._keyword is not None:
            self._keyword.rebuild()
        if self.directory is not None:
            self.save()
        return self.covered_seq

    def close(self) -> None:
        """Save the index (and the keyword index, if opened) if changed since last saved."""
        if self._dirty and self.directory is not None:
            self.save()
        if self._keyword is not None:
            self._keyword.close()

    # -- querying --------------------------------------------------------------------------------
    def vector(self, query: Any) -> np.ndarray:
        """The query as a float32 vector of this space (embedding text with the embedder)."""
        return query_vector(query, dim=self.dim, metric=self.metric, space=self.space,
                            embedder=self.text_embedder() if isinstance(query, str) else None)

    def text_embedder(self) -> Embedder:
        """The embedder of text queries: the one given, checked against the space's record in the
        log (ValidationError naming both if it is another); else the recorded one, loaded from
        its spec; else ``$BRAIDLOG_EMBEDDER`` or hashing. Looked up again only while the space
        has no record and the log has grown."""
        got = self._text
        if got is not None and (got[0] < 0 or got[0] == self.covered_seq):
            return got[1]
        recorded = recorded_embedder(self.store, self.space)
        chosen = embedder_for(self.store, self.space, self.embedder, recorded=recorded)
        self._text = (-1 if recorded is not None else self.covered_seq, chosen)
        return chosen

    def resolve(self, point: int | str | datetime | None) -> int | None:
        """The seq an as-of point names (a seq, a delta id or a datetime); None for the head."""
        if point is None:
            return None
        return resolve_point(self.store, point, "as_of")

    def keyword(self) -> Any:
        """The keyword (BM25) index of this store, opened on first use (``keyword.KeywordIndex``)."""
        if self._keyword is None:
            from .keyword import keyword_for

            self._keyword = keyword_for(self.store, self._directory_option)
        return self._keyword

    def search(self, query: Any, k: int = 10, *, as_of: int | str | datetime | None = None,
               braid: str | Iterable[str] | None = None, kinds: str | Iterable[str] | None = None,
               tags: str | Iterable[str] | None = None, namespace: str | Iterable[str] | None = None,
               workspace: str | Iterable[str] | None = None, where: Where = None,
               reproducible: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The top k by vector as two arrays, best first: seqs (int64) and scores (float32)."""
        pos, scores = self._query(query, k, as_of, make_filter(braid, kinds, tags, namespace, workspace, where),
                                  reproducible)
        return self._cols.seqs_of(pos), scores

    def recall(self, query: Any, k: int = 10, *, mode: Mode = "vector",
               as_of: int | str | datetime | None = None,
               braid: str | Iterable[str] | None = None, kinds: str | Iterable[str] | None = None,
               tags: str | Iterable[str] | None = None, namespace: str | Iterable[str] | None = None,
               workspace: str | Iterable[str] | None = None, where: Where = None,
               reproducible: bool = False, deltas: bool = True,
               min_score: float | None = None, record: bool = False, run: str | None = None,
               turn: str | None = None, model: str | None = None,
               context_bytes: bytes | str | None = None, hash_query: bool = False) -> Hits:
        """The k deltas that best match ``query`` among those the filters admit, best first.

        By meaning, a delta scoring below ``min_score`` is left out: the answer stops there
        rather than padding to k (default None: no floor, the k closest whatever their score;
        ``RELEVANCE_FLOOR``, 0, leaves out vectors pointing away from the query's, as
        ``braidlog recall`` and the MCP recall tool do by default). It applies to the vector
        side of "hybrid" too.

        ``mode`` "vector" (the default) ranks by the closeness of vectors (``query`` a text,
        embedded, or a vector); "keyword" by BM25 over the deltas' text (``query`` a text);
        "hybrid" fuses both rankings by reciprocal rank (``RRF_K``). ``as_of`` (a seq, delta id
        or datetime) sees only deltas up to it; ``reproducible=True`` answers it by meaning with
        the graphs of those deltas alone, the same answer forever (docs/recall.md). ``braid``,
        ``kinds``, ``namespace`` and ``workspace`` admit any of the values given; ``tags``
        requires every tag given; ``where`` is a collection of eligible delta ids or a predicate
        over delta ids (for projection state, e.g. only active decisions). Every filter applies
        before the top k is cut.

        ``record=True`` appends a context receipt (a ``context_used`` delta, docs/receipts.md)
        naming the hits, the request and the seq it saw, for turn ``turn`` of run ``run`` (and
        ``model``, and the SHA-256 of the exact ``context_bytes`` given to the model, when
        passed; ``hash_query`` keeps only the query's SHA-256): ``hits.context_id`` is its
        delta id. With opentelemetry-api installed each recall is a ``search_memory`` span.
        """
        if mode not in MODES:
            raise ValidationError("mode", f"must be one of {', '.join(MODES)}, not {mode!r}")
        _check_k(k)
        floor = _check_floor(min_score)
        flt = make_filter(braid, kinds, tags, namespace, workspace, where)
        if record is not False and record is not True:
            raise ValidationError("record", f"must be True or False, not {record!r}")
        tracer = otel.tracer() if otel.ENABLED else None
        if not record and tracer is None:
            return self._hits(query, k, mode, as_of, flt, reproducible, deltas, floor)
        asked = self.resolve(as_of)

        def answer() -> Hits:
            hits = self._hits(query, k, mode, asked, flt, reproducible, deltas, floor)
            if record:
                seen = asked if asked is not None else (
                    self.covered_seq if mode == "vector" else self.store.head().seq)
                request = recall_request(self, query, k, mode, seen, flt, reproducible, floor,
                                         hash_query)
                record_hits(self._writer, hits, request, run=run, turn=turn, model=model,
                            context_bytes=context_bytes)
            return hits
        if tracer is None:
            return answer()
        with otel.search_span(tracer, self.store) as span:
            hits = answer()
            otel.describe(span, query, hits, hits.context_id, delta_text)
            return hits

    def _hits(self, query: Any, k: int, mode: str, as_of: Any,
              flt: tuple[Filter, Callable[[str], bool] | None], reproducible: bool, deltas: bool,
              floor: float | None) -> Hits:
        if mode == "vector":
            pos, scores = self._query(query, k, as_of, flt, reproducible)
            found = [(self._cols.seq(p), self._cols.id(p), s)
                     for p, s in zip(pos.tolist(), scores.tolist(), strict=False) if floor is None or s >= floor]
        else:
            if not isinstance(query, str):
                raise ValidationError("query", f"must be a text in {mode} mode, not {type(query).__name__}")
            seq = self.resolve(as_of)
            words = self.keyword().search(query, k if mode == "keyword" else max(k, 2 * k + 10),
                                          as_of=seq, flt=flt[0], pred=flt[1])
            if mode == "keyword":
                found = words
            else:
                # Each side ranks deeper than k, so a delta both find at rank k+1 can still win.
                pos, scores = self._query(query, max(k, 2 * k + 10), seq, flt, reproducible)
                vector = [(self._cols.seq(p), self._cols.id(p))
                          for p, s in zip(pos.tolist(), scores.tolist(), strict=False) if floor is None or s >= floor]
                found = fuse([vector, [(s, i) for s, i, _ in words]], k)
        read = self.store.read
        return Hits([Hit(seq, delta_id, float(score), read(seq).delta if deltas else None)
                     for seq, delta_id, score in found])

    def _query(self, query: Any, k: int, as_of: Any, flt: tuple[Filter, Callable[[str], bool] | None],
               reproducible: bool = False) -> tuple[np.ndarray, np.ndarray]:
        if type(k) is not int or k < 1:
            k = _check_k(k)
        if as_of is None:
            seq = None
            if self.follow:  # the head is read only when the store saw a commit since last time
                mark = self._last_commit() if self._last_commit is not None else None
                if mark is None or mark != self._seen_commit:
                    if self.store.head().seq != self.covered_seq:
                        self.catch_up()
                    self._seen_commit = mark
        elif type(as_of) is int and 0 <= as_of <= self.covered_seq:
            seq = as_of  # a seq the index covers is in the log (which never shrinks): no read
        else:
            seq = resolve_point(self.store, as_of, "as_of")  # (self.resolve, for a point given)
            if seq > self.covered_seq:
                self.catch_up()
        q = query_vector(query, dim=self.dim, metric=self.metric, space=self.space,
                         embedder=self.text_embedder() if isinstance(query, str) else None)
        lock = self._lock
        while True:
            lock.acquire_read()
            try:
                if not self.count:
                    return EMPTY
                if seq is None:
                    head = self._head
                    if flt is UNFILTERED and head is not None and self._head_count == self.count:
                        # the common query, as _search would answer it, with no step between
                        found = knn(head, q, min(k, self.count))
                        if found is not None:
                            return found
                    return self._search(q, k, self.count, None, *flt)
                m = self._cols.count_upto(seq)
                if not reproducible:  # the head graph, its positions below m alone eligible
                    head = self._head
                    if flt is UNFILTERED and head is not None and 0 < m < self._head_count:
                        # the common as-of query, as _search would answer it, with no step between
                        return self._part(head, 0, m, self._ef, q, k, None, None, NO_FILTER)
                    return self._search(q, k, m, None, *flt)
                blocks = self._blocks.cover(m)[0]
                if all(b in self._blocks.graphs for b in blocks):
                    return self._search(q, k, m, blocks, *flt)
            finally:
                lock.release_read()
            self._ensure_blocks(blocks)


def _check_floor(value: Any) -> float | None:
    if value is None:
        return None
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
            raise TypeError
        floor = float(value)
        if not math.isfinite(floor):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise ValidationError("min_score", f"must be a finite number or None (no floor), "
                              f"not {value!r}") from None
    return floor


def _check_k(k: Any) -> int:
    if type(k) is not int and not isinstance(k, np.integer) or isinstance(k, bool) or k < 1:
        raise ValidationError("k", f"must be an int of at least 1, not {k!r}")
    return int(k)
