"""The erased record: the ``erased`` kind and its payload, what a read of an erased record
gives (its envelope, marked erased), the committed form rebuilt from it, and the refers-to keys
an erased record keeps (its envelope's). Pure: no I/O."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from msgspec import Meta, Struct

from ..delta import EPOCH, Erasure, GenericDelta, Provenance, decode_entry, encode, form_of, new_id, referenced_ids
from ..errors import ValidationError
from ..kinds import REGISTRY, Registry

__all__ = ["ERASED", "ERASURES_BRAID", "MAX_REASON", "Erased", "reason_hash", "check_reason",
           "erasure_delta", "erased_delta", "erased_bytes", "erased_entry", "reproduced",
           "envelope_refs", "payload_refs", "SUBJECT_TAG", "subject_tag"]

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


#: The tag an ``erased`` delta carries for the entity an erasure by refers-to named, as
#: ``erased-subject:`` and the SHA-256 (hex) of the entity id: the id itself is not kept (it
#: may be personal data), but ``history ID`` can tell that ID was erased, and by which seq.
SUBJECT_TAG = "erased-subject:"


def subject_tag(entity: str) -> str:
    """The tag of an erasure of what refers to ``entity``."""
    return SUBJECT_TAG + hashlib.sha256(entity.encode("utf-8", "surrogatepass")).hexdigest()


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
        id=new_id(), braid_id=ERASURES_BRAID, kind=ERASED, ts=now or datetime.now(UTC),
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


def erased_entry(seq: int, d: GenericDelta) -> bytes:
    """The committed form of the erased delta ``d`` at ``seq``: its envelope and its commitment
    (what an export or a replica carries of an erased record is enough to rebuild it)."""
    assert d.erased is not None  # the callers' deltas are erased ones
    return form_of(seq, d, d.erased.commitment)


def reproduced(d: GenericDelta, index: int) -> tuple[frozenset[str], int]:
    """The refers-to keys and the erasing seq of a delta read from an erased record elsewhere
    (an import, a replica), which a store writes as an erased record: ValidationError unless it
    is what a read of an erased record gives."""
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
    return envelope_refs(d), e.by


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


