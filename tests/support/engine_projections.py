"""Small projections and a decider used by the engine's tests."""

from __future__ import annotations

import msgspec

from braidlog import Decider, Projection, Rejected


class Counts(msgspec.Struct):
    by_kind: dict[str, int] = {}
    by_braid: dict[str, int] = {}
    last_text: dict[str, str] = {}
    refs: list[str] = []


def evolve_counts(s: Counts, d) -> Counts:
    s.by_kind[d.kind] = s.by_kind.get(d.kind, 0) + 1
    s.by_braid[d.braid_id] = s.by_braid.get(d.braid_id, 0) + 1
    if d.kind == "message":
        s.last_text[d.braid_id] = d.payload["text"]
    if d.refs is not None:
        s.refs.extend(d.refs.deltas)
    return s


COUNTS = Projection("counts", 1, Counts(), evolve_counts)


class Tally(msgspec.Struct):
    total: float = 0.0
    seen: int = 0


def evolve_tally(s: Tally, d) -> Tally:
    return Tally(s.total + d.confidence, s.seen + 1)


TALLY = Projection("tally", 1, Tally(), evolve_tally, kinds={"observation", "tool_result"})


class Counter(msgspec.Struct):
    value: int = 0


class Increment(msgspec.Struct):
    expected_value: int | None = None
    limit: int | None = None


def evolve_counter(s: Counter, d) -> Counter:
    value = d.payload.get("data", {}).get("value")
    return Counter(value) if isinstance(value, int) and d.payload.get("text") == "counter" else s


def decide_counter(cmd: Increment, s: Counter, ctx):
    if cmd.limit is not None and s.value >= cmd.limit:
        raise Rejected(f"counter is at its limit {cmd.limit}")
    if cmd.expected_value is not None and s.value != cmd.expected_value:
        return []  # already done: somebody moved it past where the caller saw it
    return [ctx.delta("observation", {"text": "counter", "data": {"value": s.value + 1}})]


COUNTER = Decider("counter", 1, Counter(), evolve_counter, kinds={"observation"}, decide=decide_counter)


class Seen(msgspec.Struct):
    at: list[list] = []   # [seq, kind, delta id] of every delta shown to evolve


def evolve_seen(s: Seen, d, seq: int) -> Seen:
    s.at.append([seq, d.kind, d.id])
    return s


#: A positional projection that reads ticks, deltas citing deltas, and dream deltas.
SEEN = Projection("seen", 1, Seen(), evolve_seen, kinds={"tick"}, positional=True,
                  refs={"deltas"}, provenances={"dream"})
