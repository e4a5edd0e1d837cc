"""Recall: recall@10 against exact numpy search, and queries per second, per query kind.

For each data set (dimension 128 and 384; clustered and random) a store of N vectored deltas is
written to LMDB (100 braids, so one braid is 1% of the vectors) and its recall index rebuilt
(head graph and every as-of block). Then, at k = 10 and ef = 64 (Recall's default), for one and two threads:

- ``raw``: hnswlib's ``knn_query`` on the very head graph the index uses (the baseline);
- ``unfiltered``: ``Recall.search(q, 10)``;
- ``as-of-middle``: ``Recall.search(q, 10, as_of=<seq of the middle vector>)``;
- ``as-of-reproducible``: the same with ``reproducible=True`` (the as-of blocks);
- ``filtered-1pct``: ``Recall.search(q, 10, braid="b7")`` (1% of the vectors eligible);
- ``recall-with-deltas``: ``Recall.recall(q, 10)``, which also reads the 10 deltas from LMDB.

Targets: recall@10 >= 0.95 on clustered data in every case; unfiltered >= 90% of raw hnswlib's
queries/s; as-of and filtered >= 80% of unfiltered (the reproducible as-of has no target: it is
the price of an answer that never changes). Memory and the large sizes (1,000,000 × 128,
200,000 × 384) are in ``braidlog bench --only recall --recall-size N --recall-dim D``
(braidlog/bench/recall.py), which measures each side's build in a fresh process.
``test_summary`` measures every case interleaved, round after round (the best round counts), so
load on a shared machine hits all cases alike, and prints the table at the end of the run.

Sizes: ``BRAIDLOG_RECALL_BENCH_N`` (default 100000; e.g. 10000 for a quick run),
``BRAIDLOG_RECALL_BENCH_QUERIES`` (default 1000), ``BRAIDLOG_RECALL_BENCH_DIMS`` (default
"128,384"). Nothing here asserts anything about time.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np
import pytest

import braidlog
from braidlog import LmdbLog, Vector
from braidlog.recall import Recall

N = int(os.environ.get("BRAIDLOG_RECALL_BENCH_N", "100000"))
NQ = int(os.environ.get("BRAIDLOG_RECALL_BENCH_QUERIES", "1000"))
DIMS = tuple(int(d) for d in os.environ.get("BRAIDLOG_RECALL_BENCH_DIMS", "128,384").split(","))
DATA = ("clustered", "random")
K, EF, M, EF_CONSTRUCTION = 10, 64, 16, 100  # EF: Recall's default
MODES = ("raw", "unfiltered", "as-of-middle", "as-of-reproducible", "filtered-1pct", "recall-with-deltas")
T0 = datetime(2026, 1, 1, tzinfo=UTC)

_built: dict[tuple[int, str], SimpleNamespace] = {}
_lines: list[str] = []


def dataset(kind: str, n: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n vectors and NQ queries from the same distribution: a Gaussian mixture, or plain Gaussian."""
    rng = np.random.default_rng(seed)
    total = n + NQ
    if kind == "random":
        y = rng.normal(size=(total, dim)).astype(np.float32)
    else:
        centres = rng.normal(size=(max(10, n // 1000), dim)).astype(np.float32)
        y = centres[rng.integers(0, len(centres), total)] + 0.3 * rng.normal(size=(total, dim)).astype(np.float32)
    return y[:n], y[n:]


def truth(x: np.ndarray, q: np.ndarray, rows: np.ndarray | None) -> list[set[int]]:
    """The exact top K positions (numpy) of each query among ``rows`` (all when None)."""
    sub = x if rows is None else x[rows]
    out = []
    for lo in range(0, len(q), 100):
        s = q[lo:lo + 100] @ sub.T
        top = np.argpartition(-s, K - 1, axis=1)[:, :K]
        out.extend(set((top[i] if rows is None else rows[top[i]]).tolist()) for i in range(len(top)))
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    def get(dim: int, kind: str) -> SimpleNamespace:
        key = (dim, kind)
        if key in _built:
            return _built[key]
        x, q = dataset(kind, N, dim, seed=dim + (0 if kind == "clustered" else 1))
        path = tmp_path_factory.mktemp(f"recall-{dim}-{kind}") / "store"
        store = LmdbLog(path, durable=False)
        t = time.perf_counter()
        for lo in range(0, N, 5000):
            store.append_batch([
                braidlog.delta(f"b{i % 100}", "observation", {}, ts=T0 + timedelta(milliseconds=i),
                               vector=Vector.of(x[i])) for i in range(lo, min(N, lo + 5000))])
        appended = time.perf_counter() - t
        r = Recall(store, directory=False, ef=EF, M=M, ef_construction=EF_CONSTRUCTION)
        t = time.perf_counter()
        r.rebuild(blocks=True)
        rebuilt = time.perf_counter() - t
        xn = x / np.linalg.norm(x, axis=1, keepdims=True)
        qn = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
        mid = N // 2
        b7 = np.arange(7, N, 100)
        ns = SimpleNamespace(
            store=store, recall=r, q=q, qn=qn, mid_seq=mid, dim=dim, kind=kind,
            truth={"unfiltered": truth(xn, qn, None), "as-of-middle": truth(xn, qn, np.arange(mid)),
                   "filtered-1pct": truth(xn, qn, b7)},
            build=f"append {appended:.1f}s, rebuild (head graph + {len(r.sealed())} blocks) {rebuilt:.1f}s")
        ns.truth["raw"] = ns.truth["recall-with-deltas"] = ns.truth["unfiltered"]
        ns.truth["as-of-reproducible"] = ns.truth["as-of-middle"]
        _built[key] = ns
        return ns

    yield get
    for ns in _built.values():
        ns.store.close()
    _built.clear()


def query_fn(ns: SimpleNamespace, mode: str):
    """One query of ``mode``: returns the positions (seq - 1) of its hits."""
    r = ns.recall
    if mode == "raw":
        g = r._head  # the head graph the index searches: raw hnswlib at the same ef
        return lambda i: g.knn_query(ns.qn[i], k=K, num_threads=1)[0][0]
    if mode == "unfiltered":
        return lambda i: r.search(ns.q[i], K)[0] - 1
    if mode == "as-of-middle":
        return lambda i: r.search(ns.q[i], K, as_of=ns.mid_seq)[0] - 1
    if mode == "as-of-reproducible":
        return lambda i: r.search(ns.q[i], K, as_of=ns.mid_seq, reproducible=True)[0] - 1
    if mode == "filtered-1pct":
        return lambda i: r.search(ns.q[i], K, braid="b7")[0] - 1
    return lambda i: np.asarray([h.seq - 1 for h in r.recall(ns.q[i], K)])


def recall_at_10(ns: SimpleNamespace, mode: str) -> float:
    fn, want = query_fn(ns, mode), ns.truth[mode]
    return sum(len(set(np.asarray(fn(i)).tolist()) & want[i]) for i in range(NQ)) / (K * NQ)


def qps(ns: SimpleNamespace, mode: str, threads: int) -> float:
    fn = query_fn(ns, mode)
    chunks = np.array_split(np.arange(NQ), threads)

    def work(ids):
        for i in ids:
            fn(int(i))

    t = time.perf_counter()
    if threads == 1:
        work(chunks[0])
    else:
        ts = [threading.Thread(target=work, args=(c,)) for c in chunks]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
    return NQ / (time.perf_counter() - t)


CASES = [(d, k) for d in DIMS for k in DATA]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dim, kind", CASES, ids=[f"{k}-{d}" for d, k in CASES])
def test_queries(benchmark, built, dim, kind, mode):
    """NQ queries of one mode on one thread (pytest-benchmark's figures)."""
    ns = built(dim, kind)
    fn = query_fn(ns, mode)
    benchmark.group = f"recall-{kind}-{dim}-n{N}"
    benchmark.extra_info.update(n=N, queries=NQ, k=K, ef=EF, recall_at_10=recall_at_10(ns, mode))
    benchmark.pedantic(lambda: [fn(i) for i in range(NQ)], rounds=3, iterations=1)


@pytest.mark.parametrize("dim, kind", CASES, ids=[f"{k}-{d}" for d, k in CASES])
def test_summary(benchmark, built, capsys, dim, kind):
    """Every mode and thread count interleaved for 5 rounds; prints recall@10, queries/s and ratios."""
    ns = built(dim, kind)
    best: dict[tuple[str, int], float] = {}

    def measure():
        for _ in range(5):
            for threads in (1, 2):
                for mode in MODES:
                    rate = qps(ns, mode, threads)
                    best[(mode, threads)] = max(best.get((mode, threads), 0.0), rate)

    benchmark.group = f"recall-summary-n{N}"
    benchmark.pedantic(measure, rounds=1, iterations=1)
    rec = {mode: recall_at_10(ns, mode) for mode in MODES}
    head = f"{kind} {N:,} x {dim} (k={K}, ef={EF}, M={M}, ef_construction={EF_CONSTRUCTION}; {ns.build})"
    rows = [head, f"  {'mode':<20}{'recall@10':>10}{'1 thread q/s':>14}{'2 threads q/s':>15}"]
    for mode in MODES:
        rows.append(f"  {mode:<20}{rec[mode]:>10.4f}{best[(mode, 1)]:>14,.0f}{best[(mode, 2)]:>15,.0f}")
    for threads in (1, 2):
        raw, unf = best[("raw", threads)], best[("unfiltered", threads)]
        rows.append(
            f"  {threads} thread(s): unfiltered/raw {unf / raw:.2f} (target >= 0.90), "
            f"as-of/unfiltered {best[('as-of-middle', threads)] / unf:.2f}, "
            f"filtered/unfiltered {best[('filtered-1pct', threads)] / unf:.2f} (targets >= 0.80)")
    benchmark.extra_info.update(recall_at_10=rec, qps={f"{m}/{t}": v for (m, t), v in best.items()})
    _lines.extend(rows)
    with capsys.disabled():
        print("\n" + "\n".join(rows))
    out = os.environ.get("BRAIDLOG_RECALL_BENCH_OUT")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")
