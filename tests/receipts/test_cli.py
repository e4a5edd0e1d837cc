"""`braidlog recall --record` and `braidlog context` from the shell: what they print, and the
typed errors (exit 1, one line, nothing written) of bad input."""

from __future__ import annotations

import json

import pytest

from braidlog import LmdbLog
from braidlog.cli import main
from braidlog.receipts import read_receipt, sha256_hex


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_recall_record_prints_the_receipt_and_records_the_request(store_path, tmp_path, capsys):
    (tmp_path / "ctx").write_bytes(b"the prompt")
    code, out, err = run(capsys, "--store", store_path, "recall", "peanut allergy", "--k", "2",
                         "--braid", "alice", "--record", "--run", "r-1", "--turn", "5", "--model", "m",
                         "--context-file", tmp_path / "ctx", "--json")
    assert code == 0, err
    got = json.loads(out)
    with LmdbLog(store_path) as log:
        r = read_receipt(log, got["context_id"]).receipt
    assert [i.seq for i in r.items] == [h["seq"] for h in got["hits"]]
    assert (r.run, r.turn, r.model, r.context_sha256) == ("r-1", "5", "m", sha256_hex(b"the prompt"))
    assert r.request.filters == {"braid": ["alice"]} and r.request.query == "peanut allergy"
    code, out, err = run(capsys, "--store", store_path, "recall", "dog", "--record", "--run", "r-1",
                         "--turn", "6", "--hash-query")
    assert code == 0 and out.startswith("recorded receipt ") and "(seq 8)" in out


@pytest.mark.parametrize("argv, message", [
    (["--run", "r"], "--run: describes a recorded recall: add --record"),
    (["--hash-query"], "--hash-query: describes a recorded recall"),
    (["--record", "--turn", "t"], "--run: a recorded recall names the run and the turn"),
    (["--record", "--run", "r", "--turn", "t", "--context-file", "/nonexistent"], "--context-file: cannot read"),
    (["--record", "--run", "x" * 121, "--turn", "t"], "run: must be a string of 1 to 120"),
])
def test_bad_recall_record_options_write_nothing(store_path, capsys, argv, message):
    code, out, err = run(capsys, "--store", store_path, "recall", "coffee", *argv)
    assert code == 1 and message in err and "Traceback" not in err
    with LmdbLog(store_path) as log:
        assert log.head().seq == 6


@pytest.mark.parametrize("argv, message", [
    (["context", "show", "01ARZ3NDEKTSV4RRFFQ69G5FAV"], "no delta '01ARZ3NDEKTSV4RRFFQ69G5FAV'"),
    (["context", "show", "1"], "is a 'message', not a context receipt"),
    (["context", "replay", "99"], "no record at seq 99"),
    (["context", "export", "1", "--key", "/nonexistent", "--out", "x.json"], "no key file"),
])
def test_context_commands_refuse_what_is_not_a_receipt(store_path, capsys, argv, message):
    code, out, err = run(capsys, "--store", store_path, *argv)
    assert code == 1 and message in err


def test_proof_verify_context_refuses_wrong_input(store_path, keys, tmp_path, capsys):
    code, out, err = run(capsys, "--store", store_path, "recall", "dog", "--record", "--run", "r",
                         "--turn", "1", "--json")
    rid = json.loads(out)["context_id"]
    out_file = tmp_path / "e.json"
    assert run(capsys, "--store", store_path, "context", "export", rid, "--key", keys[0], "--out",
               out_file)[0] == 0
    (tmp_path / "vkey").write_text(keys[1])
    for argv, message in [
        (["--context", out_file], "give the log's verifier key"),
        (["--context", out_file, "--key", "example.com/x+00000000+AQ=="], "verifier key"),
        (["--context", out_file, "--key", tmp_path / "vkey", "--checkpoint", out_file],
         "carries its checkpoint and proofs"),
        (["--context-bytes", out_file, "--key", tmp_path / "vkey"], "give --context FILE"),
        (["--context", tmp_path / "vkey", "--key", tmp_path / "vkey"], "not JSON"),
    ]:
        code, out, err = run(capsys, "proof", "verify", *argv)
        assert code == 1 and message in err, (argv, err)
