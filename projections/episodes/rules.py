"""The episode and fork rules, by name, run at the boundary on every delta the projection reads.

Each refusal names its rule and its source in the seed (sections "Episodes" and "Forks and
drift handling"; the numbers are the Braid reference implementation's):

- ``episode-id-once``: an episode id names one episode (a fork is an episode).
- ``episode-exists``: a delta about an episode names one of its own braid.
- ``episode-writable``: a rejected or discarded fork takes no labels, links, edges, summaries
  or quotes.
- ``fork-labels-fixed``: a pending fork's labels are what its classifier matches: not relabeled.
- ``knot-link-tied``: a knot joins an episode once tied, in the episode's braid.
- ``edge-to-an-episode``: an edge points at another episode of the braid, one still writable.
- ``quote-source-exists``: an anchor quote's source is a delta of the braid.
- ``fork-from-active-parent``: a fork is proposed off an active episode of its braid.
- ``fork-is-drift``: its labels name a topic or intent, and differ from its parent's.
- ``fork-confidence-threshold``: a proposal below fork confidence 0.65 opens no fork.
- ``fork-pending``: a verdict, promotion or expiry names a pending fork; a verdict or promotion
  is refused once the fork's TTL ran out (8 knots or 15 minutes, whichever first).
- ``fork-promotion-confirmed``: a promotion carries the fork's own confirmation count (its
  proposal, plus every confirm), which reaches the policy's ``confirmations`` (2).
- ``fork-expires-at-its-ttl``: an expiry is recorded at or after the TTL it names ran out.
"""

from __future__ import annotations

from typing import Any

from braidlog import Boundary, GenericDelta, refuse, typed

from .fold import expiry_of
from .forks import ForkPolicy
from .model import MIN_FORK_CONFIDENCE, Episode, ForkProposed, State, normalize_labels

__all__ = ["check"]


def check(state: State, d: GenericDelta, at: Boundary, policy: ForkPolicy) -> None:
    """Refuse ``d`` naming the rule it breaks (module doc); messages and knot ties are facts
    these rules do not hold."""
    kind = d.kind
    if kind == "message" or kind == "knot_lifecycle" or not kind.startswith(("episode_", "fork_", "anchor_")):
        return
    p = typed(d)
    braid = d.braid_id
    if kind == "episode_opened":
        if p.episode_id in state.episodes:
            raise refuse("episode-id-once", f"episode {p.episode_id!r} already exists; use "
                         "LabelEpisode or SummarizeEpisode to change it, or choose a new id")
    elif kind == "fork_proposed":
        _check_proposal(state, d, p)
    elif kind in ("fork_classified", "fork_promoted", "fork_expired"):
        _check_fork_event(state, d, p, kind, policy)
    else:
        episode_id = p.quote.episode_id if kind == "anchor_quote_noted" else p.episode_id
        ep = _writable(state, episode_id, braid)
        if kind == "episode_labeled" and ep.status == "fork_pending":
            raise refuse("fork-labels-fixed", f"{ep.id!r} is fork_pending and its labels are what "
                         "the classifier matches; reject it and propose a new fork instead")
        if kind == "episode_knot_linked":
            knot = state.knots.get(p.knot_id)
            if knot is None or not knot.tied or knot.braid_id != braid:
                what = "no tied knot" if knot is None or not knot.tied else f"knot of braid {knot.braid_id!r}"
                raise refuse("knot-link-tied", f"{p.knot_id!r} is {what}; tie the knot in braid "
                             f"{braid!r} before linking it")
        elif kind == "episode_edge_added":
            if p.to_episode_id == p.episode_id:
                raise refuse("edge-to-an-episode", "an episode has no edge to itself")
            _writable(state, p.to_episode_id, braid, "edge-to-an-episode")
        elif kind == "anchor_quote_noted" and p.quote.source_delta_id is not None:
            record = at.log.get(p.quote.source_delta_id)
            if record is None or record.delta.braid_id != braid:
                what = "no delta in the log" if record is None else f"of braid {record.delta.braid_id!r}"
                raise refuse("quote-source-exists", f"source_delta_id {p.quote.source_delta_id!r} is "
                             f"{what}; quote a delta of braid {braid!r}")


def _writable(state: State, episode_id: str, braid: str, rule: str = "episode-exists") -> Episode:
    ep = state.episodes.get(episode_id)
    if ep is None or ep.braid_id != braid:
        where = f" (it belongs to braid {ep.braid_id!r})" if ep is not None else ""
        raise refuse(rule, f"no episode {episode_id!r} in braid {braid!r}{where}; open it first")
    if not ep.visible:
        raise refuse("episode-writable" if rule == "episode-exists" else rule,
                     f"episode {ep.id!r} is {ep.status}; open a new episode instead")
    return ep


def _check_proposal(state: State, d: GenericDelta, p: ForkProposed) -> None:
    if p.fork_id in state.episodes:
        raise refuse("episode-id-once", f"fork {p.fork_id!r} already exists; a new fork takes a new id")
    parent = state.episodes.get(p.parent_episode_id)
    if parent is None or parent.braid_id != d.braid_id or parent.status != "active":
        what = "no episode of this braid" if parent is None or parent.braid_id != d.braid_id \
            else parent.status
        raise refuse("fork-from-active-parent", f"parent {p.parent_episode_id!r} is {what}; forks "
                     "grow only from an active episode of their braid")
    labels = normalize_labels(p.labels)
    if (not labels.topics and not labels.intents) or labels == parent.labels:
        raise refuse("fork-is-drift", "a fork's labels name a topic or intent and differ from its "
                     "parent's: that is drift")
    if p.score < MIN_FORK_CONFIDENCE:
        raise refuse("fork-confidence-threshold", f"fork confidence {p.score} is below "
                     f"{MIN_FORK_CONFIDENCE}: such a drift proposal opens no fork")


def _check_fork_event(state: State, d: GenericDelta, p: Any, kind: str, policy: ForkPolicy) -> None:
    ep = state.episodes.get(p.fork_id)
    if ep is None or ep.fork is None or ep.braid_id != d.braid_id or ep.status != "fork_pending":
        what = ("no fork of this braid" if ep is None or ep.fork is None or ep.braid_id != d.braid_id
                else f"{ep.status} ({ep.fork.outcome})")
        raise refuse("fork-pending", f"{kind} names {p.fork_id!r}, which is {what}; only a "
                     "pending fork is classified, promoted or expired")
    fork = ep.fork
    expired_at, reason = expiry_of(fork)
    if kind == "fork_expired":
        if expired_at > d.ts or p.reason != reason:
            raise refuse("fork-expires-at-its-ttl", f"fork {ep.id!r} runs out by its {reason} TTL "
                         f"at {expired_at.isoformat()}; an expiry by {p.reason} at "
                         f"{d.ts.isoformat()} is not it")
        return
    if expired_at <= d.ts:
        raise refuse("fork-pending", f"fork {ep.id!r} expired at {expired_at.isoformat()} "
                     f"({reason} TTL); it decays, and a new drift proposes a new fork")
    if kind == "fork_promoted":
        if p.parent_episode_id != fork.parent_episode_id or p.confirmations != fork.confirmations \
                or fork.confirmations < policy.confirmations:
            raise refuse("fork-promotion-confirmed", f"fork {ep.id!r} has {fork.confirmations} "
                         f"confirmation(s) (its proposal and every confirm) and needs "
                         f"{policy.confirmations} to be promoted; this promotion claims "
                         f"{p.confirmations} off {p.parent_episode_id!r}")
