"""Erasure, the engine's part that stores do not do: which deltas a request selects, the
``erased`` delta that records it, and the refers-to keys an erased record keeps.

``erase`` drops a delta's payload, its salt, its vector and the text derived from them, and keeps
its envelope and the commitment to them (the committed form), so the chain, the Merkle tree and
every checkpoint and proof issued before still verify. One ``erased`` delta, appended in the
same step, names the seqs erased and the reason; it holds no payload of theirs. Reads show an
erased record as its envelope with ``erased=Erasure(by, commitment)``, at every seq: erasure is
retroactive (docs/forgetting.md).

Pure: no I/O here. ``Braid.erase`` (braid.py) runs it against a store; stores drop the bytes.
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

from msgspec import Meta, Struct

from .delta import (
    EPOCH, Erasure, GenericDelta, Provenance, decode_entry, encode, new_id, referenced_ids,
)
from .errors import ValidationError
from .kind_schema import KIND_DECLARED
from .kinds import REGISTRY, Registry

__all__ = ["ERASED", "ERASURES_BRAID", "MAX_REASON", "Erased", "reason_hash", "check_reason",
           "erasure_delta", "envelope_refs", "payload_refs", "Selection", "select",
           "ErasureReport", "erased_delta", "erased_bytes"]

#: The kind of the delta an erasure appends.
ERASED = "erased"
#: The braid it goes to (one braid for every erasure: erasing changes no other braid's version).
ERASURES_BRAID = "braidlog:erasures"
MAX_REASON = 1000


class Erased(Struct, frozen=True, forbid_unknown_fields=True):
    """The payload of an ``erased`` delta: the seqs erased, the reason and its SHA-256 (hex).
    The reason is kept in clear: say why without personal data (e.g. "GDPR art. 17, ticket 123")."""

    seqs: Annotated[list[Annotated[int, Meta(ge=1)]], Meta(min_length=1)]
    reason: Annotated[str, Meta(min_length=1, max_length=MAX_REASON)]
    reason_sha256: Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]


REGISTRY.declare(ERASED, Erased, owner="braidlog")


def reason_hash(reason: str) -> str:
    """SHA-256 of the reason's UTF-8 bytes, hex: what a receipt states."""
    return hashlib.sha256(reason.encode()).hexdigest()


def check_reason(reason: Any) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise ValidationError("reason", "must be a non-empty text saying why (kept in the log in "
                              "clear: no personal data)")
    if len(reason) > MAX_REASON:
        raise ValidationError("reason", f"must be at most {MAX_REASON} characters, not {len(reason)}")
    return reason


def erasure_delta(seqs: Iterable[int], reason: str, *, now: datetime | None = None) -> GenericDelta:
    """The ``erased`` delta that records the erasure of ``seqs`` for ``reason``."""
    seqs = sorted(seqs)
    return GenericDelta(
        id=new_id(), braid_id=ERASURES_BRAID, kind=ERASED, ts=now or datetime.now(timezone.utc),
        provenance=Provenance("system"), confidence=1.0,
        payload={"seqs": seqs, "reason": reason, "reason_sha256": reason_hash(reason)})


def erased_delta(entry: bytes, by: int) -> GenericDelta:
    """What a read of an erased record gives: the envelope its committed form ``entry`` keeps,
    payload {}, no vector, and ``erased`` (the seq ``by`` of the erasure, the commitment)."""
    e = decode_entry(entry)
    return GenericDelta(id=e.id, braid_id=e.braid_id, kind=e.kind,
                        ts=EPOCH + timedelta(microseconds=e.ts), provenance=e.provenance,
                        confidence=e.confidence, payload={}, refs=e.refs, tags=e.tags,
                        erased=Erasure(by, e.commitment))


def erased_bytes(entry: bytes, by: int) -> bytes:
    """``erased_delta`` encoded: the delta bytes reads of the body of an erased record give."""
    return encode(erased_delta(entry, by))


_ENVELOPE_ONLY = Registry()  # knows no kind: referenced_ids gives the envelope's references alone


def envelope_refs(d: GenericDelta) -> frozenset[str]:
    """The ids a delta refers to through its envelope (refs, provenance): kept once erased."""
    return referenced_ids(d, _ENVELOPE_ONLY)


def payload_refs(d: GenericDelta, registry: Registry = REGISTRY) -> frozenset[str]:
    """The refers-to keys derived from a delta's payload (its subjects): text of the payload,
    dropped from the index with it."""
    try:
        every = referenced_ids(d, registry)
    except Exception:  # a payload its kind cannot read now: only the envelope can be named
        return frozenset()
    return every - envelope_refs(d)


class ErasureReport(Struct, frozen=True):
    """What ``Braid.erase`` did: the seqs erased with their commitments, those skipped (erased
    already), the seq of the ``erased`` delta, the reason's hash and what selected them."""

    seqs: tuple[int, ...]
    erased: tuple[tuple[int, bytes], ...]  # (seq, commitment)
    skipped: tuple[int, ...]
    seq: int
    reason_sha256: str
    what: str


class Selection(Struct, frozen=True):
    """What an erase request selects: the seqs to erase (sorted), those it passed over because
    they were erased already, and what selected them (for messages)."""

    seqs: tuple[int, ...]
    skipped: tuple[int, ...]
    what: str


def _seq_list(seqs: Any) -> list[int]:
    if isinstance(seqs, (str, bytes)) or not isinstance(seqs, Iterable):
        seqs = [seqs]
    out = []
    for s in seqs:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise ValidationError("seq", f"must be whole numbers, not {type(s).__name__}")
        out.append(int(s))
    return out


def select(store: Any, *, braid: str | None = None, refers: str | None = None,
           seqs: Any = None) -> Selection:
    """The seqs a request names: every delta of ``braid``, every delta that refers to
    ``refers`` (the refers-to index), the ``seqs`` given; several selectors add up. Refused
    (ValidationError naming the field) when a selector names nothing in the log, when a seq
    given is erased already or is an ``erased`` or kind-declaring delta, and when nothing is
    left to erase. Deltas a braid or an entity selects that are erased already are skipped."""
    if braid is None and refers is None and seqs is None:
        raise ValidationError("selection", "name what to erase: a braid, an entity (refers) or seqs")
    head = store.head().seq
    chosen: dict[int, Any] = {}
    named: set[int] = set()
    what = []
    if seqs is not None:
        given = _seq_list(seqs)
        if not given:
            raise ValidationError("seq", "names no seq")
        for s in given:
            if not 1 <= s <= head:
                raise ValidationError("seq", f"seq {s} is not in the log (1..{head})")
            chosen[s] = store.read(s).delta
            named.add(s)
        what.append("seq " + ", ".join(map(str, sorted(named))))
    for field, value, scan in (("braid", braid, store.scan_braid), ("refers", refers, store.scan_refs)):
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise ValidationError(field, f"must be a non-empty string, not {value!r}")
        found = {r.seq: r.delta for r in scan(value)}
        if not found:
            where = "braid" if field == "braid" else "delta refers to"
            raise ValidationError(field, f"no {where} {value!r} in the log" if field == "braid"
                                  else f"no delta refers to {value!r} in the log")
        chosen.update(found)
        what.append(f"{field} {value}")
    todo, skipped = [], []
    for s, d in sorted(chosen.items()):
        if d.kind in (ERASED, KIND_DECLARED):
            if s in named:
                raise ValidationError("seq", f"seq {s} is an {d.kind!r} delta, which cannot be "
                                      "erased (it holds no personal data, and the log needs it)")
            continue
        if getattr(d, "erased", None) is not None:
            if s in named:
                raise ValidationError("seq", f"seq {s} is already erased (by seq {d.erased.by})")
            skipped.append(s)
            continue
        todo.append(s)
    if not todo:
        raise ValidationError("selection", f"nothing to erase for {' and '.join(what)}: "
                              + (f"its {len(skipped)} delta(s) are erased already"
                                 if skipped else "it selects only erasure and kind deltas"))
    return Selection(tuple(todo), tuple(skipped), " and ".join(what))


def erase_in_memory(store: Any, seqs: Iterable[int], delta: GenericDelta) -> tuple[Any, list[bytes]]:
    """``MemoryLog.erase``, under its writer lock: each record's delta and body replaced by
    their erased forms, its salt dropped, the refers-to keys of its payload left out of the
    index, the checkpoints from the first erased seq on dropped, and ``delta`` appended."""
    from .store import check_batch

    seqs = sorted(set(seqs))
    checked = check_batch([delta], store.registry, erasure=True)
    head = store.head().seq
    for s in seqs:
        if not 1 <= s <= head:
            raise ValidationError("seq", f"seq {s} is not in the log (1..{head})")
        if s in store._erased:
            raise ValidationError("seq", f"seq {s} is already erased")
    by = head + 1
    commitments = []
    for s in seqs:
        h, body, d = store._records[s - 1]
        entry, _ = store._sealed[s - 1]
        for key in payload_refs(d, store.registry):
            store._by[("refs", key)].remove(s)
        view = erased_delta(entry, by)
        store._records[s - 1] = (h, body[:8] + encode(view), view)
        store._sealed[s - 1] = (entry, b"")
        store._erased[s] = by
        commitments.append(view.erased.commitment)
    for key in [k for k in store._checkpoints if k[2] >= seqs[0]]:
        del store._checkpoints[key]
    staged, _ = store._place(checked, None, head)
    return _record(staged[0]), commitments


def _record(s: Any) -> Any:
    from .store import Record

    return Record(s.seq, s.hash, s.delta)
