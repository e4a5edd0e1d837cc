"""Recall: find deltas by meaning (HNSW over the vectors stored with them), by keyword (BM25 over
their text) or both (reciprocal-rank fusion), at the head or exactly as of any earlier point,
with filters applied before the top k is cut.

Every index here is derived: a function of the log, persisted beside the store with the seq and
chain hash it covers, caught up on open, rebuilt when missing, stale or damaged.

Modules, one responsibility each: ``index`` (``Recall``: the vector index's life and its query
plan), ``blocks`` (as-of blocks), ``vectors`` and ``columns`` (what is kept per vector),
``files`` (index files and their checks), ``keyword`` (the tantivy BM25 index), ``query``
(results, query vectors, fusion), ``embedder`` (text to vectors), ``specs`` (embedder specs:
real models from the local disk), ``recorded`` (embedding with the log's record of each space's
embedder), ``instances`` (one index per braid). numpy, hnswlib and tantivy come with the
``recall`` extra and are imported only in this package; importing it without them raises
``MissingDependency`` saying how to install them.
docs/recall.md has the long form.
"""

from ._deps import need

need("numpy", "hnswlib")

from ..errors import RecallWarning  # noqa: E402  (after need() checked the recall extra)
from ..kind_schema import EmbedderDeclared, recorded_embedder, recorded_embedders  # noqa: E402  (after need() checked the recall extra)
from .embedder import (  # noqa: E402  (after need() checked the recall extra)
    DEFAULT_DIM,
    Embedder,
    HashingEmbedder,
    Identity,
    default_embedder,
    delta_text,
    documents,
    embed_delta,
    identity,
    queries,
)
from .index import FORMAT, METRICS, Metric, Recall  # noqa: E402  (after need() checked the recall extra)
from .instances import close_for, discard_for, recall_at, recall_for  # noqa: E402  (after need() checked the recall extra)
from .keyword import KeywordIndex, keyword_for  # noqa: E402  (after need() checked the recall extra)
from .query import MODES, RRF_K, Hit, Mode, fuse  # noqa: E402  (after need() checked the recall extra)
from .recorded import append_embedded, check_embedder, embed_deltas, embedder_for  # noqa: E402  (after need() checked the recall extra)
from .specs import ENV, FastEmbedEmbedder, Model2VecEmbedder, SentenceTransformerEmbedder, WordLlamaEmbedder, embedder  # noqa: E402  (after need() checked the recall extra)

__all__ = [
    "Recall", "KeywordIndex", "keyword_for", "Hit", "RecallWarning", "Metric", "METRICS", "Mode", "MODES", "RRF_K",
    "Embedder", "HashingEmbedder", "DEFAULT_DIM", "default_embedder", "delta_text", "embed_delta",
    "fuse", "recall_for", "recall_at", "close_for", "discard_for", "FORMAT",
    "embedder", "ENV", "Model2VecEmbedder", "SentenceTransformerEmbedder", "FastEmbedEmbedder", "WordLlamaEmbedder",
    "documents", "queries", "identity", "Identity", "append_embedded", "embed_deltas", "embedder_for",
    "check_embedder", "EmbedderDeclared", "recorded_embedder", "recorded_embedders",
]
