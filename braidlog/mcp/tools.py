"""The log's tools: append, head, verify, show, history, diff, explain, state_at, recall, kinds.

Arguments are Structs built from the envelope's fields (``GenericDelta``) and the engine's
read calls; results are Structs whose JSON Schema is each tool's output schema. A point
(``at``, ``as_of``, ``a``, ``b``) is a seq, a delta id or an ISO-8601 time with a timezone.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from itertools import islice
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from .. import audit
from ..delta import GenericDelta, Provenance, delta
from ..errors import IntegrityError, ValidationError
from ..store import Head, Record
from .backend import Backend, parse_point, recall_installed
from .schema import ToolSpec, arguments, described, json_schema

__all__ = ["log_tools", "DeltaOut", "record_out", "POINT", "POINT_OR_HEAD"]

POINT = described(int | str, "a seq, a delta id, or an ISO-8601 time with a timezone")
POINT_OR_HEAD = described(int | str | None, "a seq, a delta id, or an ISO-8601 time with a "
                          "timezone; the head when left out")
MAX_LIST = 500


# ------------------------------------------------------------------------------------- results

class HeadOut(Struct):
    """The log's head: its last seq and chain hash; keep ``head`` to prove the past later."""

    seq: int
    hash: str
    head: str


class DeltaOut(Struct):
    """A record: the delta, its position in the log and its chain hash."""

    seq: int
    hash: str
    delta: GenericDelta


class Appended(Struct):
    """Where an appended delta landed."""

    seq: int
    id: str
    hash: str
    head: str
    embedded: bool


class VerifyOut(Struct):
    """The chain recomputed: ``ok`` with the seq verified up to, or the first bad seq."""

    ok: bool
    head: str
    verified: int | None = None
    against: str | None = None
    seq: int | None = None
    error: str | None = None


class BraidDeltas(Struct):
    """A braid's deltas, newest first."""

    braid_id: str
    count: int
    records: list[DeltaOut]


class HistoryOut(Struct):
    """An entity's history (``entity``), or a braid's deltas (``braid``), as of ``seq``."""

    seq: int
    head: str
    entity: audit.History | None = None
    braid: BraidDeltas | None = None


class ExplainOut(Struct):
    """Why an entity is what it is as of ``seq``: its value per projection, and the story."""

    entity_id: str
    seq: int
    head: str
    current: dict[str, Any]
    text: str


class StateOut(Struct):
    """A projection's state (or one entity of it) as of ``seq``."""

    projection: str
    seq: int
    head: str
    state: Any = None
    entity_id: str | None = None
    found: bool = True


class KindOut(Struct):
    """A kind the store accepts: its owner, payload version and payload JSON Schema."""

    kind: str
    owner: str
    version: int
    payload_schema: dict[str, Any]


class KindsOut(Struct):
    kinds: list[KindOut]


def record_out(rec: Record, *, vector: bool = True) -> DeltaOut:
    d = rec.delta
    if not vector and d.vector is not None:
        d = msgspec.structs.replace(d, vector=None)
    return DeltaOut(seq=rec.seq, hash=rec.hash.hex(), delta=d)


def _head(h: Head) -> HeadOut:
    return HeadOut(seq=h.seq, hash=h.hash.hex(), head=str(h))


# ------------------------------------------------------------------------------------ append

_ENVELOPE = {"braid_id", "kind", "payload", "confidence", "tags", "refs", "provenance"}
# The envelope's fields with the constraints every append checks (the engine's strict form of
# GenericDelta); the payload is any JSON object here: its schema is its kind's (the `kinds` tool).
_STRICT = getattr(importlib.import_module("braidlog.delta"), "_StrictDelta", GenericDelta)

AppendArgs = arguments(
    "AppendArgs", _STRICT, [("embed", bool, recall_installed())], only=_ENVELOPE,
    defaults={"confidence": 1.0, "provenance": None},
    types={"payload": dict[str, Any], "provenance": Provenance | None},
    describe={
        "braid_id": "the braid (stream) the delta belongs to",
        "kind": "the delta's kind; the `kinds` tool lists them with their payload schemas",
        "payload": "a JSON object in the kind's payload schema",
        "confidence": "how sure the writer is, in [0, 1]",
        "provenance": "who wrote it: kind (default assistant) and optionally model, tool, "
                      "episode_id, knot_id; source is stamped 'mcp'",
        "embed": "store a vector of the payload's text (the server's embedder: --embedder, else "
                 "the space's recorded one, else the offline hashing embedder) so that `recall` "
                 "finds the delta; a payload with no text is stored without one (needs the recall "
                 "extra; the default when it is installed)",
    },
    doc="A delta to append to the log.")


def _append(b: Backend, a: Any) -> Appended:
    d = delta(a.braid_id, a.kind, a.payload, provenance=b.provenance(a.provenance),
              confidence=a.confidence, refs=a.refs, tags=tuple(a.tags))
    embedded = False
    if a.embed and not recall_installed():
        raise ValidationError("embed", "needs braidlog's recall extra (pip install "
                              "'.[recall]' where the server runs); pass embed false")
    with b.write() as braid:
        try:
            if a.embed:  # a payload with no text is stored without a vector
                from ..recall import embed_deltas, embedder_for
                from ..recall.recorded import append_vectors

                chosen = embedder_for(braid, "default", b.embedder)
                [d], n = embed_deltas([d], chosen, "default")
                seq, embedded = append_vectors(braid, [d], chosen, "default")[0], n == 1
            else:
                seq = braid.append(d)
        except ValidationError as e:  # one delta: no "delta 0" to point at
            raise ValidationError(e.field, e.rule) from None
        rec, head = braid.log.read(seq), braid.head()
    return Appended(seq=seq, id=rec.delta.id, hash=rec.hash.hex(), head=str(head), embedded=embedded)


# ---------------------------------------------------------------------------- head, show, verify

HeadArgs = arguments("HeadArgs", doc="No arguments.")

ShowArgs = arguments("ShowArgs", [("ref", described(int | str, "a seq or a delta id"), msgspec.NODEFAULT)],
                     doc="Which delta to show.")

VerifyArgs = arguments("VerifyArgs", [(
    "against", described(str | None, "SEQ:HASH of a head written down earlier: also prove the "
                         "first SEQ deltas are still those"), None)],
    doc="What to verify: the whole chain, and optionally against an earlier head.")


def _head_tool(b: Backend, a: Any) -> HeadOut:
    with b.read() as braid:
        return _head(braid.head())


def _show(b: Backend, a: Any) -> DeltaOut:
    ref = a.ref
    with b.read() as braid:
        if isinstance(ref, int) or ref.strip().isdigit():
            seq = int(ref)
            rec = braid.log.read(seq) if 1 <= seq <= braid.head().seq else None
        else:
            rec = braid.log.get(ref.strip())
    if rec is None:
        raise ValidationError("ref", f"no delta with seq or id {ref!r}")
    return record_out(rec)


def _verify(b: Backend, a: Any) -> VerifyOut:
    against = Head.parse(a.against) if a.against else None
    with b.read() as braid:
        log = braid.log
        head = log.head()
        stop = head.seq + 1
        try:
            if against is not None:
                if against.seq > head.seq:
                    raise IntegrityError(f"the log holds {head.seq} deltas, fewer than the "
                                         f"{against.seq} of the head given: deltas were lost",
                                         seq=head.seq + 1)
                stop = against.seq + 1
            checked = log.verify(1, stop)
            if against is not None and checked.hash != against.hash:
                raise IntegrityError(
                    f"the first {against.seq} deltas differ from the head given: expected hash "
                    f"{against.hash.hex()}, found {checked.hash.hex()} at seq {against.seq}",
                    seq=against.seq)
        except IntegrityError as e:
            return VerifyOut(ok=False, head=str(head), against=a.against, seq=e.seq, error=str(e))
    return VerifyOut(ok=True, head=str(head), verified=checked.seq,
                     against=str(against) if against else None)


# -------------------------------------------------------------------------------- auditing

HistoryArgs = arguments("HistoryArgs", [
    ("entity_id", described(str | None, "an entity: a decision, bead, knot, episode, topic, "
                            "field (topic/field), memory … id"), None),
    ("braid_id", described(str | None, "a braid: its deltas, newest first"), None),
    ("at", POINT_OR_HEAD, None),
    ("states", described(bool, "with the entity's state in each projection after each step"), True),
    ("limit", described(Annotated[int, Meta(ge=1, le=MAX_LIST)], "at most this many of a braid's "
                        "deltas"), 50),
], doc="Give entity_id or braid_id.")

DiffArgs = arguments("DiffArgs", [
    ("a", described(int | str, "the earlier point: a seq, a delta id or an ISO-8601 time"), msgspec.NODEFAULT),
    ("b", POINT_OR_HEAD, None),
    ("projections", described(list[str] | None, "only these projections"), None),
], doc="Two points, a before b.")

ExplainArgs = arguments("ExplainArgs", [
    ("entity_id", described(str, "the entity id"), msgspec.NODEFAULT),
    ("at", POINT_OR_HEAD, None),
])

StateAtArgs = arguments("StateAtArgs", [
    ("projection", described(str, "decisions, fields, memories, beads, knots, episodes or trust"),
     msgspec.NODEFAULT),
    ("at", POINT_OR_HEAD, None),
    ("entity_id", described(str | None, "only this entity of the state"), None),
])


def _missing(entity: str, seq: int) -> ValidationError:
    return ValidationError("entity_id", f"no delta refers to {entity!r} up to seq {seq}; check "
                           "the id (`show` and `history` by braid_id show ids and payloads)")


def _history(b: Backend, a: Any) -> HistoryOut:
    if (a.entity_id is None) == (a.braid_id is None):
        raise ValidationError("entity_id", "give entity_id or braid_id (one of them)")
    with b.read() as braid:
        view = braid.at(b.seq(braid, a.at))
        if a.entity_id is not None:
            h = audit.history(view, a.entity_id, states=a.states)
            if not h.steps:
                raise _missing(a.entity_id, h.seq)
            return HistoryOut(seq=h.seq, head=h.head, entity=h)
        records = [record_out(rec, vector=False)
                   for rec in islice(view.log.scan_braid(a.braid_id, reverse=True), a.limit)]
        count = view.log.braid_head(a.braid_id).version
    if not count:
        raise ValidationError("braid_id", f"braid {a.braid_id!r} holds no delta up to seq {view.seq}")
    return HistoryOut(seq=view.seq, head=str(view.head()), braid=BraidDeltas(a.braid_id, count, records))


def _diff(b: Backend, a: Any) -> audit.Diff:
    with b.read() as braid:
        first, second = b.seq(braid, a.a, "a"), b.seq(braid, a.b, "b")
        return audit.diff(braid, first, second, projections=a.projections)


def _explain(b: Backend, a: Any) -> ExplainOut:
    with b.read() as braid:
        h = audit.history(braid.at(b.seq(braid, a.at)), a.entity_id)
    if not h.steps:
        raise _missing(a.entity_id, h.seq)
    return ExplainOut(entity_id=a.entity_id, seq=h.seq, head=h.head, current=h.current,
                      text=audit.format_explain(h))


def _state_at(b: Backend, a: Any) -> StateOut:
    with b.read() as braid:
        projection = braid.projection(a.projection)
        view = braid.at(b.seq(braid, a.at))
        state, head = view.state(a.projection), str(view.head())
        if a.entity_id is None:
            return StateOut(projection=a.projection, seq=view.seq, head=head, state=state)
        value = audit.entity_value(projection, state, a.entity_id)
    return StateOut(projection=a.projection, seq=view.seq, head=head, state=value,
                    entity_id=a.entity_id, found=value is not None)


KindsArgs = arguments("KindsArgs", [("kind", described(str | None, "only this kind"), None)])


def _kinds(b: Backend, a: Any) -> KindsOut:
    with b.read() as braid:
        registry = braid.log.registry  # the process's kinds and those declared in the log
        specs = [registry[a.kind]] if a.kind is not None else registry.specs()
    out = []
    for spec in specs:
        declared = (getattr(spec, "json_schemas", None) or {}).get(spec.version)
        schema = (dict(declared) if declared is not None else json_schema(spec.schema)
                  if spec.schema is not None else {"type": "object"})
        out.append(KindOut(kind=spec.kind, owner=spec.owner, version=spec.version,
                           payload_schema=schema))
    return KindsOut(out)


# -------------------------------------------------------------------------------------- recall

class HitOut(Struct):
    """One recalled delta (without its vector), closest first."""

    seq: int
    delta_id: str
    score: float
    delta: GenericDelta


class RecallOut(Struct, omit_defaults=True):
    query: str
    as_of: int | None
    head: str
    hits: list[HitOut]
    context_id: str | None = None


_FILTERS = ("braid", "kinds", "tags", "namespace", "workspace")
#: Recall's receipt options, which the tool carries as its own arguments (``_receipt_params``).
_RECEIPT = ("record", "run", "turn", "model", "context_bytes", "hash_query")


def _receipt_params() -> list[tuple[str, Any, Any]]:
    return [
        ("record", described(bool, "record a context receipt (a context_used delta) naming the "
                             "hits, the request and the seq it saw; its id comes back as "
                             "context_id (needs a writable server)"), False),
        ("run", described(str | None, "with record: the run (session, conversation) the recall "
                          "served"), None),
        ("turn", described(str | None, "with record: the turn of that run"), None),
        ("model", described(str | None, "with record: the model the context is for"), None),
        ("context", described(str | None, "with record: the exact context given to the model "
                              "(only its SHA-256 and length are recorded)"), None),
        ("hash_query", described(bool, "with record: record only the query's SHA-256, not its "
                                 "text"), False),
    ]


def _recall_params() -> list[tuple[str, Any, Any]]:
    """The query parameters of ``Recall.recall`` a tool can carry: k and the filters, as lists
    of names, and any keyword option whose type is plain JSON (a search mode, for one)."""
    from ..recall import Recall

    sig = inspect.signature(Recall.recall)
    hints = typing.get_type_hints(Recall.recall)
    out: list[tuple[str, Any, Any]] = []
    for name, p in sig.parameters.items():
        if name in ("self", "query", "as_of", "where", "deltas", *_RECEIPT) \
                or p.kind is not p.KEYWORD_ONLY and name != "k":
            continue
        if name == "k":
            out.append(("k", described(Annotated[int, Meta(ge=1, le=MAX_LIST)], "how many hits"), p.default))
        elif name == "min_score":
            from ..recall.query import RELEVANCE_FLOOR

            out.append(("min_score", described(float | None, "by meaning, leave out hits scoring below "
                                               "this rather than pad to k (default 0, the relevance "
                                               "floor); null for the k closest whatever their score"),
                        RELEVANCE_FLOOR))
        elif name in _FILTERS:
            what = {"tags": "deltas carrying every one of these tags"}.get(name, f"deltas of any of these {name}")
            out.append((name, described(list[str] | None, what), None))
        else:
            tp = hints.get(name, Any)
            try:
                msgspec.json.schema(tp)
            except (TypeError, ValueError):
                continue
            out.append((name, tp, p.default))
    return out


def recall_args() -> type[Struct]:
    return arguments("RecallArgs", [
        ("query", described(Annotated[str, Meta(min_length=1)], "the text to recall by meaning"),
         msgspec.NODEFAULT),
        *_recall_params(),
        *_receipt_params(),
        ("as_of", described(int | str | None, "recall as of a point (seq, delta id or ISO time): "
                            "only deltas up to it"), None),
        ("space", described(str, "the vector space"), "default"),
    ], doc="A recall query.")


def _recall(b: Backend, a: Any) -> RecallOut:
    options = {f: getattr(a, f) for f in a.__struct_fields__
               if f not in ("query", "as_of", "space", "context")}
    if a.record:
        options["context_bytes"] = a.context
    elif any(getattr(a, f) for f in ("run", "turn", "model", "context", "hash_query")):
        raise ValidationError("record", "run, turn, model, context and hash_query describe a "
                              "recorded recall: pass record true with them")
    with (b.write() if a.record else b.read()) as braid:
        index = b.recall(a.space)
        point = parse_point(a.as_of, "as_of")
        as_of = None if point is None else index.resolve(point)
        hits = index.recall(a.query, as_of=as_of, **options)
        head = str(braid.head())
    return RecallOut(query=a.query, as_of=as_of, head=head, context_id=hits.context_id, hits=[
        HitOut(seq=h.seq, delta_id=h.delta_id, score=round(h.score, 6),
               delta=msgspec.structs.replace(h.delta, vector=None)) for h in hits])


def log_tools() -> list[ToolSpec]:
    """The log's tools; ``recall`` only with the recall extra installed."""
    tools = [
        ToolSpec("append", AppendArgs, Appended, _append, writes=True, title="Append a delta",
                 description="Append one delta (an immutable change) to the log; its provenance "
                 "records that it came over MCP. Returns its seq, id and chain hash."),
        ToolSpec("head", HeadArgs, HeadOut, _head_tool, title="Log head", idempotent=True,
                 description="The log's head SEQ:HASH: write it down, `verify` against it later "
                 "to prove the first SEQ deltas are unchanged."),
        ToolSpec("verify", VerifyArgs, VerifyOut, _verify, title="Verify the chain",
                 description="Recompute the hash chain over the log (optionally against a head "
                 "written down earlier); ok, or the first bad seq."),
        ToolSpec("show", ShowArgs, DeltaOut, _show, title="Show a delta",
                 description="One delta by seq or by id, with its chain hash."),
        ToolSpec("history", HistoryArgs, HistoryOut, _history, title="History",
                 description="Every delta that created or changed an entity (with its state in "
                 "each projection after each step), or a braid's deltas newest first; as of a "
                 "point when `at` is given."),
        ToolSpec("diff", DiffArgs, audit.Diff, _diff, title="Diff two points",
                 description="Per projection, the entities added, changed (field by field), "
                 "superseded and removed between two points, and the deltas responsible."),
        ToolSpec("explain", ExplainArgs, ExplainOut, _explain, title="Explain an entity",
                 description="Why an entity is what it is as of a point: its value and the "
                 "chain of deltas, provenance and reasons that led to it."),
        ToolSpec("state_at", StateAtArgs, StateOut, _state_at, title="Projection state at a point",
                 description="A projection's state (or one entity of it) as of a seq, a delta "
                 "id or a time: exactly a fresh fold of the deltas up to that point."),
        ToolSpec("kinds", KindsArgs, KindsOut, _kinds, title="Kinds",
                 description="The kinds the store accepts, each with its owning projection and "
                 "the JSON Schema of its payload (what `append` checks)."),
    ]
    if recall_installed():
        tools.insert(8, ToolSpec(
            "recall", recall_args(), RecallOut, _recall, title="Recall", may_write=True,
            description="The deltas that best match a text, best first (by meaning, by keyword "
            "or both when `mode` offers it), as of a point when given, with filters applied "
            "before the top k is cut. With `record` true it also records a context receipt "
            "(which memory versions were retrieved, for `run` and `turn`) and returns its "
            "`context_id`."))
    return tools

