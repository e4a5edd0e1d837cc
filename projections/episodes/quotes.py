"""Anchor quotes: 2 to 5 per episode, chosen from noted candidates by weights
constraints / decisions / open_questions = 70 / 20 / 10 (seed: "Episodes", anchor_quotes)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Literal

from msgspec import Meta, Struct

from braidlog import Confidence, Ident

__all__ = ["QuoteCategory", "QuoteText", "CATEGORY_WEIGHTS", "QUOTE_CATEGORIES", "MIN_ANCHOR_QUOTES",
           "MAX_ANCHOR_QUOTES", "AnchorQuote", "Candidate", "apportion", "select_anchor_quotes",
           "quote_key", "rank_key"]

QuoteCategory = Literal["constraint", "decision", "open_question"]
#: Anchor quote categories and their weights, in the order quotes are listed.
CATEGORY_WEIGHTS: tuple[tuple[str, int], ...] = (("constraint", 70), ("decision", 20),
                                                 ("open_question", 10))
QUOTE_CATEGORIES: tuple[str, ...] = tuple(c for c, _ in CATEGORY_WEIGHTS)
MIN_ANCHOR_QUOTES = 2
MAX_ANCHOR_QUOTES = 5

QuoteText = Annotated[str, Meta(min_length=1, max_length=500)]


# NOTE: AnchorQuote is part of stored payloads (AnchorQuoteNoted); never rename a field.
class AnchorQuote(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A short verbatim quote that anchors an episode, in one of three categories."""

    quote_id: Ident
    episode_id: Ident
    text: QuoteText
    category: QuoteCategory
    salience: Confidence = 0.5
    source_delta_id: Ident | None = None


class Candidate(Struct, frozen=True):
    """A noted anchor-quote candidate and its arrival number (later notes have higher numbers)."""

    order: int
    quote: AnchorQuote


def quote_key(text: str) -> str:
    """A quote's text as compared: spacing collapsed, case folded."""
    return " ".join(text.split()).casefold()


_WEIGHTS = tuple(w for _, w in CATEGORY_WEIGHTS)


def apportion(n: int, weights: Iterable[int] = _WEIGHTS) -> list[int]:
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


def rank_key(c: Candidate) -> tuple[float, int]:
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
    for cand in sorted(candidates, key=rank_key):
        key = (cand.quote.category, quote_key(cand.quote.text))
        if key not in seen and cand.quote.category in pools:
            seen.add(key)
            pools[cand.quote.category].append(cand)
    n = min(limit, sum(len(p) for p in pools.values()))
    seats = dict(zip(QUOTE_CATEGORIES, apportion(n), strict=False))
    take = {c: min(seats[c], len(pools[c])) for c in QUOTE_CATEGORIES}
    left = n - sum(take.values())
    while left > 0:
        for c in QUOTE_CATEGORIES:
            if len(pools[c]) > take[c]:
                take[c] += 1
                left -= 1
                break
    return [c.quote for cat in QUOTE_CATEGORIES for c in pools[cat][: take[cat]]]
