"""The bench report: a self-contained HTML page whose figures and ratios come from the run's own
samples, and the comparison with an earlier run. Nothing here asserts how fast anything is."""

from __future__ import annotations

import re

import pytest

from braidlog import ValidationError
from braidlog.bench import Report, Sample, changes, load
from braidlog.bench.html import page, write
from braidlog.bench.report import TARGETS, aggregate, check
from braidlog.bench.scaling import scale_metric, scale_size
from braidlog.cli import main

pytest.importorskip("matplotlib")

MACHINE = {"cores": 2, "cpu": "a test CPU", "memory_gib": 4.0, "python": "3.x", "platform": "test",
           "versions": {"braidlog": "0"}, "load": [1.0, 2.0, 3.0], "load_end": [0.5, 0.5, 0.5],
           "storage": {"filesystem": "ext4", "device": "/dev/x", "mount": "/", "fsync_ms_p50": 1.0}}


def samples(single: tuple[float, float, float], *, scale: float = 1.0) -> list[tuple[Sample, int]]:
    """Two repeats of figures: single appends/s of braidlog, raw LMDB and eventsourcing SQLite
    per repeat (the second repeat 10% faster), latencies, and scaling rates."""
    out = []
    for rep, f in enumerate((1.0, 1.1)):
        b, raw, es = (x * f * scale for x in single)
        out += [(Sample("single", "braidlog", "deltas/s", b, "/s", "higher"), rep),
                (Sample("single", "raw LMDB", "deltas/s", raw, "/s", "higher"), rep),
                (Sample("single", "eventsourcing SQLite (1/save)", "deltas/s", es, "/s", "higher"), rep),
                (Sample("single", "braidlog", "p50 ms", 1000 / b, "ms", "lower"), rep),
                (Sample("single", "braidlog", "p99 ms", 3000 / b, "ms", "lower"), rep),
                (Sample("single", "raw LMDB", "p50 ms", 1000 / raw, "ms", "lower"), rep)]
    for size, rate in ((10_000, 200_000.0), (100_000, 190_000.0), (1_000_000, 150_000.0)):
        out.append((Sample("scaling", "braidlog · replay, every projection", scale_metric(size), rate * scale,
                           "/s", "higher"), 0))
    return out


def report(single=(3000.0, 5000.0, 2000.0), *, scale: float = 1.0) -> Report:
    rows, by_key = aggregate(samples(single, scale=scale))
    return Report(machine=MACHINE, config={"size": 100_000, "repeat": 2, "seed": 7, "quick": False},
                  rows=rows, targets=[check(t, by_key, 100_000) for t in TARGETS], skipped=[],
                  seconds=12.0)


def target_row(html: str, name: str) -> str:
    m = re.search(r"<tr><td>" + re.escape(name) + r".*?</tr>", html)
    assert m, f"no row for target {name!r}"
    return m.group(0)


def test_the_page_holds_the_targets_with_the_ratios_of_the_run():
    r = report()
    html = page(r)
    # 3000/2000 and 3300/2200 are both 1.5: met; 3000/5000 is 0.6 against >= 0.7: missed
    row = target_row(html, "single durable append vs eventsourcing SQLite, one event a save")
    assert ">1.50×<" in row and "class=met" in row
    row = target_row(html, "single durable appends vs raw LMDB one put per commit")
    assert ">0.60×<" in row and "class=missed" in row
    # 150,000 / 190,000 = 0.79 against >= 0.85
    row = target_row(html, "replay rate at 1,000,000 deltas vs at 100,000")
    assert ">0.79×<" in row and "class=missed" in row
    assert "not run" in target_row(html, "verify vs raw iteration + blake3")
    measured = sum(1 for t in r.targets if t.value is not None)
    assert f"of {measured} measured targets met" in html


def test_the_page_draws_its_charts_inline_and_fetches_nothing():
    html = page(report())
    # targets, one throughput chart (single), one latency chart, two scaling curves
    assert html.count("<svg") == 5
    assert "<script" not in html and "<link" not in html and "<img" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "@import" not in html
    assert re.findall(r"url\((.)", html) == ["#"] * html.count("url(")  # only the page's own clip paths
    for text in ("Throughput by system", "Latency percentiles", "Scaling", "Every figure",
                 "a test CPU", "1.00 / 2.00 / 3.00"):
        assert text in html


def test_every_figure_of_the_run_is_in_the_table_as_it_was_measured():
    r = report()
    html = page(r)
    braidlog_single = next(x for x in r.rows if x.workload == "single" and x.system == "braidlog"
                           and x.metric == "deltas/s")
    assert braidlog_single.median == pytest.approx(3150.0)
    assert "3,150/s" in html
    for row in r.rows:
        assert f"<td>{row.metric}</td>" in html.replace("&amp;", "&")


def test_a_run_without_scaling_or_latencies_says_so():
    rows, by_key = aggregate([(Sample("append", "braidlog", "deltas/s", 10.0, "/s", "higher"), 0)])
    r = Report(machine=MACHINE, config={"size": 10}, rows=rows,
               targets=[check(t, by_key, 10) for t in TARGETS], skipped=["a note"], seconds=1.0)
    html = page(r)
    assert html.count("Not measured in this run.") == 2
    assert "a note" in html


def test_against_an_earlier_run_each_figure_is_faster_slower_or_within_the_spread():
    old, new = report(), report(scale=1.3)
    found = {(c.workload, c.system, c.metric): c for c in changes(new, old)}
    c = found[("single", "braidlog", "deltas/s")]
    assert c.change == pytest.approx(0.3) and c.verdict == "faster"
    assert found[("single", "braidlog", "p50 ms")].verdict == "faster"  # lower latency
    slower = {(c.workload, c.system, c.metric): c for c in changes(old, new)}
    assert slower[("single", "braidlog", "p99 ms")].verdict == "slower"
    # 10% apart between repeats on both sides: a 3% change is within the spread
    same = {(c.workload, c.system, c.metric): c for c in changes(report(scale=1.03), old)}
    assert same[("single", "braidlog", "deltas/s")].verdict == "within the spread"
    html = page(new, compare=old)
    assert "Against the earlier run" in html and "+30.0%" in html and "class=faster" in html


def test_write_and_load_round_trip(tmp_path):
    r = report()
    index = write(r, tmp_path / "out", compare=r)
    assert index.name == "index.html" and index.read_text().startswith("<!doctype html>")
    assert load(tmp_path / "out") == r
    assert load(tmp_path / "out" / "report.json") == r
    with pytest.raises(ValidationError, match="compare"):
        load(tmp_path / "nothing.json")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValidationError, match="not a braidlog bench report"):
        load(tmp_path / "bad.json")


def test_scale_metrics_name_their_size():
    assert scale_size(scale_metric(1_000_000)) == 1_000_000
    assert scale_size("deltas/s") is None


def test_command_writes_the_report_and_compares(tmp_path, capsys):
    old = tmp_path / "old"
    write(report(), old)
    out = tmp_path / "new"
    code = main(["bench", "--quick", "--size", "300", "--repeat", "1", "--only", "single,scaling",
                 "--dir", str(tmp_path), "--report", str(out), "--compare", str(old / "report.json")])
    text, err = capsys.readouterr()
    assert code == 0, err
    assert "vs before" in text  # the table's column against the earlier run
    html = (out / "index.html").read_text()
    new = load(out)
    assert {r.workload for r in new.rows} == {"single", "scaling"}
    sizes = sorted({scale_size(r.metric) for r in new.rows if r.workload == "scaling"})
    assert sizes == [100, 150, 300]  # a quick run's curves: a fifth (at least 100), half, all
    assert "Against the earlier run" in html and html.count("<svg") >= 4
    assert "the report is" in err


def test_command_refuses_a_bad_comparison_before_measuring(tmp_path, capsys):
    code = main(["bench", "--quick", "--only", "single", "--compare", str(tmp_path / "none.json")])
    _, err = capsys.readouterr()
    assert code == 1 and "compare" in err and "braidlog bench:" not in err
    code = main(["bench", "--quick", "--only", "single", "--scaling-sizes", "10,x"])
    _, err = capsys.readouterr()
    assert code == 1 and "scaling-sizes" in err
