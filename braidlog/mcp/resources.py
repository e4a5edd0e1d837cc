"""The resources: ``braidlog://head``, ``braidlog://delta/{id}`` and ``braidlog://braid/{id}``.

Each reads as JSON. A delta is named by its id (or its seq); a braid shows its newest deltas,
newest first, without their vectors. An id the store does not hold is the protocol's "resource
not found".
"""

from __future__ import annotations

from itertools import islice
from typing import Any

import msgspec
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from .backend import Backend
from .tools import record_out

__all__ = ["add_resources", "RECENT"]

#: How many of a braid's newest deltas ``braidlog://braid/{id}`` shows.
RECENT = 20

_JSON = "application/json"


def _json(value: Any) -> str:
    return msgspec.json.encode(msgspec.to_builtins(value), order="deterministic").decode()


def add_resources(server: MCPServer, b: Backend) -> None:
    @server.resource("braidlog://head", name="head", title="Log head", mime_type=_JSON,
                     description="The log's head: its last seq and chain hash (SEQ:HASH).")
    def head() -> str:
        with b.read() as braid:
            h = braid.head()
        return _json({"seq": h.seq, "hash": h.hash.hex(), "head": str(h)})

    @server.resource("braidlog://delta/{delta_id}", name="delta", title="A delta", mime_type=_JSON,
                     description="One delta by id (or seq), with its seq and chain hash.")
    def delta(delta_id: str) -> str:
        with b.read() as braid:
            ref = delta_id.strip()
            if ref.isdigit():
                seq = int(ref)
                rec = braid.log.read(seq) if 1 <= seq <= braid.head().seq else None
            else:
                rec = braid.log.get(ref)
        if rec is None:
            raise ResourceNotFoundError(f"no delta with id or seq {delta_id!r}")
        return _json(record_out(rec))

    @server.resource("braidlog://braid/{braid_id}", name="braid", title="A braid's recent deltas",
                     mime_type=_JSON,
                     description=f"A braid's {RECENT} newest deltas, newest first, and how many it holds.")
    def braid_deltas(braid_id: str) -> str:
        with b.read() as braid:
            count = braid.log.braid_head(braid_id).version
            records = [record_out(r, vector=False)
                       for r in islice(braid.log.scan_braid(braid_id, reverse=True), RECENT)]
            head = str(braid.head())
        if not count:
            raise ResourceNotFoundError(f"braid {braid_id!r} holds no delta")
        return _json({"braid_id": braid_id, "count": count, "head": head, "records": records})
