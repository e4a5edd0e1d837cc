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
           "ErasureReport", "erased_delta", "erased_bytes", "erased_entry", "reproduced",
           "erase_in_memory", "Erasures", "erased_line", "erasure_line"]

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


_MICROSECOND = timedelta(microseconds=1)


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


def erased_entry(seq: int, d: GenericDelta) -> bytes:
    """The committed form of the erased delta ``d`` at ``seq``: its envelope and its commitment
    (what an export or a replica carries of an erased record is enough to rebuild it)."""
    from .delta import Entry, _encoder

    return _encoder.encode(Entry(
        seq=seq, id=d.id, braid_id=d.braid_id, kind=d.kind, ts=(d.ts - EPOCH) // _MICROSECOND,
        provenance=d.provenance, confidence=float(d.confidence), refs=d.refs, tags=d.tags,
        commitment=d.erased.commitment))


def reproduced(d: GenericDelta, index: int) -> Any:
    """The store's ``Checked`` for a delta read from an erased record elsewhere (an import, a
    replica): ValidationError unless it is what a read of an erased record gives."""
    from .store import Checked

    e = d.erased
    if (type(d) is not GenericDelta or not isinstance(e, Erasure) or not isinstance(e.by, int)
            or isinstance(e.by, bool) or e.by < 1 or not isinstance(e.commitment, bytes)
            or len(e.commitment) != 32 or d.payload != {} or d.vector is not None):
        raise ValidationError("erased", "a delta marked erased must be one a read of an erased "
                              "record gives: payload {}, no vector, erased.by a seq and a "
                              "32-byte commitment", index=index)
    try:
        again = erased_delta(erased_entry(1, d), e.by)
    except Exception:
        again = None
    if again != d:
        raise ValidationError("erased", "the envelope of a delta marked erased is not one a "
                              "committed form holds", index=index)
    return Checked(d, b"", envelope_refs(d), e.by)


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
            erased = store.braid_head(ERASURES_BRAID).version > 0
            raise ValidationError(field, f"no braid {value!r} in the log" if field == "braid"
                                  else f"no delta refers to {value!r} in the log" + (
                                      " (an erased delta keeps only the references of its "
                                      "envelope: erased already?)" if erased else ""))
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


class MemoryErasure:
    """``MemoryLog``'s erase and apply_erasures (``LmdbLog`` has the same two)."""

    def erase(self, seqs: Iterable[int], delta: GenericDelta) -> tuple[Any, list[bytes]]:
        """Erase the records at ``seqs`` and append ``delta``, their ``erased`` delta; its
        record and the erased records' commitments."""
        with self._lock:  # type: ignore[attr-defined]
            return erase_in_memory(self, seqs, delta)

    def apply_erasures(self, erase: dict[int, int], append: Any) -> tuple[Any, list[bytes]]:
        """As LmdbLog.apply_erasures: the records erased, then ``append(self)``."""
        with self._lock:  # type: ignore[attr-defined]
            return erase_in_memory(self, erase, None, append)


def erase_in_memory(store: Any, seqs: Any, delta: GenericDelta | None,
                    append: Any = None) -> tuple[Any, list[bytes]]:
    """``MemoryLog.erase`` (``delta``) and ``apply_erasures`` (``seqs`` a mapping seq -> the
    seq of its erasure, then ``append(store)``), under its writer lock: each record's delta and
    body replaced by their erased forms, its salt dropped, the refers-to keys of its payload
    left out of the index, the checkpoints from the first erased seq on dropped."""
    from .store import check_batch

    by_seq = dict(seqs) if isinstance(seqs, dict) else {s: 0 for s in seqs}
    order = sorted(by_seq)
    checked = None if delta is None else check_batch([delta], store.registry, erasure=True)
    head = store.head().seq
    for s in order:
        if not 1 <= s <= head:
            raise ValidationError("seq", f"seq {s} is not in the log (1..{head})")
        if s in store._erased:
            raise ValidationError("seq", f"seq {s} is already erased")
    commitments = []
    for s in order:
        h, body, d = store._records[s - 1]
        entry, _ = store._sealed[s - 1]
        for key in payload_refs(d, store.registry):
            store._by[("refs", key)].remove(s)
        view = erased_delta(entry, by_seq[s] or head + 1)
        store._records[s - 1] = (h, body[:8] + encode(view), view)
        store._sealed[s - 1] = (entry, b"")
        store._erased[s] = view.erased.by
        commitments.append(view.erased.commitment)
    for key in [k for k in store._checkpoints if k[2] >= order[0]]:
        del store._checkpoints[key]
    if append is not None:
        return append(store), commitments
    staged, _ = store._place(checked, None, head)
    return _record(staged[0]), commitments


def _record(s: Any) -> Any:
    from .store import Record

    return Record(s.seq, s.hash, s.delta)


class Erasures:
    """What an import has read of erasures, to refuse an export whose erased records and
    ``erased`` deltas do not match: every record an ``erased`` delta of the export names within
    it must be erased by it, and every erased record whose erasure is in the export must be
    named by it. Records it names before the export's first seq are to be erased in the target
    (``before``: seq -> the seq of the ``erased`` delta)."""

    def __init__(self) -> None:
        self.erased: dict[int, int] = {}  # erased record in the export -> the seq that erased it
        self.named: dict[int, set[int]] = {}  # seq of an erased delta -> the seqs it names
        self.before: dict[int, int] = {}

    def unnamed(self, last: int) -> str | None:
        """Why the export is refused once read to seq ``last``: an erased record whose erasure
        is in the export but does not name it."""
        for s, by in sorted(self.erased.items()):
            if by <= last and s not in self.named.get(by, ()):
                return (f"seq {s} is shown erased by seq {by}, which is not an erased delta "
                        "naming it: the export was edited")
        return None


def erased_line(d: GenericDelta, seq: int, erasures: Erasures) -> str | None:
    """Why an erased record at ``seq`` of an export is refused, or None."""
    if d.erased.by <= seq:
        return f"the record is erased by seq {d.erased.by}, which is not after it: it was edited"
    erasures.erased[seq] = d.erased.by
    return None


def erasure_line(d: GenericDelta, seq: int, erasures: Erasures, start: int) -> str | None:
    """Why the ``erased`` delta at ``seq`` of an export is refused, or None."""
    named = set(d.payload.get("seqs", ()))
    for s in sorted(named):
        if s >= seq:
            return f"the erased delta names seq {s}, which is not before it"
        if s >= start and erasures.erased.get(s) != seq:
            return (f"the erased delta at seq {seq} names seq {s}, which the export does not show "
                    f"erased by it: the export was edited, or made before the erasure")
        if s < start:
            erasures.before[s] = seq
    erasures.named[seq] = named
    return None

