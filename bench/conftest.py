"""Fixtures of the pytest-benchmark suites: ``pytest bench --benchmark-only``.

The workloads are those of ``braidlog bench`` (``braidlog.bench``). Each bench times one thing;
none asserts anything about time. Benches that form one of the targets' ratios record their
rate with the ``rates`` fixture, and the run ends with a summary of those ratios (braidlog over
its raw baseline, measured in this session), since pytest-benchmark lists figures, not ratios.
These benches run one after another, not interleaved as ``braidlog bench`` runs them, so on a
shared machine a ratio can swing with the load: the summary gives the ratio of the medians and
the ratio of the best rounds; trust ``braidlog bench`` for the figures you publish.

Sizes: ``BRAIDLOG_BENCH_SIZES`` (comma-separated, default ``10000,100000``; see
``braidlog.bench.suite_sizes``) sets the sizes of
the prebuilt logs of the scan, replay and time-travel benches; ``1000000`` gives the figures
the time-travel targets are set for. Prebuilt logs live under the session's temp dir, or under ``BRAIDLOG_BENCH_CACHE``
when set, where they are kept and reused by later sessions.
"""

from __future__ import annotations

import os
import shutil
import statistics
from pathlib import Path

import pytest

from braidlog import LmdbLog, bench, encode

SEED = int(os.environ.get("BRAIDLOG_BENCH_SEED", "7"))
CHECKPOINT_EVERY = 5_000

#: (name, numerator bench key, denominator bench key or None, op, bound, unit) named by what they compare.
RATIOS = [
    # start-up rates are launches/s: peer rate / braidlog rate is braidlog's time / the peer's
    ("import braidlog vs lmdb+msgspec+blake3+ulid",
     "startup:lmdb+msgspec+blake3+ulid import ms", "startup:braidlog import ms", "<=", 1.5),
    ("braidlog head vs import lmdb+msgspec+blake3+ulid",
     "startup:lmdb+msgspec+blake3+ulid import ms", "startup:braidlog head ms", "<=", 2),
    ("batched append vs raw LMDB puts, 1,000/commit",
     "append-1000:braidlog", "append-1000:raw LMDB", ">=", 0.25),
    ("batched append vs eventsourcing SQLite at 100/save",
     "append-1000:braidlog", "append-100:eventsourcing SQLite", ">=", 4),
    ("single durable appends vs raw LMDB one put per commit",
     "single:braidlog", "single:raw LMDB", ">=", 0.8),
    ("scan with decode vs raw cursor + msgspec decode",
     "scan:braidlog", "scan:raw LMDB", ">=", 0.7),
    ("verify vs raw iteration + blake3",
     "verify:braidlog", "verify:raw LMDB", ">=", 0.5),
    ("replay vs eventsourcing SQLite aggregate read",
     "replay:braidlog", "replay:eventsourcing SQLite", ">=", 8),
    ("batched append with the Merkle tree vs without it, 1,000/commit",
     "append-1000:braidlog with tree", "append-1000:braidlog without tree", ">=", 0.9),
    ("group commit vs direct appends, 8 appenders",
     "concurrent-8:group commit", "concurrent-8:braidlog", ">=", None),
]

_rates: dict[str, list[float]] = {}  # items/s from the median round
_best: dict[str, list[float]] = {}  # items/s from the fastest round
_notes: list[str] = []


def pytest_collect_file(file_path: Path, parent):
    """Collect bench/peers.py too (its name does not start with test_)."""
    if (file_path.name == "peers.py" and file_path.parent == Path(__file__).parent
            and not parent.session.isinitpath(file_path)):  # named on the command line: pytest has it
        return pytest.Module.from_parent(parent, path=file_path)
    return None


class Rates:
    """Records the rate a bench measured under a key, for the ratio summary."""

    def __init__(self, benchmark) -> None:
        self.benchmark = benchmark
        self.entries: list[tuple[str, float, str]] = []

    def record(self, key: str, per_round: float, *, size: int | None = None) -> None:
        """``per_round`` items are done in each timed round; the key gets items/s."""
        self.entries.append((key if size is None else f"{key}@{size}", per_round, ""))

    def percentiles(self, label: str) -> None:
        """Report p50/p99 of the rounds (for latency benches)."""
        self.entries.append((label, 0, "percentiles"))

    def flush(self) -> None:
        stats = getattr(self.benchmark, "stats", None)
        if stats is None:
            return
        data = list(stats.stats.data)
        if not data:
            return
        for key, per_round, kind in self.entries:
            if kind == "percentiles":
                p50, p99 = bench.percentile(data, 50), bench.percentile(data, 99)
                _notes.append(f"{key}: p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms "
                              f"over {len(data)} rounds")
            else:
                _rates.setdefault(key, []).append(per_round / statistics.median(data))
                _best.setdefault(key, []).append(per_round / min(data))


@pytest.fixture
def rates(benchmark):
    r = Rates(benchmark)
    yield r
    r.flush()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _rates and not _notes:
        return
    tr = terminalreporter
    tr.section("braidlog ratios (medians of this session; see docs/benchmarks.md)")
    sizes = sorted({k.partition("@")[2] for k in _rates})
    for name, num, den, op, bound in RATIOS:
        for size in sizes:
            suffix = f"@{size}" if size else ""
            a, b = _rates.get(num + suffix), _rates.get(den + suffix)
            if not a or not b:
                continue
            value = statistics.median(a) / statistics.median(b)
            best = max(_best[num + suffix]) / max(_best[den + suffix])
            verdict = ""
            if bound is not None:
                ok = value >= bound if op == ">=" else value <= bound
                verdict = f"  (target {op} {bound}: {'met' if ok else 'missed'} by the medians)"
            tr.write_line(f"{name}{' on ' + size + ' deltas' if size else ''}: "
                          f"{value:.2f}× of medians, {best:.2f}× of best rounds{verdict}")
    for key in sorted(_rates):
        if key.startswith("catch-up:"):
            rate = statistics.median(_rates[key])
            tr.write_line(f"live catch-up, trivial fold, on {key.partition('@')[2]} deltas: "
                          f"{rate:,.0f} deltas/s  (target >= 300,000: "
                          f"{'met' if rate >= 300_000 else 'missed'})")
    for note in _notes:
        tr.write_line(note)


# -- workload data -------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def session() -> bench.AgentSession:
    """The agent-session workload of ``braidlog bench`` (every projection kind included)."""
    return bench.AgentSession(SEED)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    where = os.environ.get("BRAIDLOG_BENCH_CACHE")
    if where:
        path = Path(where)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("bench-cache")


class Stream:
    """Fresh deltas on demand: every call returns the next ``n`` deltas of the session."""

    def __init__(self, session: bench.AgentSession, offset: int) -> None:
        self.session = session
        self.at = offset

    def take(self, n: int) -> list:
        out = self.session.deltas(n, self.at)
        self.at += n
        return out


@pytest.fixture
def stream(session) -> Stream:
    """New deltas for appending benches (each bench appends to a store of its own)."""
    return Stream(session, 50_000_000)


_logs: dict[int, Path] = {}


@pytest.fixture(scope="session")
def prebuilt(session, cache_dir):
    """``prebuilt(n)``: the path of a store of n deltas with the bench projection checkpointed
    every 5,000 deltas (built once, kept on disk)."""

    def get(n: int) -> Path:
        if n not in _logs:
            path = cache_dir / f"log-{n}-seed{SEED}"
            done = path / "complete"
            if not done.exists():
                braid = bench.time_travel_log(str(path), session, n, CHECKPOINT_EVERY)
                braid.close()
                done.write_text(f"{n}\n")
            _logs[n] = path
        return _logs[n]

    return get


_raws: dict[int, bench.RawLmdb] = {}


@pytest.fixture(scope="session")
def raw_prebuilt(session, cache_dir):
    """``raw_prebuilt(n)``: a raw LMDB database of the same n records' encoded bytes."""

    def get(n: int) -> bench.RawLmdb:
        if n not in _raws:
            path = cache_dir / f"raw-{n}-seed{SEED}"
            fresh = not (path / "complete").exists()
            if fresh and path.exists():
                shutil.rmtree(path)
            raw = bench.RawLmdb(str(path), durable=False)
            if fresh:
                for at in range(0, n, bench.BATCH):
                    raw.put_batch([encode(d) for d in session.iter(min(bench.BATCH, n - at), at)])
                (path / "complete").write_text(f"{n}\n")
            _raws[n] = raw
        return _raws[n]

    yield get
    for raw in _raws.values():
        raw.close()
    _raws.clear()


@pytest.fixture
def store(tmp_path):
    """A fresh durable store."""
    log = LmdbLog(tmp_path / "store", durable=True)
    yield log
    log.close()
