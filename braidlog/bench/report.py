"""What a run reports: rows aggregated over the repeats, the speed targets checked on them, and
the rich tables ``braidlog bench`` prints."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from ..errors import ValidationError
from . import eventsourcing as es
from .harness import Sample
from .langgraph import ASYNC_SQLITE as LG_ASYNC_SQLITE
from .langgraph import SQLITE as LG_SQLITE
from .langgraph import WAL as LG_WAL
from .peers import ES_BATCH, NO_TREE, PEER_IMPORT, RAW_INDEXED
from .writes import BRAID_CHECKED, WAL_LOG

__all__ = ["Row", "TargetResult", "Report", "TARGETS", "check", "aggregate", "render", "fmt_value",
           "fmt_ratio", "Change", "changes", "load", "NOISE_FLOOR"]

class Row(msgspec.Struct, kw_only=True):
    """One figure over every repeat: median, spread and ratio to braidlog."""

    workload: str
    system: str
    metric: str
    unit: str
    better: str
    median: float
    low: float
    high: float
    spread: float  # half the range, relative to the median
    samples: list[float]
    ratio: float | None = None  # braidlog's edge: median of per-repeat braidlog / system for a
    #                             figure where higher is better, system / braidlog where lower is


class TargetResult(msgspec.Struct, kw_only=True):
    """A speed target, named by what it compares, checked on this run's figures."""

    name: str
    want: str
    value: float | None
    unit: str
    ok: bool | None
    note: str = ""


class Report(msgspec.Struct, kw_only=True):
    """Everything a run measured, for the table and for ``--json``."""

    machine: dict[str, Any]
    config: dict[str, Any]
    rows: list[Row]
    targets: list[TargetResult]
    skipped: list[str]
    seconds: float



@dataclass(frozen=True)
class _Target:
    name: str  # what it compares, in the words of the people who set it
    num: tuple[str, str, str]
    den: tuple[str, str, str] | None
    op: str
    bound: float
    unit: str


TARGETS = (
    _Target(f"import braidlog vs {PEER_IMPORT}",
            ("start-up", "braidlog", "import ms"), ("start-up", PEER_IMPORT, "import ms"), "<=", 1.5, "×"),
    _Target(f"braidlog head vs import {PEER_IMPORT}",
            ("start-up", "braidlog", "head ms"), ("start-up", PEER_IMPORT, "import ms"), "<=", 2, "×"),
    _Target("batched append vs raw LMDB puts, same bytes, 1,000/commit",
            ("append", "braidlog", "deltas/s"), ("append", "raw LMDB", "deltas/s"), ">=", 0.25, "×"),
    _Target(f"batched append vs {RAW_INDEXED}, 1,000/commit",
            ("append", "braidlog", "deltas/s"), ("append", RAW_INDEXED, "deltas/s"), ">=", 0.25, "×"),
    _Target("batched append through the shipped projections' checks vs plain batched",
            ("append", BRAID_CHECKED, "deltas/s"), ("append", "braidlog", "deltas/s"), ">=", 0.8, "×"),
    _Target(f"batched append vs eventsourcing SQLite at {ES_BATCH}/save",
            ("append", "braidlog", "deltas/s"),
            ("append", f"eventsourcing SQLite ({ES_BATCH}/save)", "deltas/s"), ">=", 4, "×"),
    _Target(f"eventsourcing app on braidlog vs on SQLite, {ES_BATCH} events a save",
            (es.BATCHED, "braidlog", "events/s"), (es.BATCHED, es.SQLITE, "events/s"), ">=", 1, "×"),
    _Target(f"the next design (durable='wal') vs eventsourcing on SQLite, {ES_BATCH} events a save",
            (es.BATCHED, es.WAL, "events/s"), (es.BATCHED, es.SQLITE, "events/s"), ">=", 1, "×"),
    _Target("eventsourcing app on braidlog vs on SQLite, one event a save",
            (es.SINGLE, "braidlog", "events/s"), (es.SINGLE, es.SQLITE, "events/s"), ">=", 0.8, "×"),
    _Target("the next design (durable='wal') vs eventsourcing on SQLite, one event a save",
            (es.SINGLE, es.WAL, "events/s"), (es.SINGLE, es.SQLITE, "events/s"), ">=", 0.8, "×"),
    _Target(f"eventsourcing app on braidlog vs on SQLite, {es.THREADS} threads, one event a save",
            (es.THREADED, "braidlog", "events/s"), (es.THREADED, es.SQLITE, "events/s"), ">=", 1.5, "×"),
    _Target(f"the next design (durable='wal') vs eventsourcing on SQLite, {es.THREADS} threads, one event a save",
            (es.THREADED, es.WAL, "events/s"), (es.THREADED, es.SQLITE, "events/s"), ">=", 1.5, "×"),
    _Target("eventsourcing store: SQLite's bytes / braidlog's, same events (braidlog ≤ 1.5× SQLite's)",
            (es.BATCHED, es.SQLITE, "MB stored"), (es.BATCHED, "braidlog", "MB stored"), ">=", 0.67, "×"),
    _Target("single durable append vs eventsourcing SQLite, one event a save",
            ("single", "braidlog", "deltas/s"), ("single", "eventsourcing SQLite (1/save)", "deltas/s"),
            ">=", 1, "×"),
    _Target("the next design (durable='wal'): single append vs eventsourcing SQLite, one event a save",
            ("single", WAL_LOG, "deltas/s"), ("single", "eventsourcing SQLite (1/save)", "deltas/s"),
            ">=", 1, "×"),
    _Target("single durable appends vs raw LMDB one put per commit",
            ("single", "braidlog", "deltas/s"), ("single", "raw LMDB", "deltas/s"), ">=", 0.7, "×"),
    _Target("single durable append vs sqlite3 WAL FULL",
            ("single", "braidlog", "deltas/s"), ("single", "sqlite3 WAL FULL", "deltas/s"), ">=", 1, "×"),
    _Target("scan with decode vs raw cursor + msgspec decode",
            ("scan", "braidlog", "scan+decode/s"), ("scan", "raw LMDB", "scan+decode/s"), ">=", 0.7, "×"),
    _Target("verify vs raw iteration + blake3",
            ("scan", "braidlog", "verify/s"), ("scan", "raw LMDB", "verify/s"), ">=", 0.1, "×"),
    _Target("replay vs eventsourcing SQLite aggregate read",
            ("replay", "braidlog", "deltas/s"),
            ("replay", "eventsourcing SQLite aggregate read", "deltas/s"), ">=", 8, "×"),
    _Target("replay rate at 1,000,000 deltas vs at 100,000",
            ("scaling", "braidlog · replay, every projection", "deltas/s at 1,000,000"),
            ("scaling", "braidlog · replay, every projection", "deltas/s at 100,000"), ">=", 0.85, "×"),
    _Target("live catch-up, trivial fold",
            ("replay", "braidlog · trivial fold", "deltas/s"), None, ">=", 300_000, "/s"),
    _Target("at(seq) p50, random seqs",
            ("time travel", "braidlog", "at(seq) p50 ms"), None, "<=", 10, "ms"),
    _Target("at(seq) p99, random seqs",
            ("time travel", "braidlog", "at(seq) p99 ms"), None, "<=", 30, "ms"),
    _Target("batched append with the Merkle tree vs without it",
            ("proofs", "braidlog", "append deltas/s"), ("proofs", NO_TREE, "append deltas/s"),
            ">=", 0.9, "×"),
    _Target("inclusion proof p50, random records",
            ("proofs", "braidlog", "inclusion proof p50 ms"), None, "<=", 1, "ms"),
    _Target("consistency proof p50, random sizes",
            ("proofs", "braidlog", "consistency proof p50 ms"), None, "<=", 1, "ms"),
    _Target("`braidlog checkpoint` p50",
            ("proofs", "braidlog", "checkpoint p50 ms"), None, "<=", 50, "ms"),
    _Target("entity as-of p50, random entities and seqs",
            ("time travel", "braidlog", "entity as-of p50 ms"), None, "<=", 1, "ms"),
    _Target("recall peak resident memory vs raw hnswlib indexing the same vectors",
            ("recall build", "braidlog", "peak RSS MB"), ("recall build", "raw hnswlib", "peak RSS MB"),
            "<=", 1.3, "×"),
    _Target("recall steady memory after catch-up vs raw hnswlib's",
            ("recall build", "braidlog", "steady anon MB"), ("recall build", "raw hnswlib", "steady anon MB"),
            "<=", 1.3, "×"),
    _Target("recall queries/s unfiltered vs raw hnswlib",
            ("recall unfiltered", "braidlog", "queries/s"), ("recall unfiltered", "raw hnswlib", "queries/s"),
            ">=", 0.9, "×"),
    _Target("recall queries/s as of a seq vs unfiltered",
            ("recall as of a seq", "braidlog", "queries/s"), ("recall unfiltered", "braidlog", "queries/s"),
            ">=", 0.8, "×"),
    _Target("recall queries/s filtered by braid vs unfiltered",
            ("recall filtered by braid", "braidlog", "queries/s"),
            ("recall unfiltered", "braidlog", "queries/s"), ">=", 0.8, "×"),
    _Target("recall@10 unfiltered vs exact search",
            ("recall unfiltered", "braidlog", "recall@10"), None, ">=", 0.95, ""),
    _Target("recall@10 as of a seq vs exact search",
            ("recall as of a seq", "braidlog", "recall@10"), None, ">=", 0.95, ""),
    _Target("recall@10 filtered by braid vs exact search",
            ("recall filtered by braid", "braidlog", "recall@10"), None, ">=", 0.95, ""),
    # LangGraph: each a ratio peer / braidlog, so above 1 is better for braidlog
    _Target("LangGraph 500 turns of a growing chat thread: SqliteSaver's wall time over BraidlogSaver's",
            ("langgraph", LG_SQLITE, "thread wall s"), ("langgraph", "braidlog", "thread wall s"),
            ">=", 1.0, "×"),
    _Target("LangGraph first get_tuple of a 2,001-checkpoint thread in a new process: "
            "SqliteSaver's time over BraidlogSaver's",
            ("langgraph", LG_SQLITE, "first get_tuple ms"), ("langgraph", "braidlog", "first get_tuple ms"),
            ">=", 0.5, "×"),
    _Target("LangGraph first get_state of that thread in a new process: SqliteSaver's time over "
            "BraidlogSaver's",
            ("langgraph", LG_SQLITE, "first get_state ms"), ("langgraph", "braidlog", "first get_state ms"),
            ">=", 0.5, "×"),
    _Target("LangGraph first list(limit=10) of that thread in a new process: SqliteSaver's time "
            "over BraidlogSaver's",
            ("langgraph", LG_SQLITE, "first list 10 ms"), ("langgraph", "braidlog", "first list 10 ms"),
            ">=", 1.0, "×"),
    _Target("LangGraph 16 conversations through ainvoke at once: BraidlogSaver's steps/s over "
            "AsyncSqliteSaver's",
            ("langgraph", "braidlog", "conversations steps/s"),
            ("langgraph", LG_ASYNC_SQLITE, "conversations steps/s"), ">=", 1.5, "×"),
    _Target("LangGraph 16 conversations, the next design (durable='wal') over AsyncSqliteSaver",
            ("langgraph", LG_WAL, "conversations steps/s"),
            ("langgraph", LG_ASYNC_SQLITE, "conversations steps/s"), ">=", 1.5, "×"),
    _Target("LangGraph bytes on disk after 1,000 steps: SqliteSaver's over BraidlogSaver's",
            ("langgraph", LG_SQLITE, "MB on disk"), ("langgraph", "braidlog", "MB on disk"),
            ">=", 10, "×"),
)


def check(t: _Target, by_key: dict[tuple[str, str, str], list[float]], size: int) -> TargetResult:
    want = f"{t.op} {t.bound:,g}{' ' if t.unit == 'ms' else ''}{t.unit}"
    num = by_key.get(t.num)
    den = by_key.get(t.den) if t.den else None
    if num is None or (t.den and den is None):
        return TargetResult(name=t.name, want=want, value=None, unit=t.unit, ok=None,
                            note="not measured in this run")
    if den is not None and t.op == "<=":  # read one way: above 1 is better for braidlog
        value = statistics.median(b / a for a, b in zip(num, den, strict=False))
        want = f">= {1 / t.bound:,.2g}×"
        ok = value >= 1 / t.bound
    elif den is not None:
        value = statistics.median(a / b for a, b in zip(num, den, strict=False))
        ok = value >= t.bound
    else:
        value = statistics.median(num)
        ok = value >= t.bound if t.op == ">=" else value <= t.bound
    note = ""
    if t.num[0] == "time travel" and size < 1_000_000:
        note = f"set for 1,000,000 deltas; this log has {size:,}"
    disk = [v for k, vs in by_key.items() if k[0] == t.num[0] and k[1] == es.DISK for v in vs]
    if disk:  # a durable workload probes the disk before each part: its fsync beside the ratio
        note = f"both durable; disk fsync p50 {statistics.median(disk):.2f} ms"
    return TargetResult(name=t.name, want=want, value=value, unit=t.unit, ok=ok, note=note)



def aggregate(samples: list[tuple[Sample, int]]
               ) -> tuple[list[Row], dict[tuple[str, str, str], list[float]]]:
    by_key: dict[tuple[str, str, str], list[float]] = {}
    meta: dict[tuple[str, str, str], Sample] = {}
    reps: dict[tuple[str, str, str], list[int]] = {}
    for s, rep in samples:
        key = (s.workload, s.system, s.metric)
        by_key.setdefault(key, []).append(s.value)
        reps.setdefault(key, []).append(rep)
        meta.setdefault(key, s)
    rows = []
    for key, values in by_key.items():
        s = meta[key]
        med = statistics.median(values)
        lo, hi = min(values), max(values)
        ratio = None
        ref = by_key.get((s.workload, "braidlog", s.metric))
        if ref is not None and s.system != "braidlog" and len(ref) == len(values):
            # braidlog's edge, read one way throughout: above 1 is better for braidlog
            pairs = list(zip(values, ref, strict=False))
            edges = ([b / v for v, b in pairs if v] if s.better == "higher"
                     else [v / b for v, b in pairs if b])
            ratio = statistics.median(edges) if edges else None
        rows.append(Row(workload=s.workload, system=s.system, metric=s.metric, unit=s.unit,
                        better=s.better, median=med, low=lo, high=hi,
                        spread=(hi - lo) / 2 / med if med else 0.0, samples=values, ratio=ratio))
    return rows, by_key



# -- rendering ------------------------------------------------------------------------------------------

def _fmt(value: float, unit: str) -> str:
    if unit == "":
        return f"{value:.3f}"
    if unit == "ms":
        return f"{value:.3f} ms" if value < 1 else f"{value:.2f} ms" if value < 100 else f"{value:,.0f} ms"
    if unit != "/s":  # seconds, megabytes: the value and its unit
        return f"{value:,.1f} {unit}" if value < 100 else f"{value:,.0f} {unit}"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M/s"
    if value >= 1e4:
        return f"{value / 1e3:.1f} k/s"
    return f"{value:,.0f}/s"


def _fmt_ratio(ratio: float | None) -> str:
    if ratio is None:
        return ""
    return f"{ratio:.2f}×" if ratio < 100 else f"{ratio:,.0f}×"


# -- against an earlier run ------------------------------------------------------------------------

#: A change smaller than this (relative) is within the spread even when both runs had a single
#: repeat and so no spread of their own: timing on a shared machine moves by that much.
NOISE_FLOOR = 0.05


class Change(NamedTuple):
    """One figure of this run against the same figure of an earlier run."""

    workload: str
    system: str
    metric: str
    unit: str
    old: float
    new: float
    change: float  # new / old - 1
    verdict: str   # "faster", "slower", "better", "worse" or "within the spread"


def load(path: str | Path) -> Report:
    """A report from ``path``: the ``report.json`` that ``html.write`` puts beside the page (or
    its directory), or what ``braidlog bench --json`` printed."""
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    try:
        return msgspec.json.decode(p.read_bytes(), type=Report)
    except OSError as e:
        raise ValidationError("compare", f"cannot read {p}: {e.strerror or e}") from None
    except msgspec.MsgspecError as e:
        raise ValidationError("compare", f"{p} is not a braidlog bench report ({e})") from None


def changes(report: Report, old: Report) -> list[Change]:
    """Each figure of ``report`` that ``old`` has too, with the verdict: a change larger than
    both runs' spreads together (half-ranges over repeats, at least NOISE_FLOOR) is faster or
    slower (better or worse, for figures that are not times or rates); a smaller one is within
    the spread."""
    before = {(r.workload, r.system, r.metric): r for r in old.rows}
    out: list[Change] = []
    for r in report.rows:
        o = before.get((r.workload, r.system, r.metric))
        if o is None or not o.median or math.isnan(o.median) or math.isnan(r.median):
            continue
        change = r.median / o.median - 1
        band = max(NOISE_FLOOR, r.spread + o.spread)
        if abs(change) <= band:
            verdict = "within the spread"
        else:
            improved = (change > 0) == (r.better == "higher")
            timed = r.unit in ("/s", "ms", "s")
            verdict = ("faster" if improved else "slower") if timed else ("better" if improved else "worse")
        out.append(Change(r.workload, r.system, r.metric, r.unit, o.median, r.median, change, verdict))
    return out


fmt_value = _fmt  # for the HTML report: the same numbers as the table
fmt_ratio = _fmt_ratio


def render(report: Report, console: Any, *, compare: Report | None = None) -> None:
    """Print the report as rich tables on ``console``; with ``compare``, each figure against
    that earlier run too."""
    from rich.table import Table

    m = report.machine
    st = m["storage"]
    v = m["versions"]
    cfg = report.config
    console.print(
        f"[bold]braidlog bench[/bold]  {m['cores']} cores · {m['cpu']} · {m['memory_gib']} GiB · "
        f"Python {m['python']} · {m['platform']}")
    console.print(
        f"storage: {st['filesystem']} on {st['device']} at {st['mount']}"
        f"{' (rotational)' if st.get('rotational') else ''} · fsync p50 {st['fsync_ms_p50']} ms")
    console.print("versions: " + ", ".join(f"{k} {val}" for k, val in v.items()))
    console.print(
        f"size {cfg['size']:,} deltas (mean {cfg['payload_bytes_mean']} bytes encoded), "
        f"single {cfg['single']:,}, {cfg['appends']:,} per appender, seed {cfg['seed']}, "
        f"{cfg['repeat']} repeats{' (quick)' if cfg['quick'] else ''}, {report.seconds:.0f} s")
    table = Table(title="figures: median ± half-range over repeats; braidlog's edge = median of "
                  "per-repeat ratios, above 1 better for braidlog (braidlog / system for rates, "
                  "system / braidlog for times and sizes)", title_justify="left")
    for col, justify in (("workload", "left"), ("system", "left"), ("metric", "left"),
                         ("median", "right"), ("±", "right"), ("braidlog's edge", "right")):
        table.add_column(col, justify="right" if justify == "right" else "left")
    before = {}
    if compare is not None:
        table.add_column("vs before", justify="right")
        before = {(c.workload, c.system, c.metric): c for c in changes(report, compare)}
    style = {"faster": "green", "better": "green", "slower": "red", "worse": "red"}
    last = None
    for row in report.rows:
        if last is not None and row.workload != last:
            table.add_section()
        cells = [row.workload if row.workload != last else "", row.system, row.metric,
                 _fmt(row.median, row.unit), f"{row.spread * 100:.0f}%", _fmt_ratio(row.ratio)]
        if compare is not None:
            c = before.get((row.workload, row.system, row.metric))
            cells.append("" if c is None else f"[{style.get(c.verdict, 'dim')}]{c.change * 100:+.0f}% "
                         f"{c.verdict}[/]")
        table.add_row(*cells)
        last = row.workload
    console.print(table)
    targets = Table(title="targets (ratios measured pairwise in this run, above 1 better for braidlog; "
                    "a bound set as at most b× is checked as at least 1/b× the other way)",
                    title_justify="left")
    for col in ("target", "want", "measured", ""):
        targets.add_column(col)
    for t in report.targets:
        if t.value is None:
            shown, mark = "—", "[dim]not run[/dim]"
        else:
            shown = (f"{t.value:.2f}×" if t.unit == "×" else _fmt(t.value, t.unit))
            mark = "[green]met[/green]" if t.ok else "[red]missed[/red]"
        targets.add_row(t.name + (f" [dim]({t.note})[/dim]" if t.note else ""), t.want, shown,
                        mark)
    console.print(targets)
    for s in report.skipped:
        console.print(f"[yellow]note[/yellow]: {s}")

