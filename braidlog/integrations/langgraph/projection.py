"""The ``langgraph`` projection: what a store's LangGraph threads and memories hold, folded from
their deltas, for ``braidlog --app braidlog.integrations.langgraph state`` (and time travel,
``--at``). Per thread and checkpoint namespace: how many checkpoints and writes, the latest
checkpoint, its step and source, the channels it changed; per store namespace: each live item's
value (as stored: plain JSON as it is, anything else as its serializer's type), its version
count and seq. A pure fold, without LangGraph: it reads the payloads only.
"""

from __future__ import annotations

from typing import Any

from ...projection import Projection

__all__ = ["PROJECTION", "PROJECTIONS"]

KINDS = frozenset({"langgraph.checkpoint", "langgraph.writes", "langgraph.deleted", "langgraph.item"})


def _shown(enc: Any) -> Any:
    if isinstance(enc, dict) and "j" in enc:
        return enc["j"]
    return {"serialized": enc.get("t") if isinstance(enc, dict) else None}


def evolve(state: dict[str, Any], d: Any, seq: int) -> dict[str, Any]:
    p = d.payload
    threads, items = state["threads"], state["items"]
    if d.kind == "langgraph.checkpoint":
        ns = threads.setdefault(p.get("thread_id", ""), {}).setdefault(p.get("ns", ""), {
            "checkpoints": 0, "writes": 0})
        md = _shown(p.get("metadata"))
        ns["checkpoints"] += 1
        ns.update(latest=p.get("checkpoint_id"), seq=seq, changed=sorted(p.get("values", {})),
                  step=md.get("step") if isinstance(md, dict) else None,
                  source=md.get("source") if isinstance(md, dict) else None)
    elif d.kind == "langgraph.writes":
        ns = threads.get(p.get("thread_id", ""), {}).get(p.get("ns", ""))
        if ns is not None:
            ns["writes"] += 1
    elif d.kind == "langgraph.deleted":
        thread = threads.get(p.get("thread_id", ""))
        if thread is not None and p.get("what") == "thread":
            del threads[p["thread_id"]]
        elif thread is not None and p.get("what") == "prune":
            for ns in thread.values():
                ns["checkpoints"], ns["writes"] = 1, 0
    elif d.kind == "langgraph.item" and not p.get("refreshed"):
        space = items.setdefault(".".join(p.get("namespace", ())), {})
        key = p.get("key", "")
        if p.get("value") is None:
            space.pop(key, None)
            if not space:
                del items[".".join(p.get("namespace", ()))]
        else:
            old = space.get(key)
            space[key] = {"value": _shown(p["value"]), "seq": seq,
                          "versions": 1 if old is None else old["versions"] + 1}
    return state


PROJECTION: Projection[dict[str, Any]] = Projection(
    "langgraph", version=1, initial={"threads": {}, "items": {}}, evolve=evolve,
    kinds=KINDS, positional=True)
PROJECTIONS = [PROJECTION]
