"""Decision search after LedgerMind: ``search_decisions(braid_or_view, query, mode, limit, offset, namespace)``.

The modes are the seed's (``SearchDecisionsRequest.mode``):

- **strict**: active decisions only, ranked by relevance.
- **balanced** (the default): every decision resolved to its active head through
  ``superseded_by`` (a chain of more than 20 records, or a loop, yields nothing), and every
  proposal not yet accepted; relevance is multiplied by the rank weight (phase CANONICAL 1.5,
  EMERGENT 1.2, PATTERN 1.0; vitality ACTIVE 1.0, DECAYING 0.5, DORMANT 0.2; decisions 1.35;
  rejected or falsified x 0.2, superseded or deprecated x 0.3). A head reached from several
  matching records appears once, with its best score.
- **audit**: every decision and proposal as it is, history included, ranked by relevance.

Relevance is the cosine of the query and a record's target, title and rationale under an
embedder (the offline ``HashingEmbedder`` by default, so search works with no model). Records
below ``min_relevance`` are left out. The rules of mode, chain and weight live in
``braidlog.projections.decisions`` (``search_candidates``, ``resolve_active_head``, ``rank_weight``);
this module only scores and pages. docs/recall.md has the long form.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from braidlog import ValidationError
from braidlog.recall import Embedder, HashingEmbedder

from . import decisions
from .decisions import SearchCandidate, SearchResultItem

__all__ = ["search_decisions", "MAX_LIMIT", "MIN_RELEVANCE"]

MAX_LIMIT = 50
MIN_RELEVANCE = 0.15
_DEFAULT = HashingEmbedder()
_cache: dict[tuple[str, str], np.ndarray] = {}


def _vector(embedder: Embedder, text: str) -> np.ndarray:
    key = (getattr(embedder, "name", repr(embedder)), text)
    v = _cache.get(key)
    if v is None:
        v = np.asarray(embedder.embed([text]), dtype=np.float32)[0]
        norm = float(np.linalg.norm(v))
        v = v / norm if norm else v
        if len(_cache) < 100_000:
            _cache[key] = v
    return v


def search_decisions(braid_or_view: Any, query: str, mode: str = "balanced", limit: int = 10,
                     offset: int = 0, namespace: str | None = None, *, as_of: datetime | None = None,
                     embedder: Embedder | None = None,
                     min_relevance: float = MIN_RELEVANCE) -> list[SearchResultItem]:
    """Decisions and proposals matching ``query``, best first, one page of at most ``limit``.

    ``braid_or_view`` is a Braid with the decisions projection, or a view of one
    (``braid.at(point)``), which searches the decisions as they stood then. ``namespace``
    None searches every namespace. ``as_of`` dates phase and vitality (default: the newest delta
    time the state has seen).
    """
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("query", "must be at least 1 character")
    if mode not in ("strict", "balanced", "audit"):
        raise ValidationError("mode", f"must be strict, balanced or audit, not {mode!r}")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError("limit", f"must be an int in 1..{MAX_LIMIT}, not {limit!r}")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ValidationError("offset", f"must be an int of at least 0, not {offset!r}")
    state = braid_or_view.state(decisions.DECIDER.name)
    candidates = decisions.search_candidates(state, namespace, mode, as_of)  # type: ignore[arg-type]
    if not candidates:
        return []
    embedder = embedder or _DEFAULT
    q = _vector(embedder, query)
    if not q.any():
        raise ValidationError("query", f"{query!r} has no words to embed")
    best: dict[str, tuple[float, SearchCandidate]] = {}
    for c in candidates:
        relevance = float(_vector(embedder, f"{c.target}\n{c.text}") @ q)
        if relevance < min_relevance:
            continue
        score = relevance * c.weight if mode == "balanced" else relevance
        key = c.result_id if mode == "balanced" else c.id
        if key not in best or score > best[key][0]:
            best[key] = (score, c)
    ranked = sorted(best.values(), key=lambda sc: (-sc[0], sc[1].result_id))
    return [decisions.result_item(c, round(score, 6)) for score, c in ranked[offset:offset + limit]]
