"""Appends on braidlog: batched, single durable, and concurrent appenders with group commit."""

from __future__ import annotations

import pytest

from braidlog import LmdbLog, bench
from braidlog.group_commit import GroupCommitter

ROUNDS = 20


@pytest.mark.parametrize("batch", [100, 1000])
def test_batched_append(benchmark, rates, store, stream, batch):
    """One durable transaction of ``batch`` deltas, every index written."""
    benchmark.group = f"append-{batch}"
    benchmark.pedantic(store.append_batch, setup=lambda: ((stream.take(batch),), {}),
                       rounds=ROUNDS, iterations=1)
    rates.record(f"append-{batch}:braidlog", batch)


def test_single_durable_append(benchmark, rates, store, stream):
    """One delta, one durable commit."""
    benchmark.group = "single"
    benchmark.pedantic(store.append, setup=lambda: ((stream.take(1)[0],), {}),
                       rounds=500, iterations=1)
    rates.record("single:braidlog", 1)
    rates.percentiles("single durable append latency")


@pytest.mark.parametrize("appenders", [1, 2, 4, 8])
@pytest.mark.parametrize("mode", ["braidlog", "group commit"])
def test_concurrent_appenders(benchmark, rates, tmp_path, stream, appenders, mode):
    """``appenders`` threads each append 50 single deltas durably, directly or grouped."""
    benchmark.group = f"concurrent-{appenders}"
    per = 50
    count = [0]

    def setup():
        count[0] += 1
        log = LmdbLog(tmp_path / f"store-{count[0]}", durable=True)
        per_thread = [stream.take(per) for _ in range(appenders)]
        append = log.append if mode == "braidlog" else GroupCommitter(log).append
        return (log, per_thread, append), {}

    def work(log, per_thread, append):
        bench.appenders(log, per_thread, append)
        log.close()

    benchmark.pedantic(work, setup=setup, rounds=5, iterations=1)
    rates.record(f"concurrent-{appenders}:{mode}", appenders * per)
