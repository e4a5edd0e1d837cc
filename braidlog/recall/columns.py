"""What recall knows of each indexed delta besides its vector, and the filters over it.

A vector's *position* is its rank in seq order within its space. Per position the index keeps
the delta's seq, id, braid, kind, payload namespace and workspace, and tags, in numpy columns:
8 bytes of seq, 26 of id (a ULID), 4 per categorical field (a code into a small vocabulary) and
4 per tag plus 8 of offset. That is about 60 bytes a vector, against some 600 for the same facts
as Python lists, dicts and posting lists of ints (docs/recall.md, "Memory").

Filters become the sorted array of eligible positions, computed once per filter and head and
cached by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

import msgspec
import numpy as np
from msgspec import Struct

from ..delta import Vector
from ..errors import ValidationError

__all__ = ["Body", "Columns", "Filter", "NO_FILTER", "UNFILTERED", "Where", "make_filter", "scope"]

FIELDS = ("braid", "kind", "namespace", "workspace")
ID_BYTES = 26  # a ULID; the envelope refuses any other id
EMPTY = np.zeros(0, dtype=np.int64)


class _Scope(Struct):
    namespace: Any = None
    workspace: Any = None


class Body(Struct):
    """The part of a stored delta the index reads (the rest is skipped by the decoder)."""

    id: str
    braid_id: str
    kind: str
    payload: _Scope
    tags: tuple[str, ...] = ()
    vector: Vector | None = None


def scope(value: Any) -> str:
    """A payload's namespace or workspace as recall files it ("default" when absent)."""
    return value if isinstance(value, str) and value else "default"


class _Vocab:
    """value <-> int32 code for one categorical column."""

    __slots__ = ("codes", "names")

    def __init__(self, names: list[str] | None = None) -> None:
        self.names: list[str] = list(names or ())
        self.codes: dict[str, int] = {n: i for i, n in enumerate(self.names)}

    def code(self, value: str) -> int:
        c = self.codes.get(value)
        if c is None:
            c = self.codes[value] = len(self.names)
            self.names.append(value)
        return c


def _grown(a: np.ndarray, need: int) -> np.ndarray:
    if need <= len(a):
        return a
    out = np.zeros(max(need, 2 * len(a), 1024), dtype=a.dtype)
    out[:len(a)] = a
    return out


class _Saved(Struct):
    """Columns as written to disk (numpy arrays as little-endian bytes)."""

    n: int
    seqs: bytes
    ids: bytes
    codes: dict[str, bytes]
    names: dict[str, list[str]]
    tag_codes: bytes
    tag_offsets: bytes
    tag_names: list[str]


class Columns:
    """Per position: seq, delta id, braid, kind, namespace, workspace and tags."""

    def __init__(self) -> None:
        self.n = 0
        self._seqs = np.zeros(0, dtype=np.int64)
        self._ids = np.zeros(0, dtype=f"S{ID_BYTES}")
        self._codes = {f: np.zeros(0, dtype=np.int32) for f in FIELDS}
        self._vocab = {f: _Vocab() for f in FIELDS}
        self._tag_codes = np.zeros(0, dtype=np.int32)
        self._tag_offsets = np.zeros(1, dtype=np.int64)
        self._tags = _Vocab()

    @property
    def seqs(self) -> np.ndarray:
        return self._seqs[:self.n]

    def seqs_of(self, positions: np.ndarray) -> np.ndarray:
        """The seqs at ``positions`` (each below ``n``), int64."""
        return self._seqs[positions]

    def seq(self, pos: int) -> int:
        return int(self._seqs[pos])

    def id(self, pos: int) -> str:
        return self._ids[pos].decode()

    def nbytes(self) -> int:
        """Bytes held by the columns (capacity, not just the filled part)."""
        return (self._seqs.nbytes + self._ids.nbytes + sum(c.nbytes for c in self._codes.values())
                + self._tag_codes.nbytes + self._tag_offsets.nbytes)

    def add(self, seqs: list[int], bodies: list[Body]) -> None:
        """Append the facts of ``bodies`` (in seq order, after every position already held)."""
        n, m = self.n, self.n + len(bodies)
        self._seqs = _grown(self._seqs, m)
        self._seqs[n:m] = seqs
        self._ids = _grown(self._ids, m)
        self._ids[n:m] = [b.id.encode() for b in bodies]
        for field, values in (("braid", [b.braid_id for b in bodies]), ("kind", [b.kind for b in bodies]),
                              ("namespace", [scope(b.payload.namespace) for b in bodies]),
                              ("workspace", [scope(b.payload.workspace) for b in bodies])):
            vocab = self._vocab[field]
            col = self._codes[field] = _grown(self._codes[field], m)
            col[n:m] = [vocab.code(v) for v in values]
        tags = [self._tags.code(t) for b in bodies for t in dict.fromkeys(b.tags)]
        start = int(self._tag_offsets[n])
        self._tag_codes = _grown(self._tag_codes, start + len(tags))
        self._tag_codes[start:start + len(tags)] = tags
        self._tag_offsets = _grown(self._tag_offsets, m + 1)
        self._tag_offsets[n + 1:m + 1] = start + np.cumsum([len(set(b.tags)) for b in bodies])
        self.n = m

    def position(self, seq: int) -> int | None:
        """The position of the delta at ``seq``, or None if it has no vector here."""
        at = int(np.searchsorted(self.seqs, seq))
        return at if at < self.n and self._seqs[at] == seq else None

    def count_upto(self, seq: int) -> int:
        """How many positions hold deltas at or before ``seq``."""
        return int(self._seqs[:self.n].searchsorted(seq, "right"))

    def braid_code(self, braid_id: str) -> int | None:
        """The code of a braid among the positions held, or None if none holds it."""
        return self._vocab["braid"].codes.get(braid_id)

    def of_braid(self, code: int, lo: int, hi: int) -> np.ndarray:
        """The positions in [lo, hi) whose delta is in the braid of ``code``, sorted."""
        return (np.flatnonzero(self._codes["braid"][lo:hi] == code) + lo).astype(np.int64)

    # -- filters ---------------------------------------------------------------------------------
    def eligible(self, flt: Filter, seq_of: Callable[[str], int | None]) -> np.ndarray:
        """The sorted positions the structured filters admit."""
        out: np.ndarray | None = None
        for field, values in (("braid", flt.braid), ("kind", flt.kinds), ("namespace", flt.namespace),
                              ("workspace", flt.workspace)):
            if values is None:
                continue
            vocab = self._vocab[field]
            codes = [vocab.codes[v] for v in values if v in vocab.codes]
            col = self._codes[field][:self.n]
            hit = np.flatnonzero(np.isin(col, codes) if len(codes) > 1 else col == (codes[0] if codes else -1))
            out = hit if out is None else np.intersect1d(out, hit, assume_unique=True)
        if flt.tags is not None:
            ends = self._tag_offsets[1:self.n + 1]
            used = self._tag_codes[:int(self._tag_offsets[self.n])]
            for t in sorted(flt.tags):
                code = self._tags.codes.get(t, -1)
                hit = np.unique(np.searchsorted(ends, np.flatnonzero(used == code), side="right"))
                out = hit if out is None else np.intersect1d(out, hit, assume_unique=True)
        if flt.ids is not None:
            found = (self.position(s) for s in (seq_of(i) for i in flt.ids) if s is not None)
            hit = np.asarray(sorted(p for p in found if p is not None), dtype=np.int64)
            out = hit if out is None else np.intersect1d(out, hit, assume_unique=True)
        return EMPTY if out is None else out.astype(np.int64, copy=False)

    # -- persistence -----------------------------------------------------------------------------
    def encode(self) -> bytes:
        n = self.n
        t = int(self._tag_offsets[n])
        return msgspec.msgpack.encode(_Saved(
            n, self._seqs[:n].astype("<i8").tobytes(), self._ids[:n].tobytes(),
            {f: self._codes[f][:n].astype("<i4").tobytes() for f in FIELDS},
            {f: self._vocab[f].names for f in FIELDS}, self._tag_codes[:t].astype("<i4").tobytes(),
            self._tag_offsets[:n + 1].astype("<i8").tobytes(), self._tags.names))

    @classmethod
    def decode(cls, data: bytes) -> Columns:
        """Columns from ``encode``'s bytes; raises ValueError (or msgspec's) when they disagree."""
        s = msgspec.msgpack.decode(data, type=_Saved)
        c = cls()
        c.n = s.n
        c._seqs = np.frombuffer(s.seqs, dtype="<i8").astype(np.int64)
        c._ids = np.frombuffer(s.ids, dtype=f"S{ID_BYTES}").copy()
        c._codes = {f: np.frombuffer(s.codes[f], dtype="<i4").astype(np.int32) for f in FIELDS}
        c._vocab = {f: _Vocab(s.names[f]) for f in FIELDS}
        c._tag_codes = np.frombuffer(s.tag_codes, dtype="<i4").astype(np.int32)
        c._tag_offsets = np.frombuffer(s.tag_offsets, dtype="<i8").astype(np.int64)
        c._tags = _Vocab(s.tag_names)
        if not (len(c._seqs) == len(c._ids) == s.n == len(c._tag_offsets) - 1
                and all(len(v) == s.n for v in c._codes.values())
                and int(c._tag_offsets[-1]) == len(c._tag_codes)):
            raise ValueError("its columns disagree on the count")
        return c


# -- filters -------------------------------------------------------------------------------------

Where = Collection[str] | Callable[[str], bool] | None


def _names(field: str, value: str | Iterable[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset((value,))
    try:
        out = frozenset(value)
    except TypeError:
        raise ValidationError(field, "must be a string or an iterable of strings, "
                              f"not {type(value).__name__}") from None
    if not all(isinstance(v, str) for v in out):
        raise ValidationError(field, "must hold strings only")
    return out


class Filter(Struct, frozen=True):
    """The structured filters of a query (each None when not given)."""

    braid: frozenset[str] | None = None
    kinds: frozenset[str] | None = None
    tags: frozenset[str] | None = None
    namespace: frozenset[str] | None = None
    workspace: frozenset[str] | None = None
    ids: frozenset[str] | None = None

    def empty(self) -> bool:
        return self.braid is None and self._no_other()

    def one_braid(self) -> str | None:
        """The braid when the filter is exactly one braid and nothing else, else None."""
        if self.braid is None or len(self.braid) != 1 or not self._no_other():
            return None
        return next(iter(self.braid))

    def _no_other(self) -> bool:
        """No filter but the braid's."""
        return (self.kinds is None and self.tags is None and self.namespace is None
                and self.workspace is None and self.ids is None)

    def key(self) -> tuple:
        return (self.braid, self.kinds, self.tags, self.namespace, self.workspace, self.ids)


NO_FILTER = Filter()
UNFILTERED = (NO_FILTER, None)  # make_filter's answer when no filter is given (one object)


def make_filter(braid: Any = None, kinds: Any = None, tags: Any = None, namespace: Any = None,
                workspace: Any = None, where: Where = None) -> tuple[Filter, Callable[[str], bool] | None]:
    """The checked filters and, when ``where`` is callable, the predicate over delta ids."""
    if braid is None and kinds is None and tags is None and namespace is None and workspace is None \
            and where is None:
        return UNFILTERED
    pred = None
    ids = None
    if callable(where):
        pred = where
    elif where is not None:
        ids = _names("where", where)
    flt = Filter(_names("braid", braid), _names("kinds", kinds), _names("tags", tags),
                 _names("namespace", namespace), _names("workspace", workspace), ids)
    if flt.empty():
        return UNFILTERED if pred is None else (NO_FILTER, pred)
    return flt, pred
