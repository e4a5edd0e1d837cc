"""A recorded recall run again: ``replay`` reads a receipt's request and runs it as of the
seq it saw, in reproducible mode, and says whether the same items come back in the same order
(or why it cannot run: the recorded embedder cannot be loaded, the query was recorded only by
its SHA-256 ...)."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..errors import BraidlogError, ValidationError
from ..receipts.record import read_receipt
from .embedder import identity
from .index import Recall
from .recorded import embedder_for

__all__ = ["Replay", "replay"]


class Replay(NamedTuple):
    """A recorded recall run again: ``same`` when the same items came back in the same order;
    ``recorded`` and ``found`` (seq, delta id) best first; ``reason`` when it could not run
    (the recorded embedder cannot be loaded, the query text was not recorded ...)."""

    receipt_id: str
    as_of: int
    same: bool | None
    recorded: list[tuple[int, str]]
    found: list[tuple[int, str]]
    reason: str | None = None

    def summary(self) -> str:
        """One line a person reads."""
        if self.same is None:
            return f"cannot replay receipt {self.receipt_id}: {self.reason}"
        if self.same:
            return (f"same: the recall as of seq {self.as_of} returns the {len(self.found)} recorded "
                    "item(s) in the recorded order")
        return (f"different: the recall as of seq {self.as_of} returns {[s for s, _ in self.found]}, "
                f"the receipt recorded {[s for s, _ in self.recorded]}")


def replay(source: Any, ref: str | int, *, embedder: Any = None, directory: Any = None) -> Replay:
    """Run the recall a receipt records again, as of the seq it saw, in reproducible mode, and
    say whether the same items (seq and delta id) come back in the same order. The space's
    recorded embedder is loaded from its spec; ``embedder`` (an object or a spec) is used
    instead when given, and must be the one the receipt names."""
    got = read_receipt(source, ref)
    r, rid = got.receipt, got.delta.id
    recorded = [(i.seq, i.delta_id) for i in r.items if i.role == "retrieved"]
    req = r.request
    if req is None:
        raise ValidationError("id", f"receipt {rid} records no recall (its items were chosen by "
                              "the caller): there is nothing to replay")

    def cannot(reason: str) -> Replay:
        return Replay(rid, req.as_of, None, recorded, [], reason)

    if req.where:
        return cannot("the recall applied a caller's predicate or id set, which a receipt does not record")
    if req.query is None:
        return cannot(f"the query's {req.query_kind} was not recorded (only its SHA-256), so the "
                      "request cannot be run again")
    if req.mode != "keyword":
        try:  # the space's recorded embedder, loaded from its spec (or the one given, checked)
            embedder = embedder_for(source, req.space, embedder)
        except BraidlogError as e:
            return cannot(f"the recorded embedder cannot be loaded here: {e}")
        ident = identity(embedder)
        named = req.embedder
        if named is not None and ((ident.name, ident.dim) != (named.name, named.dim)
                                  or named.digest is not None and ident.digest != named.digest):
            return cannot(f"the recorded embedder {named.name} ({named.dim} dimensions) cannot be "
                          f"loaded here: the one found is {ident.name} ({ident.dim}); pass it "
                          "(embedder=..., --embedder SPEC)")
    index = Recall(source, req.space, req.metric, embedder, directory=directory)
    filters: dict[str, Any] = {f: v for f, v in req.filters.items()}  # braid, kinds, tags, namespace, workspace
    try:
        hits = index.recall(req.query, req.k, mode=req.mode, as_of=req.as_of, reproducible=True,
                            min_score=req.min_score, deltas=False, **filters)
    except BraidlogError as e:
        return cannot(f"the recall failed: {e}")
    finally:
        index.close()
    found = [(h.seq, h.delta_id) for h in hits]
    return Replay(rid, req.as_of, found == recorded, recorded, found)
