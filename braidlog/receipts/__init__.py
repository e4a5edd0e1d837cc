"""Context receipts: which memory versions an agent saw when it acted, recorded in the log.

A receipt is a delta of kind ``context_used`` (``schema``): the caller's run and turn, the
records a recall returned or the host gave the model (seq, delta id, rank, score, role), the
request that found them and the SHA-256 of the exact context bytes. ``record_context`` writes
one for items the caller chose; ``Recall.recall(..., record=True)`` writes one for its hits.
``braidlog.proofs.context`` exports one with inclusion proofs against a signed checkpoint and
checks such an export offline. docs/receipts.md has the long form: what a receipt proves and
what it does not.

``schema`` is imported by the stores (the rule that a receipt cites records already in the
log); ``record`` reads and writes receipts and is loaded on first use.
"""

from __future__ import annotations

from typing import Any

from .schema import (
    CONTEXT_BRAID,
    CONTEXT_USED,
    MAX_ITEMS,
    ROLES,
    ContextItem,
    ContextUsed,
    EmbedderRef,
    RecallRequest,
    sha256_hex,
)

_RECORD = ("record_context", "read_receipt", "build_receipt", "items_of", "Receipt")

__all__ = ["CONTEXT_USED", "CONTEXT_BRAID", "ROLES", "MAX_ITEMS", "ContextItem", "ContextUsed",
           "EmbedderRef", "RecallRequest", "sha256_hex", *_RECORD]


def __getattr__(name: str) -> Any:
    """``record``'s names load on first use (the stores import ``schema`` while loading)."""
    if name in _RECORD:
        from . import record

        return getattr(record, name)
    raise AttributeError(f"module 'braidlog.receipts' has no attribute {name!r}")
