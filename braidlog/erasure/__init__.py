"""Erasure, the engine's part that stores do not do: which deltas a request selects, the
``erased`` delta that records it, and the refers-to keys an erased record keeps.

``erase`` drops a delta's payload, its salt, its vector and the text derived from them, and keeps
its envelope and the commitment to them (the committed form), so the chain, the Merkle tree and
every checkpoint and proof issued before still verify. One ``erased`` delta, appended in the
same step, names the seqs erased and the reason; it holds no payload of theirs. Reads show an
erased record as its envelope with ``erased=Erasure(by, commitment)``, at every seq: erasure is
retroactive (docs/forgetting.md).

Pure: no I/O here. ``Braid.erase`` (braid.py) runs it against a store; stores drop the bytes.
"""

from .imports import Erasures, erased_line, erasure_line
from .records import (
    ERASED,
    ERASURES_BRAID,
    MAX_REASON,
    SUBJECT_TAG,
    Erased,
    check_reason,
    envelope_refs,
    erased_bytes,
    erased_delta,
    erased_entry,
    erasure_delta,
    payload_refs,
    reason_hash,
    reproduced,
    subject_tag,
)
from .select import ErasureReport, Selection, select

__all__ = [
    "ERASED", "ERASURES_BRAID", "MAX_REASON", "Erased", "reason_hash", "check_reason",
    "erasure_delta", "erased_delta", "erased_bytes", "erased_entry", "reproduced",
    "envelope_refs", "payload_refs", "ErasureReport", "Selection", "select", "Erasures",
    "erased_line", "erasure_line", "SUBJECT_TAG", "subject_tag",
]
