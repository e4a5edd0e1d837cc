"""Reading stored payloads in a fold, at the cost of one ``msgspec.convert``.

``braidlog.typed(d)`` looks the delta's kind up in the registry, strips the version key,
upcasts and converts, on every call. A fold reads the same few kinds thousands of times, so it
binds each kind's spec once: ``reader(spec)`` returns ``read(d)``, equal to ``braidlog.typed(d)``
for deltas of that kind. A payload written at the current version 1 (no ``"_v"`` key, nothing to
upcast) is converted directly; any other goes through ``spec.typed``, upcasters and all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from braidlog import GenericDelta, KindSpec
from braidlog.kinds import VERSION_KEY

__all__ = ["reader"]


def reader(spec: KindSpec) -> Callable[[GenericDelta], Any]:
    """``read(d)``: the payload of ``d`` (a delta of ``spec.kind``) as ``spec``'s current Struct,
    exactly as ``braidlog.typed(d)`` gives it (and raising what it raises)."""
    schema, typed = spec.schema, spec.typed
    if spec.version != 1 or schema is None:
        return lambda d: typed(d.payload)
    convert = msgspec.convert

    def read(d: GenericDelta) -> Any:
        payload = d.payload
        if VERSION_KEY in payload:
            return typed(payload)
        return convert(payload, schema)

    return read
