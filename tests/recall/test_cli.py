"""Recall from the shell: ``append --embed`` feeds it, ``recall --mode`` finds by meaning, keyword
or both; and without the recall extra, one line says how to install it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from braidlog.cli import main

LINES = [{"ts": f"2025-01-01T00:00:0{i}Z", "provenance": {"kind": "user"}, "confidence": 1.0, **x}
         for i, x in enumerate([
    {"braid_id": "ops", "kind": "message", "payload": {"text": "deploy failed with ERR-4012 on the canary"}},
    {"braid_id": "ops", "kind": "message", "payload": {"text": "the database timed out under load"}},
    {"braid_id": "dev", "kind": "message", "payload": {"text": "rename recall/keyword.py to match the docs"}},
    {"braid_id": "dev", "kind": "tick", "payload": {}},  # no text: appended without a vector
    {"braid_id": "ops", "kind": "message", "payload": {"text": "rolled back; ERR-4012 gone after the fix"}},
])]


def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def shell_store(tmp_path, capsys):
    store = str(tmp_path / "store")
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in LINES) + "\n")
    code, out, err = run(["--store", store, "init"], capsys)
    assert code == 0, err
    code, out, err = run(["--store", store, "append", str(src), "--embed", "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    # seq 1 is the declaration of the space's embedder, written with its first vectors
    assert got["seqs"] == [2, 3, 4, 5, 6] and got["embedded"] == 4
    return store


def test_append_embed_attaches_vectors_to_deltas_with_text(shell_store, capsys):
    import braidlog

    with braidlog.open(shell_store, readonly=True, projections=[]) as b:
        vecs = [b.log.read(s).delta.vector for s in range(2, 7)]
        declared = b.log.read(1).delta
    assert [v is not None for v in vecs] == [True, True, True, False, True]
    assert {v.dim for v in vecs if v} == {512} and {v.space for v in vecs if v} == {"default"}
    assert declared.kind == "embedder_declared" and declared.payload["name"] == "hashing-v1-512"
    assert declared.payload["space"] == "default" and declared.payload["spec"] == "hashing"


def test_append_without_embed_attaches_nothing(tmp_path, capsys):
    store = str(tmp_path / "s")
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(LINES[0]) + "\n")
    assert run(["--store", store, "init"], capsys)[0] == 0
    code, out, err = run(["--store", store, "append", str(src)], capsys)
    assert code == 0 and "embedded" not in out
    code, out, err = run(["--store", store, "recall", "deploy", "--json"], capsys)
    assert code == 0 and json.loads(out)["hits"] == []
    assert "holds no vector in space 'default'; `braidlog append --embed` attaches them" in err


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
def test_recall_modes_from_the_shell(shell_store, capsys, mode):
    code, out, err = run(["--store", shell_store, "recall", "ERR-4012", "--mode", mode, "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert got["mode"] == mode
    assert {h["seq"] for h in got["hits"][:2]} == {2, 6}  # the two deltas that name the error
    code, out, err = run(["--store", shell_store, "recall", "ERR-4012", "--mode", mode, "--at", "4",
                          "--braid", "ops", "--json"], capsys)
    assert code == 0, err
    hits = json.loads(out)["hits"]
    assert hits[0]["seq"] == 2 and all(h["seq"] <= 4 and h["braid_id"] == "ops" for h in hits)


def test_recall_keyword_table(shell_store, capsys):
    code, out, err = run(["--store", shell_store, "recall", "keyword.py", "--mode", "keyword"], capsys)
    assert code == 0, err
    assert "by keyword" in out and "rename recall/keyword.py" in out


@pytest.mark.parametrize("filters, note", [
    (["--braid", "nope"], "--braid nope leaves nothing to recall"),
    (["--kind", "message", "--tag", "zzz"], "--tag zzz leaves nothing to recall"),
])
def test_recall_says_which_filter_left_nothing(shell_store, capsys, filters, note):
    code, out, err = run(["--store", shell_store, "recall", "ERR-4012", "--mode", "keyword",
                          "--json", *filters], capsys)
    assert code == 0 and json.loads(out)["hits"] == []
    assert err == f"braidlog: note: {note}\n"


# -- without the recall extra ----------------------------------------------------------------------

def blocked(modules: list[str], body: str, tmp_path) -> subprocess.CompletedProcess:
    """Run ``body`` in a fresh interpreter where ``modules`` cannot be imported (as if not installed)."""
    code = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "BRAIDLOG_STORE": str(tmp_path / "store")}, timeout=120)


def test_the_core_works_without_numpy_hnswlib_or_tantivy(tmp_path):
    p = blocked(["numpy", "hnswlib", "tantivy"], """
        import braidlog
        log = braidlog.MemoryLog()
        log.append(braidlog.delta("s", "message", {"text": "hi"}, vector=braidlog.Vector.of([0.5, -1.0])))
        try:
            log.append(braidlog.delta("s", "message", {"text": "x"}, vector=braidlog.Vector.of([1.0, float("nan")])))
        except braidlog.ValidationError as e:
            print(e)
        print(sorted(m for m in ("numpy", "hnswlib", "tantivy") if sys.modules.get(m) is not None))
    """, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["delta 0: vector.data: must be finite: element 1 is nan", "[]"]


@pytest.mark.parametrize("argv, missing, what", [
    (["recall", "deploy"], ["hnswlib"], "recall needs hnswlib, which is"),
    (["recall", "deploy"], ["numpy", "hnswlib"], "recall needs numpy and hnswlib, which are"),
    (["recall", "deploy", "--mode", "keyword"], ["tantivy"], "keyword recall needs tantivy, which is"),
    (["append", "in.jsonl", "--embed"], ["hnswlib"], "recall needs hnswlib, which is"),
])
def test_a_missing_extra_is_one_line_that_says_how_to_install_it(tmp_path, argv, missing, what):
    (tmp_path / "in.jsonl").write_text(json.dumps(LINES[0]) + "\n")
    assert main(["--store", str(tmp_path / "store"), "init"]) == 0
    assert main(["--store", str(tmp_path / "store"), "append", str(tmp_path / "in.jsonl")]) == 0
    p = blocked(missing, f"""
        from braidlog.cli import main
        sys.exit(main({argv!r}))
    """, tmp_path)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == f"braidlog: error: braidlog {what} not installed; install it with: pip install '.[recall]'\n"


def test_the_demo_skips_recall_with_one_line_without_the_extra(tmp_path):
    p = blocked(["hnswlib"], """
        from braidlog.cli import main
        sys.exit(main(["demo"]))
    """, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "recall: skipped: braidlog recall needs hnswlib, which is not installed; install it with: " \
           "pip install '.[recall]'" in " ".join(p.stdout.split())  # the demo's table may wrap it
