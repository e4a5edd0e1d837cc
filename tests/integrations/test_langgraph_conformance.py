"""LangGraph's own conformance suite (langgraph-checkpoint-conformance) on BraidlogSaver, on a
real LMDB store per capability suite."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES, EXTENDED_CAPABILITIES

from braidlog.integrations.langgraph import BraidlogSaver


def test_every_capability_passes(tmp_path):
    made = []

    @checkpointer_test(name="BraidlogSaver")
    async def braidlog_saver():
        path = tmp_path / f"store{len(made)}"
        made.append(path)
        with BraidlogSaver(str(path)) as saver:
            yield saver

    report = asyncio.run(validate(braidlog_saver))
    failures = {cap: r.failures for cap, r in report.results.items() if r.passed is False}
    assert not failures, failures
    assert report.passed_all_base()
    for cap in BASE_CAPABILITIES:
        result = report.results[cap.value]
        assert result.detected and result.passed and result.tests_failed == 0, cap
    # the extended capabilities the installed suite knows: every one is implemented and passes
    for cap in EXTENDED_CAPABILITIES:
        result = report.results[cap.value]
        assert result.detected and result.passed, cap
    assert report.conformance_level() == "FULL"
    assert sum(report.results[c.value].tests_passed for c in BASE_CAPABILITIES) >= 58
    assert len(made) == len(report.results)  # a fresh store per capability suite
