"""Erasure: erasing 1,000 deltas spread over a prebuilt store, and how long a writer that opens
the store once the erasure holds it waits for its first append (it waits on the store's lock,
then appends).

Erasure writes the whole store again (docs/forgetting.md), so its time follows the store's
size, not the number of deltas erased. Sizes: ``BRAIDLOG_BENCH_SIZES`` (as the other benches).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

import braidlog
from braidlog import bench

SIZES = bench.suite_sizes()
ERASED = 1000

WRITER = """
import os, sys, time, braidlog
print("ready", flush=True)
sys.stdin.readline()
while not os.path.exists(os.path.join(sys.argv[1], ".erasing")):
    time.sleep(0.0005)  # the erasure holds the store alone: it is writing the new file
t = time.perf_counter()
with braidlog.LmdbLog(sys.argv[1]) as log:
    log.append(braidlog.delta("bench-writer", "message", {"text": "written during an erasure"}))
print(f"{time.perf_counter() - t:.4f}", flush=True)
"""


def _chosen(path, n: int) -> list[int]:
    """1,000 seqs spread over the log, of kinds an erasure takes."""
    with braidlog.LmdbLog(path, readonly=True) as log:
        step = max(1, n // (ERASED * 2))
        out = [r.seq for r in (log.read(s) for s in range(2, n + 1, step))
               if r.delta.kind not in ("kind_declared", "erased")]
    return out[:ERASED]


@pytest.mark.parametrize("size", SIZES, ids=[f"size={s}" for s in SIZES])
def test_erase_1000_deltas(benchmark, prebuilt, tmp_path, size):
    source = prebuilt(size)
    seqs = _chosen(source, size)
    writers: list[subprocess.Popen] = []
    rounds = {"n": 0}

    def setup():
        rounds["n"] += 1
        dest = tmp_path / f"round{rounds['n']}"
        shutil.copytree(source, dest)
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(dest)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert writer.stdout.readline().strip() == "ready"
        writers.append(writer)
        braid = braidlog.open(dest, projections=[])
        return (braid, writer), {}

    def erase(braid, writer):
        writer.stdin.write("go\n")
        writer.stdin.flush()
        try:
            braid.erase(seqs=seqs, reason="bench")
        finally:
            braid.close()

    benchmark.group = f"erase-{size}"
    benchmark.pedantic(erase, setup=setup, rounds=3, iterations=1)
    waits = []
    for writer in writers:  # each appended once the erasure let it open the store
        waits.append(float(writer.stdout.readline()))
        writer.wait(60)
    benchmark.extra_info["erased"] = len(seqs)
    benchmark.extra_info["writer wait s (each round)"] = waits
    print(f"\nerase {len(seqs)} of {size}: a writer opening meanwhile waited "
          f"{', '.join(f'{w:.3f}' for w in waits)} s for its first append")
