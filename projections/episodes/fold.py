"""The episodes fold: episode and fork kinds, tied knots, messages, and time.

Pure and total (never raises on a delta in the log). Time is the deltas' ``ts``: the fold
keeps, per braid (braids are independent partitions), the latest it has seen
(``State.clock``) and expires every pending fork of the braid whose TTL ran out by then, so a
state at any seq shows the forks expired at that point without any command.
"""

from __future__ import annotations

from datetime import datetime

from braidlog import GenericDelta, typed

from .model import (
    KINDS,
    MESSAGE_TEXT_LIMIT,
    MESSAGE_WINDOW,
    SOFT_LINK_FACTOR,
    Confirmation,
    Edge,
    Episode,
    Fork,
    KnotSeen,
    KnotSpan,
    RecentMessage,
    State,
)
from .quotes import AnchorQuote, Candidate

__all__ = ["evolve", "expire_due", "expiry_of"]


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
    due = False
    for fork_id in state.pending.get(braid, ()):
        fork = state.episodes[fork_id].fork_record
        if fork.knot_deadline is None and count - fork.knots_at_proposal >= fork.ttl_knots:
            fork.knot_deadline = d.ts
            due = True
    if due:
        expire_due(state, braid, d.ts)


def _evolve_message(state: State, d: GenericDelta) -> None:
    text = d.payload.get("text")
    if not isinstance(text, str):
        return
    window = state.messages.get(d.braid_id)
    if window is None:
        window = state.messages[d.braid_id] = []
    elif len(window) >= MESSAGE_WINDOW:  # full: the oldest make room (before the append, so the
        del window[: len(window) - MESSAGE_WINDOW + 1]  # list never grows past the window)
    prov = d.provenance
    window.append(RecentMessage(d.id, d.ts, text[:MESSAGE_TEXT_LIMIT], prov.kind, prov.episode_id))


def _add_candidate(state: State, ep: Episode, quote: AnchorQuote) -> None:
    if any(c.quote.quote_id == quote.quote_id for c in ep.candidates):
        return
    state.quotes_noted += 1
    ep.candidates.append(Candidate(state.quotes_noted, quote))


def _resolve(state: State, ep: Episode, ts: datetime, status: str, outcome: str) -> None:
    ep.status = status
    ep.fork_record.resolved_at = ts
    ep.fork_record.outcome = outcome
    pending = state.pending.get(ep.braid_id)
    if pending and ep.id in pending:
        pending.remove(ep.id)
    _next_expiry(state, ep.braid_id)


def _next_expiry(state: State, braid: str) -> None:
    forks = state.pending.get(braid)
    if forks:
        state.next_expiry[braid] = min(state.episodes[f].fork_record.expires_at for f in forks)
    else:
        state.next_expiry.pop(braid, None)


def expiry_of(fork: Fork) -> tuple[datetime, str]:
    """When a pending fork's TTL runs out as far as the fold knows, and which TTL: the knots TTL
    once its ``ttl_knots``-th knot is tied (that tie's ts), else the minutes TTL."""
    if fork.knot_deadline is not None and fork.knot_deadline <= fork.expires_at:
        return fork.knot_deadline, "knots"
    return fork.expires_at, "minutes"


def expire_due(state: State, braid: str, now: datetime) -> None:
    """Expire every pending fork of ``braid`` whose TTL ran out by ``now``: it decays to a soft
    link to its parent (confidence × SOFT_LINK_FACTOR) or is discarded, as its proposal said."""
    for fork_id in list(state.pending.get(braid, ())):
        ep = state.episodes[fork_id]
        f = ep.fork_record
        at, reason = expiry_of(f)
        if at > now:
            continue
        f.expiry_reason = reason
        if f.on_expiry == "soft_link":
            _set_edge(ep, Edge("soft_link", f.parent_episode_id,
                               round(f.confidence * SOFT_LINK_FACTOR, 6)))
            _resolve(state, ep, at, "linked", "soft_link")
        else:
            _resolve(state, ep, at, "discarded", "discarded")


def _set_edge(ep: Episode, edge: Edge) -> None:
    for i, e in enumerate(ep.edges):
        if e.type == edge.type and e.to_episode_id == edge.to_episode_id:
            ep.edges[i] = edge
            return
    ep.edges.append(edge)


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
                    signals=[p.signal_id], on_expiry=p.on_expiry)
        state.episodes[p.fork_id] = Episode(id=p.fork_id, braid_id=d.braid_id, status="fork_pending",
                                            opened_at=d.ts, labels=p.labels, fork=fork)
        state.pending.setdefault(d.braid_id, []).append(p.fork_id)
        _next_expiry(state, d.braid_id)
        expire_due(state, d.braid_id, state.clock[d.braid_id])  # a raw delta past its TTL: so be it
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
        _set_edge(ep, Edge(p.type, p.to_episode_id, p.confidence))
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
    elif kind == "fork_expired":  # recorded before the fold saw its TTL run out (a clock skew)
        ep.fork.expiry_reason = p.reason
        if p.outcome == "soft_link":
            _resolve(state, ep, d.ts, "linked", "soft_link")
        else:
            _resolve(state, ep, d.ts, "discarded", "discarded")


#: kind -> how it folds (every other kind only moves the clock); built once, one lookup a delta
_APPLY = {**{kind: _evolve_own for kind in KINDS},
          "message": _evolve_message, "knot_lifecycle": _evolve_knot}


def evolve(state: State, d: GenericDelta) -> State:
    """Fold one delta (the projection reads every delta, for its time): pending forks whose TTL
    ran out by its ts expire first; then episode and fork kinds, tied knots, and messages (a
    bounded window)."""
    ts, braid, clock = d.ts, d.braid_id, state.clock
    last = clock.get(braid)
    if last is None or ts > last:  # braids are independent partitions: each keeps its own time
        clock[braid] = ts
        if state.next_expiry:  # no pending fork anywhere (the usual case): nothing can expire
            due = state.next_expiry.get(braid)
            if due is not None and ts >= due:
                expire_due(state, braid, ts)
    apply = _APPLY.get(d.kind)
    if apply is not None:
        apply(state, d)
    return state
