"""The core command line (braidlog/cli/core.py) through ``braidlog.cli.main``, on real stores.

Every command runs against a store in ``tmp_path`` named by ``--store`` (or $BRAIDLOG_STORE),
and is checked for its exit code, its output, and that a refusal writes nothing and prints one
``braidlog: error: ...`` line, never a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone

import lmdb
import msgspec
import pytest

import braidlog
from braidlog import Head, LmdbLog
from braidlog.cli import build_parser, main
from braidlog.cli.util import to_builtins
from braidlog.replay import Checkpoint, encode_state, load_checkpoint
from tests.support import ROOT, T0, make_delta

CORE_COMMANDS = ("init", "append", "log", "show", "head", "verify", "state", "rebuild", "demo")


# -- helpers ----------------------------------------------------------------------------------

def cli(capsys, store, *argv: str) -> tuple[int, str, str]:
    """Run ``braidlog --store STORE ARGV...``; (exit code, stdout, stderr)."""
    capsys.readouterr()
    argv = ["--store", str(store), *argv] if store is not None else list(argv)
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def one_error(err: str, *needles: str) -> str:
    """The single ``braidlog: error:`` line of ``err``; it must contain every needle."""
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one error line, got {lines!r}"
    line = lines[0]
    assert line.startswith("braidlog: error: "), line
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    return line


def json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def delta_json(d: braidlog.GenericDelta) -> dict:
    """A delta as the JSON object `braidlog append` reads."""
    return json.loads(braidlog.to_json(d))


def head_of(store) -> Head:
    with LmdbLog(store, create=False) as log:
        return log.head()


#: Four braids' worth of deltas: b1 message, b2 tick, b1 message, b1 tick, b2 message, b1 message.
LAYOUT = [("b1", "message"), ("b2", "tick"), ("b1", "message"), ("b1", "tick"), ("b2", "message"),
          ("b1", "message")]


@pytest.fixture
def store(tmp_path):
    """An empty store, as `braidlog init` makes it."""
    LmdbLog(tmp_path / "store").close()
    return tmp_path / "store"


@pytest.fixture
def filled(store):
    """A store holding LAYOUT (ts T0+0s .. T0+5s); its records."""
    with LmdbLog(store) as log:
        log.append_batch([make_delta(i, braid=b, kind=k) for i, (b, k) in enumerate(LAYOUT)])
        return list(log.scan())


# -- init -------------------------------------------------------------------------------------

def test_init_creates_an_empty_store_and_is_idempotent(capsys, store):
    rc, out, err = cli(capsys, store, "init")
    assert rc == 0 and err == ""
    assert (store / "data.mdb").exists()
    assert f"head {Head(0, braidlog.GENESIS)}" in out
    with LmdbLog(store) as log:
        log.append(make_delta(0))
        head = log.head()
    rc, out, _ = cli(capsys, store, "init")
    assert rc == 0 and f"head {head}" in out
    assert head_of(store) == head


def test_init_in_a_directory_holding_other_files_is_refused(capsys, tmp_path):
    path = tmp_path / "notes"
    path.mkdir()
    (path / "todo.txt").write_text("buy milk")
    rc, _, err = cli(capsys, path, "init")
    assert rc == 1
    one_error(err, "notes")
    assert sorted(os.listdir(path)) == ["todo.txt"]


def test_init_on_a_file_is_refused(capsys, tmp_path):
    path = tmp_path / "afile"
    path.write_text("not a store")
    rc, _, err = cli(capsys, path, "init")
    assert rc == 1
    one_error(err, "afile", "is a file")


# -- append -----------------------------------------------------------------------------------

def test_append_json_lines_from_a_file(capsys, store, tmp_path):
    ds = [make_delta(i, braid=b, kind=k) for i, (b, k) in enumerate(LAYOUT)]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(delta_json(d)) for d in ds) + "\n")
    rc, out, err = cli(capsys, store, "append", str(src))
    assert rc == 0 and err == ""
    head = head_of(store)
    assert out == f"appended 6 delta(s) at seq 1..6; head {head}\n"
    with LmdbLog(store) as log:
        assert [r.delta for r in log.scan()] == ds


def test_append_a_json_array_from_stdin_with_json_output(capsys, store, monkeypatch):
    import io

    cli(capsys, store, "init")
    ds = [make_delta(i) for i in range(3)]
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps([delta_json(d) for d in ds])))
    rc, out, err = cli(capsys, store, "append", "--json")
    assert rc == 0 and err == ""
    assert json.loads(out) == {"seqs": [1, 2, 3], "head": str(head_of(store))}


def test_append_one_json_object_from_stdin_dash(capsys, store, monkeypatch):
    import io

    d = make_delta(0, payload={"text": "one\nobject, pretty printed"})
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(delta_json(d), indent=2)))
    rc, out, _ = cli(capsys, store, "append", "-")
    assert rc == 0 and out.startswith("appended 1 delta(s) at seq 1..1;")
    with LmdbLog(store) as log:
        assert log.read(1).delta == d


def test_append_a_retry_of_the_same_delta_is_idempotent(capsys, store, tmp_path):
    src = tmp_path / "one.json"
    src.write_text(json.dumps(delta_json(make_delta(5))))
    assert cli(capsys, store, "append", str(src))[0] == 0
    before = head_of(store)
    rc, out, _ = cli(capsys, store, "append", str(src))  # same id, same bytes: no new record
    assert rc == 0 and "seq 1..1" in out and head_of(store) == before


def test_append_the_same_id_with_other_content_is_refused(capsys, store, tmp_path):
    d = make_delta(5)
    src = tmp_path / "one.json"
    src.write_text(json.dumps(delta_json(d)))
    assert cli(capsys, store, "append", str(src))[0] == 0
    before = head_of(store)
    changed = delta_json(d) | {"payload": {"text": "edited"}}
    src.write_text(json.dumps(changed))
    rc, _, err = cli(capsys, store, "append", str(src))
    assert rc == 1
    one_error(err, d.id, "already stored at seq 1")
    assert head_of(store) == before


DOC_EXAMPLE = ('{"braid_id":"agent-1","kind":"message","ts":"2026-05-01T09:00:00Z",'
               '"provenance":{"kind":"user"},"confidence":1.0,"payload":{"text":"hello"}}')


def test_append_the_documented_example_without_an_id(capsys, store, tmp_path):
    src = tmp_path / "hello.json"
    src.write_text(DOC_EXAMPLE + "\n")
    rc, out, err = cli(capsys, store, "append", str(src), "--expected-version", "0")
    assert rc == 0, err
    assert out.startswith("appended 1 delta(s) at seq 1..1; head 1:")


def _bad_batches():
    good = [delta_json(make_delta(i)) for i in range(3)]

    def with_(i, **changes):
        batch = [dict(d) for d in good]
        batch[i].update(changes)
        return batch

    return {
        "confidence above 1": (with_(1, confidence=1.5), "confidence"),
        "unknown payload field": (with_(1, payload={"txt": "typo"}), "payload"),
        "unknown kind": (with_(2, kind="no_such_kind"), "kind"),
        "naive ts": (with_(1, ts="2026-01-01T00:00:00"), "ts"),
        "bad provenance": (with_(0, provenance={"kind": "oracle"}), "provenance.kind"),
        "bad id": (with_(1, id="not-a-ulid"), "id"),
        "missing braid_id": ([{k: v for k, v in d.items() if k != "braid_id"} for d in good], "braid_id"),
    }


@pytest.mark.parametrize("shape", ["jsonl", "array"])
@pytest.mark.parametrize("case", list(_bad_batches()))
def test_a_bad_delta_in_a_batch_writes_nothing_and_names_the_field(capsys, filled, store, tmp_path,
                                                                  shape, case):
    batch, field = _bad_batches()[case]
    src = tmp_path / "bad.json"
    src.write_text("\n".join(json.dumps(d) for d in batch) if shape == "jsonl" else json.dumps(batch))
    before = head_of(store)
    rc, out, err = cli(capsys, store, "append", str(src))
    assert rc == 1 and out == ""
    one_error(err, field)
    assert head_of(store) == before


@pytest.mark.parametrize("text, needle", [
    ("{nope", "not JSON"),
    ("[{nope", "not a JSON array"),
    ("[1, 2]", "item 1"),
    ("", "no deltas given"),
    ("   \n\n", "no deltas given"),
])
def test_append_refuses_input_that_is_not_deltas(capsys, filled, store, tmp_path, text, needle):
    src = tmp_path / "bad.txt"
    src.write_text(text)
    before = head_of(store)
    rc, _, err = cli(capsys, store, "append", str(src))
    assert rc == 1
    one_error(err, needle)
    assert head_of(store) == before


def test_append_from_a_missing_file_is_one_error_line(capsys, filled, store, tmp_path):
    rc, _, err = cli(capsys, store, "append", str(tmp_path / "nope.jsonl"))
    assert rc == 1
    one_error(err, "nope.jsonl")


def test_append_envelope_error_names_the_line_it_came_from(capsys, filled, store, tmp_path):
    lines = [delta_json(make_delta(i)) for i in range(3)]
    lines[1]["confidence"] = 7
    src = tmp_path / "bad.jsonl"
    src.write_text("\n".join(json.dumps(d) for d in lines))
    rc, _, err = cli(capsys, store, "append", str(src))
    assert rc == 1
    one_error(err, "line 2: confidence")


def test_append_payload_error_names_the_line_it_came_from(capsys, filled, store, tmp_path):
    lines = [delta_json(make_delta(i)) for i in range(3)]
    lines[1]["payload"] = {"txt": "typo"}
    src = tmp_path / "bad.jsonl"
    src.write_text("\n".join(json.dumps(d) for d in lines))
    rc, _, err = cli(capsys, store, "append", str(src))
    assert rc == 1
    one_error(err, "line 2: payload")


def test_append_expected_version(capsys, filled, store, tmp_path):
    src = tmp_path / "next.json"
    src.write_text(json.dumps(delta_json(make_delta(10, braid="b2"))))
    before = head_of(store)
    rc, _, err = cli(capsys, store, "append", "--expected-version", "1", str(src))  # b2 holds 2
    assert rc == 1
    one_error(err, "'b2'", "version 2", "expected 1")
    assert head_of(store) == before
    rc, out, err = cli(capsys, store, "append", "--expected-version", "2", str(src))
    assert rc == 0 and err == "" and "seq 7..7" in out


def test_append_expected_version_over_two_braids_is_refused(capsys, filled, store, tmp_path):
    src = tmp_path / "two.jsonl"
    src.write_text("\n".join(json.dumps(delta_json(make_delta(10 + i, braid=b)))
                             for i, b in enumerate(["b1", "b2"])))
    before = head_of(store)
    rc, _, err = cli(capsys, store, "append", "--expected-version", "4", str(src))
    assert rc == 1
    one_error(err, "expected_version")
    assert head_of(store) == before


def test_append_to_a_missing_store_is_refused_not_created(capsys, tmp_path):
    """A mistyped --store must not silently start a new log: init creates, append appends."""
    store = tmp_path / "nowhere"
    src = tmp_path / "one.json"
    src.write_text(json.dumps(delta_json(make_delta(0))))
    rc, _, err = cli(capsys, store, "append", str(src))
    assert rc == 1
    one_error(err, "no store at", "braidlog init")
    assert not os.path.exists(store)
    assert cli(capsys, store, "init")[0] == 0
    rc, _, _ = cli(capsys, store, "append", str(src))
    assert rc == 0 and head_of(store).seq == 1


def test_a_huge_integer_in_a_payload_is_one_error_line(capsys, filled, store, tmp_path):
    src = tmp_path / "big.json"
    src.write_text(json.dumps(delta_json(make_delta(9, kind="observation", payload={"data": {"n": 10**30}}))))
    before = head_of(store)
    rc, _, err = cli(capsys, store, "append", str(src))
    assert rc == 1
    one_error(err, "payload", "64 bits")
    assert head_of(store) == before


def test_verify_json_reports_a_failure_on_stdout(capsys, filled, store):
    rc, out, _ = cli(capsys, store, "verify", "--against", "2:" + "00" * 32, "--json")
    assert rc == 1
    report = json.loads(out)
    assert report["ok"] is False and report["seq"] == 2 and report["expected"] == "00" * 32


# -- log --------------------------------------------------------------------------------------

def _seqs(capsys, store, *argv):
    rc, out, err = cli(capsys, store, "log", "--json", *argv)
    assert rc == 0 and err == "", err
    return [r["seq"] for r in json_lines(out)]


def test_log_json_lines_carry_seq_hash_and_the_delta(capsys, filled, store):
    rc, out, _ = cli(capsys, store, "log", "--json")
    assert rc == 0
    rows = json_lines(out)
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5, 6]
    for row, rec in zip(rows, filled, strict=False):
        assert set(row) == {"seq", "hash", "delta"}
        assert row["hash"] == rec.hash.hex()
        assert braidlog.from_json(json.dumps(row["delta"])) == rec.delta


@pytest.mark.parametrize("argv, expected", [
    ((), [1, 2, 3, 4, 5, 6]),
    (("--braid", "b1"), [1, 3, 4, 6]),
    (("--braid", "b2"), [2, 5]),
    (("--kind", "tick"), [2, 4]),
    (("--kind", "message", "--reverse"), [6, 5, 3, 1]),
    (("--braid", "b1", "--kind", "message"), [1, 3, 6]),
    (("--braid", "b1", "--kind", "message", "--reverse"), [6, 3, 1]),
    (("--start", "2", "--stop", "5"), [2, 3, 4]),
    (("--start", "5"), [5, 6]),
    (("--stop", "1"), []),
    (("--limit", "2"), [1, 2]),
    (("--reverse",), [6, 5, 4, 3, 2, 1]),
    (("--reverse", "--limit", "2"), [6, 5]),
    (("--reverse", "--start", "2", "--stop", "5"), [4, 3, 2]),
    (("--braid", "b1", "--start", "2", "--limit", "2"), [3, 4]),
    (("--kind", "message", "--stop", "6", "--reverse", "--limit", "1"), [5]),
    (("--kind", "tick", "--kind", "message"), [1, 2, 3, 4, 5, 6]),
    (("--kind", "tick", "--kind", "message", "--reverse", "--limit", "3"), [6, 5, 4]),
    (("--braid", "b2", "--braid", "b1", "--start", "2", "--stop", "6"), [2, 3, 4, 5]),
    (("--braid", "b1", "--braid", "b2", "--kind", "tick"), [2, 4]),
    (("--kind", "tick", "--kind", "tick"), [2, 4]),
])
def test_log_filters(capsys, filled, store, argv, expected):
    assert _seqs(capsys, store, *argv) == expected


def test_log_braid_and_kind_with_limit_counts_matching_deltas(capsys, filled, store):
    assert _seqs(capsys, store, "--braid", "b1", "--kind", "tick", "--limit", "1") == [4]


def test_log_table(capsys, filled, store):
    rc, out, _ = cli(capsys, store, "log")
    assert rc == 0
    assert "seq" in out and "kind" in out
    kinds = [line.split()[4] for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert kinds.count("message") == 4 and kinds.count("tick") == 2
    assert "message 5" in out  # the payload text summary
    rc, out, err = cli(capsys, store, "log", "--braid", "nobody")
    assert rc == 0 and out.strip() == "no deltas"
    assert "no delta of braid 'nobody' in this store (its braids: b1, b2)" in err


def test_log_prints_braid_ids_and_texts_as_written(capsys, store):
    """No emoji codes, no console markup: a braid id and a payload are the user's bytes."""
    with LmdbLog(store) as log:
        log.append(make_delta(1, braid="agent:thread:7", payload={"text": "see [/x] and [bold]y"}))
    rc, out, err = cli(capsys, store, "log")
    assert rc == 0 and err == ""
    assert "agent:thread:7" in out and "see [/x] and [bold]y" in out


def test_log_names_a_kind_the_store_has_never_seen(capsys, filled, store):
    rc, out, err = cli(capsys, store, "log", "--kind", "mesage", "--kind", "tick", "--json")
    assert rc == 0 and [r["seq"] for r in json_lines(out)] == [2, 4]
    assert "no delta of kind 'mesage' in this store (its kinds: message, tick)" in err


# -- show -------------------------------------------------------------------------------------

def test_show_by_seq_and_by_id(capsys, filled, store):
    rec = filled[2]
    rc, out, err = cli(capsys, store, "show", "3")
    assert rc == 0 and err == ""
    assert out.startswith(f"seq    3\nhash   {rec.hash.hex()}\n")
    body = out.split("\n", 2)[2]
    assert braidlog.from_json(body) == rec.delta
    rc, out, _ = cli(capsys, store, "show", "--json", rec.delta.id)
    assert rc == 0
    assert json.loads(out)["seq"] == 3 and json.loads(out)["hash"] == rec.hash.hex()


@pytest.mark.parametrize("ref", ["7", "999", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "nonsense"])
def test_show_unknown_is_one_error(capsys, filled, store, ref):
    rc, out, err = cli(capsys, store, "show", ref)
    assert rc == 1 and out == ""
    one_error(err, "no delta", ref)


def test_show_seq_zero_is_one_error(capsys, filled, store):
    rc, _, err = cli(capsys, store, "show", "0")
    assert rc == 1
    one_error(err, "no delta")


# -- head -------------------------------------------------------------------------------------

def test_head_prints_seq_colon_hash_and_json(capsys, filled, store):
    rc, out, err = cli(capsys, store, "head")
    assert rc == 0 and err == ""
    head = Head.parse(out)
    assert head == head_of(store) == Head(6, filled[-1].hash)
    assert out == f"6:{filled[-1].hash.hex()}\n"
    rc, out, _ = cli(capsys, store, "head", "--json")
    assert json.loads(out) == {"seq": 6, "hash": filled[-1].hash.hex(), "head": str(head)}


def test_head_of_an_empty_store_is_genesis(capsys, store):
    cli(capsys, store, "init")
    rc, out, _ = cli(capsys, store, "head")
    assert rc == 0 and out == f"0:{braidlog.GENESIS.hex()}\n"


# -- verify -----------------------------------------------------------------------------------

def test_verify_ok(capsys, filled, store):
    rc, out, err = cli(capsys, store, "verify")
    assert rc == 0 and err == ""
    assert out == f"ok: 6 deltas verified; head {head_of(store)}\n"
    rc, out, _ = cli(capsys, store, "verify", "--json")
    assert json.loads(out) == {"ok": True, "verified": 6, "head": str(head_of(store)), "against": None}


def test_verify_against_an_earlier_head(capsys, filled, store):
    _, earlier, _ = cli(capsys, store, "head")
    earlier = earlier.strip()
    with LmdbLog(store) as log:
        log.append_batch([make_delta(10 + i) for i in range(3)])
    rc, out, err = cli(capsys, store, "verify", "--against", earlier)
    assert rc == 0 and err == ""
    assert out == f"ok: the first 6 deltas are unchanged since head {earlier}\n"
    rc, out, _ = cli(capsys, store, "verify", "--against", earlier, "--json")
    assert json.loads(out) == {"ok": True, "verified": 6, "head": str(head_of(store)), "against": earlier}
    rc, out, _ = cli(capsys, store, "verify", "--against", f"0:{braidlog.GENESIS.hex()}")
    assert rc == 0


def test_verify_against_a_wrong_hash_names_expected_and_found(capsys, filled, store):
    wrong = "ab" * 32
    rc, out, err = cli(capsys, store, "verify", "--against", f"4:{wrong}")
    assert rc == 1 and out == ""
    one_error(err, f"expected hash {wrong}", f"found {filled[3].hash.hex()}", "seq 4")


def test_verify_against_a_seq_beyond_the_log(capsys, filled, store):
    rc, _, err = cli(capsys, store, "verify", "--against", f"9:{filled[-1].hash.hex()}")
    assert rc == 1
    one_error(err, "holds 6 deltas", "9", "lost")


@pytest.mark.parametrize("text", ["nonsense", "4", "4:abcd", "x:" + "00" * 32, "-1:" + "00" * 32])
def test_verify_against_a_malformed_head(capsys, filled, store, text):
    rc, _, err = cli(capsys, store, "verify", f"--against={text}")
    assert rc == 1
    one_error(err, "SEQ:HASH")


def _tamper(store, seq: int, edit) -> None:
    """Rewrite the raw LMDB value of record ``seq`` with ``edit(bytearray)``, behind the engine."""
    env = lmdb.open(str(store), max_dbs=16)
    try:
        db = env.open_db(b"log")
        with env.begin(write=True) as txn:
            key = seq.to_bytes(8, "big")
            value = bytearray(txn.get(key, db=db))
            edit(value)
            txn.put(key, bytes(value), db=db)
    finally:
        env.close()


def _flip_text(value: bytearray) -> None:
    """Flip one bit of the payload text ``message 2`` -> ``message 3``: still a valid delta."""
    i = value.rindex(b"message 2")
    value[i + 8] ^= 0x01


def test_verify_finds_a_flipped_byte_in_a_record_and_names_its_seq(capsys, filled, store):
    _tamper(store, 3, _flip_text)
    rc, out, err = cli(capsys, store, "verify")
    assert rc == 1 and out == ""
    one_error(err, "seq 3", "changed after it was written")
    rc, _, err = cli(capsys, store, "verify", "--json")
    assert rc == 1
    one_error(err, "seq 3")
    # a head taken before the damage no longer verifies; one before the damaged record does
    rc, _, err = cli(capsys, store, "verify", "--against", str(Head(6, filled[-1].hash)))
    assert rc == 1
    one_error(err, "seq 3")
    rc, _, _ = cli(capsys, store, "verify", "--against", str(Head(2, filled[1].hash)))
    assert rc == 0


def test_verify_finds_a_changed_stored_hash(capsys, filled, store):
    def flip_hash(value: bytearray) -> None:
        value[5] ^= 0xFF

    _tamper(store, 5, flip_hash)
    rc, _, err = cli(capsys, store, "verify")
    assert rc == 1
    one_error(err, "seq 5")


def _truncate(value: bytearray) -> None:
    """Cut the record's last byte: the bytes no longer decode as a delta."""
    del value[-1]


@pytest.mark.parametrize("argv", [("log",), ("log", "--json"), ("show", "3"), ("state", "--at", "4")])
def test_reading_an_undecodable_record_is_one_error_naming_its_seq(capsys, filled, store, argv):
    _tamper(store, 3, _truncate)
    rc, _, err = cli(capsys, store, *argv)
    assert rc == 1
    one_error(err, "seq 3")
    rc, _, err = cli(capsys, store, "verify")
    assert rc == 1
    one_error(err, "seq 3")


# -- state ------------------------------------------------------------------------------------

@pytest.fixture
def fields_store(store):
    """A store with core deltas and a fields topic whose owner changes: (store, seqs by step)."""
    from braidlog.projections.fields import ReviseField

    start = T0 + timedelta(hours=1)
    steps: dict[str, int] = {}
    with braidlog.open(store) as b:
        b.append_batch([make_delta(i) for i in range(3)])
        for i, (owner, who) in enumerate([("unassigned", "tool"), ("Priya", "assistant"), ("Aya", "user")]):
            (rec,) = b.execute("fields", ReviseField(topic_id="atlas", field="owner", value=owner),
                               braid_id="b1", provenance=who, now=start + timedelta(minutes=i))
            steps[owner] = rec.seq
        b.append(make_delta(99, ts=start + timedelta(minutes=10)))
    return store, steps


def _owner(states: dict) -> str | None:
    if "fields" not in states:  # state leaves out a projection that holds nothing
        return None
    topic = states["fields"]["topics"].get("atlas")
    return None if topic is None else topic["fields"]["owner"]["revisions"][-1]["value"]


def _fresh(store, name: str, seq: int) -> bytes:
    """The encoded state of projection ``name`` folded afresh over deltas 1..seq."""
    from braidlog.projections import default_projections

    (p,) = [p for p in default_projections() if p.name == name]
    with LmdbLog(store, create=False, readonly=True) as log:
        return encode_state(p.fold([r.delta for r in log.scan(1, seq + 1)]))


def _state_json(capsys, store, *argv) -> dict:
    rc, out, err = cli(capsys, store, "state", "--json", *argv)
    assert rc == 0 and err == "", err
    return json.loads(out)


def test_state_at_a_seq_an_id_and_a_time(capsys, fields_store):
    store, steps = fields_store
    with LmdbLog(store, create=False) as log:
        priya = log.read(steps["Priya"])
        head = log.head()
    by_seq = _state_json(capsys, store, "--at", str(steps["Priya"]), "--projection", "fields")
    assert by_seq["seq"] == steps["Priya"] and list(by_seq["states"]) == ["fields"]
    assert _owner(by_seq["states"]) == "Priya"
    by_id = _state_json(capsys, store, "--at", priya.delta.id, "--projection", "fields")
    assert by_id == by_seq
    when = priya.delta.ts + timedelta(seconds=30)  # before Aya's revision a minute later
    for text in (when.isoformat(), when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                 when.astimezone(timezone(timedelta(hours=2))).isoformat()):
        by_time = _state_json(capsys, store, "--at", text, "--projection", "fields")
        assert by_time.pop("notes")[0].endswith(f"stamped at or before it (seq {by_seq['seq']:d})")
        assert by_time == by_seq, text
    before = _state_json(capsys, store, "--at", (T0 - timedelta(days=1)).isoformat())
    assert before["seq"] == 0 and _owner(before["states"]) is None
    now = _state_json(capsys, store)
    assert now["seq"] == head.seq and now["head"] == str(head)
    assert _owner(now["states"]) == "Aya"


def test_state_json_is_the_fresh_fold_of_every_projection(capsys, fields_store):
    from braidlog.projections import default_projections

    store, steps = fields_store
    names = {p.name for p in default_projections()}
    for seq in (0, 3, steps["unassigned"], steps["Priya"], steps["Aya"], steps["Aya"] + 1):
        got = _state_json(capsys, store, "--at", str(seq))
        assert got["seq"] == seq and set(got["states"]) <= names
        for name in names:
            with LmdbLog(store, create=False, readonly=True) as log:
                (p,) = [p for p in default_projections() if p.name == name]
                fresh = p.fold([r.delta for r in log.scan(1, seq + 1)])
            expected = json.loads(msgspec.json.encode(to_builtins(fresh)))
            if name not in got["states"]:  # left out only when it holds nothing: its initial
                # state, or for a family that owns kinds, none of them in the log up to seq
                owned = {s.kind for s in braidlog.REGISTRY.specs() if s.owner == name}
                with LmdbLog(store, create=False, readonly=True) as log:
                    kinds = {r.delta.kind for r in log.scan(1, seq + 1)}
                assert (expected == json.loads(msgspec.json.encode(to_builtins(p.start())))
                        or (owned and not owned & kinds)), (name, seq)
                continue
            assert got["states"][name] == expected, (name, seq)
        if seq >= steps["unassigned"]:
            assert "fields" in got["states"]


def test_state_as_text(capsys, fields_store):
    store, steps = fields_store
    rc, out, err = cli(capsys, store, "state", "--at", str(steps["Priya"]), "--projection", "fields")
    assert rc == 0 and err == ""
    assert out.startswith(f"as of seq {steps['Priya']} ({steps['Priya']}:")
    assert "fields" in out and '"Priya"' in out and '"Aya"' not in out


@pytest.mark.parametrize("argv, needle", [
    (("--at", "garbage"), "not a seq, a delta id or an ISO-8601 time"),
    (("--at", "999"), "outside the log"),
    (("--at", "01ARZ3NDEKTSV4RRFFQ69G5FAV"), "no delta with id"),
    (("--at", "2026-01-01T00:00:01"), "no timezone"),
    (("--projection", "nope"), "no projection 'nope'"),
])
def test_state_bad_point_or_projection_is_one_error(capsys, fields_store, argv, needle):
    store, _ = fields_store
    rc, out, err = cli(capsys, store, "state", *argv)
    assert rc == 1 and out == ""
    one_error(err, needle)


# -- rebuild ----------------------------------------------------------------------------------

def test_rebuild_folds_again_and_checkpoints_at_the_head(capsys, fields_store):
    from braidlog.projections import default_projections

    store, _ = fields_store
    with LmdbLog(store) as log:
        log.append(make_delta(100, ts=T0 + timedelta(days=1)))  # past the last checkpoint
        head = log.head()
    rc, out, err = cli(capsys, store, "rebuild")
    assert rc == 0 and err.strip() == ""  # (a transient progress bar may leave a blank line)
    assert out == f"rebuilt {len(default_projections())} projection(s) over {head.seq} deltas\n"
    with LmdbLog(store) as log:
        for p in default_projections():
            found = load_checkpoint(log, p, head.seq)
            assert found is not None and found[0] == head.seq, p.name
            assert encode_state(found[1]) == _fresh(store, p.name, head.seq), p.name
    assert _owner(_state_json(capsys, store)["states"]) == "Aya"


def _poison_head_checkpoint(store, name: str) -> int:
    """Overwrite ``name``'s checkpoint at the head with its initial state (an intact but stale
    checkpoint, as an evolve changed without a version bump leaves behind); the head seq."""
    from braidlog.projections import default_projections

    (p,) = [p for p in default_projections() if p.name == name]
    with LmdbLog(store) as log:
        seq = log.head().seq
        assert log.get_checkpoint(p.name, p.version, seq) is not None
        ck = Checkpoint.make(seq, log.hash_at(seq), encode_state(p.start()))
        log.put_checkpoint(p.name, p.version, seq, msgspec.msgpack.encode(ck))
    return seq


def test_a_stale_head_checkpoint_is_what_state_reads(capsys, fields_store):
    """The premise of the rebuild test below: an intact, stale checkpoint is trusted."""
    store, _ = fields_store
    _poison_head_checkpoint(store, "fields")
    assert _owner(_state_json(capsys, store)["states"]) is None


def test_rebuild_rewrites_a_stale_checkpoint_at_the_head(capsys, fields_store):
    store, _ = fields_store
    _poison_head_checkpoint(store, "fields")
    assert cli(capsys, store, "rebuild")[0] == 0
    assert _owner(_state_json(capsys, store)["states"]) == "Aya"


def test_rebuild_of_an_empty_store(capsys, store):
    cli(capsys, store, "init")
    rc, out, _ = cli(capsys, store, "rebuild")
    assert rc == 0 and "over 0 deltas" in out


# -- demo -------------------------------------------------------------------------------------

class _Clock(datetime):
    """A datetime whose now() is set by the test (for braidlog.cli.demo's start time)."""

    value: datetime

    @classmethod
    def now(cls, tz=None):
        return cls.value


def _demo_at(capsys, monkeypatch, store, when: datetime, *argv):
    _Clock.value = when
    monkeypatch.setattr("braidlog.cli.demo.datetime", _Clock)
    return cli(capsys, store, "demo", *argv)


DEMO_T = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def test_demo_twice_in_the_same_store(capsys, monkeypatch, store):
    rc, out, err = _demo_at(capsys, monkeypatch, store, DEMO_T)
    assert rc == 0 and err == "", err
    first = head_of(store)
    assert "braidlog demo" in out and "chain verified" in out and f"head {first}" in out
    rc, out, err = _demo_at(capsys, monkeypatch, store, DEMO_T + timedelta(seconds=1), "--quiet")
    assert rc == 0 and err == "", err
    assert "chain verified" not in out
    second = head_of(store)
    assert second.seq > first.seq
    rc, out, _ = cli(capsys, store, "verify", "--against", str(first))
    assert rc == 0
    rc, out, _ = cli(capsys, store, "verify")
    assert rc == 0 and f"{second.seq} deltas verified" in out
    with LmdbLog(store, create=False) as log:
        kinds = log.counts("kind")
    assert {"message", "tool_call", "bead_write", "knot_lifecycle", "decision_recorded",
            "field_revised", "memory_added", "episode_opened", "hypothesis"} <= set(kinds)


def test_demo_with_the_real_clock_writes_a_verified_session(capsys, store):
    rc, out, err = cli(capsys, store, "demo")
    assert rc == 0 and err == ""
    assert "chain verified" in out
    assert cli(capsys, store, "verify")[0] == 0


def test_demo_twice_within_one_second(capsys, monkeypatch, store):
    assert _demo_at(capsys, monkeypatch, store, DEMO_T, "--quiet")[0] == 0
    rc, _, err = _demo_at(capsys, monkeypatch, store, DEMO_T + timedelta(milliseconds=300), "--quiet")
    assert rc == 0, err


# -- a missing store, $BRAIDLOG_STORE, help ---------------------------------------------------

@pytest.mark.parametrize("argv", [("log",), ("show", "1"), ("head",), ("verify",), ("state",),
                                  ("state", "--at", "1"), ("rebuild",)])
def test_commands_on_a_missing_store(capsys, tmp_path, argv):
    missing = tmp_path / "nowhere"
    rc, out, err = cli(capsys, missing, *argv)
    assert rc == 1 and out == ""
    one_error(err, f"no store at {missing}", "braidlog init")
    assert not missing.exists(), "a read command created the store"


def test_the_store_environment_variable_selects_the_store(capsys, monkeypatch, tmp_path, filled, store):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BRAIDLOG_STORE", str(store))
    rc, out, _ = cli(capsys, None, "head")
    assert rc == 0 and out.strip() == str(Head(6, filled[-1].hash))
    other = tmp_path / "other"
    assert cli(capsys, other, "init")[0] == 0  # --store wins over the variable
    rc, out, _ = cli(capsys, other, "head")
    assert out.startswith("0:")
    monkeypatch.delenv("BRAIDLOG_STORE")
    rc, _, err = cli(capsys, None, "head")  # the default: ./braid.lmdb, which is not there
    assert rc == 1
    one_error(err, "no store at braid.lmdb")


def _subcommands() -> list[str]:
    import argparse

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(sub.choices)


def test_every_core_command_is_registered():
    assert set(CORE_COMMANDS) <= set(_subcommands())


@pytest.mark.parametrize("command", _subcommands())
def test_help_of_every_subcommand_exits_0(capsys, command):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: braidlog") and command in out


def test_top_level_help_exits_0(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for command in CORE_COMMANDS:
        assert command in out


def test_an_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["frobnicate"])
    assert e.value.code == 2


# -- the installed command --------------------------------------------------------------------

def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("BRAIDLOG_STORE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def test_the_console_script_and_python_dash_m(filled, store, tmp_path):
    exe = shutil.which("braidlog")
    assert exe is not None, "the braidlog console script is not installed (pip install -e .)"
    run = subprocess.run([exe, "--help"], capture_output=True, text=True, env=_env(), timeout=60)
    assert run.returncode == 0 and "usage: braidlog" in run.stdout
    run = subprocess.run([sys.executable, "-m", "braidlog", "--store", str(store), "head"],
                         capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(head_of(store))
    run = subprocess.run([sys.executable, "-m", "braidlog", "--store", str(tmp_path / "nowhere"),
                          "verify"], capture_output=True, text=True, env=_env(), cwd=tmp_path,
                         timeout=60)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.startswith("braidlog: error: no store at")


def test_append_names_the_physical_line_of_bad_json(capsys, store, tmp_path):
    good = json.dumps(delta_json(make_delta(0)))
    src = tmp_path / "gaps.jsonl"
    src.write_text(good + "\n\n" + good.replace("message 0", "x") + "\n{broken\n")
    rc, _, err = cli(capsys, store, "append", str(src))
    assert rc == 1
    one_error(err, "line 4", "not JSON")
    assert head_of(store).seq == 0


def test_log_table_without_limit_is_capped_and_says_so(capsys, store, monkeypatch):
    from braidlog.cli import core

    monkeypatch.setattr(core, "TABLE_ROWS", 3)
    with LmdbLog(store) as log:
        log.append_batch([make_delta(i) for i in range(5)])
    rc, out, _ = cli(capsys, store, "log")
    assert rc == 0 and "showing the first 3" in out and "--json" in out
    rc, out, _ = cli(capsys, store, "log", "--limit", "5")
    assert rc == 0 and "showing the first" not in out
