"""Shared fixtures: a ``log`` for each store, seeded random deltas that print their seed."""

from __future__ import annotations

import os
import random
from datetime import datetime, timedelta, timezone

import pytest

import braidlog
from braidlog import GenericDelta, LmdbLog, MemoryLog, Provenance, Refs, BeadRef

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture(params=["memory", "lmdb"])
def log(request, tmp_path):
    store = MemoryLog() if request.param == "memory" else LmdbLog(tmp_path / "store")
    yield store
    store.close()


@pytest.fixture
def lmdb_path(tmp_path):
    return tmp_path / "store"


@pytest.fixture
def rng(request):
    seed = int(os.environ.get("BRAIDLOG_SEED", random.randrange(2**32)))
    print(f"\n[seed] BRAIDLOG_SEED={seed} reproduces {request.node.nodeid}")
    return random.Random(seed)


def make_delta(i: int, *, braid: str = "b1", kind: str = "message", ts: datetime | None = None,
               refs: Refs | None = None, **kw) -> GenericDelta:
    """A small valid delta, numbered ``i`` (its ts is T0 + i seconds unless given)."""
    payload = kw.pop("payload", None)
    if payload is None:
        payload = {"text": f"message {i}"} if kind == "message" else {}
    return GenericDelta(braid_id=braid, kind=kind, ts=ts or T0 + timedelta(seconds=i),
                        provenance=kw.pop("provenance", Provenance("user")),
                        confidence=kw.pop("confidence", 1.0), payload=payload, refs=refs, **kw)


def random_deltas(rng: random.Random, n: int, braids: int = 3) -> list[GenericDelta]:
    """Deltas of the core kinds over a few braids, with refs, tags and out-of-order times."""
    out: list[GenericDelta] = []
    for i in range(n):
        kind = rng.choice(["message", "observation", "tool_call", "tool_result", "tick"])
        payload = {
            "message": {"text": f"m{i} " + "x" * rng.randrange(0, 40)},
            "observation": {"text": "seen", "data": {"n": rng.randrange(100)}},
            "tool_call": {"tool": "search", "args": {"q": str(i)}},
            "tool_result": {"tool": "search", "output": [i, "ok"]},
            "tick": {},
        }[kind]
        refs = None
        if out and rng.random() < 0.3:
            refs = Refs(deltas=(rng.choice(out).id,), beads=(BeadRef("bead-" + str(i % 4), "used"),))
        out.append(GenericDelta(
            braid_id=f"b{rng.randrange(braids)}", kind=kind,
            ts=T0 + timedelta(seconds=i + rng.choice([0, 0, 0, -5, 3])),
            provenance=Provenance(rng.choice(braidlog.PROVENANCE_KINDS)),
            confidence=round(rng.random(), 3), payload=payload, refs=refs,
            tags=tuple(rng.sample(["a", "b", "c"], rng.randrange(3)))))
    return out
