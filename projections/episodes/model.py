"""The episodes model: constants from the seed, payload schemas (declared as kinds), and state.

Seed sections "Episodes" (required fields, edge types) and "Forks and drift handling" (TTL
defaults, continuity buffer). NOTE: payload class names may be stored; never rename one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from braidlog import Confidence, Ident, UtcTime, ValidationError, declare

from .quotes import AnchorQuote, Candidate, select_anchor_quotes

OWNER = "episodes"

EdgeType = Literal["related_to", "forked_from", "resumed_from", "soft_link", "contradicts", "depends_on"]
#: The seed's six episode edge types (v0).
EDGE_TYPES: tuple[str, ...] = ("related_to", "forked_from", "resumed_from", "soft_link",
                               "contradicts", "depends_on")

#: Messages kept per braid for continuity buffers (the seed's upper bound, 30).
MESSAGE_WINDOW = 30
MESSAGE_TEXT_LIMIT = 500

# Forks (seed "Forks and drift handling"; the numbers are the Braid reference implementation's).
#: A drift proposal below this fork confidence opens no fork.
MIN_FORK_CONFIDENCE = 0.65
#: Confirmations that promote a pending fork (its proposal is the first).
CONFIRMATIONS = 2
#: A pending fork expires this many tied knots or minutes after its proposal, whichever first.
TTL_KNOTS = 8
TTL_MINUTES = 15.0
#: A fork that decays to a soft link keeps this share of its confidence on the edge.
SOFT_LINK_FACTOR = 0.5

Status = Literal["active", "fork_pending", "rejected", "linked", "discarded"]
Verdicts = Literal["confirm", "reject"]

Label = Annotated[str, Meta(min_length=1, max_length=80)]
SummaryText = Annotated[str, Meta(max_length=2000)]
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
    on_expiry: Literal["soft_link", "discarded"] = "soft_link"


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
    on_expiry: str = "soft_link"  # "soft_link" or "discarded", as the proposal said

    @property
    def confirmations(self) -> int:
        """The proposal, plus every confirm verdict (a repeated proposal is one)."""
        return 1 + sum(1 for v in self.verdicts if v.verdict == "confirm")

    @property
    def confidence(self) -> float:
        """The fork's confidence: the highest of its proposal's score and its confirmations'."""
        return max([self.score] + [v.confidence for v in self.verdicts if v.verdict == "confirm"])


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
    def fork_record(self) -> Fork:
        """``fork`` of an episode known to be a fork (every id ``State.pending`` holds is one)."""
        assert self.fork is not None, f"episode {self.id} is not a fork"
        return self.fork

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
    clock: dict[str, datetime] = {}  # per braid, the latest ts folded: "now" as far as it knows
    next_expiry: dict[str, datetime] = {}  # per braid, the earliest minutes-TTL of a pending fork




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
