"""`braidlog bench`: runs in --quick mode and its JSON has a row for every workload and peer."""

from __future__ import annotations

import io
import json

import msgspec
import pytest

from braidlog import bench, encode
from braidlog.bench.writes import DISK, GROUP_COMMITTER
from braidlog.cli import main


def run_json(capsys, *args: str) -> dict:
    code = main(["bench", "--quick", "--json", "--size", "400", "--repeat", "2", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "braidlog bench:" in err  # progress went to stderr, the report to stdout
    return json.loads(out)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One quick run of every workload, shared by the checks below."""
    config = bench.Config.make(quick=True, size=400, repeat=2,
                               dir=str(tmp_path_factory.mktemp("bench")))
    steps: list[str] = []
    rep = bench.run(config, step=steps.append)
    assert steps, "no progress was reported"
    return json.loads(msgspec.json.encode(rep))


def systems(report: dict, workload: str) -> set[str]:
    return {r["system"] for r in report["rows"] if r["workload"] == workload}


def metrics(report: dict, workload: str, system: str) -> set[str]:
    return {r["metric"] for r in report["rows"]
            if r["workload"] == workload and r["system"] == system}


def test_the_indexed_ceiling_writes_what_braidlog_writes(tmp_path):
    """The 'log + 4 indexes' peer holds the same index entries as an LmdbLog of the same deltas."""
    from braidlog import LmdbLog

    ds = bench.AgentSession(3, entities=20).deltas(300)
    raw = bench.RawLmdb(str(tmp_path / "raw"), indexed=True)
    keys = bench.index_keys(ds)
    raw.put_batch([encode(d) for d in ds[:200]], keys[:200])
    for d, k in zip(ds[200:], keys[200:], strict=False):
        raw.put_one(encode(d), k)
    log = LmdbLog(tmp_path / "log")
    log.append_batch(ds)

    def entries(env, dbs):
        with env.begin() as txn:
            return [sorted((bytes(k), bytes(v)) for k, v in txn.cursor(db)) for db in dbs]

    ours = entries(log._env, [log._db[n] for n in ("ids", "braid", "kind", "refs")])
    assert entries(raw.env, raw.indexes) == ours and all(ours)
    [raw_log], [our_log] = entries(raw.env, [raw.db]), entries(log._env, [log._db["log"]])
    assert [(k, len(v)) for k, v in raw_log] == [(k, len(v)) for k, v in our_log]
    raw.close()
    log.close()


def test_every_workload_has_its_rows(report):
    es = bench.eventsourcing_installed()
    assert systems(report, "start-up") == {"braidlog", bench.PEER_IMPORT, "python, importing nothing"}
    assert metrics(report, "start-up", "braidlog") == {"import ms", "head ms"}
    want_append = {"braidlog", "raw LMDB", bench.RAW_INDEXED, "sqlite3 WAL FULL",
                   bench.BRAID_FOLLOWING, bench.BRAID_CHECKED}
    if es:
        want_append |= {"eventsourcing SQLite (100/save)", "eventsourcing on braidlog (100/save)",
                        "eventsourcing memory (100/save)"}
    assert systems(report, "append") == want_append | {DISK}
    for s in want_append:
        assert metrics(report, "append", s) == {"deltas/s", "commits/s"}
    want_single = {"braidlog", bench.WAL_LOG, "raw LMDB", bench.RAW_INDEXED, "sqlite3 WAL FULL"}
    if es:
        want_single |= {"eventsourcing SQLite (1/save)", "eventsourcing on braidlog (1/save)",
                        "eventsourcing memory (1/save)"}
    assert systems(report, "single") == want_single | {DISK}
    assert metrics(report, "single", DISK) == {"fsync p50 ms"}
    assert metrics(report, "single", "braidlog") == {
        "deltas/s", "commits/s", "p50 ms", "p99 ms", "p99.9 ms"}
    for k in bench.APPENDERS:
        assert systems(report, f"concurrent ×{k}") == {"braidlog", GROUP_COMMITTER, DISK}
        assert metrics(report, f"concurrent ×{k}", GROUP_COMMITTER) == {
            "deltas/s", "commits/s", "p50 ms", "p99 ms"}
    assert metrics(report, "scan", "braidlog") == {"scan+decode/s", "index scan/s", "get by id/s",
                                                   "verify/s"}
    assert metrics(report, "scan", "raw LMDB") == {"scan+decode/s", "verify/s"}
    assert "sqlite3" in systems(report, "scan")
    want_replay = {"braidlog", "braidlog · trivial fold"}
    if es:
        want_replay |= {"eventsourcing SQLite aggregate read",
                        "eventsourcing on braidlog aggregate read", "eventsourcing memory aggregate read"}
    assert systems(report, "replay") == want_replay
    assert metrics(report, "time travel", "braidlog") == {"at(seq) p50 ms", "at(seq) p99 ms",
                                                          "at(seq)/s", "entity as-of p50 ms",
                                                          "entity as-of p99 ms"}


def test_rows_are_medians_of_every_repeat_with_ratios_to_braidlog(report):
    for row in report["rows"]:
        assert len(row["samples"]) == 2, row
        assert row["low"] <= row["median"] <= row["high"]
        assert all(v > 0 for v in row["samples"]), row
        if row["system"] in ("braidlog", DISK) or row["workload"] in ("scaling", "recall_quality"):  # no peer row
            assert row["ratio"] is None
        elif row["metric"] == "fsync p50 ms":  # the disk's floor beside durable rows: no ratio
            assert row["ratio"] is None
        else:
            assert row["ratio"] is not None and row["ratio"] > 0, row


def test_targets_machine_and_recall_note(report):
    names = [t["name"] for t in report["targets"]]
    assert len(names) == len(bench.TARGETS)
    for t in report["targets"]:
        if "eventsourcing" in t["name"] and not bench.eventsourcing_installed():
            continue
        if "1,000,000 deltas" in t["name"]:  # a quick run's scaling curves end at its size
            assert t["value"] is None
            continue
        assert t["value"] is not None and t["ok"] in (True, False), t
    m = report["machine"]
    assert m["cores"] >= 1 and m["python"] and m["versions"]["lmdb"]
    assert m["storage"]["filesystem"] and m["storage"]["fsync_ms_p50"] > 0
    cfg = report["config"]
    assert set(cfg["mix"]) >= {"message", "tool_call", "tool_result", "observation"}
    assert 200 < cfg["payload_bytes_mean"] < 450


def test_recall_rows_when_the_recall_module_exists(report):
    try:
        import braidlog.recall  # noqa: F401  (only whether it loads)
    except ModuleNotFoundError:
        assert any(s.startswith("recall:") for s in report["skipped"])
        return
    for mode in ("unfiltered", "as of a seq", "filtered by braid"):
        workload = f"recall {mode}"
        assert systems(report, workload) == {"braidlog", "raw hnswlib", "exact numpy"}
        for system in ("braidlog", "raw hnswlib", "exact numpy"):
            assert metrics(report, workload, system) == {"recall@10", "queries/s"}
        exact = [r for r in report["rows"]
                 if r["workload"] == workload and r["system"] == "exact numpy"
                 and r["metric"] == "recall@10"]
        assert exact[0]["median"] == 1.0  # the exact search is the ground truth


def test_command_json_and_only(capsys, tmp_path):
    doc = run_json(capsys, "--only", "append,scan", "--dir", str(tmp_path))
    assert {r["workload"] for r in doc["rows"]} == {"append", "scan"}
    assert doc["config"]["only"] == ["append", "scan"]
    assert list(tmp_path.iterdir()) == []  # the temporary stores are gone


def test_command_table(capsys, tmp_path):
    assert main(["bench", "--quick", "--size", "300", "--repeat", "1", "--only", "single",
                 "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "braidlog bench" in out and "raw LMDB" in out and "edge" in out
    assert "single durable appends vs raw LMDB" in out and "cores" in out


@pytest.mark.parametrize("args, message", [
    (["--size", "10"], "size: must be at least 100 deltas, got 10"),
    (["--repeat", "0"], "repeat: must be at least 1, got 0"),
    (["--only", "nope"], "only: unknown workload 'nope'"),
])
def test_bad_options_are_one_line_errors(capsys, args, message):
    assert main(["bench", "--quick", *args]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("braidlog: error: ") and message in err
    assert "\n" not in err


def test_a_dir_not_made_yet_is_made_and_one_that_cannot_be_is_named(capsys, tmp_path):
    fresh = tmp_path / "not" / "made"
    assert main(["bench", "--quick", "--size", "300", "--repeat", "1", "--only", "single",
                 "--dir", str(fresh)]) == 0
    assert fresh.is_dir() and list(fresh.iterdir()) == []  # made, and the stores are gone
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    capsys.readouterr()
    assert main(["bench", "--quick", "--only", "single", "--dir", str(blocked / "under")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("braidlog: error: dir: cannot make the directory ") and "\n" not in err


def test_same_seed_same_workload():
    a = bench.AgentSession(3, entities=50).deltas(30)
    b = bench.AgentSession(3, entities=50).deltas(30, 0)
    assert [encode(d) for d in a] == [encode(d) for d in b]
    assert bench.AgentSession(3).deltas(5, offset=10) == bench.AgentSession(3).deltas(15)[10:]
    assert bench.AgentSession(4).deltas(5) != a[:5]


def test_percentile():
    assert bench.percentile([3, 1, 2], 50) == 2
    assert bench.percentile(list(range(101)), 99) == 99
    assert bench.percentile([1, 2], 100) == 2


def test_render_does_not_need_a_terminal(report):
    from rich.console import Console

    out = io.StringIO()
    bench.render(msgspec.convert(report, bench.Report), Console(file=out, width=140))
    assert "targets" in out.getvalue()


def test_building_a_log_reports_how_far_it_got(tmp_path):
    """The untimed build of the shared log reports its progress, ending at the log's size."""
    config = bench.Config.make(quick=True, size=2_000, repeat=1, only=["scan"], dir=str(tmp_path))
    details: list[str] = []
    bench.run(config, detail=details.append)
    built = [d for d in details if d.startswith("[1/1] building a log of 2,000 deltas")]
    assert built and built[-1].endswith("2,000 of 2,000"), details
    assert len(built) <= 11  # each tenth, not each batch


def test_a_million_deltas_repeat_once_unless_told():
    assert bench.Config.make(size=1_000_000).repeat == 1
    assert bench.Config.make(size=1_000_000, repeat=3).repeat == 3
    assert bench.Config.make(size=100_000).repeat == 5
