"""The storage envelope: ``GenericDelta`` and its parts, as the Braid seed defines them.

Canonical encoding is msgspec MessagePack with dict keys in sorted order, so equal deltas have
equal bytes. Validation is strict decoding: a delta is encoded, then decoded against the
constrained types below, so every envelope rule is checked in one C pass; the payload is then
checked against its kind's schema from the registry.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from array import array
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct
from ulid import ULID

from .errors import DecodeError, ValidationError
from .kinds import REGISTRY, Registry, default_confidence, unknown_kind

__all__ = [
    "ULID_PATTERN",
    "Ident",
    "Ulid",
    "Confidence",
    "UtcTime",
    "Text",
    "ProvenanceKind",
    "PROVENANCE_KINDS",
    "Provenance",
    "BeadRef",
    "Refs",
    "Vector",
    "GenericDelta",
    "Erasure",
    "new_id",
    "delta",
    "encode",
    "decode",
    "validate",
    "to_json",
    "from_json",
    "referenced_ids",
    "repeated_key",
    "ENTRY_MAX",
    "SALT_SIZE",
    "Entry",
    "commitment",
    "committed_form",
    "decode_entry",
    "check_entry_size",
]

ULID_PATTERN = "^[0-7][0-9A-HJKMNP-TV-Z]{25}$"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_ID_BYTES = 120  # characters; keeps every index key under LMDB's 511-byte limit

# The field types of the envelope, shared by every projection's payloads and commands (and
# exported by ``braidlog`` for applications' own): declare a field with one of these, not a copy.
#: A ULID, as delta ids are.
Ulid = Annotated[str, Meta(pattern=ULID_PATTERN)]
Name = Annotated[str, Meta(min_length=1, max_length=MAX_ID_BYTES)]
#: An identity (a braid, bead, knot, episode ... id): 1 to 120 characters, so it fits an index key.
Ident = Annotated[str, Meta(min_length=1, max_length=MAX_ID_BYTES)]
#: A confidence or weight in [0, 1].
Confidence = Annotated[float, Meta(ge=0.0, le=1.0)]
#: A time with its zone (a naive datetime is refused).
UtcTime = Annotated[datetime, Meta(tz=True)]
#: Text that is not empty.
Text = Annotated[str, Meta(min_length=1)]

MAX_PAYLOAD_DEPTH = 16  # objects and arrays nest at most this deep, the payload itself counting
#: Levels of a payload the strict decoder checks in C. msgspec has no recursive type aliases, so
#: the JSON type is spelled out level by level, and its size doubles with each level (16 levels
#: cost seconds at import). Payloads nested deeper than this, rare, are decoded as plain values
#: and checked by ``_json_fault``'s walk up to MAX_PAYLOAD_DEPTH.
FAST_PAYLOAD_DEPTH = 5
_FLOAT_MAX = 1.7976931348623157e308
_Finite = Annotated[float, Meta(ge=-_FLOAT_MAX, le=_FLOAT_MAX)]  # refuses NaN and infinities


def _json_value(depth: int) -> Any:
    """The JSON values nested at most ``depth`` deep, as a type msgspec checks while decoding."""
    value: Any = str | int | _Finite | bool | None
    for _ in range(depth):
        value = str | int | _Finite | bool | None | list[value] | dict[str, value]
    return value


if TYPE_CHECKING:  # a type built at run time is no type to a checker: a JSON object to it
    JsonObject = dict[str, Any]
else:
    JsonObject = dict[str, _json_value(FAST_PAYLOAD_DEPTH - 1)]

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
        if hasattr(values, "__array__"):  # numpy (or alike): convert without a Python loop
            import numpy as np

            return cls(np.asarray(values, dtype="<f4").tobytes(), space)
        arr = array("f", values)
        if sys.byteorder != "little":
            arr.byteswap()
        return cls(arr.tobytes(), space)

    @property
    def dim(self) -> int:
        return len(self.data) // 4


def new_id() -> str:
    """A new ULID string: 48 bits of milliseconds, 80 random bits."""
    return str(ULID())


class Erasure(Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """Marks a delta read from an erased record: the seq of the ``erased`` delta that erased
    it and the commitment that stays (braidlog.erasure). Its payload reads as {}, its vector
    as None. Only reads set it: no delta written or imported can carry it."""

    by: int
    commitment: bytes


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
    erased: Erasure | None = None  # set on reads of an erased record only


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


_WANTS = {"kind": "a string", "provenance": "a provenance kind or a Provenance", "payload": "a dict (a JSON object)",
          "tags": "a tuple of strings"}


def delta(braid_id: str, kind: str, payload: dict[str, Any] | None = None, *,
          provenance: Provenance | str = "user", confidence: float | None = None,
          ts: datetime | None = None, refs: Refs | None = None, tags: tuple[str, ...] = (),
          vector: Vector | None = None, id: str | None = None) -> GenericDelta:
    """Build a delta with sensible defaults: a new id, ts now (UTC), provenance by kind name.
    What it reads to fill them in is checked here; the rest when the delta is appended."""
    for field, value, want in (("kind", kind, str), ("provenance", provenance, (str, Provenance)),
                               ("payload", payload, (dict, type(None))), ("tags", tags, (tuple, list))):
        if not isinstance(value, want):
            raise ValidationError(field, f"must be {_WANTS[field]}, not {type(value).__name__}")
    if isinstance(provenance, str):
        provenance = Provenance(provenance)  # type: ignore[arg-type]  # any str: appending validates the kind
    if confidence is None:  # the kind's default, stored in the delta
        confidence = default_confidence(kind, provenance.kind, payload)
    return GenericDelta(
        braid_id=braid_id, kind=kind, ts=ts or datetime.now(UTC),
        provenance=provenance, confidence=confidence, payload=payload or {}, refs=refs,
        tags=tuple(tags), vector=vector, id=id or new_id(),
    )


class _DeepDelta(_StrictDelta, frozen=True, kw_only=True, omit_defaults=True,
                 forbid_unknown_fields=True, gc=False):
    """_StrictDelta with the payload decoded as plain values: the second try for a payload nested
    deeper than FAST_PAYLOAD_DEPTH, which ``_json_fault`` then checks."""

    payload: dict[str, Any]


_encoder = msgspec.msgpack.Encoder(order="deterministic")
_decoder = msgspec.msgpack.Decoder(GenericDelta)
_strict_decoder = msgspec.msgpack.Decoder(_StrictDelta)
_deep_decoder = msgspec.msgpack.Decoder(_DeepDelta)
_json_encoder = msgspec.json.Encoder(order="deterministic")
_json_decoder = msgspec.json.Decoder(_StrictDelta)
_deep_json_decoder = msgspec.json.Decoder(_DeepDelta)


def encode(d: GenericDelta) -> bytes:
    """The canonical bytes of a delta (no validation of its rules; a value msgpack cannot
    carry, such as an int past 64 bits, is a ValidationError naming ``d``)."""
    try:
        return _encoder.encode(d)
    except (TypeError, ValueError, OverflowError) as e:
        raise ValidationError("d", f"cannot be encoded: {e}") from None


def decode(data: bytes | memoryview) -> GenericDelta:
    """A delta from canonical bytes; DecodeError if they are not one."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise DecodeError(f"not a delta: expected bytes, got {type(data).__name__}")
    try:
        return _decoder.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as e:
        raise DecodeError(f"not a delta: {e}") from None


def to_json(d: GenericDelta) -> bytes:
    """A delta as JSON (for export and the command line)."""
    try:
        return _json_encoder.encode(d)
    except (TypeError, ValueError, OverflowError) as e:
        raise ValidationError("d", f"cannot be written as JSON: {e}") from None


def from_json(text: bytes | str, *, index: int | None = None) -> GenericDelta:
    """A delta from JSON, with every envelope rule checked (not the payload schema).

    ``index`` is the line number the text came from, named in every error."""
    line = f"line {index}: " if index is not None else ""
    if not isinstance(text, (str, bytes, bytearray, memoryview)):
        raise DecodeError(f"{line}not a delta: expected JSON text, got {type(text).__name__}")
    try:
        repeated = repeated_key(text)  # first: a repeated key may be what breaks another rule
        if repeated is not None:
            raise DecodeError(f"{line}{repeated_key_rule(repeated[0])}")
        strict = _checked(text, _json_decoder, _deep_json_decoder, index)
        return _decoder.decode(_encoder.encode(strict))
    except OverflowError:
        raise ValidationError("payload", _INT_RULE, index=index) from None
    except UnicodeEncodeError:  # a str holding a lone surrogate
        fault = _find(text, "text", _bad_text)
        raise DecodeError(f"{line}not text: {fault[1] if fault else 'not UTF-8'}") from None
    except UnicodeDecodeError as e:
        raise DecodeError(f"{line}not UTF-8: byte {e.object[e.start]:#04x} at offset {e.start} "
                          "(save the file as UTF-8)") from None
    except msgspec.DecodeError as e:
        surrogate = _LONE_SURROGATE_ESCAPE.search(text.encode("utf-8", "replace")
                                                  if isinstance(text, str) else bytes(text))
        if surrogate is not None:
            raise DecodeError(
                f"{line}not JSON text: the escape {surrogate.group().decode()} at offset "
                f"{surrogate.start()} is half of a UTF-16 surrogate pair, which is not a character "
                "(escape the whole pair, or the character itself)") from None
        raise DecodeError(f"{line}not JSON: {e}") from None


class _Repeated(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Repeated(key)
            seen.add(key)
    return obj


def repeated_key(text: str | bytes) -> tuple[str, int] | None:
    """The first key that an object in JSON ``text`` holds twice, and the line (from 1) of its
    second occurrence; None if no object repeats a key.

    msgspec, like most JSON parsers, keeps the last of repeated keys; an audit log refuses such
    input instead, since its readers may disagree on which value it holds. Costs a second parse
    (the standard library's), so callers run it on text msgspec has already accepted."""
    import json

    try:
        json.loads(text, object_pairs_hook=_no_repeats)
    except _Repeated:
        return _locate_repeat(text.decode("utf-8", "replace") if isinstance(text, bytes) else text)
    except (ValueError, RecursionError):  # not JSON to Python either: the first parser says why
        return None
    return None


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')


def _locate_repeat(text: str) -> tuple[str, int] | None:
    """Where the first repeated key is, by a walk over the tokens of valid JSON ``text``."""
    import json

    objects: list[set[str] | None] = []  # per open bracket: an object's keys, or None for an array
    tokens = list(_TOKEN.finditer(text))
    for i, m in enumerate(tokens):
        t = m.group()
        if t in "{[":
            objects.append(set() if t == "{" else None)
        elif t in "}]":
            objects.pop()
        elif t[0] == '"' and i + 1 < len(tokens) and tokens[i + 1].group() == ":" and objects:
            keys, key = objects[-1], json.loads(t)
            if keys is not None:
                if key in keys:
                    return key, text.count("\n", 0, m.start()) + 1
                keys.add(key)
    return None


def repeated_key_rule(key: str) -> str:
    return (f"the key {key!r} appears twice in one object; JSON with a repeated key is "
            "ambiguous (readers disagree on which value counts): write each key once")


def _checked(data: Any, fast: Any, deep: Any, index: int | None) -> _StrictDelta:
    """``data`` decoded with every envelope and JSON rule checked: by ``fast`` (all in C) for a
    payload up to FAST_PAYLOAD_DEPTH levels, else by ``deep`` and a walk over the payload."""
    try:
        return fast.decode(data)
    except msgspec.ValidationError as e:
        if " - at `$.payload" not in str(e):
            raise _envelope_error(e, index) from None
    try:
        checked = deep.decode(data)
    except msgspec.ValidationError as e:
        raise _envelope_error(e, index) from None
    except RecursionError:  # thousands of levels: too deep by far
        raise ValidationError("payload", _DEPTH_RULE, index=index) from None
    fault = _find(checked.payload, "payload", _json_fault)
    if fault is not None:
        raise ValidationError(*fault, index=index)
    return checked


# A \uD800-\uDBFF escape not followed by a \uDC00-\uDFFF one, or the second without the first.
_LONE_SURROGATE_ESCAPE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")

_RULES = {
    "id": "must be a ULID: 26 characters of Crockford base32, e.g. 01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "ts": "must be a timezone-aware datetime (naive timestamps are ambiguous)",
    "confidence": "must be a number in [0, 1]",
}
_PAYLOAD_RULE = (
    "must be a JSON object: strings, finite numbers, booleans, null, arrays and objects, nested "
    f"at most {MAX_PAYLOAD_DEPTH} deep (store bytes as base64 and times as ISO 8601 strings)")
_DEPTH_RULE = (f"nests objects and arrays more than {MAX_PAYLOAD_DEPTH} levels deep "
               "(the payload itself is level 1)")
_INT_RULE = "integers must fit in 64 bits (-2**63 to 2**64-1); store larger numbers as strings"


def _envelope_error(e: msgspec.ValidationError, index: int | None) -> ValidationError:
    text = str(e)
    rule, sep, path = text.rpartition(" - at `$.")
    if not sep:
        rule, path = text, "delta"
    path = path.rstrip("`")
    top = path.split(".")[0].split("[")[0]
    if top in _RULES and "Expected `" in rule and "null" not in rule:
        rule = f"{_RULES[top]} ({rule})"
    elif top == "braid_id" and "length" in rule:
        rule = f"must be a non-empty string of at most {MAX_ID_BYTES} characters ({rule})"
    elif top == "payload":  # msgspec writes object keys as [...]: _json_fault names the value
        path, rule = "payload", f"{_PAYLOAD_RULE} ({rule})"
    elif path.startswith("provenance.kind"):
        rule = f"must be one of {', '.join(PROVENANCE_KINDS)} ({rule})"
    return ValidationError(path, rule, index=index)


# -- finding the value that broke a rule ---------------------------------------------------------
# Errors are rare and a message must name the value, so these walks run only once a fast check
# (the encoder, the C decoder) has refused a delta. They are iterative: any depth, any cycle.

def _children(value: Any) -> Iterable[tuple[str, Any]] | None:
    if isinstance(value, dict):
        return ((f".{k}", v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ((f"[{i}]", v) for i, v in enumerate(value))
    if isinstance(value, Struct):
        return ((f".{f}", getattr(value, f)) for f in value.__struct_fields__)
    return None


def _find(root: Any, path: str, bad: Callable[[Any, int], str | None]) -> tuple[str, str] | None:
    """The first value under ``root`` (depth first, in order) for which ``bad(value, depth)``
    names a broken rule, as ``(path, rule)``; ``root`` is at depth 1. A container met twice (a
    cycle, or one value shared by two fields) is looked into once."""
    stack = [(path, root, 1)]
    seen: set[int] = set()
    while stack:
        at, value, depth = stack.pop()
        rule = bad(value, depth)
        if rule is not None:
            return at, rule
        children = _children(value)
        if children is not None and id(value) not in seen:
            seen.add(id(value))
            stack.extend(reversed([(at + step, v, depth + 1) for step, v in children]))
    return None


def _json_fault(value: Any, depth: int) -> str | None:
    """Why a decoded payload value is not JSON nested at most MAX_PAYLOAD_DEPTH deep, or None."""
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return None
    if t is dict or t is list:
        if depth > MAX_PAYLOAD_DEPTH:
            return _DEPTH_RULE
        return _non_str_key(value, depth) if t is dict else None
    if t is float:
        return None if math.isfinite(value) else f"must be a finite number (JSON has no {value})"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "must be a JSON value, not bytes (store bytes as a base64 string)"
    if isinstance(value, datetime):
        return "must be a JSON value, not a datetime (store times as ISO 8601 strings)"
    return f"must be a JSON value, not {_a(t.__name__)}"


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _too_deep(value: Any, depth: int) -> str | None:
    return _DEPTH_RULE if depth > MAX_PAYLOAD_DEPTH and _children(value) is not None else None


def _cycle(root: Any, path: str) -> str | None:
    """The path of the first value under ``root`` that contains itself, or None."""
    stack: list[tuple[str, Any, tuple[int, ...]]] = [(path, root, ())]
    while stack:
        at, value, above = stack.pop()
        children = _children(value)
        if children is None:
            continue
        if id(value) in above:
            return at
        above = (*above, id(value))
        stack.extend(reversed([(at + step, v, above) for step, v in children]))
    return None


def _non_str_key(value: Any, depth: int) -> str | None:
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                return f"object keys must be strings, not {type(key).__name__} ({key!r})"
    return None


def _bad_text(value: Any, depth: int) -> str | None:
    """Why a str (or a dict's key) cannot be stored as text: UTF-8 has no lone surrogates."""
    texts = (value,) if type(value) is str else value.keys() if isinstance(value, dict) else ()
    for text in texts:
        if isinstance(text, str):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as e:
                what = "" if text is value else f"key {text!r} "
                return (f"{what}must be text UTF-8 can encode: {text[e.start]!r} at index "
                        f"{e.start} is half of a UTF-16 surrogate pair (decode the source "
                        "without errors='surrogateescape' or 'surrogatepass', or pair it up)")
    return None


def _out_of_range(value: Any, depth: int) -> str | None:
    if type(value) is int and not -2**63 <= value < 2**64:
        return _INT_RULE
    return None


def _unsupported(type_name: str) -> Callable[[Any, int], str | None]:
    def bad(value: Any, depth: int) -> str | None:
        if type(value).__name__ == type_name and _children(value) is None:
            return (f"must be a JSON value, not {_a(type_name)} (store bytes as base64 and "
                    "times as ISO 8601 strings)")
        return None
    return bad


def _encoding_error(d: GenericDelta, e: Exception, index: int | None) -> ValidationError:
    """The field and rule behind an encoder error on ``d``."""
    fault = None
    if isinstance(e, UnicodeEncodeError):
        fault = _find(d, "", _bad_text)
    elif isinstance(e, OverflowError):
        fault = _find(d, "", _out_of_range)
    elif isinstance(e, RecursionError):
        cycle = _cycle(d, "")
        if cycle is not None:
            fault = (cycle, "contains itself: a delta must be a tree of values, not a cycle")
        else:
            fault = _find(d.payload, "payload", _too_deep) if isinstance(d.payload, dict) else None
            fault = fault or ("delta", "nests values too deep to encode")
    else:
        unsupported = re.search(r"objects of type (\S+) is unsupported", str(e))
        if unsupported:
            fault = _find(d, "", _unsupported(unsupported.group(1)))
        elif "str keys" in str(e):
            fault = _find(d, "", _non_str_key)
        fault = fault or ("payload", f"{_PAYLOAD_RULE} ({e})")
    if fault is None:
        fault = ("delta", str(e))
    field, rule = fault[0].lstrip("."), fault[1]
    if field in _RULES:  # an envelope field has a rule of its own: say that one
        rule = f"{_RULES[field]} (got {_shown(getattr(d, field))})"
    return ValidationError(field, rule, index=index)


def _shown(value: Any) -> str:
    """``value`` for a message: its repr, cut to 60 characters."""
    try:
        text = repr(value)
    except RecursionError:
        return f"a {type(value).__name__} nested too deep to show"
    return text if len(text) <= 60 else text[:57] + "..."


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
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError) as e:
        raise _encoding_error(d, e, index) from None
    stored = _plain(_checked(data, _strict_decoder, _deep_decoder, index))
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
    elif type(d.confidence) is float and d == stored:
        # Equal field by field (same types where it matters: a list is not a tuple, a Struct
        # not a dict) to what decoding its bytes gave, so those bytes encode it already.
        return stored, data, value
    # The canonical bytes are those of the stored delta, so that reading it back and appending
    # it again is an idempotent retry (an int confidence 1 is stored as the float 1.0).
    return stored, _encoder.encode(stored), value


def _check_vector(v: Vector, index: int | None) -> None:
    if not v.data or len(v.data) % 4:
        raise ValidationError("vector.data", "must be float32 bytes: a non-empty multiple of 4", index=index)
    arr = array("f", v.data)  # no numpy in the core: a NaN or infinity makes the sum non-finite
    if sys.byteorder != "little":
        arr.byteswap()
    if not math.isfinite(sum(arr)):
        bad = next(i for i, x in enumerate(arr) if not math.isfinite(x))
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




# -- the committed form: what the chain and the Merkle tree cover -------------------------------
# docs/format.md#the-committed-form gives it byte for byte. The payload and vector are in it only
# through ``commitment``, a salted hash of the whole canonical delta, so that an erasure can drop
# the delta's bytes and its salt while every chain hash, tree node, proof and checkpoint stays.

ENTRY_MAX = 65535  # a C2SP tlog-tiles entry is prefixed by its length as a uint16
SALT_SIZE = 16


class Entry(Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True,
            gc=False):
    """A record's committed form, decoded: the envelope, and a commitment in place of the
    payload and vector. The field order here is the byte order of the encoding."""

    seq: int
    id: str
    braid_id: str
    kind: str
    ts: int  # microseconds since 1970-01-01T00:00:00Z
    provenance: Provenance
    confidence: float
    refs: Refs | None = None
    tags: tuple[str, ...] = ()
    commitment: bytes


_entry_decoder = msgspec.msgpack.Decoder(Entry)


def commitment(salt: bytes, data: bytes) -> bytes:
    """``SHA-256(salt || data)``: the commitment to a record's canonical delta bytes ``data``."""
    return hashlib.sha256(salt + data).digest()


def ts_micros(ts: datetime) -> int:
    """A UTC datetime as whole microseconds since the epoch (exact integer arithmetic; the
    timedelta's fields, not ``// timedelta``, which costs twice as much)."""
    t = ts - EPOCH
    return (t.days * 86_400 + t.seconds) * 1_000_000 + t.microseconds


def form_of(seq: int, d: GenericDelta, commitment: bytes) -> bytes:
    """The committed form of delta ``d``'s envelope at ``seq`` with ``commitment``."""
    return _encoder.encode(Entry(
        seq=seq, id=d.id, braid_id=d.braid_id, kind=d.kind, ts=ts_micros(d.ts),
        provenance=d.provenance, confidence=float(d.confidence), refs=d.refs, tags=d.tags,
        commitment=commitment))


def committed_form(seq: int, d: GenericDelta, salt: bytes, data: bytes) -> bytes:
    """The committed form of delta ``d`` (canonical bytes ``data``) stored at ``seq`` with
    ``salt``: the bytes the chain links, the tree's leaf input, a C2SP log entry."""
    return form_of(seq, d, hashlib.sha256(salt + data).digest())


def decode_entry(entry: bytes | memoryview) -> Entry:
    """A committed form decoded; DecodeError if the bytes are not one."""
    try:
        return _entry_decoder.decode(entry)
    except (msgspec.DecodeError, UnicodeDecodeError) as e:
        raise DecodeError(f"not a braidlog committed form: {e}") from None


#: What a committed form can hold beyond the canonical bytes of its delta: the ``seq`` and
#: ``commitment`` fields (58 bytes at most), with room to spare for a larger map header and the
#: envelope fields a delta's bytes leave out at their defaults.
_ENTRY_OVER_DATA = 128


def check_entry_size(d: GenericDelta, data: bytes | None = None, *,
                     index: int | None = None) -> None:
    """ValidationError unless the committed form of ``d`` fits a C2SP entry at any seq,
    naming the field that takes the most of it. ``data``, the delta's canonical bytes, spares
    building the form when they are short enough that it cannot be too long."""
    if data is not None and len(data) + _ENTRY_OVER_DATA <= ENTRY_MAX:
        return
    size = len(committed_form(2**64 - 1, d, bytes(SALT_SIZE), b""))
    if size <= ENTRY_MAX:
        return
    parts: dict[str, int] = {"id": len(_encoder.encode(d.id)),
                             "braid_id": len(_encoder.encode(d.braid_id)),
                             "kind": len(_encoder.encode(d.kind)),
                             "tags": len(_encoder.encode(d.tags))}
    for f in d.provenance.__struct_fields__:
        parts[f"provenance.{f}"] = len(_encoder.encode(getattr(d.provenance, f)))
    if d.refs is not None:
        for f in d.refs.__struct_fields__:
            parts[f"refs.{f}"] = len(_encoder.encode(getattr(d.refs, f)))
    field = max(parts, key=parts.__getitem__)
    raise ValidationError(field, f"makes the record's committed form {size:,} bytes, over the "
                          f"{ENTRY_MAX:,} a log entry holds (C2SP tlog-tiles); this field takes "
                          f"{parts[field]:,} of them: shorten it, or move what it holds into the "
                          "payload, which is committed to by a hash", index=index)
