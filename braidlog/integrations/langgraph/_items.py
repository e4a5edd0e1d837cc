"""The items of ``BraidlogStore`` as the log holds them: each namespace is a braid, each put,
delete, TTL refresh or expiry one ``langgraph.item`` delta in it. ``Items`` folds a namespace's
braid into its items' current versions; it is kept up to date from the braid before each read
(any process may have appended), or folded once up to a seq for a store as of that point.
Also here: LangGraph's filter and namespace-matching rules, as its own stores apply them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from langgraph.store.base import InvalidNamespaceError

from ...errors import ValidationError
from ._encoding import braid_of

__all__ = ["STORE_PREFIX", "Items", "Current", "braid_of_namespace", "matches", "check_filter",
           "namespace_matches", "check_namespace"]

STORE_PREFIX = "langgraph/store/"


def braid_of_namespace(namespace: tuple[str, ...]) -> str:
    """Labels hold no '.', so joining them with '.' names one namespace only."""
    return braid_of(STORE_PREFIX, ".".join(namespace))


def check_namespace(namespace: Any, field: str, *, writing: bool = False) -> tuple[str, ...]:
    """A namespace as LangGraph's stores take one, else LangGraph's InvalidNamespaceError."""
    if not isinstance(namespace, (tuple, list)):
        raise InvalidNamespaceError(f"{field} must be a tuple of strings, not {type(namespace).__name__}")
    for label in namespace:
        if not isinstance(label, str):
            raise InvalidNamespaceError(f"Invalid namespace label {label!r} found in {namespace!r}. "
                                        f"Namespace labels must be strings, but got {type(label).__name__}.")
        if not label:
            raise InvalidNamespaceError(f"Namespace labels cannot be empty strings. Got {namespace!r}")
        if "." in label:
            raise InvalidNamespaceError(f"Invalid namespace label {label!r} found in {namespace!r}. "
                                        "Namespace labels cannot contain periods ('.').")
        if "\x00" in label:
            raise InvalidNamespaceError(f"Invalid namespace label {label!r} found in {namespace!r}. "
                                        "Namespace labels cannot contain NUL bytes ('\\x00').")
        try:
            label.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidNamespaceError(f"Invalid namespace label {label!r}: it holds a lone "
                                        "surrogate, which is not text") from None
    if writing:
        if not namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        if namespace[0] == "langgraph":
            raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {namespace!r}')
    return tuple(namespace)


@dataclass
class Current:
    """An item's current version: the seq of the delta holding its value, when it was created
    (its first put since it last did not exist), updated (its last put) and expires."""

    seq: int
    created_at: datetime
    updated_at: datetime
    ttl: float | None
    expires_at: datetime | None
    id: str
    indexed: bool = False  # holds text (and a vector, with embeddings) for search by query


@dataclass
class Items:
    """One namespace's items, folded from its braid up to ``seen``."""

    braid: str
    namespace: tuple[str, ...] | None = None
    seen: int = 0
    live: dict[str, Current] = field(default_factory=dict)

    @property
    def ns(self) -> tuple[str, ...]:
        """``namespace``, of items already taken (its first item names it)."""
        assert self.namespace is not None, f"braid {self.braid} holds no item yet"
        return self.namespace

    def catch_up(self, log: Any) -> None:
        for rec in log.scan_braid(self.braid, start=self.seen + 1):
            self.take(rec.seq, rec.delta)
            self.seen = rec.seq

    def take(self, seq: int, d: Any) -> None:
        p = d.payload
        if d.kind != "langgraph.item" or not p:  # not an item, or erased (its envelope only)
            return
        self.namespace = tuple(p["namespace"])
        key, ttl = p["key"], p.get("ttl")
        old = self.live.get(key)
        expires = None if ttl is None else d.ts + timedelta(minutes=ttl)
        if p.get("refreshed"):
            if old is not None:
                old.expires_at = expires
            return
        if p.get("value") is None:
            self.live.pop(key, None)
            return
        created = d.ts if old is None else old.created_at
        self.live[key] = Current(seq, created, d.ts, ttl, expires, d.id, "text" in p)


# -- LangGraph's rules -----------------------------------------------------------------------

_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def check_filter(flt: Any) -> dict[str, Any] | None:
    """A search filter as LangGraph's stores take one: keys to values, nested dicts matched
    part by part, and the operators $eq, $ne, $gt, $gte, $lt, $lte (the last four on numbers)."""
    if flt is None:
        return None
    if not isinstance(flt, Mapping) or not all(isinstance(k, str) for k in flt):
        raise ValidationError("filter", f"must be a dict of value keys to values, not {type(flt).__name__}")
    _check_ops(flt, "filter")
    return dict(flt)


def _check_ops(flt: Mapping[str, Any], at: str) -> None:
    for k, v in flt.items():
        if not isinstance(k, str):
            raise ValidationError(at, f"keys must be strings, not {type(k).__name__}")
        if k.startswith("$"):
            if k not in _OPS:
                raise ValidationError(f"{at}.{k}", f"unsupported operator; use one of {', '.join(_OPS)}")
            if k not in ("$eq", "$ne") and not _number(v):
                raise ValidationError(f"{at}.{k}", f"compares numbers, not {v!r}"[:120])
        elif isinstance(v, Mapping):
            _check_ops(v, f"{at}.{k}")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def matches(value: Any, flt: Any) -> bool:
    """Whether an item value (or a part of one) matches a filter value."""
    if isinstance(flt, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in flt):
            return all(_apply(value, op, v) for op, v in flt.items())
        if not isinstance(value, Mapping):
            return False
        return all(matches(value.get(k), v) for k, v in flt.items())
    if isinstance(flt, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(flt)
                and all(matches(a, b) for a, b in zip(value, flt, strict=True)))
    return value == flt


def _apply(value: Any, op: str, target: Any) -> bool:
    if op == "$eq":
        return value == target
    if op == "$ne":
        return value != target
    if not _number(value):
        return False
    return {"$gt": value > target, "$gte": value >= target, "$lt": value < target,
            "$lte": value <= target}[op]


def namespace_matches(namespace: tuple[str, ...], kind: str, path: tuple[str, ...]) -> bool:
    """LangGraph's prefix / suffix match of a namespace, '*' matching any one label."""
    if len(namespace) < len(path):
        return False
    pairs = (zip(namespace, path, strict=False) if kind == "prefix"
             else zip(reversed(namespace), reversed(path), strict=False))
    return all(p == "*" or n == p for n, p in pairs)
