"""How the bench times: a run's configuration, its samples, the per-run context that caches the
generated workload, and the timing helpers (garbage collector quieted, percentiles, latencies,
fresh processes)."""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from ..delta import GenericDelta, encode
from ..errors import ValidationError
from .data import AgentSession
from .peers import IndexKeys, index_keys

__all__ = ["WORKLOADS", "SCALING_SIZES", "BIG", "Config", "Sample", "Step", "no_detail", "Run", "percentile",
           "quiet_heap", "timed", "in_threads", "each", "latencies", "remove", "store_bytes", "fresh", "launch"]

#: Workload names, in the order a run does them (``--only`` takes these).
WORKLOADS = ("startup", "append", "single", "concurrent", "scan", "replay", "time_travel", "recall",
             "recall_quality", "proofs", "scaling", "langgraph", "eventsourcing", "replication", "erase")

#: Log sizes of the scaling curves (the scaling workload grows one log through them).
SCALING_SIZES = (10_000, 30_000, 100_000, 300_000, 1_000_000)


class Sample(NamedTuple):
    """One figure of one repeat."""

    workload: str
    system: str
    metric: str
    value: float
    unit: str
    better: str  # "higher" or "lower"


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def scaled(size: int) -> tuple[int, ...]:
    """The scaling curves' sizes for a run of ``size`` deltas: SCALING_SIZES' steps, ending at
    ``size`` (a hundredth, 3%, a tenth, 30% and all of it; 100 at the least)."""
    top = SCALING_SIZES[-1]
    return tuple(sorted({max(100, size * n // top) for n in SCALING_SIZES}))


#: From this size on a run repeats each workload once unless told otherwise: building and
#: folding logs of a million deltas takes minutes, each repeat as long again.
BIG = 500_000


@dataclass(frozen=True)
class Config:
    """What a run measures and how big."""

    size: int = 100_000          # deltas of the append, scan, replay and time-travel logs
    seed: int = 7
    repeat: int = 5
    single: int = 2_000          # single durable appends per system and repeat
    appends: int = 200           # single appends per appender in the concurrent workload
    queries: int = 200           # random at(seq) per repeat
    checkpoint_every: int = 5_000
    launches: int = 9            # fresh processes per start-up figure and repeat
    entities: int = 10_000
    only: tuple[str, ...] = WORKLOADS
    quick: bool = False
    dir: str | None = None
    recall_size: int | None = None  # vectors in the recall workload (default: size, at most 20,000)
    recall_dim: int = 128
    scaling_sizes: tuple[int, ...] = SCALING_SIZES

    @classmethod
    def make(cls, *, quick: bool = False, size: int | None = None, seed: int = 7,
             repeat: int | None = None, only: Sequence[str] | None = None,
             dir: str | None = None, recall_size: int | None = None, recall_dim: int = 128,
             scaling_sizes: Sequence[int] | None = None) -> Config:
        """A config for a full run, or a quick one (small sizes: a few minutes), with overrides."""
        base = cls(size=5_000, repeat=3, single=200, appends=25, queries=60,
                   checkpoint_every=1_000, launches=3, quick=True) if quick else cls()
        if size is not None:
            if size < 100:
                raise ValidationError("size", f"must be at least 100 deltas, got {size}")
            # every workload stays within the size: the concurrent appenders (1 + 2 + 4 + 8
            # threads) append at most the size between them
            base = replace(base, size=size, single=max(50, min(base.single, size // 5)),
                           appends=max(5, min(base.appends, size // 15)),
                           checkpoint_every=min(base.checkpoint_every, max(100, size // 10)),
                           repeat=base.repeat if size < BIG else 1)
        if repeat is not None:
            if repeat < 1:
                raise ValidationError("repeat", f"must be at least 1, got {repeat}")
            base = replace(base, repeat=repeat)
        if only:
            bad = [w for w in only if w not in WORKLOADS]
            if bad:
                raise ValidationError("only", f"unknown workload {bad[0]!r}; choose from "
                                      f"{', '.join(WORKLOADS)}")
            base = replace(base, only=tuple(w for w in WORKLOADS if w in only))
        if scaling_sizes is not None:
            sizes = tuple(scaling_sizes)
            if not sizes or any(not isinstance(n, int) or n < 100 for n in sizes):
                raise ValidationError("scaling_sizes", "must be one or more log sizes of at least "
                                      f"100 deltas, got {list(sizes)}")
            base = replace(base, scaling_sizes=tuple(sorted(set(sizes))))
        elif base.quick:  # a quick run's curves end at its size
            base = replace(base, scaling_sizes=tuple(sorted({max(100, base.size // 5),
                                                             max(100, base.size // 2), base.size})))
        else:  # the size governs every workload: the curves end at it too
            base = replace(base, scaling_sizes=scaled(base.size))
        for name, value, low in (("recall_size", recall_size, 100), ("recall_dim", recall_dim, 2)):
            if value is not None and (not isinstance(value, int) or value < low):
                raise ValidationError(name, f"must be an int of at least {low}, got {value!r}")
        return replace(base, seed=seed, dir=dir, entities=min(10_000, max(10, base.size // 10)),
                       recall_size=recall_size, recall_dim=recall_dim)


Step = Callable[[str], None]


def no_detail(label: str) -> None:
    """The progress callback that reports nothing."""


@dataclass
class Run:
    """One run in progress: its config and directory, progress callbacks, and the workload data,
    logs and peers it builds once and reuses across repeats."""

    config: Config
    root: str
    step: Step
    session: AgentSession
    cache: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    detail: Step = no_detail  # how far an untimed step (building a log) has got
    _n: int = 0

    def counting(self, label: str, n: int) -> Callable[[int], None]:
        """A progress callback for building ``n`` items: "label · k of n", each tenth."""
        every = max(1, n // 10)
        last = [0]

        def progress(k: int) -> None:
            if k - last[0] >= every or k >= n:
                last[0] = k
                self.detail(f"{label} · {k:,} of {n:,}")
        return progress

    def path(self, name: str) -> str:
        self._n += 1
        return os.path.join(self.root, f"{self._n:04d}-{name}")

    def deltas(self, n: int, offset: int = 0) -> list[GenericDelta]:
        key = f"deltas:{offset}:{n}"
        if key not in self.cache:
            self.cache[key] = self.session.deltas(n, offset)
        return self.cache[key]

    def bodies(self, n: int) -> list[bytes]:
        key = f"bodies:{n}"
        if key not in self.cache:
            self.cache[key] = [encode(d) for d in self.deltas(n)]
        return self.cache[key]

    def index_keys(self, n: int, offset: int = 0) -> list[IndexKeys]:
        key = f"keys:{offset}:{n}"
        if key not in self.cache:
            self.cache[key] = index_keys(self.deltas(n, offset), offset)
        return self.cache[key]


@contextlib.contextmanager
def quiet_heap() -> Iterator[None]:
    """Freeze the harness's own objects (the generated workload) out of the garbage
    collector's reach while a system is timed, so that no system pays for collections that
    traverse data only the harness holds; what a system allocates is still collected."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    with quiet_heap():
        t = time.perf_counter()
        out = fn()
        return time.perf_counter() - t, out


def in_threads(n: int, work: Callable[[int], None]) -> float:
    """Run ``work(k)`` for k in 0..n-1, each in a thread of its own, all released at once; the
    wall seconds from their release to the end of the last (heap quieted). The first exception
    a thread raised is raised here, once every thread has ended."""
    barrier = threading.Barrier(n + 1)
    errors: list[BaseException] = []

    def run(k: int) -> None:
        barrier.wait()
        try:
            work(k)
        except BaseException as e:  # surfaced below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    with quiet_heap():
        barrier.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return seconds


def remove(path: str) -> None:
    """Delete a store directory, or a database file with its WAL and shared-memory files."""
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass


def store_bytes(path: str) -> int:
    """Bytes on disk of a store directory, or of a database file with its WAL and shared-memory
    files (what ``remove`` deletes)."""
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(root, f))
                   for root, _, files in os.walk(path) for f in files)
    return sum(os.path.getsize(path + s) for s in ("", "-wal", "-shm") if os.path.exists(path + s))


@contextlib.contextmanager
def fresh(run: Run, label: str, name: str, make: Callable[[str], Any]) -> Iterator[Any]:
    """A store or peer made by ``make(path)`` at a new path for one timed part (``label`` is its
    progress step); closed and its files deleted after it, however it ends."""
    run.step(label)
    path = run.path(name)
    peer = make(path)
    try:
        yield peer
    finally:
        peer.close()
        remove(path)


def launch(argv: list[str], env: dict[str, str] | None = None) -> float:
    """Seconds from spawning ``argv`` (in ``env``, default this process's) to its exit (it must
    succeed)."""
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t


def latencies(W: str, system: str, lat: list[float], out: list[Sample]) -> None:
    """Append the rate and latency percentiles of one-delta commits timed ``lat``."""
    total = sum(lat)
    out.append(Sample(W, system, "deltas/s", len(lat) / total, "/s", "higher"))
    out.append(Sample(W, system, "commits/s", len(lat) / total, "/s", "higher"))
    for q, name in ((50, "p50"), (99, "p99"), (99.9, "p99.9")):
        out.append(Sample(W, system, f"{name} ms", percentile(lat, q) * 1000, "ms", "lower"))


def each(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[float]:
    """The seconds ``fn(x)`` takes for each item, the garbage collector quieted."""
    lat: list[float] = []
    clock = time.perf_counter
    with quiet_heap():
        for x in items:
            t = clock()
            fn(x)
            lat.append(clock() - t)
    return lat

