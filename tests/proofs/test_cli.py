"""The verifiable-log commands, through ``main([...])`` and a real store."""

from __future__ import annotations

import json

import pytest

from braidlog import LmdbLog
from braidlog.cli import main
from braidlog.proofs import consistency_proof, inclusion_proof
from tests.support import make_delta
from tests.support.rfc9162 import Reference


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s.lmdb"
    with LmdbLog(path) as log:
        log.append_batch([make_delta(i) for i in range(12)])
    return str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_prove_inclusion_json(store, capsys):
    code, out, _ = run(capsys, "--store", store, "prove", "inclusion", "5", "--json")
    assert code == 0
    got = json.loads(out)
    assert list(got) == ["leaf_hash", "path", "root", "seq", "tree_size"]
    with LmdbLog(store, readonly=True) as log:
        ref = Reference.of_inputs([log.entry(s) for s in range(1, 13)])
        assert got == inclusion_proof(log, 5).to_json()
    assert got["seq"] == 5 and got["tree_size"] == 12
    assert got["root"] == ref.root(12).hex() and got["leaf_hash"] == ref.leaves[4].hex()
    assert got["path"] == [h.hex() for h in ref.inclusion(4, 12)]
    code, out, _ = run(capsys, "--store", store, "prove", "inclusion", "5", "--size", "8", "--json")
    assert json.loads(out)["path"] == [h.hex() for h in ref.inclusion(4, 8)]
    code, out, _ = run(capsys, "--store", store, "prove", "inclusion", "5")
    assert "record 5 is leaf 4 of the tree of size 12" in out and ref.root(12).hex() in out


def test_prove_consistency_json(store, capsys):
    code, out, _ = run(capsys, "--store", store, "prove", "consistency", "8", "--json")
    got = json.loads(out)
    with LmdbLog(store, readonly=True) as log:
        ref = Reference.of_inputs([log.entry(s) for s in range(1, 13)])
        assert got == consistency_proof(log, 8, 12).to_json()
    assert got["old_root"] == ref.root(8).hex() and got["new_root"] == ref.root(12).hex()
    assert got["path"] == [h.hex() for h in ref.consistency(8, 12)]
    code, out, _ = run(capsys, "--store", store, "prove", "consistency", "3", "7", "--json")
    assert json.loads(out)["path"] == [h.hex() for h in ref.consistency(3, 7)]


@pytest.mark.parametrize("argv, message", [
    (["prove", "inclusion", "13"], "seq: must be a seq from 1 to the tree size (12), got 13"),
    (["prove", "inclusion", "3", "--size", "99"], "size: must be a tree size from 0 to the head (12)"),
    (["prove", "consistency", "0"], "old_size: must be from 1 to the new size (12), got 0"),
    (["prove", "consistency", "9", "4"], "old_size: must be from 1 to the new size (4), got 9"),
])
def test_bad_proof_arguments_are_one_line_errors(store, capsys, argv, message):
    code, out, err = run(capsys, "--store", store, *argv)
    assert code == 1 and out == ""
    assert message in err and "Traceback" not in err


def test_keygen_checkpoint_prove_and_verify_offline(store, tmp_path, capsys, monkeypatch):
    import os
    import stat

    key = tmp_path / "log.key"
    code, out, _ = run(capsys, "keygen", "example.com/agent-log", "--out", str(key))
    vkey = out.strip()
    assert code == 0 and vkey.startswith("example.com/agent-log+")
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    code, _, err = run(capsys, "keygen", "example.com/agent-log", "--out", str(key))
    assert code == 1 and "exists; a key file is never overwritten" in err

    code, note8, _ = run(capsys, "--store", store, "checkpoint", "--key", str(key))
    assert code == 0 and note8.startswith("example.com/agent-log\n12\n")
    (tmp_path / "cp12").write_text(note8)
    with LmdbLog(store) as log:
        log.append_batch([make_delta(i) for i in range(12, 20)])
    _, note20, _ = run(capsys, "--store", store, "checkpoint", "--key", str(key))
    (tmp_path / "cp20").write_text(note20)
    (tmp_path / "vkey").write_text(vkey + "\n")

    _, proof, _ = run(capsys, "--store", store, "prove", "inclusion", "5", "--json")
    (tmp_path / "inc.json").write_text(proof)
    code, _, _ = run(capsys, "--store", store, "export", str(tmp_path / "log.jsonl"))
    assert code == 0
    code, out, err = run(capsys, "proof", "verify", str(tmp_path / "inc.json"), "--checkpoint",
                         str(tmp_path / "cp20"), "--key", vkey, "--export", str(tmp_path / "log.jsonl"))
    assert (code, err) == (0, "") and out == ("ok: record 5 is in the log example.com/agent-log at "
                                              "size 20 and its bytes are the export's\n")
    code, out, err = run(capsys, "proof", "verify", str(tmp_path / "inc.json"), "--checkpoint",
                         str(tmp_path / "cp12"), "--key", str(tmp_path / "vkey"))
    assert code == 1 and "the proof is for tree size 20; the checkpoints given are for [12]" in err

    _, proof, _ = run(capsys, "--store", store, "prove", "consistency", "12", "--json")
    (tmp_path / "cons.json").write_text(proof)
    code, out, _ = run(capsys, "proof", "verify", str(tmp_path / "cons.json"), "--checkpoint",
                       str(tmp_path / "cp12"), "--checkpoint", str(tmp_path / "cp20"), "--key", vkey,
                       "--json")
    assert code == 0 and json.loads(out)["ok"] is True and json.loads(out)["kind"] == "consistency"
    bad = json.loads(proof)
    bad["path"][0] = "0" * 64
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    code, _, err = run(capsys, "proof", "verify", str(tmp_path / "bad.json"), "--checkpoint",
                       str(tmp_path / "cp12"), "--checkpoint", str(tmp_path / "cp20"), "--key", vkey)
    assert code == 1 and "consistency proof leads to" in err

    (tmp_path / "cp20x").write_text(note20.replace("\n20\n", "\n21\n"))
    code, _, err = run(capsys, "proof", "verify", str(tmp_path / "cons.json"), "--checkpoint",
                       str(tmp_path / "cp20x"), "--key", vkey)
    assert code == 1 and "does not verify: the note was altered after it was signed" in err

    code, out, _ = run(capsys, "--store", store, "verify")
    assert code == 0 and "ok: the log extends all 2 checkpoint(s) it signed (last at size 20)" in out
    code, out, _ = run(capsys, "--store", store, "verify", "--json")
    assert json.loads(out)["checkpoints"] == 2

    os.chmod(key, 0o644)
    code, _, err = run(capsys, "--store", store, "checkpoint", "--key", str(key))
    assert code == 1 and "has mode 0644: others can reach it (only its owner may); run `chmod 600" in err


def test_prove_state_of_a_demo_entity(tmp_path, capsys):
    path = str(tmp_path / "demo.lmdb")
    assert run(capsys, "--store", path, "demo", "--quiet")[0] == 0
    with LmdbLog(path, readonly=True) as log:
        rec = next(r for r in log.scan() if r.delta.refs is not None and r.delta.refs.beads)
        bead, head = rec.delta.refs.beads[0].bead_id, log.head().seq
    vkey = run(capsys, "keygen", "demo.example/log", "--out", str(tmp_path / "k"))[1].strip()
    _, note, _ = run(capsys, "--store", path, "checkpoint", "--key", str(tmp_path / "k"))
    (tmp_path / "cp").write_text(note)
    code, out, err = run(capsys, "--store", path, "prove", "state", "beads", bead, "--at", str(rec.seq),
                         "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["at"] == rec.seq and got["tree_size"] == head and got["records"]
    assert got["records"][-1]["seq"] <= rec.seq and got["consistency"]["old_size"] == rec.seq
    (tmp_path / "state.json").write_text(out)
    code, out, err = run(capsys, "proof", "verify", str(tmp_path / "state.json"), "--checkpoint",
                         str(tmp_path / "cp"), "--key", vkey)
    assert code == 0 and out.startswith(f"ok: the {len(got['records'])} record(s) listed for '{bead}'")
    code, _, err = run(capsys, "--store", path, "prove", "state", "nosuch", bead, "--at", "3")
    assert code == 1 and "nosuch" in err
