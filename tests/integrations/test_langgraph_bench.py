"""The bench's LangGraph workload: BraidlogSaver and SqliteSaver on the same growing thread,
every figure present; a quick run (the figures themselves are docs/benchmarks.md's)."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")

from braidlog import bench  # noqa: E402
from braidlog.bench.langgraph import SQLITE  # noqa: E402


def test_the_langgraph_workload_reports_both_savers(tmp_path):
    config = bench.Config.make(quick=True, repeat=1, only=["langgraph"], dir=str(tmp_path))
    report = bench.run(config)
    rows = {(r.system, r.metric): r for r in report.rows if r.workload == "langgraph"}
    metrics = {"MB stored", "put p50 ms", "put p99 ms", "put_writes p50 ms", "put_writes p99 ms", "first get_tuple p50 ms",
               "get_tuple latest p50 ms", "get_tuple random p50 ms", "list 10 p50 ms"}
    for system in ("braidlog", SQLITE):
        assert {m for s, m in rows if s == system} == metrics
        assert all(rows[(system, m)].median > 0 for m in metrics)
    assert rows[(SQLITE, "MB stored")].ratio > 1  # SqliteSaver stores every state whole
    target = next(t for t in report.targets if t.name.startswith("LangGraph"))
    assert target.value is not None and target.ok is (target.value <= 0.5)
    assert not report.skipped
