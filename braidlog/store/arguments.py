"""The rules of the read API's arguments, shared by every store and view (``checked_reads``):
a seq, a range of seqs, an id or a name. Each raises ValidationError naming the parameter; a seq
the log does not hold is ``NoSuchSeq`` (also an IndexError, as a sequence's missing index is)."""

from __future__ import annotations

import functools
import numbers
import os
from datetime import datetime
from typing import Any

from ..errors import ValidationError

__all__ = ["whole", "name", "moment", "flag", "READS", "checked_reads"]


def _what(value: Any) -> str:
    return repr(value) if isinstance(value, (int, float, str)) else type(value).__name__


def whole(value: Any, field: str = "seq", *, least: int = 0) -> int:
    """``value`` as an int: a whole number (numpy's too), not a bool, at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValidationError(field, f"must be a whole number, not {_what(value)}")
    if value < least:
        raise ValidationError(field, f"must be at least {least}, not {value}")
    return int(value)


def name(value: Any, field: str) -> str:
    """A delta id, braid id, kind or entity id: a string."""
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, not {_what(value)}")
    return value


def moment(value: Any, field: str = "ts") -> datetime:
    """A timezone-aware datetime."""
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ValidationError(field, "must be a timezone-aware datetime"
                              + ("" if isinstance(value, datetime) else f", not {_what(value)}"))
    return value


def flag(value: Any, field: str) -> bool:
    """A bool (True or False, nothing else: ``durable="yes"`` is a mistake, not a yes)."""
    if not isinstance(value, bool):
        raise ValidationError(field, f"must be True or False, not {_what(value)}")
    return value


def durability(value: Any, field: str = "durable") -> bool | str:
    """``durable``: True (LMDB syncs every commit), False (an OS crash may undo the last
    commits) or ``"wal"`` (one sync a commit, through a write-ahead file)."""
    if isinstance(value, str) and value == "wal":
        return value
    if not isinstance(value, bool):
        raise ValidationError(field, f"must be True, False or 'wal', not {_what(value)}")
    return value


def _choice(*allowed: str) -> Any:
    def check(value: Any, field: str) -> Any:
        if value not in allowed or not isinstance(value, str):
            raise ValidationError(field, f"must be one of {', '.join(map(repr, allowed))}, not {_what(value)}")
        return value
    return check


def _seq(value: Any, field: str) -> Any:
    return whole(value, field, least=-(2**63))


def _stop(value: Any, field: str) -> Any:
    return None if value is None else _seq(value, field)


def _limit(value: Any, field: str) -> Any:
    return None if value is None else whole(value, field)


def _bytes(value: Any, field: str) -> Any:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise ValidationError(field, f"must be bytes, not {_what(value)}")
    return value


def _callable(value: Any, field: str) -> Any:
    if not callable(value):
        raise ValidationError(field, f"must be a function, not {_what(value)}")
    return value


def _progress(value: Any, field: str) -> Any:
    return None if value is None else _callable(value, field)


def _names(value: Any, field: str) -> Any:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset, dict)) \
            or not all(isinstance(v, str) for v in value):
        raise ValidationError(field, f"must be a list of names, not {_what(value)}")
    return value


def _seqs(value: Any, field: str) -> Any:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset, range, dict)):
        raise ValidationError(field, f"must be a list of seqs, not {_what(value)}")
    for v in value:
        whole(v, field, least=1)
    return value


def _erasures(value: Any, field: str) -> Any:
    if not isinstance(value, dict):
        raise ValidationError(field, f"must map each seq to the seq of the delta that erased it, not "
                              f"{_what(value)}")
    for k, v in value.items():
        whole(k, field, least=1)
        whole(v, field, least=1)
    return value


def _nodes(value: Any, field: str) -> Any:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not all(
            isinstance(n, tuple) and len(n) == 2 and all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in n) for n in value):
        raise ValidationError(field, f"must be a list of (level, index) pairs of whole numbers, not "
                              f"{_what(value)}")
    return value


def _path(value: Any, field: str) -> Any:
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value) or "\x00" in os.fspath(value):
        raise ValidationError(field, f"must be a path, not {_what(value)}")
    return value


def _delta(value: Any, field: str) -> Any:
    from ..delta import GenericDelta

    if not isinstance(value, GenericDelta):
        raise ValidationError(field, f"must be a GenericDelta, not {_what(value)}")
    return value


_RANGE = (("start", _seq), ("stop", _stop))
_SCAN = {"reverse": flag, "limit": _limit}

#: The store API's parameters, by method: (positional parameters in order, keyword-only ones).
READS: dict[str, tuple[tuple[tuple[str, Any], ...], dict[str, Any]]] = {
    "read": ((("seq", _seq),), {}),
    "body": ((("seq", _seq),), {}),
    "entry": ((("seq", _seq),), {}),
    "hash_at": ((("seq", _seq),), {}),
    "get": ((("delta_id", name),), {}),
    "seq_of": ((("delta_id", name),), {}),
    "braid_head": ((("braid_id", name),), {}),
    "seq_at": ((("ts", moment),), {}),
    "counts": ((("index", _choice("braid", "kind", "refs")),), {}),
    "scan": (_RANGE, _SCAN),
    "scan_rows": (_RANGE, {}),
    "scan_bodies": (_RANGE, {}),
    "verify": (_RANGE, {"progress": _progress}),
    "scan_braid": ((("braid_id", name), *_RANGE), _SCAN),
    "scan_kind": ((("kind", name), *_RANGE), _SCAN),
    "scan_refs": ((("entity_id", name), *_RANGE), _SCAN),
    # the capabilities' methods (checkpoints, notes, the tree, erasure, backup)
    "put_checkpoint": ((("name", name), ("version", whole), ("seq", whole), ("blob", _bytes)), {}),
    "get_checkpoint": ((("name", name), ("version", whole), ("seq", whole)), {}),
    "checkpoint_seqs": ((("name", name), ("version", whole)), {}),
    "put_note": ((("size", whole), ("note", _bytes)), {}),
    "tree_hashes": ((("nodes", _nodes),), {}),
    "use_projections": ((("names", _names),), {}),
    "commit_locked": ((("prepare", _callable),), {}),
    "erase": ((("seqs", _seqs), ("delta", _delta)), {}),
    "apply_erasures": ((("erase", _erasures), ("append", _callable)), {}),
    "repair_indexes": ((("progress", _progress),), {}),
    "copy": ((("dest", _path),), {"compact": flag}),
    "before_hashes": ((("*sizes", whole),), {}),
}


def checked_reads(cls: type) -> type:
    """``cls`` with the arguments of its read methods (``READS``) checked before each runs: a
    wrong type raises ValidationError naming the parameter, never a TypeError from deep inside."""
    for method, (positional, keywords) in READS.items():
        f = getattr(cls, method, None)
        if f is not None and not getattr(f, "_checked", False):
            setattr(cls, method, _checking(f, positional, keywords))
    return cls


def _checking(f: Any, positional: tuple[tuple[str, Any], ...], keywords: dict[str, Any]) -> Any:
    rules = {**dict(positional), **keywords}

    rest = positional[-1] if positional and positional[-1][0].startswith("*") else None
    fixed = positional[:-1] if rest is not None else positional

    @functools.wraps(f)
    def checked(self: Any, *args: Any, **kw: Any) -> Any:
        for (field, check), value in zip(fixed, args, strict=False):
            check(value, field)
        if rest is not None:  # a *args parameter: each of its values
            for value in args[len(fixed):]:
                rest[1](value, rest[0][1:])
        for field, value in kw.items():
            rule = rules.get(field)
            if rule is not None:
                rule(value, field)
        return f(self, *args, **kw)
    checked._checked = True  # type: ignore[attr-defined]  # a mark on the wrapper
    return checked
