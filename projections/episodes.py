"""Episodes and forks: overlapping overlays over knots and deltas, and pending-first forks.

An episode groups knots and deltas by time, topic and intent; episodes overlap and point at
each other through typed edges. Every knot's primary episode gets its ``primary_knot_span``
from the knot's ``knot_lifecycle`` delta; other knots join through ``knot_refs``. Anchor quotes
are chosen from noted candidates by weights constraints / decisions / open_questions =
70 / 20 / 10 (``select_anchor_quotes``), deterministically for a given log.

Forks are pending-first: a drift signal proposes up to K ``fork_pending`` episodes; a classifier
confirms or rejects them (the default one counts a repeated proposal for the same parent and
labels as a confirmation); enough confirmations promote the fork, which then gets its
continuity buffer. A pending fork expires after a number of tied knots or minutes, whichever
comes first, and then decays to a ``soft_link`` or is discarded. docs/braid-episodes.md maps
the seed's terms to the kinds below and records every choice the seed leaves open.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from braidlog import Command
from braidlog import (
    Context,
    Decider,
    GenericDelta,
    Refs,
    Rejected,
    ValidationError,
    declare,
    typed,
)

__all__ = [
    "EDGE_TYPES", "QUOTE_CATEGORIES", "CATEGORY_WEIGHTS", "MIN_ANCHOR_QUOTES",
    "MAX_ANCHOR_QUOTES", "MESSAGE_WINDOW", "KINDS",
    "Labels", "KnotSpan", "Edge", "AnchorQuote", "CompactSummary", "ContinuityBuffer",
    "EpisodeOpened", "EpisodeLabeled", "EpisodeKnotLinked", "EpisodeEdgeAdded",
    "EpisodeSummarized", "AnchorQuoteNoted", "ForkProposed", "ForkClassified", "ForkPromoted",
    "ForkExpired",
    "Candidate", "Confirmation", "Fork", "Episode", "RecentMessage", "KnotSeen", "State",
    "evolve",
    "OpenEpisode", "LabelEpisode", "LinkKnot", "AddEdge", "SummarizeEpisode", "NoteQuote",
    "ForkCandidate", "ProposeForks", "ClassifyFork", "ExpireForks",
    "Verdict", "Classifier", "repeat_classifier", "ForkPolicy", "Expiry", "decide", "decider",
    "apportion", "select_anchor_quotes", "anchor_quotes", "episode", "episodes", "edges_to",
    "episodes_of_knot", "pending_forks", "fork_expiry", "expired_forks", "recent_messages",
    "continuity_buffer", "compact_summary", "normalize_labels",
    "PROJECTION", "PROJECTIONS",
]

OWNER = "episodes"

EdgeType = Literal["related_to", "forked_from", "resumed_from", "soft_link", "contradicts", "depends_on"]
#: The seed's six episode edge types (v0).
EDGE_TYPES: tuple[str, ...] = ("related_to", "forked_from", "resumed_from", "soft_link",
                               "contradicts", "depends_on")

QuoteCategory = Literal["constraint", "decision", "open_question"]
#: Anchor quote categories and their weights, in the order quotes are listed.
CATEGORY_WEIGHTS: tuple[tuple[str, int], ...] = (("constraint", 70), ("decision", 20),
                                                 ("open_question", 10))
QUOTE_CATEGORIES: tuple[str, ...] = tuple(c for c, _ in CATEGORY_WEIGHTS)
MIN_ANCHOR_QUOTES = 2
MAX_ANCHOR_QUOTES = 5

#: Messages kept per braid for continuity buffers (the seed's upper bound, 30).
MESSAGE_WINDOW = 30
MESSAGE_TEXT_LIMIT = 500

Status = Literal["active", "fork_pending", "rejected", "linked", "discarded"]
Verdicts = Literal["confirm", "reject"]

Ident = Annotated[str, Meta(min_length=1, max_length=120)]
Label = Annotated[str, Meta(min_length=1, max_length=80)]
Confidence = Annotated[float, Meta(ge=0.0, le=1.0)]
QuoteText = Annotated[str, Meta(min_length=1, max_length=500)]
SummaryText = Annotated[str, Meta(max_length=2000)]
UtcTime = Annotated[datetime, Meta(tz=True)]
Positive = Annotated[int, Meta(ge=1)]


# ---------------------------------------------------------------------------------------------
# Payloads. NOTE: payload class names may be stored; never rename one, add a new one.

class Labels(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """What an episode is about: topics, intents and modalities (normalized, sorted, unique)."""

    topics: tuple[Label, ...] = ()
    intents: tuple[Label, ...] = ()
    modalities: tuple[Label, ...] = ()


class KnotSpan(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """The first and last knot whose primary episode this is."""

    start_knot_id: Ident | None = None
    end_knot_id: Ident | None = None


class Edge(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A typed, weighted edge from one episode to another."""

    type: EdgeType
    to_episode_id: Ident
    confidence: Confidence


class AnchorQuote(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A short verbatim quote that anchors an episode, in one of three categories."""

    quote_id: Ident
    episode_id: Ident
    text: QuoteText
    category: QuoteCategory
    salience: Confidence = 0.5
    source_delta_id: Ident | None = None


class CompactSummary(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """The seed's compact summary: what we were doing, the goal, what is unresolved."""

    doing: SummaryText = ""
    goal: SummaryText = ""
    unresolved: SummaryText = ""

    def render(self) -> str:
        """One line: ``doing: …; goal: …; unresolved: …`` (empty parts left out)."""
        parts = [("doing", self.doing), ("goal", self.goal), ("unresolved", self.unresolved)]
        return "; ".join(f"{k}: {v}" for k, v in parts if v)


class ContinuityBuffer(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """What a promoted fork carries over: recent messages, a compact summary, anchor quotes."""

    message_ids: tuple[Ident, ...] = ()
    summary: CompactSummary = CompactSummary()
    anchor_quotes: tuple[AnchorQuote, ...] = ()


class EpisodeOpened(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """An episode was opened in the delta's braid."""

    episode_id: Ident
    labels: Labels = Labels()
    summary: SummaryText = ""


class EpisodeLabeled(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """An episode's labels were replaced."""

    episode_id: Ident
    labels: Labels


class EpisodeKnotLinked(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A knot joined an episode as an additional member (``knot_refs``)."""

    episode_id: Ident
    knot_id: Ident


class EpisodeEdgeAdded(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """An edge from ``episode_id`` was added, or its confidence changed."""

    episode_id: Ident
    type: EdgeType
    to_episode_id: Ident
    confidence: Confidence


class EpisodeSummarized(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """An episode's summary cache was replaced."""

    episode_id: Ident
    summary: SummaryText


class AnchorQuoteNoted(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A candidate anchor quote was noted for an episode."""

    quote: AnchorQuote


class ForkProposed(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Drift proposed a ``fork_pending`` episode off a parent; the TTL is stamped here."""

    fork_id: Ident
    parent_episode_id: Ident
    labels: Labels
    score: Confidence
    rank: Positive
    signal_id: Ident
    ttl_knots: Positive
    expires_at: UtcTime


class ForkClassified(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A classifier confirmed or rejected a pending fork."""

    fork_id: Ident
    verdict: Verdicts
    classifier: Ident
    signal_id: Ident
    confidence: Confidence = 1.0


class ForkPromoted(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A pending fork became an active episode, with its continuity buffer."""

    fork_id: Ident
    parent_episode_id: Ident
    confirmations: Positive
    buffer: ContinuityBuffer


class ForkExpired(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A pending fork's TTL ran out; it decayed to a soft link or was discarded."""

    fork_id: Ident
    parent_episode_id: Ident
    reason: Literal["knots", "minutes"]
    expired_at: UtcTime
    outcome: Literal["soft_link", "discarded"]


def _refers_episode(p: Any) -> list[str]:
    return [p.episode_id]


def _refers_knot_link(p: EpisodeKnotLinked) -> list[str]:
    return [p.episode_id, p.knot_id]


def _refers_edge(p: EpisodeEdgeAdded) -> list[str]:
    return [p.episode_id, p.to_episode_id]


def _refers_quote(p: AnchorQuoteNoted) -> list[str]:
    q = p.quote
    return [q.episode_id, q.quote_id] + ([q.source_delta_id] if q.source_delta_id else [])


def _refers_fork(p: Any) -> list[str]:
    return [p.fork_id, p.parent_episode_id]


def _refers_classified(p: ForkClassified) -> list[str]:
    return [p.fork_id]


def _refers_promoted(p: ForkPromoted) -> list[str]:
    b = p.buffer
    return [p.fork_id, p.parent_episode_id, *b.message_ids, *(q.quote_id for q in b.anchor_quotes)]


#: kind -> (payload schema, refers)
KINDS: dict[str, tuple[type, Callable[[Any], Iterable[str]]]] = {
    "episode_opened": (EpisodeOpened, _refers_episode),
    "episode_labeled": (EpisodeLabeled, _refers_episode),
    "episode_knot_linked": (EpisodeKnotLinked, _refers_knot_link),
    "episode_edge_added": (EpisodeEdgeAdded, _refers_edge),
    "episode_summarized": (EpisodeSummarized, _refers_episode),
    "anchor_quote_noted": (AnchorQuoteNoted, _refers_quote),
    "fork_proposed": (ForkProposed, _refers_fork),
    "fork_classified": (ForkClassified, _refers_classified),
    "fork_promoted": (ForkPromoted, _refers_promoted),
    "fork_expired": (ForkExpired, _refers_fork),
}

for _kind, (_schema, _refers) in KINDS.items():
    declare(_kind, _schema, owner=OWNER, refers=_refers)


# ---------------------------------------------------------------------------------------------
# State

class Candidate(Struct, frozen=True):
    """A noted anchor-quote candidate and its arrival number (later notes have higher numbers)."""

    order: int
    quote: AnchorQuote


class Confirmation(Struct, frozen=True):
    """One classifier verdict on a pending fork."""

    classifier: str
    signal_id: str
    verdict: str
    confidence: float


# gc=False: a state is a tree (no record refers back to what holds it), so no record can be in
# a reference cycle, and the cyclic collector need not track the many a replay allocates.
class Fork(Struct, gc=False):
    """The fork side of an episode that was proposed off a parent."""

    parent_episode_id: str
    score: float
    rank: int
    signal_id: str
    proposed_at: datetime
    expires_at: datetime
    ttl_knots: int
    knots_at_proposal: int
    signals: list[str] = []
    verdicts: list[Confirmation] = []
    knot_deadline: datetime | None = None
    resolved_at: datetime | None = None
    outcome: str | None = None
    expiry_reason: str | None = None

    @property
    def confirmations(self) -> int:
        return sum(1 for v in self.verdicts if v.verdict == "confirm")


class Episode(Struct, gc=False):
    """One episode as the seed defines it, plus its status and, for forks, the fork record."""

    id: str
    braid_id: str
    status: str
    opened_at: datetime
    labels: Labels = Labels()
    primary_knot_span: KnotSpan = KnotSpan()
    knot_refs: list[str] = []
    edges: list[Edge] = []
    summary_cache: str = ""
    candidates: list[Candidate] = []
    fork: Fork | None = None
    continuity: ContinuityBuffer | None = None
    implicit: bool = False

    @property
    def anchor_quotes(self) -> list[AnchorQuote]:
        return select_anchor_quotes(self.candidates)

    @property
    def visible(self) -> bool:
        return self.status not in ("rejected", "discarded")


class RecentMessage(Struct, frozen=True):
    """A message delta kept in a braid's bounded window (text cut at 500 characters)."""

    delta_id: str
    ts: datetime
    text: str
    provenance: str
    episode_id: str | None = None


class KnotSeen(Struct, frozen=True):
    """A knot as episodes need it: its braid, its primary episode, and whether it is tied."""

    braid_id: str
    primary_episode_id: str | None = None
    tied: bool = False


class State(Struct):
    """Episodes by id, tied knots, pending forks and recent messages per braid."""

    episodes: dict[str, Episode] = {}
    knots: dict[str, KnotSeen] = {}
    knots_tied: dict[str, int] = {}
    pending: dict[str, list[str]] = {}
    messages: dict[str, list[RecentMessage]] = {}
    quotes_noted: int = 0


# ---------------------------------------------------------------------------------------------
# evolve

def _evolve_knot(state: State, d: GenericDelta) -> None:
    """Knots (braidlog.projections.knots) tag their knot_lifecycle payloads: KnotOpened, KnotTied …

    Read as plain JSON so that this fold depends on no other module. As in the knots fold, a
    tie of a knot already tied, or opened in another braid, changes nothing.
    """
    p = d.payload
    event, knot_id = p.get("type"), p.get("knot_id")
    if event not in ("KnotOpened", "KnotTied") or not isinstance(knot_id, str):
        return
    seen = state.knots.get(knot_id)
    episode_id = p.get("primary_episode_id") if isinstance(p.get("primary_episode_id"), str) else None
    if event == "KnotOpened":
        if seen is None:
            state.knots[knot_id] = KnotSeen(d.braid_id, episode_id)
        return
    if seen is not None and (seen.tied or seen.braid_id != d.braid_id):
        return
    braid = d.braid_id
    state.knots[knot_id] = KnotSeen(braid, episode_id, tied=True)
    count = state.knots_tied.get(braid, 0) + 1
    state.knots_tied[braid] = count
    if episode_id is not None:
        ep = state.episodes.get(episode_id)
        if ep is None:
            ep = Episode(id=episode_id, braid_id=braid, status="active", opened_at=d.ts, implicit=True)
            state.episodes[episode_id] = ep
        if ep.braid_id == braid:
            span = ep.primary_knot_span
            ep.primary_knot_span = KnotSpan(span.start_knot_id or knot_id, knot_id)
    for fork_id in state.pending.get(braid, ()):
        fork = state.episodes[fork_id].fork
        if fork.knot_deadline is None and count - fork.knots_at_proposal >= fork.ttl_knots:
            fork.knot_deadline = d.ts


def _evolve_message(state: State, d: GenericDelta) -> None:
    text = d.payload.get("text")
    if not isinstance(text, str):
        return
    window = state.messages.get(d.braid_id)
    if window is None:
        window = state.messages[d.braid_id] = []
    prov = d.provenance
    window.append(RecentMessage(d.id, d.ts, text[:MESSAGE_TEXT_LIMIT], prov.kind, prov.episode_id))
    if len(window) > MESSAGE_WINDOW:
        del window[: len(window) - MESSAGE_WINDOW]


def _add_candidate(state: State, ep: Episode, quote: AnchorQuote) -> None:
    if any(c.quote.quote_id == quote.quote_id for c in ep.candidates):
        return
    state.quotes_noted += 1
    ep.candidates.append(Candidate(state.quotes_noted, quote))


def _resolve(state: State, ep: Episode, ts: datetime, status: str, outcome: str) -> None:
    ep.status = status
    ep.fork.resolved_at = ts
    ep.fork.outcome = outcome
    pending = state.pending.get(ep.braid_id)
    if pending and ep.id in pending:
        pending.remove(ep.id)


def _evolve_own(state: State, d: GenericDelta) -> None:
    p = typed(d)
    kind = d.kind
    if kind == "episode_opened":
        if p.episode_id not in state.episodes:
            state.episodes[p.episode_id] = Episode(
                id=p.episode_id, braid_id=d.braid_id, status="active", opened_at=d.ts,
                labels=p.labels, summary_cache=p.summary)
        return
    if kind == "fork_proposed":
        if p.fork_id in state.episodes:
            return
        fork = Fork(parent_episode_id=p.parent_episode_id, score=p.score, rank=p.rank,
                    signal_id=p.signal_id, proposed_at=d.ts, expires_at=p.expires_at,
                    ttl_knots=p.ttl_knots, knots_at_proposal=state.knots_tied.get(d.braid_id, 0),
                    signals=[p.signal_id])
        state.episodes[p.fork_id] = Episode(id=p.fork_id, braid_id=d.braid_id, status="fork_pending",
                                            opened_at=d.ts, labels=p.labels, fork=fork)
        state.pending.setdefault(d.braid_id, []).append(p.fork_id)
        return
    ep = state.episodes.get(p.quote.episode_id if kind == "anchor_quote_noted" else
                            p.fork_id if kind.startswith("fork_") else p.episode_id)
    if ep is None or ep.braid_id != d.braid_id:
        return  # decide never appends these; a raw delta about nothing known changes nothing
    if kind == "episode_labeled":
        ep.labels = p.labels
    elif kind == "episode_knot_linked":
        if p.knot_id not in ep.knot_refs:
            ep.knot_refs.append(p.knot_id)
    elif kind == "episode_edge_added":
        edge = Edge(p.type, p.to_episode_id, p.confidence)
        for i, e in enumerate(ep.edges):
            if e.type == p.type and e.to_episode_id == p.to_episode_id:
                ep.edges[i] = edge
                break
        else:
            ep.edges.append(edge)
    elif kind == "episode_summarized":
        ep.summary_cache = p.summary
    elif kind == "anchor_quote_noted":
        _add_candidate(state, ep, p.quote)
    elif ep.fork is None or ep.status != "fork_pending":
        return
    elif kind == "fork_classified":
        fork = ep.fork
        if p.signal_id not in fork.signals:
            fork.signals.append(p.signal_id)
        fork.verdicts.append(Confirmation(p.classifier, p.signal_id, p.verdict, p.confidence))
        if p.verdict == "reject":
            _resolve(state, ep, d.ts, "rejected", "rejected")
    elif kind == "fork_promoted":
        _resolve(state, ep, d.ts, "active", "promoted")
        ep.continuity = p.buffer
        # The buffer's quotes become the fork's newest candidates, renumbered so that its
        # anchor quotes right after promotion are exactly the buffer's (first = newest).
        chosen = {q.quote_id for q in p.buffer.anchor_quotes}
        ep.candidates = [c for c in ep.candidates if c.quote.quote_id not in chosen]
        for q in reversed(p.buffer.anchor_quotes):
            _add_candidate(state, ep, q)
        if not ep.summary_cache:
            ep.summary_cache = p.buffer.summary.render()
    elif kind == "fork_expired":
        ep.fork.expiry_reason = p.reason
        if p.outcome == "soft_link":
            _resolve(state, ep, d.ts, "linked", "soft_link")
        else:
            _resolve(state, ep, d.ts, "discarded", "discarded")


def evolve(state: State, d: GenericDelta) -> State:
    """Fold one delta: episode and fork kinds, tied knots, and messages (a bounded window)."""
    if d.kind == "message":
        _evolve_message(state, d)
    elif d.kind == "knot_lifecycle":
        _evolve_knot(state, d)
    elif d.kind in KINDS:
        _evolve_own(state, d)
    return state


# ---------------------------------------------------------------------------------------------
# Commands

class _Command(Command, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class OpenEpisode(_Command):
    """Open an episode (a new id when ``episode_id`` is None; give one to make retries safe)."""

    labels: Labels = Labels()
    summary: SummaryText = ""
    episode_id: Ident | None = None


class LabelEpisode(_Command):
    """Replace an episode's labels."""

    episode_id: Ident
    labels: Labels


class LinkKnot(_Command):
    """Add a tied knot to an episode's ``knot_refs``."""

    episode_id: Ident
    knot_id: Ident


class AddEdge(_Command):
    """Add an edge from one episode to another, or change its confidence."""

    episode_id: Ident
    type: str
    to_episode_id: Ident
    confidence: Confidence = 1.0


class SummarizeEpisode(_Command):
    """Replace an episode's summary cache."""

    episode_id: Ident
    summary: SummaryText


class NoteQuote(_Command):
    """Note a candidate anchor quote (a constraint, decision or open question) for an episode."""

    episode_id: Ident
    text: QuoteText
    category: str
    salience: Confidence = 0.5
    source_delta_id: Ident | None = None


class ForkCandidate(_Command):
    """One drift candidate: the labels the conversation drifts towards and a score in [0, 1]."""

    labels: Labels
    score: Confidence


class ProposeForks(_Command):
    """Propose forks off ``parent_episode_id`` from one drift signal (a knot or delta id)."""

    parent_episode_id: Ident
    candidates: list[ForkCandidate]
    signal_id: Ident


class ClassifyFork(_Command):
    """Record a classifier's verdict on a pending fork; enough confirmations promote it."""

    fork_id: Ident
    verdict: str
    classifier: Ident
    confidence: Confidence = 1.0
    signal_id: Ident | None = None


class ExpireForks(_Command):
    """Record the expiry of every pending fork of the braid whose TTL ran out by ``as_of``."""

    as_of: UtcTime | None = None


Command = (OpenEpisode | LabelEpisode | LinkKnot | AddEdge | SummarizeEpisode | NoteQuote
           | ProposeForks | ClassifyFork | ExpireForks)


# ---------------------------------------------------------------------------------------------
# Policy and classifier

class Verdict(Struct, frozen=True):
    """A classifier's answer about one pending fork."""

    verdict: Verdicts
    confidence: float = 1.0


Classifier = Callable[[Episode, ForkCandidate, State], "Verdict | None"]
"""``(pending fork, drift candidate, state) -> Verdict``, or None when the candidate is not about it."""


def repeat_classifier(fork: Episode, candidate: ForkCandidate, state: State) -> Verdict | None:
    """The default classifier: the same labels proposed again off the same parent confirm."""
    if normalize_labels(candidate.labels) == fork.labels:
        return Verdict("confirm", candidate.score)
    return None


@dataclass(frozen=True)
class ForkPolicy:
    """How forks are proposed, confirmed, promoted and expired (defaults from the seed)."""

    top_k: int = 3
    confirmations: int = 2
    ttl_knots: int = 8
    ttl_minutes: float = 15.0
    on_expiry: Literal["soft_link", "discard"] = "soft_link"
    soft_link_factor: float = 0.5
    buffer_min_messages: int = 15
    buffer_max_messages: int = 30
    buffer_minutes: float = 10.0
    classifier: Classifier = repeat_classifier
    classifier_name: str = "repeat"

    def __post_init__(self) -> None:
        def need(ok: bool, field: str, rule: str) -> None:
            if not ok:
                raise ValidationError(f"ForkPolicy.{field}", rule)

        for name in ("top_k", "confirmations", "ttl_knots", "buffer_min_messages"):
            need(type(getattr(self, name)) is int and getattr(self, name) >= 1, name,
                 f"must be an int >= 1, got {getattr(self, name)!r}")
        need(self.ttl_minutes > 0, "ttl_minutes", f"must be > 0, got {self.ttl_minutes!r}")
        need(self.buffer_minutes >= 0, "buffer_minutes", f"must be >= 0, got {self.buffer_minutes!r}")
        need(self.on_expiry in ("soft_link", "discard"), "on_expiry",
             f"must be 'soft_link' or 'discard', got {self.on_expiry!r}")
        need(0.0 <= self.soft_link_factor <= 1.0, "soft_link_factor",
             f"must be in [0, 1], got {self.soft_link_factor!r}")
        need(type(self.buffer_max_messages) is int
             and self.buffer_min_messages <= self.buffer_max_messages <= MESSAGE_WINDOW,
             "buffer_max_messages",
             f"must be an int in [buffer_min_messages, {MESSAGE_WINDOW}], got {self.buffer_max_messages!r}")
        need(callable(self.classifier), "classifier",
             "must be callable (fork, candidate, state) -> Verdict | None")
        need(bool(self.classifier_name) and len(self.classifier_name) <= 120, "classifier_name",
             "must be 1 to 120 characters")


class Expiry(Struct, frozen=True):
    """When and why a pending fork's TTL runs out."""

    fork_id: str
    expired_at: datetime
    reason: str


# ---------------------------------------------------------------------------------------------
# decide

def _field_error(e: msgspec.ValidationError) -> ValidationError:
    rule, sep, path = str(e).rpartition(" - at `$")
    if not sep:
        return ValidationError("command", str(e))
    return ValidationError(path.rstrip("`").lstrip(".") or "command", rule)


def _checked(command: Any) -> Any:
    """The command re-validated against its own constraints (lengths, ranges, time zones)."""
    try:
        return msgspec.convert(msgspec.to_builtins(command, builtin_types=(datetime,)), type(command))
    except msgspec.ValidationError as e:
        raise _field_error(e) from None


def _payload(payload: Struct) -> dict[str, Any]:
    """A payload Struct as the JSON object the log stores (lists, ISO timestamps)."""
    return msgspec.json.decode(msgspec.json.encode(payload))


def normalize_labels(labels: Labels, field: str = "labels") -> Labels:
    """Labels stripped, lower-cased, de-duplicated and sorted; an empty label is refused."""
    out = {}
    for part in ("topics", "intents", "modalities"):
        values = set()
        for i, v in enumerate(getattr(labels, part)):
            s = " ".join(str(v).split()).casefold()
            if not s:
                raise ValidationError(f"{field}.{part}[{i}]", "must not be empty or blank")
            values.add(s)
        out[part] = tuple(sorted(values))
    return Labels(**out)


def _episode(state: State, episode_id: str, ctx: Context, field: str = "episode_id") -> Episode:
    ep = state.episodes.get(episode_id)
    if ep is None or ep.braid_id != ctx.braid_id:
        where = f" (it belongs to braid {ep.braid_id!r})" if ep is not None else ""
        raise Rejected(f"{field}: no episode {episode_id!r} in braid {ctx.braid_id!r}{where}; "
                       "open it first with OpenEpisode")
    return ep


def _writable(ep: Episode, field: str = "episode_id") -> Episode:
    if not ep.visible:
        raise Rejected(f"{field}: episode {ep.id!r} is {ep.status}; open a new episode instead")
    return ep


def _open(command: OpenEpisode, state: State, ctx: Context) -> list[GenericDelta]:
    labels = normalize_labels(command.labels)
    if command.episode_id is not None and command.episode_id in state.episodes:
        ep = state.episodes[command.episode_id]
        if (ep.braid_id == ctx.braid_id and ep.fork is None and ep.labels == labels
                and ep.summary_cache == command.summary and not ep.implicit):
            return []
        raise Rejected(f"episode_id: episode {ep.id!r} already exists with other content; "
                       "use LabelEpisode or SummarizeEpisode to change it, or choose a new id")
    payload = EpisodeOpened(command.episode_id or ctx.new_id(), labels, command.summary)
    return [ctx.delta("episode_opened", _payload(payload))]


def _label(command: LabelEpisode, state: State, ctx: Context) -> list[GenericDelta]:
    ep = _writable(_episode(state, command.episode_id, ctx))
    if ep.status == "fork_pending":
        raise Rejected(f"episode_id: {ep.id!r} is fork_pending and its labels are what the "
                       "classifier matches; reject it and propose a new fork instead")
    labels = normalize_labels(command.labels)
    if labels == ep.labels:
        return []
    return [ctx.delta("episode_labeled", _payload(EpisodeLabeled(ep.id, labels)))]


def _link(command: LinkKnot, state: State, ctx: Context) -> list[GenericDelta]:
    ep = _writable(_episode(state, command.episode_id, ctx))
    knot = state.knots.get(command.knot_id)
    if knot is None or not knot.tied:
        raise Rejected(f"knot_id: no tied knot {command.knot_id!r}; tie the knot before linking it")
    if knot.braid_id != ctx.braid_id:
        raise Rejected(f"knot_id: knot {command.knot_id!r} belongs to braid {knot.braid_id!r}, "
                       f"not {ctx.braid_id!r}")
    if command.knot_id in ep.knot_refs or knot.primary_episode_id == ep.id:
        return []
    payload = EpisodeKnotLinked(ep.id, command.knot_id)
    return [ctx.delta("episode_knot_linked", _payload(payload))]


def _edge_delta(ctx: Context, episode_id: str, type: str, to: str, confidence: float) -> GenericDelta:
    payload = EpisodeEdgeAdded(episode_id, type, to, confidence)  # type: ignore[arg-type]
    return ctx.delta("episode_edge_added", _payload(payload), confidence=confidence)


def _add_edge(command: AddEdge, state: State, ctx: Context) -> list[GenericDelta]:
    if command.type not in EDGE_TYPES:
        raise ValidationError("type", f"must be one of {', '.join(EDGE_TYPES)}; got {command.type!r}")
    if command.to_episode_id == command.episode_id:
        raise ValidationError("to_episode_id",
                              "must differ from episode_id: an episode has no edge to itself")
    ep = _writable(_episode(state, command.episode_id, ctx))
    _writable(_episode(state, command.to_episode_id, ctx, "to_episode_id"), "to_episode_id")
    for e in ep.edges:
        if e.type == command.type and e.to_episode_id == command.to_episode_id:
            if e.confidence == command.confidence:
                return []
    return [_edge_delta(ctx, ep.id, command.type, command.to_episode_id, command.confidence)]


def _summarize(command: SummarizeEpisode, state: State, ctx: Context) -> list[GenericDelta]:
    ep = _writable(_episode(state, command.episode_id, ctx))
    if ep.summary_cache == command.summary:
        return []
    payload = EpisodeSummarized(ep.id, command.summary)
    return [ctx.delta("episode_summarized", _payload(payload))]


def _quote_key(text: str) -> str:
    return " ".join(text.split()).casefold()


def _note(command: NoteQuote, state: State, ctx: Context) -> list[GenericDelta]:
    if command.category not in QUOTE_CATEGORIES:
        raise ValidationError("category", f"must be one of {', '.join(QUOTE_CATEGORIES)}; "
                                          f"got {command.category!r}")
    text = " ".join(command.text.split())
    if not text:
        raise ValidationError("text", "must not be blank")
    ep = _writable(_episode(state, command.episode_id, ctx))
    key = _quote_key(text)
    for c in ep.candidates:
        if c.quote.category == command.category and _quote_key(c.quote.text) == key:
            return []
    source = command.source_delta_id
    if source is not None and ctx.log is not None:
        record = ctx.log.get(source)
        if record is None:
            raise Rejected(f"source_delta_id: no delta {source!r} in the log; quote a delta that exists")
        if record.delta.braid_id != ctx.braid_id:
            raise Rejected(f"source_delta_id: delta {source!r} belongs to braid "
                           f"{record.delta.braid_id!r}, not {ctx.braid_id!r}")
    quote = AnchorQuote(ctx.new_id(), ep.id, text, command.category,  # type: ignore[arg-type]
                        command.salience, source)
    refs = Refs(episodes=(ep.id,), deltas=(source,)) if source else Refs(episodes=(ep.id,))
    return [ctx.delta("anchor_quote_noted", _payload(AnchorQuoteNoted(quote)), refs=refs)]


def _ranked(command: ProposeForks, parent: Episode, top_k: int) -> list[tuple[Labels, float]]:
    """Candidates normalized, merged by labels (best score), ranked by score, cut to the top K."""
    if not command.candidates:
        raise ValidationError("candidates", "must name at least one drift candidate")
    best: dict[Labels, float] = {}
    for i, c in enumerate(command.candidates):
        labels = normalize_labels(c.labels, f"candidates[{i}].labels")
        if not labels.topics and not labels.intents:
            raise ValidationError(f"candidates[{i}].labels",
                                  "must name at least one topic or intent to drift towards")
        if labels == parent.labels:
            raise ValidationError(f"candidates[{i}].labels",
                                  "equal the parent episode's labels: that is not drift")
        best[labels] = max(best.get(labels, 0.0), c.score)
    ranked = sorted(best.items(), key=lambda kv: (-kv[1], msgspec.json.encode(kv[0])))
    return ranked[:top_k]


def _classified(ctx: Context, fork: Episode, verdict: str, classifier: str, signal_id: str,
                confidence: float) -> GenericDelta:
    payload = ForkClassified(fork.id, verdict, classifier, signal_id, confidence)  # type: ignore[arg-type]
    return ctx.delta("fork_classified", _payload(payload), confidence=confidence)


def _promotion(ctx: Context, state: State, fork: Episode, confirmations: int,
               policy: ForkPolicy) -> list[GenericDelta]:
    buffer = continuity_buffer(state, fork, ctx.now, policy)
    parent_id = fork.fork.parent_episode_id
    payload = ForkPromoted(fork.id, parent_id, confirmations, buffer)
    refs = Refs(episodes=(parent_id,), deltas=buffer.message_ids)
    return [
        ctx.delta("fork_promoted", _payload(payload), refs=refs),
        _edge_delta(ctx, fork.id, "forked_from", parent_id, fork.fork.score),
    ]


def _expiries(state: State, ctx: Context, policy: ForkPolicy,
              as_of: datetime) -> tuple[list[GenericDelta], set[str]]:
    out: list[GenericDelta] = []
    gone: set[str] = set()
    outcome = "soft_link" if policy.on_expiry == "soft_link" else "discarded"
    for e in expired_forks(state, ctx.braid_id, as_of):
        fork = state.episodes[e.fork_id]
        parent_id = fork.fork.parent_episode_id
        payload = ForkExpired(fork.id, parent_id, e.reason, e.expired_at, outcome)  # type: ignore[arg-type]
        out.append(ctx.delta("fork_expired", _payload(payload)))
        if outcome == "soft_link":
            confidence = round(fork.fork.score * policy.soft_link_factor, 6)
            out.append(_edge_delta(ctx, fork.id, "soft_link", parent_id, confidence))
        gone.add(fork.id)
    return out, gone


def _propose(command: ProposeForks, state: State, ctx: Context, policy: ForkPolicy) -> list[GenericDelta]:
    parent = _episode(state, command.parent_episode_id, ctx, "parent_episode_id")
    if parent.status != "active":
        raise Rejected(f"parent_episode_id: episode {parent.id!r} is {parent.status}; "
                       "forks grow only from an active episode")
    ranked = _ranked(command, parent, policy.top_k)
    out, expired = _expiries(state, ctx, policy, ctx.now)
    signal = command.signal_id
    children = [e for e in state.episodes.values()
                if e.fork is not None and e.fork.parent_episode_id == parent.id]
    pending = [e for e in children if e.status == "fork_pending" and e.id not in expired]
    confirmations = {f.id: f.fork.confirmations for f in pending}
    judged: set[str] = set()    # forks with a verdict from this signal: one each
    resolved: set[str] = set()  # forks promoted or rejected by this signal
    new: list[tuple[int, Labels, float]] = []
    for rank, (labels, score) in enumerate(ranked, start=1):
        if any(c.labels == labels and (signal in c.fork.signals or c.fork.outcome == "promoted")
               for c in children):
            continue  # this signal was already applied, or this drift already forked
        candidate = ForkCandidate(labels=labels, score=score)
        recognized = False
        for fork in pending:
            verdict = policy.classifier(fork, candidate, state)
            if verdict is None:
                continue
            recognized = True
            if signal in fork.fork.signals or fork.id in judged:
                continue
            judged.add(fork.id)
            out.append(_classified(ctx, fork, verdict.verdict, policy.classifier_name, signal,
                                   verdict.confidence))
            if verdict.verdict == "reject":
                resolved.add(fork.id)
                continue
            confirmations[fork.id] += 1
            if confirmations[fork.id] >= policy.confirmations:
                out.extend(_promotion(ctx, state, fork, confirmations[fork.id], policy))
                resolved.add(fork.id)
        if not recognized:
            new.append((rank, labels, score))
    room = policy.top_k - sum(1 for f in pending if f.id not in resolved)
    expires_at = ctx.now + timedelta(minutes=policy.ttl_minutes)
    for rank, labels, score in new[:max(room, 0)]:
        payload = ForkProposed(ctx.new_id(), parent.id, labels, score, rank, signal,
                               policy.ttl_knots, expires_at)
        out.append(ctx.delta("fork_proposed", _payload(payload), confidence=score))
    return out


def _classify(command: ClassifyFork, state: State, ctx: Context, policy: ForkPolicy) -> list[GenericDelta]:
    if command.verdict not in ("confirm", "reject"):
        raise ValidationError("verdict", f"must be 'confirm' or 'reject'; got {command.verdict!r}")
    ep = _episode(state, command.fork_id, ctx, "fork_id")
    if ep.fork is None:
        raise Rejected(f"fork_id: episode {ep.id!r} was opened, not proposed as a fork; "
                       "only proposed forks are classified")
    signal = command.signal_id or command.classifier
    fork = ep.fork
    if any(v.classifier == command.classifier and v.signal_id == signal for v in fork.verdicts):
        return []
    if ep.status == "active" and command.verdict == "confirm":
        return []  # promoted already: a further confirmation has nothing left to do
    if ep.status != "fork_pending":
        raise Rejected(f"fork_id: fork {ep.id!r} is no longer pending (it was {fork.outcome}); "
                       "propose a new fork if the drift returns")
    expiry = fork_expiry(state, ep.id)
    if expiry is not None and expiry.expired_at <= ctx.now:
        raise Rejected(f"fork_id: fork {ep.id!r} expired at {expiry.expired_at.isoformat()} "
                       f"({expiry.reason} TTL); record it with ExpireForks")
    out = [_classified(ctx, ep, command.verdict, command.classifier, signal, command.confidence)]
    if command.verdict == "confirm":
        n = fork.confirmations + 1
        if n >= policy.confirmations:
            out.extend(_promotion(ctx, state, ep, n, policy))
    return out


def _expire(command: ExpireForks, state: State, ctx: Context, policy: ForkPolicy) -> list[GenericDelta]:
    as_of = command.as_of or ctx.now
    if as_of > ctx.now:
        raise ValidationError("as_of", f"must not be later than now ({ctx.now.isoformat()}): "
                                       "a fork cannot be expired ahead of time")
    return _expiries(state, ctx, policy, as_of)[0]


def decide(command: Any, state: State, ctx: Context, policy: ForkPolicy | None = None) -> list[GenericDelta]:
    """The deltas a command yields against ``state``: [] when already done; refusals raise."""
    policy = policy or DEFAULT_POLICY
    command = _checked(command)
    match command:
        case OpenEpisode():
            return _open(command, state, ctx)
        case LabelEpisode():
            return _label(command, state, ctx)
        case LinkKnot():
            return _link(command, state, ctx)
        case AddEdge():
            return _add_edge(command, state, ctx)
        case SummarizeEpisode():
            return _summarize(command, state, ctx)
        case NoteQuote():
            return _note(command, state, ctx)
        case ProposeForks():
            return _propose(command, state, ctx, policy)
        case ClassifyFork():
            return _classify(command, state, ctx, policy)
        case ExpireForks():
            return _expire(command, state, ctx, policy)
    raise ValidationError("command", f"episodes does not know {type(command).__name__}; "
                                     f"use one of {', '.join(c.__name__ for c in Command.__args__)}")


# ---------------------------------------------------------------------------------------------
# Queries

def apportion(n: int, weights: Iterable[int] = tuple(w for _, w in CATEGORY_WEIGHTS)) -> list[int]:
    """Split ``n`` seats by integer weights: largest remainder, ties to fewer seats, then order."""
    ws = list(weights)
    total = sum(ws)
    seats = [n * w // total for w in ws]
    rems = [n * w % total for w in ws]
    left = n - sum(seats)
    order = sorted(range(len(ws)), key=lambda i: (-rems[i], seats[i], i))
    for i in order[:left]:
        seats[i] += 1
    return seats


def _rank_key(c: Candidate) -> tuple[float, int]:
    return (-c.quote.salience, -c.order)


def select_anchor_quotes(candidates: Iterable[Candidate],
                         limit: int = MAX_ANCHOR_QUOTES) -> list[AnchorQuote]:
    """Choose up to ``limit`` anchor quotes by weights 70/20/10 (docs/braid-episodes.md, "Anchor quotes").

    1. Candidates with the same category and text (case and spacing aside) count once.
    2. ``n = min(limit, candidates)``; ``apportion(n)`` gives each category its seats.
    3. A category with fewer candidates than seats gives the rest, one at a time, to the
       heaviest category that still has candidates left.
    4. Within a category: higher salience first, then the most recently noted.
    5. Quotes are listed constraints, decisions, open questions, each in that rank order.
    """
    pools: dict[str, list[Candidate]] = {c: [] for c in QUOTE_CATEGORIES}
    seen: set[tuple[str, str]] = set()
    for c in sorted(candidates, key=_rank_key):
        key = (c.quote.category, _quote_key(c.quote.text))
        if key not in seen and c.quote.category in pools:
            seen.add(key)
            pools[c.quote.category].append(c)
    n = min(limit, sum(len(p) for p in pools.values()))
    seats = dict(zip(QUOTE_CATEGORIES, apportion(n)))
    take = {c: min(seats[c], len(pools[c])) for c in QUOTE_CATEGORIES}
    left = n - sum(take.values())
    while left > 0:
        for c in QUOTE_CATEGORIES:
            if len(pools[c]) > take[c]:
                take[c] += 1
                left -= 1
                break
    return [c.quote for cat in QUOTE_CATEGORIES for c in pools[cat][: take[cat]]]


def anchor_quotes(state: State, episode_id: str) -> list[AnchorQuote]:
    """An episode's anchor quotes (2 to 5 once it has 2 candidates; fewer candidates, fewer quotes)."""
    ep = state.episodes.get(episode_id)
    return [] if ep is None else select_anchor_quotes(ep.candidates)


def episode(state: State, episode_id: str) -> Episode | None:
    """One episode, or None."""
    return state.episodes.get(episode_id)


def episodes(state: State, braid_id: str, *, include_hidden: bool = False) -> list[Episode]:
    """A braid's episodes in the order they were opened; rejected and discarded forks on request."""
    return [e for e in state.episodes.values()
            if e.braid_id == braid_id and (include_hidden or e.visible)]


def edges_to(state: State, episode_id: str) -> list[tuple[str, Edge]]:
    """Every edge pointing at an episode, as ``(from_episode_id, edge)``."""
    return [(e.id, edge) for e in state.episodes.values() for edge in e.edges
            if edge.to_episode_id == episode_id]


def episodes_of_knot(state: State, knot_id: str) -> list[str]:
    """The episodes a knot belongs to: its primary episode first, then those linking it."""
    knot = state.knots.get(knot_id)
    primary = [knot.primary_episode_id] if knot is not None and knot.primary_episode_id else []
    return primary + [e.id for e in state.episodes.values()
                      if knot_id in e.knot_refs and e.id not in primary]


def fork_expiry(state: State, fork_id: str) -> Expiry | None:
    """When a pending fork's TTL runs out given the knots so far: the earlier of both TTLs.

    The minutes TTL is always known (``expires_at``); the knots TTL is known once the
    ``ttl_knots``-th knot after the proposal is tied (its delta's ts). None if not pending.
    """
    ep = state.episodes.get(fork_id)
    if ep is None or ep.fork is None or ep.status != "fork_pending":
        return None
    f = ep.fork
    if f.knot_deadline is not None and f.knot_deadline <= f.expires_at:
        return Expiry(fork_id, f.knot_deadline, "knots")
    return Expiry(fork_id, f.expires_at, "minutes")


def expired_forks(state: State, braid_id: str, as_of: datetime) -> list[Expiry]:
    """The braid's pending forks whose TTL has run out by ``as_of``, in proposal order."""
    out = []
    for fork_id in state.pending.get(braid_id, ()):
        e = fork_expiry(state, fork_id)
        if e is not None and e.expired_at <= as_of:
            out.append(e)
    return out


def pending_forks(state: State, braid_id: str, as_of: datetime | None = None) -> list[Episode]:
    """The braid's pending forks in proposal order; with ``as_of``, only those not yet expired."""
    gone = {e.fork_id for e in expired_forks(state, braid_id, as_of)} if as_of is not None else set()
    return [state.episodes[f] for f in state.pending.get(braid_id, ()) if f not in gone]


def recent_messages(state: State, braid_id: str, now: datetime,
                    policy: ForkPolicy | None = None) -> list[RecentMessage]:
    """The messages a continuity buffer keeps: those of the last ``buffer_minutes``, at least
    ``buffer_min_messages`` and at most ``buffer_max_messages`` (the newest, in log order)."""
    policy = policy or DEFAULT_POLICY
    window = state.messages.get(braid_id, [])
    cutoff = now - timedelta(minutes=policy.buffer_minutes)
    by_time = sum(1 for m in window if m.ts >= cutoff)
    n = min(max(by_time, policy.buffer_min_messages), policy.buffer_max_messages)
    return window[-n:] if n else []


def compact_summary(state: State, fork: Episode) -> CompactSummary:
    """What we were doing (the parent's summary or labels), the goal (the fork's labels),
    and what is unresolved (the parent's open questions), deterministically from state."""
    parent = state.episodes.get(fork.fork.parent_episode_id) if fork.fork else None

    def describe(labels: Labels) -> str:
        topics, intents = ", ".join(labels.topics), ", ".join(labels.intents)
        return f"{intents} on {topics}" if topics and intents else intents or topics

    doing = ""
    unresolved: list[str] = []
    if parent is not None:
        doing = parent.summary_cache or describe(parent.labels) or f"episode {parent.id}"
        opens = [c for c in sorted(parent.candidates, key=_rank_key)
                 if c.quote.category == "open_question"]
        unresolved = [c.quote.text for c in opens[:3]]
    return CompactSummary(doing=doing[:2000], goal=describe(fork.labels)[:2000],
                          unresolved=" | ".join(unresolved)[:2000])


def continuity_buffer(state: State, fork: Episode, now: datetime,
                      policy: ForkPolicy | None = None) -> ContinuityBuffer:
    """The buffer a fork gets on promotion: recent messages, a compact summary, anchor quotes
    chosen from the parent's and the fork's candidates."""
    policy = policy or DEFAULT_POLICY
    parent = state.episodes.get(fork.fork.parent_episode_id) if fork.fork else None
    pool = list(fork.candidates) + (list(parent.candidates) if parent is not None else [])
    messages = recent_messages(state, fork.braid_id, now, policy)
    return ContinuityBuffer(
        message_ids=tuple(m.delta_id for m in messages),
        summary=compact_summary(state, fork),
        anchor_quotes=tuple(select_anchor_quotes(pool)),
    )


DEFAULT_POLICY = ForkPolicy()
_READS = frozenset(KINDS) | {"message", "knot_lifecycle"}


def decider(policy: ForkPolicy | None = None) -> Decider:
    """The episodes decider under ``policy`` (a pluggable classifier, TTLs, K, buffer sizes)."""
    policy = policy or DEFAULT_POLICY

    def decide_with_policy(command: Any, state: State, ctx: Context) -> list[GenericDelta]:
        return decide(command, state, ctx, policy)

    return Decider("episodes", 1, State(), evolve, kinds=_READS, state_type=State,
                   decide=decide_with_policy)


PROJECTION = decider()
PROJECTIONS = [PROJECTION]
