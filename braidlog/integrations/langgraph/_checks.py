"""The saver's argument checks: a bad argument is a ValidationError naming the field and the
rule, before anything is written."""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from typing import Any

from ...errors import ValidationError

__all__ = ["text", "thread_id", "where", "versions"]


def text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(field, "must be text UTF-8 can encode (it holds a lone surrogate)") from None
    return value


def thread_id(value: Any, field: str) -> str:
    """A thread id as LangGraph's savers take one: a string, an integer or a UUID, as text."""
    if isinstance(value, uuid.UUID) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    return text(value, field)


def where(config: Any, field: str = "config") -> tuple[Any, str, str, str | None]:
    """(thread id as given, as text, checkpoint_ns, checkpoint_id or None) of a RunnableConfig."""
    if not isinstance(config, Mapping):
        raise ValidationError(field, f"must be a RunnableConfig (a dict with 'configurable'), "
                              f"not {type(config).__name__}")
    conf = config.get("configurable")
    if not isinstance(conf, Mapping):
        raise ValidationError(f"{field}.configurable", "must be a dict holding thread_id")
    given = conf.get("thread_id")
    if given is None:
        raise ValidationError(f"{field}.configurable.thread_id", "is required")
    tid = thread_id(given, f"{field}.configurable.thread_id")
    ns = conf.get("checkpoint_ns")
    ns = "" if ns is None else text(ns, f"{field}.configurable.checkpoint_ns")
    cid = conf.get("checkpoint_id")
    cid = None if cid is None else text(cid, f"{field}.configurable.checkpoint_id")
    return given, tid, ns, cid


def _version(value: Any, field: str) -> Any:
    if type(value) is str:
        return text(value, field)
    if type(value) is int and -2**63 <= value < 2**64:
        return value
    if type(value) is float and math.isfinite(value):
        return value
    raise ValidationError(field, f"must be a channel version (a string, an integer or a finite "
                          f"float), not {value!r}"[:200])


def versions(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(field, f"must be a dict of channel versions, not {type(value).__name__}")
    return {text(k, f"{field} key"): _version(v, f"{field}.{k}") for k, v in value.items()}
