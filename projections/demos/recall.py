"""Demo: recall by meaning, now and as of an earlier point, from vectors stored in the log."""

from __future__ import annotations

from datetime import datetime, timedelta

import braidlog
from braidlog import Provenance, ProvenanceKind
from braidlog.recall import embed_delta, recall_at, recall_for

BRAID = "recall-demo"
QUERY = "database choice for the agent memory store"

#: (minutes after start, provenance, tags, text): a choice made, other talk, the choice revised.
SCRIPT: list[tuple[int, ProvenanceKind, tuple[str, ...], str]] = [
    (0, "user", (), "Which database should hold the agent memory store?"),
    (1, "assistant", ("decision",), "Decision: the agent memory store uses SQLite, one file and "
                                    "easy backups."),
    (2, "user", (), "Remind me to book the train to Porto on Friday."),
    (3, "tool", (), "Weather for Porto on Friday: light rain, 17 C."),
    (4, "assistant", (), "Booked the 09:05 train to Porto for Friday."),
    (6, "assistant", ("decision",), "Database choice revised: LMDB replaces SQLite for the agent "
                                    "memory store, since appends dominate and audits need the hash chain."),
]


def write(braid: braidlog.Braid, start: datetime, braid_id: str | None = None) -> list[str]:
    """Append a short session whose database choice changes; recall it before and after."""
    braid_id = braid_id or f"{BRAID}-{start:%Y%m%dT%H%M%S%f}"
    deltas = []
    for minutes, who, tags, text in SCRIPT:
        prov = Provenance(who, tool="weather") if who == "tool" else Provenance(who)
        kind = "tool_result" if who == "tool" else "message"
        payload = {"tool": "weather", "output": text} if who == "tool" else {"text": text}
        deltas.append(embed_delta(braidlog.delta(braid_id, kind, payload, provenance=prov, tags=tags,
                                                 ts=start + timedelta(minutes=minutes))))
    seqs = braid.append_batch(deltas)
    before = seqs[-2]  # the last delta before the revision
    then = recall_at(braid.at(before), QUERY, 1, braid=braid_id, tags="decision")[0]
    now = recall_for(braid).recall(QUERY, 1, braid=braid_id, tags="decision")[0]
    assert then.delta is not None and now.delta is not None  # recall returns deltas by default
    return [
        f"recall: {len(seqs)} messages with vectors (offline hashing embedder) at seq {seqs[0]}..{seqs[-1]}",
        f"recall {QUERY!r} among decisions as of seq {before}: seq {then.seq} (score {then.score:.2f}) "
        f"\u00ab{_short(then.delta)}\u00bb",
        f"recall {QUERY!r} among decisions now: seq {now.seq} (score {now.score:.2f}) \u00ab{_short(now.delta)}\u00bb",
    ]


def _short(d: braidlog.GenericDelta, width: int = 60) -> str:
    text = d.payload.get("text") or str(d.payload.get("output", ""))
    return text if len(text) <= width else text[: width - 1] + "\u2026"
