"""A store written by this round's starting braidlog (format 4, tests/fixtures/format4, made by
its make.py at the commit facts.json names) opens, reads and verifies as written: the fixture
the next format's upgrade starts from, as tests/lmdb/test_format_upgrade.py's format-3 store is
for format 4."""

from __future__ import annotations

from pathlib import Path

import pytest

from braidlog import LmdbLog
from braidlog.proofs import check_checkpoint, open_note
from tests.support.oldformat import release_facts, release_store

FACTS = release_facts("format4")


@pytest.fixture
def store(tmp_path) -> Path:
    return release_store("format4", tmp_path / "f4")


def test_the_format_4_store_reads_and_verifies_as_written(store):
    with LmdbLog(store, readonly=True) as log:
        assert log.format_version == 4
        head = log.verify()
        assert str(head) == FACTS["head"] and head.seq == 13
        assert log.hash_at(5).hex() == FACTS["mid_head"].split(":")[1]
        records = list(log.scan())
        assert [r.delta.id for r in records[:12]] == FACTS["ids"]
        assert records[3].delta.erased is not None and records[3].delta.payload == {}
        assert [r.delta.payload["text"] for r in records[:12] if r.seq != 4] == [
            f"hotel {i}" for i in range(12) if i != 3]
        assert records[7].delta.provenance.tool == "grep"
        assert records[12].delta.kind == "erased"
        check_checkpoint(log, open_note(FACTS["note"].encode(), FACTS["vkey"]))


def test_the_format_4_store_takes_appends_and_retries(store):
    with LmdbLog(store) as log:
        first = log.read(1).delta
        assert log.append(first) == 1  # an idempotent retry of a record written by format 4
        assert log.verify().seq == 13


def _reads(log) -> dict:
    """Everything a reader of the store can ask, through the log and through every index."""
    records = list(log.scan())
    out: dict = {"records": [(r.seq, r.hash, r.delta) for r in records], "head": log.head(),
                 "braids": log.braids(), "notes": log.notes(), "before": log.upgraded(),
                 "rows": list(log.scan_rows())}
    for index, scan in (("braid", log.scan_braid), ("kind", log.scan_kind), ("refs", log.scan_refs)):
        out[f"counts {index}"] = log.counts(index)
        for key in log.counts(index):
            out[f"{index} {key}"] = [r.seq for r in scan(key)]
            out[f"{index} {key} rev"] = [r.seq for r in scan(key, reverse=True, limit=2)]
    for r in records:
        out[f"id {r.delta.id}"] = (log.seq_of(r.delta.id), log.get(r.delta.id).seq,
                                   log.braid_head(r.delta.braid_id))
    return out


def test_the_format_4_store_upgrades_to_format_5_and_reads_back_identically(store):
    from tests.support import make_delta

    with LmdbLog(store, readonly=True) as log:  # read as it is: every record indexed
        assert log.format_version == 4
        before = _reads(log)
    with LmdbLog(store) as log:  # the upgrade: the indexed-to mark at its head, nothing else
        assert log.format_version == 5
        assert _reads(log) == before
        assert str(log.verify()) == FACTS["head"]
        seqs = [log.append(make_delta(100 + i, braid="braid-a")) for i in range(3)]
        assert seqs == [14, 15, 16]  # in the tail now: read from the log's rows
        assert log.braid_head("braid-a").seq == 16
        assert [r.seq for r in log.scan_braid("braid-a")][-3:] == seqs
        assert log.verify().seq == 16
    with LmdbLog(store, readonly=True) as log:
        assert log.format_version == 5
        after = _reads(log)
    assert after["records"][:13] == before["records"] and after["rows"][:13] == before["rows"]
    assert (after["notes"], after["before"]) == (before["notes"], before["before"])
