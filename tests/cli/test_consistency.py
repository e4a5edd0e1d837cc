"""The command line behaves the same everywhere: --store and --app in every command's help,
--json where a command prints a result, errors that name the flag and say what is there."""

from __future__ import annotations

import argparse
import json

import pytest

from braidlog.cli import _leaves, build_parser, main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cli") / "demo.lmdb")
    assert main(["--store", path, "demo", "--quiet"]) == 0
    return path


def test_every_command_documents_store_and_app_in_its_help():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in _leaves(sub):
        text = command.format_help()
        assert "--store PATH" in text and "--app MODULE" in text, command.prog


def test_store_before_or_after_a_nested_command(tmp_path, capsys):
    store = str(tmp_path / "s")
    assert run(capsys, "init", "--store", store, "--json")[0] == 0
    code, out, _ = run(capsys, "kind", "list", "--store", store, "--json")
    assert code == 0 and any(r["kind"] == "message" for r in json.loads(out))


def test_init_rebuild_and_demo_print_json(tmp_path, capsys):
    store = str(tmp_path / "s")
    code, out, _ = run(capsys, "--store", store, "init", "--json")
    assert code == 0 and json.loads(out) == {"store": store, "seq": 0, "head": "0:" + "0" * 64}
    code, out, _ = run(capsys, "--store", store, "demo", "--json")
    demo = json.loads(out)
    assert code == 0 and demo["first"] == 1 and demo["written"] == int(demo["head"].split(":")[0])
    assert demo["pieces"]
    code, out, _ = run(capsys, "--store", store, "rebuild", "--json")
    rebuilt = json.loads(out)
    assert code == 0 and rebuilt["deltas"] == demo["written"] and "fields" in rebuilt["projections"]


def test_demo_quiet_prints_the_summary_alone(tmp_path, capsys):
    code, out, _ = run(capsys, "--store", str(tmp_path / "s"), "demo", "--quiet")
    assert code == 0 and out.count("\n") == 1 and out.startswith("braidlog demo: wrote braid ")


def test_show_of_a_missing_seq_says_the_head(demo_store, capsys):
    code, _, err = run(capsys, "--store", demo_store, "show", "99999")
    assert code == 1 and "no delta with seq or id '99999'; the log holds seqs 1.." in err
    assert "(head " in err


def test_verify_against_errors_are_named_after_the_flag(demo_store, capsys):
    code, _, err = run(capsys, "--store", demo_store, "verify", "--against", "5:abcd")
    assert code == 1 and err.startswith("braidlog: error: --against: must be SEQ:HASH")
    code, _, err = run(capsys, "--store", demo_store, "verify", "--against", "99999:" + "0" * 64)
    assert code == 1 and err.startswith("braidlog: error: --against: the log holds")


def test_history_of_a_braid_id_lists_the_braid(demo_store, capsys):
    code, out, _ = run(capsys, "--store", demo_store, "log", "--json", "--limit", "1")
    braid = json.loads(out)["delta"]["braid_id"]
    code, out, _ = run(capsys, "--store", demo_store, "history", braid, "--json")
    got = json.loads(out)
    assert code == 0 and got["braid"] == braid and got["deltas"]
    assert all(d["delta"]["braid_id"] == braid for d in got["deltas"])
    code, _, err = run(capsys, "--store", demo_store, "history", "no-such-entity")
    assert code == 1 and "no delta refers to 'no-such-entity'" in err


def test_diff_says_when_a_point_precedes_the_log(demo_store, capsys):
    code, _, err = run(capsys, "--store", demo_store, "diff", "2000-01-01T00:00:00Z",
                       "2001-01-01T00:00:00Z")
    assert code == 0
    assert "point A (2000-01-01T00:00:00Z) precedes the log" in err
    assert "point B (2001-01-01T00:00:00Z) precedes the log" in err
    code, _, err = run(capsys, "--store", demo_store, "diff", "0", "3")
    assert code == 0 and "precedes" not in err  # seq 0 asked for by name is no surprise
