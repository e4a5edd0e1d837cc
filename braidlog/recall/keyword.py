"""The keyword index: BM25 over the text of deltas, in tantivy, derived from the log.

Each delta with text (``delta_text``: the fields its kind declares with ``text=``, else its
common text fields) is one tantivy document: the analysed text, and as exact-match fields its
seq, id, braid, kind, payload namespace and workspace, and tags. A query is the disjunction of
its words (tantivy's BM25, k1 = 1.2, b = 0.75, as Lucene's), with every filter a zero-scoring
``Must`` clause, so filters apply inside the search, before the top k is cut:

- as of seq k: a range on ``seq`` (``seq <= k``): only deltas ``1..k`` are eligible, exactly;
- braid, kinds, namespace, workspace: any of the values; tags: every tag; ``where`` ids: any.

Scores as of an earlier point use the term statistics (document frequencies, average length) of
everything the index covers, as a filtered Lucene or Elasticsearch query does; the eligible set is
exact, the BM25 weights are those of the whole indexed log (docs/recall.md says what that means).

Persisted in ``<store>/recall/keyword.bm25/``: tantivy's files under ``index/`` and
``meta.msgpack`` with the covered seq, its chain hash, the text configuration and a blake3 digest
of every tantivy file. An index whose meta, chain hash, configuration or any file does not match
is ignored and rebuilt from the log, with a ``RecallWarning``, as the vector index is.
"""

from __future__ import annotations

import shutil
import threading
import time
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Struct

from ..chain import digest
from ..errors import RecallWarning, StorageError, ValidationError
from ..kinds import REGISTRY, Registry
from ..store import FullStore, Progress, store_of
from ..store.arguments import _progress, flag, whole
from ..store.arguments import name as _text
from ._deps import need
from .columns import NO_FILTER, Filter, scope
from .embedder import delta_text
from .files import file_digest, index_directory, stale, write_file

__all__ = ["KeywordIndex", "keyword_for", "rank_texts", "KEYWORD_FORMAT", "TOKENIZER"]

KEYWORD_FORMAT = 1
#: The analyser of text and queries: tantivy's simple tokenizer (runs of letters and digits),
#: tokens over 40 bytes dropped, lower-cased, folded to ASCII. No stemming and no stop words:
#: agents look up exact identifiers (error codes, ticket numbers, file names).
TOKENIZER = "braidlog-simple-v1"
COMMIT_EVERY = 50_000  # deltas per tantivy commit while catching up (bounds the writer's memory)
WRITER_HEAP = 64 << 20
_FILTER_FIELDS = ("braid", "kind", "namespace", "workspace", "tag", "id")

tantivy: Any = None


def _tantivy() -> Any:
    global tantivy
    if tantivy is None:
        need("tantivy", what="keyword recall")
        import tantivy as t

        tantivy = t
    return tantivy


class _Meta(Struct, frozen=True):
    format: int
    config: bytes
    covered_seq: int
    covered_hash: bytes
    count: int
    files: dict[str, bytes]


def _analyser() -> Any:
    t = _tantivy()
    return (t.TextAnalyzerBuilder(t.Tokenizer.simple()).filter(t.Filter.remove_long(40))
            .filter(t.Filter.lowercase()).filter(t.Filter.ascii_fold()).build())


def _schema() -> Any:
    t = _tantivy()
    b = t.SchemaBuilder()
    b.add_text_field("text", stored=False, tokenizer_name=TOKENIZER, index_option="freq")
    b.add_unsigned_field("seq", stored=True, indexed=True, fast=True)
    for name in _FILTER_FIELDS:
        b.add_text_field(name, stored=name == "id", tokenizer_name="raw", index_option="basic")
    return b.build()


class KeywordIndex:
    """BM25 keyword search over a store's deltas, exact as of any seq, filters before the top k."""

    def __init__(self, source: Any, *, directory: Any = None, registry: Registry = REGISTRY,
                 follow: bool = True, progress: Progress | None = None) -> None:
        t = _tantivy()
        self.store: FullStore = store_of(source)
        if not isinstance(self.store, FullStore):
            raise ValidationError("source", f"must be a Braid or a LogStore, not {type(source).__name__}")
        if not isinstance(registry, Registry):
            raise ValidationError("registry", f"must be a Registry, not {type(registry).__name__}")
        _progress(progress, "progress")
        self.registry = registry
        self.follow = flag(follow, "follow")
        self.notices: list[str] = []
        self.directory: Path | None = index_directory(self.store, directory, "keyword", "bm25")
        self._schema = _schema()
        self._analyser = _analyser()
        self._lock = threading.RLock()
        self._t = t
        self.count = 0
        self.covered_seq = 0
        self.covered_hash = self.store.hash_at(0)
        self._index: Any = None
        if self.directory is not None:
            self._load()
        if self._index is None:
            self._open_new()
        self.catch_up(progress=progress)

    def __repr__(self) -> str:
        return f"KeywordIndex(deltas={self.count}, covered_seq={self.covered_seq})"

    @property
    def config(self) -> bytes:
        """A digest of what decides the index's content: format, analyser and each kind's text fields."""
        kinds = sorted((k, list(getattr(self.registry.get(k), "text", ()) or ())) for k in self.registry)
        return digest(msgspec.msgpack.encode([KEYWORD_FORMAT, TOKENIZER, kinds]))

    def _notice(self, message: str) -> None:
        self.notices.append(message)

        warnings.warn(message, RecallWarning, stacklevel=3)

    # -- files -----------------------------------------------------------------------------------
    def _open_new(self) -> None:
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            (self.directory / "index").mkdir(parents=True)
            self._index = self._t.Index(self._schema, path=str(self.directory / "index"), reuse=False)
        else:
            self._index = self._t.Index(self._schema)
        self._index.register_tokenizer(TOKENIZER, self._analyser)
        self.count, self.covered_seq, self.covered_hash = 0, 0, self.store.hash_at(0)

    def _files(self) -> dict[str, bytes]:
        d = self.directory / "index"  # type: ignore[operator]  # a saved index has a directory
        return {p.name: file_digest(p) for p in sorted(d.iterdir())
                if p.is_file() and not p.name.endswith(".lock")}

    def _load(self) -> None:
        d = self.directory
        assert d is not None
        if not (d / "meta.msgpack").exists():
            return
        why = self._check(d)
        if why is None:
            try:
                index = self._t.Index(self._schema, path=str(d / "index"), reuse=True)
            except (OSError, ValueError) as e:
                why = f"tantivy cannot open it ({e})"
            else:
                index.register_tokenizer(TOKENIZER, self._analyser)
                self._index = index
                return
        self._notice(f"keyword index at {d} ignored: {why}; rebuilding it from the log")
        shutil.rmtree(d, ignore_errors=True)

    def _check(self, d: Path) -> str | None:
        try:
            meta = msgspec.msgpack.decode((d / "meta.msgpack").read_bytes(), type=_Meta)
        except (OSError, msgspec.DecodeError) as e:
            return f"its meta file does not decode ({e})"
        if meta.format != KEYWORD_FORMAT:
            return f"format {meta.format}, this braidlog reads {KEYWORD_FORMAT}"
        if meta.config != self.config:
            return "it was built with other text fields or another analyser"
        why = stale(self.store, meta.covered_seq, meta.covered_hash)
        if why is not None:
            return why
        try:
            files = self._files()
        except OSError as e:
            return f"its files cannot be read ({e})"
        for name, want in meta.files.items():
            if name not in files:
                return f"{name} is missing"
            if files[name] != want:
                return f"{name} is damaged (digest mismatch)"
        self.count, self.covered_seq, self.covered_hash = meta.count, meta.covered_seq, meta.covered_hash
        return None

    def _save(self) -> None:
        if self.directory is None:
            return
        meta = _Meta(KEYWORD_FORMAT, self.config, self.covered_seq, self.covered_hash, self.count,
                     self._files())
        write_file(self.directory / "meta.msgpack", msgspec.msgpack.encode(meta))

    # -- following the log -----------------------------------------------------------------------
    def catch_up(self, *, progress: Progress | None = None) -> int:
        """Index the text of every delta appended since the covered seq; the seq now covered."""
        _progress(progress, "progress")
        head = self.store.head().seq
        if head == self.covered_seq:
            return head
        with self._lock:
            if head > self.covered_seq:
                self._catch_up(head, progress)
        return self.covered_seq

    def _writer(self) -> Any:
        for attempt in range(50):  # another process may be catching up the same index
            try:
                return self._index.writer(WRITER_HEAP, 1)
            except ValueError as e:
                if "lock" not in str(e).lower() or attempt == 49:
                    raise StorageError(f"cannot write the keyword index at {self.directory} ({e})",
                                       hint="another process holds its writer; retry when it is done") from e
                time.sleep(0.1)
        raise AssertionError("unreachable")

    def _catch_up(self, stop: int, progress: Progress | None) -> None:
        writer = self._writer()
        t = self._t
        added = 0
        last = self.covered_seq
        try:
            for rec in self.store.scan(self.covered_seq + 1, stop + 1):
                d = rec.delta
                text = delta_text(d, self.registry)
                last = rec.seq
                if not text:
                    continue
                doc = t.Document()
                doc.add_text("text", text)
                doc.add_unsigned("seq", rec.seq)
                doc.add_text("id", d.id)
                doc.add_text("braid", d.braid_id)
                doc.add_text("kind", d.kind)
                doc.add_text("namespace", scope(d.payload.get("namespace")))
                doc.add_text("workspace", scope(d.payload.get("workspace")))
                for tag in dict.fromkeys(d.tags):
                    doc.add_text("tag", tag)
                writer.add_document(doc)
                added += 1
                if added % COMMIT_EVERY == 0:
                    writer.commit()
                    if progress is not None:
                        progress(last)
            writer.commit()
            writer.wait_merging_threads()
        except BaseException:
            writer.rollback()
            raise
        self._index.reload()
        self.count += added
        self.covered_seq = stop
        self.covered_hash = self.store.hash_at(stop)
        try:
            self._save()
        except OSError as e:
            self._notice(f"cannot write the keyword index meta to {self.directory} ({e}); "
                         "it will be rebuilt on the next open")
        if progress is not None:
            progress(stop)

    def rebuild(self, *, progress: Progress | None = None) -> int:
        """Drop the index and build it again from the log; the seq covered."""
        _progress(progress, "progress")
        with self._lock:
            self._index = None
            self._open_new()
            self._catch_up(self.store.head().seq, progress)
        return self.covered_seq

    def close(self) -> None:
        """Nothing to flush (every catch-up commits); kept for symmetry with ``Recall``."""

    # -- querying --------------------------------------------------------------------------------
    def words(self, text: str) -> list[str]:
        """The terms a text is indexed and searched by."""
        return list(dict.fromkeys(self._analyser.analyze(_text(text, "text"))))

    def search(self, query: str, k: int = 10, *, as_of: int | None = None, flt: Filter = NO_FILTER,
               pred: Callable[[str], bool] | None = None) -> list[tuple[int, str, float]]:
        """The k best (seq, delta id, BM25 score), score descending then seq ascending, among the
        deltas up to ``as_of`` (the head when None) that the filters admit."""
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query", "is empty; give some words to search for")
        whole(k, "k", least=1)
        if as_of is not None:
            whole(as_of, "as_of")
        if not isinstance(flt, Filter):
            raise ValidationError("flt", f"must be a Filter, not {type(flt).__name__}")
        if pred is not None and not callable(pred):
            raise ValidationError("pred", f"must be a function of a delta id, not {type(pred).__name__}")
        words = self.words(query)
        if not words:
            raise ValidationError("query", f"{query!r} has no words to search for")
        if self.follow or (as_of is not None and as_of > self.covered_seq):
            self.catch_up()
        t, schema = self._t, self._schema
        text = t.Query.boolean_query([(t.Occur.Should, t.Query.term_query(schema, "text", w)) for w in words])
        must = [(t.Occur.Must, text)]
        if as_of is not None:
            must.append(self._zero(t.Query.range_query(schema, "seq", t.FieldType.Unsigned, None, as_of)))
        for field, values in (("braid", flt.braid), ("kind", flt.kinds), ("namespace", flt.namespace),
                              ("workspace", flt.workspace), ("id", flt.ids)):
            if values is not None:
                must.append(self._zero(t.Query.term_set_query(schema, field, sorted(values))))
        for tag in sorted(flt.tags or ()):
            must.append(self._zero(t.Query.term_query(schema, "tag", tag)))
        q = t.Query.boolean_query(must) if len(must) > 1 else text
        searcher = self._index.searcher()
        fetch = k + 16
        while True:
            result = searcher.search(q, limit=fetch, count=True)
            found = []
            for score, addr in result.hits:
                doc = searcher.doc(addr)
                delta_id = doc["id"][0]
                if pred is None or pred(delta_id):
                    found.append((int(doc["seq"][0]), delta_id, float(score)))
            # Fetched past k so that ties at the k-th score are cut by seq, whatever tantivy's order.
            if (len(found) > k and found[k][2] < found[k - 1][2]) or len(result.hits) >= result.count:
                break
            fetch *= 4
        found.sort(key=lambda h: (-h[2], h[0]))
        return found[:k]

    def _zero(self, query: Any) -> tuple[Any, Any]:
        t = self._t
        return t.Occur.Must, t.Query.const_score_query(query, 0.0)


#: In-memory indexes of the last few lists of texts ``rank_texts`` was given, by their digest.
_texts: OrderedDict[bytes, Any] = OrderedDict()
_texts_lock = threading.Lock()
TEXT_INDEXES_KEPT = 8


def rank_texts(texts: Sequence[str], query: str) -> list[tuple[int, float]]:
    """BM25 of each of ``texts`` for ``query``, with the keyword index's analyser and scoring:
    (position in ``texts``, score), best first (ties by position), texts that hold none of the
    query's words left out. For searches over what is not a delta (projection state, such as
    LedgerMind's decisions): the texts are indexed in memory, once for each distinct list
    among the last ``TEXT_INDEXES_KEPT``."""
    t = _tantivy()
    analyser = _analyser()
    words = list(dict.fromkeys(analyser.analyze(query)))
    if not words or not texts:
        return []
    key = digest(msgspec.msgpack.encode(list(texts)))
    with _texts_lock:
        index = _texts.get(key)
        if index is None:
            b = t.SchemaBuilder()
            b.add_text_field("text", stored=False, tokenizer_name=TOKENIZER, index_option="freq")
            b.add_unsigned_field("pos", stored=True, indexed=False, fast=True)
            index = t.Index(b.build())
            index.register_tokenizer(TOKENIZER, analyser)
            writer = index.writer(WRITER_HEAP, 1)
            for pos, text in enumerate(texts):
                doc = t.Document()
                doc.add_text("text", text)
                doc.add_unsigned("pos", pos)
                writer.add_document(doc)
            writer.commit()
            writer.wait_merging_threads()
            index.reload()
            _texts[key] = index
            while len(_texts) > TEXT_INDEXES_KEPT:
                _texts.popitem(last=False)
        else:
            _texts.move_to_end(key)
    schema = index.schema
    q = t.Query.boolean_query([(t.Occur.Should, t.Query.term_query(schema, "text", w)) for w in words])
    searcher = index.searcher()
    hits = searcher.search(q, limit=len(texts)).hits
    if searcher.num_segments == 1:  # one commit: documents are numbered in the order added
        found = [(addr.doc, float(score)) for score, addr in hits]
    else:
        found = [(int(searcher.doc(addr)["pos"][0]), float(score)) for score, addr in hits]
    return sorted(found, key=lambda h: (-h[1], h[0]))


_shared: weakref.WeakKeyDictionary[Any, dict[Any, KeywordIndex]] = weakref.WeakKeyDictionary()
_shared_lock = threading.Lock()


def keyword_for(store: Any, directory: Any = None) -> KeywordIndex:
    """The one KeywordIndex of ``store`` (per directory), opened on first use and kept: every
    vector space's ``Recall`` of a store shares it, so only one writer ever follows the log."""
    given, store = store, store_of(store)
    if not isinstance(store, FullStore):
        raise ValidationError("store", f"must be a Braid or a LogStore, not {type(given).__name__}")
    key = str(directory) if directory not in (None, True) else None
    with _shared_lock:
        per = _shared.setdefault(store, {})
        index = per.get(key)
        if index is None:
            index = per[key] = KeywordIndex(store, directory=directory)
        return index
