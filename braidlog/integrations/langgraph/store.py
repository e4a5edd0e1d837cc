"""``BraidlogStore``: LangGraph's long-term memory (a ``BaseStore``) on a braidlog log.

Each namespace is a braid (``langgraph/store/<labels joined by '.'>``); each put, delete, TTL
refresh and expiry is a ``langgraph.item`` delta in it, so nothing is overwritten: ``history``
gives every version of an item and ``at(point)`` the whole store as it was at a seq, delta id or
time. With an ``index`` config, an item's text (its ``fields``) is stored with it and embedded
into a vector the delta carries, and ``search(query=...)`` goes through braidlog's recall: by
meaning, by keyword (BM25) or both fused (``mode``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, PutOp, SearchItem, SearchOp, TTLConfig

from ...delta import Provenance, Vector
from ...delta import delta as make_delta
from ...errors import BraidlogError, ValidationError
from ._checks import text as _text
from ._encoding import PROVENANCE, declare_kinds, dump_any, load_any, open_braid
from ._items import (
    STORE_PREFIX,
    Current,
    Items,
    braid_of_namespace,
    check_filter,
    check_namespace,
    matches,
    namespace_matches,
)

__all__ = ["BraidlogStore", "StoreAt", "ItemVersion", "MODES"]

log = logging.getLogger(__name__)
MODES = ("vector", "keyword", "hybrid")
SPACE = "langgraph"


@dataclass(frozen=True)
class ItemVersion:
    """One version of an item: its value (None: deleted), the delta that wrote it (``seq``,
    ``id``), when, by whom (``provenance``), its TTL in minutes, and whether it was a deletion
    by the TTL sweep (``expired``)."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    seq: int
    id: str
    updated_at: datetime
    provenance: Provenance
    ttl: float | None = None
    expired: bool = False


def _path(path: Any, field: str) -> tuple[str, ...] | None:
    return None if path is None else check_namespace(path, field)


def _whole(value: Any, field: str, least: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValidationError(field, f"must be a whole number, at least {least}, not {value!r}"[:120])
    return value


class _Reader(BaseStore):
    """What the store and a store as of a point read alike: get, search, list_namespaces."""

    serde: Any
    _log: Any
    _recall_on: bool
    _embedder: Any
    _braid: Any
    mode: Literal["vector", "keyword", "hybrid"]

    def _namespaces(self) -> list[Items]:  # every namespace's items, caught up
        raise NotImplementedError

    def _receipt(self, op: SearchOp, cited: list[tuple[Any, float | None]]) -> None:
        """Record what a search returned (``BraidlogStore(receipts=True)``); a view records nothing."""

    # BaseStore's methods, with the namespace checked first: LangGraph's own check assumes a
    # tuple, and a namespace of another type would escape it as a TypeError.
    def get(self, namespace: Any, key: Any, *, refresh_ttl: Any = None) -> Item | None:
        return super().get(check_namespace(namespace, "namespace"), _text(key, "key"), refresh_ttl=refresh_ttl)

    def search(self, namespace_prefix: Any, /, **kw: Any) -> list[SearchItem]:
        return super().search(check_namespace(namespace_prefix, "namespace_prefix"), **kw)

    def put(self, namespace: Any, key: Any, value: Any, index: Any = None, **kw: Any) -> None:
        return super().put(check_namespace(namespace, "namespace", writing=True), _text(key, "key"), value, index,
                           **kw)

    def delete(self, namespace: Any, key: Any) -> None:
        return super().delete(check_namespace(namespace, "namespace"), _text(key, "key"))

    def list_namespaces(self, *, prefix: Any = None, suffix: Any = None, **kw: Any) -> list[tuple[str, ...]]:
        return super().list_namespaces(prefix=_path(prefix, "prefix"), suffix=_path(suffix, "suffix"), **kw)

    async def aget(self, namespace: Any, key: Any, *, refresh_ttl: Any = None) -> Item | None:
        return await super().aget(check_namespace(namespace, "namespace"), _text(key, "key"),
                                  refresh_ttl=refresh_ttl)

    async def asearch(self, namespace_prefix: Any, /, **kw: Any) -> list[SearchItem]:
        return await super().asearch(check_namespace(namespace_prefix, "namespace_prefix"), **kw)

    async def aput(self, namespace: Any, key: Any, value: Any, index: Any = None, **kw: Any) -> None:
        return await super().aput(check_namespace(namespace, "namespace", writing=True), _text(key, "key"), value,
                                  index, **kw)

    async def adelete(self, namespace: Any, key: Any) -> None:
        return await super().adelete(check_namespace(namespace, "namespace"), _text(key, "key"))

    async def alist_namespaces(self, *, prefix: Any = None, suffix: Any = None, **kw: Any) -> list[tuple[str, ...]]:
        return await super().alist_namespaces(prefix=_path(prefix, "prefix"), suffix=_path(suffix, "suffix"), **kw)

    def _items(self, namespace: tuple[str, ...]) -> Items:
        raise NotImplementedError

    def _now(self) -> datetime:
        raise NotImplementedError

    def _as_of(self) -> int | None:
        return None

    def _omit_expired(self) -> bool:
        cfg = getattr(self, "ttl_config", None) or {}
        return bool(cfg.get("omit_expired", False))

    def _alive(self, cur: Current) -> bool:
        return not (self._omit_expired() and cur.expires_at is not None and cur.expires_at < self._now())

    def _value(self, cur: Current) -> dict[str, Any]:
        return load_any(self.serde, self._log.read(cur.seq).delta.payload["value"])

    def _item(self, items: Items, key: str, cur: Current, cls: type = Item, **kw: Any) -> Any:
        return cls(value=self._value(cur), key=key, namespace=items.namespace,
                   created_at=cur.created_at, updated_at=cur.updated_at, **kw)

    def _get(self, op: GetOp) -> Item | None:
        ns = check_namespace(op.namespace, "namespace")
        key = _text(op.key, "key")
        items = self._items(ns)
        cur = items.live.get(key)
        if cur is None or not self._alive(cur):
            return None
        return self._item(items, key, cur)

    def _candidates(self, op: SearchOp) -> list[tuple[Items, str, Current, dict[str, Any]]]:
        prefix = check_namespace(op.namespace_prefix, "namespace_prefix")
        flt = check_filter(op.filter)
        found = []
        for items in self._namespaces():
            if items.namespace is None or items.namespace[:len(prefix)] != prefix:
                continue
            for key, cur in items.live.items():
                if not self._alive(cur):
                    continue
                value = self._value(cur)
                if flt and not all(matches(value.get(k), v) for k, v in flt.items()):
                    continue
                found.append((items, key, cur, value))
        found.sort(key=lambda f: f[2].updated_at, reverse=True)  # newest first, as SqliteStore
        return found

    def _search(self, op: SearchOp, query_vector: Any = None) -> list[SearchItem]:
        limit = _whole(op.limit, "limit")
        offset = _whole(op.offset, "offset")
        if op.query is not None and not isinstance(op.query, str):
            raise ValidationError("query", f"must be a string or None, not {type(op.query).__name__}")
        found = self._candidates(op)
        if not op.query or not self._recall_on or not found:
            page = found[offset:offset + limit]
            self._receipt(op, [(cur, None) for _, _, cur, _ in page])
            return [SearchItem(items.ns, key, value, cur.created_at, cur.updated_at)
                    for items, key, cur, value in page]
        from ...recall import recall_for  # the recall extra: numpy, hnswlib, tantivy

        by_id = {f[2].id.upper(): f for f in found}
        query = query_vector if self.mode == "vector" else op.query
        index = recall_for(self._braid, SPACE, "cosine", embedder=self._embedder)
        hits = index.recall(query, offset + limit, mode=self.mode, as_of=self._as_of(),
                            kinds="langgraph.item", where=set(by_id), deltas=False)
        out: list[SearchItem] = []
        cited: list[tuple[Any, float | None]] = []
        for hit in hits:
            f = by_id.get(hit.delta_id.upper())
            if f is None:
                continue
            items, key, cur, value = f
            out.append(SearchItem(items.ns, key, value, cur.created_at, cur.updated_at,
                                  score=float(hit.score)))
            cited.append((cur, float(hit.score)))
        out, cited = out[offset:offset + limit], cited[offset:offset + limit]
        if len(out) < limit:  # items with nothing to search by (index=False, no text) follow,
            rest = [f for f in found if not f[2].indexed]  # unscored, as LangGraph's stores do
            out += [SearchItem(i.ns, k, v, c.created_at, c.updated_at)
                    for i, k, c, v in rest[:limit - len(out)]]
            cited += [(c, None) for _, _, c, _ in rest[:limit - len(cited)]]
        self._receipt(op, cited)
        return out

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        for c in conditions:
            if getattr(c, "match_type", None) not in ("prefix", "suffix"):
                raise ValidationError("match_conditions", "each must be a prefix or suffix MatchCondition")
            check_namespace(c.path, "match_conditions.path")
        depth = op.max_depth
        if depth is not None:
            _whole(depth, "max_depth", 1)
        limit, offset = _whole(op.limit, "limit"), _whole(op.offset, "offset")
        names = {items.namespace for items in self._namespaces()
                 if items.namespace is not None and any(self._alive(c) for c in items.live.values())}
        names = {n for n in names if all(namespace_matches(n, c.match_type, tuple(c.path)) for c in conditions)}
        if depth is not None:
            names = {n[:depth] for n in names}
        return sorted(names)[offset:offset + limit]

    def _history(self, namespace: Any, key: Any) -> list[ItemVersion]:
        ns = check_namespace(namespace, "namespace")
        key = _text(key, "key")
        out = []
        for rec in self._log.scan_braid(braid_of_namespace(ns)):
            d = rec.delta
            p = d.payload
            if d.kind != "langgraph.item" or p.get("key") != key or p.get("refreshed"):  # erased: {}
                continue
            value = None if p.get("value") is None else load_any(self.serde, p["value"])
            out.append(ItemVersion(tuple(p["namespace"]), key, value, rec.seq, d.id, d.ts,
                                   d.provenance, p.get("ttl"), bool(p.get("expired"))))
        return out


class BraidlogStore(_Reader, BaseStore):
    """LangGraph's ``BaseStore`` on a braidlog store (a path, created when missing, or an open
    ``Braid``): namespaces, put, get, delete, search with filters, and by ``query`` through
    braidlog's recall when ``index`` (LangGraph's IndexConfig: ``dims``, ``embed``, ``fields``)
    is given; TTLs as LangGraph's ``TTLConfig`` defines them. Plus ``history(namespace, key)``
    and ``at(point)``, which only a log can give."""

    supports_ttl = True

    def __init__(self, store: Any, *, index: Any = None, ttl: Any = None,
                 mode: Literal["vector", "keyword", "hybrid"] = "vector",
                 provenance: Provenance | None = None, erase: bool = False,
                 receipts: bool = False) -> None:
        for name, flag in (("erase", erase), ("receipts", receipts)):
            if not isinstance(flag, bool):
                raise ValidationError(name, f"must be True or False, not {type(flag).__name__}")
        self.erase = erase  # TTL expiry erases the expired items' versions (docs/forgetting.md)
        self.receipts = receipts  # each search records a context receipt (docs/receipts.md)
        if mode not in MODES:
            raise ValidationError("mode", f"must be one of {', '.join(MODES)}, not {mode!r}"[:120])
        if provenance is not None and not isinstance(provenance, Provenance):
            raise ValidationError("provenance", f"must be a braidlog.Provenance, not {type(provenance).__name__}")
        self.mode = mode
        self.provenance = provenance or PROVENANCE
        if index is None and mode == "keyword":  # a query is answered by keyword: the whole value is text
            index = {"fields": ["$"]}
        self.index_config, self.embeddings, self._fields = self._index(index, mode)
        self._identity = self.index_config.pop("identity", None) if self.index_config else None
        self.ttl_config = self._ttl(ttl)
        self.serde = JsonPlusSerializer()
        self._braid, self._owned = open_braid(store)
        self._log = self._braid.log
        self._lock = threading.RLock()
        self._spaces: dict[str, Items] = {}
        # declared on open, as a SQL store creates its tables: no failed write leaves one behind
        if not self._log.readonly:
            try:
                declare_kinds(self._braid)
            except BaseException:
                if self._owned:
                    self._braid.close()
                raise
        self._recall_on = self.index_config is not None
        self._embedder = None if self._identity is None else _Embedder(self.embeddings, self._identity)
        self._declared = False  # the space's recorded embedder is known to be this one
        self._sweeper: threading.Thread | None = None
        self._stop = threading.Event()

    @staticmethod
    def _index(index: Any, mode: str) -> tuple[dict[str, Any] | None, Any, list[tuple[str, Any]]]:
        if index is None:
            return None, None, []
        if not isinstance(index, Mapping):
            raise ValidationError("index", f"must be an IndexConfig (dims, embed, fields), not {type(index).__name__}")
        from langgraph.store.base.embed import tokenize_path

        from ._embed import embeddings_of

        cfg = dict(index)
        embed = cfg.get("embed")
        if embed is None and mode != "keyword":
            raise ValidationError("index.embed", "is required to search by meaning (mode "
                                  "'vector' or 'hybrid'); mode='keyword' needs none")
        fields = cfg.get("fields") or ["$"]
        if isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
            raise ValidationError("index.fields", "must be a list of JSON paths such as 'text' or 'notes[*].body'")
        # a callable, LangChain Embeddings, an init_embeddings string, or a braidlog embedder or spec
        embeddings, cfg["dims"], cfg["identity"] = embeddings_of(embed, cfg.get("dims"))
        try:
            paths = [(f, f if f == "$" else tokenize_path(f)) for f in fields]
        except BraidlogError:
            raise
        except Exception as e:
            raise ValidationError("index", f"LangGraph cannot use it ({type(e).__name__}: {e})") from None
        return cfg, embeddings, paths

    @staticmethod
    def _ttl(ttl: Any) -> TTLConfig | None:
        if ttl is None:
            return None
        if not isinstance(ttl, Mapping):
            raise ValidationError("ttl", f"must be a TTLConfig (a dict), not {type(ttl).__name__}")
        unknown = set(ttl) - {"refresh_on_read", "omit_expired", "default_ttl", "sweep_interval_minutes"}
        if unknown:
            raise ValidationError("ttl", f"has keys TTLConfig does not: {sorted(map(str, unknown))}"[:200])
        for flag in ("refresh_on_read", "omit_expired"):
            if flag in ttl and not isinstance(ttl[flag], bool):
                raise ValidationError(f"ttl.{flag}", "must be True or False")
        if ttl.get("default_ttl") is not None:
            _minutes(ttl["default_ttl"], "ttl.default_ttl")
        if ttl.get("sweep_interval_minutes") is not None:
            _whole(ttl["sweep_interval_minutes"], "ttl.sweep_interval_minutes", 1)
        return TTLConfig(**ttl)

    # -- life ------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the TTL sweeper; close the store if this object opened it."""
        self.stop_ttl_sweeper()
        if self._owned:
            self._braid.close()

    def __enter__(self) -> BraidlogStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ---------------------------------------------------------------------------
    def _now(self) -> datetime:
        return datetime.now(UTC)

    def _items(self, namespace: tuple[str, ...]) -> Items:
        return _space(self._spaces, self._log, braid_of_namespace(namespace), follow=True)

    def _namespaces(self) -> list[Items]:
        return [_space(self._spaces, self._log, braid, follow=True)
                for braid in self._log.braids() if braid.startswith(STORE_PREFIX)]

    def _receipt(self, op: SearchOp, cited: list[tuple[Any, float | None]]) -> None:
        """With ``receipts=True``, record what a search returned as a context receipt: the
        items' current versions (seq and delta id), ranked as returned, with their scores; the
        run is the graph's thread id and the turn its step and node (``langgraph.config``), or
        ``langgraph`` and a fresh id outside a graph."""
        if not self.receipts:
            return
        from ...delta import new_id
        from ...receipts.record import record_context

        run, turn = "langgraph", new_id()
        try:
            from langgraph.config import get_config

            config = get_config()
        except (ImportError, RuntimeError):  # not inside a graph's run
            config = None
        if config is not None:
            meta, conf = config.get("metadata") or {}, config.get("configurable") or {}
            run = str(conf.get("thread_id") or meta.get("thread_id") or run)[:120]
            step, node = meta.get("langgraph_step"), meta.get("langgraph_node")
            if step is not None:
                turn = f"{step}:{node}"[:120]
        items = [{"seq": cur.seq, "delta_id": cur.id, "role": "retrieved",
                  **({"score": score} if score is not None else {})} for cur, score in cited]
        record_context(self._braid, items, run=run, turn=turn)

    def history(self, namespace: tuple[str, ...], key: str) -> list[ItemVersion]:
        """Every version of the item, oldest first: each put (``value``), delete (``value``
        None) and expiry, with the seq and id of its delta, its time and provenance."""
        with self._lock:
            return self._history(namespace, key)

    def at(self, point: Any) -> StoreAt:
        """The store as it was at ``point`` (a seq, a delta id or a timezone-aware datetime):
        get, search and list_namespaces as of then; writing through it raises."""
        with self._lock:
            return StoreAt(self, self._braid.resolve(point))

    # -- the batch -------------------------------------------------------------------------
    def _texts(self, value: Mapping[str, Any], index: Any) -> str:
        from langgraph.store.base.embed import get_text_at_path, tokenize_path

        paths = self._fields if index is None else [(p, tokenize_path(p)) for p in index]
        texts = []
        for _, path in paths:
            texts += [t for t in get_text_at_path(value, path) if isinstance(t, str) and t.strip()]
        return "\n".join(texts)

    def _plan(self, ops: Iterable[Any]) -> tuple[list[Any], dict[tuple, PutOp], list[str], list[str]]:
        """Check every op (nothing is written if one is bad): the ops, the puts (the last for
        each item counts), the texts to embed, the queries to embed."""
        if isinstance(ops, (str, bytes, Mapping)) or not isinstance(ops, Iterable):
            raise ValidationError("ops", "must be a list of GetOp, PutOp, SearchOp, ListNamespacesOp")
        ops = list(ops)
        puts: dict[tuple, PutOp] = {}
        texts: list[str] = []
        queries: list[str] = []
        for i, op in enumerate(ops):
            if isinstance(op, PutOp):
                ns = check_namespace(op.namespace, "namespace", writing=True)
                key = _text(op.key, "key")
                if op.value is not None:
                    if not isinstance(op.value, Mapping) or not all(isinstance(k, str) for k in op.value):
                        raise ValidationError("value", f"must be a dict with string keys or None, "
                                              f"not {type(op.value).__name__}")
                    if op.ttl is not None:
                        _minutes(op.ttl, "ttl")
                    if op.index not in (None, False) and (
                            isinstance(op.index, str) or not isinstance(op.index, (list, tuple))
                            or not all(isinstance(p, str) and p for p in op.index)):
                        raise ValidationError("index", "must be None, False or a list of field paths")
                    dump_any(self.serde, dict(op.value), "value")  # serializable, or refused now
                puts[(ns, key)] = op
            elif isinstance(op, SearchOp):
                check_namespace(op.namespace_prefix, "namespace_prefix")
                check_filter(op.filter)
                _whole(op.limit, "limit"), _whole(op.offset, "offset")
                if op.query is not None and not isinstance(op.query, str):
                    raise ValidationError("query", f"must be a string or None, not {type(op.query).__name__}")
                if op.query and self.embeddings is not None and self.mode != "keyword":
                    queries.append(op.query)
            elif isinstance(op, GetOp):
                check_namespace(op.namespace, "namespace")
                _text(op.key, "key")
            elif not isinstance(op, ListNamespacesOp):
                raise ValidationError(f"ops[{i}]", f"must be a GetOp, PutOp, SearchOp or "
                                      f"ListNamespacesOp, not {type(op).__name__}")
            if isinstance(op, (GetOp, SearchOp)) and not isinstance(op.refresh_ttl, bool):
                raise ValidationError("refresh_ttl", f"must be True, False or None, not {op.refresh_ttl!r}"[:120])
        if self.embeddings is not None:
            for op in puts.values():
                if op.value is not None and op.index is not False:
                    text = self._texts(op.value, op.index)
                    if text:
                        texts.append(text)
        return ops, puts, texts, queries

    def _vectors(self, texts: list[str], got: Any) -> list[list[float]]:
        dims = self.index_config.get("dims") if self.index_config else None
        try:
            vectors = [list(map(float, v)) for v in got]
        except (TypeError, ValueError) as e:
            raise ValidationError("index.embed", f"must return lists of numbers ({e})") from None
        if len(vectors) != len(texts):
            raise ValidationError("index.embed", f"returned {len(vectors)} vectors for {len(texts)} texts")
        for v in vectors:
            if len(v) != dims or not all(math.isfinite(x) for x in v):
                raise ValidationError("index.embed", f"must return {dims} finite numbers per text, "
                                      f"not {len(v)}")
        return vectors

    def batch(self, ops: Iterable[Any]) -> list[Any]:
        """Run the ops in order. Reads see the store as it was before the batch; the batch's
        puts and deletes (the last per item) are written together, atomically, at its end."""
        ops, puts, texts, queries = self._plan(ops)
        if texts or queries:
            self._check_embedder()
        docs = self._vectors(texts, self.embeddings.embed_documents(texts)) if texts else []
        qvecs = {q: self._vectors([q], [self.embeddings.embed_query(q)])[0] for q in set(queries)}
        return self._run(ops, puts, texts, docs, qvecs)

    async def abatch(self, ops: Iterable[Any]) -> list[Any]:
        ops, puts, texts, queries = self._plan(ops)
        if texts or queries:
            await asyncio.to_thread(self._check_embedder)
        docs = self._vectors(texts, await self.embeddings.aembed_documents(texts)) if texts else []
        qvecs = {}
        for q in set(queries):
            qvecs[q] = self._vectors([q], [await self.embeddings.aembed_query(q)])[0]
        return await asyncio.to_thread(self._run, ops, puts, texts, docs, qvecs)

    def _run(self, ops: list[Any], puts: dict[tuple, PutOp], texts: list[str],
             docs: list[list[float]], qvecs: dict[str, list[float]]) -> list[Any]:
        results: list[Any] = []
        refresh: dict[tuple, tuple[Items, str, Current]] = {}
        with self._lock:
            for op in ops:
                if isinstance(op, GetOp):
                    item = self._get(op)
                    results.append(item)
                    if item is not None and op.refresh_ttl:
                        items = self._items(item.namespace)
                        refresh[(item.namespace, item.key)] = (items, item.key, items.live[item.key])
                elif isinstance(op, SearchOp):
                    found = self._search(op, qvecs.get(op.query) if op.query else None)
                    results.append(found)
                    if op.refresh_ttl:
                        for it in found:
                            items = self._items(it.namespace)
                            refresh[(it.namespace, it.key)] = (items, it.key, items.live[it.key])
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op))
                else:
                    results.append(None)
            deltas = self._put_deltas(puts, texts, docs)
            deltas += self._refresh_deltas(refresh, puts)
            if deltas:
                self._write(deltas)
        return results

    def _put_deltas(self, puts: dict[tuple, PutOp], texts: list[str], docs: list[list[float]]) -> list[Any]:
        out, vectors = [], iter(docs)
        for (ns, key), op in puts.items():
            payload: dict[str, Any] = {"namespace": list(ns), "key": key}
            vector = None
            if op.value is None:
                if key not in self._items(ns).live:
                    continue  # deleting what is not there writes nothing
                payload["value"] = None
            else:
                payload["value"] = dump_any(self.serde, dict(op.value), "value")
                payload["ttl"] = op.ttl
                if self.index_config is not None and op.index is not False:
                    text = self._texts(op.value, op.index)
                    if text:
                        payload["text"] = text
                        if self.embeddings is not None:
                            vector = Vector.of(next(vectors), SPACE)
            out.append(self._delta(braid_of_namespace(ns), payload, vector=vector))
        return out

    def _refresh_deltas(self, refresh: dict[tuple, tuple[Items, str, Current]],
                        puts: dict[tuple, PutOp]) -> list[Any]:
        """A read that refreshes TTLs (``refresh_ttl``, by default ``TTLConfig.refresh_on_read``)
        is a write the caller asked for: one small delta per item with a TTL, unless its
        expiry would move by less than a hundredth of the TTL."""
        out, now = [], datetime.now(UTC)
        for (ns, key), (items, _, cur) in refresh.items():
            if cur.ttl is None or (ns, key) in puts:
                continue
            if (cur.expires_at is not None
                    and now + timedelta(minutes=cur.ttl) - cur.expires_at < timedelta(minutes=cur.ttl / 100)):
                continue
            out.append(self._delta(items.braid, {"namespace": list(ns), "key": key, "ttl": cur.ttl,
                                                 "refreshed": True}, now))
        return out

    def _write(self, deltas: list[Any]) -> None:
        if self._identity is not None and any(d.vector is not None for d in deltas):
            from ...kind_schema import append_with_embedder

            append_with_embedder(self._braid, deltas, SPACE, *self._identity)  # declared with the first vectors
            self._declared = True
        else:
            self._braid.append_batch(deltas)

    def _check_embedder(self) -> None:
        """Refuse a query through another embedder than the one the store's vectors recorded."""
        if self._declared or self._identity is None:
            return
        from ...kind_schema import embedder_mismatch, recorded_embedder

        recorded = recorded_embedder(self._log, SPACE)
        if recorded is not None:
            why = embedder_mismatch(recorded, *self._identity[:3])
            if why is not None:
                raise ValidationError("index.embed", why)
            self._declared = True

    def _delta(self, braid: str, payload: dict[str, Any], now: datetime | None = None,
               vector: Any = None) -> Any:
        return make_delta(braid, "langgraph.item", payload, provenance=self.provenance,
                          confidence=1.0, vector=vector, ts=now or datetime.now(UTC))

    # -- TTL ---------------------------------------------------------------------------------
    def sweep_ttl(self) -> int:
        """Delete every item whose TTL has run out (one delta each, marked ``expired``); the
        number deleted. With ``erase=True`` every version of those items is then erased."""
        now = datetime.now(UTC)
        with self._lock:
            deltas = []
            for items in self._namespaces():
                for key, cur in items.live.items():
                    if cur.expires_at is not None and cur.expires_at < now:
                        deltas.append(self._delta(items.braid, {
                            "namespace": list(items.ns), "key": key, "value": None,
                            "expired": True}, now))
            if deltas:
                self._write(deltas)
                if self.erase:
                    self._erase_expired(deltas)
            return len(deltas)

    def _erase_expired(self, expired: list[Any]) -> None:
        """Erase every version of the items just expired (their puts and TTL refreshes); the
        expiry deltas, which hold no value, stay."""
        gone = {(d.braid_id, d.payload["key"]) for d in expired}
        seqs = [rec.seq for braid in {b for b, _ in gone} for rec in self._log.scan_braid(braid)
                if rec.delta.erased is None and rec.delta.kind == "langgraph.item"
                and (braid, rec.delta.payload.get("key")) in gone
                and not rec.delta.payload.get("expired")]
        if seqs:
            self._braid.erase(seqs=seqs, reason="LangGraph TTL expiry")
            self._spaces.clear()

    def start_ttl_sweeper(self, sweep_interval_minutes: int | None = None) -> concurrent.futures.Future:
        """Sweep expired items every ``sweep_interval_minutes`` (default: the TTLConfig's, else
        5) in a daemon thread until ``stop_ttl_sweeper``; the future resolves when it stops."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        if sweep_interval_minutes is not None:
            _whole(sweep_interval_minutes, "sweep_interval_minutes", 1)
        if self._sweeper is not None and self._sweeper.is_alive():
            future.set_result(None)
            return future
        minutes = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(minutes * 60):
                try:
                    self.sweep_ttl()
                except BraidlogError as e:  # the next round tries again
                    log.warning("TTL sweep failed: %s", e)
            future.set_result(None)

        self._sweeper = threading.Thread(target=loop, daemon=True, name="braidlog-ttl-sweeper")
        self._sweeper.start()
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; whether it has stopped."""
        if self._sweeper is None:
            return True
        self._stop.set()
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped


class _Embedder:
    """LangGraph's embeddings as braidlog recall's Embedder (with the identity the store's
    space records), so a hybrid search embeds its query, as a query, with the model that
    embedded the items."""

    def __init__(self, embeddings: Any, identity: tuple[str, int, str, str]) -> None:
        self.name, self.dim, self.digest, self.spec = identity
        self._embeddings = embeddings

    def embed(self, texts: Any) -> Any:
        import numpy as np

        return np.asarray([self._embeddings.embed_query(t) for t in texts], dtype=np.float32)

    embed_queries = embed


def _minutes(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValidationError(field, f"must be a positive number of minutes, not {value!r}"[:120])
    return float(value)


class StoreAt(_Reader, BaseStore):
    """A ``BraidlogStore`` as it was at one seq: get, search (by query too, through recall as
    of that seq), list_namespaces and history. Read-only: a put or delete raises, and reads
    refresh no TTL."""

    supports_ttl = False

    def __init__(self, store: BraidlogStore, seq: int) -> None:
        from ...braid import ReadView

        if not isinstance(store, BraidlogStore):
            raise ValidationError("store", f"must be a BraidlogStore, not {type(store).__name__}")
        _whole(seq, "seq")
        self.seq = seq
        self.serde = store.serde
        self.mode = store.mode
        self.index_config, self.embeddings = store.index_config, store.embeddings
        self.ttl_config = store.ttl_config
        self._store = store
        self._braid = store._braid
        self._log = ReadView(store._log, seq)
        self._recall_on = store._recall_on
        self._embedder = store._embedder
        self._spaces: dict[str, Items] = {}
        rec = None if seq == 0 else self._log.read(seq)
        self._time = rec.delta.ts if rec is not None else datetime(1970, 1, 1, tzinfo=UTC)

    def _now(self) -> datetime:
        return self._time

    def _as_of(self) -> int | None:
        return self.seq

    def _items(self, namespace: tuple[str, ...]) -> Items:
        return _space(self._spaces, self._log, braid_of_namespace(namespace), follow=False)

    def _namespaces(self) -> list[Items]:
        return [_space(self._spaces, self._log, braid, follow=False)
                for braid in self._store._log.braids() if braid.startswith(STORE_PREFIX)]

    def history(self, namespace: tuple[str, ...], key: str) -> list[ItemVersion]:
        """The item's versions up to this seq, oldest first."""
        return self._history(namespace, key)

    def batch(self, ops: Iterable[Any]) -> list[Any]:
        if isinstance(ops, (str, bytes, Mapping)) or not isinstance(ops, Iterable):
            raise ValidationError("ops", "must be a list of GetOp, SearchOp, ListNamespacesOp")
        ops = list(ops)
        for i, op in enumerate(ops):
            if isinstance(op, PutOp):
                raise ValidationError(f"ops[{i}]", f"the store as of seq {self.seq} is read-only: "
                                      "write to the store itself")
            if not isinstance(op, (GetOp, SearchOp, ListNamespacesOp)):
                raise ValidationError(f"ops[{i}]", f"must be a GetOp, SearchOp or ListNamespacesOp, "
                                      f"not {type(op).__name__}")
        qvecs = {}
        if self.embeddings is not None and self.mode != "keyword":
            for op in ops:
                if isinstance(op, SearchOp) and isinstance(op.query, str) and op.query:
                    qvecs[op.query] = self._store._vectors([op.query], [self.embeddings.embed_query(op.query)])[0]
        return self._read(ops, qvecs)

    def _read(self, ops: list[Any], qvecs: dict[str, list[float]]) -> list[Any]:
        out: list[Any] = []
        for op in ops:
            if isinstance(op, GetOp):
                out.append(self._get(op))
            elif isinstance(op, SearchOp):
                out.append(self._search(op, qvecs.get(op.query) if isinstance(op.query, str) else None))
            else:
                out.append(self._list_namespaces(op))
        return out

    async def abatch(self, ops: Iterable[Any]) -> list[Any]:
        return await asyncio.to_thread(self.batch, ops)


def _space(spaces: dict[str, Items], log: Any, braid: str, *, follow: bool) -> Items:
    """The items of the namespace kept in ``braid``, made and caught up on first use; with
    ``follow`` (the live store) caught up with the log at every read, else (a view as of a
    seq, whose log does not move) never again."""
    items = spaces.get(braid)
    if items is None:
        items = spaces[braid] = Items(braid)
        items.catch_up(log)
    elif follow:
        items.catch_up(log)
    return items
