"""What the tests share: small valid deltas, seeded random logs, a forked child's outcome."""

from __future__ import annotations

import os
import pickle
import random
import select
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import braidlog
from braidlog import BeadRef, GenericDelta, Provenance, Refs

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root: its docs/, pyproject.toml and tests/fixtures/."""
T0 = datetime(2026, 1, 1, tzinfo=UTC)


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
        provenance = Provenance(rng.choice(braidlog.PROVENANCE_KINDS))
        confidence = round(rng.random(), 3)
        if provenance.kind == "dream":  # dream content starts low (the trust rule at the boundary)
            confidence = round(confidence * 0.3, 3)
        out.append(GenericDelta(
            braid_id=f"b{rng.randrange(braids)}", kind=kind,
            ts=T0 + timedelta(seconds=i + rng.choice([0, 0, 0, -5, 3])),
            provenance=provenance, confidence=confidence, payload=payload, refs=refs,
            tags=tuple(rng.sample(["a", "b", "c"], rng.randrange(3)))))
    return out


def in_child(fn, *args, timeout: float = 30.0) -> str:
    """``fn(*args)`` in a forked child: its outcome (picklable), or how the child died (a signal,
    an exception that is not caught, a hang past ``timeout`` seconds)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            outcome = fn(*args)
        except BaseException as e:  # any exception: a non-braidlog exception is the finding
            outcome = f"crash: {type(e).__name__}: {e}"
        os.write(w, pickle.dumps(outcome))
        os._exit(0)
    os.close(w)
    deadline, data = time.monotonic() + timeout, b""
    while True:
        ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            return "hang"
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"crash: killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
    return pickle.loads(data) if data else "crash: no outcome"
