"""``history`` and ``explain`` of an erased entity say it was erased, and by which seq."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import braidlog
from braidlog.cli import main

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_history_of_an_erased_entity_says_it_was_erased_and_by_which_seq(tmp_path, capsys):
    store = str(tmp_path / "s")
    kind = "test_profile_note"
    with braidlog.open(store, projections=[]) as b:
        braidlog.declare_kind(b, kind, {"type": "object", "properties": {"subject": {"type": "string"},
                                                                          "text": {"type": "string"}}},
                              owner="tests", refers=["subject"])
        for n in range(3):
            b.append(braidlog.delta("b1", kind, {"subject": "user:alice", "text": f"note {n}"}, ts=T0))
        b.append(braidlog.delta("b1", kind, {"subject": "user:bob", "text": "other"}, ts=T0))
        report = b.erase(refers="user:alice", reason="she asked")
        erased = b.log.read(report.seq).delta
    # the erasure names the subject by its SHA-256 only: the id itself is not kept
    assert erased.tags == ("erased-subject:" + hashlib.sha256(b"user:alice").hexdigest(),)
    assert "user:alice" not in str(erased)
    for command in ("history", "explain"):
        assert main(["--store", store, command, "user:alice"]) == 1
        err = capsys.readouterr().err
        assert f"'user:alice' was erased: its 3 delta(s) (seqs 2, 3, 4) were erased by seq {report.seq} " \
               "(reason: she asked)" in err
    assert main(["--store", store, "history", "user:carol"]) == 1
    assert "no delta refers to 'user:carol' up to seq 6; check the id" in capsys.readouterr().err
    assert main(["--store", store, "history", "user:bob", "--no-state"]) == 0
