"""Time travel: ``braid.at(seq).state(...)`` at random seqs of a log with checkpoints.

The target is set for a 1,000,000-delta log with a projection of 10,000 entities:
p50 <= 10 ms and p99 <= 30 ms. Run with ``BRAIDLOG_BENCH_SIZES=1000000`` for that size; the
summary at the end prints p50 and p99 of the rounds.
"""

from __future__ import annotations

import random

import pytest

from braidlog import Braid, LmdbLog, bench

SIZES = bench.suite_sizes()


@pytest.mark.parametrize("size", SIZES, ids=[f"size={s}" for s in SIZES])
def test_at_random_seq(benchmark, rates, prebuilt, size):
    """The bench projection (one entry per entity) as of a random seq: checkpoint + fold."""
    braid = Braid(LmdbLog(prebuilt(size), create=False), [bench.ENTITIES], checkpoint_every=1 << 62)
    rnd = random.Random(size)
    benchmark.group = f"time-travel-{size}"
    benchmark.pedantic(lambda seq: braid.at(seq).state(bench.ENTITIES.name),
                       setup=lambda: ((rnd.randint(1, size),), {}), rounds=200, iterations=1)
    rates.percentiles(f"at(seq) on {size:,} deltas")
    braid.log.close()


@pytest.mark.parametrize("size", SIZES, ids=[f"size={s}" for s in SIZES])
def test_open_and_resume(benchmark, prebuilt, size):
    """Opening the braid: the projection resumes from its newest checkpoint (no full fold)."""
    path = prebuilt(size)

    def open_braid():
        braid = Braid(LmdbLog(path, create=False), [bench.ENTITIES], checkpoint_every=1 << 62)
        braid.log.close()

    benchmark.group = f"time-travel-{size}"
    benchmark.pedantic(open_braid, rounds=5, iterations=1)
