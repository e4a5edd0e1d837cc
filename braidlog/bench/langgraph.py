"""The LangGraph workload: ``BraidlogSaver`` against langgraph-checkpoint-sqlite's ``SqliteSaver``
and ``AsyncSqliteSaver``, both durable (braidlog's default; SQLite in WAL with
``synchronous=FULL``, its default), on a real ``StateGraph`` whose state grows by a message a
step: a chat graph (``messages`` with LangGraph's ``add_messages``) whose one node answers each
user message with a message of 200 characters, so each ``invoke`` (a turn) is two steps (the
input, the node) and three checkpoints, and the state after n turns holds 2n messages.

Timed, braidlog and the peer back to back in each repeat (the first of them alternating from
one repeat to the next), with a 4 KiB write + fsync probe of the disk before each durable part
(the row beside them is their median):

- **500 turns** (1,000 steps) of one thread through ``graph.invoke``: the wall time (and, beside
  it, the same run on a store opened ``durable="wal"``: ``WAL``, the next design's prototype);
- **bytes** the store takes on disk after them (SQLite after a WAL checkpoint);
- **cold reads** of that thread grown to 667 turns (2,001 checkpoints), each in a new process
  of its own that has imported the libraries and warmed LangGraph's serializer (untimed, the
  same for both): ``get_tuple`` of the latest checkpoint, ``list(limit=10)``, a compiled graph's
  ``get_state``, each the first call on a saver opened for it: its time (the saver's opening
  included);
- **16 conversations** (16 thread ids) of the same graph stepping concurrently through
  ``ainvoke`` in one process (``AsyncSqliteSaver`` on the peer side): steps per second.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from typing import Any

from .eventsourcing import DISK
from .harness import Run, Sample, quiet_heap, remove, store_bytes
from .machine import fsync_ms

__all__ = ["TURNS", "COLD_TURNS", "CONVERSATIONS", "run_workload", "SQLITE", "ASYNC_SQLITE",
           "BRAIDLOG", "WAL", "TIMED_STEPS"]

TURNS, TURNS_QUICK = 500, 30          # the one-thread run (--quick: a smoke run, not the figure)
COLD_TURNS, COLD_TURNS_QUICK = 667, 40  # the thread the cold reads open: 2,001 checkpoints
CONVERSATIONS = 16
CONV_TURNS, CONV_TURNS_QUICK = 20, 3  # turns of each concurrent conversation
SQLITE = "SqliteSaver (WAL FULL)"
#: The next design for a durable commit, built as a prototype and measured beside braidlog: the
#: same saver on a store opened ``durable="wal"`` (one sync a commit through a write-ahead file).
WAL = "braidlog durable='wal' (next design)"
ASYNC_SQLITE = "AsyncSqliteSaver (WAL FULL)"
BRAIDLOG = "braidlog"
TIMED_STEPS = 8  # per repeat, for the progress bar
_WORDS = ("plan", "tool", "result", "memory", "note", "check", "user", "deploy", "error",
          "value", "step", "graph", "state", "answer", "search", "retry")


# -- the graph -------------------------------------------------------------------------------------

def _text(seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(30))[:200]


def graph(checkpointer: Any) -> Any:
    """The chat graph: START -> reply -> END, ``messages`` reduced by ``add_messages``."""
    from typing import Annotated, TypedDict

    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    Chat = TypedDict("Chat", {"messages": Annotated[list, add_messages]})  # noqa: UP013 - built at call time, with the reducer imported here

    def reply(state: Any) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=_text(n), id=f"a{n}")]}

    g = StateGraph(Chat)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=checkpointer)


def user(turn: int) -> dict[str, Any]:
    """The input of turn ``turn``: one user message."""
    from langchain_core.messages import HumanMessage

    return {"messages": [HumanMessage(content=_text(-turn - 1), id=f"h{turn}")]}


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


# -- the systems -----------------------------------------------------------------------------------

def _sqlite_conn(path: str) -> sqlite3.Connection:
    return sqlite3.connect(path, check_same_thread=False)


def _check_wal_full(mode: str, sync: int) -> None:
    if (mode, sync) != ("wal", 2):  # what the row's name says: WAL, FULL
        raise RuntimeError(f"SQLite runs in journal_mode={mode}, synchronous={sync}, not WAL FULL")


def _braidlog_saver(system: str, path: str) -> tuple[Any, Any]:
    """(saver, close) on braidlog: its own store (durable), or one opened durable="wal"."""
    from ..braid import open as open_store
    from ..integrations.langgraph import BraidlogSaver

    if system == BRAIDLOG:
        saver = BraidlogSaver(path)
        return saver, saver.close
    braid = open_store(path, projections=[], durable="wal")
    saver = BraidlogSaver(braid)

    def close_braid() -> None:
        saver.close()
        braid.close()
    return saver, close_braid


def open_saver(system: str, path: str) -> tuple[Any, Any]:
    """(saver, close) of a sync saver at ``path``."""
    if system in (BRAIDLOG, WAL):
        saver, close_braid = _braidlog_saver(system, path)
        return saver, close_braid
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = _sqlite_conn(path)
    sqlite = SqliteSaver(conn)
    sqlite.setup()
    _check_wal_full(conn.execute("PRAGMA journal_mode").fetchone()[0],
                    conn.execute("PRAGMA synchronous").fetchone()[0])

    def close() -> None:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    return sqlite, close


# -- the timed parts -------------------------------------------------------------------------------

def _turns(system: str, path: str, start: int, stop: int) -> float:
    """Seconds to run turns [start, stop) of thread "chat" through ``graph.invoke``."""
    saver, close = open_saver(system, path)
    try:
        g, config = graph(saver), _config("chat")
        clock = time.perf_counter
        with quiet_heap():
            t = clock()
            for turn in range(start, stop):
                g.invoke(user(turn), config)
            return clock() - t
    finally:
        close()


READS = ("first get_tuple ms", "first list 10 ms", "first get_state ms")


def _cold(system: str, path: str) -> dict[str, float]:
    """The cold reads, each in a new process of its own (``python -m braidlog.bench.langgraph``):
    a read that follows another in one process would pay for the garbage of the one before (a
    full collection of CPython's collector, 70 to 100 ms here, lands where its thresholds say)."""
    out = {}
    for read in READS:
        run = subprocess.run([sys.executable, "-m", "braidlog.bench.langgraph", system, path, read],
                             capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        if run.returncode != 0:
            raise RuntimeError(f"the cold-read process failed: {run.stderr[-2000:]}")
        out.update(json.loads(run.stdout.strip().splitlines()[-1]))
    return out


def cold_reads(system: str, path: str, read: str) -> dict[str, float]:
    """Run in the new process: the first ``read`` (get_tuple, list(limit=10) or a compiled
    graph's get_state) on a saver opened for it, its opening included, in ms."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()  # warm what both sides share: the serializer's first use
    serde.loads_typed(serde.dumps_typed(user(0)["messages"]))
    graph(None)
    if system == BRAIDLOG:  # the saver's modules imported, as in a process that runs a graph
        from ..integrations.langgraph import BraidlogSaver  # noqa: F401  (loaded, as in a graph's process)
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: F401  (loaded, as in a graph's process)
    config = _config("chat")
    calls = {READS[0]: lambda s: s.get_tuple(config),
             READS[1]: lambda s: list(s.list(config, limit=10)),
             READS[2]: lambda s: graph(s).get_state(config)}
    if read not in calls:
        raise ValueError(f"read must be one of {', '.join(READS)}, not {read!r}")
    clock = time.perf_counter
    t = clock()
    saver, close = open_saver(system, path)
    got = calls[read](saver)
    ms = (clock() - t) * 1000
    close()
    if not got:
        raise RuntimeError(f"{system}: {read} found nothing at {path}")
    return {read: ms}


async def _conversations(system: str, path: str, turns: int) -> float:
    """Seconds for CONVERSATIONS threads of ``turns`` turns each, all at once through ainvoke."""
    clock = time.perf_counter

    async def talk(g: Any, thread: str) -> None:
        for turn in range(turns):
            await g.ainvoke(user(turn), _config(thread))

    async def all_of(saver: Any) -> float:
        g = graph(saver)
        t = clock()
        await asyncio.gather(*(talk(g, f"c{i}") for i in range(CONVERSATIONS)))
        return clock() - t

    if system in (BRAIDLOG, WAL):
        saver, close = _braidlog_saver(system, path)
        try:
            return await all_of(saver)
        finally:
            close()
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(path) as sqlite:
        await sqlite.setup()
        async with sqlite.conn.execute("PRAGMA journal_mode") as c1, \
                sqlite.conn.execute("PRAGMA synchronous") as c2:
            mode, sync = await c1.fetchone(), await c2.fetchone()
            assert mode is not None and sync is not None  # a PRAGMA answers one row
            _check_wal_full(mode[0], sync[0])
        return await all_of(sqlite)


def run_workload(run: Run) -> list[Sample]:
    """One repeat: each part for braidlog and its peer back to back, on fresh stores."""
    try:
        import aiosqlite  # noqa: F401  (the bench extra)
        import langgraph.checkpoint.sqlite  # noqa: F401  (the bench extra)

        from ..integrations import langgraph as _  # noqa: F401  (the langgraph extra)
    except ImportError as e:
        run.skipped.append(f"langgraph: {e} (pip install 'braidlog[bench,langgraph]')")
        return []
    quick = run.config.quick
    turns, cold = (TURNS_QUICK, COLD_TURNS_QUICK) if quick else (TURNS, COLD_TURNS)
    cap = max(TURNS_QUICK, run.config.size // 3 + 1)  # three checkpoints a turn: within --size
    turns, cold = min(turns, cap), min(cold, cap)
    conv = CONV_TURNS_QUICK if quick else CONV_TURNS
    rep = run.cache["langgraph:repeat"] = run.cache.get("langgraph:repeat", -1) + 1
    order = (BRAIDLOG, SQLITE) if rep % 2 == 0 else (SQLITE, BRAIDLOG)
    W, out, probes = "langgraph", [], []
    for system in order:
        path = run.path("langgraph.lmdb" if system == BRAIDLOG else "langgraph.db")
        try:
            run.step(f"langgraph · {system}: {turns:,} turns")
            probes.append(fsync_ms(run.root))
            out.append(Sample(W, system, "thread wall s", _turns(system, path, 0, turns), "s", "lower"))
            out.append(Sample(W, system, "MB on disk", store_bytes(path) / 1e6, "MB", "lower"))
            run.step(f"langgraph · {system}: cold reads of {3 * cold:,} checkpoints")
            _turns(system, path, turns, cold)
            for name, ms in _cold(system, path).items():
                out.append(Sample(W, system, name, ms, "ms", "lower"))
        finally:
            remove(path)
    path = run.path("langgraph-wal.lmdb")
    try:
        run.step(f"langgraph · {WAL}: {turns:,} turns")
        out.append(Sample(W, WAL, "thread wall s", _turns(WAL, path, 0, turns), "s", "lower"))
    finally:
        remove(path)
    for system in ((BRAIDLOG, ASYNC_SQLITE) if rep % 2 == 0 else (ASYNC_SQLITE, BRAIDLOG)) + (WAL,):
        path = run.path("langgraph-conv.db" if system == ASYNC_SQLITE else "langgraph-conv.lmdb")
        try:
            run.step(f"langgraph · {system}: {CONVERSATIONS} conversations × {conv} turns")
            probes.append(fsync_ms(run.root))
            seconds = asyncio.run(_conversations(system, path, conv))
            out.append(Sample(W, system, "conversations steps/s",
                              CONVERSATIONS * conv * 2 / seconds, "/s", "higher"))
        finally:
            remove(path)
    # the disk's floor beside the durable rows: a 4 KiB write + fsync before each part, their median
    out.append(Sample(W, DISK, "fsync p50 ms", statistics.median(probes), "ms", "lower"))
    return out


if __name__ == "__main__":  # python -m braidlog.bench.langgraph SYSTEM PATH READ: a cold read
    print(json.dumps(cold_reads(sys.argv[1], sys.argv[2], sys.argv[3])))
