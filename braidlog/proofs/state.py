"""Proof of a past state: one entity's deltas up to a seq, each with an inclusion proof.

What it proves and what not is in docs/proofs.md: each record listed is, byte for byte, the log's
record at its seq; that no record about the entity was left out is *not* proved.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec

from .. import tree as merkle
from ..audit import _records
from ..delta import decode
from ..errors import DecodeError, IntegrityError, ValidationError
from ..projection import Projection
from ..store import HW_SIZE, FullStore
from .prove import ConsistencyProof, _resolve, _size, consistency_proof

__all__ = ["StateProof", "state_proof", "refold"]


class StateRecord(msgspec.Struct, frozen=True):
    """One record of a state proof: its body (hw || delta bytes), its inclusion path, its
    committed form (the leaf) and the salt that ties the body to the committed form."""

    seq: int
    body: bytes
    path: list[bytes]
    entry: bytes = b""
    salt: bytes = b""


class StateProof(msgspec.Struct, frozen=True):
    """``records``: the deltas of ``entity`` that ``projection`` reads, up to seq ``at``, each
    with its inclusion path in the tree of ``tree_size`` with ``root``; ``consistency`` from
    ``at`` to ``tree_size`` when the tree is larger than ``at``."""

    projection: str
    entity: str
    at: int
    tree_size: int
    root: bytes
    records: list[StateRecord]
    consistency: ConsistencyProof | None

    def to_json(self) -> dict[str, Any]:
        """The form ``braidlog prove state --json`` prints (bodies base64, hashes hex, and each
        delta as JSON for people: the body is what is proved)."""
        return {
            "projection": self.projection, "entity": self.entity, "at": self.at,
            "tree_size": self.tree_size, "root": self.root.hex(),
            "consistency": self.consistency.to_json() if self.consistency else None,
            "records": [{"seq": r.seq, "body": base64.b64encode(r.body).decode(),
                         "entry": base64.b64encode(r.entry).decode(),
                         "salt": base64.b64encode(r.salt).decode(),
                         "path": [h.hex() for h in r.path],
                         "delta": msgspec.to_builtins(decode(r.body[HW_SIZE:]))} for r in self.records],
        }


def state_proof(store: FullStore, projection: Projection, entity: str, at: int,
                size: int | None = None) -> StateProof:
    """The deltas of ``entity`` that ``projection`` reads, seqs 1..``at``, proved in the tree of
    ``size`` records (default: the head): the records the refers-to index holds for the entity
    (and the delta whose id it is), as ``braidlog history`` finds them."""
    size = _size(store, size, "size")
    if isinstance(at, bool) or not isinstance(at, int) or not 1 <= at <= size:
        raise ValidationError("at", f"must be a seq from 1 to the tree size ({size}), got {at!r}")
    if not isinstance(entity, str) or not entity:
        raise ValidationError("entity", "must be a non-empty string")
    recs = _records(store, entity, at, reads=projection.reads)
    ranges = [merkle.inclusion_ranges(r.seq - 1, size) for r in recs]
    flat = _resolve(store, [rg for rs in ranges for rg in rs] + [(0, size)])
    root, records, i = flat[-1], [], 0
    for rec, rs in zip(recs, ranges, strict=False):
        row = next(store.scan_rows(rec.seq, rec.seq + 1))
        records.append(StateRecord(rec.seq, row.body, flat[i:i + len(rs)], row.entry, row.salt))
        i += len(rs)
    cons = consistency_proof(store, at, size) if size > at else None
    return StateProof(projection.name, entity, at, size, root, records, cons)


def _bodies(proof: Any) -> list[tuple[int, bytes]]:
    """(seq, body) of each record of a proof (a StateProof or its JSON form), else ValidationError."""
    rule = "must be a StateProof or its JSON form, with records of a seq and a body"
    if isinstance(proof, dict):
        records = proof.get("records")
        if not isinstance(records, list) or not all(
                isinstance(r, dict) and isinstance(r.get("body"), str) for r in records):
            raise ValidationError("proof", rule)
        try:
            out = [(r.get("seq"), base64.b64decode(r["body"], validate=True)) for r in records]
        except (binascii.Error, ValueError):
            raise ValidationError("proof", "holds a record body that is not base64") from None
    elif isinstance(proof, StateProof) and isinstance(proof.records, list) and all(
            isinstance(r, StateRecord) for r in proof.records):
        out = [(r.seq, r.body) for r in proof.records]
    else:
        raise ValidationError("proof", rule)
    for seq, body in out:
        if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(body, bytes):
            raise ValidationError("proof", rule)
    return out


def refold(proof: StateProof | dict[str, Any], projection: Projection) -> Any:
    """The projection's state folded over the proof's records only (decoded from their bodies):
    the entity's state as of ``at`` provided the record list is complete."""
    if not isinstance(projection, Projection):
        raise ValidationError("projection", f"must be a Projection, not {type(projection).__name__}")
    bodies = _bodies(proof)
    state = projection.start()
    for seq, body in bodies:
        try:
            delta = decode(body[HW_SIZE:])
        except DecodeError as e:
            raise IntegrityError(f"the record at seq {seq} in the proof is not a delta ({e})",
                                 seq=seq) from None
        state = projection.apply(state, delta, seq)
    return state
