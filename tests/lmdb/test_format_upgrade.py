"""A store written by the previous release (format 3, tests/fixtures/format3) upgrades to
format 5 (format 4's committed forms, then format 5's indexed-to mark) once, keeps every
record, verifies, and still answers for the heads and checkpoints written down before.

The fixture was made with braidlog at d15692d (format 3) by: twelve ``message`` deltas in braids
``braid-a``/``braid-b`` with payload ``{"text": "hotel I"}``, ts 2026-01-02T03:04:05.123456Z + I
seconds (I = 6: minus 5 seconds, so the high-water time differs from ts), tags ``("t1",)`` for
I % 4 == 0, a vector ``[0.1 I, 1, -2.5]`` for I % 5 == 0, ``refs.deltas`` the previous id for odd
I, provenance tool ``grep`` for I = 7; a checkpoint signed at size 12; a compacting copy of the
store, gzipped. ``facts.json`` holds its head, the head at seq 5, its root and the note.
"""

from __future__ import annotations

import json
from pathlib import Path

import lmdb
import pytest

from braidlog import IntegrityError, LmdbLog, StorageError
from braidlog.cli import main
from braidlog.delta import committed_form
from braidlog.proofs import check_checkpoint, open_note, root
from tests.support.oldformat import release_facts, release_store

FACTS = release_facts("format3")


@pytest.fixture
def old_store(tmp_path) -> Path:
    return release_store("format3", tmp_path / "old")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_fixture_is_a_format_3_store(old_store):
    env = lmdb.open(str(old_store), readonly=True, max_dbs=16, lock=False)
    with env.begin() as txn:
        assert txn.get(b"format", db=env.open_db(b"meta", txn=txn, create=False)) == b"3"
        log = env.open_db(b"log", txn=txn, create=False)
        assert txn.stat(log)["entries"] == 12
        assert bytes(txn.get((12).to_bytes(8, "big"), db=log)[:32]).hex() == FACTS["head"][3:]
    env.close()


def test_read_only_it_is_refused_until_upgraded(old_store):
    with pytest.raises(StorageError, match="has format version 3, which this braidlog reads only "
                       "once it is upgraded to format 5") as e:
        LmdbLog(old_store, readonly=True)
    assert f"`braidlog --store {old_store} init` upgrades it" in e.value.hint


def test_it_upgrades_once_keeps_every_record_and_verifies(old_store, capsys):
    code, out, err = run(capsys, "--store", str(old_store), "init")
    assert code == 0, err
    with LmdbLog(old_store) as log:
        assert log.format_version == 5
        head = log.verify()
        assert head.seq == 12 and str(head) != FACTS["head"]  # re-chained
        records = list(log.scan())
        assert [r.delta.id for r in records] == FACTS["ids"]
        assert [r.delta.payload["text"] for r in records] == [f"hotel {i}" for i in range(12)]
        assert [r.delta.vector is not None for r in records] == [i % 5 == 0 for i in range(12)]
        assert records[7].delta.provenance.tool == "grep"
        assert records[3].delta.refs.deltas == (FACTS["ids"][2],)
        rows = list(log.scan_rows())
        assert len({r.salt for r in rows}) == 12
        for r, rec in zip(rows, records, strict=False):
            assert r.entry == committed_form(r.seq, rec.delta, r.salt, r.data)
        assert root(log).hex() != FACTS["root"]
        assert log.upgraded().seq == 12 and log.upgraded().hash.hex() == FACTS["head"][3:]
        assert log.upgraded().root.hex() == FACTS["root"]
        assert log.notes() == []  # the notes signed BLAKE3 roots: kept aside, not reissued
    with LmdbLog(old_store, readonly=True) as log:  # once is enough
        assert log.format_version == 5 and log.head() == head
    code, out, _ = run(capsys, "--store", str(old_store), "verify")
    assert code == 0 and out == f"ok: 12 deltas verified; head {head}\n"


@pytest.mark.parametrize("which", ["head", "mid_head"])
def test_verify_against_a_head_written_down_before_the_upgrade(old_store, capsys, which):
    run(capsys, "--store", str(old_store), "init")
    old = FACTS[which]
    code, out, err = run(capsys, "--store", str(old_store), "verify", "--against", old)
    assert code == 0, err
    seq = old.split(":")[0]
    assert out.startswith(f"ok: the first {seq} deltas are unchanged since head {old}, a head "
                          "before this store was upgraded to braidlog's format 4 (at seq 12, "
                          f"head {FACTS['head']} before it)")
    code, out, _ = run(capsys, "--store", str(old_store), "verify", "--against", old, "--json")
    assert json.loads(out)["before_upgrade"] is True
    wrong = old[:-1] + ("0" if old[-1] != "0" else "1")
    code, _, err = run(capsys, "--store", str(old_store), "verify", "--against", wrong)
    assert code == 1 and f"the first {seq} deltas differ from the head given" in err


def test_a_checkpoint_signed_before_the_upgrade_is_named_as_such(old_store, capsys):
    run(capsys, "--store", str(old_store), "init")
    with LmdbLog(old_store) as log:
        cp = open_note(FACTS["note"].encode(), FACTS["vkey"])
        assert cp.size == 12 and cp.root.hex() == FACTS["root"]
        with pytest.raises(IntegrityError, match="was issued before this store was upgraded to "
                           "braidlog's format 4 .*it signs the root 3e8ca327.* of the earlier "
                           "BLAKE3 tree, which the RFC 6962 SHA-256 tree .* replaced. Its records "
                           "are unchanged, but no proof can be checked against it now"):
            check_checkpoint(log, cp)


def test_an_upgraded_record_changed_later_no_longer_answers_for_the_old_head(old_store, capsys):
    run(capsys, "--store", str(old_store), "init")
    env = lmdb.open(str(old_store), max_dbs=16)
    with env.begin(write=True) as txn:  # a forger rewrites record 3 and every hash after it
        db = env.open_db(b"log", txn=txn)
        from braidlog.chain import link
        from braidlog.lmdb.format import completes, fill_nodes, pack_row, split_row
        prev = split_row(2, txn.get((2).to_bytes(8, "big"), db=db)).hash
        for seq in range(3, 13):
            r = split_row(seq, txn.get(seq.to_bytes(8, "big"), db=db))
            data = r.data.replace(b"hotel 3", b"motel 3")
            import braidlog
            entry = committed_form(seq, braidlog.decode(data), r.salt, data)
            prev = link(prev, seq, entry)
            txn.put(seq.to_bytes(8, "big"), pack_row(prev, r.hw, entry, bytes(32 * completes(seq)),
                                                     r.salt, data), db=db)
        fill_nodes(txn, {"log": db})  # and the tree's nodes, recomputed over the forged log
    env.close()
    code, _, err = run(capsys, "--store", str(old_store), "verify", "--against", FACTS["head"])
    assert code == 1 and "the first 12 deltas differ from the head given" in err
