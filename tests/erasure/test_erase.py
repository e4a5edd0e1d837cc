"""Erasure: payloads, vectors and derived text leave every file of the store; envelopes,
commitments, the chain, the tree and every proof issued before stay; reads show it; bad input
changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import msgspec
import pytest

import braidlog
from braidlog import ValidationError, Vector
from braidlog.cli import main
from braidlog.erasure import ERASED, ERASURES_BRAID
from braidlog.errors import StorageError
from tests.support import T0, make_delta
from tests.support.forgetting import files_holding

SECRET = "alice.liddell@example.org lives at 7 Wonder Lane"
KEPT = "bob keeps this sentence"
VECTOR = [0.123456789 * (i + 1) for i in range(16)]


def _subject_deltas():
    """Alice's deltas (one with a vector, one referring to her entity), and Bob's."""
    alice = [
        make_delta(1, braid="alice", payload={"text": f"{SECRET} (1)"}),
        make_delta(2, braid="alice", payload={"text": f"{SECRET} (2)"},
                   vector=Vector.of(VECTOR, space="people")),
        make_delta(3, braid="chat", kind="observation",
                   payload={"text": f"{SECRET} (3)", "data": {"email": "alice.liddell@example.org"}},
                   refs=braidlog.Refs(episodes=("person-alice",))),
    ]
    bob = [make_delta(10 + i, braid="bob", payload={"text": f"{KEPT} {i}"}) for i in range(3)]
    return alice, bob


def _vector_bytes() -> bytes:
    return Vector.of(VECTOR, space="people").data


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store"


def _fill(path, *, checkpoint_every=2):
    from braidlog.projections.fields import ReviseField

    alice, bob = _subject_deltas()
    with braidlog.open(path, checkpoint_every=checkpoint_every) as b:
        b.append_batch(alice[:2])
        b.append_batch(bob)
        b.append(alice[2])
        b.execute("fields", ReviseField(topic_id="alice", field="email",
                                        value="alice.liddell@example.org"),
                  braid_id="alice", now=T0 + timedelta(hours=1))
        b.recall(VECTOR, k=3, space="people")  # builds the indexes, saved on close
        b.recall("wonder lane", k=3, mode="keyword")
        b.recall("wonder lane", k=3)
        b.checkpoint()
    return alice, bob


def test_erase_leaves_no_byte_of_the_payloads_in_any_file(store):
    alice, bob = _fill(store)
    assert files_holding(store, "Wonder Lane", _vector_bytes())  # the test can fail
    with braidlog.open(store) as b:
        b.recall("wonder lane", k=3, mode="keyword")  # open in memory while it erases
        report = b.erase(braid="alice", refers="person-alice", reason="GDPR art. 17, ticket 1")
        assert len(report.seqs) == 4 and report.seq == b.head().seq
    assert files_holding(store, "Wonder Lane", "alice.liddell@example.org", _vector_bytes()) == {}
    assert files_holding(store, KEPT)  # what was not erased stays
    with braidlog.open(store) as b:  # and recall rebuilt without it finds nothing of it
        for hits in (b.recall("wonder lane", k=5, mode="keyword"), b.recall("wonder lane", k=5),
                     b.recall(VECTOR, k=5, space="people")):
            assert all(h.seq not in report.seqs for h in hits)
        b.checkpoint()
    assert files_holding(store, "Wonder Lane", "alice.liddell@example.org", _vector_bytes()) == {}


def test_reads_show_an_erased_delta_as_erased_at_every_seq(store):
    alice, bob = _fill(store)
    with braidlog.open(store) as b:
        before = b.head()
        entries = {s: b.log.entry(s) for s in range(1, before.seq + 1)}
        report = b.erase(braid="alice", reason="asked to be forgotten")
        assert b.log.verify().seq == report.seq
        for seq in report.seqs:
            d = b.log.read(seq).delta
            assert d.erased is not None and d.erased.by == report.seq
            assert d.payload == {} and d.vector is None
            assert d.erased.commitment == dict(report.erased)[seq]
            assert b.log.entry(seq) == entries[seq]  # the committed form did not change
            assert b.at(1).log.read(1).delta.erased is not None  # retroactive
        assert [b.log.hash_at(s) for s in range(1, before.seq + 1)] == \
            [b.log.hash_at(s) for s in range(1, before.seq + 1)]
        assert b.log.hash_at(before.seq) == before.hash  # the chain is as it was
        last = b.log.read(report.seq).delta
        assert last.kind == ERASED and last.braid_id == ERASURES_BRAID
        assert last.payload["seqs"] == list(report.seqs)
        assert "Wonder" not in json.dumps(last.payload)
        # every projection folds it without failing, now and as of any seq
        for name in b.projections:
            b.state(name)
            for seq in range(1, report.seq + 1):
                b.state_at(name, seq)
        topic = b.state("fields").topics.get("alice")
        assert topic is None or not topic.fields  # its only revision is erased: passed over


def test_proofs_issued_before_still_verify(store, tmp_path):
    from braidlog import proofs
    from braidlog.proofs import verify as v

    _fill(store)
    key = proofs.generate("example.com/erase-test")
    with braidlog.open(store) as b:
        note = proofs.issue(b.log, key)
        incl = proofs.inclusion_proof(b.log, 1).to_json()
        b.erase(seqs=[1, 2], reason="test")
        assert proofs.check_notes(b.log)  # the log extends the checkpoint issued before
        note2 = proofs.issue(b.log, key)
        cons = proofs.consistency_proof(b.log, v.open_checkpoint(note, key.verifier()).size).to_json()
    cp = v.open_checkpoint(note, key.verifier())
    cp2 = v.open_checkpoint(note2, key.verifier())
    v.check_proof(incl, [cp])
    v.check_proof(cons, [cp, cp2])


def test_bad_requests_change_nothing(store):
    _fill(store)
    with braidlog.open(store) as b:
        head = b.head()
        bad = [
            (dict(seqs=[head.seq + 5], reason="r"), "seq", "not in the log"),
            (dict(seqs=[0], reason="r"), "seq", "not in the log"),
            (dict(seqs=["1"], reason="r"), "seq", "whole numbers"),
            (dict(braid="nobody", reason="r"), "braid", "no braid 'nobody'"),
            (dict(refers="no-such-entity", reason="r"), "refers", "no delta refers"),
            (dict(reason="r"), "selection", "name what to erase"),
            (dict(seqs=[1], reason=""), "reason", "non-empty"),
            (dict(seqs=[1], reason="x" * 5000), "reason", "at most"),
        ]
        for kw, field, rule in bad:
            with pytest.raises(ValidationError, match=rule) as e:
                b.erase(**kw)
            assert e.value.field == field
        assert b.head() == head
        report = b.erase(seqs=[1], reason="once")
        with pytest.raises(ValidationError, match="already erased"):
            b.erase(seqs=[1], reason="twice")
        with pytest.raises(ValidationError, match=f"{ERASED!r} delta"):
            b.erase(seqs=[report.seq], reason="the erasure itself")
        b.erase(braid="alice", reason="the rest of alice's")
        after = b.head()
        with pytest.raises(ValidationError, match="erased already"):
            b.erase(braid="alice", reason="again")
        assert b.head() == after


def test_an_erased_delta_cannot_be_appended_by_hand(store):
    from braidlog.erasure import erasure_delta

    with braidlog.open(store) as b:
        b.append(make_delta(1))
        with pytest.raises(ValidationError, match="erase"):
            b.append(erasure_delta([1], "forged"))
        assert b.head().seq == 1 and b.log.read(1).delta.erased is None


def test_erase_is_refused_while_another_process_has_the_store_open(store):
    _fill(store)
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys,braidlog;l=braidlog.LmdbLog(sys.argv[1]);"
         "print('open',flush=True);sys.stdin.read()", str(store)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "open"
        with braidlog.open(store) as b:
            head = b.head()
            with pytest.raises(StorageError, match="another process has the store") as e:
                b.erase(braid="alice", reason="r")
            assert "close it there" in str(e.value)
            assert b.head() == head and b.log.read(1).delta.erased is None
    finally:
        child.communicate("")
    assert files_holding(store, "Wonder Lane")
    with braidlog.open(store) as b:  # once it closed, the erasure goes through
        b.erase(braid="alice", reason="r")


def test_erase_is_refused_with_a_second_handle_in_this_process(store):
    _fill(store)
    with braidlog.open(store) as b, braidlog.LmdbLog(store):
        with pytest.raises(StorageError, match="open 2 times in this process"):
            b.erase(braid="alice", reason="r")


def test_memory_store_erases_as_lmdb_does():
    alice, bob = _subject_deltas()
    b = braidlog.open(None, projections=[])
    b.append_batch(alice + bob)
    report = b.erase(refers="person-alice", reason="r")
    (seq,) = report.seqs
    d = b.log.read(seq).delta
    assert d.erased is not None and d.payload == {} and b.log.verify().seq == report.seq
    assert b.log.scan_refs("person-alice").__next__().seq == seq  # the envelope's refs stay
    assert f"{SECRET} (3)" not in msgspec.json.encode([r.delta for r in b.log.scan()]).decode()


# -- receipts -----------------------------------------------------------------------------------

@pytest.fixture
def keyfile(tmp_path):
    path = tmp_path / "erase.key"
    assert main(["keygen", "example.com/erase-test", "--out", str(path)]) == 0
    return path


def _vkey(capsys, keyfile):
    from braidlog.proofs import read_key

    capsys.readouterr()
    return str(read_key(keyfile).verifier())


def test_erase_from_the_command_line_with_a_receipt(store, keyfile, tmp_path, capsys):
    _fill(store)
    receipt = tmp_path / "receipt.note"
    vkey = _vkey(capsys, keyfile)
    assert main(["--store", str(store), "erase", "--refers", "person-alice", "--braid", "alice",
                 "--reason", "GDPR art. 17, ticket 7", "--key", str(keyfile),
                 "--receipt", str(receipt)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("erased 4 delta(s) of braid alice and refers person-alice by seq ")
    assert main(["proof", "verify", "--receipt", str(receipt), "--key", vkey]) == 0
    assert capsys.readouterr().out.startswith("ok: 4 record(s) erased by seq ")
    assert main(["--store", str(store), "proof", "verify", "--receipt", str(receipt), "--key", vkey,
                 "--against-store"]) == 0
    assert "the store holds both" in capsys.readouterr().out
    assert files_holding(store, "Wonder Lane") == {}
    assert main(["--store", str(store), "verify"]) == 0  # the receipt is kept as a checkpoint


def test_an_edited_receipt_fails(store, keyfile, tmp_path, capsys):
    _fill(store)
    receipt = tmp_path / "receipt.note"
    vkey = _vkey(capsys, keyfile)
    assert main(["--store", str(store), "erase", "--braid", "alice", "--reason", "r",
                 "--key", str(keyfile), "--receipt", str(receipt)]) == 0
    text = receipt.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("erased "))
    for edited in (text.replace(line, line[:-1] + ("0" if line[-1] != "0" else "1")),
                   text.replace(line + "\n", ""), text.replace("before ", "before  ")):
        receipt.write_text(edited)
        capsys.readouterr()
        assert main(["proof", "verify", "--receipt", str(receipt), "--key", vkey]) == 1
        assert "receipt refused" in capsys.readouterr().err


def test_a_receipt_for_another_store_fails(store, keyfile, tmp_path, capsys):
    _fill(store)
    other = tmp_path / "other"
    _fill(other)
    receipt = tmp_path / "receipt.note"
    vkey = _vkey(capsys, keyfile)
    assert main(["--store", str(store), "erase", "--braid", "alice", "--reason", "r",
                 "--key", str(keyfile), "--receipt", str(receipt)]) == 0
    capsys.readouterr()
    assert main(["--store", str(other), "proof", "verify", "--receipt", str(receipt),
                 "--key", vkey, "--against-store"]) == 1
    assert "another store" in capsys.readouterr().err


def test_the_command_line_refuses_bad_requests(store, keyfile, tmp_path, capsys):
    _fill(store)
    for args, message in [
        (["erase", "--seq", "x", "--reason", "r"], "--seq: must be whole numbers"),
        (["erase", "--seq", "1", "--reason", "r", "--key", str(keyfile)], "go together"),
        (["erase", "--braid", "nobody", "--reason", "r"], "no braid 'nobody'"),
    ]:
        assert main(["--store", str(store), *args]) == 1
        assert message in capsys.readouterr().err
    with braidlog.open(store) as b:
        assert all(r.delta.erased is None for r in b.log.scan())


# -- everywhere a delta travels -------------------------------------------------------------------

def test_an_export_after_erasure_imports_into_a_store_that_verifies(store, tmp_path):
    from braidlog import transfer

    _fill(store)
    out = tmp_path / "after.jsonl"
    with braidlog.open(store) as b:
        report = b.erase(braid="alice", refers="person-alice", reason="r")
        head = b.head()
        transfer.export(b.log, out)
    text = out.read_text()
    assert "Wonder Lane" not in text and '"erased":{"by":' in text
    target = tmp_path / "target"
    with braidlog.open(target) as t:
        transfer.import_(t, out)
        assert t.head() == head and t.log.verify() == head
        for seq in report.seqs:
            assert t.log.read(seq).delta.erased.by == report.seq
        for name in t.projections:
            t.state(name)
    assert files_holding(target, "Wonder Lane", _vector_bytes()) == {}
    assert files_holding(target, KEPT)


def test_an_erasure_in_a_later_range_export_is_applied_on_import(store, tmp_path):
    from braidlog import transfer

    _fill(store)
    first, rest = tmp_path / "first.jsonl", tmp_path / "rest.jsonl"
    with braidlog.open(store) as b:
        cut = b.head().seq + 1
        transfer.export(b.log, first)  # made before the erasure: a file outside the store
        b.append(make_delta(50, braid="bob"))
        report = b.erase(braid="alice", refers="person-alice", reason="r")
        transfer.export(b.log, rest, start=cut)
        head = b.head()
    target = tmp_path / "target"
    with braidlog.open(target) as t:
        transfer.import_(t, first)
        assert files_holding(target, "Wonder Lane")
        transfer.import_(t, rest)
        assert t.head() == head and t.log.verify() == head
        assert all(t.log.read(s).delta.erased is not None for s in report.seqs)
    assert files_holding(target, "Wonder Lane", _vector_bytes()) == {}


def test_an_import_naming_records_it_does_not_show_erased_is_refused(store, tmp_path):
    from braidlog import transfer

    _fill(store)
    out = tmp_path / "after.jsonl"
    with braidlog.open(store) as b:
        report = b.erase(seqs=[1], reason="r")
        transfer.export(b.log, out)
    lines = out.read_text().splitlines()
    # the erased delta now also names seq 3, which the export shows as it was
    edited = []
    for line in lines:
        obj = json.loads(line)
        if obj.get("seq") == report.seq:
            obj["delta"]["payload"]["seqs"] = [1, 3]
        edited.append(json.dumps(obj, separators=(",", ":")))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(edited) + "\n")
    target = tmp_path / "target"
    with braidlog.open(target) as t:
        with pytest.raises(braidlog.BraidlogError, match="differs|does not show erased"):
            transfer.import_(t, bad)
        assert t.head().seq == 0


def test_an_erased_record_cannot_be_appended_as_new(store, tmp_path):
    from braidlog import transfer

    _fill(store)
    out = tmp_path / "after.jsonl"
    with braidlog.open(store) as b:
        b.erase(braid="alice", refers="person-alice", reason="r")
        transfer.export(b.log, out)
    with braidlog.open(tmp_path / "target") as t:
        with pytest.raises(ValidationError, match="erased"):
            transfer.import_(t, out, as_new=True)
        assert t.head().seq == 0


def test_backup_and_restore_keep_the_erasure(store, tmp_path):
    from braidlog import transfer

    _fill(store)
    with braidlog.open(store) as b:
        report = b.erase(braid="alice", refers="person-alice", reason="r")
        transfer.backup(b.log, tmp_path / "bk")
    transfer.restore(tmp_path / "bk", tmp_path / "restored")
    assert files_holding(tmp_path / "bk", "Wonder Lane") == {}
    with braidlog.open(tmp_path / "restored") as r:
        assert r.log.read(report.seqs[0]).delta.erased.by == report.seq
        assert r.log.verify().seq == report.seq
    assert files_holding(tmp_path / "restored", "Wonder Lane") == {}


def test_the_demo_erases_one_subject_and_every_projection_folds_it(tmp_path, capsys):
    """The walkthrough a new user follows: `braidlog demo`, then the erase it suggests."""
    store = tmp_path / "demo.lmdb"
    assert main(["--store", str(store), "demo"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "braidlog erase --refers project-atlas/owner" in shown
    assert files_holding(store, "Priya")
    assert main(["--store", str(store), "erase", "--refers", "project-atlas/owner",
                 "--reason", "the owners asked"]) == 0
    assert capsys.readouterr().out.startswith("erased 4 delta(s) of refers project-atlas/owner")
    assert files_holding(store, "Priya") == {}
    with braidlog.open(store) as b:
        head = b.head().seq
        for name in b.projections:
            b.state(name)
            for seq in range(1, head + 1):
                b.state_at(name, seq)
        atlas = b.state("fields").topics["project-atlas"]
        assert "owner" not in atlas.fields and "budget_eur" in atlas.fields
    assert main(["--store", str(store), "verify"]) == 0
    assert main(["--store", str(store), "state", "--projection", "fields", "--at", "40"]) == 0
    assert "Priya" not in capsys.readouterr().out


def test_mcp_shows_an_erased_delta_as_erased(store):
    from braidlog.mcp import tools

    _fill(store)
    with braidlog.open(store) as b:
        report = b.erase(braid="alice", reason="r")
    with braidlog.LmdbLog(store, readonly=True) as log:
        out = tools.record_out(log.read(report.seqs[0]))
    data = msgspec.json.decode(msgspec.json.encode(out))
    assert data["delta"]["erased"]["by"] == report.seq and data["delta"]["payload"] == {}


def test_verify_and_repair_know_an_erased_record_keeps_its_envelope_refs(store):
    """A fields revision with envelope refs, erased: the refers-to index keeps the envelope's
    entry and drops the payload's subjects; verify agrees, and a repair rebuilds the same."""
    from braidlog.projections.fields import ReviseField

    with braidlog.open(store) as b:
        (rec,) = b.execute("fields", ReviseField(topic_id="carol", field="phone", value="555-0100"),
                           braid_id="carol", now=T0)
        b.append(make_delta(2, braid="carol", refs=braidlog.Refs(episodes=("ep-carol",))))
        before = b.head()
        b.erase(refers="carol", reason="r")
        assert [r.seq for r in b.log.scan_refs("ep-carol")] == [2]
        assert list(b.log.scan_refs("carol")) == [] and list(b.log.scan_refs("carol/phone")) == []
        assert b.log.verify().seq == before.seq + 1
        counts = b.log.repair_indexes()
        assert counts["refs"] == 1 and b.log.verify().seq == before.seq + 1
    assert files_holding(store, "555-0100") == {}


def test_erase_is_refused_while_a_process_has_the_store_open_through_lmdb_itself(store):
    _fill(store)
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys,lmdb;e=lmdb.open(sys.argv[1],max_dbs=20,readonly=True);"
         "print('open',flush=True);sys.stdin.read()", str(store)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "open"
        with braidlog.open(store) as b:
            with pytest.raises(StorageError, match=f"process {child.pid} has the store"):
                b.erase(braid="alice", reason="r")
            assert b.log.read(1).delta.erased is None
    finally:
        child.communicate("")
