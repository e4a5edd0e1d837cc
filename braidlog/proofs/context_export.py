"""Export a context receipt for a third party: one self-contained JSON file, checked offline by
``context.check_context_export`` (its docstring gives the format).

The export proves, against one checkpoint signed by the log's key, that the receipt and every
record it cites are in the log at their seqs (a ``c2sp.org/tlog-proof@v1`` each, which Go's
sumdb/tlog accepts as it stands), and carries the receipt's own bytes (so its items, request and
context digest are read from what the log committed to). With ``disclose`` each item's bytes and
salt travel too, so the reader sees the content and checks it against its commitment; without,
only the commitments do. An item erased before the export travels as its commitment with the
``erased`` record that erased it (proved and disclosed: its payload names the item's seq); an
export made before the erasure keeps verifying (the tree never changes).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import msgspec

from ..delta import decode
from ..errors import ValidationError
from ..receipts.record import read_receipt
from ..store import store_of
from .checkpoint import issue, tlog_proof_text
from .context import FORMAT
from .keys import SigningKey
from .prove import inclusion_proof

__all__ = ["export_context", "write_context_export"]


def _b64(data: bytes) -> str:
    return base64.b64encode(bytes(data)).decode()


def export_context(source: Any, ref: str | int, key: SigningKey, *, disclose: bool = False,
                   size: int | None = None) -> dict[str, Any]:
    """The export of receipt ``ref`` (its delta id or seq) as a JSON-ready dict, proved in the
    tree of ``size`` records (default: the head) under a checkpoint signed by ``key`` (kept in
    the store as ``issue`` keeps it)."""
    if not isinstance(key, SigningKey):
        raise ValidationError("key", f"must be a SigningKey (braidlog.proofs.read_key), not "
                              f"{type(key).__name__}")
    store = store_of(source)
    got = read_receipt(store, ref)
    head = store.head().seq
    size = head if size is None else size
    if isinstance(size, bool) or not isinstance(size, int) or not got.seq <= size <= head:
        raise ValidationError("size", f"must be a tree size from the receipt's seq ({got.seq}) to "
                              f"the head ({head}), got {size!r}")
    note = issue(store, key, size=size)

    def record(seq: int, with_bytes: bool) -> dict[str, Any]:
        row = next(store.scan_rows(seq, seq + 1))
        out: dict[str, Any] = {
            "entry": _b64(row.entry),
            "tlog_proof": tlog_proof_text(inclusion_proof(store, seq, size), note)}
        if row.erased_by:  # the erasure that dropped its bytes, proved and disclosed
            if row.erased_by > size:
                raise ValidationError("size", f"record {seq} was erased at seq {row.erased_by}, after "
                                      f"the tree size {size}: export in a tree of at least "
                                      f"{row.erased_by} records, which proves the erasure")
            by = store.read(row.erased_by).delta.id
            out["erased"] = {"seq": row.erased_by, "delta_id": by, **record(row.erased_by, True)}
        elif with_bytes:
            out["data"] = _b64(row.data)
            out["salt"] = _b64(row.salt)
            out["delta"] = msgspec.to_builtins(decode(row.data))
        return out

    receipt = {"seq": got.seq, "delta_id": got.delta.id, **record(got.seq, True)}
    items = []
    for item in got.receipt.items:
        items.append({"seq": item.seq, "delta_id": item.delta_id, "role": item.role,
                      "rank": item.rank, "score": item.score, **record(item.seq, disclose)})
    return {"format": FORMAT, "origin": key.name, "disclosed": bool(disclose), "checkpoint": note,
            "receipt": receipt, "items": items}


def write_context_export(source: Any, ref: str | int, key: SigningKey, out: str | os.PathLike[str],
                         *, disclose: bool = False, size: int | None = None) -> dict[str, Any]:
    """``export_context`` written to the file ``out`` (JSON, replaced whole: written beside it
    and renamed); the export."""
    export = export_context(source, ref, key, disclose=disclose, size=size)
    path = Path(out)
    if path.is_dir():
        raise ValidationError("--out", f"{path} is a directory; give a file name")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(export), indent=1) + b"\n")
    os.replace(tmp, path)
    return export
