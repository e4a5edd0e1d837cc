"""The recall workload of ``braidlog bench``: braidlog's recall index against raw hnswlib on the
same clustered vectors, with the same graph parameters and threads.

Figures, per size (``--recall-size N --recall-dim D``; default 20,000 × 128):

- **build**: seconds to index the vectors: braidlog's ``Recall`` catching up from the log
  (reading every delta, building the head graph) against hnswlib's ``add_items`` on an array
  already in memory; and the peak memory of each, each measured in a fresh subprocess that does
  only that (``python -m braidlog.bench.recall memory``), so neither pollutes the other: peak
  resident set (``VmHWM``) and peak anonymous memory (``RssAnon``, sampled every 10 ms: the
  memory the process itself holds, without the file pages of the mapped log).
- **queries**: recall@10 against exact search and queries/s, unfiltered, as of a seq, and
  filtered by braid (one braid in eight), for braidlog, raw hnswlib (filter callable) and exact
  numpy; and as of a seq with ``reproducible=True`` for braidlog (up to 200,000 vectors). Each
  system answers the queries once untimed (its recall@10), then ``PASSES`` timed passes, every
  mode's and system's interleaved; queries/s is that of a system's fastest pass.

The vectors are unit vectors from ``n / 200`` clusters in a 16-dimensional subspace spread into
``dim`` dimensions, plus a little noise in all of them (as sentence embeddings cluster in a
low-dimensional part of their space), and one query per 25 of them (20 to 200), fresh draws from
the same distribution; deterministic per seed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from ..delta import Vector
from ..errors import MissingDependency
from ..lmdb.log import LmdbLog
from .harness import Run, Sample

__all__ = ["RECALL_DIM", "RECALL_K", "DEFAULT_SIZE", "STEPS", "recall_vectors", "build_store",
           "peak_memory", "setup", "workload", "run_workload"]

RECALL_DIM = 128
RECALL_K = 10
DEFAULT_SIZE = 20_000
M, EF_CONSTRUCTION, EF, SEED = 16, 100, 64, 100
BATCH = 2_000
PROGRESS_TICKS = 10  # build progress lines per index build
STEPS = 11  # timed steps per repeat, for the progress bar
#: Timed passes over the queries per mode and system, every mode's and system's interleaved; a
#: system's queries/s is that of its fastest pass (a pass of 200 queries lasts some 10 ms, so
#: one alone measures the machine's other work as much as the system: see docs/benchmarks.md).
PASSES = 5
PASS_BUDGET = 2.0  # seconds of timed passes after which a system's passes stop (exact search)


#: The as-of queries again with ``reproducible=True`` (graphs of the prefix alone); only up to
#: REPRODUCIBLE_MAX vectors, since their blocks hold several more copies of the index.
REPRODUCIBLE = "as of a seq, reproducible"
REPRODUCIBLE_MAX = 200_000


def recall_vectors(n: int, seed: int, dim: int = RECALL_DIM) -> tuple[Any, Any]:
    """``n`` unit float32 vectors in clusters and the queries (see the module's docstring)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    # Sentence embeddings fill a low-dimensional part of their space: points of a 16-dimensional
    # Gaussian mixture, spread into ``dim`` dimensions by a fixed random map, plus a little noise
    # in every dimension. (Isotropic noise in all ``dim`` dimensions would make a cluster's points
    # all but equidistant, and recall@10 a measure of that noise, for hnswlib and exact alike.)
    latent = 16
    centers = rng.standard_normal((max(8, n // 200), latent), dtype=np.float32)
    spread = rng.standard_normal((latent, dim), dtype=np.float32) / np.float32(np.sqrt(latent))

    def points(m: int, near: Any = None) -> Any:
        z = (centers[rng.integers(0, len(centers), m)] if near is None else near)
        z = z + 0.35 * rng.standard_normal((m, latent), dtype=np.float32)
        x = z @ spread + 0.05 * rng.standard_normal((m, dim), dtype=np.float32)
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    data = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, 1 << 16):  # in chunks: no n × dim temporaries
        hi = min(n, lo + (1 << 16))
        data[lo:hi] = points(hi - lo)
    q = max(20, min(200, n // 25))
    queries = points(q)  # fresh draws from the same distribution, as a new question is
    return data, queries


def build_store(path: str, session: Any, data: Any, offset: int = 30_000_000) -> tuple[LmdbLog, Any]:
    """A store of ``len(data)`` agent deltas, the i-th carrying vector i (at seq i + 1); and the
    braid id of each delta (a numpy array)."""
    import numpy as np

    log = LmdbLog(path, durable=False)
    braids = []
    it = session.iter(len(data), offset=offset)
    for at in range(0, len(data), BATCH):
        batch = []
        for j in range(at, min(at + BATCH, len(data))):
            d = next(it)
            braids.append(d.braid_id)
            batch.append(msgspec.structs.replace(d, vector=Vector(data[j].tobytes())))
        log.append_batch(batch)
    return log, np.array(braids)


# -- peak memory, one subprocess per side ------------------------------------------------------

def peak_memory(side: str, *, n: int, dim: int, seed: int, store: str | None = None,
                threads: int | None = None) -> dict[str, float]:
    """Index the vectors in a fresh interpreter (side "raw hnswlib" or "braidlog"); its peak
    resident and anonymous memory and its baseline before indexing, in MB, and the build seconds."""
    argv = [sys.executable, "-m", "braidlog.bench.recall", "memory", "raw" if side == "raw hnswlib" else "braidlog",
            str(n), str(dim), str(seed), store or "-", str(threads or os.cpu_count() or 1)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=6 * 3600)
    if p.returncode != 0:
        raise RuntimeError(f"the {side} memory run failed: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout)


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) * 1024
    return out


class _Sampler:
    """Samples the resident and anonymous memory every 10 ms; keeps the peaks (VmHWM is also
    read at the end: a peak between two samples is not lost for the resident set)."""

    def __init__(self) -> None:
        now = _status()
        self.peak_anon, self.peak_rss = now.get("RssAnon", 0), now["VmRSS"]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            now = _status()
            self.peak_anon = max(self.peak_anon, now.get("RssAnon", 0))
            self.peak_rss = max(self.peak_rss, now["VmRSS"])

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_anon = max(self.peak_anon, _status().get("RssAnon", 0))


def _reset_peak() -> None:
    """Start VmHWM afresh (Linux: writing 5 to clear_refs), so that making the data set does not count."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _memory_main(side: str, n: int, dim: int, seed: int, store: str, threads: int) -> dict[str, float]:
    import hnswlib
    import numpy as np

    if side == "raw":
        data, _ = recall_vectors(n, seed, dim)
        del _
        _reset_peak()
        base = _status()
        with _Sampler() as s:
            t = time.perf_counter()
            g = hnswlib.Index(space="cosine", dim=dim)
            g.init_index(max_elements=n, M=M, ef_construction=EF_CONSTRUCTION, random_seed=SEED)
            g.add_items(data, np.arange(n), num_threads=threads)
            seconds = time.perf_counter() - t
        count = g.get_current_count()
    else:
        from ..recall import Recall

        log = LmdbLog(store, readonly=True)
        # An index kept in a directory, as one beside a store is by default (its vectors in a
        # file-backed map there), but a fresh one each run, and not saved: the build alone.
        home = tempfile.mkdtemp(prefix="recall-memory-", dir=os.path.dirname(os.path.abspath(store)))
        _reset_peak()
        base = _status()
        try:
            with _Sampler() as s:
                t = time.perf_counter()
                index = Recall(log, directory=home, M=M, ef_construction=EF_CONSTRUCTION, ef=EF,
                               seed=SEED, threads=threads, save_every=1 << 62)
                seconds = time.perf_counter() - t
        finally:
            shutil.rmtree(home, ignore_errors=True)  # the map outlives the name
        count = index.count
    import gc

    gc.collect()  # what stays once the build is over: the index, not what the build dropped
    end = _status()
    mb = 1 / (1 << 20)
    # What the build left in anonymous memory. A small index whose vectors are mapped from a file
    # can leave less than the heap gave back meanwhile: that reads as one page, the least
    # /proc/self/status resolves, not as nothing or less than nothing.
    steady = max(end.get("RssAnon", 0) - base.get("RssAnon", 0), os.sysconf("SC_PAGE_SIZE"))
    return {"count": count, "seconds": seconds, "peak_rss_mb": max(end["VmHWM"], s.peak_rss) * mb,
            "peak_anon_mb": s.peak_anon * mb, "file_mb": end.get("RssFile", 0) * mb,
            "steady_anon_mb": steady * mb,
            "baseline_rss_mb": base["VmRSS"] * mb, "baseline_anon_mb": base.get("RssAnon", 0) * mb}


# -- the workload ---------------------------------------------------------------------------------

def _exact(data: Any, q: Any, k: int, eligible: Any | None) -> Any:
    import numpy as np

    scores = data @ q
    if eligible is not None:
        scores = np.where(eligible, scores, -np.inf)
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def _ticks(n: int, step: Callable[[str], None], label: str) -> Callable[[int], None]:
    """A progress callback over seqs 1..n that reports each tenth as one bench step."""
    state = {"next": 1}

    def progress(seq: int) -> None:
        while state["next"] <= PROGRESS_TICKS and seq >= n * state["next"] // PROGRESS_TICKS:
            step(f"{label} {100 * state['next'] // PROGRESS_TICKS}%")
            state["next"] += 1
    return progress


def setup(run: Run, n: int, dim: int) -> dict[str, Any]:
    """Build the store, braidlog's index and raw hnswlib's (timed, with build progress), once per run."""
    import hnswlib
    import numpy as np

    from ..recall import Recall

    threads = os.cpu_count() or 1
    run.step(f"recall · {n:,} × {dim} clustered vectors and their store")
    data, queries = recall_vectors(n, run.config.seed, dim)
    path = run.path("recall-log")
    log, braids = build_store(path, run.session, data)
    t = time.perf_counter()
    index = Recall(log, directory=False, M=M, ef_construction=EF_CONSTRUCTION, ef=EF, seed=SEED,
                   threads=threads, progress=_ticks(n, run.step, f"recall · braidlog index of {n:,}"))
    ours = time.perf_counter() - t
    raw = hnswlib.Index(space="cosine", dim=dim)
    raw.init_index(max_elements=n, M=M, ef_construction=EF_CONSTRUCTION, random_seed=SEED)
    tick = _ticks(n, run.step, f"recall · raw hnswlib index of {n:,}")
    t = time.perf_counter()
    for lo in range(0, n, max(1, n // PROGRESS_TICKS)):
        hi = min(n, lo + max(1, n // PROGRESS_TICKS))
        raw.add_items(data[lo:hi], np.arange(lo, hi), num_threads=threads)
        tick(hi)
    theirs = time.perf_counter() - t
    raw.set_ef(EF)
    rnd = random.Random(run.config.seed)
    as_of = [rnd.randint(n // 4, n) for _ in range(len(queries))]  # seq i + 1 holds vector i
    target = run.session.braids[0]
    reproducible = n <= REPRODUCIBLE_MAX
    if reproducible:
        run.step("recall · as-of blocks for the reproducible as-of queries")
        for a in as_of:  # the blocks are built on first use; build them before timing queries
            index.search(queries[0], RECALL_K, as_of=a, reproducible=True)
    return {"index": index, "log": log, "path": path, "data": data, "queries": queries, "raw": raw,
            "as_of": as_of, "braid": target, "in_braid": braids == target, "n": n, "dim": dim,
            "reproducible": reproducible,
            "build": {"braidlog": ours, "raw hnswlib": theirs}, "parts": index.memory(), "threads": threads}


def workload(run: Run, setup_: dict[str, Any]) -> list[Sample]:
    """The recall samples of one repeat: build time and peak memory of each side in a fresh
    subprocess, then the queries on the indexes ``setup`` built."""
    import numpy as np

    index, data, queries, raw = setup_["index"], setup_["data"], setup_["queries"], setup_["raw"]
    n, k = setup_["n"], RECALL_K
    out: list[Sample] = []
    W = "recall build"
    for system in ("braidlog", "raw hnswlib"):
        run.step(f"recall build · {system} indexing {n:,} in a fresh process (time, peak memory)")
        m = peak_memory(system, n=n, dim=setup_["dim"], seed=run.config.seed, store=setup_["path"],
                        threads=setup_["threads"])
        out += [Sample(W, system, "build s", m["seconds"], "s", "lower"),
                Sample(W, system, "peak RSS MB", m["peak_rss_mb"], "MB", "lower"),
                Sample(W, system, "peak anon MB", m["peak_anon_mb"], "MB", "lower"),
                Sample(W, system, "steady anon MB", m["steady_anon_mb"], "MB", "lower")]
    positions = np.arange(n)
    as_of = [positions < a for a in setup_["as_of"]]
    modes = {"unfiltered": [None] * len(queries), "as of a seq": as_of,
             "filtered by braid": [setup_["in_braid"]] * len(queries)}
    if setup_["reproducible"]:
        modes[REPRODUCIBLE] = as_of
    jobs: list[tuple[str, str, Callable[[int], Any]]] = []  # (mode, system, one query)
    for mode, eligible in modes.items():

        def braidlog_query(i: int, mode: str = mode) -> Any:
            kw: dict[str, Any] = {}
            if mode in ("as of a seq", REPRODUCIBLE):
                kw["as_of"] = setup_["as_of"][i]
                kw["reproducible"] = mode == REPRODUCIBLE
            elif mode == "filtered by braid":
                kw["braid"] = setup_["braid"]
            seqs, _ = index.search(queries[i], k, **kw)
            return [s - 1 for s in seqs.tolist()]

        def raw_query(i: int, eligible: list[Any] = eligible) -> Any:
            e = eligible[i]
            labels, _ = raw.knn_query(queries[i], k=k, num_threads=1,
                                      filter=None if e is None else (lambda label: bool(e[label])))
            return labels[0].tolist()

        def exact_query(i: int, eligible: list[Any] = eligible) -> Any:
            return _exact(data, queries[i], k, eligible[i]).tolist()

        systems: list[tuple[str, Callable[[int], Any]]] = [
            ("braidlog", braidlog_query), ("raw hnswlib", raw_query), ("exact numpy", exact_query)]
        jobs += [(mode, system, fn) for system, fn in (systems[:1] if mode == REPRODUCIBLE else systems)]
    # One pass untimed per mode and system, for the answers (and an index left idle while the
    # build processes ran may have been paged out meanwhile).
    found: dict[tuple[str, str], list[Any]] = {}
    for mode in modes:
        run.step(f"recall {mode} · answers")
        found.update({(m, system): [fn(i) for i in range(len(queries))]
                      for m, system, fn in jobs if m == mode})
    # Then the timed passes, every mode's and system's interleaved (each round starting one
    # further along), so that a ratio between two of them, across modes too, compares passes
    # made in the same spell of the machine's other work.
    best = dict.fromkeys(found, float("inf"))
    spent = dict.fromkeys(found, 0.0)
    for p in range(PASSES):
        run.step(f"recall queries · timed round {p + 1} of {PASSES}")
        at = p * len(jobs) // PASSES
        for mode, system, fn in jobs[at:] + jobs[:at]:
            if spent[mode, system] >= PASS_BUDGET:  # exact search over a large index: enough
                continue
            t = time.perf_counter()
            for i in range(len(queries)):
                fn(i)
            seconds = time.perf_counter() - t
            best[mode, system] = min(best[mode, system], seconds)
            spent[mode, system] += seconds
    for mode, eligible in modes.items():
        truth = [set(_exact(data, q, k, e).tolist()) for q, e in zip(queries, eligible, strict=False)]
        for job_mode, system, _ in jobs:
            if job_mode == mode:
                got = found[mode, system]
                hits = sum(len(truth[i] & set(map(int, f))) for i, f in enumerate(got)) / (k * len(got))
                out.append(Sample(f"recall {mode}", system, "recall@10", hits, "", "higher"))
                out.append(Sample(f"recall {mode}", system, "queries/s", len(queries) / best[mode, system],
                                  "/s", "higher"))
    return out


def run_workload(run: Run) -> list[Sample]:
    """The recall workload of one repeat (the store and both indexes built on the first), or
    nothing and a note when the recall extra is not installed."""
    try:
        from .. import recall  # noqa: F401  (the recall extra)
    except MissingDependency as e:
        run.skipped.append(f"recall: {e}")
        return []
    if "recall" not in run.cache:
        n = run.config.recall_size or min(run.config.size, DEFAULT_SIZE)
        run.cache["recall"] = setup(run, n, run.config.recall_dim)
    return workload(run, run.cache["recall"])


if __name__ == "__main__":  # python -m braidlog.bench.recall memory SIDE N DIM SEED STORE THREADS
    _, cmd, side, n, dim, seed, store, threads = sys.argv
    assert cmd == "memory", cmd
    print(json.dumps(_memory_main(side, int(n), int(dim), int(seed), store, int(threads))))
