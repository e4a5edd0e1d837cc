"""Fields: topics whose fields keep every revision, after MemState (seed 003).

A topic is a named unit of state; each of its fields is a stack of revisions (value, valid_from,
provenance, why_changed, impact_expected), newest first. Writes append a revision; reads return
the newest one unless the caller asks for history. The view keeps at most ``max_field_history``
revisions per field (default 500, oldest trimmed first); the log keeps every one, so time travel
and ``log_history`` still reach the first. Field salience lives in [0, 10] (clamped); a topic's
salience is the mean of its fields' (1.0 with none). Salience bumps and archiving are explicit
commands that append deltas: no read writes.

An unknown ``field_type`` is stored as ``string``, as MemState's TopicField coerces it, and the
type asked for is kept in the revision (``requested_type``).

Rules: every delta of this projection's kinds obeys the checks in the "rules" section below
(``check``), which the boundary runs inside the write transaction for every delta entering a
store opened with this projection (``Braid.append``, ``append_batch``, ``execute``, the CLI).

Ids: a topic id is the caller's (1..60 characters, no "/"); a field's id is
``f"{topic_id}/{field_name}"`` (``field_id``); a revision's id is the id of the delta that
wrote it, and its ``valid_from`` is that delta's ``ts``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import date, datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

import braidlog
from braidlog import Context, Decider, GenericDelta, ValidationError, refuse

__all__ = [
    "FIELD_TYPES", "REVISION_PROVENANCES", "DEFAULT_MAX_FIELD_HISTORY", "DEFAULT_FIELD_SALIENCE",
    "MIN_SALIENCE", "MAX_SALIENCE", "EMPTY_TOPIC_SALIENCE",
    "FieldRevised", "FieldSalienceBumped", "TopicArchived", "TopicRestored", "stored_type",
    "check", "topic_known", "field_known", "field_type_never_changes", "archived_topic_is_read_only",
    "value_matches_field_type", "requested_type_is_stored_as_string",
    "Revision", "TopicField", "Topic", "State", "evolve",
    "ReviseField", "BumpSalience", "ArchiveTopic", "ArchiveTopics", "RestoreTopic", "decide",
    "FieldView", "TopicView", "field_id", "split_field_id", "clamp_salience", "check_value",
    "get_field", "get_topic", "list_topics", "topic_salience", "log_history",
    "fields_decider", "PROJECTIONS",
]

#: The seed's supported field types; "string" is the default when none is given.
FIELD_TYPES = ("string", "int", "float", "bool", "date", "datetime", "list", "json")
#: Where a revision came from (the seed's surfaces plus internal revision events).
REVISION_PROVENANCES = ("api", "ui", "llm", "mcp", "internal")
DEFAULT_MAX_FIELD_HISTORY = 500  # MemState's max_field_history
DEFAULT_FIELD_SALIENCE = 1.0
MIN_SALIENCE, MAX_SALIENCE = 0.0, 10.0
EMPTY_TOPIC_SALIENCE = 1.0
MAX_TOPIC_ID, MAX_FIELD_NAME = 60, 59  # a field id stays within the engine's 120-character ids

FieldType = Literal["string", "int", "float", "bool", "date", "datetime", "list", "json"]
RevisionProvenance = Literal["api", "ui", "llm", "mcp", "internal"]
TopicId = Annotated[str, Meta(min_length=1, max_length=MAX_TOPIC_ID, pattern="^[^/]+$")]
FieldName = Annotated[str, Meta(min_length=1, max_length=MAX_FIELD_NAME)]
Note = Annotated[str, Meta(min_length=1)]
Salience = Annotated[float, Meta(ge=MIN_SALIENCE, le=MAX_SALIENCE)]
RequestedType = Annotated[str, Meta(min_length=1, max_length=60)]


# NOTE: payload class names may be stored; never rename one, add a new one.

class FieldRevised(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A new revision of a field: it becomes the current value (revision id = delta id)."""

    topic_id: TopicId
    field: FieldName
    field_type: FieldType
    value: Any
    provenance: RevisionProvenance
    why_changed: Note | None = None
    impact_expected: Note | None = None
    salience: Salience | None = None
    ref_topic_id: TopicId | None = None
    requested_type: RequestedType | None = None  # the unknown type asked for; field_type is "string"


class FieldSalienceBumped(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A field's salience moved by ``by`` (the result is clamped to [0, 10])."""

    topic_id: TopicId
    field: FieldName
    by: float


class TopicArchived(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A topic was archived (forgotten): queries leave it out unless asked for."""

    topic_id: TopicId
    salience: float
    below: float | None = None
    reason: Note | None = None


class TopicRestored(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """An archived topic is live again."""

    topic_id: TopicId
    reason: Note | None = None


def field_id(topic_id: str, field: str) -> str:
    """The entity id of a field: ``"<topic_id>/<field>"``."""
    return f"{topic_id}/{field}"


def split_field_id(fid: str) -> tuple[str, str]:
    """``(topic_id, field)`` from a field id (topic ids never contain "/")."""
    topic_id, sep, field = fid.partition("/")
    if not sep or not topic_id or not field:
        raise ValidationError("field_id", f"{fid!r} must look like '<topic_id>/<field>'")
    return topic_id, field


def _refers_field(p: Any) -> list[str]:
    return [p.topic_id, field_id(p.topic_id, p.field)]


def _refers_topic(p: Any) -> list[str]:
    return [p.topic_id]


braidlog.declare("field_revised", FieldRevised, owner="fields", refers=_refers_field)
braidlog.declare("field_salience_bumped", FieldSalienceBumped, owner="fields", refers=_refers_field)
braidlog.declare("topic_archived", TopicArchived, owner="fields", refers=_refers_topic)
braidlog.declare("topic_restored", TopicRestored, owner="fields", refers=_refers_topic)

KINDS = frozenset({"field_revised", "field_salience_bumped", "topic_archived", "topic_restored"})
#: kind -> read(delta): its payload as the kind's Struct, as braidlog.typed gives it
_READ = {kind: braidlog.REGISTRY[kind].reader() for kind in KINDS}


# ---------------------------------------------------------------------------------------- state

class Revision(Struct):
    """One entry of a field's history (the seed's FieldHistoryEntry)."""

    id: str
    value: Any
    valid_from: datetime
    provenance: str
    why_changed: str | None = None
    impact_expected: str | None = None
    requested_type: str | None = None  # the field_type asked for when it was not a MemState type


# gc=False: a state is a tree (no record refers back to what holds it), so no record can be in
# a reference cycle, and the cyclic collector need not track the many a replay allocates.
class TopicField(Struct, gc=False):
    """A field: its type, salience and revisions (stored oldest first, shown newest first)."""

    name: str
    field_type: str
    salience: float = DEFAULT_FIELD_SALIENCE
    ref_topic_id: str | None = None
    revisions: list[Revision] = []
    revision_count: int = 0


class Topic(Struct, kw_only=True, gc=False):
    """A topic: its fields by name and whether it is archived."""

    topic_id: str
    fields: dict[str, TopicField] = {}
    created_at: datetime
    updated_at: datetime
    archived: bool = False
    archived_at: datetime | None = None


class State(Struct, kw_only=True):
    """Every topic by id."""

    topics: dict[str, Topic] = {}


def clamp_salience(value: float) -> float:
    """``value`` clamped to [0, 10]."""
    return min(MAX_SALIENCE, max(MIN_SALIENCE, float(value)))


def _evolver(max_field_history: int) -> Callable[[State, GenericDelta], State]:
    def evolve(state: State, delta: GenericDelta) -> State:
        """Apply one fields delta (in place); other kinds leave the state as it is."""
        kind = delta.kind
        read = _READ.get(kind)
        if read is None:
            return state
        p = read(delta)
        topic = state.topics.get(p.topic_id)
        if kind == "field_revised":
            if topic is None:
                topic = state.topics[p.topic_id] = Topic(
                    topic_id=p.topic_id, created_at=delta.ts, updated_at=delta.ts)
            f = topic.fields.get(p.field)
            if f is None:
                f = topic.fields[p.field] = TopicField(p.field, p.field_type)  # name, field_type
            f.field_type = p.field_type
            if p.salience is not None:
                f.salience = clamp_salience(p.salience)
            if p.ref_topic_id is not None:
                f.ref_topic_id = p.ref_topic_id
            # positional, in field order (id, value, valid_from, provenance, why_changed,
            # impact_expected): msgspec takes arguments that way faster than it matches keywords
            f.revisions.append(Revision(delta.id, p.value, delta.ts, p.provenance, p.why_changed,
                                        p.impact_expected, p.requested_type))
            f.revision_count += 1
            if len(f.revisions) > max_field_history:
                del f.revisions[: len(f.revisions) - max_field_history]
            topic.updated_at = delta.ts
        elif topic is None:
            return state
        elif kind == "field_salience_bumped":
            f = topic.fields.get(p.field)
            if f is not None and math.isfinite(p.by):
                f.salience = clamp_salience(f.salience + p.by)
        elif kind == "topic_archived":
            topic.archived, topic.archived_at = True, delta.ts
        else:  # topic_restored
            topic.archived, topic.archived_at = False, None
        return state

    return evolve


evolve = _evolver(DEFAULT_MAX_FIELD_HISTORY)


# ------------------------------------------------------------------------------------- commands

class ReviseField(braidlog.Command, frozen=True, kw_only=True):
    """Write a new value to a field; the field and its topic are created on first write.

    ``field_type`` defaults to the field's type, or "string" for a new field; a type MemState
    does not know is stored as "string" and kept as the revision's ``requested_type``. A
    field's (stored) type never changes. ``salience`` (optional) sets the field's salience, clamped to [0, 10].
    """

    topic_id: str
    field: str
    value: Any
    field_type: str | None = None
    provenance: str = "api"
    why_changed: str | None = None
    impact_expected: str | None = None
    salience: float | None = None
    ref_topic_id: str | None = None


class BumpSalience(braidlog.Command, frozen=True, kw_only=True):
    """Move a field's salience by ``by`` (negative to attenuate); the result is clamped."""

    topic_id: str
    field: str
    by: float


class ArchiveTopic(braidlog.Command, frozen=True, kw_only=True):
    """Archive (forget) one topic."""

    topic_id: str
    reason: str | None = None


class ArchiveTopics(braidlog.Command, frozen=True, kw_only=True):
    """Archive every live topic whose salience is strictly below ``below``."""

    below: float
    reason: str | None = None


class RestoreTopic(braidlog.Command, frozen=True, kw_only=True):
    """Bring an archived topic back into queries."""

    topic_id: str
    reason: str | None = None


def _check_topic_id(value: Any, name: str = "topic_id") -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_TOPIC_ID or "/" in value:
        raise ValidationError(name, f"must be a string of 1..{MAX_TOPIC_ID} characters without '/' "
                                    f"(got {value!r})")
    return value


def _check_field_name(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_FIELD_NAME:
        raise ValidationError("field", f"must be a string of 1..{MAX_FIELD_NAME} characters (got {value!r})")
    return value


def _check_note(value: Any, name: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValidationError(name, f"must be a non-empty string or None (got {value!r})")
    return value


def _check_number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValidationError(name, f"must be a finite number (got {value!r})")
    return float(value)


def _json_value(value: Any, path: str) -> Any:
    """``value`` as plain JSON (tuples become lists); ValidationError at the first non-JSON part."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(path, f"must be finite JSON (got {value!r})")
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValidationError(path, f"must be JSON: object keys are strings (got {k!r})")
            out[k] = _json_value(v, f"{path}.{k}")
        return out
    raise ValidationError(path, f"must be JSON (got {type(value).__name__})")


def check_value(field_type: str, value: Any) -> Any:
    """``value`` checked against ``field_type`` and normalised for storage, or ValidationError.

    int excludes bool; float accepts ints (stored as float) and refuses NaN/inf; date and
    datetime are strings by convention (not parsed), and ``date``/``datetime`` objects are
    stored as ISO strings; list is a JSON array; json is any JSON value.
    """
    if field_type not in FIELD_TYPES:
        raise ValidationError("field_type", f"unknown type {field_type!r}; use one of {', '.join(FIELD_TYPES)} "
                                            "(ReviseField stores any other as 'string', see stored_type)")

    def wrong(expected: str) -> ValidationError:
        return ValidationError("value", f"must be {expected} for field_type {field_type!r} "
                                        f"(got {type(value).__name__} {value!r})")

    if field_type == "string":
        if not isinstance(value, str):
            raise wrong("a string")
        return value
    if field_type == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise wrong("an int")
        return value
    if field_type == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise wrong("a finite number")
        return float(value)
    if field_type == "bool":
        if not isinstance(value, bool):
            raise wrong("true or false")
        return value
    if field_type == "date":
        if isinstance(value, date) and not isinstance(value, datetime):
            return value.isoformat()
        if not isinstance(value, str):
            raise wrong("a date string (or a datetime.date)")
        return value
    if field_type == "datetime":
        if isinstance(value, datetime):
            return value.isoformat()
        if not isinstance(value, str):
            raise wrong("a date-time string (or a datetime.datetime)")
        return value
    if field_type == "list":
        if not isinstance(value, (list, tuple)):
            raise wrong("a list")
        return _json_value(value, "value")
    return _json_value(value, "value")


def stored_type(field_type: Any) -> tuple[str, str | None]:
    """``(the type stored, the type requested when it differs)``: a MemState type is stored as
    asked; any other string is stored as "string" (MemState's test_field_type_coercion) and
    kept as the requested type."""
    if not isinstance(field_type, str) or not field_type or len(field_type) > 60:
        raise ValidationError("field_type", f"must be a type name of 1..60 characters (got {field_type!r}); "
                                            f"MemState's types are {', '.join(FIELD_TYPES)}")
    if field_type in FIELD_TYPES:
        return field_type, None
    return "string", field_type


def _same_json(a: Any, b: Any) -> bool:
    enc = msgspec.json.encode
    return enc(a) == enc(b)


# ---------------------------------------------------------------------------------------- rules
# Each rule is one function, named after it; ``check`` runs the rules of a delta's kind against
# the state of the log it would enter. A refusal's message starts with the rule's name.

def topic_known(state: State, topic_id: str) -> Topic:
    """A salience bump, an archive or a restore names a topic some revision created."""
    topic = state.topics.get(topic_id)
    if topic is None:
        raise refuse("topic_known", f"unknown topic {topic_id!r}; write a field to create it")
    return topic


def field_known(state: State, topic_id: str, name: str) -> TopicField:
    """A salience bump names a field of a known topic."""
    f = topic_known(state, topic_id).fields.get(name)
    if f is None:
        raise refuse("field_known", f"topic {topic_id!r} has no field {name!r}")
    return f


def field_type_never_changes(state: State, p: FieldRevised) -> None:
    """A field keeps the (stored) type of its first revision."""
    topic = state.topics.get(p.topic_id)
    f = topic.fields.get(p.field) if topic is not None else None
    if f is not None and f.field_type != p.field_type:
        raise refuse("field_type_never_changes", f"field {field_id(p.topic_id, p.field)!r} has type "
                       f"{f.field_type!r}, not {p.field_type!r}; write another field")


def archived_topic_is_read_only(state: State, topic_id: str) -> None:
    """No revision is written to an archived topic until it is restored."""
    topic = state.topics.get(topic_id)
    if topic is not None and topic.archived:
        raise refuse("archived_topic_is_read_only", f"topic {topic_id!r} is archived; restore it with "
                       "RestoreTopic before writing")


def value_matches_field_type(p: FieldRevised) -> None:
    """A revision's value is a value of its field type (seed 003, supported types)."""
    try:
        check_value(p.field_type, p.value)
    except ValidationError as e:
        raise ValidationError("payload.value", f"value_matches_field_type: {e.rule}") from None


def requested_type_is_stored_as_string(p: FieldRevised) -> None:
    """A requested type is one MemState does not know, and the field is then a string field."""
    if p.requested_type is None:
        return
    if p.requested_type in FIELD_TYPES or p.field_type != "string":
        raise ValidationError("payload.requested_type",
                              f"requested_type_is_stored_as_string: {p.requested_type!r} with field_type "
                              f"{p.field_type!r}; a requested type is kept only when it is not one of "
                              f"{', '.join(FIELD_TYPES)}, and the field is then stored as 'string'")


def _check_revised(state: State, p: FieldRevised) -> None:
    value_matches_field_type(p)
    requested_type_is_stored_as_string(p)
    archived_topic_is_read_only(state, p.topic_id)
    field_type_never_changes(state, p)


_RULES = {
    "field_revised": _check_revised,
    "field_salience_bumped": lambda state, p: field_known(state, p.topic_id, p.field),
    "topic_archived": lambda state, p: topic_known(state, p.topic_id),
    "topic_restored": lambda state, p: topic_known(state, p.topic_id),
}


def check(state: State, delta: GenericDelta, at: Any = None) -> None:
    """Every rule of ``delta``'s kind against ``state``; nothing for other kinds. ``at`` (where
    the delta stands in the log) is the boundary's; no rule here needs it."""
    rules = _RULES.get(delta.kind)
    if rules is None:
        return
    try:
        p = _READ[delta.kind](delta)
    except msgspec.ValidationError as e:  # the engine checks the schema first; a direct call may not
        raise ValidationError("payload", str(e), where=f"delta {delta.id}") from None
    rules(state, p)


# ------------------------------------------------------------------------------------- decide

def decide(command: Any, state: State, ctx: Context) -> list[GenericDelta]:
    """The deltas that carry out ``command`` against ``state``; [] when already done. Their
    rules are ``check``'s, which the boundary runs on every delta entering the store."""
    if isinstance(command, ReviseField):
        return _revise(command, state, ctx)
    if isinstance(command, BumpSalience):
        topic_id, name = _check_topic_id(command.topic_id), _check_field_name(command.field)
        by = _check_number(command.by, "by")
        f = field_known(state, topic_id, name)
        if clamp_salience(f.salience + by) == f.salience:
            return []
        return [ctx.delta("field_salience_bumped", {"topic_id": topic_id, "field": name, "by": by})]
    if isinstance(command, ArchiveTopic):
        topic = topic_known(state, _check_topic_id(command.topic_id))
        if topic.archived:
            return []
        return [_archived(ctx, topic, None, _check_note(command.reason, "reason"))]
    if isinstance(command, ArchiveTopics):
        below = _check_number(command.below, "below")
        reason = _check_note(command.reason, "reason")
        return [_archived(ctx, t, below, reason) for t in state.topics.values()
                if not t.archived and _salience(t) < below]
    if isinstance(command, RestoreTopic):
        topic = topic_known(state, _check_topic_id(command.topic_id))
        if not topic.archived:
            return []
        payload: dict[str, Any] = {"topic_id": topic.topic_id}
        if command.reason is not None:
            payload["reason"] = _check_note(command.reason, "reason")
        return [ctx.delta("topic_restored", payload)]
    raise ValidationError("command", f"fields cannot decide a {type(command).__name__}; "
                                     "use ReviseField, BumpSalience, ArchiveTopic(s) or RestoreTopic")


def _revise(c: ReviseField, state: State, ctx: Context) -> list[GenericDelta]:
    topic_id, name = _check_topic_id(c.topic_id), _check_field_name(c.field)
    if c.provenance not in REVISION_PROVENANCES:
        raise ValidationError("provenance", f"must be one of {', '.join(REVISION_PROVENANCES)} "
                                            f"(got {c.provenance!r})")
    why = _check_note(c.why_changed, "why_changed")
    impact = _check_note(c.impact_expected, "impact_expected")
    salience = None if c.salience is None else clamp_salience(_check_number(c.salience, "salience"))
    ref = None if c.ref_topic_id is None else _check_topic_id(c.ref_topic_id, "ref_topic_id")
    topic = state.topics.get(topic_id)
    f = topic.fields.get(name) if topic is not None else None
    if c.field_type is not None:
        field_type, requested = stored_type(c.field_type)
    else:
        field_type, requested = (f.field_type if f else "string"), None
    value = _value(field_type, requested, c.value)
    archived_topic_is_read_only(state, topic_id)
    if f is not None and field_type == f.field_type:
        cur = f.revisions[-1]
        if (_same_json(cur.value, value) and cur.provenance == c.provenance
                and cur.why_changed == why and cur.impact_expected == impact
                and cur.requested_type == requested
                and (salience is None or salience == f.salience)
                and (ref is None or ref == f.ref_topic_id)):
            return []
    payload: dict[str, Any] = {"topic_id": topic_id, "field": name, "field_type": field_type,
                               "value": value, "provenance": c.provenance}
    for key, v in (("why_changed", why), ("impact_expected", impact), ("salience", salience),
                   ("ref_topic_id", ref), ("requested_type", requested)):
        if v is not None:
            payload[key] = v
    return [ctx.delta("field_revised", payload)]


def _value(field_type: str, requested: str | None, value: Any) -> Any:
    """``check_value``, saying so when a requested type was stored as "string"."""
    if requested is not None and not isinstance(value, str):
        raise ValidationError("value", f"must be a string: field_type {requested!r} is not a MemState type, "
                                       f"so the field is stored as 'string' (got {type(value).__name__} "
                                       f"{value!r}); use one of {', '.join(FIELD_TYPES)} for other values")
    return check_value(field_type, value)


def _archived(ctx: Context, topic: Topic, below: float | None, reason: str | None) -> GenericDelta:
    payload: dict[str, Any] = {"topic_id": topic.topic_id, "salience": _salience(topic)}
    if below is not None:
        payload["below"] = below
    if reason is not None:
        payload["reason"] = reason
    return ctx.delta("topic_archived", payload)


# -------------------------------------------------------------------------------------- queries

class FieldView(Struct, frozen=True, kw_only=True):
    """A field as a read returns it: the current revision, and the history only when asked."""

    topic_id: str
    field: str
    field_type: str
    salience: float
    ref_topic_id: str | None
    value: Any
    revision_id: str
    valid_from: datetime
    provenance: str
    why_changed: str | None
    impact_expected: str | None
    revision_count: int
    history: tuple[Revision, ...] | None = None
    requested_type: str | None = None


class TopicView(Struct, frozen=True, kw_only=True):
    """A topic as a read returns it: its fields' views and its salience."""

    topic_id: str
    salience: float
    archived: bool
    created_at: datetime
    updated_at: datetime
    fields: dict[str, FieldView]


def _salience(topic: Topic) -> float:
    if not topic.fields:
        return EMPTY_TOPIC_SALIENCE
    return sum(f.salience for f in topic.fields.values()) / len(topic.fields)


def _view(topic: Topic, f: TopicField, history: bool, limit: int | None) -> FieldView:
    cur = f.revisions[-1]
    hist = None
    if history:
        newest_first = f.revisions[::-1]
        hist = tuple(newest_first if limit is None else newest_first[:limit])
    return FieldView(
        topic_id=topic.topic_id, field=f.name, field_type=f.field_type, salience=f.salience,
        ref_topic_id=f.ref_topic_id, value=cur.value, revision_id=cur.id, valid_from=cur.valid_from,
        provenance=cur.provenance, why_changed=cur.why_changed, impact_expected=cur.impact_expected,
        revision_count=f.revision_count, history=hist, requested_type=cur.requested_type)


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValidationError("limit", f"must be a non-negative int or None (got {limit!r})")


def _visible(state: State, topic_id: str, include_archived: bool) -> Topic | None:
    topic = state.topics.get(topic_id)
    if topic is None or (topic.archived and not include_archived):
        return None
    return topic


def get_field(state: State, topic_id: str, field: str, *, history: bool = False,
              limit: int | None = None, include_archived: bool = False) -> FieldView | None:
    """A field's current value; with ``history=True`` also its revisions, newest first.

    ``limit`` shortens the history further than the projection's cap. None when the topic or
    field is unknown, or the topic is archived and ``include_archived`` is False.
    """
    _check_limit(limit)
    topic = _visible(state, topic_id, include_archived)
    if topic is None:
        return None
    f = topic.fields.get(field)
    return None if f is None else _view(topic, f, history, limit)


def get_topic(state: State, topic_id: str, *, history: bool = False, limit: int | None = None,
              include_archived: bool = False) -> TopicView | None:
    """A topic with the current value of every field (and their histories when asked)."""
    _check_limit(limit)
    topic = _visible(state, topic_id, include_archived)
    if topic is None:
        return None
    return TopicView(
        topic_id=topic.topic_id, salience=_salience(topic), archived=topic.archived,
        created_at=topic.created_at, updated_at=topic.updated_at,
        fields={n: _view(topic, f, history, limit) for n, f in topic.fields.items()})


def list_topics(state: State, *, include_archived: bool = False,
                min_salience: float | None = None) -> list[TopicView]:
    """Topics (archived ones only when asked), most salient first, then by id."""
    views = [get_topic(state, t, include_archived=include_archived) for t in state.topics]
    out = [v for v in views if v is not None and (min_salience is None or v.salience >= min_salience)]
    return sorted(out, key=lambda v: (-v.salience, v.topic_id))


def topic_salience(state: State, topic_id: str) -> float | None:
    """The mean of a topic's field saliences (1.0 with no fields); None for an unknown topic."""
    topic = state.topics.get(topic_id)
    return None if topic is None else _salience(topic)


def log_history(log: Any, topic_id: str, field: str, *, stop: int | None = None) -> list[Revision]:
    """Every revision of a field ever logged (before ``stop``), newest first, past any cap."""
    out = []
    for record in log.scan_refs(field_id(topic_id, field), stop=stop):
        d = record.delta
        if d.kind != "field_revised":
            continue
        p = braidlog.typed(d)
        if p.topic_id == topic_id and p.field == field:
            out.append(Revision(id=d.id, value=p.value, valid_from=d.ts, provenance=p.provenance,
                                why_changed=p.why_changed, impact_expected=p.impact_expected,
                                requested_type=p.requested_type))
    return out[::-1]


def fields_decider(max_field_history: int = DEFAULT_MAX_FIELD_HISTORY, *,
                   name: str = "fields") -> Decider:
    """The fields Decider; a view keeps at most ``max_field_history`` revisions per field.

    A projection with another cap must have another ``name``: checkpoints are kept per name.
    """
    if isinstance(max_field_history, bool) or not isinstance(max_field_history, int) or max_field_history < 1:
        raise ValidationError("max_field_history", f"must be a positive int (got {max_field_history!r})")
    return Decider(name=name, version=2, initial=State(),
                   evolve=evolve if max_field_history == DEFAULT_MAX_FIELD_HISTORY
                   else _evolver(max_field_history),
                   kinds=KINDS, state_type=State, local=True, decide=decide, check=check)


def entity(state: State, entity_id: str) -> TopicView | FieldView | None:
    """What audit's history and explain show for an id: a topic, or a field ``topic/field``
    (current value, archived ones included), None when this state does not hold it."""
    topic_id, _, field = entity_id.partition("/")
    if field:
        return get_field(state, topic_id, field, include_archived=True)
    return get_topic(state, topic_id, include_archived=True)


PROJECTIONS = [fields_decider()]
