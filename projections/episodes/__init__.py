"""Episodes and forks: overlapping overlays over knots and deltas, and pending-first forks.

An episode groups knots and deltas by time, topic and intent; episodes overlap and point at
each other through typed edges. Every knot's primary episode gets its ``primary_knot_span``
from the knot's ``knot_lifecycle`` delta; other knots join through ``knot_refs``. Anchor quotes
are chosen from noted candidates by weights constraints / decisions / open_questions =
70 / 20 / 10. Forks are pending-first (``forks``): a drift proposal at fork confidence 0.65 or
more opens a ``fork_pending`` episode and is its first confirmation; at 2 confirmations it is
promoted with its continuity buffer; 8 knots or 15 minutes after its proposal, whichever comes
first, it expires and decays to a ``soft_link`` or is discarded.

Where to find what (docs/braid-episodes.md maps the seed's terms to the kinds):

- ``model``: the seed's constants, the payload schemas (declared as kinds here), the state.
- ``fold``: ``evolve``, the pure fold, with expiry as a function of the time folded.
- ``rules``: ``check``, every rule by name, run at the boundary.
- ``forks``: ``ForkPolicy``, the classifier, TTLs, expiry queries, the continuity buffer.
- ``quotes``: anchor-quote selection (70/20/10).
- ``commands``: the commands and ``decide``, which only builds deltas.
- ``queries``: reading episodes.
"""

from __future__ import annotations

from typing import Any

from braidlog import Boundary, Context, Decider, GenericDelta

from .commands import (
    AddEdge,
    ClassifyFork,
    Command,
    ExpireForks,
    ForkCandidate,
    LabelEpisode,
    LinkKnot,
    NoteQuote,
    OpenEpisode,
    ProposeForks,
    SummarizeEpisode,
    decide,
)
from .fold import evolve
from .forks import (
    DEFAULT_POLICY,
    Classifier,
    Expiry,
    ForkPolicy,
    Verdict,
    compact_summary,
    continuity_buffer,
    expired_forks,
    fork_expiry,
    fork_status,
    pending_forks,
    recent_messages,
    repeat_classifier,
)
from .model import (
    CONFIRMATIONS,
    EDGE_TYPES,
    KINDS,
    MESSAGE_WINDOW,
    MIN_FORK_CONFIDENCE,
    SOFT_LINK_FACTOR,
    TTL_KNOTS,
    TTL_MINUTES,
    AnchorQuoteNoted,
    CompactSummary,
    Confirmation,
    ContinuityBuffer,
    Edge,
    Episode,
    EpisodeEdgeAdded,
    EpisodeKnotLinked,
    EpisodeLabeled,
    EpisodeOpened,
    EpisodeSummarized,
    Fork,
    ForkClassified,
    ForkExpired,
    ForkPromoted,
    ForkProposed,
    KnotSeen,
    KnotSpan,
    Labels,
    RecentMessage,
    State,
    normalize_labels,
)
from .queries import anchor_quotes, edges_to, episode, episodes, episodes_of_knot
from .quotes import (
    CATEGORY_WEIGHTS,
    MAX_ANCHOR_QUOTES,
    MIN_ANCHOR_QUOTES,
    QUOTE_CATEGORIES,
    AnchorQuote,
    Candidate,
    apportion,
    select_anchor_quotes,
)
from .rules import check

__all__ = [
    "EDGE_TYPES", "QUOTE_CATEGORIES", "CATEGORY_WEIGHTS", "MIN_ANCHOR_QUOTES",
    "MAX_ANCHOR_QUOTES", "MESSAGE_WINDOW", "KINDS", "MIN_FORK_CONFIDENCE", "CONFIRMATIONS",
    "TTL_KNOTS", "TTL_MINUTES", "SOFT_LINK_FACTOR",
    "Labels", "KnotSpan", "Edge", "AnchorQuote", "CompactSummary", "ContinuityBuffer",
    "EpisodeOpened", "EpisodeLabeled", "EpisodeKnotLinked", "EpisodeEdgeAdded",
    "EpisodeSummarized", "AnchorQuoteNoted", "ForkProposed", "ForkClassified", "ForkPromoted",
    "ForkExpired",
    "Candidate", "Confirmation", "Fork", "Episode", "RecentMessage", "KnotSeen", "State",
    "evolve", "check",
    "OpenEpisode", "LabelEpisode", "LinkKnot", "AddEdge", "SummarizeEpisode", "NoteQuote",
    "ForkCandidate", "ProposeForks", "ClassifyFork", "ExpireForks", "Command",
    "Verdict", "Classifier", "repeat_classifier", "ForkPolicy", "DEFAULT_POLICY", "Expiry",
    "decide", "decider",
    "apportion", "select_anchor_quotes", "anchor_quotes", "episode", "episodes", "edges_to",
    "episodes_of_knot", "pending_forks", "fork_expiry", "fork_status", "expired_forks",
    "recent_messages", "continuity_buffer", "compact_summary", "normalize_labels",
    "PROJECTION", "PROJECTIONS",
]


def decider(policy: ForkPolicy | None = None) -> Decider:
    """The episodes projection under ``policy`` (a pluggable classifier, TTLs, K, buffer
    sizes). It reads every delta: a fork's expiry follows the time of the log."""
    policy = policy or DEFAULT_POLICY

    def decide_with_policy(command: Any, state: State, ctx: Context) -> list[GenericDelta]:
        return decide(command, state, ctx, policy)

    def check_with_policy(state: State, d: GenericDelta, at: Boundary) -> None:
        check(state, d, at, policy)

    return Decider("episodes", 2, State(), evolve, kinds=None, state_type=State,
                   check=check_with_policy, decide=decide_with_policy)


PROJECTION = decider()
PROJECTIONS = [PROJECTION]
