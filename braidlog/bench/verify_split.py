"""The prototype of a ``verify`` split over processes, measured beside the shipped one:
``python -m braidlog.bench.verify_split PATH [--workers N] [--rounds R]``. The shipped verify
now splits itself (braidlog/lmdb/split.py: one forked child, the first damage in seq order,
progress, a reader's crash named by the page check); this pool of spawned workers is kept to
compare with it.

Before the shipped split, ``LmdbLog.verify`` ran its parts one after another in one process: the
meta pages, the structural check of every page (py-lmdb's, pure Python, read with ``pread``),
the records (the chain, each record against its committed form, the Merkle tree's nodes) and
the indexes, leaving the machine's other cores idle.

Here the same checks, the same code, run in worker processes at once: the page check, the index
check, and the records cut into ranges. A range starting at seq ``lo`` chains from the hash its
record ``lo - 1`` holds and its tree from the peaks stored below it; the range before checks that
hash and those nodes, so together they check what one pass does. Records are read through LMDB
while the page check still runs, which the verifying process never does (a damaged page can
crash the reader with SIGBUS): here a reader is a worker process, so a crash is a broken pool
for the parent, which then reports the page check's finding.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from ..lmdb.log import LmdbLog

__all__ = ["split_verify", "main"]

RANGE = 25_000  # records a task


def _open(path: str) -> LmdbLog:
    return LmdbLog(path, readonly=True, check_head=False)


def _pages(path: str) -> dict[str, list[str]]:
    from ..lmdb import check
    with _open(path) as log:
        acc = log._access()
        check._check_metas(acc)
        return check._damaged_pages(acc)


def _records(path: str, lo: int, hi: int) -> int:
    from ..lmdb.records import check_records
    with _open(path) as log:
        check_records(log._access(), lo, hi, None)
    return hi - lo


def _indexes(path: str) -> None:
    from ..lmdb import check
    from ..lmdb.records import Keys, check_records
    with _open(path) as log:  # the index check takes its keys from a records pass
        acc = log._access()
        keys = Keys(acc.registry)
        check_records(acc, 1, None, None, nodes=False, keys=keys)
        check._check_indexes(acc, keys)


def _warm() -> None:
    from ..lmdb import check  # noqa: F401 - imported once per worker, before the clock starts


def split_verify(path: str, pool: ProcessPoolExecutor) -> int:
    """Every check ``LmdbLog.verify`` makes, in ``pool``'s workers at once; the head's seq, or
    the first error: the page check's, then the lowest range's, then the indexes'."""
    with _open(path) as log:
        head = log.head().seq
    pages = pool.submit(_pages, path)
    indexes = pool.submit(_indexes, path)
    ranges: list[Future[Any]] = [pool.submit(_records, path, lo, min(head + 1, lo + RANGE))
                                 for lo in range(1, head + 1, RANGE)]
    found = pages.result()
    if found:
        raise RuntimeError(f"damaged pages: {found}")
    for r in ranges:
        r.result()
    indexes.result()
    return head


def main(argv: Sequence[str]) -> None:
    args = list(argv)
    workers = int(args.pop(args.index("--workers") + 1)) if "--workers" in args else 2
    rounds = int(args.pop(args.index("--rounds") + 1)) if "--rounds" in args else 3
    args = [a for a in args if a not in ("--workers", "--rounds")]
    path = args[0]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        for f in [pool.submit(_warm) for _ in range(workers)]:
            f.result()
        for _ in range(rounds):  # alternating, so a noisy spell weighs on both
            with _open(path) as log:
                t = time.perf_counter()
                head = log.verify().seq
                one = time.perf_counter() - t
            t = time.perf_counter()
            assert split_verify(path, pool) == head
            split = time.perf_counter() - t
            print(f"{head:,} deltas: verify {head / one:,.0f}/s, split over {workers} workers "
                  f"{head / split:,.0f}/s ({one / split:.2f}x)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
