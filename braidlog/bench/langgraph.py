"""The LangGraph workload: ``BraidlogSaver`` against langgraph-checkpoint-sqlite's
``SqliteSaver``, both durable (braidlog's default; SQLite in WAL with ``synchronous=FULL``, its
default), on one thread of ``STEPS`` steps whose state grows: each step appends a message of
about 200 characters to a ``messages`` channel (LangChain messages, as a chat agent's are),
bumps a counter, and stores the node's write, as a LangGraph run does (``put`` then
``put_writes``).

Timed: ``put`` and ``put_writes`` latency over the thread; then ``get_tuple`` of the latest
checkpoint (what resuming a thread reads) and of random earlier ones (time travel), and
``list`` of a page of 10 checkpoints before a random one (a history view), each on a fresh
saver object on the store, so nothing the writer cached helps it ("first get_tuple" is that
saver's first call: what a process resuming the thread waits for). Sized: the bytes each store takes
on disk after the thread (SQLite after a WAL checkpoint).
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from datetime import UTC, datetime
from typing import Any

from .harness import Run, Sample, each, percentile, quiet_heap, remove

__all__ = ["STEPS", "STEPS_QUICK", "TIMED_STEPS", "run_workload", "SQLITE"]

STEPS = 1_000
STEPS_QUICK = 60   # --quick: a smoke run of the same code, not the figure
READS = 200
READS_QUICK = 20
SQLITE = "SqliteSaver (WAL FULL)"
BRAIDLOG = "braidlog"
TIMED_STEPS = 2  # per repeat, for the progress bar


def _thread(seed: int, steps: int) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any], list]]:
    """(checkpoint, metadata, new_versions, writes) per step: the same for both savers."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.base.id import uuid6

    rng = random.Random(seed)
    words = ("plan", "tool", "result", "memory", "note", "check", "user", "deploy", "error",
             "value", "step", "graph", "state", "answer", "search", "retry")
    messages: list[Any] = []
    out = []
    versions = {"messages": 0, "count": 0}
    for step in range(steps):
        text = " ".join(rng.choice(words) for _ in range(30))[:200]
        cls = HumanMessage if step % 2 == 0 else AIMessage
        msg = cls(content=text, id=f"m{step}")
        messages = [*messages, msg]
        versions = {k: v + 1 for k, v in versions.items()}
        cv = {k: f"{v:032}.{rng.random():016}" for k, v in versions.items()}
        checkpoint = {"v": 4, "id": str(uuid6(clock_seq=step)), "ts": datetime.now(UTC).isoformat(),
                      "channel_values": {"messages": messages, "count": step},
                      "channel_versions": cv,
                      "versions_seen": {"agent": dict(cv)}, "updated_channels": ["messages", "count"]}
        metadata = {"source": "loop", "step": step, "parents": {}}
        out.append((checkpoint, metadata, dict(cv), [("messages", [msg]), ("count", step)]))
    return out


def _dir_bytes(path: str) -> int:
    if os.path.isfile(path):
        return sum(os.path.getsize(path + s) for s in ("", "-wal", "-shm") if os.path.exists(path + s))
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


class _Sqlite:
    def __init__(self, path: str) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()
        mode = self.conn.execute("PRAGMA journal_mode").fetchone()[0]
        sync = self.conn.execute("PRAGMA synchronous").fetchone()[0]
        assert (mode, sync) == ("wal", 2), (mode, sync)  # what the row's name says: WAL, FULL

    def close(self) -> None:
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()


class _Braidlog:
    def __init__(self, path: str) -> None:
        from ..integrations.langgraph import BraidlogSaver

        self.saver = BraidlogSaver(path)

    def close(self) -> None:
        self.saver.close()


def _write(system: Any, steps: list) -> tuple[list[float], list[float], list[dict]]:
    """Put each step's checkpoint (its parent the one before, as LangGraph chains them) and its
    node's writes; the seconds each took."""
    saver, clock = system.saver, time.perf_counter
    config: dict[str, Any] = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    puts: list[float] = []
    writes: list[float] = []
    configs = []
    with quiet_heap():
        for checkpoint, metadata, new, ws in steps:
            t = clock()
            config = saver.put(config, checkpoint, metadata, new)
            puts.append(clock() - t)
            t = clock()
            saver.put_writes(config, ws, "task-1", "agent")
            writes.append(clock() - t)
            configs.append(config)
    return puts, writes, configs


def _read(system: Any, configs: list[dict], seed: int, reads: int) -> dict[str, list[float]]:
    saver = system.saver
    rng = random.Random(seed)
    latest = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    picks = [rng.choice(configs) for _ in range(reads)]
    first = each(lambda c: saver.get_tuple(c), [latest])  # a process resuming the thread
    return {
        "first get_tuple": first,
        "get_tuple latest": each(lambda c: saver.get_tuple(c), [latest] * reads),
        "get_tuple random": each(lambda c: saver.get_tuple(c), picks),
        "list 10": each(lambda c: list(saver.list(latest, before=c, limit=10)), picks),
    }


def run_workload(run: Run) -> list[Sample]:
    """One repeat: a fresh thread on each saver, written, then read by a fresh saver object."""
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401  (the bench extra)

        from ..integrations import langgraph as _  # noqa: F401
    except ImportError as e:
        run.skipped.append(f"langgraph: {e} (pip install 'braidlog[bench,langgraph]')")
        return []
    n = STEPS_QUICK if run.config.quick else STEPS
    key = f"langgraph:{n}"
    if key not in run.cache:
        run.cache[key] = _thread(run.config.seed, n)
    steps = run.cache[key]
    out: list[Sample] = []
    W = "langgraph"
    for system, make, path in ((BRAIDLOG, _Braidlog, run.path("langgraph.lmdb")),
                               (SQLITE, _Sqlite, run.path("langgraph.db"))):
        run.step(f"langgraph · {system}: {n:,} steps")
        s = make(path)
        try:
            puts, writes, configs = _write(s, steps)
        finally:
            s.close()
        out.append(Sample(W, system, "MB stored", _dir_bytes(path) / 1e6, "MB", "lower"))
        for name, lat in (("put", puts), ("put_writes", writes)):
            for q in (50, 99):
                out.append(Sample(W, system, f"{name} p{q} ms", percentile(lat, q) * 1000, "ms", "lower"))
        s = make(path)
        try:
            reads = READS_QUICK if run.config.quick else READS
            for name, lat in _read(s, configs, run.config.seed, reads).items():
                out.append(Sample(W, system, f"{name} p50 ms", percentile(lat, 50) * 1000, "ms", "lower"))
        finally:
            s.close()
        remove(path)
    return out
