"""braidlog: an embedded, event-sourced, append-only log engine for agent memory.

Every change is an immutable ``GenericDelta`` in a hash-chained LMDB log; projections fold the
log into state; ``at(point)`` replays any earlier state exactly.
"""

from typing import TYPE_CHECKING, Any

from . import vocabulary as _vocabulary  # noqa: F401  (declares the seed's minimum kinds)
from .braid import DEFAULT_STORE, Braid, ReadView, View, open
from .chain import GENESIS
from .command import Command
from .delta import (
    PROVENANCE_KINDS,
    BeadRef,
    Confidence,
    GenericDelta,
    Ident,
    Provenance,
    ProvenanceKind,
    Refs,
    Text,
    Ulid,
    UtcTime,
    Vector,
    decode,
    delta,
    encode,
    from_json,
    new_id,
    to_json,
    validate,
)
from .errors import (
    BraidlogError,
    CheckpointWarning,
    ConflictError,
    DecodeError,
    IntegrityError,
    MissingDependency,
    NoSuchSeq,
    NotAcknowledged,
    RecallWarning,
    Rejected,
    ReplicationError,
    StaleHead,
    StaleWriter,
    StorageError,
    StoreFullError,
    ValidationError,
)
from .kind_schema import (
    EMBEDDER_DECLARED,
    KIND_DECLARED,
    EmbedderDeclared,
    KindDeclared,
    declare_kind,
    recorded_embedder,
)
from .kinds import MINIMUM_KINDS, REGISTRY, KindSpec, Registry, check_payload, declare, plain, typed, typed_or_none
from .lmdb.log import LmdbLog
from .projection import Boundary, Check, Context, Decider, Projection, refuse
from .store import BraidHead, Head, LogStore, MemoryLog, Record

__version__ = "0.1.0"

_RECALL = ("Recall", "Hit", "Embedder", "HashingEmbedder", "embed_delta", "KeywordIndex")


if TYPE_CHECKING:  # the type checker sees recall's names; a module __getattr__ would admit any name
    from .recall import Embedder as Embedder
    from .recall import HashingEmbedder as HashingEmbedder
    from .recall import Hit as Hit
    from .recall import KeywordIndex as KeywordIndex
    from .recall import Recall as Recall
    from .recall import embed_delta as embed_delta
else:
    def __getattr__(name: str) -> Any:
        """Recall's names load on first use: braidlog.recall imports numpy and hnswlib (the recall
        extra); without them it raises ``MissingDependency`` saying how to install them."""
        if name in _RECALL:
            from . import recall

            return getattr(recall, name)
        raise AttributeError(f"module 'braidlog' has no attribute {name!r}")


__all__ = [
    "open", "Braid", "View", "ReadView", "DEFAULT_STORE",
    "GenericDelta", "Provenance", "ProvenanceKind", "Refs", "BeadRef", "Vector", "PROVENANCE_KINDS",
    "delta", "new_id", "encode", "decode", "to_json", "from_json", "validate",
    "Ident", "Ulid", "Confidence", "UtcTime", "Text",
    "BraidlogError", "ValidationError", "DecodeError", "ConflictError", "StaleHead", "Rejected",
    "IntegrityError", "StorageError", "StoreFullError", "CheckpointWarning",
    "ReplicationError", "NotAcknowledged", "StaleWriter", "MissingDependency", "NoSuchSeq", "RecallWarning",
    "KindSpec", "Registry", "REGISTRY", "MINIMUM_KINDS", "declare", "typed", "typed_or_none",
    "check_payload", "plain",
    "declare_kind", "KindDeclared", "KIND_DECLARED", "EMBEDDER_DECLARED", "EmbedderDeclared", "recorded_embedder",
    "Projection", "Decider", "Context", "Command", "Boundary", "Check", "refuse",
    "LogStore", "MemoryLog", "LmdbLog", "Record", "Head", "BraidHead", "GENESIS",
    *_RECALL,
    "__version__",
]
