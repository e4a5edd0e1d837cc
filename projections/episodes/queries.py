"""Reading episodes: one by id, a braid's, edges pointing at one, a knot's episodes, quotes."""

from __future__ import annotations

from .model import Edge, Episode, State
from .quotes import AnchorQuote, select_anchor_quotes

__all__ = ["anchor_quotes", "episode", "episodes", "edges_to", "episodes_of_knot"]


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
