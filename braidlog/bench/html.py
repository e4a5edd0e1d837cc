"""The bench report people can look at: one self-contained HTML page (charts drawn by matplotlib
as inline SVG, styles inline, nothing fetched), and the run's JSON beside it.

The page shows, from one run's figures: the targets with the ratios measured in the run, the
throughput of every system for each workload, the latency percentiles, the scaling curves (the
rates at each size of one growing log), every figure in a table and, given an earlier run,
each figure against it (faster, slower, or within the spread of the two runs).

``write(report, directory, compare=old)`` writes ``index.html`` and ``report.json``;
``report.load(path)`` reads a report back (``report.json``, or what ``braidlog bench --json``
printed).
matplotlib comes with the ``bench`` extra; the module imports it only when it draws.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from ..errors import ValidationError
from .report import NOISE_FLOOR, Report, Row, TargetResult, changes, fmt_ratio, fmt_value
from .scaling import scale_size

__all__ = ["write", "page"]

_PERCENTILE = re.compile(r"^(?P<what>.*?)\s*(?P<q>p50|p99\.9|p99) ms$")
_BRAID = "#1f6feb"
_PEER = "#9aa4af"
_MET, _MISSED = "#1a7f37", "#cf222e"

def write(report: Report, directory: str | Path, *, compare: Report | None = None) -> Path:
    """Write ``index.html`` and ``report.json`` into ``directory`` (made if need be); the page's path."""
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
        (d / "report.json").write_bytes(msgspec.json.encode(report, order="deterministic"))
        target = d / "index.html"
        target.write_text(page(report, compare=compare), encoding="utf-8")
    except OSError as e:
        raise ValidationError("report", f"cannot write the report into {d}: {e.strerror or e}") from None
    return target


# -- the page ---------------------------------------------------------------------------------------

def page(report: Report, *, compare: Report | None = None) -> str:
    """The report as one HTML document that needs nothing else to be viewed."""
    rows = report.rows
    parts = [_head(report), _machine(report), _targets(report.targets)]
    parts.append(_section("Throughput by system", "Median of the repeats; the whisker spans the "
                          "slowest and fastest repeat. braidlog in blue.", _throughput(rows)))
    parts.append(_section("Latency percentiles", "One commit (or query) at a time, in "
                          "milliseconds; lower is better.", _latencies(rows)))
    parts.append(_section("Scaling", "One log grown step by step; the rates measured at each "
                          "size. Flat lines are linear work.", _scaling(rows)))
    if compare is not None:
        parts.append(_compare(report, compare))
    parts.append(_figures(rows))
    if report.skipped:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_e(s)}</li>" for s in report.skipped)
                     + "</ul>")
    parts.append("</main></body></html>\n")
    return "\n".join(parts)


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1f2328;margin:0;background:#fff}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 4px} p.note{color:#59636e;margin:4px 0 12px}
table{border-collapse:collapse;width:100%;margin:8px 0 16px;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eaeef2} th{background:#f6f8fa}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.met{color:#1a7f37;font-weight:600} .missed{color:#cf222e;font-weight:600} .dim{color:#59636e}
.faster,.better{color:#1a7f37} .slower,.worse{color:#cf222e}
.charts{display:flex;flex-wrap:wrap;gap:12px} .chart{flex:0 1 calc(50% - 6px);min-width:480px}
.chart svg{width:100%;height:auto}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:8px 0} dt{color:#59636e}
"""


def _head(report: Report) -> str:
    cfg = report.config
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width,initial-scale=1'>"
            f"<title>braidlog bench: {cfg.get('size', 0):,} deltas</title><style>{_CSS}</style>"
            f"</head><body><main><h1>braidlog bench</h1>"
            f"<p class=note>{cfg.get('size', 0):,} deltas, {cfg.get('repeat', '?')} repeats, "
            f"seed {cfg.get('seed', '?')}{' (quick)' if cfg.get('quick') else ''}; the run took "
            f"{report.seconds:,.0f} s. Figures are medians over the repeats; a ratio is the median "
            f"of the per-repeat ratios, so a noisy spell weighs on both sides of it.</p>")


def _machine(report: Report) -> str:
    m = report.machine
    st = m.get("storage", {})
    items = [("machine", f"{m.get('cores', '?')} cores · {m.get('cpu', '?')} · "
                         f"{m.get('memory_gib', '?')} GiB"),
             ("system", f"Python {m.get('python', '?')} · {m.get('platform', '?')}"),
             ("storage", f"{st.get('filesystem', '?')} on {st.get('device', '?')} at "
                         f"{st.get('mount', '?')} · fsync p50 {st.get('fsync_ms_p50', '?')} ms")]
    if "load" in m:
        items.append(("load average", f"{_load(m['load'])} at the start, "
                                      f"{_load(m.get('load_end'))} at the end"))
    versions = m.get("versions", {})
    if versions:
        items.append(("versions", ", ".join(f"{k} {v}" for k, v in versions.items())))
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items) + "</dl>"


def _load(value: Any) -> str:
    if not value:
        return "?"
    return " / ".join(f"{x:.2f}" for x in value) + " (1, 5, 15 min)"


def _targets(targets: list[TargetResult]) -> str:
    rows = []
    for t in targets:
        if t.value is None:
            shown, mark = "—", "<span class=dim>not run</span>"
        else:
            shown = fmt_ratio(t.value) if t.unit == "×" else fmt_value(t.value, t.unit)
            mark = "<span class=met>met</span>" if t.ok else "<span class=missed>missed</span>"
        note = f" <span class=dim>({_e(t.note)})</span>" if t.note else ""
        rows.append(f"<tr><td>{_e(t.name)}{note}</td><td class=num>{_e(t.want)}</td>"
                    f"<td class=num>{_e(shown)}</td><td>{mark}</td></tr>")
    measured = [t for t in targets if t.value is not None]
    chart = _chart_targets(measured) if measured else ""
    met = sum(1 for t in measured if t.ok)
    return (f"<h2>Targets</h2><p class=note>{met} of {len(measured)} measured targets met "
            f"({len(targets) - len(measured)} not run). Each ratio is measured pairwise within "
            "this run.</p>" + chart
            + "<table><tr><th>target</th><th>want</th><th>measured</th><th></th></tr>"
            + "".join(rows) + "</table>")


def _section(title: str, note: str, charts: list[str]) -> str:
    if not charts:
        return f"<h2>{_e(title)}</h2><p class=note>Not measured in this run.</p>"
    return (f"<h2>{_e(title)}</h2><p class=note>{_e(note)}</p><div class=charts>"
            + "".join(f"<div class=chart>{c}</div>" for c in charts) + "</div>")


def _figures(rows: list[Row]) -> str:
    out = ["<h2>Every figure</h2><table><tr><th>workload</th><th>system</th><th>metric</th>"
           "<th>median</th><th>±</th><th>braidlog's edge (&gt;1: better)</th></tr>"]
    for r in rows:
        out.append(f"<tr><td>{_e(r.workload)}</td><td>{_e(r.system)}</td><td>{_e(r.metric)}</td>"
                   f"<td class=num>{_e(fmt_value(r.median, r.unit))}</td>"
                   f"<td class=num>{r.spread * 100:.0f}%</td>"
                   f"<td class=num>{_e(fmt_ratio(r.ratio))}</td></tr>")
    out.append("</table>")
    return "".join(out)


def _compare(report: Report, old: Report) -> str:
    found = changes(report, old)
    counts = {v: sum(1 for c in found if c.verdict == v)
              for v in ("faster", "slower", "better", "worse", "within the spread")}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    rows = []
    for c in found:
        css = c.verdict.split()[0]
        rows.append(f"<tr><td>{_e(c.workload)}</td><td>{_e(c.system)}</td><td>{_e(c.metric)}</td>"
                    f"<td class=num>{_e(fmt_value(c.old, c.unit))}</td>"
                    f"<td class=num>{_e(fmt_value(c.new, c.unit))}</td>"
                    f"<td class=num>{c.change * 100:+.1f}%</td><td class={css}>{_e(c.verdict)}</td></tr>")
    when = old.machine.get("cpu", "?")
    return (f"<h2>Against the earlier run</h2><p class=note>{len(found)} figures in both runs: "
            f"{_e(summary) or 'none'}. The earlier run: {old.config.get('size', 0):,} deltas, "
            f"{old.config.get('repeat', '?')} repeats, on {_e(when)}. Within the spread: the "
            f"change is no larger than both runs' half-ranges together (at least "
            f"{NOISE_FLOOR:.0%}).</p><table><tr><th>workload</th><th>system</th><th>metric</th>"
            "<th>before</th><th>now</th><th>change</th><th></th></tr>" + "".join(rows) + "</table>")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


# -- charts -----------------------------------------------------------------------------------------

def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=96, layout="constrained")
    return fig


def _svg(fig: Any) -> str:
    """The figure as an inline <svg> element (text kept as text, no XML prologue)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "braidlog"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _compact(x: float, _pos: Any = None) -> str:
    """An axis tick: 1k, 250k, 1M, 0.5 (no exponents)."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:g}{suffix}"
    return f"{x:g}"


def _ticks(axis: Any, log: bool) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if log:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=12))
        axis.set_minor_formatter(NullFormatter())
    axis.set_major_formatter(FuncFormatter(_compact))


def _throughput(rows: list[Row]) -> list[str]:
    charts = []
    for workload, group in _by_workload(rows):
        if workload == "scaling":
            continue
        bars = [r for r in group if r.unit == "/s" and r.metric != "commits/s" and r.median > 0]
        if not bars:
            continue
        charts.append(_bars(workload, bars))
    return charts


def _bars(workload: str, bars: list[Row]) -> str:
    metrics = {r.metric for r in bars}
    labels = [r.system if len(metrics) == 1 else f"{r.system} · {r.metric}" for r in bars]
    fig = _figure(7.2, 0.6 + 0.32 * len(bars))
    ax = fig.subplots()
    ys = list(range(len(bars)))[::-1]
    colors = [_BRAID if r.system.startswith("braidlog") else _PEER for r in bars]
    ax.barh(ys, [r.median for r in bars], color=colors,
            xerr=[[r.median - r.low for r in bars], [r.high - r.median for r in bars]],
            error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#444"})
    ax.set_yticks(ys, [_short(s, 58) for s in labels], fontsize=8)
    top = max(r.high for r in bars)
    low = min(r.median for r in bars)
    log = top / low > 50
    if log:
        ax.set_xscale("log")
    _ticks(ax.xaxis, log)
    ax.set_xlim(right=top * (3 if log else 1.25))  # room for the labels
    for y, r in zip(ys, bars, strict=False):
        ax.text(r.high, y, "  " + fmt_value(r.median, r.unit), va="center", fontsize=7)
    only = next(iter(metrics)) if len(metrics) == 1 else "per second"
    ax.set_xlabel(only, fontsize=8)
    ax.set_title(workload, fontsize=10, loc="left")
    ax.tick_params(axis="x", labelsize=7)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def _latencies(rows: list[Row]) -> list[str]:
    groups: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for r in rows:
        m = _PERCENTILE.match(r.metric)
        if m is None or r.unit != "ms":
            continue
        what = m.group("what") or "commit"
        groups.setdefault((r.workload, what), {}).setdefault(r.system, {})[m.group("q")] = r.median
    charts = []
    for (workload, what), systems in groups.items():
        qs = [q for q in ("p50", "p99", "p99.9") if any(q in v for v in systems.values())]
        names = list(systems)
        fig = _figure(7.2, 0.9 + 0.22 * len(names) * len(qs))
        ax = fig.subplots()
        height = 0.8 / len(qs)
        shades = {"p50": 1.0, "p99": 0.65, "p99.9": 0.4}
        for k, q in enumerate(qs):
            ys = [len(names) - 1 - i + (k - (len(qs) - 1) / 2) * height for i in range(len(names))]
            values = [systems[s].get(q, 0.0) for s in names]
            colors = [_BRAID if s.startswith("braidlog") else _PEER for s in names]
            ax.barh(ys, values, height=height * 0.95, color=colors, alpha=shades[q], label=q)
            for y, v in zip(ys, values, strict=False):
                if v:
                    ax.text(v, y, f" {q} {fmt_value(v, 'ms')}", va="center", fontsize=6)
        ax.set_yticks(range(len(names))[::-1], [_short(s, 40) for s in names], fontsize=8)
        values = [v for s in systems.values() for v in s.values() if v > 0]
        log = bool(values) and max(values) / min(values) > 50
        if log:
            ax.set_xscale("log")
        _ticks(ax.xaxis, log)
        if values:
            ax.set_xlim(right=max(values) * (4 if log else 1.35))
        ax.set_xlabel("milliseconds", fontsize=8)
        ax.set_title(f"{workload} · {what}", fontsize=10, loc="left")
        ax.tick_params(axis="x", labelsize=7)
        ax.spines[["top", "right"]].set_visible(False)
        charts.append(_svg(fig))
    return charts


def _scaling(rows: list[Row]) -> list[str]:
    series: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        size = scale_size(r.metric) if r.workload == "scaling" else None
        if size is not None and r.median > 0:
            series.setdefault(r.system, []).append((size, r.median))
    if not series:
        return []
    for points in series.values():
        points.sort()
    absolute = _figure(7.2, 3.6)
    ax = absolute.subplots()
    for name, points in series.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    sizes = sorted({p[0] for points in series.values() for p in points})
    ax.set_xscale("log")
    ax.set_yscale("log")
    _ticks(ax.yaxis, True)
    _size_ticks(ax, sizes)
    ax.set_xlabel("deltas in the log", fontsize=8)
    ax.set_ylabel("deltas per second", fontsize=8)
    ax.set_title("rate at each size", fontsize=10, loc="left")
    ax.legend(fontsize=7)
    ax.tick_params(labelsize=7)
    ax.grid(True, which="major", alpha=0.3)
    relative = _figure(7.2, 3.6)
    ax = relative.subplots()
    for name, points in series.items():
        first = points[0][1]
        ax.plot([p[0] for p in points], [p[1] / first for p in points], marker="o", label=name)
    ax.axhline(0.85, color=_MISSED, linewidth=0.8, linestyle="--")
    ax.set_xscale("log")
    _size_ticks(ax, sizes)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("deltas in the log", fontsize=8)
    ax.set_ylabel("rate / rate at the smallest size", fontsize=8)
    ax.set_title("rate relative to the smallest log (dashed: 0.85)", fontsize=10, loc="left")
    ax.legend(fontsize=7)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
    return [_svg(absolute), _svg(relative)]


def _size_ticks(ax: Any, sizes: list[int]) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.xaxis.set_major_locator(FixedLocator(sizes))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(_compact))


def _chart_targets(targets: list[TargetResult]) -> str:
    """Each target's measured value over its bound (bound over value for an upper bound), so
    that 1 is the line to clear, on a log scale."""
    def score(t: TargetResult) -> float:
        v, bound = t.value or 0.0, _bound(t.want)
        if t.want.startswith(">="):
            return v / bound if bound else 0.0
        return bound / v if v else 0.0
    scored = [(t, max(score(t), 1e-3)) for t in targets]
    fig = _figure(7.2, 0.7 + 0.26 * len(scored))
    ax = fig.subplots()
    ys = list(range(len(scored)))[::-1]
    ax.barh(ys, [s for _, s in scored], color=[_MET if t.ok else _MISSED for t, _ in scored])
    ax.axvline(1.0, color="#1f2328", linewidth=0.8)
    ax.set_xscale("log")
    _ticks(ax.xaxis, True)
    ax.set_xlim(right=max(s for _, s in scored) * 8)
    ax.set_yticks(ys, [_short(t.name, 64) for t, _ in scored], fontsize=7)
    for y, (t, s) in zip(ys, scored, strict=False):
        shown = fmt_ratio(t.value) if t.unit == "×" else fmt_value(t.value or 0.0, t.unit)
        ax.text(s, y, f"  {shown} (want {t.want})", va="center", fontsize=7)
    ax.set_xlabel("measured relative to its bound: 1 is the line, right of it is met", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.spines[["top", "right"]].set_visible(False)
    return f"<div class=chart>{_svg(fig)}</div>"


def _bound(want: str) -> float:
    m = re.search(r"[\d.,]+", want)
    return float(m.group(0).replace(",", "")) if m else 1.0


def _by_workload(rows: Iterable[Row]) -> list[tuple[str, list[Row]]]:
    out: dict[str, list[Row]] = {}
    for r in rows:
        out.setdefault(r.workload, []).append(r)
    return list(out.items())


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"
