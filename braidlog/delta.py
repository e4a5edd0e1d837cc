"""The storage envelope: ``GenericDelta`` and its parts, as the Braid seed defines them.

Canonical encoding is msgspec MessagePack with dict keys in sorted order, so equal deltas have
equal bytes. Validation is strict decoding: a delta is encoded, then decoded against the
constrained types below, so every envelope rule is checked in one C pass; the payload is then
checked against its kind's schema from the registry.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import Meta, Struct
from ulid import ULID

from .errors import DecodeError, ValidationError
from .kinds import REGISTRY, Registry, unknown_kind

__all__ = [
    "ULID_PATTERN",
    "ProvenanceKind",
    "PROVENANCE_KINDS",
    "Provenance",
    "BeadRef",
    "Refs",
    "Vector",
    "GenericDelta",
    "new_id",
    "delta",
    "encode",
    "decode",
    "validate",
    "to_json",
    "from_json",
    "referenced_ids",
]

ULID_PATTERN = "^[0-7][0-9A-HJKMNP-TV-Z]{25}$"
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MAX_ID_BYTES = 120  # characters; keeps every index key under LMDB's 511-byte limit

Ulid = Annotated[str, Meta(pattern=ULID_PATTERN)]
Name = Annotated[str, Meta(min_length=1, max_length=MAX_ID_BYTES)]
Ident = Annotated[str, Meta(min_length=1, max_length=MAX_ID_BYTES)]
Confidence = Annotated[float, Meta(ge=0.0, le=1.0)]
UtcTime = Annotated[datetime, Meta(tz=True)]

MAX_PAYLOAD_DEPTH = 16  # objects and arrays nest at most this deep, the payload itself counting
_FLOAT_MAX = 1.7976931348623157e308
_Finite = Annotated[float, Meta(ge=-_FLOAT_MAX, le=_FLOAT_MAX)]  # refuses NaN and infinities


def _json_value(depth: int) -> Any:
    """The JSON values nested at most ``depth`` deep, as a type msgspec checks while decoding
    (msgspec has no recursive aliases, so the depth is spelled out)."""
    scalar = Union[str, int, _Finite, bool, None]
    value: Any = scalar
    for _ in range(depth):
        value = Union[str, int, _Finite, bool, None, list[value], dict[str, value]]  # type: ignore[valid-type]
    return value


JsonObject = dict[str, _json_value(MAX_PAYLOAD_DEPTH - 1)]  # type: ignore[misc]

ProvenanceKind = Literal["user", "assistant", "tool", "perception", "system", "dream"]
PROVENANCE_KINDS = ("user", "assistant", "tool", "perception", "system", "dream")


class Provenance(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True, gc=False):
    """Where a delta came from. Orthogonal to its confidence."""

    kind: ProvenanceKind
    source: str | None = None
    model: str | None = None
    tool: str | None = None
    episode_id: str | None = None
    knot_id: str | None = None


class BeadRef(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True, gc=False):
    """A reference to a bead; without a version it means the version active at the time."""

    bead_id: Ident
    role: Name
    bead_version_id: Ident | None = None


class Refs(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True, gc=False):
    """What a delta refers to: beads, knots, episodes and other deltas."""

    beads: tuple[BeadRef, ...] = ()
    knots: tuple[Ident, ...] = ()
    episodes: tuple[Ident, ...] = ()
    deltas: tuple[Ident, ...] = ()


class Vector(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True, gc=False):
    """An embedding carried by a delta: float32 little-endian bytes in a named vector space."""

    data: bytes
    space: Name = "default"

    @classmethod
    def of(cls, values: Any, space: str = "default") -> Vector:
        """A Vector from any float sequence or numpy array."""
        import numpy as np

        return cls(np.asarray(values, dtype="<f4").tobytes(), space)

    @property
    def dim(self) -> int:
        return len(self.data) // 4


def new_id() -> str:
    """A new ULID string: 48 bits of milliseconds, 80 random bits."""
    return str(ULID())


class GenericDelta(Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True,
                   gc=False):
    """One immutable change, exactly the Braid seed's storage envelope (plus an optional vector).

    Constructing one checks nothing; ``validate`` (run by every append) checks every rule.
    """

    id: str = msgspec.field(default_factory=new_id)
    braid_id: str
    kind: str
    ts: datetime
    provenance: Provenance
    confidence: float
    payload: dict[str, Any]
    refs: Refs | None = None
    tags: tuple[str, ...] = ()
    vector: Vector | None = None


class _StrictDelta(Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True,
                   gc=False):
    """GenericDelta with every envelope rule as a type constraint: decoding into it validates.

    Records read back from a store were validated on the way in, so reads decode into the plain
    GenericDelta (about twice as fast); only writes pay for the constraints.
    """

    id: Ulid = msgspec.field(default_factory=new_id)
    braid_id: Ident
    kind: Name
    ts: UtcTime
    provenance: Provenance
    confidence: Confidence
    payload: JsonObject
    refs: Refs | None = None
    tags: tuple[Name, ...] = ()
    vector: Vector | None = None


def delta(braid_id: str, kind: str, payload: dict[str, Any] | None = None, *,
          provenance: Provenance | str = "user", confidence: float = 1.0,
          ts: datetime | None = None, refs: Refs | None = None, tags: tuple[str, ...] = (),
          vector: Vector | None = None, id: str | None = None) -> GenericDelta:
    """Build a delta with sensible defaults: a new id, ts now (UTC), provenance by kind name."""
    if isinstance(provenance, str):
        provenance = Provenance(provenance)  # type: ignore[arg-type]
    return GenericDelta(
        braid_id=braid_id, kind=kind, ts=ts or datetime.now(timezone.utc),
        provenance=provenance, confidence=confidence, payload=payload or {}, refs=refs,
        tags=tuple(tags), vector=vector, id=id or new_id(),
    )


_encoder = msgspec.msgpack.Encoder(order="deterministic")
_decoder = msgspec.msgpack.Decoder(GenericDelta)
_strict_decoder = msgspec.msgpack.Decoder(_StrictDelta)
_json_encoder = msgspec.json.Encoder(order="deterministic")
_json_decoder = msgspec.json.Decoder(_StrictDelta)


def encode(d: GenericDelta) -> bytes:
    """The canonical bytes of a delta (no validation)."""
    return _encoder.encode(d)


def decode(data: bytes | memoryview) -> GenericDelta:
    """A delta from canonical bytes; DecodeError if they are not one."""
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError as e:
        raise DecodeError(f"not a delta: {e}") from None


def to_json(d: GenericDelta) -> bytes:
    """A delta as JSON (for export and the command line)."""
    return _json_encoder.encode(d)


def from_json(text: bytes | str, *, index: int | None = None) -> GenericDelta:
    """A delta from JSON, with every envelope rule checked (not the payload schema)."""
    try:
        return _decoder.decode(_encoder.encode(_json_decoder.decode(text)))
    except msgspec.ValidationError as e:
        raise _envelope_error(e, index) from None
    except OverflowError:
        raise ValidationError("payload", "integers must fit in 64 bits (-2**63 to 2**64-1); "
                              "store larger numbers as strings", index=index) from None
    except msgspec.DecodeError as e:
        raise DecodeError(f"{'line ' + str(index) + ': ' if index is not None else ''}not JSON: {e}") from None


_RULES = {
    "id": "must be a ULID: 26 characters of Crockford base32, e.g. 01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "ts": "must be a timezone-aware datetime (naive timestamps are ambiguous)",
    "confidence": "must be a number in [0, 1]",
}
_PAYLOAD_RULE = (
    "must be a JSON object: strings, finite numbers, booleans, null, arrays and objects, nested "
    f"at most {MAX_PAYLOAD_DEPTH} deep (store bytes as base64 and times as ISO 8601 strings)")


def _envelope_error(e: msgspec.ValidationError, index: int | None) -> ValidationError:
    text = str(e)
    rule, sep, path = text.rpartition(" - at `$.")
    if not sep:
        rule, path = text, "delta"
        if "unknown field" in text:
            path = "delta"
    path = path.rstrip("`")
    top = path.split(".")[0].split("[")[0]
    if top in _RULES and "Expected `" in rule and "null" not in rule:
        rule = f"{_RULES[top]} ({rule})"
    elif top == "braid_id" and "length" in rule:
        rule = f"must be a non-empty string of at most {MAX_ID_BYTES} characters ({rule})"
    elif top == "payload":  # msgspec writes object keys as [...]: validate_typed names the value
        path, rule = "payload", f"{_PAYLOAD_RULE} ({rule})"
    elif path.startswith("provenance.kind"):
        rule = f"must be one of {', '.join(PROVENANCE_KINDS)} ({rule})"
    return ValidationError(path, rule, index=index)


def _json_fault(value: Any, path: str = "payload", depth: int = 1) -> tuple[str, str] | None:
    """Where a decoded payload stops being JSON, and why (run only after the strict decode
    refused it, to name the value; the check itself is the decode)."""
    if isinstance(value, (dict, list)):
        if depth > MAX_PAYLOAD_DEPTH:
            return path, (f"nests objects and arrays more than {MAX_PAYLOAD_DEPTH} levels deep "
                          "(the payload itself is level 1)")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, v in items:
            fault = _json_fault(v, f"{path}.{key}" if isinstance(value, dict) else f"{path}[{key}]",
                                depth + 1)
            if fault is not None:
                return fault
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return path, f"must be a finite number (JSON has no {value})"
    if isinstance(value, (bytes, bytearray)):
        return path, "must be a JSON value, not bytes (store bytes as a base64 string)"
    if isinstance(value, datetime):
        return path, "must be a JSON value, not a datetime (store times as ISO 8601 strings)"
    if value is None or isinstance(value, (str, int, float, bool)):
        return None
    return path, f"must be a JSON value, not a {type(value).__name__}"


def _payload_error(data: bytes, e: msgspec.ValidationError, index: int | None) -> ValidationError:
    try:
        payload = _decoder.decode(data).payload
    except msgspec.MsgspecError:  # not even an object: msgspec's message says so
        return _envelope_error(e, index)
    fault = _json_fault(payload)
    if fault is None:
        return _envelope_error(e, index)
    return ValidationError(*fault, index=index)


def _plain(s: _StrictDelta) -> GenericDelta:
    """The strictly decoded delta as a GenericDelta: the values a plain decode of the same bytes
    gives (the JSON-typed payload decodes to the same dicts, lists and scalars as ``Any``), at a
    twentieth of the cost of decoding twice."""
    return GenericDelta(id=s.id, braid_id=s.braid_id, kind=s.kind, ts=s.ts, provenance=s.provenance,
                        confidence=s.confidence, payload=s.payload, refs=s.refs, tags=s.tags,
                        vector=s.vector)


def validate(d: GenericDelta, registry: Registry = REGISTRY, *, index: int | None = None
             ) -> tuple[GenericDelta, bytes]:
    """Check every envelope rule and the payload schema; return the stored delta and its bytes.

    The stored delta is the canonical one (ts in UTC, payload stamped with its schema version).
    Raises ValidationError naming the field and the rule.
    """
    stored, data, _ = validate_typed(d, registry, index=index)
    return stored, data


def validate_typed(d: GenericDelta, registry: Registry = REGISTRY, *, index: int | None = None
                   ) -> tuple[GenericDelta, bytes, Any]:
    """``validate``, also returning the payload as its kind's Struct (None if not at hand)."""
    if type(d) is not GenericDelta:
        raise ValidationError("delta", f"expected a GenericDelta, got {type(d).__name__}", index=index)
    try:
        data = _encoder.encode(d)
    except OverflowError:
        raise ValidationError("payload", "integers must fit in 64 bits (-2**63 to 2**64-1); "
                              "store larger numbers as strings", index=index) from None
    except (TypeError, msgspec.EncodeError) as e:
        raise ValidationError("payload", f"{_PAYLOAD_RULE} ({e})", index=index) from None
    try:
        strict = _strict_decoder.decode(data)
    except msgspec.ValidationError as e:
        if str(e).endswith("`") and " - at `$.payload" in str(e):
            raise _payload_error(data, e, index) from None
        raise _envelope_error(e, index) from None
    stored = _plain(strict)
    if stored.ts < EPOCH:
        raise ValidationError("ts", f"must be at or after {EPOCH.isoformat()} (got {stored.ts.isoformat()})",
                              index=index)
    spec = registry.get(stored.kind)
    if spec is None:
        raise ValidationError("kind", unknown_kind(stored.kind), index=index)
    try:
        payload, value = spec.checked(stored.payload)
    except ValidationError as e:
        raise ValidationError(e.field, e.rule, index=index) from None
    if stored.vector is not None:
        _check_vector(stored.vector, index)
    if payload is not stored.payload:
        stored = msgspec.structs.replace(stored, payload=payload)
    # The canonical bytes are those of the stored delta, so that reading it back and appending
    # it again is an idempotent retry (an int confidence 1 is stored as the float 1.0).
    return stored, _encoder.encode(stored), value


def _check_vector(v: Vector, index: int | None) -> None:
    import numpy as np

    if not v.data or len(v.data) % 4:
        raise ValidationError("vector.data", "must be float32 bytes: a non-empty multiple of 4", index=index)
    arr = np.frombuffer(v.data, dtype="<f4")
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValidationError("vector.data", f"must be finite: element {bad} is {arr[bad]}", index=index)


_NONE: frozenset[str] = frozenset()


def referenced_ids(d: GenericDelta, registry: Registry = REGISTRY, typed: Any = None) -> frozenset[str]:
    """Every id a delta refers to: its refs, its provenance's episode and knot, its payload's
    subjects (``typed``: the payload already converted, when the caller has it)."""
    r, p, spec = d.refs, d.provenance, registry.get(d.kind)
    if r is None and p.episode_id is None and p.knot_id is None and (spec is None or spec.refers is None):
        return _NONE
    ids: set[str] = set()
    if r is not None:
        for b in r.beads:
            ids.add(b.bead_id)
            if b.bead_version_id:
                ids.add(b.bead_version_id)
        ids.update(r.knots)
        ids.update(r.episodes)
        ids.update(r.deltas)
    if p.episode_id:
        ids.add(p.episode_id)
    if p.knot_id:
        ids.add(p.knot_id)
    if spec is not None and spec.refers is not None:
        ids.update(spec.ids(d.payload, typed))
    return frozenset(ids)


