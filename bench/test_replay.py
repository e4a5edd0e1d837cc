"""Reading the log back: scan with decode, verify, replay of every projection, live catch-up."""

from __future__ import annotations

import pytest

from braidlog import Braid, LmdbLog, bench

NEVER = 1 << 62  # no checkpoint writes while timing a fold


@pytest.fixture
def log(prebuilt, request):
    store = LmdbLog(prebuilt(request.param), create=False)
    yield store
    store.close()


SIZES = bench.suite_sizes()


@pytest.mark.parametrize("log", SIZES, indirect=True, ids=[f"size={s}" for s in SIZES])
def test_scan_with_decode(benchmark, rates, log):
    """Every record, decoded to a Record with its GenericDelta."""
    size = log.head().seq
    benchmark.group = f"scan-{size}"
    benchmark.pedantic(lambda: sum(1 for _ in log.scan()), rounds=5, iterations=1)
    rates.record("scan:braidlog", size, size=size)


@pytest.mark.parametrize("log", SIZES, indirect=True, ids=[f"size={s}" for s in SIZES])
def test_verify(benchmark, rates, log):
    """Recompute the whole hash chain."""
    size = log.head().seq
    benchmark.group = f"verify-{size}"
    benchmark.pedantic(log.verify, rounds=5, iterations=1)
    rates.record("verify:braidlog", size, size=size)


@pytest.mark.parametrize("log", SIZES, indirect=True, ids=[f"size={s}" for s in SIZES])
def test_replay_every_projection(benchmark, rates, log):
    """Fold the whole log into every projection of the projections package."""
    size = log.head().seq
    projections, _ = bench.all_projections()
    braid = Braid(log, projections, checkpoint_every=NEVER)
    benchmark.group = f"replay-{size}"
    benchmark.pedantic(braid.rebuild, rounds=3, iterations=1)
    rates.record("replay:braidlog", size, size=size)


@pytest.mark.parametrize("log", SIZES, indirect=True, ids=[f"size={s}" for s in SIZES])
def test_catch_up_trivial_fold(benchmark, rates, log):
    """A live projection that counts deltas catching up from zero (target: >= 300,000/s)."""
    size = log.head().seq
    braid = Braid(log, [bench.COUNTER], checkpoint_every=NEVER)
    benchmark.group = f"replay-{size}"
    benchmark.pedantic(braid.rebuild, rounds=3, iterations=1)
    assert braid.state(bench.COUNTER.name) == size  # the fold saw every delta (not a timing check)
    rates.record("catch-up:braidlog", size, size=size)
