"""Write and read context receipts: ``record_context`` for items the caller chose,
``build_receipt`` for a recall's hits, ``read_receipt`` to find one again.

A store or a Braid (whose boundary runs the projections' checks) is the target; the receipt's
own rules are its kind's (``schema``): shape on every append, and citations (each item a record
already in the log, by seq and delta id) inside the write transaction.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

import msgspec

from ..delta import GenericDelta, Provenance, delta
from ..errors import ValidationError
from ..kinds import REGISTRY
from ..store import store_of
from .schema import CONTEXT_BRAID, CONTEXT_USED, ROLES, ContextItem, ContextUsed, RecallRequest, sha256_hex

__all__ = ["Receipt", "items_of", "build_receipt", "record_context", "write_receipt", "read_receipt",
           "digest_of"]


class Receipt(NamedTuple):
    """A receipt read back: its seq, its delta (the envelope) and its payload as a Struct."""

    seq: int
    delta: GenericDelta
    receipt: ContextUsed


def _store(target: Any) -> Any:
    return store_of(target)


def _ident(value: Any, field: str) -> str:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not 1 <= len(value) <= 120:
        raise ValidationError(field, f"must be a string of 1 to 120 characters (or an int), not "
                              f"{value!r}"[:200])
    return value


def digest_of(context_bytes: Any) -> tuple[str, int] | None:
    """(SHA-256 hex, length) of the context bytes (text as UTF-8), None for None."""
    if context_bytes is None:
        return None
    if isinstance(context_bytes, str):
        context_bytes = context_bytes.encode("utf-8")
    if not isinstance(context_bytes, (bytes, bytearray, memoryview)):
        raise ValidationError("context_bytes", f"must be bytes or text (the exact context given "
                              f"to the model), not {type(context_bytes).__name__}")
    data = bytes(context_bytes)
    return sha256_hex(data), len(data)


def _resolve(store: Any, n: int, seq: Any, delta_id: Any) -> tuple[int, str]:
    """The (seq, delta id) an item names by either or both, checked against the store."""
    where = f"items[{n}]"
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, numbers.Integral)):
        raise ValidationError(f"{where}.seq", f"must be an int, not {type(seq).__name__}")
    if delta_id is not None and not isinstance(delta_id, str):
        raise ValidationError(f"{where}.delta_id", f"must be a delta id, not {type(delta_id).__name__}")
    if seq is None:
        if delta_id is None:
            raise ValidationError(where, "names no record: give its seq or its delta id")
        at = store.seq_of(delta_id) if len(delta_id) == 26 else None
        if at is None:
            raise ValidationError(f"{where}.delta_id", f"no delta {delta_id!r} is in the log")
        return at, delta_id
    if delta_id is None:
        head = store.head().seq
        if not 1 <= int(seq) <= head:
            raise ValidationError(f"{where}.seq", f"cites seq {seq}, beyond the head ({head}): a "
                                  "receipt cites records already in the log")
        return int(seq), store.read(int(seq)).delta.id
    return int(seq), delta_id


def items_of(target: Any, items: Iterable[Any], *, role: str = "injected") -> list[ContextItem]:
    """The items of a receipt from what a caller holds: recall hits, records, seqs, delta ids,
    ``ContextItem``s or dicts (``seq`` and/or ``delta_id``, ``rank``, ``score``, ``role``). An
    item without a role takes ``role``; one without a rank its place among its role's items."""
    if role not in ROLES:
        raise ValidationError("role", f"must be one of {', '.join(ROLES)}, not {role!r}")
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise ValidationError("items", f"must be a list of hits, records, seqs or delta ids, not "
                              f"{type(items).__name__}")
    store, out, ranks = _store(target), [], {r: 0 for r in ROLES}
    for n, item in enumerate(items):
        if isinstance(item, ContextItem):
            out.append(item)
            ranks[item.role] = max(ranks[item.role], item.rank)
            continue
        score = rank = None
        this = role
        if isinstance(item, Mapping):
            unknown = set(item) - {"seq", "delta_id", "rank", "score", "role"}
            if unknown:
                raise ValidationError(f"items[{n}]", f"has unknown field(s) {sorted(unknown)}")
            seq, did = item.get("seq"), item.get("delta_id")
            score, rank, this = item.get("score"), item.get("rank"), item.get("role", role)
        elif hasattr(item, "delta_id") and hasattr(item, "seq"):  # a recall Hit
            seq, did, score = item.seq, item.delta_id, getattr(item, "score", None)
        elif hasattr(item, "delta") and hasattr(item, "seq"):  # a Record
            seq, did = item.seq, item.delta.id
        elif isinstance(item, str):
            seq, did = None, item
        elif isinstance(item, numbers.Integral) and not isinstance(item, bool):
            seq, did = item, None
        else:
            raise ValidationError(f"items[{n}]", f"must be a hit, record, seq, delta id or dict, "
                                  f"not {type(item).__name__}")
        if this not in ROLES:
            raise ValidationError(f"items[{n}].role", f"must be one of {', '.join(ROLES)}, not {this!r}")
        seq, did = _resolve(store, n, seq, did)
        ranks[this] = rank if isinstance(rank, int) and not isinstance(rank, bool) else ranks[this] + 1
        entry: dict[str, Any] = {"seq": seq, "delta_id": did, "rank": ranks[this] if rank is None else rank,
                                 "role": this}
        if score is not None:
            entry["score"] = float(score) if isinstance(score, numbers.Real) else score
        out.append(_convert(entry, ContextItem, f"items[{n}]"))
    return out


def _convert(value: Any, schema: type, where: str) -> Any:
    try:
        return msgspec.convert(value, schema)
    except msgspec.ValidationError as e:
        text = str(e)
        rule, sep, path = text.rpartition(" - at `$")
        raise ValidationError(where + (path.rstrip("`") if sep else ""), rule if sep else text) from None


def build_receipt(items: list[ContextItem], *, run: Any, turn: Any, model: str | None = None,
                  request: RecallRequest | None = None, context_bytes: Any = None) -> ContextUsed:
    """The payload of a receipt, checked against its schema (ValidationError naming the field)."""
    digest = digest_of(context_bytes)
    payload: dict[str, Any] = {"run": _ident(run, "run"), "turn": _ident(turn, "turn"),
                               "items": [msgspec.to_builtins(i) for i in items]}
    if model is not None:
        payload["model"] = model
    if request is not None:
        payload["request"] = msgspec.to_builtins(request)
    if digest is not None:
        payload["context_sha256"], payload["context_size"] = digest
    return _convert(payload, ContextUsed, "payload")


def write_receipt(target: Any, receipt: ContextUsed, *, braid_id: str = CONTEXT_BRAID,
                  now: datetime | None = None) -> tuple[str, int]:
    """Append ``receipt`` to ``target`` (a Braid: through its boundary; or a store): its delta
    id and seq. The store refuses it, writing nothing, when an item cites no record of the log."""
    d = delta(_ident(braid_id, "braid_id"), CONTEXT_USED, msgspec.to_builtins(receipt),
              provenance=Provenance(kind="system", tool="braidlog.receipts"), ts=now)
    return d.id, target.append(d)


def record_context(target: Any, items: Iterable[Any], *, run: Any, turn: Any,
                   model: str | None = None, context_bytes: Any = None,
                   request: RecallRequest | None = None, role: str = "injected",
                   braid_id: str = CONTEXT_BRAID, now: datetime | None = None) -> str:
    """Record that ``items`` (hits, records, seqs, delta ids ...: ``items_of``) were put in
    front of a model in turn ``turn`` of run ``run``, with the SHA-256 of the exact
    ``context_bytes`` when given; the receipt's delta id. Items without a role are
    ``injected``."""
    receipt = build_receipt(items_of(target, items, role=role), run=run, turn=turn, model=model,
                            request=request, context_bytes=context_bytes)
    return write_receipt(target, receipt, braid_id=braid_id, now=now)[0]


def read_receipt(source: Any, ref: str | int) -> Receipt:
    """The receipt with delta id (or seq) ``ref``; ValidationError when there is none, when that
    delta is not a receipt, or when it was erased (its items went with its payload)."""
    store = _store(source)
    if not all(hasattr(store, m) for m in ("head", "read", "get")):
        raise ValidationError("source", f"must be a Braid, a store or a view, not {type(source).__name__}")
    if isinstance(ref, str) and ref.isdigit():
        ref = int(ref)
    if isinstance(ref, numbers.Integral) and not isinstance(ref, bool):
        head = store.head().seq
        if not 1 <= ref <= head:
            raise ValidationError("id", f"no record at seq {ref}; the log holds 1..{head}")
        record = store.read(int(ref))
    elif isinstance(ref, str):
        record = store.get(ref) if len(ref) == 26 else None
        if record is None:
            raise ValidationError("id", f"no delta {ref!r} is in the log (give a receipt's delta id "
                                  "or seq)")
    else:
        raise ValidationError("id", f"must be a delta id or a seq, not {type(ref).__name__}")
    d = record.delta
    if d.kind != CONTEXT_USED:
        raise ValidationError("id", f"delta {d.id} (seq {record.seq}) is a {d.kind!r}, not a "
                              f"context receipt ({CONTEXT_USED!r})")
    if d.erased is not None:
        raise ValidationError("id", f"receipt {d.id} (seq {record.seq}) was erased at seq "
                              f"{d.erased.by}: its items went with its payload")
    try:
        receipt = REGISTRY[CONTEXT_USED].typed(d.payload)
    except (msgspec.ValidationError, ValueError) as e:
        raise ValidationError("payload", f"receipt {d.id} cannot be read: {e}") from None
    return Receipt(record.seq, d, receipt)
