"""verify reaches every record the way reads do, checks every index both ways, reads both meta
pages and wraps LMDB's corruption errors; repair --indexes rebuilds the indexes from the log.
The damage is made in the bytes of data.mdb, located with braidlog.lmdb.file."""

from __future__ import annotations

import os
import re
import struct
import sys

import lmdb
import pytest

from braidlog import BraidlogError, IntegrityError, LmdbLog, Refs
from braidlog.cli import main
from braidlog.lmdb.file import _Reader, picked, read_metas, table_db
from tests.support import in_child, make_delta

_E = "<" if sys.byteorder == "little" else ">"


def _store(path, n: int = 2000):
    deltas = [make_delta(i, braid=f"b{i % 3}", kind="message" if i % 4 else "tick",
                         refs=Refs(deltas=(f"E{i % 7}",)) if i % 5 == 0 else None,
                         payload={"text": f"delta {i} " + "z" * 200} if i % 4 else {})
              for i in range(n)]
    with LmdbLog(path, durable=False) as log:
        for i in range(0, n, 500):
            log.append_batch(deltas[i:i + 500])
        return deltas, log.head()


def _page(path, table: bytes) -> tuple[int, int, int, bytes]:
    """(root pgno, page size, page-header size, root page bytes) of a table."""
    with open(path / "data.mdb", "rb") as f:
        hdr, m0, m1 = read_metas(f.fileno())
        meta = picked(m0, m1)
        root = table_db(f.fileno(), hdr, meta, table).root
        buf = os.pread(f.fileno(), meta.psize, root * meta.psize)
    return root, meta.psize, hdr, buf


def _write(path, offset: int, data: bytes) -> None:
    with open(path / "data.mdb", "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_a_damaged_branch_key_of_the_log_is_found_as_reads_find_it(lmdb_path, capsys):
    _store(lmdb_path)
    root, psize, hdr, buf = _page(lmdb_path, b"log")
    flags = struct.unpack_from(_E + "H", buf, hdr - 6)[0]
    assert flags & 0x01, "the log's root is a branch page"
    node = struct.unpack_from(_E + "H", buf, hdr + 2)[0]  # the second node: its key separates
    key = int.from_bytes(buf[node + 8:node + 16], "big")
    _write(lmdb_path, root * psize + node + 8, (key + 3).to_bytes(8, "big"))
    with LmdbLog(lmdb_path) as log:
        with pytest.raises(IntegrityError, match=rf"seq {key} is missing from the log: a read of "
                                                 "it through the log's B-tree finds nothing"):
            log.verify()
        with pytest.raises(IntegrityError, match=f"seq {key} is within the log"):
            log.read(key)  # what reads see: not an IndexError, not None
        assert len(list(log.scan())) == 2000  # the leaves are all there: a cursor walk passes
    assert main(["--store", str(lmdb_path), "verify"]) == 1
    assert f"seq {key} is missing" in capsys.readouterr().err


@pytest.mark.parametrize("table,name", [("braid", "braid"), ("kind", "kind"), ("refs", "refers-to"),
                                        ("ids", "id")])
def test_an_index_entry_the_log_does_not_give_is_named(lmdb_path, table, name):
    _store(lmdb_path, 300)
    # seq 3 holds delta 2: braid b2, a message, no refs; no delta has the id below
    key = {"braid": b"b1", "kind": b"tick", "refs": b"E3", "ids": b"01ZZZZZZZZZZZZZZZZZZZZZZZZ"}[table]
    env = lmdb.open(str(lmdb_path), max_dbs=16)
    with env.begin(write=True) as txn:
        db = env.open_db(table.encode(), txn=txn, create=False, dupsort=table != "ids")
        txn.put(key, (3).to_bytes(8, "big"), db=db)
    env.close()
    with LmdbLog(lmdb_path) as log:
        with pytest.raises(IntegrityError, match=rf"the {name} index has an entry "
                                                 rf"'{key.decode()}' -> seq 3, whose record does "
                                                 "not hold that key.*repair --indexes"):
            log.verify()


@pytest.mark.parametrize("table,name", [("braid", "braid"), ("kind", "kind"), ("refs", "refers-to"),
                                        ("ids", "id"), ("idh", "id-digest")])
def test_a_record_whose_index_entry_is_lost_is_named(lmdb_path, table, name):
    deltas, _ = _store(lmdb_path, 300)
    d = deltas[150]  # seq 151: braid b0, kind message, refers to E3
    from braidlog.lmdb.log import id_digest
    key = {"braid": b"b0", "kind": b"message", "refs": b"E3", "ids": d.id.encode(),
           "idh": id_digest(d.id)}[table]
    env = lmdb.open(str(lmdb_path), max_dbs=16)
    with env.begin(write=True) as txn:
        db = env.open_db(table.encode(), txn=txn, create=False, dupsort=table in ("braid", "kind", "refs"))
        assert txn.delete(key, (151).to_bytes(8, "big") if table in ("braid", "kind", "refs") else b"",
                          db=db)
    env.close()
    with LmdbLog(lmdb_path, readonly=True) as log:
        with pytest.raises(IntegrityError, match=rf"the {name} index lacks the entry .* -> seq 151 "
                                                 "that record 151 needs"):
            log.verify()


def _metas(path):
    with open(path / "data.mdb", "rb") as f:
        return read_metas(f.fileno())


def test_a_meta_page_whose_commit_number_was_raised_is_reported(lmdb_path):
    _store(lmdb_path, 600)
    with LmdbLog(lmdb_path) as log:
        log.append(make_delta(5000))  # the last commit adds a delta
        head = log.head()
    hdr, m0, m1 = _metas(lmdb_path)
    new, old = (m1, m0) if m1.txnid > m0.txnid else (m0, m1)
    # the older meta page now claims the commit after the newer one: parity and adjacency hold,
    # and LMDB opens the older commit, one delta short, without a word
    _write(lmdb_path, old.page * old.psize + hdr + 128, struct.pack(_E + "Q", new.txnid + 1))
    with LmdbLog(lmdb_path, readonly=True) as log:
        assert log.head().seq == head.seq - 1
        with pytest.raises(IntegrityError, match=rf"meta page {old.page} names commit "
                                                 rf"{new.txnid + 1}.*older commit than the last "
                                                 "one.*verify --against"):
            log.verify()


def test_commits_made_between_the_two_meta_page_reads_are_not_damage(lmdb_path, monkeypatch):
    """verify reads the two meta pages with two reads; a writer that commits in between (as
    another process may) leaves the pair naming commits no file held together (90 and 95). The
    pages are read again until two reads agree, so only a page that stays wrong is reported."""
    import braidlog.lmdb.file as file

    _store(lmdb_path, 100)
    with LmdbLog(lmdb_path) as reader, LmdbLog(lmdb_path) as writer:
        real, psize, moved = file.os.pread, _metas(lmdb_path)[1].psize, []

        def pread(fd, n, offset):  # verify's meta check has read page 0: five commits, then page 1
            if offset == psize and not moved and "meta_findings" in _callers():
                for i in range(5):
                    writer.append(make_delta(9000 + i))
                moved.append(True)
            return real(fd, n, offset)
        monkeypatch.setattr(file.os, "pread", pread)
        assert reader.verify().seq == 105
    assert moved


def _callers() -> set[str]:
    f, names = sys._getframe(1), set()
    while f is not None:
        names.add(f.f_code.co_name)
        f = f.f_back
    return names


def test_a_meta_page_with_a_commit_number_of_the_wrong_parity_is_reported(lmdb_path):
    _store(lmdb_path, 100)
    with LmdbLog(lmdb_path) as log:  # the older commit past the first (a store is created in one)
        log.use_projections(["counter"])
    hdr, m0, m1 = _metas(lmdb_path)
    old = m0 if m0.txnid < m1.txnid else m1
    _write(lmdb_path, old.page * old.psize + hdr + 128, struct.pack(_E + "Q", old.txnid ^ 1))
    with LmdbLog(lmdb_path, readonly=True) as log:
        with pytest.raises(IntegrityError, match=f"meta page {old.page} names commit"):
            log.verify()


def test_lmdb_corruption_is_an_integrity_error_naming_the_last_seq_read_intact(lmdb_path):
    _store(lmdb_path, 1200)  # a log of two levels: the root's children are leaves
    root, psize, hdr, buf = _page(lmdb_path, b"log")
    # the third child of the log's root: a leaf page; make its bounds impossible
    node = struct.unpack_from(_E + "H", buf, hdr + 4)[0]
    lo, hi, fl = struct.unpack_from(_E + "HHH", buf, node)
    leaf = lo | hi << 16 | fl << 32
    first = int.from_bytes(buf[node + 8:node + 16], "big")
    _write(lmdb_path, leaf * psize + hdr - 4, struct.pack(_E + "HH", 4000, 100))
    with LmdbLog(lmdb_path, readonly=True, check_head=False) as log:
        with pytest.raises(IntegrityError) as e:
            log.verify()
    message = str(e.value)
    assert "damaged" in message and f"seqs 1..{first - 1} were read intact" in message, message
    assert re.search(rf"page {leaf}\b", message), message  # named by the structural check, before LMDB reads it


def test_repair_rebuilds_every_index_from_the_log_and_verify_passes(lmdb_path, capsys):
    deltas, head = _store(lmdb_path, 500)
    env = lmdb.open(str(lmdb_path), max_dbs=16)
    with env.begin(write=True) as txn:
        txn.put(b"b1", (4).to_bytes(8, "big"), db=env.open_db(b"braid", txn=txn, dupsort=True))
        txn.delete(deltas[10].id.encode(), db=env.open_db(b"ids", txn=txn))
        txn.put(b"nowhere", (9).to_bytes(8, "big"), db=env.open_db(b"refs", txn=txn, dupsort=True))
        txn.drop(env.open_db(b"kind", txn=txn, dupsort=True), delete=False)
    env.close()
    with LmdbLog(lmdb_path) as log:
        with pytest.raises(IntegrityError):
            log.verify()
        written = log.repair_indexes()
        assert written["ids"] == written["idh"] == written["braid"] == written["kind"] == 500
        assert log.verify() == head
        assert log.get(deltas[10].id).seq == 11
        assert log.append(deltas[10]) == 11 and log.head() == head  # a retry, as before
        assert [r.seq for r in log.scan_kind("tick")] == list(range(1, 501, 4))
    assert main(["--store", str(lmdb_path), "repair", "--indexes"]) == 0
    out = capsys.readouterr().out
    assert "ids 500" in out and f"ok: 500 deltas verified; head {head}" in out


def test_repair_refuses_to_build_indexes_from_a_damaged_log(lmdb_path):
    _store(lmdb_path, 50)
    env = lmdb.open(str(lmdb_path), max_dbs=16)
    with env.begin(write=True) as txn:
        db = env.open_db(b"log", txn=txn)
        value = bytearray(txn.get((7).to_bytes(8, "big"), db=db))
        value[-3] ^= 1
        txn.put((7).to_bytes(8, "big"), bytes(value), db=db)
    env.close()
    with LmdbLog(lmdb_path, check_head=False) as log:
        with pytest.raises(IntegrityError, match="the log itself is damaged.*seq 7"):
            log.repair_indexes()
    assert main(["--store", str(lmdb_path), "repair", "--indexes"]) == 1


def test_refers_entries_written_by_a_projection_this_process_lacks_verify_and_scan(lmdb_path):
    """A refers-to entry comes from the refers function of the projection that wrote it; a
    process without that projection cannot recompute it, and must not call the index damaged."""
    from braidlog import delta as make
    from braidlog.kinds import Registry

    reg = Registry()
    reg.declare("noted", None, owner="notes-app",
                refers=lambda p: [p["subject"], f"{p['subject']}/{p['field']}"])
    with LmdbLog(lmdb_path, registry=reg) as log:
        log.append_batch([make(f"b{i % 2}", "noted", {"subject": f"S{i % 3}", "field": "f"})
                          for i in range(30)])
    with LmdbLog(lmdb_path) as log:  # the default registry: "noted" has no refers function
        assert log.verify().seq == 30
        assert [r.seq for r in log.scan_refs("S1/f")] == list(range(2, 31, 3))


def test_the_demo_store_verifies_in_a_fresh_process(tmp_path):
    import subprocess
    store = str(tmp_path / "demo")
    assert main(["--store", store, "demo", "--quiet"]) == 0
    run = subprocess.run([sys.executable, "-m", "braidlog", "--store", store, "verify"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ok: ")


def _verify_in_child(path) -> str:
    def run() -> str:
        try:
            with LmdbLog(path, check_head=False) as log:
                log.verify()
        except BraidlogError as e:
            return f"{type(e).__name__}: {e}"
        return "passed"
    return in_child(run, timeout=60)


def test_a_node_pointing_past_the_end_of_the_file_is_found_before_lmdb_reads_it(lmdb_path):
    """A flipped node offset in an index page near the end of the file: LMDB would read past
    the file's end and die of SIGBUS; the page check reads with pread first."""
    _store(lmdb_path, 500)
    data = lmdb_path / "data.mdb"
    with open(data, "rb") as f:
        hdr, m0, m1 = read_metas(f.fileno())
        meta = picked(m0, m1)
        near = {}
        for table in (b"ids", b"idh", b"braid", b"kind"):
            db = table_db(f.fileno(), hdr, meta, table)
            _, _, leaf, _ = _Reader(f.fileno(), hdr, meta.psize, meta.last_pgno).last_leaf_node(
                db.root, db.depth)
            if leaf * meta.psize + 0xFFF0 > os.path.getsize(data):
                near[table] = leaf
    assert near, "an index's last page lies near the file's end"
    table, leaf = next(iter(near.items()))
    _write(lmdb_path, leaf * meta.psize + hdr, struct.pack(_E + "H", 0xFFF0))  # its first node
    outcome = _verify_in_child(str(lmdb_path))
    name = {b"ids": "id", b"idh": "id-digest", b"braid": "braid", b"kind": "kind"}[table]
    assert f"the {name} index is damaged" in outcome and "every record read intact" in outcome
    with LmdbLog(lmdb_path) as log:  # nothing was changed: the same finding again
        with pytest.raises(IntegrityError, match=f"the {name} index is damaged"):
            log.repair_indexes()
    # the remedy the message gives: export, import into a new store, which verifies
    export = lmdb_path.parent / "export.jsonl"
    assert main(["--store", str(lmdb_path), "export", str(export)]) == 0
    assert main(["--store", str(lmdb_path.parent / "new"), "import", str(export)]) == 0
    assert main(["--store", str(lmdb_path.parent / "new"), "verify"]) == 0


def test_a_flipped_flag_of_the_free_page_tree_is_refused_at_open(lmdb_path):
    """LMDB does not check the free-page tree's flags: a DUPSORT bit there aborts the process
    (an assertion in mdb_cursor_init) at its first write."""
    _store(lmdb_path, 100)
    with open(lmdb_path / "data.mdb", "rb") as f:
        hdr, m0, m1 = read_metas(f.fileno())
    m = picked(m0, m1)
    assert m.free.flags == 0x08
    _write(lmdb_path, m.page * m.psize + hdr + 28, struct.pack(_E + "H", 0x9F))  # md_flags of mm_dbs[0]
    outcome = _verify_in_child(str(lmdb_path))
    assert outcome.startswith("StorageError") and "free-page tree has flags 0x9f" in outcome, outcome


def _meta(path):
    with open(path / "data.mdb", "rb") as f:
        hdr, m0, m1 = read_metas(f.fileno())
    return hdr, picked(m0, m1)


def _open_in_child(path) -> str:
    def run() -> str:
        try:
            with LmdbLog(path) as log:
                return f"opened at {log.head().seq}"
        except BraidlogError as e:
            return f"{type(e).__name__}: {e}"
    return in_child(run, timeout=60)


def test_a_main_tree_node_pointing_past_the_end_of_the_file_is_refused_at_open(lmdb_path):
    """Every open lists the tables of the main tree, whose one page each commit rewrites near
    the end of the file: a flipped node offset there is refused before LMDB reads it."""
    _store(lmdb_path, 300)
    hdr, meta = _meta(lmdb_path)
    assert meta.main.root * meta.psize + 0xFFF0 > os.path.getsize(lmdb_path / "data.mdb")
    _write(lmdb_path, meta.main.root * meta.psize + hdr, struct.pack(_E + "H", 0xFFF0))
    outcome = _open_in_child(str(lmdb_path))
    assert outcome.startswith("StorageError") and "the main tree" in outcome, outcome


def test_a_damaged_last_page_of_the_log_is_refused_before_the_head_is_read(lmdb_path):
    """Opening reads the head record: a node offset past the end of the file there is found
    with pread, and verify (which opens without reading the head) reports the damage."""
    _store(lmdb_path, 300)
    with LmdbLog(lmdb_path) as log:  # a second commit: its pages come at the end of the file
        log.append(make_delta(301, payload={"text": "the last one"}))
    hdr, meta = _meta(lmdb_path)
    with open(lmdb_path / "data.mdb", "rb") as f:
        db = table_db(f.fileno(), hdr, meta, b"log")
        buf, off, leaf, count = _Reader(f.fileno(), hdr, meta.psize, meta.last_pgno).last_leaf_node(
            db.root, db.depth)
    assert count > 1 and leaf * meta.psize + 0xFFF0 > os.path.getsize(lmdb_path / "data.mdb")
    _write(lmdb_path, leaf * meta.psize + hdr + 2 * (count - 1), struct.pack(_E + "H", 0xFFF0))
    outcome = _open_in_child(str(lmdb_path))
    assert outcome.startswith("IntegrityError") and "the head was not read" in outcome, outcome
    assert main(["--store", str(lmdb_path), "verify"]) == 1
