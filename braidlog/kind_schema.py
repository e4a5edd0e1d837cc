"""Kinds declared in the log itself: a ``kind_declared`` delta holds a payload's JSON Schema.
(The embedder of each vector space is declared in the log too: ``embedder_declared``, below.)

A kind declared in Python (``braidlog.declare``) lives in one process; a kind declared in the log
is part of the history: covered by the chain, exported, shipped to replicas, and known to every
process that opens the store. Each store's registry learns the declarations from its own log
(``StoreKinds``), on open and whenever it meets a kind it does not know yet, so a declaration
appended by another process is seen at the next append.

Rules, checked where the declaration enters (every path: append, batch, CLI, import, replica):

- the name is new (no kind declared in Python or by another owner), or the declaration is the
  next version (current + 1) of a kind already declared in this log by the same owner;
- a new version only adds optional properties: every property of the previous version keeps its
  schema, and the required ones stay the same; a payload of any earlier version is read as is;
- the schema is the supported subset of JSON Schema (below); anything else is refused by name.

Supported schema subset: ``type`` (``object``, ``string``, ``integer``, ``number``, ``boolean``,
``null``, ``array``, or a list of them), ``properties``, ``required``, ``additionalProperties``
(``false`` refuses unknown keys; default: allowed), ``items``, ``enum`` (of strings, integers or
booleans), ``minLength``, ``maxLength``, ``pattern``, ``minimum``, ``maximum``,
``exclusiveMinimum``, ``exclusiveMaximum``, ``minItems``, ``maxItems``, and the annotations
``title``, ``description``, ``$schema``, ``$comment``, ``default``, ``examples``. The top level
is an ``object``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Annotated, Any, Literal, Union

import msgspec

from .delta import GenericDelta
from .delta import delta as make_delta
from .errors import StaleHead, ValidationError
from .kinds import REGISTRY, KindSpec, Registry, Schema

__all__ = ["KIND_DECLARED", "KindDeclared", "StoreKinds", "declare_kind", "schema_type",
           "declaration_spec", "EMBEDDER_DECLARED", "EMBEDDERS_BRAID", "EmbedderDeclared", "recorded_embedder",
           "recorded_embedders", "embedder_declaration", "embedder_mismatch", "append_with_embedder"]

#: The engine's kind for a declaration; owned by braidlog itself.
KIND_DECLARED = "kind_declared"
OWNER = "braidlog"

_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool,
                          "null": type(None)}
_ANNOTATIONS = frozenset({"title", "description", "$schema", "$comment", "default", "examples"})
_CONSTRAINTS = {"minLength": "min_length", "maxLength": "max_length", "pattern": "pattern",
                "minimum": "ge", "maximum": "le", "exclusiveMinimum": "gt",
                "exclusiveMaximum": "lt", "minItems": "min_length", "maxItems": "max_length"}
_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum",
                       *_CONSTRAINTS}) | _ANNOTATIONS
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.]{0,63}$")


class KindDeclared(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The payload of a ``kind_declared`` delta: a kind, its owner, version and JSON Schema."""

    name: str
    schema: dict[str, Any]
    version: int = 1
    owner: str = "app"
    description: str = ""
    #: payload fields (top-level properties) whose values are the ids of the entities a delta
    #: of the kind is about: the refers-to index files it under them (history, explain, prove)
    refers: tuple[str, ...] = ()
    #: payload fields (top-level properties) recall indexes as the delta's text
    text: tuple[str, ...] = ()

    def __post_init__(self) -> None:  # ValidationError (a ValueError): msgspec.convert reports it as its own
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValidationError("name", f"kind name {self.name!r} must start with a letter and hold only "
                                  "letters, digits, '_' or '.' (at most 64)")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ValidationError("version", f"must be a whole number of at least 1, not {self.version!r}")
        if not isinstance(self.owner, str) or not self.owner.strip():
            raise ValidationError("owner", "must be a non-empty string")
        if not isinstance(self.description, str):
            raise ValidationError("description", f"must be a string, not {type(self.description).__name__}")
        if not isinstance(self.schema, dict) or self.schema.get("type") != "object":
            raise ValidationError("schema", 'the schema\'s top level must be {"type": "object", ...}')
        try:
            schema_type(self.schema, self.name)  # refuses what the subset does not support
        except (ValueError, TypeError) as e:
            raise ValidationError("schema", str(e)) from None
        props = self.schema.get("properties", {})
        if not isinstance(props, Mapping):
            raise ValidationError("schema", "properties must be a JSON object")
        for what, fields in (("refers", self.refers), ("text", self.text)):
            if not isinstance(fields, (tuple, list)) or not all(isinstance(f, str) for f in fields):
                raise ValidationError(what, "must be a list of property names (strings)")
            unknown = [f for f in fields if f not in props]
            if unknown:
                raise ValidationError(what, f"{unknown[0]!r} is not a property of the schema "
                                      f"(properties: {', '.join(props) or 'none'})")


def schema_type(schema: Mapping[str, Any], name: str, path: str = "schema") -> Any:
    """The msgspec type that validates JSON values against ``schema`` (the supported subset).

    Raises ValueError naming the path and the keyword that is not supported."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"{path}: must be a JSON object, not {type(schema).__name__}")
    unknown = sorted(set(schema) - _KEYWORDS)
    if unknown:
        raise ValueError(f"{path}: {', '.join(unknown)} not supported (supported: "
                         f"{', '.join(sorted(_KEYWORDS - _ANNOTATIONS))})")
    if "enum" in schema:
        values = schema["enum"]
        if (not isinstance(values, list) or not values
                or not all(type(v) in (str, int, bool) for v in values)):
            raise ValueError(f"{path}.enum: must be a non-empty list of strings, integers or booleans")
        return Literal[tuple(values)]
    kinds = schema.get("type")
    if kinds is None:
        return Any
    if isinstance(kinds, list):
        if not kinds or not all(isinstance(k, str) for k in kinds):
            raise ValueError(f"{path}.type: must be a type name or a non-empty list of them")
        return Union[tuple(_one(schema, k, name, path) for k in kinds)]  # noqa: UP007 - a union of a run-time list of types
    return _one(schema, kinds, name, path)


def _one(schema: Mapping[str, Any], kind: Any, name: str, path: str) -> Any:
    if kind == "object":
        props = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(props, Mapping) or not isinstance(required, list):
            raise ValueError(f"{path}: properties must be an object and required a list")
        missing = [r for r in required if r not in props]
        if missing:
            raise ValueError(f"{path}.required: {missing} are not among the properties")
        extra = schema.get("additionalProperties", True)
        if extra not in (True, False):
            raise ValueError(f"{path}.additionalProperties: only true or false are supported")
        if not props:
            return dict[str, Any]
        fields: list[tuple] = []
        for key, sub in props.items():
            if not isinstance(key, str) or not key.isidentifier() or key.startswith("_"):
                raise ValueError(f"{path}.properties: {key!r} must be an identifier not starting with '_'")
            t = schema_type(sub, name, f"{path}.properties.{key}")
            fields.append((key, t) if key in required else (key, t | None, None))
        fields.sort(key=len)  # required fields (no default) first, as Structs need
        return msgspec.defstruct(f"{name}:{path}", fields, forbid_unknown_fields=not extra)
    if kind == "array":
        items = schema.get("items")
        t = Any if items is None else schema_type(items, name, f"{path}.items")
        return _constrained(list[t], schema, path, ("minItems", "maxItems"))  # type: ignore[valid-type]  # a type built at run time
    if kind in ("string",):
        return _constrained(str, schema, path, ("minLength", "maxLength", "pattern"))
    if kind in ("integer", "number"):
        return _constrained(_TYPES[kind], schema, path,
                            ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
    if kind in _TYPES:
        return _TYPES[kind]
    raise ValueError(f"{path}.type: {kind!r} is not a JSON Schema type "
                     "(object, array, string, integer, number, boolean, null)")


def _constrained(t: Any, schema: Mapping[str, Any], path: str, allowed: tuple[str, ...]) -> Any:
    meta = {_CONSTRAINTS[k]: schema[k] for k in allowed if k in schema}
    stray = [k for k in _CONSTRAINTS if k in schema and k not in allowed]
    if stray:
        raise ValueError(f"{path}: {', '.join(stray)} does not apply to this type")
    if not meta:
        return t
    try:
        return Annotated[t, msgspec.Meta(**meta)]
    except (TypeError, ValueError, re.error) as e:
        raise ValueError(f"{path}: {e}") from None


def declaration_spec(d: KindDeclared, at: int | None,
                     lookup: Callable[[str], KindSpec | None]) -> KindSpec:
    """The KindSpec a declaration makes, checked against the kinds ``lookup`` knows.

    Raises ValidationError naming the rule: a kind declared elsewhere, a version out of order,
    a new version that changes or requires more than the previous one."""
    old = lookup(d.name)
    if old is None:
        if d.version != 1:
            raise ValidationError("payload.version", f"kind {d.name!r} is not declared yet, so its "
                                  f"first declaration is version 1, not {d.version}")
        return _spec(d, {1: d.schema}, at)
    if old.declared_at is None:
        raise ValidationError("payload.name", f"kind {d.name!r} is declared in Python by "
                              f"{old.owner!r}; a store declaration cannot change it")
    if old.owner != d.owner:
        raise ValidationError("payload.owner", f"kind {d.name!r} is owned by {old.owner!r}, "
                              f"not {d.owner!r}")
    if d.version != old.version + 1:
        raise ValidationError("payload.version", f"kind {d.name!r} is at version {old.version}; "
                              f"the next declaration is version {old.version + 1}, not {d.version}")
    schemas = old.json_schemas
    assert schemas is not None  # a kind declared in a store keeps its JSON schemas
    _check_additive(schemas[old.version], d.schema, "payload.schema")
    merged: dict[int, Mapping[str, Any]] = {**schemas, d.version: d.schema}
    return _spec(d, merged, at)


def _check_additive(old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> None:
    """A new version keeps every property's schema and the required list; it may add optional
    properties, so a payload valid under the old version is valid under the new one."""
    changed = {k: v for k, v in old.items() if k not in ("properties", *_ANNOTATIONS)
               and new.get(k) != v}
    changed.update({k: None for k in new if k not in old and k not in ("properties", *_ANNOTATIONS)})
    if changed:
        raise ValidationError(path, f"a new version may only add optional properties; it changes "
                              f"{sorted(changed)}")
    props_old, props_new = old.get("properties", {}), new.get("properties", {})
    for key, sub in props_old.items():
        if key not in props_new:
            raise ValidationError(f"{path}.properties.{key}", "a new version may not drop a property")
        if props_new[key] != sub:
            raise ValidationError(f"{path}.properties.{key}", "a new version may not change a "
                                  "property's schema; add a new property instead")


def _identity(payload: dict[str, Any]) -> dict[str, Any]:
    return payload


def _referrer(fields: tuple[str, ...]) -> Callable[[Any], list[str]] | None:
    """The refers-to function of a declared kind: the string values (or strings in the list
    values) of ``fields`` in a payload, whether it is a Struct or a dict."""
    if not fields:
        return None

    def refers(p: Any) -> list[str]:
        out: list[str] = []
        for f in fields:
            value = p.get(f) if isinstance(p, dict) else getattr(p, f, None)
            for v in (value if isinstance(value, list) else [value]):
                if isinstance(v, str) and v:
                    out.append(v)
        return out
    return refers


def _spec(d: KindDeclared, json_schemas: Mapping[int, Mapping[str, Any]], at: int | None) -> KindSpec:
    schemas = {v: schema_type(s, d.name) for v, s in json_schemas.items()}
    return KindSpec(d.name, d.owner, schemas, {v: _identity for v in range(1, d.version)},
                    refers=_referrer(tuple(d.refers)), declared_at=at, json_schemas=json_schemas,
                    text=tuple(d.text))


class StoreKinds(Registry):
    """A store's registry: the process's kinds (``parent``) plus the kinds declared in its log.

    ``source(after)`` yields ``(seq, KindDeclared)`` for the declarations after seq ``after``;
    the registry reads them on first use and again whenever it meets a kind it does not know.
    """

    def __init__(self, parent: Registry, source: Callable[[int], Iterable[tuple[int, Any]]],
                 stamp: Callable[[], Any] | None = None) -> None:
        super().__init__()
        self.parent = parent
        # a plain registry's own dict, read directly: get() runs twice per appended delta
        self._base = parent._specs if type(parent) is Registry else parent
        self._source = source
        self._seen = 0
        # ``stamp()`` changes with every commit to the store (LmdbLog.last_commit): a look at
        # an unchanged log finds nothing new, so a kind no one declared (one of a projection
        # not loaded here) costs a dict lookup, not a read of the log, each time it is met
        self._stamp = stamp
        self._looked: Any = None

    def sync(self) -> None:
        """Before a batch is checked: once the log declares kinds, look for newer declarations
        (a new version appended by this or another process). A log without any costs nothing."""
        if self._specs:
            self.refresh()

    def refresh(self) -> None:
        """Learn the declarations appended since the last look."""
        stamp = None if self._stamp is None else self._stamp()
        if stamp is not None and stamp == self._looked:
            return
        for seq, decl in self._source(self._seen):
            if seq > self._seen:
                self._learn(decl, seq)
                self._seen = seq
        self._looked = stamp

    def _learn(self, decl: Any, seq: int) -> None:
        d = decl if isinstance(decl, KindDeclared) else msgspec.convert(decl, KindDeclared)
        try:
            self._specs[d.name] = declaration_spec(d, seq, self._known)
        except ValidationError:  # a declaration the log holds is a fact: the first one stands
            pass

    def _known(self, kind: str) -> KindSpec | None:
        return self._specs.get(kind) or self._base.get(kind)

    def get(self, kind: str) -> KindSpec | None:
        spec = self._specs.get(kind) or self._base.get(kind)
        if spec is None:
            self.refresh()
            spec = self._specs.get(kind)
        return spec

    def _all(self) -> dict[str, KindSpec]:
        self.refresh()
        return {**self.parent._all(), **self._specs}

    def declare(self, kind: str, schema: Schema, **kw: Any) -> KindSpec:
        """Python declarations go to the process-wide parent registry."""
        return self.parent.declare(kind, schema, **kw)

    def batch(self) -> BatchKinds:
        return BatchKinds(self)


class BatchKinds(Registry):
    """The kinds a batch sees: the store's, plus the declarations earlier in the same batch.

    Nothing reaches the store's registry until the batch is committed and read back."""

    def __init__(self, parent: Registry) -> None:
        super().__init__()
        self.parent = parent

    def get(self, kind: str) -> KindSpec | None:
        return self._specs.get(kind) or self.parent.get(kind)

    def _all(self) -> dict[str, KindSpec]:
        return {**self.parent._all(), **self._specs}

    def admit(self, d: KindDeclared) -> None:
        self._specs[d.name] = declaration_spec(d, 0, self.get)


def _log_of(source: Any) -> Any:
    """A Braid's store, or the store (or a view) itself."""
    from .store.ports import store_of  # here: the store imports this module

    return store_of(source)


def declare_kind(target: Any, name: str, schema: Mapping[str, Any], *, owner: str = "app",
                 version: int | None = None, description: str = "", braid_id: str = "kinds",
                 provenance: str = "system", refers: Iterable[str] = (),
                 text: Iterable[str] = ()) -> int:
    """Declare ``name`` in the log of ``target`` (a Braid or a store) with a payload JSON Schema;
    return the seq of the declaration. ``version`` defaults to the next one (1 for a new kind).
    ``refers`` names the payload fields that hold the ids of the entities a delta is about,
    ``text`` the fields recall reads as its text.

    From then on every process that opens the store validates deltas of ``name`` against it.
    Declaring what the latest declaration already says (the same schema, owner, description,
    refers and text, with no version asked) changes nothing: its seq is returned."""
    registry = getattr(_log_of(target), "registry", None)  # a Braid's store, or the store itself
    if not isinstance(registry, Registry):
        raise ValidationError("target", f"must be a Braid or a store, not {type(target).__name__}")
    sync(registry)
    refers, text = _field_names(refers, "refers"), _field_names(text, "text")
    spec = registry.get(name) if isinstance(name, str) else None
    declared_at = None if spec is None else spec.declared_at
    if version is None and spec is not None and declared_at is not None and spec.json_schemas is not None:
        latest = _latest_declaration(target, name, declared_at)
        if latest is not None and (latest.schema, latest.owner, latest.description,
                                   list(latest.refers), list(latest.text)) == (
                dict(schema), owner, description, refers, text):
            return declared_at  # already declared as asked
    if version is None:
        version = spec.version + 1 if spec is not None and declared_at is not None else 1
    payload = {"name": name, "schema": schema, "version": version, "owner": owner}
    if description:
        payload["description"] = description
    if refers:
        payload["refers"] = refers
    if text:
        payload["text"] = text
    seq = target.append(make_delta(braid_id, KIND_DECLARED, payload, provenance=provenance,
                                   confidence=1.0))
    sync(registry)
    return seq


def _field_names(value: Any, name: str) -> list[str]:
    """``refers`` or ``text``: one property name, or several, each once."""
    if isinstance(value, str):
        value = [value]
    try:
        names = list(value)
    except TypeError:
        raise ValidationError(name, f"must be a property name or a list of them, not "
                              f"{type(value).__name__}") from None
    bad = [v for v in names if not isinstance(v, str)]
    if bad:
        raise ValidationError(name, f"must hold property names (strings), not {type(bad[0]).__name__}")
    return list(dict.fromkeys(names))


def _latest_declaration(target: Any, name: str, seq: int) -> KindDeclared | None:
    """The declaration at ``seq`` of ``target``'s log, if it declares ``name``."""
    store = _log_of(target)
    try:
        d = msgspec.convert(store.read(seq).delta.payload, KindDeclared)
    except (msgspec.ValidationError, ValueError, LookupError):
        return None
    return d if d.name == name else None


def store_kinds(registry: Registry, store: Any,
                stamp: Callable[[], int] | None = None) -> StoreKinds:
    """The registry of ``store``: ``registry``'s kinds plus those declared in the store's log.
    ``stamp()``, when the store has one, changes with every commit (``OnDisk.last_commit``)."""
    if isinstance(registry, StoreKinds):
        registry = registry.parent

    def source(after: int) -> Iterator[tuple[int, Any]]:
        for r in store.scan_kind(KIND_DECLARED, start=after + 1):
            yield r.seq, r.delta.payload
    return StoreKinds(registry, source, stamp)


def sync(registry: Registry) -> None:
    """Bring a store's registry up to its log before a batch is checked against it."""
    if isinstance(registry, StoreKinds):
        registry.sync()


def admit_declaration(kinds: Registry, base: Registry, decl: Any, index: int) -> Registry:
    """The registry a batch goes on with after a declaration at ``index`` (checked here)."""
    batch = kinds if isinstance(kinds, BatchKinds) else BatchKinds(base)
    try:
        batch.admit(decl)
    except ValidationError as e:
        raise ValidationError(e.field, e.rule, index=index) from None
    return batch


REGISTRY.declare(KIND_DECLARED, KindDeclared, owner=OWNER)


# -- the embedder of each vector space, declared in the log -------------------------------------
#
# The embedder of each vector space, declared in the log with the space's first vectors.
#
# A vector is float32 bytes in a named space; nothing in it says which model made it, and two
# models of the same dimension give vectors that look alike and mean nothing to each other. So the
# first vectors an embedder writes into a space come with an ``embedder_declared`` delta (braid
# ``embedders``), in the same batch: the space, the embedder's name, its dimension, a digest of
# its weights or configuration, and the spec that loads it again (``model2vec:DIR`` ...).
#
# The declaration is a delta like any other: covered by the chain, exported and imported, shipped
# to replicas, kept by an erasure of anything but itself. Rules:
#
# - The first declaration of a space stands (the log is a history of facts: a later one for the
#   same space, appended by hand, is ignored, as a kind's first declaration is).
# - Writers that embed (``braidlog.recall.append_embedded``, ``braidlog append --embed``, the MCP
#   server, LangGraph's ``BraidlogStore``) write the declaration with a space's first vectors, and
#   refuse vectors of another embedder (another digest or dimension) naming both; a query through
#   another embedder is refused the same way.
# - Vectors appended raw (a ``GenericDelta`` with its own ``vector``) are checked by dimension
#   only: the log cannot know who made them.
#
# This needs no numpy: anything that reads the log (the receipts, an audit) can ask
# ``recorded_embedder(store, space)`` (also ``braidlog.recorded_embedder``).

#: The engine's kind of an embedder declaration; owned by braidlog itself.
EMBEDDER_DECLARED = "embedder_declared"
#: The braid the declarations go to.
EMBEDDERS_BRAID = "embedders"


class EmbedderDeclared(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The payload of an ``embedder_declared`` delta: the embedder of one vector space.

    ``digest`` is a hex digest of the embedder's weights (a model) or configuration (the hashing
    embedder, an object that says nothing more of itself); ``spec`` loads it again where it can
    be loaded (``braidlog.recall.embedder(spec)``), empty for an object passed in Python."""

    space: str
    name: str
    dim: int
    digest: str
    spec: str = ""

    def __post_init__(self) -> None:  # a ValidationError, which msgspec.convert reports as its own
        for field in ("space", "name", "digest"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                raise ValidationError(field, "must be a non-empty string")
        if not isinstance(self.spec, str):
            raise ValidationError("spec", "must be a string")
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 1:
            raise ValidationError("dim", f"must be a whole number of at least 1, not {self.dim!r}")

    def __str__(self) -> str:
        return f"{self.name} ({self.dim} dimensions, digest {self.digest[:12]})"


REGISTRY.declare(EMBEDDER_DECLARED, EmbedderDeclared, owner=OWNER)


def recorded_embedders(source: Any) -> dict[str, tuple[int, EmbedderDeclared]]:
    """Every declared space of ``source`` (a Braid, a store or a view as of a seq): space ->
    (seq of its declaration, the declaration). The first declaration of a space stands; an
    erased one declares nothing."""
    log = _log_of(source)
    if not callable(getattr(log, "scan_kind", None)):
        raise ValidationError("source", f"must be a Braid, a store or a view, not {type(source).__name__}")
    out: dict[str, tuple[int, EmbedderDeclared]] = {}
    for rec in log.scan_kind(EMBEDDER_DECLARED):
        try:
            d = msgspec.convert(rec.delta.payload, EmbedderDeclared)
        except (msgspec.ValidationError, ValueError, TypeError):  # erased: its payload reads {}
            continue
        out.setdefault(d.space, (rec.seq, d))
    return out


def recorded_embedder(source: Any, space: str = "default") -> EmbedderDeclared | None:
    """The embedder declared for ``space`` in the log of ``source`` (a Braid, a store or a view
    as of a seq), or None if its vectors (if any) came with no declaration."""
    if not isinstance(space, str):
        raise ValidationError("space", f"must be a string, not {type(space).__name__}")
    got = recorded_embedders(source).get(space)
    return None if got is None else got[1]


def embedder_mismatch(recorded: EmbedderDeclared, name: str, dim: int, digest: str) -> str | None:
    """Why an embedder (name, dim, digest) is not the one ``recorded`` for its space, or None."""
    if recorded.dim == dim and recorded.digest == digest:
        return None
    how = f" (load it with {recorded.spec!r})" if recorded.spec else ""
    return (f"space {recorded.space!r} holds vectors of {recorded}{how}; {name} ({dim} dimensions, "
            f"digest {digest[:12]}) is another embedder: use the recorded one, or another space")


def embedder_declaration(space: str, name: str, dim: int, digest: str, spec: str = "") -> GenericDelta:
    """The ``embedder_declared`` delta of ``space``; ValidationError if a field is bad."""
    try:
        payload = msgspec.to_builtins(EmbedderDeclared(space, name, dim, digest, spec))
    except (ValueError, TypeError) as e:
        raise ValidationError("embedder", f"cannot be declared: {e}") from None
    return make_delta(EMBEDDERS_BRAID, EMBEDDER_DECLARED, payload, provenance="system", confidence=1.0)


def append_with_embedder(target: Any, deltas: Sequence[GenericDelta] | Callable[[], Sequence[GenericDelta]],
                    space: str, name: str, dim: int, digest: str, spec: str = "", *,
                    expected_version: int | Mapping[str, int] | None = None,
                    retries: int = 8) -> list[int]:
    """Append ``deltas`` (vectors of ``space`` made by the embedder name/dim/digest) to
    ``target`` (a Braid or a store), with the space's declaration first if it has none; return
    the seqs of ``deltas``. Refused (ValidationError, nothing written) when the space was
    declared with another embedder. The declaration is appended only if the head has not moved
    since the log was read (retried ``retries`` times), so two writers cannot both declare."""
    batch = list(deltas() if callable(deltas) else deltas)
    for _ in range(retries):
        head = _log_of(target).head().seq
        recorded = recorded_embedder(target, space)
        if recorded is not None:
            why = embedder_mismatch(recorded, name, dim, digest)
            if why is not None:
                raise ValidationError("embedder", why)
            return list(target.append_batch(batch, expected_version=expected_version))
        first = embedder_declaration(space, name, dim, digest, spec)
        try:
            seqs = target.append_batch([first, *batch], expected_version=expected_version,
                                       expected_head=head)
        except StaleHead:
            continue
        except ValidationError as e:  # say which of the caller's deltas, not of the batch
            if e.index is None or e.index == 0:
                raise
            raise ValidationError(e.field, e.rule, index=e.index - 1) from None
        return list(seqs[1:])
    raise StaleHead(f"the log kept moving while declaring the embedder of space {space!r}; try again")
