"""braidlog.transfer: export/import, backup/restore and stats on real LMDB stores."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import lmdb
import msgspec
import pytest

import braidlog
from braidlog import (
    GenericDelta,
    Head,
    IntegrityError,
    LmdbLog,
    MemoryLog,
    Projection,
    StorageError,
    ValidationError,
    Vector,
    transfer,
)
from braidlog.chain import link
from braidlog.delta import committed_form
from braidlog.lmdb.format import pack_row
from braidlog.replay import write_checkpoint
from tests.support import T0, make_delta, random_deltas

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def source(tmp_path, rng):
    """An LMDB store of 60 varied deltas: refs, tags, vectors, out-of-order times, 3 braids."""
    store = LmdbLog(tmp_path / "source")
    deltas = random_deltas(rng, 55)
    deltas += [make_delta(100 + i, braid="b1", vector=Vector.of([i, 0.5, -1.25])) for i in range(5)]
    for k in range(0, len(deltas), 7):
        store.append_batch(deltas[k:k + 7])
    yield store
    store.close()


def exported(store, **kw) -> str:
    buf = io.StringIO()
    transfer.export(store, buf, **kw)
    return buf.getvalue()


def lines_of(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def refuse(target, text, match, **kw):
    """Import must be refused with ``match``; the target must not change."""
    before = target.head()
    with pytest.raises(braidlog.BraidlogError, match=match):
        transfer.import_(target, lines_of(text) if isinstance(text, str) else text, **kw)
    assert target.head() == before


def same_store(a, b) -> None:
    assert a.head() == b.head()
    assert list(a.scan_bodies()) == list(b.scan_bodies())
    assert a.braids() == b.braids()
    assert a.counts("kind") == b.counts("kind") and a.counts("braid") == b.counts("braid")
    for rec in a.scan():
        assert b.get(rec.delta.id).seq == rec.seq


# ------------------------------------------------------------------------------ round trips

def test_export_import_reproduces_byte_identical_records_and_head(source, tmp_path):
    text = exported(source)
    rows = text.splitlines()
    header, end = json.loads(rows[0]), json.loads(rows[-1])
    assert header == {"braidlog": "export", "format": 2, "scope": "log", "start": 1, "stop": 61,
                      "braid": None, "prev": "00" * 32}
    assert end == {"end": True, "count": 60, "head": str(source.head())}
    first = json.loads(rows[1])
    assert base64.b64decode(first["body"]) == source.body(1)
    assert base64.b64decode(first["entry"]) == source.entry(1)
    row = next(source.scan_rows(1, 2))
    assert base64.b64decode(first["salt"]) == row.salt and len(row.salt) == 16
    assert first["hash"] == source.hash_at(1).hex() and first["seq"] == 1
    assert first["delta"]["id"] == source.read(1).delta.id
    with LmdbLog(tmp_path / "target") as target:
        report = transfer.import_(target, lines_of(text))
        assert (report.written, report.first, report.last, report.head) == (60, 1, 60, str(source.head()))
        same_store(source, target)
        assert target.verify() == source.head()
        assert [r.delta for r in target.scan_refs("bead-1")] == [r.delta for r in source.scan_refs("bead-1")]


def test_export_to_a_file_and_import_from_it(source, tmp_path):
    path = tmp_path / "log.jsonl"
    report = transfer.export(source, path)
    assert report.count == 60 and report.head == str(source.head())
    target = MemoryLog()
    transfer.import_(target, path)
    same_store(source, target)


def test_consecutive_ranges_import_one_after_another(source, tmp_path):
    parts = [exported(source, start=1, stop=21), exported(source, start=21, stop=45),
             exported(source, start=45)]
    with LmdbLog(tmp_path / "target") as target:
        refuse(target, parts[1], "the target store is at head 0:0+; this export continues the chain "
               "from seq 20, so it imports only into a store at head 20:")
        for part in parts:
            transfer.import_(target, lines_of(part))
        same_store(source, target)
        refuse(target, parts[2], r"the target store is at head 60:\w+; this export continues the "
               "chain from seq 44")


def test_an_empty_range_exports_and_imports_nothing(source):
    text = exported(source, start=61, stop=61)
    assert json.loads(text.splitlines()[-1]) == {"end": True, "count": 0, "head": str(source.head())}
    target = MemoryLog()
    refuse(target, text, "this export continues the chain from seq 60")


def test_export_refuses_a_range_outside_the_log(source):
    with pytest.raises(ValidationError, match=r"stop: must be in 1\.\.61 \(the log holds 1\.\.60\), got 99"):
        transfer.export(source, io.StringIO(), stop=99)
    with pytest.raises(ValidationError, match="start: must be at least 1"):
        transfer.export(source, io.StringIO(), start=0)


def test_export_is_a_snapshot_while_a_writer_appends(source):
    head = source.head()
    buf = io.StringIO()
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            source.append(make_delta(1000 + i))
            i += 1
    t = threading.Thread(target=writer)
    t.start()
    try:
        report = transfer.export(source, buf)
    finally:
        stop.set()
        t.join()
    assert report.count >= head.seq
    target = MemoryLog()
    transfer.import_(target, lines_of(buf.getvalue()))
    assert target.head().hash == source.hash_at(target.head().seq)


# ------------------------------------------------------------------------------- tampering

def record(line: str) -> dict:
    return json.loads(line)


def dump(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


@pytest.fixture
def text(source):
    return exported(source)


@pytest.fixture(params=["memory", "lmdb"])
def target(request, tmp_path):
    store = MemoryLog() if request.param == "memory" else LmdbLog(tmp_path / "target")
    yield store
    store.close()


def test_an_edited_delta_is_refused_at_its_line(text, target):
    lines = lines_of(text)
    obj = record(lines[5])
    # an edit is a change: the seeded log may already hold 0.123 (a round(random(), 3))
    obj["delta"]["confidence"] = 0.123 if obj["delta"]["confidence"] != 0.123 else 0.456
    lines[5] = dump(obj)
    refuse(target, lines, r"line 6: the delta JSON differs from the record bytes .*one of them was edited; "
           "nothing was imported")


def test_an_edited_body_is_refused_by_its_committed_form_and_the_chain(text, target, source):
    lines = lines_of(text)
    obj = record(lines[10])
    body = bytearray(base64.b64decode(obj["body"]))
    d = msgspec.msgpack.decode(bytes(body[8:]))
    d["confidence"] = 0.5 if d["confidence"] != 0.5 else 0.25
    edited = msgspec.convert(d, GenericDelta)
    new = bytes(body[:8]) + braidlog.encode(edited)
    obj["body"] = base64.b64encode(new).decode()
    obj["delta"]["confidence"] = d["confidence"]
    lines[10] = dump(obj)
    refuse(target, lines, r"line 11: the record's entry \(committed form\) is not what its delta "
           "bytes and salt give: one of them was edited")
    entry = committed_form(10, edited, base64.b64decode(obj["salt"]), new[8:])
    obj["entry"] = base64.b64encode(entry).decode()  # the committed form made to match
    lines[10] = dump(obj)
    refuse(target, lines, f"line 11: chain broken at seq 10: expected hash "
           f"{link(source.hash_at(9), 10, entry).hex()}, found {source.hash_at(10).hex()}: the "
           "record or its hash was edited")


def test_an_edited_hash_is_refused(text, target):
    lines = lines_of(text)
    obj = record(lines[3])
    obj["hash"] = "ab" * 32
    lines[3] = dump(obj)
    refuse(target, lines, "line 4: chain broken at seq 3: expected hash .*, found abab")


def test_an_edited_high_water_time_is_refused(text, target):
    lines = lines_of(text)
    obj = record(lines[2])
    body = base64.b64decode(obj["body"])
    obj["body"] = base64.b64encode((int.from_bytes(body[:8], "big") + 1).to_bytes(8, "big") + body[8:]).decode()
    lines[2] = dump(obj)
    refuse(target, lines, "line 3: the record's high-water time .* does not follow")


@pytest.mark.parametrize("cut", [1, 2, 30])
def test_a_truncated_file_is_refused(text, target, cut):
    lines = lines_of(text)[:-cut]
    last_seq = len(lines) - 1
    refuse(target, lines, f"line {len(lines) + 1}: the file ends after seq {last_seq}, without its "
           "end line: it was truncated")


def test_a_line_cut_mid_way_is_refused(text, target):
    lines = lines_of(text)[:20]
    lines[-1] = lines[-1][:57]
    refuse(target, lines, "line 20: the line is cut off")


def test_reordered_lines_are_refused_at_the_first_out_of_place(text, target):
    lines = lines_of(text)
    lines[7], lines[12] = lines[12], lines[7]
    refuse(target, lines, "line 8: expected seq 7, found seq 12: lines were reordered, dropped or duplicated")


def test_a_dropped_or_duplicated_line_is_refused(text, target):
    lines = lines_of(text)
    refuse(target, lines[:4] + lines[5:], "line 5: expected seq 4, found seq 5")
    refuse(target, lines[:5] + lines[4:], "line 6: expected seq 5, found seq 4")


def test_a_forged_chain_is_caught_only_against_a_head_written_down(text, target, source):
    lines = lines_of(text)
    prev = source.hash_at(29)
    for i in range(30, 61):  # rewrite record 30 and re-hash everything after it, consistently
        obj = record(lines[i])
        body = base64.b64decode(obj["body"])
        if i == 30:
            d = msgspec.msgpack.decode(body[8:])
            d["confidence"] = 0.0 if d["confidence"] else 1.0
            body = body[:8] + braidlog.encode(msgspec.convert(d, GenericDelta))
            obj["delta"]["confidence"] = d["confidence"]
            obj["body"] = base64.b64encode(body).decode()
            entry = committed_form(i, braidlog.decode(body[8:]), base64.b64decode(obj["salt"]),
                                   body[8:])
            obj["entry"] = base64.b64encode(entry).decode()
        prev = link(prev, i, base64.b64decode(obj["entry"]))
        obj["hash"] = prev.hex()
        lines[i] = dump(obj)
    end = record(lines[-1])
    end["head"] = f"60:{prev.hex()}"
    lines[-1] = dump(end)
    written_down = source.head()
    refuse(target, lines, f"the export's chain at seq 60 is {prev.hex()}, not the "
           f"{written_down.hash.hex()} given", against=str(written_down))
    refuse(target, lines, "seq 70 is outside the export", against=Head(70, written_down.hash))
    transfer.import_(target, lines, against=source.hash_at(20) and f"20:{source.hash_at(20).hex()}")
    assert target.head() == Head(60, prev) != source.head()


def test_text_after_the_end_line_and_a_wrong_count_are_refused(text, target):
    lines = lines_of(text)
    refuse(target, lines + [lines[1]], f"line {len(lines) + 1}: text after the end line")
    end = record(lines[-1])
    end["count"] = 59
    refuse(target, lines[:-1] + [dump(end)], f"line {len(lines)}: the end line counts 59 record")


def test_bad_headers_and_bad_json_are_refused(text, target, source):
    lines = lines_of(text)
    refuse(target, [], "line 1: the file is empty")
    refuse(target, ["not json\n"] + lines[1:], "line 1: not a braidlog export header")
    header = record(lines[0])
    refuse(target, [dump({**header, "format": 9})] + lines[1:], "line 1: export format 9 is not supported")
    refuse(target, [dump({**header, "prev": "11" * 32})] + lines[1:],
           "line 1: an export from seq 1 continues the genesis hash")
    later = lines_of(exported(source, start=5))
    refuse(target, [dump({**record(later[0]), "prev": "11" * 32})] + later[1:],
           "the target store is at head 0:")
    refuse(target, lines[:3] + ["{\"seq\": 3\n"] + lines[4:], "line 4: not JSON")
    refuse(target, lines[:3] + ["{\"seq\": 3, \"hash\": \"00\"}\n"] + lines[4:], "line 4: not an export record")


def test_unknown_kinds_are_refused_with_the_remedy(tmp_path):
    store = MemoryLog()
    braidlog.declare("transfer_test_private", None, owner="tests.test_transfer")
    store.append(make_delta(1, kind="transfer_test_private", payload={"x": 1}))
    text = exported(store)
    registry = braidlog.Registry()
    target = MemoryLog(registry)
    refuse(target, text, r"line 2: kind 'transfer_test_private' is not declared, neither in the "
           r"export nor in this process; import the Python module that declares it first; "
           r"nothing was imported")


def test_a_refused_import_leaves_a_non_empty_target_unchanged(source, tmp_path):
    first, rest = exported(source, stop=31), exported(source, start=31)
    with LmdbLog(tmp_path / "target") as target:
        transfer.import_(target, lines_of(first))
        lines = lines_of(rest)
        lines[-5] = lines[-5].replace('"seq":', '"seq": ', 1).replace('"hash":"', '"hash":"0', 1)
        before = list(target.scan_bodies())
        refuse(target, lines, f"line {len(lines) - 4}:")
        assert list(target.scan_bodies()) == before


# --------------------------------------------------------------------------- braid exports

def test_a_braid_export_is_not_a_prefix_and_imports_only_as_new(source, tmp_path):
    text = exported(source, braid="b1")
    rows = [json.loads(r) for r in text.splitlines()]
    ids = [r.delta.id for r in source.scan_braid("b1")]
    assert rows[0]["scope"] == "braid" and rows[0]["braid"] == "b1" and rows[0]["prev"] is None
    assert [r["delta"]["id"] for r in rows[1:-1]] == ids
    with LmdbLog(tmp_path / "target") as target:
        refuse(target, text, r"line 1: a braid export \(braid 'b1'\) is not a prefix of the chain")
        report = transfer.import_(target, lines_of(text), as_new=True)
        assert (report.written, report.skipped, report.first) == (len(ids), 0, 1)
        assert [r.delta.id for r in target.scan()] == ids
        for rec in target.scan():
            assert target.body(rec.seq)[8:] == source.body(source.seq_of(rec.delta.id))[8:]
        again = transfer.import_(target, lines_of(text), as_new=True)
        assert (again.written, again.skipped) == (0, len(ids))
        assert target.head() == Head(len(ids), target.hash_at(len(ids)))


def test_a_braid_export_with_a_foreign_or_misplaced_line_is_refused(source):
    lines = lines_of(exported(source, braid="b1"))
    other = lines_of(exported(source, braid="b2"))
    foreign = other[-2]  # b2's last record
    before = [ln for ln in lines[1:-1] if record(ln)["seq"] < record(foreign)["seq"]]
    refuse(MemoryLog(), lines[:1] + before + [foreign] + lines[1 + len(before):],
           f"line {len(before) + 2}: the delta belongs to braid 'b2', not 'b1'", as_new=True)
    refuse(MemoryLog(), lines[:2] + lines[3:4] + lines[2:3] + lines[4:],
           f"line 4: seq {record(lines[2])['seq']} is out of order", as_new=True)


# ----------------------------------------------------------------------- backup and restore

def test_backup_and_restore_round_trip_with_checkpoints(tmp_path):
    counter = Projection("counter", 1, {"n": 0}, lambda s, d: {"n": s["n"] + 1})
    with braidlog.open(tmp_path / "live", projections=[counter], checkpoint_every=10) as b:
        b.append_batch([make_delta(i) for i in range(35)])
        b.catch_up()
        report = transfer.backup(b.log, tmp_path / "bk")
        head = b.head()
    assert report.head == str(head) and report.checkpoints == 3 and report.size > 0
    manifest = json.loads((tmp_path / "bk" / transfer.MANIFEST).read_text())
    assert manifest["head"] == str(head) and manifest["format"] == 1
    assert sorted(p.name for p in (tmp_path / "bk").iterdir()) == ["braidlog-backup.json", "data.mdb"]
    restored = transfer.restore(tmp_path / "bk", tmp_path / "restored", projections=[counter])
    assert restored.head == str(head) and restored.verified == 35
    assert [(c.name, c.seq, c.status) for c in restored.checkpoints] == [
        ("counter", 10, "ok"), ("counter", 20, "ok"), ("counter", 30, "ok")]
    with braidlog.open(tmp_path / "restored", projections=[counter]) as b:
        assert b.head() == head and b.state("counter") == {"n": 35} and b.notices == []
    stale = transfer.restore(tmp_path / "bk", tmp_path / "again",
                             projections=[Projection("counter", 2, {"n": 0}, lambda s, d: s)])
    assert {c.status for c in stale.checkpoints} == {"ok (stale: the projection is now v2; ignored on open)"}


def test_backup_of_a_path_and_refusals(tmp_path):
    with LmdbLog(tmp_path / "live") as live:
        live.append(make_delta(1))
    report = transfer.backup(tmp_path / "live", tmp_path / "bk")
    assert report.head.startswith("1:")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(StorageError, match="backup target .*full exists and is not empty"):
        transfer.backup(tmp_path / "live", tmp_path / "full")
    with pytest.raises(StorageError, match="restore target .*full exists and is not empty"):
        transfer.restore(tmp_path / "bk", tmp_path / "full")
    with pytest.raises(StorageError, match="is not a backup"):
        transfer.restore(tmp_path / "full", tmp_path / "new")
    (tmp_path / "empty").mkdir()
    assert transfer.restore(tmp_path / "bk", tmp_path / "empty").head == report.head


def _put_raw(path: Path, db: bytes, key: bytes, value: bytes) -> None:
    env = lmdb.open(str(path), max_dbs=16)
    try:
        handle = env.open_db(db, dupsort=False)
        with env.begin(write=True) as txn:
            txn.put(key, value, db=handle)
    finally:
        env.close()


def test_restore_refuses_a_tampered_record_and_leaves_no_target(tmp_path):
    with LmdbLog(tmp_path / "live") as live:
        live.append_batch([make_delta(i) for i in range(20)])
        row = next(live.scan_rows(7, 8))
        stored = live._read(lambda txn: bytes(txn.get((7).to_bytes(8, "big"), db=live._db["log"])))
        bad = bytearray(stored)
        assert bad == pack_row(row.hash, row.hw, row.entry, b"", row.salt, row.data)  # no nodes
    transfer.backup(tmp_path / "live", tmp_path / "bk")
    bad[43 + len(row.entry) - 3] ^= 0x01  # in its committed form
    _put_raw(tmp_path / "bk", b"log", (7).to_bytes(8, "big"), bytes(bad))
    with pytest.raises(IntegrityError, match="chain broken at seq 7") as e:
        transfer.restore(tmp_path / "bk", tmp_path / "restored")
    assert e.value.seq == 7
    assert not (tmp_path / "restored").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_restore_refuses_a_tampered_checkpoint(tmp_path):
    counter = Projection("counter", 1, {"n": 0}, lambda s, d: {"n": s["n"] + 1})
    with braidlog.open(tmp_path / "live", projections=[counter], checkpoint_every=5) as b:
        b.append_batch([make_delta(i) for i in range(12)])
        b.catch_up()
    transfer.backup(tmp_path / "live", tmp_path / "bk")
    with LmdbLog(tmp_path / "bk") as bk:
        blob = bk.get_checkpoint("counter", 1, 10)
        bk.put_checkpoint("counter", 1, 10, blob[:-1] + bytes([blob[-1] ^ 1]))
        write_checkpoint(bk, Projection("other", 1, {}, lambda s, d: s), 5, {"x": 1})
    (tmp_path / "bk" / "lock.mdb").unlink()
    with pytest.raises(IntegrityError, match="checkpoint counter v1 at seq 10"):
        transfer.restore(tmp_path / "bk", tmp_path / "restored", projections=[counter])
    assert not (tmp_path / "restored").exists()


def test_restore_checks_the_head_in_the_manifest(tmp_path):
    with LmdbLog(tmp_path / "live") as live:
        live.append_batch([make_delta(i) for i in range(5)])
    transfer.backup(tmp_path / "live", tmp_path / "bk")
    path = tmp_path / "bk" / transfer.MANIFEST
    manifest = json.loads(path.read_text())
    manifest["head"] = "4:" + "00" * 32
    path.write_text(json.dumps(manifest))
    with pytest.raises(IntegrityError, match="its manifest recorded 4:0+ when it was taken"):
        transfer.restore(tmp_path / "bk", tmp_path / "restored")
    path.write_text("{")
    with pytest.raises(IntegrityError, match="braidlog-backup.json is damaged"):
        transfer.restore(tmp_path / "bk", tmp_path / "restored")
    assert not (tmp_path / "restored").exists()


@pytest.mark.slow
def test_restore_drill_backup_while_a_writer_process_appends(tmp_path):
    """Back up during writes (a writer process), restore, verify, compare heads."""
    live = tmp_path / "live"
    LmdbLog(live).close()
    writer = subprocess.Popen([sys.executable, "-m", "tests.support.workers", "appender", str(live), "3"],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with LmdbLog(live, create=False, readonly=True) as store:
            deadline = time.monotonic() + 20
            while store.head().seq < 200 and time.monotonic() < deadline:
                time.sleep(0.01)
            backups = []
            for i in range(3):
                report = transfer.backup(store, tmp_path / f"bk{i}")
                backups.append(report)
                time.sleep(0.1)
    finally:
        out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    final = int(out.split()[-1])
    seqs = [Head.parse(r.head).seq for r in backups]
    assert seqs == sorted(seqs) and 0 < seqs[0] and seqs[-1] < final  # taken mid-write
    with LmdbLog(live, create=False, readonly=True) as store:
        assert store.head().seq == final
        for i, report in enumerate(backups):
            restored = transfer.restore(tmp_path / f"bk{i}", tmp_path / f"restored{i}")
            assert restored.head == report.head and restored.verified == Head.parse(report.head).seq
            with LmdbLog(tmp_path / f"restored{i}", create=False, readonly=True) as r:
                head = r.verify()
                assert str(head) == report.head
                assert store.hash_at(head.seq) == head.hash  # a prefix of the live chain
                assert list(r.scan_bodies(1, 50)) == list(store.scan_bodies(1, 50))


# ------------------------------------------------------------------------------------ stats

def test_stats_reports_counts_size_head_checkpoints_and_span(tmp_path):
    counter = Projection("counter", 1, {"n": 0}, lambda s, d: {"n": s["n"] + 1})
    with braidlog.open(tmp_path / "s", projections=[counter], checkpoint_every=4) as b:
        b.append_batch([make_delta(i, braid=f"b{i % 2}") for i in range(9)]
                       + [make_delta(3, kind="tick", ts=T0 + timedelta(seconds=1))])
        b.catch_up()
        s = transfer.stats(b.log)
        assert s.head == str(b.head()) and s.deltas == 10
        assert s.kinds == {"message": 9, "tick": 1}
        assert s.braids == {"b0": 5, "b1": 5}
        assert s.size["file_size"] > 0 and s.size["map_size"] >= s.size["file_size"]
        assert s.checkpoints == [{"projection": "counter", "version": 1, "count": 2, "newest": 8}]
        assert (s.first_ts, s.last_ts, s.hw) == (T0, T0 + timedelta(seconds=1), T0 + timedelta(seconds=8))
        assert s.recall is None or isinstance(s.recall, dict)
    empty = transfer.stats(MemoryLog())
    assert (empty.deltas, empty.first_ts, empty.size, empty.kinds) == (0, None, None, {})


def test_stats_reports_the_recall_index_coverage(tmp_path):
    recall = pytest.importorskip("braidlog.recall")
    with LmdbLog(tmp_path / "s") as store:
        assert transfer.stats(store).recall is None
        store.append_batch([make_delta(i, vector=Vector.of([1.0, i, 0.5])) for i in range(6)])
        index = recall.Recall(store, block=4)
        assert index.save()
        index.close()
        s = transfer.stats(store)
        assert s.recall == {"default.cosine": {"space": "default", "metric": "cosine", "vectors": 6,
                                               "covered_seq": 6, "status": "current"}}
        store.append_batch([make_delta(10 + i) for i in range(3)])
        assert transfer.stats(store).recall["default.cosine"]["status"] == (
            "behind by 3 delta(s); caught up when next opened")


def test_every_entry_point_takes_a_braid_too(tmp_path):
    with braidlog.open(tmp_path / "b", projections=[]) as b:
        b.append_batch([make_delta(i) for i in range(4)])
        text = exported(b)
        assert transfer.stats(b).deltas == 4
        assert transfer.backup(b, tmp_path / "bk").head == str(b.head())
    with braidlog.open(None, projections=[]) as target:
        transfer.import_(target, lines_of(text))
        assert target.head().seq == 4


def test_a_last_line_without_its_newline_is_fine_when_complete(text, target, source):
    lines = lines_of(text)
    lines[-1] = lines[-1].rstrip("\n")
    transfer.import_(target, lines)
    assert target.head() == source.head()
