"""The erase workload: erasing 1,000 deltas spread over a log of the run's size, and how long a
writer that opens the store while the erasure holds it waits for its first append.

Erasure writes the whole store again (docs/forgetting.md), so its time follows the store's size,
not the number of deltas erased. No peer erases (SQLite's ``DELETE`` keeps the old bytes in free
pages and its WAL), so the figures stand alone; the writer's wait shows what an erasure costs the
other processes of the store.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from ..braid import open as open_braid
from ..lmdb.log import LmdbLog
from .harness import Run, Sample, remove, timed

__all__ = ["run_workload", "STEPS", "ERASED"]

W = "erase"
ERASED = 1000
STEPS = 1

WRITER = """
import os, sys, time, braidlog
print("ready", flush=True)
sys.stdin.readline()
while not os.path.exists(os.path.join(sys.argv[1], ".erasing")):
    time.sleep(0.0005)  # the erasure holds the store alone: it is writing the new file
t = time.perf_counter()
with braidlog.LmdbLog(sys.argv[1]) as log:
    log.append(braidlog.delta("bench-writer", "message", {"text": "written during an erasure"}))
print(f"{time.perf_counter() - t:.6f}", flush=True)
"""


def _source(run: Run) -> tuple[str, list[int]]:
    """A log of the run's size, built once a run, and 1,000 seqs spread over it of kinds an
    erasure takes."""
    key = "erase:source"
    if key not in run.cache:
        n = run.config.size
        path = run.path("erase-source")
        with LmdbLog(path, durable=False) as log:
            for at in range(0, n, 1000):
                log.append_batch(run.deltas(min(1000, n - at), at))
            step = max(1, n // (ERASED * 2))
            seqs = [r.seq for r in (log.read(s) for s in range(2, n + 1, step))
                    if r.delta.kind not in ("kind_declared", "erased")][:ERASED]
        run.cache[key] = (path, seqs)
    path, seqs = run.cache[key]
    return path, seqs


def run_workload(run: Run) -> list[Sample]:
    """One repeat: a copy of the source log, a writer process waiting to append, the erasure."""
    source, seqs = _source(run)
    run.step(f"erase: {len(seqs):,} deltas of {run.config.size:,}")
    dest = run.path("erase")
    shutil.copytree(source, dest)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, dest], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        if writer.stdin is None or writer.stdout is None or writer.stdout.readline().strip() != "ready":
            raise RuntimeError("the bench's writer process did not start")
        braid = open_braid(dest, projections=[])
        try:
            writer.stdin.write("go\n")
            writer.stdin.flush()
            seconds, _ = timed(lambda: braid.erase(seqs=seqs, reason="bench"))
        finally:
            braid.close()
        wait = float(writer.stdout.readline())
        writer.wait(60)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        remove(dest)
    return [Sample(W, "braidlog", f"erase {len(seqs):,} of {run.config.size:,} s", seconds, "s", "lower"),
            Sample(W, "braidlog", "writer's wait for its first append s", wait, "s", "lower")]
