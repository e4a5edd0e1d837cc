"""An export's records checked without a store, as import checks them: the readable JSON delta
of each line against what its bytes decode to, the bytes against the committed form, the
committed form against its seq. For ``braidlog proof verify --export``: a proof covers a
record's bytes, so an export whose readable ``delta`` was edited must not pass for the record.
It uses only braidlog.proofs.verify (a third party can do the same with that file alone)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from .verify import (
    BODY_HW_SIZE,
    Timestamp,
    VerificationError,
    _body,
    check_commitment,
    export_records,
    read_entry,
    unpack,
)

__all__ = ["check_export"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def check_export(lines: Iterable[str]) -> dict[int, bytes]:
    """Every record line of a ``braidlog export`` checked as import checks it, without a store:
    its ``delta`` (the readable JSON) is what its ``body`` decodes to, field by field; its
    ``salt`` and delta bytes give its ``entry``'s commitment; its ``entry`` names its seq. The
    committed forms by seq; VerificationError names the line and field that differ."""
    out: dict[int, bytes] = {}
    for n, seq, obj in export_records(lines):
        where = f"export line {n} (seq {seq})"
        if "entry" not in obj or "salt" not in obj:
            raise VerificationError(f"{where} has no entry and salt: an export written before "
                                    "braidlog's format 4 cannot be checked against the tree")
        body = _body(obj["body"], f"{where}: body")
        entry = _body(obj["entry"], f"{where}: entry")
        salt = _body(obj["salt"], f"{where}: salt")
        if len(body) <= BODY_HW_SIZE:
            raise VerificationError(f"{where}: the body is too short to be a record")
        try:
            if read_entry(entry)["seq"] != seq:
                raise VerificationError("its committed form names another seq")
            check_commitment(entry, salt, body[BODY_HW_SIZE:])
            stored = unpack(body[BODY_HW_SIZE:])
        except VerificationError as e:
            raise VerificationError(f"{where}: {e}") from None
        field = _first_difference(obj.get("delta"), stored, "")
        if field is not None:
            path, shown, held = field
            raise VerificationError(
                f"{where}: the readable delta's {path or 'delta'} is {shown}, the record's bytes "
                f"say {held}: the export was edited (the proof covers the bytes, not the JSON)")
        out[seq] = entry
    return out


def _first_difference(readable: Any, stored: Any, path: str) -> tuple[str, str, str] | None:
    """The first place (path, readable value, stored value) where an export's JSON delta and the
    decoded record bytes differ; None when they agree."""
    def show(x: Any) -> str:
        text = repr(x)
        return text if len(text) <= 60 else text[:57] + "..."
    if isinstance(stored, Timestamp):
        if isinstance(readable, str):
            try:
                t = datetime.fromisoformat(readable.replace("Z", "+00:00")) - _EPOCH
                if (t.days * 86400 + t.seconds) * 10**9 + t.microseconds * 1000 == int(stored):
                    return None
            except (ValueError, TypeError):
                pass
        return path, show(readable), f"{int(stored)} ns after 1970"
    if isinstance(stored, bytes):
        if isinstance(readable, str):
            try:
                if base64.b64decode(readable, validate=True) == stored:
                    return None
            except binascii.Error:
                pass
        return path, show(readable), f"{len(stored)} bytes {stored[:12].hex()}..."
    if isinstance(stored, dict):
        if not isinstance(readable, dict):
            return path, show(readable), "an object"
        for k in list(stored) + [k for k in readable if k not in stored]:
            sub = f"{path}.{k}" if path else k
            if k not in readable or k not in stored:
                return sub, show(readable.get(k, "(absent)")), show(stored.get(k, "(absent)"))
            found = _first_difference(readable[k], stored[k], sub)
            if found is not None:
                return found
        return None
    if isinstance(stored, list):
        if not isinstance(readable, list):
            return path, show(readable), "an array"
        for i in range(max(len(stored), len(readable))):
            if i >= len(stored) or i >= len(readable):
                return f"{path}[{i}]", show(readable[i] if i < len(readable) else "(absent)"), \
                    show(stored[i] if i < len(stored) else "(absent)")
            found = _first_difference(readable[i], stored[i], f"{path}[{i}]")
            if found is not None:
                return found
        return None
    same = readable == stored and type(readable) is type(stored) or (
        isinstance(stored, float) and isinstance(readable, (int, float))
        and not isinstance(readable, bool) and float(readable) == stored)
    return None if same else (path, show(readable), show(stored))
