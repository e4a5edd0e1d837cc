"""The bench's LangGraph workload: BraidlogSaver against SqliteSaver and AsyncSqliteSaver on a real
chat StateGraph, every figure and target present; a quick run (the figures themselves are
docs/benchmarks.md's)."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")
pytest.importorskip("aiosqlite")

from braidlog import bench
from braidlog.bench.eventsourcing import DISK
from braidlog.bench.langgraph import ASYNC_SQLITE, SQLITE, WAL


def test_the_langgraph_workload_reports_every_target(tmp_path):
    config = bench.Config.make(quick=True, repeat=1, only=["langgraph"], dir=str(tmp_path))
    report = bench.run(config)
    rows = {(r.system, r.metric): r for r in report.rows if r.workload == "langgraph"}
    metrics = {"thread wall s", "MB on disk", "first get_tuple ms", "first list 10 ms",
               "first get_state ms"}
    assert {m for s, m in rows if s == SQLITE} == metrics
    assert {m for s, m in rows if s == ASYNC_SQLITE} == {"conversations steps/s"}
    assert {m for s, m in rows if s == WAL} == {"thread wall s", "conversations steps/s"}  # next design
    assert {m for s, m in rows if s == "braidlog"} == metrics | {"conversations steps/s"}
    assert all(r.median > 0 for r in rows.values())
    assert rows[(DISK, "fsync p50 ms")].median > 0  # the disk's floor beside the durable rows
    assert rows[(SQLITE, "MB on disk")].ratio > 1  # SqliteSaver stores every state whole
    targets = [t for t in report.targets if t.name.startswith("LangGraph")]
    assert len(targets) == 7
    for t in targets:
        assert t.value is not None and t.value > 0, t.name
        assert "fsync p50" in t.note, t.note
    assert not report.skipped
