"""Context receipts over MCP: ``context_show`` (a receipt with its items' current text) and
``context_replay`` (its recall run again, as of the seq it saw). Recording one is the ``recall``
tool's ``record``; exporting one needs the log's signing key and stays with the shell
(``braidlog context export``). docs/receipts.md."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import Struct

from .backend import Backend, recall_installed
from .schema import ToolSpec, arguments, described

__all__ = ["receipt_tools"]

ContextArgs = arguments("ContextArgs", [
    ("ref", described(int | str, "the receipt: its delta id or seq (the recall tool's context_id)"),
     msgspec.NODEFAULT)], doc="Which context receipt.")


class ItemOut(Struct):
    """One item of a receipt: the record it cites and its text now (or that it was erased)."""

    seq: int
    delta_id: str
    role: str
    rank: int
    score: float | None
    erased_by: int | None
    text: str


class ContextOut(Struct):
    seq: int
    id: str
    braid_id: str
    ts: str
    run: str
    turn: str
    model: str | None
    request: dict[str, Any] | None
    context_sha256: str | None
    context_size: int | None
    items: list[ItemOut]


class Cited(Struct):
    seq: int
    delta_id: str


class ReplayOut(Struct):
    receipt_id: str
    as_of: int
    same: bool | None
    recorded: list[Cited]
    found: list[Cited]
    reason: str | None
    summary: str


def _text(d: Any) -> str:
    if d.erased is not None:
        return f"(erased by seq {d.erased.by})"
    p = d.payload
    for key in ("text", "summary", "title", "content", "value"):
        if isinstance(p.get(key), str):
            return str(p[key])[:2000]
    return msgspec.json.encode(p).decode()[:2000]


def _context_show(b: Backend, a: Any) -> ContextOut:
    from ..receipts.record import read_receipt

    with b.read() as braid:
        got = read_receipt(braid, a.ref)
        r = got.receipt
        items = []
        for item in r.items:
            d = braid.log.read(item.seq).delta
            items.append(ItemOut(item.seq, item.delta_id, item.role, item.rank, item.score,
                                 d.erased.by if d.erased is not None else None, _text(d)))
    return ContextOut(got.seq, got.delta.id, got.delta.braid_id, got.delta.ts.isoformat(), r.run,
                      r.turn, r.model, msgspec.to_builtins(r.request) if r.request else None,
                      r.context_sha256, r.context_size, items)


def _context_replay(b: Backend, a: Any) -> ReplayOut:
    from ..recall.replay import replay

    with b.read() as braid:
        got = replay(braid, a.ref, directory=False)
    return ReplayOut(got.receipt_id, got.as_of, got.same, [Cited(s, i) for s, i in got.recorded],
                     [Cited(s, i) for s, i in got.found], got.reason, got.summary())


def receipt_tools() -> list[ToolSpec]:
    """The receipts' tools; ``context_replay`` only with the recall extra installed."""
    tools = [ToolSpec("context_show", ContextArgs, ContextOut, _context_show, title="Show a context receipt",
                      idempotent=True,
                      description="A context receipt (which memory versions a recall returned or a "
                      "host gave a model, recorded by recall with record true): its run, turn, "
                      "model, request and context digest, and each item with its text now, or "
                      "that it was erased.")]
    if recall_installed():
        tools.append(ToolSpec("context_replay", ContextArgs, ReplayOut, _context_replay,
                              title="Replay a context receipt", idempotent=True,
                              description="Run the recall a receipt records again, as of the seq it "
                              "saw, in reproducible mode: same (the same items in the same order), "
                              "or not, or why it cannot run (the embedder it records cannot be "
                              "loaded here, its query was kept only as a SHA-256)."))
    return tools
