"""Forks, pending first (seed: "Forks and drift handling"): policy, classifier, TTL and the
continuity buffer a promoted fork carries.

A drift proposal with fork confidence below ``MIN_FORK_CONFIDENCE`` (0.65) opens nothing. A
proposal is the fork's first confirmation; the same parent and labels proposed again while it
is pending (the default ``repeat_classifier``), or a classifier's confirm, adds one, and the
fork's confidence is the highest seen. At ``ForkPolicy.confirmations`` (2) the fork is promoted
to active with its continuity buffer. A pending fork expires ``ttl_knots`` (8) tied knots or
``ttl_minutes`` (15) after its proposal, whichever comes first, and decays to a ``soft_link``
(confidence × ``SOFT_LINK_FACTOR``) or is discarded, as its proposal says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from msgspec import Struct

from braidlog import Command, Confidence, ValidationError

from .fold import expiry_of
from .model import (
    CONFIRMATIONS,
    MESSAGE_WINDOW,
    TTL_KNOTS,
    TTL_MINUTES,
    CompactSummary,
    ContinuityBuffer,
    Episode,
    Labels,
    RecentMessage,
    State,
    Verdicts,
    normalize_labels,
)
from .quotes import rank_key, select_anchor_quotes

__all__ = [
    "Verdict", "Classifier", "repeat_classifier", "ForkPolicy", "DEFAULT_POLICY", "Expiry",
    "ForkCandidate", "fork_expiry", "expired_forks", "pending_forks", "fork_status", "recent_messages",
    "compact_summary", "continuity_buffer",
]


class ForkCandidate(Command, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One drift candidate: the labels the conversation drifts towards and a score in [0, 1]."""

    labels: Labels
    score: Confidence


class Verdict(Struct, frozen=True):
    """A classifier's answer about one pending fork."""

    verdict: Verdicts
    confidence: float = 1.0


Classifier = Callable[[Episode, "ForkCandidate", State], "Verdict | None"]
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
    confirmations: int = CONFIRMATIONS
    ttl_knots: int = TTL_KNOTS
    ttl_minutes: float = TTL_MINUTES
    on_expiry: Literal["soft_link", "discard"] = "soft_link"
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



def fork_expiry(state: State, fork_id: str) -> Expiry | None:
    """When a pending fork's TTL runs out given the knots so far: the earlier of both TTLs.

    The minutes TTL is always known (``expires_at``); the knots TTL is known once the
    ``ttl_knots``-th knot after the proposal is tied (its delta's ts). None if not pending.
    """
    ep = state.episodes.get(fork_id)
    if ep is None or ep.fork is None or ep.status != "fork_pending":
        return None
    return Expiry(fork_id, *expiry_of(ep.fork))


def expired_forks(state: State, braid_id: str, as_of: datetime) -> list[Expiry]:
    """The braid's pending forks whose TTL has run out by ``as_of``, in proposal order."""
    out = []
    for fork_id in state.pending.get(braid_id, ()):
        e = fork_expiry(state, fork_id)
        if e is not None and e.expired_at <= as_of:
            out.append(e)
    return out


def pending_forks(state: State, braid_id: str, as_of: datetime | None = None) -> list[Episode]:
    """The braid's forks still pending at ``as_of`` (default: the state's own time, the latest
    ts it folded, by which the fold already expired every fork due), in proposal order."""
    gone = {e.fork_id for e in expired_forks(state, braid_id, as_of)} if as_of is not None else set()
    return [state.episodes[f] for f in state.pending.get(braid_id, ()) if f not in gone]


def fork_status(state: State, fork_id: str, as_of: datetime | None = None) -> str | None:
    """A fork's status at ``as_of`` (default: the state's own time): ``fork_pending``,
    ``active`` (promoted), ``rejected``, ``linked`` (decayed to a soft link) or ``discarded``;
    a pending fork whose TTL ran out by ``as_of`` reads as what it decays to. None: no fork."""
    ep = state.episodes.get(fork_id)
    if ep is None or ep.fork is None:
        return None
    if ep.status == "fork_pending" and as_of is not None:
        expiry = fork_expiry(state, fork_id)
        if expiry is not None and expiry.expired_at <= as_of:
            return "linked" if ep.fork.on_expiry == "soft_link" else "discarded"
    return ep.status


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
        opens = [c for c in sorted(parent.candidates, key=rank_key)
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
