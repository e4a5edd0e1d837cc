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

How a record matches (``match``), over its target, title, rationale and keywords:

- **hybrid** (the default): by keyword and by meaning together, as LedgerMind searches. A record
  matches when it holds a word of the query (BM25, braidlog.recall's keyword analyser: exact
  identifiers such as error codes and ticket numbers count) or its cosine with the query under
  the embedder is at least ``min_relevance``. The matches are ranked twice, by BM25 and by
  cosine, and fused by reciprocal rank (``RRF_K`` = 60, as ``recall(mode="hybrid")``);
  relevance is the fused score over its largest possible value, so 1.0 is first in both.
- **vector**: relevance is the cosine (records below ``min_relevance`` left out).
- **keyword**: relevance is the BM25 score (records without a word of the query left out).

The embedder is the offline ``HashingEmbedder`` by default, so search works with no model. The
rules of mode, chain and weight live in ``braidlog.projections.decisions``
(``search_candidates``, ``resolve_active_head``, ``rank_weight``); this module only scores and
pages. docs/recall.md has the long form.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from braidlog import ValidationError
from braidlog.recall import Embedder, HashingEmbedder
from braidlog.recall.keyword import rank_texts
from braidlog.recall.query import RRF_K

from . import decisions
from .decisions import SearchCandidate, SearchResultItem

__all__ = ["search_decisions", "MAX_LIMIT", "MIN_RELEVANCE", "MATCHES"]

MAX_LIMIT = 50
MIN_RELEVANCE = 0.15
MATCHES = ("hybrid", "vector", "keyword")
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
                     embedder: Embedder | None = None, min_relevance: float = MIN_RELEVANCE,
                     match: str = "hybrid") -> list[SearchResultItem]:
    """Decisions and proposals matching ``query``, best first, one page of at most ``limit``.

    ``braid_or_view`` is a Braid with the decisions projection, or a view of one
    (``braid.at(point)``), which searches the decisions as they stood then. ``namespace``
    None searches every namespace. ``as_of`` dates phase and vitality (default: the newest delta
    time the state has seen). ``match`` is hybrid, vector or keyword (see the module).
    """
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("query", "must be at least 1 character")
    if mode not in ("strict", "balanced", "audit"):
        raise ValidationError("mode", f"must be strict, balanced or audit, not {mode!r}")
    if match not in MATCHES:
        raise ValidationError("match", f"must be hybrid, vector or keyword, not {match!r}")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError("limit", f"must be an int in 1..{MAX_LIMIT}, not {limit!r}")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ValidationError("offset", f"must be an int of at least 0, not {offset!r}")
    state = braid_or_view.state(decisions.DECIDER.name)
    candidates = decisions.search_candidates(state, namespace, mode, as_of)  # type: ignore[arg-type]  # mode: checked by search_candidates
    if not candidates:
        return []
    best: dict[str, tuple[float, SearchCandidate]] = {}
    for i, relevance in _relevance(candidates, query, match, embedder or _DEFAULT, min_relevance):
        c = candidates[i]
        score = relevance * c.weight if mode == "balanced" else relevance
        key = c.result_id if mode == "balanced" else c.id
        if key not in best or score > best[key][0]:
            best[key] = (score, c)
    ranked = sorted(best.values(), key=lambda sc: (-sc[0], sc[1].result_id))
    return [decisions.result_item(c, round(score, 6)) for score, c in ranked[offset:offset + limit]]


def _relevance(candidates: list[SearchCandidate], query: str, match: str, embedder: Embedder,
               min_relevance: float) -> list[tuple[int, float]]:
    """(candidate position, relevance) of every candidate that matches ``query``."""
    texts = [f"{c.target}\n{c.text}" for c in candidates]
    keyword = rank_texts(texts, query) if match != "vector" else []
    if match == "keyword":
        return keyword
    q = _vector(embedder, query)
    if not q.any():
        if match == "vector" or not keyword:
            raise ValidationError("query", f"{query!r} has no words to embed")
    cosine = {i: float(_vector(embedder, t) @ q) for i, t in enumerate(texts)}
    if match == "vector":
        return [(i, r) for i, r in cosine.items() if r >= min_relevance]
    matched = {i for i, _ in keyword} | {i for i, r in cosine.items() if r >= min_relevance}
    fused: dict[int, float] = dict.fromkeys(matched, 0.0)
    for scores in (dict(keyword), {i: cosine[i] for i in matched}):
        for i, rank in _ranks(scores).items():
            fused[i] += 1.0 / (RRF_K + rank)
    top = 2.0 / (RRF_K + 1)  # first in both rankings
    return [(i, score / top) for i, score in fused.items()]


def _ranks(scores: dict[int, float]) -> dict[int, int]:
    """Each key's rank by score, best first, from 1; equal scores share the better rank (two
    records with the same text rank alike, whatever their order)."""
    first: dict[float, int] = {}
    for n, score in enumerate(sorted(scores.values(), reverse=True), start=1):
        first.setdefault(score, n)
    return {i: first[score] for i, score in scores.items()}
