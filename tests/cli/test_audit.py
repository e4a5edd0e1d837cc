"""The audit and operations commands, and the lead's `head` and `verify --against`, end to end
through ``braidlog.cli.main`` on real LMDB stores."""

from __future__ import annotations

import contextlib
import json
import os
from datetime import timedelta

import lmdb
import pytest

import braidlog
from braidlog import BeadRef, GenericDelta, LmdbLog, Provenance, Refs
from braidlog.chain import link
from braidlog.cli import core, main
from braidlog.delta import committed_form
from braidlog.lmdb.format import pack_row
from braidlog.store import ts_micros
from tests.support import T0, make_delta

braidlog.declare("cli_audit_note", None, owner="tests.test_cli_audit")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path):
    """Twelve deltas; bead-7 is used by seqs 3, 6 and 9, with reasons in two of them."""
    path = tmp_path / "store"
    with LmdbLog(path) as log:
        for i in range(1, 13):
            refs = Refs(beads=(BeadRef("bead-7", "used"),)) if i % 3 == 0 else None
            payload = {"text": f"message {i}"}
            if i == 6:
                payload["rationale"] = "the bead answered the question"
            log.append(make_delta(i, refs=refs, payload=payload,
                                  kind="cli_audit_note" if i == 6 else "message",
                                  provenance=Provenance("assistant", model="m") if i == 9 else Provenance("user")))
    return path


def tamper(path, seq: int) -> tuple[bytes, bytes]:
    """Flip one byte of record ``seq``'s committed form, keeping its stored hash; (expected,
    found)."""
    env = lmdb.open(str(path), max_dbs=16)
    try:
        db = env.open_db(b"log")
        with env.begin(write=True) as txn:
            key = seq.to_bytes(8, "big")
            value = bytearray(txn.get(key, db=db))
            prev = bytes(txn.get((seq - 1).to_bytes(8, "big"), db=db)[:32]) if seq > 1 else bytes(32)
            n = int.from_bytes(value[40:42], "big")
            value[43 + n - 2] ^= 0x20  # the row: hash, hw, len(entry), node count, entry, ...
            txn.put(key, bytes(value), db=db)
    finally:
        env.close()
    return link(prev, seq, bytes(value[43:43 + n])), bytes(value[:32])


# ------------------------------------------------------------------------ head and verify

def test_head_prints_seq_and_hash_to_write_down(store, capsys):
    code, out, _ = run(capsys, "--store", store, "head")
    with LmdbLog(store) as log:
        head = log.head()
    assert code == 0 and out == f"{head}\n"
    code, out, _ = run(capsys, "--store", store, "head", "--json")
    assert json.loads(out) == {"seq": 12, "hash": head.hash.hex(), "head": str(head)}


def test_verify_against_a_head_taken_earlier(store, capsys):
    _, written_down, _ = run(capsys, "--store", store, "head")
    written_down = written_down.strip()
    with LmdbLog(store) as log:
        log.append_batch([make_delta(100 + i) for i in range(5)])
    code, out, _ = run(capsys, "--store", store, "verify", "--against", written_down)
    assert (code, out) == (0, f"ok: the first 12 deltas are unchanged since head {written_down}\n")
    code, out, _ = run(capsys, "--store", store, "verify", "--against", written_down, "--json")
    assert json.loads(out)["verified"] == 12 and json.loads(out)["against"] == written_down


def test_verify_names_the_first_bad_seq_with_expected_and_found(store, capsys):
    _, written_down, _ = run(capsys, "--store", store, "head")
    expected, found = tamper(store, 5)
    code, out, err = run(capsys, "--store", store, "verify", "--against", written_down.strip())
    assert code == 1 and out == ""
    assert err == (f"braidlog: error: chain broken at seq 5: expected hash {expected.hex()}, found "
                   f"{found.hex()}; the record or its hash was changed after it was written\n")
    code, _, err = run(capsys, "--store", store, "verify")
    assert code == 1 and "chain broken at seq 5" in err


def test_verify_against_another_head_or_a_longer_log(store, capsys):
    other = "12:" + "ab" * 32
    code, _, err = run(capsys, "--store", store, "verify", "--against", other)
    with LmdbLog(store) as log:
        found = log.hash_at(12).hex()
    assert code == 1 and err == (f"braidlog: error: --against: the first 12 deltas differ from the head given: "
                                 f"expected hash {'ab' * 32}, found {found} at seq 12\n")
    code, _, err = run(capsys, "--store", store, "verify", "--against", "40:" + "ab" * 32)
    assert code == 1
    assert "--against: the log holds 12 deltas, fewer than the 40 of the head given: deltas were lost" in err
    code, _, err = run(capsys, "--store", store, "verify", "--against", "12:xyz")
    assert code == 1 and "--against: must be SEQ:HASH with a 64-digit hex hash" in err


def build_log_only(path, n: int) -> None:
    """``n`` real records written straight into the log table (docs/format.md: key seq, value
    its row, with the Merkle tree's nodes it completes), skipping validation; the secondary
    indexes, which verify checks, are then built from the log by ``repair_indexes``: it builds a
    million-record store in seconds instead of a minute."""
    from braidlog import tree as merkle
    LmdbLog(path).close()
    env = lmdb.open(str(path), max_dbs=16, map_size=1 << 30, sync=False, metasync=False)
    try:
        db = env.open_db(b"log")
        frontier = merkle.Frontier()
        prov = Provenance("system")
        prev, hw = bytes(32), 0
        for k in range(0, n, 50_000):
            rows = []
            for seq in range(k + 1, min(n, k + 50_000) + 1):
                d = GenericDelta(braid_id=f"b{seq % 4}", kind="tick", ts=T0 + timedelta(milliseconds=seq),
                                 provenance=prov, confidence=1.0, payload={"note": str(seq)})
                hw = max(hw, ts_micros(d.ts))
                data, salt = braidlog.encode(d), os.urandom(16)
                entry = committed_form(seq, d, salt, data)
                prev = link(prev, seq, entry)
                nodes = frontier.completed([entry])[0]
                rows.append((seq.to_bytes(8, "big"), pack_row(prev, hw, entry, nodes, salt, data)))
            with env.begin(write=True) as txn:
                assert txn.cursor(db).putmulti(rows, append=True) == (len(rows), len(rows))
        env.sync(True)
    finally:
        env.close()
    with LmdbLog(path, durable=False) as log:
        log.repair_indexes()


@pytest.fixture
def bars(monkeypatch):
    """Record every progress bar the verify command opens and the counts it reports."""
    seen = []
    real = core.progress_bar

    @contextlib.contextmanager
    def recording(label, total, *, enabled=True):
        calls = {"label": label, "total": total, "enabled": enabled, "updates": []}
        seen.append(calls)
        with real(label, total, enabled=enabled) as update:
            def both(done):
                calls["updates"].append(done)
                update(done)
            yield both
    monkeypatch.setattr(core, "progress_bar", recording)
    return seen


def test_verify_shows_progress_above_100k_deltas(tmp_path, capsys, bars):
    small, big = tmp_path / "small", tmp_path / "big"
    build_log_only(small, 1_000)
    build_log_only(big, 100_000)
    assert run(capsys, "--store", small, "verify")[0] == 0
    assert run(capsys, "--store", big, "verify")[0] == 0
    assert [(b["total"], b["enabled"]) for b in bars] == [(1_000, False), (100_000, True)]
    assert bars[1]["updates"][-1] == 100_000 and bars[1]["updates"] == sorted(bars[1]["updates"])
    assert len(bars[1]["updates"]) > 1


@pytest.mark.slow
def test_verify_a_million_deltas_with_progress_and_the_first_bad_seq(tmp_path, capsys, bars):
    path = tmp_path / "million"
    build_log_only(path, 1_000_000)
    code, written_down, _ = run(capsys, "--store", path, "head")
    assert written_down.startswith("1000000:")
    code, out, _ = run(capsys, "--store", path, "verify", "--against", written_down.strip())
    assert code == 0 and out.startswith("ok: the first 1000000 deltas are unchanged")
    assert bars[-1]["enabled"] and bars[-1]["updates"][-1] == 1_000_000
    assert len(bars[-1]["updates"]) >= 10
    expected, found = tamper(path, 654_321)
    code, _, err = run(capsys, "--store", path, "verify", "--against", written_down.strip())
    assert code == 1
    assert f"chain broken at seq 654321: expected hash {expected.hex()}, found {found.hex()}" in err


# ----------------------------------------------------------------- history, diff, explain

def test_history_lists_the_deltas_about_an_entity(store, capsys):
    code, out, _ = run(capsys, "--store", store, "history", "bead-7", "--no-state")
    assert code == 0
    assert out.splitlines()[0].startswith("bead-7: 4 delta(s) as of seq 12")
    assert [ln.split()[1] for ln in out.splitlines() if ln.startswith("  seq ")] == ["3", "6", "9", "12"]
    assert "why (rationale): the bead answered the question" in out
    assert "by assistant (model=m)" in out
    code, out, _ = run(capsys, "--store", store, "history", "bead-7", "--at", "7", "--json")
    h = json.loads(out)
    assert [s["seq"] for s in h["steps"]] == [3, 6] and h["seq"] == 7
    assert h["steps"][1]["reasons"] == {"rationale": "the bead answered the question"}
    assert h["steps"][0]["delta"]["refs"] == {"beads": [{"bead_id": "bead-7", "role": "used"}]}


def test_history_and_explain_of_an_unknown_entity_fail_clearly(store, capsys):
    for cmd in ("history", "explain"):
        code, out, err = run(capsys, "--store", store, cmd, "bead-99")
        assert code == 1 and out == ""
        assert err.startswith("braidlog: error: entity: no delta refers to 'bead-99' up to seq 12;")


def test_explain_tells_why(store, capsys):
    code, out, _ = run(capsys, "--store", store, "explain", "bead-7", "--at", "8")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"bead-7 as of seq 8, {(T0 + timedelta(seconds=8)).isoformat()} (head 8:")
    assert "how it got there: 2 delta(s), seq 3..6" in out
    assert "written by: user" in out and "braidlog verify --against 8:" in out
    code, out, _ = run(capsys, "--store", store, "explain", "bead-7", "--json")
    assert [s["seq"] for s in json.loads(out)["steps"]] == [3, 6, 9, 12]


def test_diff_between_two_points(store, capsys):
    code, out, _ = run(capsys, "--store", store, "diff", "2", "9", "--json")
    assert code == 0
    d = json.loads(out)
    assert (d["a"], d["b"]) == (2, 9) and d["b_head"].startswith("9:")
    assert isinstance(d["projections"], dict)
    code, out, _ = run(capsys, "--store", store, "diff", "2")
    assert code == 0 and out.startswith("diff seq 2 -> seq 12")
    code, _, err = run(capsys, "--store", store, "diff", "9", "2")
    assert code == 1 and "b: must be at or after a (a is seq 9, b is seq 2); swap them" in err
    code, _, err = run(capsys, "--store", store, "diff", "yesterday")
    assert code == 1 and "'yesterday' is not a seq, a delta id or an ISO-8601 time" in err


# -------------------------------------------------------------------- export and import

def test_export_then_import_reproduces_the_store(store, tmp_path, capsys):
    file = tmp_path / "log.jsonl"
    code, out, _ = run(capsys, "--store", store, "export", file)
    assert code == 0 and out.startswith("exported 12 record(s) of log seq 1..12; last 12:")
    code, out, _ = run(capsys, "--store", tmp_path / "copy", "import", file, "--json")
    report = json.loads(out)
    assert code == 0 and (report["written"], report["first"], report["last"]) == (12, 1, 12)
    with LmdbLog(store) as a, LmdbLog(tmp_path / "copy") as b:
        assert a.head() == b.head() and list(a.scan_bodies()) == list(b.scan_bodies())
        assert str(a.head()) == report["head"]


def test_export_to_stdout_and_a_range(store, tmp_path, capsys):
    code, out, err = run(capsys, "--store", store, "export", "--start", "4", "--stop", "8")
    rows = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and [r["seq"] for r in rows[1:-1]] == [4, 5, 6, 7]
    assert err.startswith("exported 4 record(s) of log seq 4..7")
    code, out, err = run(capsys, "--store", store, "export", "--braid", "b1", "--json")
    assert code == 0 and json.loads(err)["scope"] == "braid"


def test_a_tampered_import_is_refused_and_creates_nothing(store, tmp_path, capsys):
    file = tmp_path / "log.jsonl"
    run(capsys, "--store", store, "export", file)
    lines = file.read_text().splitlines(keepends=True)
    lines[4], lines[5] = lines[5], lines[4]
    file.write_text("".join(lines))
    code, out, err = run(capsys, "--store", tmp_path / "new", "import", file)
    assert code == 1 and out == ""
    assert err == ("braidlog: error: line 5: expected seq 4, found seq 5: lines were reordered, "
                   "dropped or duplicated; nothing was imported\n")
    assert not (tmp_path / "new").exists()


def test_import_into_a_store_that_is_not_where_the_export_starts(store, tmp_path, capsys):
    file = tmp_path / "log.jsonl"
    run(capsys, "--store", store, "export", file)
    with LmdbLog(store) as log:
        before = log.head()
    code, _, err = run(capsys, "--store", store, "import", file)
    assert code == 1 and f"the target store is at head {before}; this export continues" in err
    with LmdbLog(store) as log:
        assert log.head() == before
    code, out, _ = run(capsys, "--store", store, "import", file, "--as-new")
    assert code == 0 and out == f"imported 0 record(s) (12 already present); head {before}\n"
    code, _, err = run(capsys, "--store", tmp_path / "x", "import", tmp_path / "missing.jsonl")
    assert code == 1 and "no file" in err


def test_import_checks_a_head_written_down(store, tmp_path, capsys):
    file = tmp_path / "log.jsonl"
    run(capsys, "--store", store, "export", file)
    _, head, _ = run(capsys, "--store", store, "head")
    code, _, _ = run(capsys, "--store", tmp_path / "a", "import", file, "--against", head.strip())
    assert code == 0
    code, _, err = run(capsys, "--store", tmp_path / "b", "import", file, "--against", "12:" + "00" * 32)
    assert code == 1 and "it is not the log that head was taken from" in err
    assert not (tmp_path / "b").exists()


# -------------------------------------------------------------------- backup, restore, stats

def test_backup_and_restore(store, tmp_path, capsys):
    code, out, _ = run(capsys, "--store", store, "backup", tmp_path / "bk", "--json")
    report = json.loads(out)
    assert code == 0 and report["head"].startswith("12:")
    code, out, _ = run(capsys, "--store", tmp_path / "restored", "restore", tmp_path / "bk")
    assert code == 0
    assert out == (f"restored {tmp_path / 'bk'} into {tmp_path / 'restored'}: 12 deltas and 0 "
                   f"checkpoint(s) verified; head {report['head']}\n")
    code, _, err = run(capsys, "--store", store, "restore", tmp_path / "bk")
    assert code == 1 and "restore target" in err and "exists and is not empty" in err
    code, _, err = run(capsys, "--store", tmp_path / "r2", "restore", tmp_path / "nothing")
    assert code == 1 and "no backup at" in err
    tamper(tmp_path / "bk", 3)
    code, _, err = run(capsys, "--store", tmp_path / "r3", "restore", tmp_path / "bk")
    assert code == 1 and "chain broken at seq 3" in err and not (tmp_path / "r3").exists()


def test_stats(store, capsys):
    code, out, _ = run(capsys, "--store", store, "stats", "--json")
    s = json.loads(out)
    assert code == 0 and s["deltas"] == 12 and s["kinds"] == {"cli_audit_note": 1, "message": 11}
    assert s["braids"] == {"b1": 12} and s["size"]["file_size"] > 0
    assert s["first_ts"] == "2026-01-01T00:00:01Z" and s["hw"] == "2026-01-01T00:00:12Z"
    code, out, _ = run(capsys, "--store", store, "stats")
    assert code == 0 and "deltas  12" in out and "message" in out and "recall index" in out
    code, _, err = run(capsys, "--store", store.parent / "none", "stats")
    assert code == 1 and "no store at" in err


@pytest.mark.slow
def test_the_demo_store_exports_and_imports_in_fresh_processes(tmp_path):
    """Projection kinds validate on import in a process that never imported projections."""
    import subprocess
    import sys

    def cli(*argv):
        done = subprocess.run([sys.executable, "-m", "braidlog", *map(str, argv)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    cli("--store", "demo.lmdb", "demo", "--quiet")
    cli("--store", "demo.lmdb", "export", "demo.jsonl")
    head = cli("--store", "demo.lmdb", "head").strip()
    cli("--store", "copy.lmdb", "import", "demo.jsonl", "--against", head)
    assert cli("--store", "copy.lmdb", "head").strip() == head
    assert cli("--store", "copy.lmdb", "verify", "--against", head).startswith("ok: the first")
    stats = json.loads(cli("--store", "copy.lmdb", "stats", "--json"))
    assert stats["head"] == head and stats["kinds"]["decision_recorded"] >= 1
