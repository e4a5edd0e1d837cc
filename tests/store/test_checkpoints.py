"""The Checkpoints contract: projection state snapshots by (name, version, seq). Run against
MemoryLog and LmdbLog."""

from __future__ import annotations

from braidlog.store import Checkpoints

ROLE = Checkpoints  # the ``log`` fixture (tests/store/conftest.py) checks each store implements it


def test_checkpoints_are_kept_by_name_version_and_seq(log):
    log.put_checkpoint("p", 1, 10, b"a")
    log.put_checkpoint("p", 1, 5, b"b")
    log.put_checkpoint("p", 2, 7, b"c")
    log.put_checkpoint("q", 1, 3, b"d")
    assert log.checkpoint_seqs("p", 1) == [5, 10]
    assert log.get_checkpoint("p", 1, 10) == b"a"
    assert log.get_checkpoint("p", 1, 11) is None
    assert log.checkpoint_keys() == [("p", 1, 5), ("p", 1, 10), ("p", 2, 7), ("q", 1, 3)]
