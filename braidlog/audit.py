"""Auditing past states: the history of an entity, the diff between two points, and why.

Everything here is read-only and generic: it knows the envelope and the projections' states,
nothing of decisions or beads.

- ``history(braid_or_view, entity_id)``: every delta that created or changed the entity, oldest
  first, found through the refers-to index (``scan_refs``) and never by scanning the log, each
  with its seq, chain hash, time, provenance, confidence, the reasons its payload gives, and the
  entity's state in every projection after the step.
- ``diff(braid, a, b)``: per projection, the entities added, changed (field by field, old -> new),
  superseded and removed between two points, and the deltas responsible.
- ``explain(braid, entity_id, at=None)``: the value as of a point and the chain of deltas that led
  to it, as text a person reads.

**The entity protocol.** A projection's module (the module its ``evolve`` is defined in) may
define ``entity(state, entity_id) -> value | None``: the entity's value in one of its states, or
None when the state does not hold it. Without one, an entity is found structurally: a state that
is a Struct holds collections (its dict attributes, keyed by entity id); a state that is a dict is
itself keyed by entity id; failing that, the first dict keys equal to the id at any depth (up to
``SEARCH_DEPTH``) are the entity. ``entities={projection name: fn}`` overrides both.
"""

from __future__ import annotations

import bisect
import difflib
import heapq
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

import msgspec
from msgspec import Struct

from .delta import GenericDelta, Provenance
from .errors import ValidationError
from .kinds import REGISTRY
from .projection import Projection
from .replay import fold, load_checkpoint
from .store import Record

__all__ = [
    "REASON_KEYS", "RETIRED", "SEARCH_DEPTH",
    "Change", "DeltaRef", "Step", "History", "EntityChange", "ProjectionDiff", "Diff",
    "history", "diff", "explain", "reasons", "changes", "entity_value", "format_history",
    "format_explain", "format_diff", "entity_at", "LOCAL_FOLD_MAX", "entity_braids", "braid_records",
]

#: Payload keys whose text says why a delta was written (also any key ending in ``_<one of
#: these>``, such as ``resolution_rationale``), reported in payload order.
REASON_KEYS = ("why_changed", "rationale", "reason", "why", "justification", "explanation")

#: Values of a ``status``-like field (or keys that become set/true) meaning "no longer in force".
RETIRED = frozenset({"superseded", "deprecated", "archived", "rejected", "falsified", "discarded",
                     "expired", "aborted", "revoked", "retracted", "deleted", "closed"})
_STATUS_FIELDS = ("status", "state", "lifecycle")
_RETIRED_FLAGS = ("superseded_by", "archived", "deprecated", "retracted", "revoked", "deleted")

#: How deep the structural entity search looks into a state.
SEARCH_DEPTH = 4

EntityFn = Callable[[Any, str], Any]

_MISSING = object()


# ------------------------------------------------------------------------------------ results

class Change(Struct, frozen=True):
    """One field that differs: ``op`` is added, removed or changed; ``path`` is dotted."""

    path: str
    op: str
    old: Any = None
    new: Any = None


class DeltaRef(Struct, frozen=True, omit_defaults=True):
    """A delta as an audit reports it: where it is, who wrote it, how sure, and why."""

    seq: int
    hash: str
    id: str
    braid_id: str
    kind: str
    ts: datetime
    provenance: Provenance
    confidence: float
    reasons: dict[str, str] = {}

    @classmethod
    def of(cls, rec: Record) -> DeltaRef:
        d = rec.delta
        return cls(seq=rec.seq, hash=rec.hash.hex(), id=d.id, braid_id=d.braid_id, kind=d.kind,
                   ts=d.ts, provenance=d.provenance, confidence=d.confidence,
                   reasons=reasons(d.payload))


class Step(Struct, frozen=True, omit_defaults=True):
    """One delta of an entity's history and the entity's state in each projection after it."""

    seq: int
    hash: str
    delta: GenericDelta
    reasons: dict[str, str] = {}
    states: dict[str, Any] = {}
    changes: dict[str, list[Change]] = {}


class History(Struct, frozen=True):
    """Every delta that created or changed ``entity_id`` up to ``seq``, oldest first."""

    entity_id: str
    seq: int
    head: str
    ts: datetime | None  # the time of the delta at seq (None for seq 0)
    steps: list[Step]
    current: dict[str, Any]

    def __len__(self) -> int:
        return len(self.steps)


class EntityChange(Struct, frozen=True, omit_defaults=True):
    """How one entity of a collection differs between two points."""

    collection: str
    key: str
    status: str  # added | changed | superseded | removed
    changes: list[Change] = []
    old: Any = None
    new: Any = None
    deltas: list[DeltaRef] = []


class ProjectionDiff(Struct, frozen=True):
    """One projection's differences; ``fields`` are state-level values outside collections."""

    name: str
    added: list[EntityChange]
    changed: list[EntityChange]
    superseded: list[EntityChange]
    removed: list[EntityChange]
    fields: list[Change]
    deltas: list[DeltaRef]

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.superseded or self.removed or self.fields)


class Diff(Struct, frozen=True):
    """What changed between seq ``a`` and seq ``b`` (a <= b), per projection."""

    a: int
    b: int
    a_head: str
    b_head: str
    projections: dict[str, ProjectionDiff]


# ------------------------------------------------------------------------------------ reasons

def reasons(payload: Mapping[str, Any], *, _path: str = "", _depth: int = 0) -> dict[str, str]:
    """The reasons a payload gives, by dotted key: rationale, why_changed, reason …, and any
    resolution intent (an object with ``resolution_type``), e.g. ``{"intent.resolution_type":
    "supersede", "intent.rationale": "…"}``."""
    out: dict[str, str] = {}
    if "resolution_type" in payload and isinstance(payload["resolution_type"], str):
        targets = payload.get("target_decision_ids") or payload.get("targets") or ()
        text = payload["resolution_type"]
        if isinstance(targets, (list, tuple)) and targets:
            text += " " + ", ".join(str(t) for t in targets)
        out[_path + "resolution_type"] = text
    for key, value in payload.items():
        if isinstance(key, str) and _is_reason(key) and isinstance(value, str) and value.strip():
            out[_path + key] = value
    if _depth < 2:
        for key, value in payload.items():
            if isinstance(value, Mapping):
                out.update(reasons(value, _path=f"{_path}{key}.", _depth=_depth + 1))
    return out


def _is_reason(key: str) -> bool:
    """A reason key: one of REASON_KEYS, or one ending in ``_<reason key>`` (resolution_rationale)."""
    return key in REASON_KEYS or any(key.endswith("_" + k) for k in REASON_KEYS)


# -------------------------------------------------------------------------- structural diffs

def _builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)


def _key(value: Any) -> bytes:
    return msgspec.json.encode(value, order="deterministic")


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def changes(old: Any, new: Any, path: str = "") -> list[Change]:
    """Field-by-field differences between two builtin values (dicts by key, lists by a minimal
    edit script, anything else as a whole)."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[Change] = []
        for k, v in old.items():
            if k not in new:
                out.append(Change(_join(path, k), "removed", old=v))
            else:
                out.extend(changes(v, new[k], _join(path, k)))
        out.extend(Change(_join(path, k), "added", new=v) for k, v in new.items() if k not in old)
        return out
    if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)):
        return _list_changes(list(old), list(new), path)
    return [Change(path, "changed", old=old, new=new)]


def _list_changes(old: list[Any], new: list[Any], path: str) -> list[Change]:
    matcher = difflib.SequenceMatcher(None, [_key(v) for v in old], [_key(v) for v in new],
                                      autojunk=False)
    out: list[Change] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        if op == "replace" and i2 - i1 == j2 - j1:
            for i, j in zip(range(i1, i2), range(j1, j2), strict=False):
                out.extend(changes(old[i], new[j], f"{path}[{j}]"))
            continue
        out.extend(Change(f"{path}[{i}]", "removed", old=old[i]) for i in range(i1, i2))
        out.extend(Change(f"{path}[{j}]", "added", new=new[j]) for j in range(j1, j2))
    return out


def _retired(cs: Iterable[Change]) -> bool:
    for c in cs:
        leaf = c.path.rsplit(".", 1)[-1]
        if leaf in _STATUS_FIELDS and isinstance(c.new, str) and c.new.lower() in RETIRED:
            return True
        if leaf in _RETIRED_FLAGS and c.new not in (None, False, "", [], {}) and \
                c.old in (None, False, "", [], {}):
            return True
    return False


# ----------------------------------------------------------------------------- the entities

def _entity_hook(projection: Projection, entities: Mapping[str, EntityFn] | None) -> EntityFn | None:
    if entities and projection.name in entities:
        return entities[projection.name]
    module = sys.modules.get(getattr(projection.evolve, "__module__", "") or "")
    fn = getattr(module, "entity", None)
    return fn if callable(fn) else None


def entity_value(projection: Projection, state: Any, entity_id: str,
                 entities: Mapping[str, EntityFn] | None = None) -> Any:
    """The entity's value (as builtins) in one state of ``projection``; ``None`` if absent."""
    found = _entity(projection, state, entity_id, entities)
    return None if found is _MISSING else found


def _entity(projection: Projection, state: Any, entity_id: str,
            entities: Mapping[str, EntityFn] | None) -> Any:
    hook = _entity_hook(projection, entities)
    if hook is not None:
        value = hook(state, entity_id)
        return _MISSING if value is None else _builtins(value)
    if isinstance(state, dict):
        return _builtins(state[entity_id]) if entity_id in state else _search(state, entity_id)
    if isinstance(state, Struct):
        found = {name: _builtins(coll[entity_id]) for name in state.__struct_fields__
                 if isinstance(coll := getattr(state, name), dict) and entity_id in coll}
        if found:
            return found
    return _search(state, entity_id)


def _search(state: Any, entity_id: str) -> Any:
    """Values of dict keys equal to ``entity_id`` anywhere in the state, by path."""
    found: dict[str, Any] = {}

    def walk(value: Any, path: str, depth: int) -> None:
        if depth > SEARCH_DEPTH or len(found) >= 16:
            return
        if isinstance(value, dict):
            for k, v in value.items():
                if k == entity_id:
                    found[_join(path, k)] = v
                else:
                    walk(v, _join(path, k), depth + 1)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]", depth + 1)

    walk(_builtins(state), "", 0)
    return found if found else _MISSING


def _walk_states(braid: Any, projections: list[Projection], seqs: Iterable[int]
                 ) -> Iterator[tuple[int, list[Any]]]:
    """(seq, states) for each seq in ascending order: every projection resumes from its nearest
    checkpoint when one lies ahead of it, then all fold forward together in one pass.

    The states are the ones being folded: read them before asking for the next seq.
    """
    store = braid.log
    ckpts = [store.checkpoint_seqs(p.name, p.version) for p in projections]
    states = [p.start() for p in projections]
    where = [0 for _ in projections]
    for seq in seqs:
        for i, p in enumerate(projections):
            k = bisect.bisect_right(ckpts[i], seq)
            if k and ckpts[i][k - 1] > where[i]:
                found = load_checkpoint(store, p, seq)
                if found is not None and found[0] > where[i]:
                    where[i], states[i] = found
        fold(store, projections, states, where, seq)
        yield seq, states


# --------------------------------------------------------------------------------- history

def _source(braid_or_view: Any) -> tuple[Any, Any, int]:
    """(braid, log to read, seq) for a Braid or a View."""
    view_braid = getattr(braid_or_view, "braid", None)
    if view_braid is not None and hasattr(braid_or_view, "seq"):
        return view_braid, braid_or_view.log, braid_or_view.seq
    if hasattr(braid_or_view, "resolve") and hasattr(braid_or_view, "log"):
        return braid_or_view, braid_or_view.log, braid_or_view.log.head().seq
    raise ValidationError("braid_or_view",
                          f"expected a Braid or a View, got {type(braid_or_view).__name__}")


def _records(log: Any, entity_id: str, seq: int, after: int = 0,
             reads: Callable[[Any], bool] | None = None) -> list[Record]:
    """The deltas in (after, seq] that refer to ``entity_id`` (those ``reads`` admits), and the
    delta whose id it is, in seq order: through the refers-to index, never a scan."""
    own = log.get(entity_id)  # a delta id is found in any case; refer to it as it is stored
    key = own.delta.id if own is not None else entity_id
    recs = [r for r in log.scan_refs(key, after + 1, seq + 1) if reads is None or reads(r.delta)]
    if own is not None and after < own.seq <= seq and all(r.seq != own.seq for r in recs):
        bisect.insort(recs, own, key=lambda r: r.seq)
    return recs


def entity_braids(log: Any, entity_id: str) -> list[str]:
    """The braids an entity id names when no delta refers to it: those whose id ends with
    ``:<entity id>`` (``<namespace>:<entity>``, as an eventsourcing aggregate's events and
    snapshots are kept: ``<app>_events:<originator id>``). A walk over the braid index's keys,
    not the log; [] where the store cannot list its braids."""
    if not isinstance(entity_id, str):
        raise ValidationError("entity_id", f"must be a str (an entity id), not {type(entity_id).__name__}")
    counts = getattr(log, "counts", None)
    if counts is None or not entity_id:
        return []
    suffix = ":" + entity_id
    return [b for b in counts("braid") if b.endswith(suffix)]


def braid_records(log: Any, entity_id: str, start: int = 1, stop: int | None = None, *,
                  reverse: bool = False) -> list[Record]:
    """The deltas of ``entity_braids(log, entity_id)`` in [start, stop), in seq order."""
    braids = entity_braids(log, entity_id)
    return list(heapq.merge(*(log.scan_braid(b, start, stop, reverse=reverse) for b in braids),
                            key=lambda r: r.seq, reverse=reverse))


def history(braid_or_view: Any, entity_id: str, *, states: bool = True,
            projections: Iterable[str] | None = None,
            entities: Mapping[str, EntityFn] | None = None) -> History:
    """Every delta that created or changed ``entity_id``, oldest first, up to the view's seq
    (the head for a Braid), with the entity's state in each projection after each step.

    Deltas come from the refers-to index (and the delta whose id is ``entity_id``, if any);
    when none does, from the braids the id names (``entity_braids``).
    ``states=False`` skips the projection states; ``projections`` limits them to those names.
    """
    if not isinstance(entity_id, str) or not entity_id:
        raise ValidationError("entity_id", "must be a non-empty string (a decision, bead, topic … id)")
    braid, log, seq = _source(braid_or_view)
    recs = _records(log, entity_id, seq)
    if not recs:  # the braid names come from the whole store (a view lists none); read as of seq
        recs = [r for b in entity_braids(braid.log, entity_id) for r in log.scan_braid(b, 1, seq + 1)]
        recs.sort(key=lambda r: r.seq)
    per_step: list[dict[str, Any]] = [{} for _ in recs]
    current: dict[str, Any] = {}
    relevant: list[Projection] = []
    if states:
        names = list(projections) if projections is not None else list(braid.projections)
        relevant = [p for p in map(braid.projection, names)
                    if not recs or any(p.reads(r.delta) for r in recs)]
    if relevant:
        seqs = [r.seq for r in recs] + [seq]
        for i, (_, folded) in enumerate(_walk_states(braid, relevant, seqs)):
            found = per_step[i] if i < len(recs) else current
            for p, state in zip(relevant, folded, strict=False):
                value = _entity(p, state, entity_id, entities)
                if value is not _MISSING:
                    found[p.name] = value
    steps: list[Any] = []
    previous: dict[str, Any] = {}
    for rec, after in zip(recs, per_step, strict=False):
        delta_changes = {}
        for p in relevant:
            old, new = previous.get(p.name, _MISSING), after.get(p.name, _MISSING)
            if old is _MISSING and new is _MISSING:
                continue
            if old is _MISSING:
                cs = [Change("", "added", new=new)]
            elif new is _MISSING:
                cs = [Change("", "removed", old=old)]
            else:
                cs = changes(old, new)
            if cs:
                delta_changes[p.name] = cs
        steps.append(Step(seq=rec.seq, hash=rec.hash.hex(), delta=rec.delta,
                          reasons=reasons(rec.delta.payload), states=after, changes=delta_changes))
        previous = after
    ts = log.read(seq).delta.ts if seq else None
    return History(entity_id=entity_id, seq=seq, head=str(log.head()), ts=ts, steps=steps,
                   current=current)


# ------------------------------------------------------------------------------------ diff

def _split(state: Any) -> tuple[dict[str, dict[Any, Any]], dict[str, Any]]:
    """A state as (collections by name, state-level fields)."""
    if isinstance(state, dict):
        return {"": _builtins(state)}, {}
    if isinstance(state, Struct):
        colls, fields = {}, {}
        for name in state.__struct_fields__:
            value = getattr(state, name)
            if isinstance(value, dict):
                colls[name] = _builtins(value)
            else:
                fields[name] = _builtins(value)
        return colls, fields
    return {}, {"": _builtins(state)}


def diff(braid: Any, a: Any, b: Any, *, projections: Iterable[str] | None = None) -> Diff:
    """What changed between points ``a`` and ``b`` (seqs, delta ids or times; a before b)."""
    sa, sb = braid.resolve(a), braid.resolve(b)
    if sa > sb:
        raise ValidationError("b", f"must be at or after a (a is seq {sa}, b is seq {sb}); swap them")
    log = braid.log
    names = list(projections) if projections is not None else list(braid.projections)
    out: dict[str, ProjectionDiff] = {}
    for name in names:
        p = braid.projection(name)
        old_colls, old_fields = _split(braid.state_at(name, sa))
        new_colls, new_fields = _split(braid.state_at(name, sb))
        responsible = _Responsible(log, p, sa, sb)
        buckets: dict[str, list[EntityChange]] = {"added": [], "changed": [], "superseded": [],
                                                   "removed": []}
        for coll in list(old_colls) + [c for c in new_colls if c not in old_colls]:
            old, new = old_colls.get(coll, {}), new_colls.get(coll, {})
            for key in list(old) + [k for k in new if k not in old]:
                if key in old and key in new:
                    if old[key] == new[key]:
                        continue
                    cs = changes(old[key], new[key])
                    status = "superseded" if _retired(cs) else "changed"
                    ec = EntityChange(coll, str(key), status, changes=cs,
                                      deltas=responsible.of(str(key)))
                elif key in new:
                    ec = EntityChange(coll, str(key), "added", new=new[key],
                                      deltas=responsible.of(str(key)))
                else:
                    ec = EntityChange(coll, str(key), "removed", old=old[key],
                                      deltas=responsible.of(str(key)))
                buckets[ec.status].append(ec)
        fields = changes(old_fields, new_fields)
        out[name] = ProjectionDiff(name=name, fields=fields, deltas=responsible.all(), **buckets)
    return Diff(a=sa, b=sb, a_head=str(braid.at(sa).head()), b_head=str(braid.at(sb).head()),
                projections=out)


class _Responsible:
    """The deltas in (a, b] behind an entity: the refers-to index first; for ids it does not
    hold, the deltas in the range the projection reads whose payload names the id."""

    def __init__(self, log: Any, projection: Projection, a: int, b: int) -> None:
        self.log, self.p, self.a, self.b = log, projection, a, b
        self._range: list[Record] | None = None
        self._seen: dict[int, DeltaRef] = {}

    def of(self, key: str) -> list[DeltaRef]:
        recs = _records(self.log, key, self.b, self.a, self.p.reads)
        if not recs:
            needle = _key(key)
            recs = [r for r in self._own_range() if needle in _key(r.delta.payload)]
        refs = [self._seen.get(r.seq) or DeltaRef.of(r) for r in recs]
        for ref in refs:
            self._seen[ref.seq] = ref
        return refs

    def _own_range(self) -> list[Record]:
        if self._range is None:
            lo, hi = self.a + 1, self.b + 1
            if self.p.kinds is None or self.p.refs or self.p.provenances:  # reads beyond kinds
                self._range = [r for r in self.log.scan(lo, hi) if self.p.reads(r.delta)]
            else:
                recs = [r for k in self.p.kinds for r in self.log.scan_kind(k, lo, hi)]
                self._range = sorted(recs, key=lambda r: r.seq)
        return self._range

    def all(self) -> list[DeltaRef]:
        return [self._seen[s] for s in sorted(self._seen)]


# --------------------------------------------------------------------------------- explain

def _short(value: Any, width: int = 100) -> str:
    text = value if isinstance(value, str) else _key(value).decode()
    return text if len(text) <= width else text[: width - 1] + "…"


def _who(d: GenericDelta | DeltaRef) -> str:
    p = d.provenance
    extra = [f"{k}={v}" for k in ("source", "model", "tool", "episode_id", "knot_id")
             if (v := getattr(p, k)) is not None]
    return p.kind + (f" ({', '.join(extra)})" if extra else "")


def _change_line(c: Change) -> str:
    where = c.path or "value"
    if c.op == "added":
        return f"{where}: + {_short(c.new)}"
    if c.op == "removed":
        return f"{where}: - {_short(c.old)}"
    return f"{where}: {_short(c.old)} -> {_short(c.new)}"


def format_history(h: History, *, max_changes: int = 8) -> str:
    """A history as text: one block per delta, oldest first."""
    lines = [f"{h.entity_id}: {len(h.steps)} delta(s) as of seq {h.seq} (head {h.head})"]
    for step in h.steps:
        d = step.delta
        lines.append(f"  seq {step.seq}  {d.ts.isoformat()}  {d.kind}  braid {d.braid_id}  "
                     f"by {_who(d)}  confidence {d.confidence:.2f}")
        lines.append(f"    delta {d.id}  hash {step.hash[:16]}…")
        said = _described(d)
        if said:
            lines.append(f"    {said}")
        for key, text in step.reasons.items():
            lines.append(f"    why ({key}): {text}")
        for name, cs in step.changes.items():
            for c in cs[:max_changes]:
                lines.append(f"    {name}: {_change_line(c)}")
            if len(cs) > max_changes:
                lines.append(f"    {name}: … and {len(cs) - max_changes} more change(s)")
    return "\n".join(lines)


def _described(d: GenericDelta) -> str:
    """What the delta's kind says its payload holds (``describe`` of its declaration), or ""."""
    spec = REGISTRY.get(d.kind)
    if spec is None or spec.describe is None or not d.payload:
        return ""
    try:
        return _short(spec.describe(d.payload), 400)
    except Exception:  # any: a payload the describer does not expect says nothing
        return ""


def explain(braid: Any, entity_id: str, at: Any = None, *,
            entities: Mapping[str, EntityFn] | None = None) -> str:
    """Why ``entity_id`` is what it is as of ``at`` (default the head): its value in each
    projection, then every delta that led there, with who wrote it, how sure and why."""
    seq = braid.resolve(at) if at is not None else braid.head().seq
    return format_explain(history(braid.at(seq), entity_id, entities=entities))


def format_explain(h: History) -> str:
    """A history told as an explanation: the value now, then how it got there."""
    when = f"seq {h.seq}" + (f", {h.ts.isoformat()}" if h.ts is not None else "")
    lines = [f"{h.entity_id} as of {when} (head {h.head})"]
    if not h.steps:
        lines.append(f"  no delta refers to {h.entity_id!r} up to seq {h.seq}")
        return "\n".join(lines)
    if h.current:
        lines.append("now:")
        for name, value in h.current.items():
            lines.append(f"  {name}: {_short(value, 400)}")
    else:
        lines.append("now: no projection holds it as an entity")
    first, last = h.steps[0], h.steps[-1]
    lines.append(f"how it got there: {len(h.steps)} delta(s), seq {first.seq}..{last.seq}, "
                 f"{first.delta.ts.isoformat()} .. {last.delta.ts.isoformat()}")
    lines.extend(format_history(h).splitlines()[1:])
    provs = sorted({_who(s.delta) for s in h.steps})
    lines.append(f"written by: {'; '.join(provs)}")
    lines.append(f"prove it later: braidlog verify --against {h.head}")
    return "\n".join(lines)


def format_diff(d: Diff, *, max_changes: int = 8) -> str:
    """A diff as text: per projection, entities added, changed, superseded and removed."""
    lines = [f"diff seq {d.a} -> seq {d.b}  ({d.a_head[:24]}… -> {d.b_head[:24]}…)"]
    for name, pd in d.projections.items():
        if pd.empty:
            lines.append(f"{name}: no change")
            continue
        lines.append(f"{name}: {len(pd.added)} added, {len(pd.changed)} changed, "
                     f"{len(pd.superseded)} superseded, {len(pd.removed)} removed")
        for group, sign in (("added", "+"), ("changed", "~"), ("superseded", "x"), ("removed", "-")):
            for ec in getattr(pd, group):
                label = f"{ec.collection}[{ec.key}]" if ec.collection else ec.key
                seqs = ", ".join(str(r.seq) for r in ec.deltas)
                lines.append(f"  {sign} {label}" + (f"   (by seq {seqs})" if seqs else ""))
                if group == "added":
                    lines.append(f"      {_short(ec.new)}")
                elif group == "removed":
                    lines.append(f"      was {_short(ec.old)}")
                for c in ec.changes[:max_changes]:
                    lines.append(f"      {_change_line(c)}")
                if len(ec.changes) > max_changes:
                    lines.append(f"      … and {len(ec.changes) - max_changes} more change(s)")
        for c in pd.fields[:max_changes]:
            lines.append(f"  ~ {_change_line(c)}")
        for ref in pd.deltas:
            why = "; ".join(ref.reasons.values())
            lines.append(f"  seq {ref.seq} {ref.kind} by {_who(ref)} ({ref.confidence:.2f})"
                         + (f": {why}" if why else ""))
    return "\n".join(lines)


# ------------------------------------------------------------------------------- entity as-of

#: Past this many deltas about one entity, ``entity_at`` starts from the nearest checkpoint.
LOCAL_FOLD_MAX = 512


def entity_at(braid_or_view: Any, projection: str, entity_id: str, *,
              entities: Mapping[str, EntityFn] | None = None) -> Any:
    """One entity's value in ``projection`` as of the view's seq (the head for a Braid), or None.

    For a projection declared ``local`` (an entity changes only through the deltas that refer
    to it), this folds only the entity's deltas, found through the refers-to index, on top of a
    fresh state, or of the nearest checkpoint when the entity has more than ``LOCAL_FOLD_MAX``
    deltas: O(log n + the entity's deltas), whatever the log's length. Any other projection is
    folded whole as of the seq (``Braid.state_at``). Equal to the entity's value in
    ``at(seq).state(projection)`` either way."""
    if not isinstance(entity_id, str) or not entity_id:
        raise ValidationError("entity_id", "must be a non-empty string (a decision, bead, topic … id)")
    braid, log, seq = _source(braid_or_view)
    p = braid.projection(projection)
    if not p.local:
        return entity_value(p, braid.state_at(p.name, seq), entity_id, entities)
    recs = _records(log, entity_id, seq, reads=p.reads)
    state, at = None, 0
    if len(recs) > LOCAL_FOLD_MAX:
        found = load_checkpoint(braid.log, p, seq)
        if found is not None:
            at, state = found
    state = p.start() if state is None else state
    for r in recs:
        if r.seq > at:
            state = p.apply(state, r.delta, r.seq)
    return entity_value(p, state, entity_id, entities)
