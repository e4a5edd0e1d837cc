"""Crash and multi-process tests with real processes (marked slow)."""

from __future__ import annotations

import signal
import time

import pytest

from braidlog import LmdbLog
from tests.support.workers import planned, spawn

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("round_", range(6))
def test_sigkill_mid_append_leaves_an_acknowledged_prefix(tmp_path, rng, round_):
    path = str(tmp_path / "store")
    seed, n_batches = rng.randrange(2**32), 5000
    plan = planned(seed, n_batches)
    proc = spawn("writer", path, str(seed), str(n_batches))
    first = proc.stdout.readline()  # the writer is committing now
    time.sleep(rng.random() * 1.0)
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    out = first + out
    acked = [int(line.split()[1]) for line in out.splitlines() if line.startswith("ack")]
    assert "done" not in out, "the writer finished before it was killed; plan more batches"
    with LmdbLog(path) as log:
        head = log.head()
        assert log.verify() == head
        stored = [r.delta for r in log.scan()]
    attempted = [d for batch in plan for d in batch]
    assert stored == attempted[: len(stored)], "the log is not a prefix of what was attempted"
    must_hold = sum(len(b) for b in plan[: max(acked, default=-1) + 1])
    assert len(stored) >= must_hold, "an acknowledged batch was lost"
    boundaries = {sum(len(b) for b in plan[:k]) for k in range(n_batches + 1)}
    assert len(stored) in boundaries, "a batch was half written"
    print(f"killed after {len(acked)} acknowledged batches; {len(stored)} deltas stored")


def test_a_commit_during_the_page_check_is_not_taken_for_damage(tmp_path, monkeypatch):
    """The structural check measures the file, then reads the meta pages: a commit of another
    process landing between the two names pages past the measured end. Land one there."""
    from lmdb import verify

    path = str(tmp_path / "store")
    spawn("appender", path, "0.2").communicate(timeout=60)
    read_metas, moved = verify._Verifier.load_metas, []

    def commit_first(self):
        if not moved:
            moved.append(spawn("appender", path, "0.3").communicate(timeout=60))
        return read_metas(self)

    monkeypatch.setattr(verify._Verifier, "load_metas", commit_first)
    with LmdbLog(path, readonly=True) as log:
        assert log.verify() == log.head()
    assert moved


def test_readers_in_other_processes_see_consistent_snapshots(tmp_path):
    path = str(tmp_path / "store")
    LmdbLog(path).close()
    writer = spawn("appender", path, "3")
    readers = [spawn("reader", path, "3") for _ in range(2)]
    outs = []
    for p in [writer, *readers]:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outs.append(out.split())
    final = int(outs[0][0])
    for checks, last in outs[1:]:
        assert int(checks) > 3 and 0 <= int(last) <= final
    with LmdbLog(path) as log:
        assert log.head().seq == final and log.verify().seq == final
