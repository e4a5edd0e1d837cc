"""The SideTables contract: the projections a store is used with, and the checkpoint notes issued
over its tree. Run against MemoryLog and LmdbLog."""

from __future__ import annotations

from braidlog.store import SideTables

ROLE = SideTables  # the ``log`` fixture (tests/store/conftest.py) checks each store implements it


def test_checkpoint_notes_are_kept_by_tree_size(log):
    log.put_note(5, b"b note\n")
    log.put_note(2, b"a note\n")
    log.put_note(5, b"b note\n")
    assert log.notes() == [(2, b"a note\n"), (5, b"b note\n")]
    log.put_note(5, b"c note\n")
    assert sorted(log.notes(last=True)) == [(5, b"b note\n"), (5, b"c note\n")]
    assert len(log.notes()) == 3


def test_the_projections_used_are_kept_once_each_first_use_first(log):
    assert log.projections_used() == []
    log.use_projections(["beads", "knots", "beads"])
    log.use_projections(["trust", "knots"])
    assert log.projections_used() == ["beads", "knots", "trust"]
