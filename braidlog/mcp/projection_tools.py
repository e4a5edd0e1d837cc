"""The projections' tools: LedgerMind decisions, MemState fields, typedmem memories, and reads
of Braid's episodes, knots, forks and trust.

A write tool's arguments are its command Struct's fields (``RecordDecision``, ``ReviseField``,
``AddMemory`` …, taken from ``braidlog.projections`` as they stand) plus ``braid_id`` and
``provenance_kind``; the command is decided against the live state and appended in one write
transaction (``Braid.execute``), so a refusal writes nothing. Every delta written here carries
provenance source ``mcp`` and kind ``assistant`` unless the call claims another kind the server
allows; a revised field also records MemState provenance ``mcp``.
"""

# No `from __future__ import annotations`: the result Structs are built inside functions, over
# the projection modules imported there, and msgspec reads their annotations as objects.

from datetime import UTC, datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

import msgspec
from msgspec import Meta, Struct

from ..delta import ProvenanceKind
from ..errors import ValidationError
from .backend import DEFAULT_KIND, SOURCE, Backend, recall_installed
from .schema import ToolSpec, arguments, described
from .tools import POINT_OR_HEAD

__all__ = ["projection_tools", "Written", "CommandOut"]

T = TypeVar("T")

#: The braid a command's deltas join when the call names none.
DEFAULT_BRAID = "mcp"

_ACTING = [
    ("braid_id", described(Annotated[str, Meta(min_length=1, max_length=120)],
                           "the braid (stream) the command's deltas join"), DEFAULT_BRAID),
    ("provenance_kind", described(ProvenanceKind | None, f"who is acting: {DEFAULT_KIND} unless the server lets the "
                                  "caller claim another kind (a human is 'user')"), None),
]
_AT = [("at", POINT_OR_HEAD, None)]


class Written(Struct):
    """A delta a command appended."""

    seq: int
    id: str
    kind: str
    braid_id: str


class CommandOut(Struct, Generic[T]):
    """What a command appended (nothing when it was already done) and its outcome."""

    head: str
    deltas: list[Written]
    result: T


def _command(cls: type[Struct], a: Any, **stamped: Any) -> Any:
    """The command from the tool's arguments (its own fields), with the server's stamps."""
    return cls(**{f: getattr(a, f) for f in cls.__struct_fields__ if f not in stamped}, **stamped)


def _write_tool(name: str, projection: str, cls: type[Struct], result: Any, outcome: Any, *,
                title: str, stamped: dict[str, Any] | None = None, doc: str = "",
                idempotent: bool = True) -> ToolSpec:
    """A tool that runs command ``cls`` on ``projection``; ``outcome(braid, records, command)``
    is the tool's result. ``idempotent``: the command repeated changes nothing more (the
    projection decides [] once it is done)."""
    stamped = stamped or {}
    args = arguments(f"{cls.__name__}Args", cls, _ACTING, omit=stamped, doc=cls.__doc__)

    def run(b: Backend, a: Any) -> CommandOut:
        command = _command(cls, a, **stamped)
        prov = b.provenance(kind=a.provenance_kind, field="provenance_kind")
        with b.write() as braid:
            records = braid.execute(projection, command, braid_id=a.braid_id, provenance=prov)
            return CommandOut(head=str(braid.head()), deltas=[
                Written(r.seq, r.delta.id, r.delta.kind, r.delta.braid_id) for r in records],
                result=_copy(outcome(braid, records, command)))

    description = " ".join((cls.__doc__ or name).split())
    return ToolSpec(name, args, CommandOut[result], run, writes=True, title=title, idempotent=idempotent,
                    description=description + (" " + doc if doc else ""))


# ------------------------------------------------------------------------------ LedgerMind

def _decision_tools() -> list[ToolSpec]:
    from braidlog.projections import decisions

    def outcome(braid: Any, records: list[Any], command: Any) -> Any:
        return decisions.memory_decision(command, records)

    match = [("match", described(Literal["hybrid", "vector", "keyword"],
                                  "how a record matches: by keyword and meaning together "
                                  "(reciprocal-rank fusion), by meaning, or by keyword"), "hybrid")]
    search_args = arguments("SearchDecisionsArgs", decisions.SearchDecisionsRequest, _AT + match,
                            doc=decisions.SearchDecisionsRequest.__doc__)

    class SearchOut(Struct):
        """Decisions and proposals matching the query, best first."""

        results: list[decisions.SearchResultItem]

    def search(b: Backend, a: Any) -> SearchOut:
        search_decisions = _search_function()
        with b.read() as braid:
            source = braid if a.at is None else braid.at(b.seq(braid, a.at))
            found = search_decisions(source, a.query, mode=a.mode, limit=a.limit, offset=a.offset,
                                     namespace=a.namespace, match=a.match)
        return SearchOut(results=list(found))

    md = decisions.MemoryDecision
    note = "Refused (nothing written) where the namespace's trust boundary is HUMAN_ONLY and the caller is not a human."
    tools = [
        _write_tool("record_decision", "decisions", decisions.RecordDecision, md, outcome,
                    title="Record a decision", doc=note),
        _write_tool("supersede_decision", "decisions", decisions.SupersedeDecision, md, outcome,
                    title="Supersede a decision", doc=note),
        _write_tool("draft_proposal", "decisions", decisions.DraftProposal, md, outcome,
                    title="Draft a proposal", doc=note),
        _write_tool("accept_proposal", "decisions", decisions.AcceptProposal, md, outcome,
                    title="Accept a proposal", doc=note),
        _write_tool("reject_proposal", "decisions", decisions.RejectProposal, md, outcome,
                    title="Reject a proposal", doc=note),
    ]
    if recall_installed():  # search embeds the query and the records
        tools.append(ToolSpec("search_decisions", search_args, SearchOut, search,
                              title="Search decisions",
                              description="Search decisions and proposals (modes strict, balanced, "
                              "audit) by keyword and meaning together, as of a point when `at` "
                              "is given."))
    return tools


def _search_function() -> Any:
    """``search_decisions``, wherever the decisions family keeps it."""
    from braidlog.projections import decisions

    found = getattr(decisions, "search_decisions", None)
    if found is None:
        from braidlog.projections.decision_search import search_decisions as found
    return found


# ---------------------------------------------------------------------------------- MemState

def _field_tools() -> list[ToolSpec]:
    from braidlog.projections import fields

    def outcome(braid: Any, records: list[Any], command: Any) -> Any:
        return fields.get_field(braid.state("fields"), command.topic_id, command.field)

    get_args = arguments("GetFieldArgs", [
        ("topic_id", str, msgspec.NODEFAULT),
        ("field", str, msgspec.NODEFAULT),
        ("history", described(bool, "also its revisions, newest first"), False),
        ("limit", described(Annotated[int, Meta(ge=0)] | None, "at most this many revisions"), None),
        ("include_archived", bool, False),
        *_AT,
    ], doc=fields.get_field.__doc__)

    class FieldOut(Struct):
        """A field's current value (and its history when asked); null when unknown."""

        seq: int
        field: fields.FieldView | None

    def get(b: Backend, a: Any) -> FieldOut:
        with b.read() as braid:
            seq, state = b.state(braid, "fields", a.at)
            view = fields.get_field(state, a.topic_id, a.field, history=a.history, limit=a.limit,
                                    include_archived=a.include_archived)
        return FieldOut(seq=seq, field=view)

    return [
        _write_tool("revise_field", "fields", fields.ReviseField, fields.FieldView | None, outcome,
                    title="Revise a field", stamped={"provenance": SOURCE},
                    doc=f"The revision records MemState provenance {SOURCE!r}."),
        ToolSpec("get_field", get_args, FieldOut, get, title="Get a field",
                 description="A field's current value; with history=true also its revisions, "
                 "newest first; as of a point when `at` is given."),
    ]


# ---------------------------------------------------------------------------------- typedmem

def _memory_tools() -> list[ToolSpec]:
    from braidlog.projections import memories as typedmem

    def outcome(braid: Any, records: list[Any], command: Any) -> Any:
        state = braid.state("memories")
        for r in records:
            found = typedmem.get_memory(state, r.delta.payload.get("id", ""))
            if found is not None:
                return found
        return None

    list_args = arguments("ListMemoriesArgs", [
        ("workspace", described(str | None, "one workspace; null for every workspace"),
         typedmem.DEFAULT_WORKSPACE),
        ("type", str | None, None), ("subject", str | None, None), ("status", str | None, None),
        ("tag", str | None, None), ("include_superseded", bool, False),
        ("limit", Annotated[int, Meta(ge=1, le=1000)], 100),
        *_AT,
    ], doc=typedmem.list_memories.__doc__)

    class MemoriesOut(Struct):
        """Records in the order they were stored (at most ``limit``), and how many matched."""

        seq: int
        count: int
        memories: list[typedmem.Memory]

    def list_(b: Backend, a: Any) -> MemoriesOut:
        with b.read() as braid:
            seq, state = b.state(braid, "memories", a.at)
            found = typedmem.list_memories(state, a.workspace, type=a.type, subject=a.subject,
                                           status=a.status, tag=a.tag,
                                           include_superseded=a.include_superseded)
            return MemoriesOut(seq=seq, count=len(found), memories=_copy(found[:a.limit]))

    return [
        _write_tool("add_memory", "memories", typedmem.AddMemory, typedmem.Memory | None, outcome,
                    title="Add a memory", idempotent=False,  # a repeat may reinforce the slot
                    doc="Returns the record that holds it (the incoming one, or the one its "
                    "slot's policy merged it into)."),
        ToolSpec("list_memories", list_args, MemoriesOut, list_, title="List memories",
                 description="Typed memories of a workspace, filtered by type, subject, status "
                 "or tag; superseded ones only when asked; as of a point when `at` is given."),
    ]


# ------------------------------------------------------------------------------- Braid reads

def _braid_tools() -> list[ToolSpec]:
    from braidlog.projections import episodes as ep
    from braidlog.projections import knots as kn
    from braidlog.projections import trust as tr

    one_of = "give braid_id or {0} (one of them)"

    episodes_args = arguments("EpisodesArgs", [
        ("braid_id", described(str | None, "a braid: its episodes in the order they opened"), None),
        ("episode_id", described(str | None, "one episode"), None),
        ("include_hidden", described(bool, "also rejected and discarded forks"), False), *_AT])

    class EpisodesOut(Struct):
        seq: int
        episodes: list[ep.Episode]

    def episodes_(b: Backend, a: Any) -> EpisodesOut:
        if (a.braid_id is None) == (a.episode_id is None):
            raise ValidationError("braid_id", one_of.format("episode_id"))
        with b.read() as braid:
            seq, state = b.state(braid, "episodes", a.at)
            if a.episode_id is not None:
                found = [e for e in [ep.episode(state, a.episode_id)] if e is not None]
            else:
                found = ep.episodes(state, a.braid_id, include_hidden=a.include_hidden)
            return EpisodesOut(seq=seq, episodes=_copy(found))

    knots_args = arguments("KnotsArgs", [
        ("braid_id", described(str | None, "a braid: its open knot and its tied knots"), None),
        ("knot_id", described(str | None, "one knot"), None), *_AT])

    class KnotsOut(Struct):
        """Knots (a braid's open one first, then the tied ones in order) and the rule-breaking
        deltas the log holds for them."""

        seq: int
        knots: list[kn.Knot]
        violations: list[kn.Violation]

    def knots_(b: Backend, a: Any) -> KnotsOut:
        if (a.braid_id is None) == (a.knot_id is None):
            raise ValidationError("braid_id", one_of.format("knot_id"))
        with b.read() as braid:
            seq, state = b.state(braid, "knots", a.at)
            if a.knot_id is not None:
                found = [k for k in [kn.knot(state, a.knot_id)] if k is not None]
            else:
                found = [k for k in [kn.open_knot(state, a.braid_id)] if k is not None]
                found += kn.tied_knots(state, a.braid_id)
            ids = {k.knot_id for k in found}
            bad = [v for v in kn.violations(state) if v.knot_id in ids]
            return KnotsOut(seq=seq, knots=_copy(found),
                            violations=_copy(bad))

    forks_args = arguments("ForksArgs", [
        ("braid_id", described(str, "the braid"), msgspec.NODEFAULT),
        ("as_of_time", described(datetime | None, "leave out forks expired by this time "
                                 "(ISO 8601 with a timezone)"), None), *_AT])

    class ForksOut(Struct):
        """A braid's pending forks in proposal order, and when each one's TTL runs out."""

        seq: int
        pending: list[ep.Episode]
        expiries: list[ep.Expiry]

    def forks_(b: Backend, a: Any) -> ForksOut:
        with b.read() as braid:
            seq, state = b.state(braid, "episodes", a.at)
            pending = ep.pending_forks(state, a.braid_id, a.as_of_time)
            expiries = [e for e in (ep.fork_expiry(state, f.id) for f in pending) if e is not None]
            return ForksOut(seq=seq, pending=_copy(pending),
                            expiries=_copy(expiries))

    trust_args = arguments("TrustArgs", [
        ("subject_id", described(str, "a delta, bead or hypothesis id"), msgspec.NODEFAULT),
        ("braid_id", described(str | None, "inside this braid (a braid-scoped assessment wins)"), None),
        ("as_of_time", described(datetime | None, "when to date decay (ISO 8601 with a timezone); "
                                 "default: now, or the time of the delta at `at`"), None), *_AT])

    class TrustOut(Struct):
        """A subject's trust as of a time (null when unknown then), and its hypothesis if it is one."""

        seq: int
        as_of_time: datetime
        trust: tr.TrustView | None
        hypothesis: tr.Hypothesis | None
        hypothesis_status: str | None

    def trust_(b: Backend, a: Any) -> TrustOut:
        with b.read() as braid:
            seq, state = b.state(braid, "trust", a.at)
            when = a.as_of_time
            if when is None:
                when = (braid.log.read(seq).delta.ts if a.at is not None and seq
                        else datetime.now(UTC))
            view = tr.trust_of(state, a.subject_id, when, braid_id=a.braid_id)
            h = state.hypotheses.get(a.subject_id)
            status = tr.hypothesis_status(state, a.subject_id, when) if h is not None else None
            return TrustOut(seq=seq, as_of_time=when, trust=view,
                            hypothesis=_copy(h), hypothesis_status=status)

    return [
        ToolSpec("episodes", episodes_args, EpisodesOut, episodes_, title="Episodes",
                 description="A braid's episodes (labels, knot refs, edges, summary, anchor-quote "
                 "candidates, fork record), or one episode."),
        ToolSpec("knots", knots_args, KnotsOut, knots_, title="Knots",
                 description="A braid's open knot and tied knots (checkpoints over delta ranges), "
                 "or one knot, with any rule-breaking deltas recorded against them."),
        ToolSpec("forks", forks_args, ForksOut, forks_, title="Pending forks",
                 description="A braid's pending forks and when each one expires (knots or "
                 "minutes, whichever first)."),
        ToolSpec("trust", trust_args, TrustOut, trust_, title="Trust",
                 description="The trust of a subject as of a time: value, source, decay and "
                 "reinforcements; for a hypothesis also its tests and status."),
    ]


def _copy(value: Any) -> Any:
    """State records as plain data, taken under the lock: no live state leaves it."""
    return msgspec.to_builtins(value, enc_hook=_enc_hook)


def _enc_hook(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


def projection_tools() -> list[ToolSpec]:
    return [*_decision_tools(), *_field_tools(), *_memory_tools(), *_braid_tools()]
