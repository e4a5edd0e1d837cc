"""Creating a store is atomic: a SIGKILL at any moment leaves no store or a complete one, and
the leftover of an interrupted creation by an earlier braidlog is refused with the way out. The
crash test kills real processes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import lmdb
import pytest

from braidlog import LmdbLog, StorageError, ValidationError, delta
from braidlog.delta import ENTRY_MAX, Provenance, Refs
from braidlog.lmdb.format import FORMAT_VERSION, TABLES
from tests.support import ROOT as REPO_ROOT

ROOT = str(REPO_ROOT)
CHILD = """
import sys
from braidlog import LmdbLog
print("go", flush=True)
LmdbLog(sys.argv[1]).close()
print("done", flush=True)
"""


def _complete(path) -> bool:
    """Whether ``path`` holds a complete store (read with lmdb, not braidlog)."""
    if not os.path.exists(os.path.join(path, "data.mdb")):
        return False
    env = lmdb.open(str(path), readonly=True, max_dbs=16, lock=False)
    try:
        with env.begin() as txn:
            names = {bytes(k).decode() for k, _ in txn.cursor()}
            fmt = txn.get(b"format", db=env.open_db(b"meta", txn=txn, create=False))
    finally:
        env.close()
    assert names == set(TABLES) and fmt == str(FORMAT_VERSION).encode(), (names, fmt)
    return True


@pytest.mark.parametrize("round_", range(3))
def test_a_sigkill_at_any_point_of_creating_a_store_leaves_none_or_a_complete_one(tmp_path, round_):
    rnd = random.Random(round_)
    outcomes = {"none": 0, "complete": 0}
    for i in range(8):
        path = tmp_path / f"s{i}"
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout.readline() == "go\n"
        time.sleep(rnd.random() * 0.012)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        complete = _complete(path)
        outcomes["complete" if complete else "none"] += 1
        with LmdbLog(path) as log:  # either way the store opens (or is created) and works
            assert log.format_version == FORMAT_VERSION and log.head().seq == 0
            log.append(delta("b", "message", {"text": "after"}))
            assert log.verify().seq == 1
        assert _complete(path)
        assert not [p for p in tmp_path.iterdir() if ".creating." in p.name]  # swept
    assert sum(outcomes.values()) == 8


def test_a_store_without_its_data_file_is_not_opened_without_create(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(StorageError, match="no store at"):
        LmdbLog(tmp_path / "empty", create=False)
    with LmdbLog(tmp_path / "empty") as log:
        assert log.head().seq == 0


def test_the_leftover_of_an_interrupted_creation_says_how_to_recover(tmp_path):
    path = tmp_path / "left"
    env = lmdb.open(str(path), max_dbs=16)  # what a braidlog before format 4 left when killed
    with env.begin(write=True) as txn:      # between creating the tables and stamping them
        for name in TABLES:
            env.open_db(name.encode(), txn=txn)
    env.close()
    for readonly in (False, True):
        with pytest.raises(StorageError, match="has no braidlog format version and holds no "
                           "records: it is what is left of a store whose creation was "
                           "interrupted") as e:
            LmdbLog(path, readonly=readonly)
        assert e.value.hint == (f"remove the directory (`rm -r {path}`) and open or `braidlog "
                                "init` it again; nothing is lost, it holds no records")


@pytest.mark.parametrize("field, make", [
    ("provenance.source", lambda: delta("b", "message", {"text": "x"},
                                        provenance=Provenance("tool", source="s" * ENTRY_MAX))),
    ("tags", lambda: delta("b", "message", {"text": "x"}, tags=tuple(f"t{i}" for i in range(12_000)))),
    ("refs.deltas", lambda: delta("b", "message", {"text": "x"},
                                  refs=Refs(deltas=tuple("x" * 100 for _ in range(700))))),
])
def test_a_delta_whose_committed_form_exceeds_a_log_entry_is_refused_naming_the_field(
        tmp_path, field, make):
    with LmdbLog(tmp_path / "s") as log:
        log.append(delta("b", "message", {"text": "before"}))
        with pytest.raises(ValidationError) as e:
            log.append_batch([delta("b", "message", {"text": "ok"}), make()])
        assert e.value.field == field and e.value.index == 1
        assert "over the 65,535 a log entry holds (C2SP tlog-tiles)" in e.value.rule
        assert log.head().seq == 1
        big = delta("b", "message", {"text": "p" * 200_000})  # the payload is committed to by a hash
        assert log.append(big) == 2 and len(log.entry(2)) < 300
