"""The pytest-benchmark suites: ``pytest bench --benchmark-only``.

Each bench is one workload of ``braidlog bench`` (``braidlog.bench``): the same code, data and
peers, braidlog and each peer interleaved inside every repeat; nothing here is written twice.
pytest-benchmark times the whole workload; the figures that matter (each system's rates and
latencies, and their ratios) go into each bench's ``extra_info`` and, at the end of the session,
a summary of the targets of ``braidlog.bench.report.TARGETS`` (the one table of targets) that the
benches measured. Nothing asserts anything about time.

Settings: ``BRAIDLOG_BENCH_SIZE`` (the run's ``--size``, default 10,000), ``BRAIDLOG_BENCH_REPEAT``
(default 3), ``BRAIDLOG_BENCH_SEED`` (default 7), ``BRAIDLOG_BENCH_DIR`` (where the stores go:
the storage under it is part of what is measured).
"""

from __future__ import annotations

import os

import pytest

from braidlog import bench
from braidlog.bench.report import Report, TargetResult

_targets: dict[str, TargetResult] = {}


def _int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        raise pytest.UsageError(f"{name} must be a whole number, got {value!r}") from None


@pytest.fixture(scope="session")
def bench_config() -> dict[str, object]:
    """The settings every bench's run shares (the sizes, repeats and seed of one ``braidlog bench``)."""
    return {"size": _int("BRAIDLOG_BENCH_SIZE", 10_000), "repeat": _int("BRAIDLOG_BENCH_REPEAT", 3),
            "seed": _int("BRAIDLOG_BENCH_SEED", 7), "dir": os.environ.get("BRAIDLOG_BENCH_DIR") or None}


@pytest.fixture
def run_workload(benchmark, bench_config):
    """``run_workload(name)``: that workload of ``braidlog bench``, timed once by pytest-benchmark;
    its figures in ``extra_info``, its targets kept for the session's summary."""

    def run(name: str) -> Report:
        config = bench.Config.make(only=[name], **bench_config)  # type: ignore[arg-type]
        benchmark.group = name
        report: Report = benchmark.pedantic(bench.run, args=(config,), rounds=1, iterations=1)
        for row in report.rows:
            key = f"{row.system} · {row.metric}"
            benchmark.extra_info[key] = row.median
            if row.ratio is not None:
                benchmark.extra_info[key + " · vs braidlog"] = row.ratio
        for target in report.targets:
            if target.ok is not None:
                _targets[target.name] = target
        for note in report.skipped:
            benchmark.extra_info.setdefault("skipped", []).append(note)
        return report

    return run


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _targets:
        return
    tr = terminalreporter
    tr.section("braidlog targets measured by these benches (braidlog.bench.report.TARGETS)")
    for target in _targets.values():
        shown = "—" if target.value is None else f"{target.value:.3g}{target.unit}"
        tr.write_line(f"{'met   ' if target.ok else 'missed'} {target.name}: want {target.want}, measured {shown}"
                      + (f" ({target.note})" if target.note else ""))
