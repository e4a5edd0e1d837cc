"""The kind registry: every delta kind, who owns it, and its typed, versioned payload schema.

A kind's payload is a JSON object. Its schema is a msgspec Struct; when a schema changes, the
owner adds a new Struct as the next version together with an upcaster from the previous version.
Payloads are written at the current version and stored as written: an older payload is upcast
each time it is read (``typed``), never rewritten on disk. The version a payload was written
under travels in the payload itself under the key ``"_v"`` (absent means version 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import UnionType
from typing import Any, TypeAlias

import msgspec

from .errors import BraidlogError, ValidationError

__all__ = [
    "VERSION_KEY",
    "KindSpec",
    "Registry",
    "REGISTRY",
    "declare",
    "typed",
    "typed_or_none",
    "check_payload",
    "plain",
    "MINIMUM_KINDS",
    "DREAM_CONFIDENCE",
    "default_confidence",
]

VERSION_KEY = "_v"

#: The Braid seed's stable minimum vocabulary (v0).
MINIMUM_KINDS = (
    "tick", "message", "knot_lifecycle", "observation", "bead_ref", "bead_write",
    "bead_version", "tool_call", "tool_result", "microagent", "hypothesis", "trust",
)

#: Where dream-provenance content starts (seed: dream outputs are low-confidence by default).
DREAM_CONFIDENCE = 0.3


def default_confidence(kind: str, provenance: str, payload: Any = None) -> float:
    """The confidence a delta gets when its writer states none (the Braid reference
    implementation's defaults): a ``message`` from ``user`` or ``tool`` 0.7, any other message
    0.6; a ``tool_call`` 0.6; a ``tool_result`` 0.7 when ok and 0.4 when it failed
    (``payload["ok"] is False``); any other kind 1.0. Dream provenance starts at
    ``DREAM_CONFIDENCE`` at most. It is stored in the delta, so the log says what was assumed."""
    if kind == "message":
        value = 0.7 if provenance in ("user", "tool") else 0.6
    elif kind == "tool_call":
        value = 0.6
    elif kind == "tool_result":
        ok = payload.get("ok", True) if isinstance(payload, dict) else True
        value = 0.4 if ok is False else 0.7
    else:
        value = 1.0
    return min(value, DREAM_CONFIDENCE) if provenance == "dream" else value


Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
#: A payload schema: a Struct type, a union of tagged Struct types, or None for any JSON object.
Schema: TypeAlias = type | UnionType | None


@dataclass(frozen=True)
class KindSpec:
    """One kind: its owner, its payload schemas by version, and how to upcast old payloads.

    ``schemas`` maps version -> Struct (or None for "any JSON object"); ``upcasters[v]`` turns a
    version-v payload dict into a version-(v+1) dict. ``refers`` names the entity ids a payload
    is about, so that "every delta that refers to X" finds it through the refers-to index.
    """

    kind: str
    owner: str
    schemas: Mapping[int, Schema]
    upcasters: Mapping[int, Upcaster] = field(default_factory=dict)
    refers: Callable[[Any], Iterable[str]] | None = None
    #: The seq of the ``kind_declared`` delta that declared the current version in a store's
    #: log (None: declared in Python), and the JSON Schemas by version it was declared with.
    declared_at: int | None = None
    json_schemas: Mapping[int, Mapping[str, Any]] | None = None
    text: tuple[str, ...] = ()  # the payload fields (dotted paths) that recall indexes as text
    #: one line saying what a payload (as stored) holds, for history and explain (None: none)
    describe: Callable[[dict[str, Any]], str] | None = None
    version: int = field(init=False)
    schema: Schema = field(init=False)

    def __post_init__(self) -> None:  # computed once: both are read on every append and fold
        for name, value in (("kind", self.kind), ("owner", self.owner)):
            if not isinstance(value, str) or not value:
                raise ValidationError(name, f"must be a non-empty string, not {type(value).__name__}")
        if not isinstance(self.schemas, Mapping) or not self.schemas:
            raise ValidationError("schemas", "must map each version (1, 2, ...) to its schema")
        for version, schema in self.schemas.items():
            if isinstance(version, bool) or not isinstance(version, int) or version < 1:
                raise ValidationError("schemas", f"versions must be whole numbers from 1, not {version!r}"[:120])
            _schema(schema, "schemas")
        if not isinstance(self.upcasters, Mapping) or not all(callable(u) for u in self.upcasters.values()):
            raise ValidationError("upcasters", "must map versions to functions of a payload")
        for name, fn in (("refers", self.refers), ("describe", self.describe)):
            if fn is not None and not callable(fn):
                raise ValidationError(name, f"must be a function of the payload, not {type(fn).__name__}")
        if self.declared_at is not None and (isinstance(self.declared_at, bool) or not isinstance(
                self.declared_at, int)):
            raise ValidationError("declared_at", f"must be a seq or None, not {type(self.declared_at).__name__}")
        if self.json_schemas is not None and not isinstance(self.json_schemas, Mapping):
            raise ValidationError("json_schemas", f"must map versions to JSON Schemas, not "
                                  f"{type(self.json_schemas).__name__}")
        if not isinstance(self.text, tuple) or not all(isinstance(t, str) for t in self.text):
            raise ValidationError("text", f"must be a tuple of field names, not {type(self.text).__name__}")
        object.__setattr__(self, "version", max(self.schemas))
        object.__setattr__(self, "schema", self.schemas[self.version])

    def check(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Validate an incoming payload; return it as stored: stamped with its version if not 1.

        A payload without ``"_v"`` is written at the current version; one with ``"_v"`` is
        checked against that (older) version's schema and stored as it is, to be upcast on read.
        """
        return self.checked(payload)[0]

    def checked(self, payload: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """``check``, also returning the payload converted to its schema (None when the schema is
        an older version or absent), so that ``refers`` needs no second conversion."""
        version = payload.get(VERSION_KEY, self.version)
        if type(version) is not int or version not in self.schemas:
            raise ValidationError(
                "payload._v",
                f"kind {self.kind!r} has payload versions {sorted(self.schemas)}, not {version!r}",
            )
        schema = self.schemas[version]
        value = None
        if schema is not None:
            body = _without_version(payload) if VERSION_KEY in payload else payload
            try:
                value = msgspec.convert(body, schema)
            except msgspec.ValidationError as e:
                raise _payload_error(self.kind, e) from None
            if version != self.version:
                value = None
        if version != 1 and VERSION_KEY not in payload:
            return {**payload, VERSION_KEY: version}, value
        return payload, value

    def typed(self, payload: dict[str, Any]) -> Any:
        """The payload as the current schema's Struct, upcast from the version it was written at."""
        version = payload.get(VERSION_KEY, 1)
        body = _without_version(payload) if VERSION_KEY in payload else payload
        while version < self.version:
            body = self.upcasters[version](body)
            version += 1
        schema = self.schema
        return body if schema is None else msgspec.convert(body, schema)

    def reader(self) -> Callable[[Any], Any]:
        """``read(delta)``: ``typed(delta.payload)`` for deltas of this kind, bound once.

        A fold reads the same few kinds thousands of times: it binds their readers when its
        module loads, and a payload at the current version 1 (no ``"_v"``, nothing to upcast)
        then costs one ``msgspec.convert``. A later re-declaration of the kind is a new
        KindSpec; readers bound to this one keep its schema.
        """
        schema, typed = self.schema, self.typed
        if self.version != 1 or schema is None:
            return lambda d: typed(d.payload)
        convert = msgspec.convert

        def read(d: Any) -> Any:
            payload = d.payload
            return typed(payload) if VERSION_KEY in payload else convert(payload, schema)
        return read

    def ids(self, payload: dict[str, Any], typed: Any = None) -> Iterable[str]:
        """Entity ids this payload is about (for the refers-to index); ``typed`` is the payload
        already converted to the current schema, when the caller has it."""
        if self.refers is None:
            return ()
        return self.refers(typed if typed is not None else self.typed(payload))


def _without_version(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k != VERSION_KEY}


def _payload_error(kind: str, e: msgspec.ValidationError) -> ValidationError:
    text = str(e)
    rule, sep, path = text.rpartition(" - at `$")
    if not sep:
        return ValidationError("payload", f"{text} (kind {kind!r})")
    return ValidationError("payload" + path.rstrip("`"), f"{rule} (kind {kind!r})")


def _schema(schema: Any, field: str) -> None:
    if schema is not None and not isinstance(schema, type) and not hasattr(schema, "__args__"):
        raise ValidationError(field, f"must be a msgspec Struct (or a union of them) or None, not "
                              f"{type(schema).__name__}")


def _declaration(kind: Any, schema: Any, owner: Any, version: Any, previous: Any, upcasters: Any,
                 refers: Any, text: Any) -> None:
    """The types of ``Registry.declare``'s arguments (its rules follow in it)."""
    for name, value in (("kind", kind), ("owner", owner)):
        if not isinstance(value, str):
            raise ValidationError(name, f"must be a string, not {type(value).__name__}")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValidationError("version", f"must be a whole number from 1, not {version!r}"[:120])
    _schema(schema, "schema")
    for name, value in (("previous", previous), ("upcasters", upcasters)):
        if value is not None and not isinstance(value, Mapping):
            raise ValidationError(name, f"must map versions to schemas, not {type(value).__name__}")
    if refers is not None and not callable(refers):
        raise ValidationError("refers", f"must be a function of the payload, not {type(refers).__name__}")
    if isinstance(text, (str, bytes)) or not isinstance(text, (list, tuple)) \
            or not all(isinstance(t, str) for t in text):
        raise ValidationError("text", f"must be a list of field names, not {type(text).__name__}")


class Registry:
    """Kinds by name. A projection declares the kinds it owns; each kind has exactly one owner.

    The seed's minimum kinds are declared open ("braid" owns them, any JSON object) until one
    projection module claims each with its own schema; a second claim is an error.
    """

    def __init__(self) -> None:
        self._specs: dict[str, KindSpec] = {}

    def declare(self, kind: str, schema: Schema, *, owner: str, version: int = 1,
                previous: Mapping[int, Schema] | None = None,
                upcasters: Mapping[int, Upcaster] | None = None,
                refers: Callable[[Any], Iterable[str]] | None = None,
                text: Iterable[str] = (),
                describe: Callable[[dict[str, Any]], str] | None = None) -> KindSpec:
        """Declare (or claim an open core kind as) ``kind`` with its current schema."""
        _declaration(kind, schema, owner, version, previous, upcasters, refers, text)
        if not kind or not kind.replace("_", "").replace(".", "").isalnum():
            raise ValidationError("kind", f"{kind!r} must be letters, digits, '_' or '.'")
        schemas = dict(previous or {})
        schemas[version] = schema
        missing = [v for v in range(1, version) if v not in schemas or v not in (upcasters or {})]
        if missing:
            raise ValidationError(
                "version", f"kind {kind!r} at version {version} needs schemas and upcasters for {missing}"
            )
        spec = KindSpec(kind, owner, schemas, dict(upcasters or {}), refers, text=tuple(text),
                        describe=describe)
        old = self.get(kind)
        if old is not None and old.owner not in (owner, "braid"):
            raise ValidationError("kind", f"{kind!r} is already owned by {old.owner!r}")
        self._specs[kind] = spec
        return spec

    def __getitem__(self, kind: str) -> KindSpec:
        spec = self.get(kind)
        if spec is None:
            raise ValidationError("kind", unknown_kind(kind))
        return spec

    def get(self, kind: str) -> KindSpec | None:
        if not isinstance(kind, str):
            raise ValidationError("kind", f"must be a string, not {type(kind).__name__}")
        return self._specs.get(kind)

    def _all(self) -> dict[str, KindSpec]:
        return self._specs

    def __contains__(self, kind: object) -> bool:
        return isinstance(kind, str) and self.get(kind) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._all()))

    def specs(self) -> list[KindSpec]:
        """Every kind this registry knows, by name."""
        return [s for _, s in sorted(self._all().items())]

    def knows_subjects(self, kind: str) -> bool:
        """Whether this registry can name the entity ids a payload of ``kind`` is about, as the
        refers-to index was written: not for a kind it does not know, nor for one of the seed's
        open core kinds that no loaded projection has claimed (the claim brings the subjects)."""
        spec = self.get(kind)
        return spec is not None and not (spec.owner == "braid" and spec.schema is None
                                         and spec.refers is None)

    def owned_by(self, owner: str) -> list[str]:
        return sorted(k for k, s in self._all().items() if s.owner == owner)


def unknown_kind(kind: str) -> str:
    """The rule an unknown kind breaks, with both ways to declare one."""
    return (f"unknown kind {kind!r}; declare it in the store (braidlog kind add {kind} --schema "
            "FILE, or Braid.declare_kind) or in Python (braidlog.declare)")


REGISTRY = Registry()
declare = REGISTRY.declare


def typed(delta: Any, registry: Registry = REGISTRY) -> Any:
    """A delta's payload as its kind's current Struct, upcast if it was written under an older one."""
    if not isinstance(getattr(delta, "kind", None), str) or not isinstance(getattr(delta, "payload", None), dict):
        raise ValidationError("delta", f"must be a delta (a kind and a payload), not {type(delta).__name__}")
    if not isinstance(registry, Registry):
        raise ValidationError("registry", f"must be a Registry, not {type(registry).__name__}")
    try:
        return registry[delta.kind].typed(delta.payload)
    except msgspec.ValidationError as e:  # no msgspec error crosses the public API
        raise _payload_error(delta.kind, e) from None


# Small helpers every projection family uses (defined once here, exported by ``braidlog``).

def typed_or_none(delta: Any, registry: Registry = REGISTRY) -> Any:
    """``typed(delta)``, or None when the payload cannot be read as its kind's current Struct
    (an old payload whose upcast fails now, a kind not declared here): for folds and checks,
    which never raise on a delta already in the log."""
    try:
        return registry[delta.kind].typed(delta.payload)
    except (BraidlogError, msgspec.MsgspecError, TypeError, ValueError, KeyError, AttributeError):
        return None


def check_payload(kind: str, payload: dict[str, Any], registry: Registry = REGISTRY) -> dict[str, Any]:
    """``payload`` unchanged, once it passes ``kind``'s schema (ValidationError naming the field
    and the rule otherwise): what a ``decide`` checks before it builds a delta."""
    if not isinstance(payload, dict):
        raise ValidationError("payload", f"must be a JSON object (a dict), not {type(payload).__name__}")
    registry[kind].check(payload)
    return payload


def plain(value: Any) -> Any:
    """``value`` as JSON carries it (Structs become objects, tuples lists, times ISO strings):
    a payload as the log stores it, or content to compare with a stored one."""
    try:
        return msgspec.json.decode(msgspec.json.encode(value))
    except (TypeError, ValueError, OverflowError) as e:
        raise ValidationError("value", f"cannot be carried as JSON: {e}") from None
