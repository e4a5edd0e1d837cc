"""What the LangGraph saver and store share: values in delta payloads, byte deltas between two
versions of a value, braid names, the kinds they declare in the log, and opening a store.

A payload is JSON, so a value goes in one of two forms: ``{"j": value}`` when it is plain JSON
(dicts with string keys, lists, strings, 64-bit integers, finite floats, booleans, None), which
``braidlog log`` shows as it is, else ``{"t": type, "b": base64}``, the bytes and type tag of
LangGraph's serializer (``serde.dumps_typed``). A channel value may also be stored as a byte
delta against an earlier version of the same channel (``{"t", "base", "d", "c", "ops"}``:
``base`` the seq of the record holding that version, ``d`` how many deltas deep the chain is,
``c`` the bytes of the chain's deltas, ``ops``
copies ``[offset, length]`` out of the base's bytes and base64 literals), so a value that grows
(a list of messages, a dict gaining keys) costs what it gained, not its whole size again.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
from collections.abc import Mapping
from typing import Any

from ...delta import Provenance
from ...errors import BraidlogError, ValidationError

__all__ = ["KINDS", "REFERS", "checkpoint_key", "head_key", "thread_key", "braid_of",
           "dump", "load", "dump_any", "load_any", "bdiff", "bpatch",
           "open_braid", "declare_kinds", "plain", "PROVENANCE"]

PROVENANCE = Provenance("system", source="langgraph")
MAX_BRAID = 120

_STR = {"type": "string"}
_OBJ = {"type": "object"}
#: The kinds the saver and the store write, declared in the store's log on first use so every
#: process (the ``braidlog`` command among them) knows them without importing this package.
#: Version 2 of the saver's kinds (``REFERS``) adds the keys the refers-to index files their
#: deltas under, so that a thread's latest checkpoint, a checkpoint by id and its writes are
#: each one index lookup (``key``, ``head``, ``thread``), and the ``at`` map, ``latest`` and
#: ``mono`` fields of a checkpoint (docs/langgraph.md, "How a thread is stored").
KINDS: dict[str, dict[str, Any]] = {
    "langgraph.checkpoint": {
        "type": "object", "required": ["thread_id", "ns", "checkpoint_id", "checkpoint", "metadata", "values"],
        "properties": {"thread_id": _STR, "ns": _STR, "checkpoint_id": _STR,
                       "parent_id": {"type": ["string", "null"]}, "run_id": {"type": ["string", "null"]},
                       "checkpoint": _OBJ, "metadata": _OBJ, "values": _OBJ,
                       "key": _STR, "head": _STR, "at": _OBJ,
                       "latest": {"type": ["array", "null"]}, "mono": {"type": "boolean"}}},
    "langgraph.writes": {
        "type": "object", "required": ["thread_id", "ns", "checkpoint_id", "task_id", "writes"],
        "properties": {"thread_id": _STR, "ns": _STR, "checkpoint_id": _STR, "task_id": _STR,
                       "task_path": _STR, "replace": {"type": "boolean"},
                       "writes": {"type": "array"}, "key": _STR}},
    "langgraph.deleted": {
        "type": "object", "required": ["what"],
        "properties": {"what": {"enum": ["thread", "prune", "runs"]}, "thread_id": _STR,
                       "keep": {"type": "array"}, "run_ids": {"type": "array"}, "thread": _STR}},
    "langgraph.item": {
        "type": "object", "required": ["namespace", "key"],
        "properties": {"namespace": {"type": "array", "items": _STR}, "key": _STR,
                       "value": {"type": ["object", "null"]}, "ttl": {"type": ["number", "null"]},
                       "index": {"type": ["array", "boolean", "null"]},
                       "refreshed": {"type": "boolean"}}},
}


#: The payload fields the refers-to index files each kind's deltas under (their second version).
REFERS: dict[str, tuple[str, ...]] = {"langgraph.checkpoint": ("key", "head"),
                                      "langgraph.writes": ("key",), "langgraph.deleted": ("thread",)}


def _digest(text: str, size: int) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=size).hexdigest()


def _ns_prefix(thread_id: str, ns: str) -> str:
    return f"lg/{_digest(thread_id, 10)}/{_digest(ns, 6) if ns else ''}/"


def thread_key(thread_id: str) -> str:
    """The refers-to key of a thread's tombstones (delete_thread, prune). A thread's keys share
    its prefix, so they sit side by side in the index (a put dirties few of its pages)."""
    return f"lg/{_digest(thread_id, 10)}"


def head_key(thread_id: str, ns: str) -> str:
    """The refers-to key of a thread's checkpoint namespace: every checkpoint put in it, in the
    order put, so the last is one lookup."""
    return _ns_prefix(thread_id, ns)


def checkpoint_key(thread_id: str, ns: str, checkpoint_id: str) -> str:
    """The refers-to key of a checkpoint: its records (each put of it) and its writes. The id
    as it is when short and plain (LangGraph's are time-ordered UUIDs: a new one sorts last),
    else a digest of it."""
    plain_id = len(checkpoint_id) <= 64 and checkpoint_id.isascii() and checkpoint_id.isprintable()
    return _ns_prefix(thread_id, ns) + (checkpoint_id if plain_id else "#" + _digest(checkpoint_id, 16))


def braid_of(prefix: str, name: str) -> str:
    """The braid of a thread or namespace: ``prefix + name``, or a digest of the name when that
    would pass the envelope's 120 characters (the payload still holds the whole name)."""
    braid = prefix + name
    if len(braid) <= MAX_BRAID:
        return braid
    return prefix + "#" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()


def plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON a payload stores as it is, and reads back equal and of the same
    types (nested at most 8 deep, so it fits the payload's 16 levels with room for ours)."""
    t = type(value)
    if t is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if value is None or t is bool:
        return True
    if t is int:
        return -2**63 <= value < 2**64
    if t is float:
        return math.isfinite(value)
    if depth >= 8:
        return False
    if t is list:
        return all(plain(v, depth + 1) for v in value)
    if t is dict:
        return all(type(k) is str and plain(k) and plain(v, depth + 1) for k, v in value.items())
    return False


def dump(serde: Any, value: Any, field: str) -> tuple[str, bytes]:
    """``serde.dumps_typed(value)``; a value it cannot serialize is a ValidationError naming
    ``field``."""
    try:
        t, data = serde.dumps_typed(value)
    except Exception as e:  # the serializer's own error types vary: say which field and why
        raise ValidationError(field, f"cannot be serialized by LangGraph's serializer "
                              f"({type(e).__name__}: {e})") from None
    return t, bytes(data)


def load(serde: Any, t: str, data: bytes) -> Any:
    return serde.loads_typed((t, data))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def dump_any(serde: Any, value: Any, field: str) -> dict[str, Any]:
    """A value in the form a payload holds: plain JSON as it is, anything else as typed bytes."""
    if plain(value):
        return {"j": value}
    t, data = dump(serde, value, field)
    return {"t": t, "b": b64(data)}


def load_any(serde: Any, enc: Mapping[str, Any]) -> Any:
    if "j" in enc:
        return enc["j"]
    return load(serde, enc["t"], unb64(enc["b"]))


# -- byte deltas -------------------------------------------------------------------------------

def _prefix(a: bytes, i: int, b: bytes, j: int) -> int:
    """Length of the common prefix of ``a[i:]`` and ``b[j:]``: chunks compared by memcmp,
    doubling while they match, halving to find the first difference."""
    return _common(min(len(a) - i, len(b) - j),
                   lambda done, m: a[i + done:i + done + m] == b[j + done:j + done + m])


def _suffix(a: bytes, i: int, b: bytes, j: int) -> int:
    """Length of the common suffix of ``a[i:]`` and ``b[j:]``."""
    ea, eb = len(a), len(b)
    return _common(min(ea - i, eb - j),
                   lambda done, m: a[ea - done - m:ea - done] == b[eb - done - m:eb - done])


def _common(n: int, same: Any) -> int:
    """How many of ``n`` bytes match, ``same(done, m)`` comparing the next ``m`` after the first
    ``done``: chunks doubling while they match, halving to find the first difference."""
    done, step = 0, 256
    while done < n:
        m = min(step, n - done)
        if same(done, m):
            done += m
            step *= 2
        elif m == 1:
            break
        else:
            step = m // 2
    return done


Part = tuple[bool, int, int]  # (copy, offset, length) from old, or (literal, start, stop) of new


def _cost(parts: list[Part]) -> int:
    """The size of ``parts``' ops: 12 a copy, a literal's base64 (4 characters per 3 bytes)."""
    n = 0
    for copy, a, b in parts:
        if copy:
            n += 12 if b else 0
        elif b > a:
            n += 4 * ((b - a + 2) // 3)
    return n


def _ops(new: bytes, parts: list[Part]) -> list[Any]:
    out: list[Any] = []
    for copy, a, b in parts:
        if copy:
            if b:
                out.append([a, b])
        elif b > a:
            out.append(b64(new[a:b]))
    return out


def bdiff(old: bytes, new: bytes) -> list[Any] | None:
    """Ops that make ``new`` out of ``old`` (``bpatch``), or None when they would not be much
    smaller than ``new`` itself. Two shapes are tried, each a few memcmp's over the values:
    ``old`` less a short header found in ``new`` after a short header (a list or map that grew:
    its length prefix changes, its items stay), and the bytes both share at the start and the
    end (a change in place). Each is costed before any of it is encoded: only the ops kept are
    base64'd."""
    best: list[Part] | None = None
    cost = 0
    if len(old) >= 16:
        for k in range(min(10, len(old) - 15)):
            j = new.find(old[k:k + 16], 0, 10 + 16)
            if j < 0:
                continue
            m = _prefix(old, k, new, j)
            t = _suffix(old, k + m, new, j + m)
            cand = [(False, 0, j), (True, k, m), (False, j + m, len(new) - t), (True, len(old) - t, t)]
            if best is None or _cost(cand) < cost:
                best, cost = cand, _cost(cand)
            if k + m == len(old):
                break  # all of old after its header is in new: nothing can copy more
    if best is None or cost > 64:
        p = _prefix(old, 0, new, 0)
        s = _suffix(old, p, new, p)
        cand = [(True, 0, p), (False, p, len(new) - s), (True, len(old) - s, s)]
        if best is None or _cost(cand) < cost:
            best, cost = cand, _cost(cand)
    if cost * 10 > len(new) * 8:  # not worth a chain: store the value whole
        return None
    return _ops(new, best)


def bpatch(old: bytes, ops: list[Any]) -> bytes:
    """``bdiff``'s ops applied to ``old``: the copies taken as views of it, the whole joined in
    one allocation (a growing value is copied once a patch, not three times)."""
    view = memoryview(old)
    return b"".join([unb64(op) if isinstance(op, str) else view[op[0]:op[0] + op[1]] for op in ops])


# -- the store ---------------------------------------------------------------------------------

def open_braid(store: Any, field: str = "store") -> tuple[Any, bool]:
    """The Braid behind ``store``: an open Braid as it is, else a path opened (and created when
    missing) with no projections. Returns (braid, owned): whether closing is ours."""
    from ...braid import Braid
    from ...braid import open as open_store

    if isinstance(store, Braid):
        return store, False
    if isinstance(store, (str, os.PathLike)):
        try:
            return open_store(os.fspath(store), projections=[]), True
        except BraidlogError:
            raise
        except (OSError, ValueError, TypeError) as e:
            raise ValidationError(field, f"cannot open a store at {store!r}: {e}") from None
    raise ValidationError(field, f"must be a path or an open braidlog.Braid, not {type(store).__name__}")


def declare_kinds(braid: Any) -> None:
    """Declare the kinds this package writes in the store's log, once per store: a second
    process that races us to it finds them declared and goes on."""
    from ...kind_schema import declare_kind

    registry = braid.log.registry
    for name, schema in KINDS.items():
        refers = REFERS.get(name, ())
        spec = registry.get(name)
        if spec is not None and (not refers or spec.refers is not None):
            continue
        if spec is None:  # a new store: the kind as it is now, at version 1
            version = 1
        else:  # declared before its refers-to keys: version 2 adds them
            version = spec.version + 1
        try:
            declare_kind(braid, name, schema, owner="langgraph", version=version, refers=refers,
                         description="written by braidlog.integrations.langgraph")
        except ValidationError:
            spec = registry.get(name)
            if spec is None or (refers and spec.refers is None):
                raise
