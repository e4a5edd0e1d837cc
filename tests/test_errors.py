"""Only braidlog errors escape, each naming the field and the rule, and nothing is written.

Each case here was once an exception of another kind (UnicodeEncodeError, RecursionError,
AttributeError, TypeError, a bare codec or LMDB error) or a message that blamed the wrong thing.
"""

from __future__ import annotations

import os
import subprocess
import sys

import msgspec
import pytest

import braidlog
from braidlog import DecodeError, GenericDelta, Provenance, Refs, StoreFullError, ValidationError
from braidlog.cli import main
from tests.support import make_delta

GOOD = make_delta(1)


def replaced(**changes) -> GenericDelta:
    return msgspec.structs.replace(GOOD, **changes)


def refused(log, call, field: str, rule: str):
    """``call()`` raises ValidationError with this field and a rule starting so; the log is as it was."""
    head = log.head()
    with pytest.raises(ValidationError) as e:
        call()
    assert (e.value.field, e.value.rule[:len(rule)]) == (field, rule), str(e.value)
    assert log.head() == head
    return e.value


SURROGATE = "must be text UTF-8 can encode: '\\ud800' at index 1 is half of a UTF-16 surrogate pair"


@pytest.mark.parametrize("changes, field", [
    ({"braid_id": "b\ud800"}, "braid_id"),
    ({"kind": "m\ud800"}, "kind"),
    ({"tags": ("ok", "t\ud800")}, "tags[1]"),
    ({"provenance": Provenance("tool", source="s\ud800")}, "provenance.source"),
    ({"payload": {"text": "t\ud800"}}, "payload.text"),
    ({"refs": Refs(deltas=("d\ud800",))}, "refs.deltas[0]"),
])
def test_a_lone_surrogate_in_any_string_is_named(log, changes, field):
    refused(log, lambda: log.append(replaced(**changes)), field, SURROGATE)


def test_a_lone_surrogate_in_a_payload_key_is_named(log):
    e = refused(log, lambda: log.append(replaced(kind="observation",
                                                 payload={"text": "t", "data": {"k\ud800": 1}})),
                "payload.data", "key 'k\\ud800' must be text UTF-8 can encode")
    assert "'\\ud800' at index 1" in e.rule


def test_a_cyclic_payload_is_named_where_it_meets_itself(log):
    data: dict = {"n": 1}
    data["self"] = [data]
    refused(log, lambda: log.append(replaced(kind="observation", payload={"text": "t", "data": data})),
            "payload.data.self[0]", "contains itself: a delta must be a tree of values, not a cycle")


def test_a_10000_deep_payload_is_refused_at_level_17(log):
    value: list = []
    deepest = value
    for _ in range(10_000):
        deepest.append([])
        deepest = deepest[0]
    e = refused(log, lambda: log.append(replaced(kind="observation",
                                                 payload={"text": "t", "data": {"v": value}})),
                "payload.data.v" + "[0]" * 14,  # payload 1, data 2, v 3, ... level 17
                "nests objects and arrays more than 16 levels deep")
    assert e.rule.endswith("(the payload itself is level 1)")


def test_an_out_of_range_confidence_blames_the_confidence(log):
    refused(log, lambda: log.append(replaced(confidence=2**70)), "confidence",
            "must be a number in [0, 1] (got 1180591620717411303424)")


def test_an_out_of_range_integer_in_the_payload_is_named(log):
    refused(log, lambda: log.append(replaced(kind="observation", payload={"text": "t", "data": {"n": [1, -2**64]}})),
            "payload.data.n[1]", "integers must fit in 64 bits")


@pytest.mark.parametrize("kwargs, field, rule", [
    ({"expected_version": "1"}, "expected_version",
     "must be the number of deltas the braid holds (an int >= 0"),
    ({"expected_version": -1}, "expected_version", "must be the number of deltas"),
    ({"expected_version": True}, "expected_version", "must be the number of deltas"),
    ({"expected_version": {"b1": "0"}}, "expected_version",
     "a dict must map braid ids (str) to versions (ints >= 0), not 'b1': '0'"),
    ({"expected_head": "5"}, "expected_head", "must be the seq of the head you read (an int >= 0"),
    ({"expected_head": 1.0}, "expected_head", "must be the seq of the head you read"),
])
def test_bad_expectations_are_named_not_compared(log, kwargs, field, rule):
    refused(log, lambda: log.append_batch([GOOD], **kwargs), field, rule)


def test_numpy_integers_are_good_expectations(log):
    np = pytest.importorskip("numpy")
    assert log.append_batch([GOOD], expected_version=np.int64(0), expected_head=np.uint32(0)) == [1]


@pytest.mark.parametrize("batch, rule", [
    (5, "must be a list (or any iterable) of GenericDelta, not int"),
    ("deltas", "must be a list (or any iterable) of GenericDelta, not str"),
    ({"id": 1}, "must be a list (or any iterable) of GenericDelta, not dict"),
    (GOOD, "must be a list of deltas, not one delta: pass [delta], or call append(delta)"),
])
def test_a_batch_that_is_not_a_list_of_deltas(log, batch, rule):
    refused(log, lambda: log.append_batch(batch), "deltas", rule)


def test_an_element_that_is_not_a_delta_is_named_by_its_index(log):
    with pytest.raises(ValidationError, match=r"^delta 1: delta: expected a GenericDelta, got int$"):
        log.append_batch([GOOD, 5])
    assert log.head().seq == 0


# -- the command line --------------------------------------------------------------------------

@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    braidlog.LmdbLog(path).close()
    return str(path)


def run_cli(capsys, store, *args, stdin: bytes | None = None, monkeypatch=None) -> tuple[int, str]:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", _Stdin(stdin))
    code = main(["--store", store, *args])
    err = capsys.readouterr().err.strip()
    return code, err


class _Stdin:
    def __init__(self, data: bytes) -> None:
        import io

        self.buffer = io.BytesIO(data)


def line(d: GenericDelta) -> str:
    return braidlog.to_json(d).decode()


def test_show_an_empty_ref(capsys, store):
    assert run_cli(capsys, store, "show", "") == (
        1, "braidlog: error: ref: is empty: give a seq (1 to the head) or a delta id")


@pytest.mark.parametrize("args, message", [
    (["log", "--limit", "-1"], "argument --limit: must be 0 or more, got -1"),
    (["log", "--start", "-2"], "argument --start: must be 0 or more, got -2"),
    (["log", "--limit", "x"], "argument --limit: must be a whole number, got 'x'"),
    (["append", "--expected-version", "-1"], "argument --expected-version: must be 0 or more, got -1"),
])
def test_negative_counts_are_usage_errors(capsys, store, args, message):
    with pytest.raises(SystemExit) as e:
        main(["--store", store, *args])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_a_json_line_that_is_not_an_object_is_named_by_its_line(capsys, store, monkeypatch):
    text = "\n".join([line(make_delta(1)), line(make_delta(2)), "[1, 2]", line(make_delta(3))])
    code, err = run_cli(capsys, store, "append", stdin=text.encode(), monkeypatch=monkeypatch)
    assert (code, err) == (1, "braidlog: error: line 3: delta: must be a JSON object, one delta a "
                              "line (got an array)")
    assert braidlog.LmdbLog(store).head().seq == 0


def test_input_that_is_not_utf8_is_named_by_its_line(capsys, store, monkeypatch):
    text = (line(make_delta(1)) + "\n").encode() + b'{"braid_id": "b\xff"}\n'
    code, err = run_cli(capsys, store, "append", stdin=text, monkeypatch=monkeypatch)
    assert code == 1 and err.startswith("braidlog: error: line 2: not UTF-8: byte 0xff at offset ")


REPEATED = "the key 'kind' appears twice in one object; JSON with a repeated key is ambiguous"


@pytest.mark.parametrize("layout, where", [
    ("lines", "line 2"), ("array", "line 3"), ("pretty", "line 5"),
])
def test_a_repeated_key_is_refused_naming_the_key_and_the_line(capsys, store, monkeypatch, layout, where):
    first, second = line(make_delta(1)), line(make_delta(2))
    doubled = second.replace('"kind":"message"', '"kind":"tick","kind":"message"')
    assert doubled != second
    text = {
        "lines": f"{first}\n{doubled}\n",
        "array": f"[\n{first},\n{doubled}\n]\n",
        "pretty": '{\n "braid_id": "b1",\n "kind": "tick",\n "provenance": {"kind": "user"},\n'
                  ' "kind": "message"\n}\n',
    }[layout]
    code, err = run_cli(capsys, store, "append", stdin=text.encode(), monkeypatch=monkeypatch)
    assert code == 1 and err.startswith(f"braidlog: error: {where}: {REPEATED}"), err
    assert braidlog.LmdbLog(store).head().seq == 0


def test_from_json_refuses_a_repeated_key():
    with pytest.raises(DecodeError, match="the key 'text' appears twice in one object"):
        braidlog.from_json(line(GOOD).replace('"text":', '"text":"a","text":'))


def exported(tmp_path) -> list[str]:
    source = braidlog.LmdbLog(tmp_path / "source")
    source.append_batch([make_delta(i) for i in range(1, 4)])
    braidlog_transfer().export(source, tmp_path / "x.jsonl")
    source.close()
    return (tmp_path / "x.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)


def braidlog_transfer():
    from braidlog import transfer

    return transfer


def test_importing_a_file_that_is_not_utf8_names_the_line(tmp_path):
    lines = exported(tmp_path)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes("".join(lines[:2]).encode() + b"\xc3(" + "".join(lines[2:]).encode())
    target = braidlog.LmdbLog(tmp_path / "target")
    with pytest.raises(ValidationError, match=r"^line 3: not UTF-8 text: byte 0xc3 at column 1 "
                                              r"\(invalid continuation byte\); an export is UTF-8"):
        braidlog_transfer().import_(target, damaged)
    assert target.head().seq == 0


def test_importing_a_line_with_a_repeated_key_names_it(tmp_path):
    lines = exported(tmp_path)
    lines[2] = lines[2].replace('"seq":', '"seq":2,"seq":', 1)
    target = braidlog.LmdbLog(tmp_path / "target")
    with pytest.raises(ValidationError, match=r"^line 3: the key 'seq' appears twice in one object"):
        braidlog_transfer().import_(target, lines)
    assert target.head().seq == 0


# -- a full disk ---------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (needs the right to mount; skipped without it)."""
    where = tmp_path / "disk"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2M", "tmpfs", str(where)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip("mounting a small tmpfs needs root: " + done.stderr.decode().strip())
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_is_reported_as_a_full_disk(small_disk):
    log = braidlog.LmdbLog(small_disk / "store")
    deltas = [make_delta(i, payload={"text": os.urandom(200).hex()}) for i in range(20_000)]
    with pytest.raises(StoreFullError) as e:
        for i in range(0, len(deltas), 500):
            head = log.head()
            log.append_batch(deltas[i:i + 500])
    assert f"the disk holding {small_disk / 'store'} is full (" in str(e.value)
    assert "nothing of this transaction was committed" in str(e.value)
    assert e.value.hint == "free space on that disk, or move the store to a larger one"
    assert log.head() == head  # the failed batch left nothing behind
    log.close()
    with braidlog.LmdbLog(small_disk / "store") as again:
        assert again.head() == head
        again.verify()


def test_a_command_whose_post_init_encodes_a_lone_surrogate_names_the_field():
    """Found by the property test: DraftProposal's __post_init__ encodes its fields, and a lone
    surrogate in a nested key raised UnicodeEncodeError from the constructor."""
    from braidlog.projections import decisions as D

    with pytest.raises(braidlog.ValidationError, match=r"^proposal: key '\\ud800' must be text"):
        D.DraftProposal(proposal={"\ud800": None})
