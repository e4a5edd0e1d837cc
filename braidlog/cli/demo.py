"""``braidlog demo``: a realistic agent session written into a store, then shown.

The core part is a short conversation with a tool call; every shipped projection family adds
its own scripted piece from ``braidlog.projections.demos.<family>``.
"""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta
from typing import Any

from ..braid import open as open_braid
from ..delta import GenericDelta, Provenance, Refs, new_id
from ..errors import MissingDependency

__all__ = ["run_demo", "core_session"]


def core_session(braid_id: str, start: datetime) -> list[GenericDelta]:
    """A user asks, the assistant calls a tool, reads the result and answers."""
    t = iter(start + timedelta(seconds=s) for s in range(0, 3600, 7))
    user, assistant = Provenance("user", source="chat"), Provenance("assistant", model="demo-llm")
    call_id = new_id()

    def d(kind: str, payload: dict[str, Any], prov: Provenance, confidence: float = 1.0,
          refs: Refs | None = None, tags: tuple[str, ...] = ()) -> GenericDelta:
        return GenericDelta(braid_id=braid_id, kind=kind, ts=next(t), provenance=prov,
                            confidence=confidence, payload=payload, refs=refs, tags=tags)

    first = d("message", {"text": "Which database should the agent memory service use?"}, user)
    return [
        d("tick", {"note": "session start"}, Provenance("system")),
        first,
        d("observation", {"text": "workload: append-heavy, audit needed", "data": {"writes_per_s": 2000}},
          Provenance("perception", source="metrics"), 0.9),
        d("tool_call", {"tool": "web_search", "args": {"q": "embedded append-only log store"},
                        "call_id": call_id}, assistant),
        d("tool_result", {"tool": "web_search", "call_id": call_id,
                          "output": ["LMDB: copy-on-write B+tree, one writer", "SQLite WAL"]},
          Provenance("tool", tool="web_search"), 0.8),
        d("microagent", {"name": "summariser", "spec": {"goal": "compare candidates"}}, assistant),
        d("message", {"text": "An embedded LMDB log: one writer, fast reads, a hash chain for audit."},
          assistant, 0.85, refs=Refs(deltas=(first.id,)), tags=("answer",)),
    ]


#: Scripted pieces from braidlog.projections.demos, in the order they are written.
PIECES = ("braid", "episodes", "decisions", "fields", "memories", "recall")


def run_demo(path: str) -> tuple[str, int, list[str]]:
    """Write the demo session into the store at ``path``; its braid id, first seq and lines."""
    start = datetime.now(UTC) - timedelta(hours=2)  # microseconds keep runs apart
    braid_id = f"demo-{start:%Y%m%dT%H%M%S.%f}"
    lines: list[str] = []
    with open_braid(path) as braid:
        deltas = core_session(braid_id, start)
        seqs = braid.append_batch(deltas)
        first = seqs[0]
        lines.append(f"a conversation with a tool call: {len(seqs)} deltas at seq {seqs[0]}..{seqs[-1]}")
        offset = timedelta(minutes=5)
        for piece in PIECES:
            try:
                module = importlib.import_module(f"braidlog.projections.demos.{piece}")
            except ModuleNotFoundError:
                continue
            except MissingDependency as e:  # recall without its extra: say so in one line, go on
                lines.append(f"{piece}: skipped: {e}")
                continue
            lines.extend(module.write(braid, start + offset, braid_id=braid_id))
            offset += timedelta(minutes=10)
        lines.append(f"head {braid.head()}")
    return braid_id, first, lines
