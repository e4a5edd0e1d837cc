"""Knots: immutable checkpoints produced by cognition over a contiguous delta range (Braid seed).

A knot lives through one ``knot_lifecycle`` kind: ``KnotOpened`` starts its think pass,
``SpeakPassBegan`` its speak pass, ``KnotTied`` seals it with every field the seed requires.
Once tied a knot never changes. Every delta a command of this module appends is stamped with the
knot in its provenance (``provenance.knot_id``); callers stamp the think pass's other deltas the
same way (``Provenance("assistant", knot_id=...)``) so the knot collects them.

Rules (``check``, run at the boundary on every delta the projection reads, whatever path
brings it; each refusal names its rule):

- ``knot-id-once``: a knot id names one knot; opening it again is refused.
- ``one-open-knot``: one knot is open per braid at a time.
- ``speak-after-think``: the speak pass begins once, on a knot in its think pass.
- ``knot-tied-once``: a knot is tied once (a tied knot is immutable), and only after it was
  opened, in its own braid.
- ``knot-range-exists``, ``knot-range-forward``, ``knot-range-contiguous``, ``knots-never-overlap``:
  the tie's ``delta_range`` names two deltas of the knot's braid, start not after end, covers
  every delta stamped with the knot, and overlaps no earlier knot of the braid.
- ``thought-summary-reasoning-bead``: the tie's thought summary is a written reasoning bead.
- ``knot-lists-name-their-kind``: ``arrivals_during``, ``executed_tools``, ``hypotheses`` and the
  inbox watermark name deltas of the right kind in the knot's braid.
- ``speak-pass-no-tools``: a ``tool_call`` stamped with a knot in its speak pass, or claiming
  ``knot_pass="speak"``, is refused (the seed's two-pass rule); ``knot-immutable``: a tool call
  stamped with a tied knot is refused.

A delta that reached the log below the boundary (a bare store) is still a fact: the fold records
the broken rule as a ``Violation`` instead of raising.

When no primary episode is given a knot gets the default "session @ timecode" episode,
``default_episode_id(braid_id, ts)``: ``session:<braid_id>@<YYYYMMDDTHHMMSSZ>`` with ``ts`` the
start of the session (the first knot's start ts); a knot opened within ``SESSION_GAP`` of the
braid's previous knot, itself in a default episode, stays in that episode.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

import braidlog
from braidlog import (
    BeadRef,
    Boundary,
    Context,
    Decider,
    GenericDelta,
    Ident,
    Provenance,
    Refs,
    Rejected,
    Text,
    UtcTime,
    ValidationError,
    check_payload,
    plain,
    refuse,
    typed_or_none,
)
from braidlog.kinds import VERSION_KEY

from . import beads

__all__ = [
    "SESSION_GAP", "DEFAULT_EPISODE_PREFIX", "INPUT_KINDS", "INPUT_PROVENANCES", "READS",
    "default_episode_id", "is_default_episode_id",
    "DeltaRange", "PlannedTool", "Metrics", "KnotOpened", "SpeakPassBegan", "KnotTied",
    "ToolUse", "Knot", "Violation", "State", "evolve",
    "OpenKnot", "BeginSpeak", "Speak", "CallTool", "TieKnot", "decide", "check",
    "knot", "open_knot", "tied_knots", "violations", "resolve_at_knot", "thought_summary",
    "decider", "PROJECTIONS",
]

#: A knot opened within this long of the previous knot's tie stays in its default episode.
SESSION_GAP = timedelta(minutes=30)
DEFAULT_EPISODE_PREFIX = "session:"
#: Inputs are messages and observations that no knot produced, from these provenances.
INPUT_KINDS = ("message", "observation")
INPUT_PROVENANCES = ("user", "perception", "system", "tool")
#: The kinds the fold reads: lifecycles, tool calls, and what joins a knot or arrives during one.
READS = frozenset({"knot_lifecycle", "tool_call", "tool_result", "hypothesis", *INPUT_KINDS})
_INPUT_KINDS, _INPUT_PROVENANCES = frozenset(INPUT_KINDS), frozenset(INPUT_PROVENANCES)  # for `in`
_MAX_BRAID_IN_EPISODE = 80
_ULID = re.compile("^[0-7][0-9A-HJKMNP-TV-Z]{25}$")

Count = Annotated[int, Meta(ge=0)]


def _braid_key(braid_id: str) -> str:
    if len(braid_id) <= _MAX_BRAID_IN_EPISODE:
        return braid_id
    return "~" + hashlib.blake2b(braid_id.encode(), digest_size=16).hexdigest()


def default_episode_id(braid_id: str, ts: datetime) -> str:
    """The default "session @ timecode" episode id of a session of ``braid_id`` started at ``ts``.

    ``session:<braid_id>@<YYYYMMDDTHHMMSSZ>`` (UTC, whole seconds); a braid id longer than 80
    characters is replaced by ``~`` and its 32-hex-digit blake2b digest, so ids stay <= 120.
    """
    if ts.tzinfo is None:
        raise ValidationError("ts", "must be a timezone-aware datetime")
    code = ts.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{DEFAULT_EPISODE_PREFIX}{_braid_key(braid_id)}@{code}"


def is_default_episode_id(episode_id: str, braid_id: str | None = None) -> bool:
    """True when ``episode_id`` is a default session episode (of ``braid_id`` when given)."""
    if not episode_id.startswith(DEFAULT_EPISODE_PREFIX) or "@" not in episode_id:
        return False
    key = episode_id[len(DEFAULT_EPISODE_PREFIX):].rpartition("@")[0]
    return braid_id is None or key == _braid_key(braid_id)


# NOTE: payload class names are stored as tags; never rename one, add a new one.

class DeltaRange(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """The first and last delta of a knot's range over its braid's deltas (both inclusive)."""

    start_delta_id: Ident
    end_delta_id: Ident


class PlannedTool(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A tool call the knot planned, executed or not."""

    tool: Text
    call_id: str | None = None
    args: dict[str, Any] = {}


class Metrics(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """The seed's knot metrics; ``extra`` holds any other named number."""

    latency_ms: Annotated[float, Meta(ge=0)] | None = None
    token_estimate: Count | None = None
    fork_pending_count: Count | None = None
    extra: dict[str, float] = {}


class KnotOpened(Struct, frozen=True, tag=True, forbid_unknown_fields=True, omit_defaults=True):
    """A knot started its think pass; ``inbox_watermark`` is the last input visible then."""

    knot_id: Ident
    primary_episode_id: Ident
    start_ts: UtcTime
    inbox_watermark: Ident | None = None
    planned_tools: tuple[PlannedTool, ...] = ()


class SpeakPassBegan(Struct, frozen=True, tag=True, forbid_unknown_fields=True, omit_defaults=True):
    """A knot moved to its speak pass: it may emit its response, and call no tool."""

    knot_id: Ident


class KnotTied(Struct, frozen=True, tag=True, forbid_unknown_fields=True, omit_defaults=True):
    """A knot was sealed with every field the seed requires; it never changes again."""

    knot_id: Ident
    primary_episode_id: Ident
    delta_range: DeltaRange
    start_ts: UtcTime
    end_ts: UtcTime
    summary: Text
    thought_summary_bead_ref: BeadRef
    metrics: Metrics
    inbox_watermark: Ident | None = None
    arrivals_during: tuple[Ident, ...] = ()
    planned_tools: tuple[PlannedTool, ...] = ()
    executed_tools: tuple[Ident, ...] = ()
    hypotheses: tuple[Ident, ...] = ()


KnotEvent = KnotOpened | SpeakPassBegan | KnotTied


def _refers_knot(p: Any) -> list[str]:
    ids = [p.knot_id]
    if isinstance(p, (KnotOpened, KnotTied)):
        ids.append(p.primary_episode_id)
    if isinstance(p, KnotTied):
        ids.append(p.thought_summary_bead_ref.bead_id)
    return ids


braidlog.declare("knot_lifecycle", KnotEvent, owner="knots", refers=_refers_knot)


# ---------------------------------------------------------------------------------------- state

class ToolUse(Struct, kw_only=True):
    """A tool_call delta made in a knot's think pass."""

    delta_id: str
    tool: str
    call_id: str | None = None


# gc=False: a state is a tree (no record refers back to what holds it), so no record can be in
# a reference cycle, and the cyclic collector need not track the many a replay allocates.
class Knot(Struct, kw_only=True, gc=False):
    """A knot as the log has built it so far; ``tied`` holds its sealed fields once tied."""

    knot_id: str
    braid_id: str
    primary_episode_id: str
    start_ts: datetime
    stage: str  # "think", "speak" or "tied"
    opened_seq: int | None = None
    opened_delta_id: str | None = None
    speak_seq: int | None = None
    inbox_watermark: str | None = None
    planned_tools: list[PlannedTool] = []
    tool_calls: list[ToolUse] = []
    executed: list[str] = []
    hypotheses: list[str] = []
    arrivals: list[str] = []
    spoken: list[str] = []
    violations: list[str] = []
    tied: KnotTied | None = None
    tied_delta_id: str | None = None
    tied_seq: int | None = None


class Violation(Struct, kw_only=True):
    """A delta in the log that broke a knot rule (appended around the deciders)."""

    seq: int
    delta_id: str
    braid_id: str
    knot_id: str | None
    rule: str
    detail: str


class State(Struct, kw_only=True):
    """Knots by id, the open knot and last input of each braid, tied knots in order, violations."""

    knots: dict[str, Knot] = {}
    open: dict[str, str] = {}
    last_input: dict[str, str] = {}
    tied: dict[str, list[str]] = {}
    violations: list[Violation] = []


def _violate(state: State, d: GenericDelta, seq: int, knot_id: str | None, rule: str,
             detail: str) -> None:
    state.violations.append(Violation(seq=seq, delta_id=d.id, braid_id=d.braid_id,
                                      knot_id=knot_id, rule=rule, detail=detail))
    k = state.knots.get(knot_id) if knot_id else None
    if k is not None:
        k.violations.append(d.id)


def evolve(state: State, d: GenericDelta, seq: int) -> State:
    """Fold the delta at log position ``seq``, one of ``READS`` (in place; never raises: a
    broken rule becomes a Violation)."""
    kind = d.kind
    if kind == "knot_lifecycle":
        _lifecycle(state, d, seq)
        return state
    prov = d.provenance
    kid = prov.knot_id
    if not kid:  # most deltas: no knot; then only a tool_call claiming the speak pass, or an input
        if kind == "tool_call":
            _tool_call(state, d, seq, kid, None)
        elif kid is None and kind in _INPUT_KINDS and prov.kind in _INPUT_PROVENANCES:
            braid_id = d.braid_id
            state.last_input[braid_id] = d.id
            open_id = state.open.get(braid_id)
            if open_id is not None:
                state.knots[open_id].arrivals.append(d.id)
        return state
    k = state.knots.get(kid)
    if kind == "tool_call":
        _tool_call(state, d, seq, kid, k)
    elif k is not None and k.stage != "tied" and k.braid_id == d.braid_id:
        if kind == "tool_result":
            k.executed.append(d.id)
        elif kind == "hypothesis":
            k.hypotheses.append(d.id)
        elif kind == "message" and k.stage == "speak":
            k.spoken.append(d.id)
    return state


def _tool_call(state: State, d: GenericDelta, seq: int, kid: str | None, k: Knot | None) -> None:
    if k is None and d.payload.get("knot_pass") != "speak" and VERSION_KEY not in d.payload:
        return  # no knot, and no claim of the speak pass (none an upcast could add): nothing to type
    p = typed_or_none(d)
    claimed = getattr(p, "knot_pass", None)
    if k is not None and (k.stage == "speak" or claimed == "speak"):
        _violate(state, d, seq, kid, "speak-pass-no-tools",
                 f"tool_call {d.id} was appended in the speak pass of knot {kid}")
    elif k is not None and k.stage == "tied":
        _violate(state, d, seq, kid, "knot-immutable", f"tool_call {d.id} names knot {kid}, already tied")
    elif k is not None:
        k.tool_calls.append(ToolUse(delta_id=d.id, tool=getattr(p, "tool", "?"),
                                    call_id=getattr(p, "call_id", None)))
    elif claimed == "speak":
        _violate(state, d, seq, kid, "speak-pass-no-tools", f"tool_call {d.id} claims the speak pass")


def _lifecycle(state: State, d: GenericDelta, seq: int) -> None:
    p = typed_or_none(d)
    if isinstance(p, KnotOpened):
        if p.knot_id in state.knots:
            _violate(state, d, seq, None, "knot-id-once", f"knot {p.knot_id} was opened again")
            return
        state.knots[p.knot_id] = Knot(
            knot_id=p.knot_id, braid_id=d.braid_id, primary_episode_id=p.primary_episode_id,
            start_ts=p.start_ts, stage="think", opened_seq=seq, opened_delta_id=d.id,
            inbox_watermark=p.inbox_watermark, planned_tools=list(p.planned_tools))
        other = state.open.get(d.braid_id)
        if other is None:
            state.open[d.braid_id] = p.knot_id
        else:
            _violate(state, d, seq, p.knot_id, "one-open-knot",
                     f"knot {p.knot_id} opened while knot {other} is open in braid {d.braid_id}")
    elif isinstance(p, SpeakPassBegan):
        k = state.knots.get(p.knot_id)
        if k is None or k.stage != "think" or k.braid_id != d.braid_id:
            _violate(state, d, seq, p.knot_id if k else None, "speak-after-think",
                     f"speak pass of knot {p.knot_id}, which is not in its think pass")
            return
        k.stage, k.speak_seq = "speak", seq
    elif isinstance(p, KnotTied):
        k = state.knots.get(p.knot_id)
        if k is not None and k.braid_id != d.braid_id:
            _violate(state, d, seq, None, "knot-tied-once", f"knot {p.knot_id} belongs to braid {k.braid_id!r}")
            return
        if k is not None and k.stage == "tied":
            _violate(state, d, seq, None, "knot-tied-once", f"knot {p.knot_id} is already tied")
            return
        if k is None:
            k = state.knots[p.knot_id] = Knot(
                knot_id=p.knot_id, braid_id=d.braid_id, primary_episode_id=p.primary_episode_id,
                start_ts=p.start_ts, stage="tied", inbox_watermark=p.inbox_watermark)
            _violate(state, d, seq, p.knot_id, "knot-tied-once", f"knot {p.knot_id} was tied but never opened")
        k.stage, k.tied, k.tied_delta_id, k.tied_seq = "tied", p, d.id, seq
        k.primary_episode_id = p.primary_episode_id
        if state.open.get(d.braid_id) == p.knot_id:
            del state.open[d.braid_id]
        state.tied.setdefault(d.braid_id, []).append(p.knot_id)


# ---------------------------------------------------------------------------------------- rules

def check(state: State, d: GenericDelta, at: Boundary) -> None:
    """The knot rules (module doc), at the boundary: refuse ``d`` naming the rule it breaks."""
    if d.kind == "knot_lifecycle":
        p = typed_or_none(d)
        if isinstance(p, KnotOpened):
            _check_open(state, d, p, at)
        elif isinstance(p, SpeakPassBegan):
            k = state.knots.get(p.knot_id)
            if k is None or k.braid_id != d.braid_id or k.stage != "think":
                where = "no knot" if k is None else f"knot {p.knot_id} is {k.stage} in braid {k.braid_id!r}"
                raise refuse("speak-after-think", f"the speak pass of knot {p.knot_id} begins once, "
                             f"after its think pass; {where}")
        elif isinstance(p, KnotTied):
            _check_tie(state, d, p, at)
    elif d.kind == "tool_call":
        kid = d.provenance.knot_id
        k = state.knots.get(kid) if kid else None
        claimed = (getattr(typed_or_none(d), "knot_pass", None) if VERSION_KEY in d.payload  # an upcast
                   else d.payload.get("knot_pass"))
        if claimed == "speak" or (k is not None and k.stage == "speak"):
            raise refuse("speak-pass-no-tools", f"tool_call {d.id} is in the speak pass of knot "
                         f"{kid or '(claimed)'}: the speak pass must not call tools (two-pass rule); "
                         "call it in the think pass, before the speak pass, or in a new knot")
        if k is not None and k.stage == "tied":
            raise refuse("knot-immutable", f"knot {kid} is tied and immutable: a tool call cannot "
                         "join it; open a new knot")


def _check_open(state: State, d: GenericDelta, p: KnotOpened, at: Boundary) -> None:
    k = state.knots.get(p.knot_id)
    if k is not None:
        raise refuse("knot-id-once", f"knot {p.knot_id} already exists (braid {k.braid_id!r}, "
                     f"{k.stage}); a knot id names one knot: open a new knot with a new id")
    other = state.open.get(d.braid_id)
    if other is not None:
        raise refuse("one-open-knot", f"knot {other} is still open in braid {d.braid_id!r}; tie it "
                     "before opening another")
    if p.inbox_watermark is not None:
        _check_ids(at.log, (p.inbox_watermark,), INPUT_KINDS, "inbox_watermark", d.braid_id)


def _check_tie(state: State, d: GenericDelta, p: KnotTied, at: Boundary) -> None:
    k = state.knots.get(p.knot_id)
    if k is None or k.braid_id != d.braid_id or k.stage == "tied":
        what = ("was never opened" if k is None else f"belongs to braid {k.braid_id!r}"
                if k.braid_id != d.braid_id else "is already tied")
        raise refuse("knot-tied-once", f"knot {p.knot_id} {what}; a knot is tied once, after it "
                     "was opened in its braid, and is immutable once tied: open a new knot")
    log, braid = at.log, d.braid_id
    _check_range(state, k, p.delta_range, log)
    _check_thought(p.thought_summary_bead_ref, log)
    _check_ids(log, p.arrivals_during, INPUT_KINDS, "arrivals_during", braid)
    _check_ids(log, p.executed_tools, ("tool_result",), "executed_tools", braid)
    _check_ids(log, p.hypotheses, ("hypothesis",), "hypotheses", braid)


# ------------------------------------------------------------------------------------- commands

class OpenKnot(braidlog.Command, frozen=True, kw_only=True):
    """Open a knot in its think pass (default episode and inbox watermark when not given)."""

    knot_id: str | None = None
    primary_episode_id: str | None = None
    inbox_watermark: str | None = None
    planned_tools: tuple[PlannedTool, ...] = ()


class BeginSpeak(braidlog.Command, frozen=True, kw_only=True):
    """Move an open knot to its speak pass."""

    knot_id: str


class Speak(braidlog.Command, frozen=True, kw_only=True):
    """Emit the knot's user-facing response (begins the speak pass if needed)."""

    knot_id: str
    text: str
    message_id: str | None = None


class CallTool(braidlog.Command, frozen=True, kw_only=True):
    """Append a tool_call in a knot's think pass; refused in the speak pass."""

    knot_id: str
    tool: str
    args: dict[str, Any] = {}
    call_id: str | None = None


class TieKnot(braidlog.Command, frozen=True, kw_only=True):
    """Seal a knot. Lists left None default to what the knot collected while open."""

    knot_id: str
    summary: str
    thought_summary_bead_ref: BeadRef
    delta_range: DeltaRange | None = None
    primary_episode_id: str | None = None
    arrivals_during: tuple[str, ...] | None = None
    planned_tools: tuple[PlannedTool, ...] | None = None
    executed_tools: tuple[str, ...] | None = None
    hypotheses: tuple[str, ...] | None = None
    metrics: Metrics | None = None


def _stamp(ctx: Context, k: Knot) -> Provenance:
    p = ctx.provenance
    return msgspec.structs.replace(p, knot_id=k.knot_id, episode_id=p.episode_id or k.primary_episode_id)


def _knot(state: State, knot_id: str, ctx: Context) -> Knot:
    k = state.knots.get(knot_id)
    if k is None:
        raise Rejected(f"no knot {knot_id!r}; open it first with OpenKnot")
    if k.braid_id != ctx.braid_id:
        raise Rejected(f"knot {knot_id} belongs to braid {k.braid_id!r}, not {ctx.braid_id!r}")
    return k


def decide(command: Any, state: State, ctx: Context) -> list[GenericDelta]:
    """Decide a knot command: [] when already done; Rejected/ValidationError to refuse."""
    if isinstance(command, OpenKnot):
        return _open(command, state, ctx)
    if isinstance(command, BeginSpeak):
        return _begin_speak(command, state, ctx)
    if isinstance(command, Speak):
        return _speak(command, state, ctx)
    if isinstance(command, CallTool):
        return _call_tool(command, state, ctx)
    if isinstance(command, TieKnot):
        return _tie(command, state, ctx)
    raise ValidationError("command", f"knots cannot decide {type(command).__name__}; use one of "
                          "OpenKnot, BeginSpeak, Speak, CallTool, TieKnot")


def _open(c: OpenKnot, state: State, ctx: Context) -> list[GenericDelta]:
    kid = c.knot_id or ctx.new_id()
    k = state.knots.get(kid)
    if (k is not None and k.stage == "think" and k.braid_id == ctx.braid_id
            and c.primary_episode_id in (None, k.primary_episode_id)
            and plain(c.planned_tools) == plain(k.planned_tools)):
        return []  # already open as asked; any other reuse of the id is the boundary's to refuse
    watermark = c.inbox_watermark if c.inbox_watermark is not None else state.last_input.get(ctx.braid_id)
    episode = c.primary_episode_id or _default_episode(state, ctx)
    payload = check_payload("knot_lifecycle", msgspec.to_builtins(KnotOpened(
        knot_id=kid, primary_episode_id=episode, start_ts=ctx.now, inbox_watermark=watermark,
        planned_tools=tuple(c.planned_tools))))
    prov = msgspec.structs.replace(ctx.provenance, knot_id=kid,
                                   episode_id=ctx.provenance.episode_id or episode)
    return [ctx.delta("knot_lifecycle", payload, provenance=prov, refs=Refs(episodes=(episode,)))]


def _default_episode(state: State, ctx: Context) -> str:
    previous = state.tied.get(ctx.braid_id)
    if previous:
        last = state.knots[previous[-1]]
        end = last.tied.end_ts if last.tied is not None else last.start_ts
        if is_default_episode_id(last.primary_episode_id, ctx.braid_id) and ctx.now - end <= SESSION_GAP:
            return last.primary_episode_id
    return default_episode_id(ctx.braid_id, ctx.now)


def _begin_speak(c: BeginSpeak, state: State, ctx: Context) -> list[GenericDelta]:
    k = _knot(state, c.knot_id, ctx)
    if k.stage == "speak":
        return []
    payload = check_payload("knot_lifecycle", msgspec.to_builtins(SpeakPassBegan(knot_id=k.knot_id)))
    return [ctx.delta("knot_lifecycle", payload, provenance=_stamp(ctx, k))]


def _speak(c: Speak, state: State, ctx: Context) -> list[GenericDelta]:
    k = _knot(state, c.knot_id, ctx)
    if c.message_id is not None and c.message_id in k.spoken:
        return []
    out = _begin_speak(BeginSpeak(knot_id=k.knot_id), state, ctx)
    message = check_payload("message", {"text": c.text, "knot_pass": "speak"})
    d = ctx.delta("message", message, provenance=_stamp(ctx, k))
    if c.message_id is not None:
        if not _ULID.match(c.message_id):
            raise ValidationError("message_id", f"must be a ULID (it becomes the delta's id), got {c.message_id!r}")
        d = msgspec.structs.replace(d, id=c.message_id)
    return out + [d]


def _call_tool(c: CallTool, state: State, ctx: Context) -> list[GenericDelta]:
    k = _knot(state, c.knot_id, ctx)
    if c.call_id is not None and any(t.call_id == c.call_id for t in k.tool_calls):
        return []
    payload = {"tool": c.tool, "args": dict(c.args), "knot_pass": "think"}
    if c.call_id is not None:
        payload["call_id"] = c.call_id
    return [ctx.delta("tool_call", check_payload("tool_call", payload), provenance=_stamp(ctx, k))]


def _tie(c: TieKnot, state: State, ctx: Context) -> list[GenericDelta]:
    k = _knot(state, c.knot_id, ctx)
    if k.stage == "tied" and k.tied is not None and _tie_matches(k.tied, c):
        return []
    rng = c.delta_range
    if rng is None:
        if ctx.log is None:
            raise Rejected("TieKnot without a delta_range takes the default range from the log, "
                           "and ctx.log is None: run it through Braid.execute, or give a range")
        rng = _default_range(state, k, ctx.log)
    arrivals = _given(c.arrivals_during, k.arrivals)
    executed = _given(c.executed_tools, k.executed)
    hypotheses = _given(c.hypotheses, k.hypotheses)
    planned = tuple(c.planned_tools) if c.planned_tools is not None else _planned(k)
    metrics = c.metrics or Metrics()
    if metrics.latency_ms is None:
        latency = max(0.0, (ctx.now - k.start_ts).total_seconds() * 1000.0)
        metrics = msgspec.structs.replace(metrics, latency_ms=latency)
    episode = c.primary_episode_id or k.primary_episode_id
    payload = check_payload("knot_lifecycle", msgspec.to_builtins(KnotTied(
        knot_id=k.knot_id, primary_episode_id=episode, delta_range=rng, start_ts=k.start_ts,
        end_ts=ctx.now, summary=c.summary, thought_summary_bead_ref=c.thought_summary_bead_ref,
        metrics=metrics, inbox_watermark=k.inbox_watermark, arrivals_during=arrivals,
        planned_tools=planned, executed_tools=executed, hypotheses=hypotheses)))
    refs = Refs(beads=(c.thought_summary_bead_ref,), episodes=(episode,))
    return [ctx.delta("knot_lifecycle", payload, provenance=_stamp(ctx, k), refs=refs)]


def _planned(k: Knot) -> tuple[PlannedTool, ...]:
    out = list(k.planned_tools)
    called = {t.call_id for t in out if t.call_id}
    for t in k.tool_calls:
        if t.call_id is None or t.call_id not in called:
            out.append(PlannedTool(tool=t.tool, call_id=t.call_id))
    return tuple(out)


def _given(given: tuple[str, ...] | None, collected: list[str]) -> tuple[str, ...]:
    return tuple(collected) if given is None else tuple(given)


def _check_ids(log: Any, ids: tuple[str, ...], kinds: tuple[str, ...], field: str, braid: str) -> None:
    for i, delta_id in enumerate(ids):
        rec = log.get(delta_id)
        if rec is None or rec.delta.kind not in kinds or rec.delta.braid_id != braid:
            what = "no delta in the log" if rec is None else f"a {rec.delta.kind} of braid {rec.delta.braid_id!r}"
            raise refuse("knot-lists-name-their-kind", f"{field}[{i}] must name a "
                         f"{' or '.join(kinds)} delta of braid {braid!r}; {delta_id!r} is {what}")


def _seq_in_braid(log: Any, delta_id: str, field: str, braid: str) -> int:
    rec = log.get(delta_id)
    if rec is None:
        raise refuse("knot-range-exists", f"{field} names no delta in the log ({delta_id!r}); a "
                     "knot's range covers existing deltas of its braid")
    if rec.delta.braid_id != braid:
        raise refuse("knot-range-exists", f"{field}: delta {delta_id} belongs to braid "
                     f"{rec.delta.braid_id!r}, not {braid!r}; a knot covers only its own braid's deltas")
    return rec.seq


def _check_range(state: State, k: Knot, rng: DeltaRange, log: Any) -> None:
    braid = k.braid_id
    start = _seq_in_braid(log, rng.start_delta_id, "delta_range.start_delta_id", braid)
    end = _seq_in_braid(log, rng.end_delta_id, "delta_range.end_delta_id", braid)
    if start > end:
        raise refuse("knot-range-forward", f"delta_range starts at seq {start} after it ends at "
                     f"seq {end}; start_delta_id must come first")
    for rec in log.scan_refs(k.knot_id):
        d = rec.delta
        if d.provenance.knot_id == k.knot_id and d.braid_id == braid and not start <= rec.seq <= end:
            raise refuse(
                "knot-range-contiguous", f"seqs {start}..{end} are not one contiguous range with "
                f"knot {k.knot_id}'s own deltas: its {d.kind} {d.id} at seq {rec.seq} lies "
                "outside; widen the range to cover every delta of the knot")
    for other_id in state.tied.get(braid, ()):
        t = state.knots[other_id].tied
        if t is None:
            continue
        o_start, o_end = log.seq_of(t.delta_range.start_delta_id), log.seq_of(t.delta_range.end_delta_id)
        if o_start is not None and o_end is not None and start <= o_end and o_start <= end:
            raise refuse("knots-never-overlap", f"delta_range seqs {start}..{end} overlaps knot "
                         f"{other_id} (seqs {o_start}..{o_end}); start after seq {o_end}")


def _default_range(state: State, k: Knot, log: Any) -> DeltaRange:
    """From the knot's inbox watermark (the input that started it), else its opening, to the braid's last delta.

    The watermark counts only when it comes after the previous knot's tie, so knots never overlap.
    """
    after = 0
    previous = state.tied.get(k.braid_id)
    if previous:
        last = state.knots[previous[-1]]
        after = (log.seq_of(last.tied_delta_id) if last.tied_delta_id else None) or 0
    start = k.opened_delta_id
    if k.inbox_watermark is not None:
        seq = log.seq_of(k.inbox_watermark)
        if seq is not None and seq > after:
            start = k.inbox_watermark
    final = next(iter(log.scan_braid(k.braid_id, reverse=True, limit=1)), None)
    if start is None or final is None:
        raise Rejected(f"knot {k.knot_id} has no opening delta in braid {k.braid_id!r} to start its "
                       "range from; give TieKnot a delta_range")
    return DeltaRange(start_delta_id=start, end_delta_id=final.delta.id)


def _check_thought(ref: BeadRef, log: Any) -> None:
    rule = "thought-summary-reasoning-bead"
    found: beads.BeadVersioned | beads.BeadWritten | None = None
    if ref.bead_version_id is not None:
        for rec in log.scan_refs(ref.bead_version_id):
            p = typed_or_none(rec.delta) if rec.delta.kind == "bead_version" else None
            if isinstance(p, beads.BeadVersioned) and p.bead_version_id == ref.bead_version_id:
                found = p
                break
        if found is None or found.bead_id != ref.bead_id:
            raise refuse(rule, f"thought_summary_bead_ref.bead_version_id {ref.bead_version_id!r} "
                         f"is no version of bead {ref.bead_id!r} in the log; write the reasoning "
                         "bead first")
    else:
        for rec in log.scan_refs(ref.bead_id, reverse=True):
            p = typed_or_none(rec.delta) if rec.delta.kind == "bead_write" else None
            if isinstance(p, beads.BeadWritten) and p.bead_id == ref.bead_id:
                found = p
                break
        if found is None:
            raise refuse(rule, f"thought_summary_bead_ref.bead_id names no written bead "
                         f"({ref.bead_id!r}); write the knot's reasoning bead first (beads.WriteBead)")
    if found.bead_type != "reasoning_bead":
        raise refuse(rule, f"thought_summary_bead_ref must refer to a reasoning_bead; {ref.bead_id} "
                     f"is a {found.bead_type}")


def _tie_matches(t: KnotTied, c: TieKnot) -> bool:
    pairs: list[tuple[Any, Any]] = [(c.summary, t.summary),
                                    (c.thought_summary_bead_ref, t.thought_summary_bead_ref)]
    for name in ("delta_range", "primary_episode_id", "arrivals_during", "planned_tools",
                 "executed_tools", "hypotheses"):
        given = getattr(c, name)
        if given is not None:
            pairs.append((given, getattr(t, name)))
    if not all(plain(a) == plain(b) for a, b in pairs):
        return False
    if c.metrics is not None:
        tied = plain(t.metrics)
        return all(tied.get(key) == value for key, value in plain(c.metrics).items())
    return True


# ---------------------------------------------------------------------------------------- queries

def knot(state: State, knot_id: str) -> Knot | None:
    """A knot by id (open or tied)."""
    return state.knots.get(knot_id)


def open_knot(state: State, braid_id: str) -> Knot | None:
    """The braid's open knot, if any."""
    kid = state.open.get(braid_id)
    return None if kid is None else state.knots.get(kid)


def tied_knots(state: State, braid_id: str) -> list[Knot]:
    """The braid's tied knots in the order they were tied."""
    return [state.knots[k] for k in state.tied.get(braid_id, ())]


def violations(state: State, knot_id: str | None = None) -> list[Violation]:
    """Rule-breaking deltas the log holds (for one knot when ``knot_id`` is given)."""
    return [v for v in state.violations if knot_id is None or v.knot_id == knot_id]


def resolve_at_knot(state: State, beads_state: beads.State, knot_id: str, ref: BeadRef
                    ) -> beads.VersionRecord | None:
    """The bead version ``ref`` means at the time of a knot: pinned, else active at its tie.

    For a knot still open, "the time of the knot" is now: the version active in ``beads_state``.
    """
    k = state.knots.get(knot_id)
    if k is None:
        return None
    return beads.resolve(beads_state, ref, seq=k.tied_seq)


def thought_summary(state: State, beads_state: beads.State, knot_id: str) -> beads.VersionRecord | None:
    """The reasoning bead version a tied knot's thought summary ref means (see ``resolve_at_knot``)."""
    k = state.knots.get(knot_id)
    if k is None or k.tied is None:
        return None
    return resolve_at_knot(state, beads_state, knot_id, k.tied.thought_summary_bead_ref)


def decider() -> Decider:
    """The knots projection: lifecycles, and the tool calls, inputs, results and messages that
    join the open knot (``READS``), each with its log seq."""
    return Decider(name="knots", version=3, initial=State(), evolve=evolve, state_type=State,
                   kinds=READS, positional=True, local=True, check=check, decide=decide)


PROJECTIONS = [decider()]
