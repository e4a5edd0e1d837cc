"""The rules of the read API's arguments, shared by every store and view (``checked_reads``):
a seq, a range of seqs, an id or a name. Each raises ValidationError naming the parameter; a seq
the log does not hold is ``NoSuchSeq`` (also an IndexError, as a sequence's missing index is)."""

from __future__ import annotations

import functools
import numbers
from datetime import datetime
from typing import Any

from ..errors import ValidationError

__all__ = ["whole", "seq_range", "name", "moment", "flag", "READS", "checked_reads"]


def _what(value: Any) -> str:
    return repr(value) if isinstance(value, (int, float, str)) else type(value).__name__


def whole(value: Any, field: str = "seq", *, least: int = 0) -> int:
    """``value`` as an int: a whole number (numpy's too), not a bool, at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValidationError(field, f"must be a whole number, not {_what(value)}")
    if value < least:
        raise ValidationError(field, f"must be at least {least}, not {value}")
    return int(value)


def seq_range(start: Any, stop: Any, limit: Any = None, reverse: Any = False) -> tuple[int, int | None]:
    """Check a scan's ``start``, ``stop`` (None: to the head), ``limit`` (None: no limit, else
    at least 0) and ``reverse``; return (start, stop) as ints."""
    first = whole(start, "start")
    last = None if stop is None else whole(stop, "stop")
    if limit is not None:
        whole(limit, "limit")
    flag(reverse, "reverse")
    return first, last


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


_RANGE = (("start", _seq), ("stop", _stop))
_SCAN = {"reverse": flag, "limit": _limit}

#: The read API's parameters, by method: (positional parameters in order, keyword-only ones).
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
    "verify": (_RANGE, {}),
    "scan_braid": ((("braid_id", name), *_RANGE), _SCAN),
    "scan_kind": ((("kind", name), *_RANGE), _SCAN),
    "scan_refs": ((("entity_id", name), *_RANGE), _SCAN),
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

    @functools.wraps(f)
    def checked(self: Any, *args: Any, **kw: Any) -> Any:
        for (field, check), value in zip(positional, args, strict=False):
            check(value, field)
        for field, value in kw.items():
            rule = rules.get(field)
            if rule is not None:
                rule(value, field)
        return f(self, *args, **kw)
    checked._checked = True  # type: ignore[attr-defined]  # a mark on the wrapper
    return checked
