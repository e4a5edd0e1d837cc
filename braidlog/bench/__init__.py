"""Benchmarks: realistic agent workloads timed on braidlog and on its peers, in one run.

Shared by ``braidlog bench`` and the pytest-benchmark suites in ``bench/``. Every workload takes
a size and a seed, and is timed on braidlog and on each installed peer with identical data:

- raw LMDB puts of the same encoded bytes (the ceiling: no validation, chain or indexes), and
  the same puts plus braidlog's four index tables from keys prepared beforehand (the ceiling of
  braidlog's page writes);
- sqlite3 from the standard library (WAL; ``synchronous=FULL`` for the durable rows);
- the ``eventsourcing`` library on its SQLite and in-memory (POPO) recorders and on braidlog's
  persistence module (``braidlog.integrations.eventsourcing``), when installed.

A run repeats every workload ``repeat`` times, peers interleaved with braidlog inside each
repeat, and reports each figure as the median and spread of its repeats, plus its ratio to
braidlog: the median of the per-repeat ratios, so a noisy spell hits both sides of a ratio.

The modules, by job: ``data`` (the agent session, the bench's projections, logs built untimed),
``peers`` (raw LMDB, sqlite3, eventsourcing, braidlog without its tree), ``harness`` (config,
samples, timing), ``writes`` and ``reads`` (the workloads), ``recall`` (the recall workload and
its fresh-process memory runs), ``machine`` (the machine's facts), ``report`` (rows, targets,
tables) and ``runner`` (a run). They time library calls; none imports the CLI.

The names below load on first use, so that ``python -m braidlog.bench.recall`` (the recall
workload's memory runs) holds only what it measures.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Each public name and the module of this package that defines it.
_WHERE = {
    **dict.fromkeys(("START", "BATCH", "AgentSession", "agent_deltas", "Entity", "ENTITIES",
                     "COUNTER", "all_projections", "admissible", "build_log",
                     "time_travel_log"), "data"),
    **dict.fromkeys(("PEER_IMPORT", "STARTUP_COMMANDS", "startup_commands", "RAW_INDEXED",
                     "NO_TREE", "ES_BATCH", "ES_PEERS", "IndexKeys", "index_keys", "RawLmdb", "SqliteLog",
                     "sql_row", "eventsourcing_installed", "EventsourcingApp", "NoTreeLog"), "peers"),
    **dict.fromkeys(("WORKLOADS", "SCALING_SIZES", "BIG", "Config", "Sample", "Step", "Run", "percentile",
                     "quiet_heap", "timed", "each", "latencies", "remove", "launch"), "harness"),
    **dict.fromkeys(("BRAID_FOLLOWING", "BRAID_CHECKED", "APPENDERS", "appenders", "WAL_LOG"), "writes"),
    **dict.fromkeys(("Row", "TargetResult", "Report", "TARGETS", "render", "load", "changes",
                     "Change"), "report"),
    "machine_facts": "machine",
    "run": "runner",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
