"""The ``context_used`` kind: a context receipt, which memory versions an agent saw.

A receipt names the records (seq and delta id, with their rank, score and role) that a recall
returned or that the host put in front of a model, the request that found them and the SHA-256
of the exact context bytes. Its payload schema is checked on every append like any kind's; the
rule that needs the log (each item cites a record that exists before the receipt, by its seq
and its id) is ``check_citations``, which the stores run inside the write transaction, so a
receipt citing a seq beyond the head or an unknown id is refused on every path (``Braid.append``,
the CLI, import, MCP). docs/receipts.md says what a receipt proves and what it does not.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from ..delta import Ident, Ulid
from ..errors import ValidationError
from ..kinds import REGISTRY

__all__ = ["CONTEXT_USED", "CONTEXT_BRAID", "ROLES", "MAX_ITEMS", "Sha256Hex", "ContextItem",
           "EmbedderRef", "RecallRequest", "ContextUsed", "check_citations", "sha256_hex"]

#: The kind of a context receipt.
CONTEXT_USED = "context_used"
#: The braid receipts are written to unless the caller names another: apart from the memories
#: they cite, so that erasing a subject's braid keeps the receipts that cite it.
CONTEXT_BRAID = "context"
ROLES = ("retrieved", "injected")
MAX_ITEMS = 10_000

Sha256Hex = Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]
Role = Literal["retrieved", "injected"]
Seq = Annotated[int, Meta(ge=1)]
Short = Annotated[str, Meta(min_length=1, max_length=1000)]


def sha256_hex(data: bytes | str) -> str:
    """The SHA-256 of ``data`` (text as UTF-8) in lowercase hex."""
    if isinstance(data, str):
        return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ValidationError("data", f"must be bytes or text, not {type(data).__name__}")
    return hashlib.sha256(bytes(data)).hexdigest()


def _finite(value: Any, field: str) -> None:
    """A score or floor: None or a finite number. ValidationError (a ValueError: decoding turns
    it into the field's error) otherwise."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValidationError(field, f"must be a finite number, not {value!r}"[:200])


# NOTE: payload class names are stored tags only where tag=True; these are plain objects.
class ContextItem(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One memory version in a context: the record at ``seq`` (delta ``delta_id``), its
    ``rank`` (1 is first) among the items of its ``role``, and its ``score`` when a recall gave
    one. ``retrieved``: a recall returned it; ``injected``: the host gave it to the model."""

    seq: Seq
    delta_id: Ulid
    rank: Annotated[int, Meta(ge=1)]
    role: Role = "retrieved"
    score: float | None = None

    def __post_init__(self) -> None:
        for name in ("seq", "rank"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValidationError(name, f"must be an int, not {type(value).__name__}")
        _finite(self.score, "score")


class EmbedderRef(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """The embedder a space declares in the log: its name, dimension and digest."""

    name: Short
    dim: Annotated[int, Meta(ge=1)]
    digest: str | None = None


class RecallRequest(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """The recall that found the retrieved items, as ``Recall.recall`` was called: the query's
    text (or only its SHA-256, when the caller keeps the text out of the log), mode, k, space,
    metric, the space's recorded embedder, filters, the seq it saw (``as_of``: the one asked for,
    or the head the index covered), whether it was reproducible, and its score floor. ``where``
    says a caller's predicate or id set was applied too (it is not recorded, so a replay cannot
    apply it)."""

    mode: Literal["vector", "keyword", "hybrid"]
    k: Annotated[int, Meta(ge=1)]
    as_of: Annotated[int, Meta(ge=0)]
    query_sha256: Sha256Hex
    query: str | None = None
    query_kind: Literal["text", "vector"] = "text"
    space: Ident = "default"
    metric: Literal["cosine", "ip"] = "cosine"
    embedder: EmbedderRef | None = None
    filters: dict[Literal["braid", "kinds", "tags", "namespace", "workspace"], list[str]] = {}
    where: bool = False
    reproducible: bool = False
    min_score: float | None = None

    def __post_init__(self) -> None:
        _finite(self.min_score, "min_score")
        if self.query is not None and (not isinstance(self.query, str)
                                       or sha256_hex(self.query) != self.query_sha256):
            raise ValidationError("query_sha256", "must be the SHA-256 of the query text (UTF-8)")
        if self.query is not None and self.query_kind != "text":
            raise ValidationError("query_kind", "a query given as text has query_kind 'text'")


class ContextUsed(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A context receipt (kind ``context_used``): the caller's ``run`` and ``turn``, the
    ``model`` if given, the ``request`` of a recall, the ``items`` of the context, and the
    SHA-256 and size of the exact context bytes given to the model (when the caller passes
    them)."""

    run: Ident
    turn: Ident
    items: Annotated[list[ContextItem], Meta(max_length=MAX_ITEMS)]
    model: Short | None = None
    request: RecallRequest | None = None
    context_sha256: Sha256Hex | None = None
    context_size: Annotated[int, Meta(ge=0)] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.items, list) or not all(isinstance(i, ContextItem) for i in self.items):
            raise ValidationError("items", "must be a list of ContextItem")
        if self.request is not None and not isinstance(self.request, RecallRequest):
            raise ValidationError("request", "must be a RecallRequest or None")
        last: dict[str, int] = {}
        seen: set[tuple[int, str]] = set()
        for n, item in enumerate(self.items):
            if (item.seq, item.role) in seen:
                raise ValidationError(f"items[{n}]", f"cites seq {item.seq} as {item.role} a second time")
            seen.add((item.seq, item.role))
            if item.rank <= last.get(item.role, 0):
                raise ValidationError(f"items[{n}].rank", f"is {item.rank} after rank {last[item.role]}: "
                                      f"the ranks of the {item.role} items must increase")
            last[item.role] = item.rank
        if (self.context_sha256 is None) != (self.context_size is None):
            raise ValidationError("context_sha256", "and context_size come together (the digest and "
                                  "length of the context bytes)")
        if self.request is not None and any(i.seq > self.request.as_of for i in self.items
                                            if i.role == "retrieved"):
            raise ValidationError("items", f"a retrieved item cites a seq after the request's as_of "
                                  f"({self.request.as_of}), which the recall could not see")


REGISTRY.declare(CONTEXT_USED, ContextUsed, owner="braidlog",
                 refers=lambda p: (p.run,))


def check_citations(receipts: Sequence[tuple[int, int, Any]],
                    batch: dict[str, int],
                    lookup: Callable[[list[str]], dict[str, tuple[int, bytes]]]) -> None:
    """The log's rule for receipts, inside the write transaction: each item of each receipt
    (``(index in batch, seq, payload)``) cites a record before the receipt, by its seq and its
    delta id; so does its request's ``as_of``. ``batch`` maps the batch's delta ids to their
    seqs; ``lookup(ids)`` gives (seq, body) of those the store holds. ValidationError naming the
    item otherwise."""
    ids = sorted({i["delta_id"] for _, _, p in receipts for i in p.get("items", ())
                  if isinstance(i, dict) and i.get("delta_id") not in batch})
    stored = {k: v[0] for k, v in lookup(ids).items()} if ids else {}
    for index, seq, payload in receipts:
        request = payload.get("request")
        if isinstance(request, dict) and request.get("as_of", 0) >= seq:
            raise ValidationError("payload.request.as_of", f"is {request['as_of']}: a recall "
                                  f"recorded at seq {seq} saw a seq before it", index=index)
        for n, item in enumerate(payload.get("items", ())):
            cited, did = item["seq"], item["delta_id"]
            if cited >= seq:
                raise ValidationError(f"payload.items[{n}].seq", f"cites seq {cited}, beyond the "
                                      f"head ({seq - 1}) when the receipt is written at seq {seq}: "
                                      "a receipt cites records already in the log", index=index)
            at = batch.get(did, stored.get(did))
            if at is None:
                raise ValidationError(f"payload.items[{n}].delta_id", f"no delta {did} is in the "
                                      "log: a receipt cites records by their seq and id", index=index)
            if at != cited:
                raise ValidationError(f"payload.items[{n}].seq", f"delta {did} is at seq {at}, "
                                      f"not {cited}", index=index)


def decode_receipt(payload: dict[str, Any]) -> ContextUsed:
    """A stored receipt's payload as its Struct (ValidationError if it is not one)."""
    try:
        return msgspec.convert(payload, ContextUsed)
    except msgspec.ValidationError as e:
        raise ValidationError("payload", f"not a context receipt: {e}") from None
