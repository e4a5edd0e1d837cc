"""The verifiable log: what the Merkle tree costs on append, and proof and checkpoint latency.

The targets: batched append with the tree >= 0.9x without it; inclusion and consistency proofs
at 1,000,000 records p50 <= 1 ms; `braidlog checkpoint` <= 50 ms at 1,000,000. Run with
``BRAIDLOG_BENCH_SIZES=1000000`` for that size; ``braidlog bench --only proofs`` interleaves the
two append variants batch by batch, which a shared machine needs for a fair ratio.
"""

from __future__ import annotations

import contextlib
import io
import random

import pytest

from braidlog import LmdbLog, bench
from braidlog.cli import main
from braidlog.proofs import consistency_proof, inclusion_proof

SIZES = bench.suite_sizes()
ROUNDS = 20


@pytest.mark.parametrize("tree", [True, False], ids=["tree", "no tree"])
def test_batched_append_with_and_without_the_tree(benchmark, rates, tmp_path, stream, tree):
    """One durable transaction of 1,000 deltas, with the Merkle tree maintained or skipped."""
    benchmark.group = "append-1000 tree"
    with (LmdbLog if tree else bench.NoTreeLog)(tmp_path / "s", durable=True) as store:
        benchmark.pedantic(store.append_batch, setup=lambda: ((stream.take(1000),), {}),
                           rounds=ROUNDS, iterations=1)
    rates.record(f"append-1000:braidlog {'with' if tree else 'without'} tree", 1000)


@pytest.mark.parametrize("size", SIZES, ids=[f"size={s}" for s in SIZES])
def test_inclusion_proof(benchmark, rates, prebuilt, size):
    """The inclusion proof of a random record in the tree of the head."""
    with LmdbLog(prebuilt(size), create=False) as store:
        rnd = random.Random(size)
        benchmark.group = f"proofs-{size}"
        benchmark.pedantic(lambda seq: inclusion_proof(store, seq, size),
                           setup=lambda: ((rnd.randint(1, size),), {}), rounds=500, iterations=1)
    rates.percentiles(f"inclusion proof on {size:,} records")


@pytest.mark.parametrize("size", SIZES, ids=[f"size={s}" for s in SIZES])
def test_consistency_proof(benchmark, rates, prebuilt, size):
    """The consistency proof from a random size to the head."""
    with LmdbLog(prebuilt(size), create=False) as store:
        rnd = random.Random(size + 1)
        benchmark.group = f"proofs-{size}"
        benchmark.pedantic(lambda old: consistency_proof(store, old, size),
                           setup=lambda: ((rnd.randint(1, size),), {}), rounds=500, iterations=1)
    rates.percentiles(f"consistency proof on {size:,} records")


@pytest.mark.parametrize("size", SIZES, ids=[f"size={s}" for s in SIZES])
def test_checkpoint_command(benchmark, rates, prebuilt, size, tmp_path):
    """`braidlog checkpoint --key FILE` run in process: open, check the kept notes, sign, keep."""
    pytest.importorskip("cryptography")
    key = tmp_path / "bench.key"
    assert main(["keygen", "bench.example/log", "--out", str(key)]) == 0
    argv = ["--store", str(prebuilt(size)), "checkpoint", "--key", str(key)]

    def checkpoint():
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(argv) == 0

    benchmark.group = f"proofs-{size}"
    benchmark.pedantic(checkpoint, rounds=30, iterations=1)
    rates.percentiles(f"`braidlog checkpoint` on {size:,} records")


@pytest.mark.parametrize("size", SIZES, ids=[f"size={s}" for s in SIZES])
def test_tiles_of_the_whole_log_then_10000_more(benchmark, capsys, prebuilt, size, tmp_path):
    """`braidlog tiles DIR --key FILE` over a log of ``size`` records (every tile, bundle and
    the checkpoint), then again after 10,000 more records (only what they touch)."""
    pytest.importorskip("cryptography")
    import shutil
    import time

    from braidlog.proofs import generate
    from braidlog.proofs.tiles import write_tiles

    key = generate("bench.example/log")
    store_path = tmp_path / "s"
    shutil.copytree(prebuilt(size), store_path)
    more = bench.AgentSession(11).deltas(10_000)
    with LmdbLog(store_path) as store:
        t = time.perf_counter()
        first = write_tiles(store, tmp_path / "tiles", key)
        whole = time.perf_counter() - t
        store.append_batch(more)
        benchmark.group = f"tiles-{size}"
        report = benchmark.pedantic(lambda: write_tiles(store, tmp_path / "tiles", key),
                                    rounds=1, iterations=1)
    assert (first.size, report.since, report.size) == (size, size, size + 10_000)
    with capsys.disabled():
        print(f"\ntiles of {size:,} records: {whole:.1f} s ({first.bytes / 1e6:.0f} MB); "
              f"+10,000 incremental: {benchmark.stats.stats.median:.2f} s "
              f"({report.tiles} tiles, {report.bundles} bundles)")
