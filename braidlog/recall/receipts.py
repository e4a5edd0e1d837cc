"""A recall's receipt: ``Hits`` (the answer, with ``context_id`` once recorded), the
``RecallRequest`` a receipt records and the receipt written for a recall's hits
(``replay.py`` runs a recorded request again).

The receipt records the request as ``Recall.recall`` was called, with the seq the recall saw
(``as_of``: the point asked for, or the head the index covered), so that ``replay`` can run it
again in reproducible mode as of that seq. docs/receipts.md has the long form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..kind_schema import recorded_embedder
from ..receipts.record import build_receipt, write_receipt
from ..receipts.schema import CONTEXT_BRAID, ContextItem, EmbedderRef, RecallRequest, sha256_hex
from .columns import Filter
from .embedder import identity
from .query import Hit

__all__ = ["Hits", "recall_request", "record_hits", "embedder_ref"]


class Hits(list[Hit]):
    """The hits of a recall, best first (a list); ``context_id`` and ``context_seq`` name the
    receipt recorded for them (``recall(..., record=True)``), else None."""

    context_id: str | None = None
    context_seq: int | None = None


_FILTER_FIELDS = ("braid", "kinds", "tags", "namespace", "workspace")


def embedder_ref(index: Any, query: Any) -> EmbedderRef | None:
    """The embedder a recall of ``index``'s space went through: the one the space declares in
    the log (name, dimension, digest), else, for a text query, the one that embedded it; None
    for a vector query in a space that declares none."""
    declared = recorded_embedder(index.store, index.space)
    if declared is not None:
        return EmbedderRef(name=declared.name[:1000], dim=declared.dim, digest=declared.digest or None)
    if not isinstance(query, str):
        return None
    ident = identity(index.text_embedder())
    return EmbedderRef(name=ident.name[:1000], dim=ident.dim, digest=ident.digest or None)


def recall_request(index: Any, query: Any, k: int, mode: str, seen: int,
                   flt: tuple[Filter, Callable[[str], bool] | None], reproducible: bool,
                   min_score: float | None, hash_query: bool) -> RecallRequest:
    """What a receipt records of a recall: the query (its text, or only its SHA-256 with
    ``hash_query``; a vector query by the SHA-256 of its float32 bytes), the options and the
    seq ``seen``."""
    if isinstance(query, str):
        digest, text, kind = sha256_hex(query), (None if hash_query else query), "text"
    else:
        raw = np.ascontiguousarray(np.asarray(query, dtype="<f4")).tobytes()
        digest, text, kind = sha256_hex(raw), None, "vector"
    fields, pred = flt
    filters = {f: sorted(v) for f in _FILTER_FIELDS if (v := getattr(fields, f)) is not None}
    return RecallRequest(mode=mode, k=k, as_of=seen, query_sha256=digest, query=text,  # type: ignore[arg-type]  # mode: one of MODES, checked by recall
                         query_kind=kind, space=index.space, metric=index.metric,  # type: ignore[arg-type]  # query_kind: 'text' or 'vector', set above
                         embedder=embedder_ref(index, query) if mode != "keyword" else None,
                         filters=filters, where=pred is not None or fields.ids is not None,  # type: ignore[arg-type]  # filters: keyed by _FILTER_FIELDS, its names
                         reproducible=bool(reproducible), min_score=min_score)


def record_hits(target: Any, hits: Hits, request: RecallRequest, *, run: Any, turn: Any,
                model: str | None, context_bytes: Any, braid_id: str = CONTEXT_BRAID) -> Hits:
    """Append the receipt of a recall's ``hits`` (each ``retrieved``, ranked as returned) to
    ``target``; ``hits`` with ``context_id`` and ``context_seq`` set."""
    if run is None or turn is None:
        raise ValidationError("run" if run is None else "turn", "a recorded recall names the run "
                              "and the turn it served: give run=... and turn=...")
    items = [ContextItem(seq=h.seq, delta_id=h.delta_id, rank=n, role="retrieved", score=float(h.score))
             for n, h in enumerate(hits, 1)]
    receipt = build_receipt(items, run=run, turn=turn, model=model, request=request,
                            context_bytes=context_bytes)
    hits.context_id, hits.context_seq = write_receipt(target, receipt, braid_id=braid_id)
    return hits
