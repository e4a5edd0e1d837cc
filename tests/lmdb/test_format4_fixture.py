"""A store written by this round's starting braidlog (format 4, tests/fixtures/format4, made by
its make.py at the commit facts.json names) opens, reads and verifies as written: the fixture
the next format's upgrade starts from, as tests/lmdb/test_format_upgrade.py's format-3 store is
for format 4."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from braidlog import LmdbLog
from braidlog.proofs import check_checkpoint, open_note

FIXTURE = Path(__file__).parent.parent / "fixtures" / "format4"
FACTS = json.loads((FIXTURE / "facts.json").read_text())


@pytest.fixture
def store(tmp_path) -> Path:
    path = tmp_path / "f4"
    path.mkdir()
    (path / "data.mdb").write_bytes(gzip.decompress((FIXTURE / "data.mdb.gz").read_bytes()))
    return path


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
