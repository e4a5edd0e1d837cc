"""The verifiable-log commands, through ``main([...])`` and a real store."""

from __future__ import annotations

import json

import pytest

from braidlog import LmdbLog
from braidlog.cli import main
from braidlog.proofs import consistency_proof, inclusion_proof

from .conftest import make_delta
from .rfc9162 import Reference


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
        ref = Reference.of_inputs([log.body(s) for s in range(1, 13)])
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
        ref = Reference.of_inputs([log.body(s) for s in range(1, 13)])
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
