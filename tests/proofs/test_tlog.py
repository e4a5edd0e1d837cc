"""C2SP files: `show --entry`, tlog-proof files, tlog-tiles directories (written, incremental,
served), `proof verify --export` against edited readable deltas; and all of it checked by Go's
own golang.org/x/mod/sumdb/tlog and note (tests/proofs/go/tlogcheck.go), which know nothing of
braidlog."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import braidlog
from braidlog import LmdbLog
from braidlog.cli import main
from braidlog.proofs import verify as v
from braidlog.proofs.tiles import tile_path
from tests.support.tlog import GO_HOW, build_tlogcheck, have_go


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def logdir(tmp_path, capsys):
    """A store of 600 records, a signing key and its verifier key file."""
    store = str(tmp_path / "s")
    with LmdbLog(store) as log:
        log.append_batch([braidlog.delta("b", "message", {"text": f"hotel {i}"}) for i in range(600)])
    key, vkey = tmp_path / "k.key", tmp_path / "vkey"
    code, out, _ = run(capsys, "keygen", "example.com/log", "--out", str(key))
    vkey.write_text(out)
    return tmp_path, store, key, vkey


def test_show_entry_writes_the_committed_form(logdir, capsys):
    tmp, store, _, _ = logdir
    code, _, _ = run(capsys, "--store", store, "show", "5", "--entry", "--out", str(tmp / "e5"))
    with LmdbLog(store) as log:
        assert code == 0 and (tmp / "e5").read_bytes() == log.entry(5)
        want = log.entry(7)
    got = subprocess.run([sys.executable, "-m", "braidlog", "--store", store, "show", "7",
                          "--entry"], capture_output=True, check=True).stdout
    assert got == want and v.read_entry(got)["seq"] == 7


def _tlog_proof(capsys, store, key, *more) -> str:
    code, out, err = run(capsys, "--store", store, "prove", "inclusion", *more, "--tlog-proof",
                         "--key", str(key))
    assert code == 0, err
    return out


def test_a_tlog_proof_is_the_c2sp_format_and_verifies_offline(logdir, capsys):
    tmp, store, key, vkey = logdir
    text = _tlog_proof(capsys, store, key, "300")
    head, _, note = text.partition("\n\n")
    lines = head.split("\n")
    assert lines[0] == "c2sp.org/tlog-proof@v1" and lines[1] == "index 299"
    with LmdbLog(store) as log:
        p = braidlog.proofs.inclusion_proof(log, 300)
        (tmp / "e300").write_bytes(log.entry(300))
        (tmp / "e301").write_bytes(log.entry(301))
    assert [base64.b64decode(x) for x in lines[2:]] == p.path
    assert note.startswith("example.com/log\n600\n")
    (tmp / "p").write_text(text)
    code, out, err = run(capsys, "proof", "verify", str(tmp / "p"), "--key", str(vkey),
                         "--entry", str(tmp / "e300"))
    assert (code, err) == (0, "") and out == (
        "ok: the entry is entry 299 (record 300) of the log example.com/log at size 600, signed "
        "by example.com/log\n")
    code, _, err = run(capsys, "proof", "verify", str(tmp / "p"), "--key", str(vkey),
                       "--entry", str(tmp / "e301"))
    assert code == 1 and "the entry is not entry 299 of the checkpoint's tree" in err
    small = _tlog_proof(capsys, store, key, "3", "--size", "10")
    assert small.split("\n")[1] == "index 2" and "\nexample.com/log\n10\n" in small


def test_any_altered_byte_of_a_tlog_proof_is_refused_naming_what_failed(logdir, capsys):
    tmp, store, key, vkey = logdir
    text = _tlog_proof(capsys, store, key, "41")
    with LmdbLog(store) as log:
        entry = log.entry(41)
    v.check_tlog_proof(text, vkey.read_text(), entry)
    raw = text.encode()
    refused = set()
    for i in range(len(raw)):
        for flip in (0x01, 0x20):
            bad = raw[:i] + bytes([raw[i] ^ flip]) + raw[i + 1:]
            with pytest.raises(v.VerificationError) as e:
                v.check_tlog_proof(bad, vkey.read_text(), entry)
            refused.add(str(e.value).split(":")[0][:40])
    assert len(refused) >= 5  # the header, index, path, note and signature each say their part
    (tmp / "e").write_bytes(entry)
    other = tmp / "o.key"
    run(capsys, "keygen", "other.example/log", "--out", str(other))
    (tmp / "p").write_text(_tlog_proof(capsys, store, other, "41"))  # another log's proof
    code, _, err = run(capsys, "proof", "verify", str(tmp / "p"), "--key", str(vkey),
                       "--entry", str(tmp / "e"))
    assert code == 1 and "the tlog-proof's checkpoint: the note has no signature of key " \
        "example.com/log" in err


def test_consistency_json_keeps_old_size_tree_size_and_path(logdir, capsys):
    _, store, _, _ = logdir
    code, out, _ = run(capsys, "--store", store, "prove", "consistency", "100", "600", "--json")
    got = json.loads(out)
    assert (got["old_size"], got["tree_size"], got["new_size"]) == (100, 600, 600)
    assert all(len(bytes.fromhex(h)) == 32 for h in got["path"])


def test_proof_verify_export_refuses_an_edited_readable_delta_naming_the_field(logdir, capsys):
    tmp, store, key, vkey = logdir
    run(capsys, "--store", store, "export", str(tmp / "x.jsonl"))
    code, out, _ = run(capsys, "--store", store, "prove", "inclusion", "5", "--json")
    (tmp / "inc.json").write_text(out)
    code, note, _ = run(capsys, "--store", store, "checkpoint", "--key", str(key))
    (tmp / "cp").write_text(note)
    argv = ["proof", "verify", str(tmp / "inc.json"), "--checkpoint", str(tmp / "cp"), "--key",
            str(vkey), "--export"]
    code, out, err = run(capsys, *argv, str(tmp / "x.jsonl"))
    assert code == 0, err
    text = (tmp / "x.jsonl").read_text()
    for old, new, field in (('"hotel 3"', '"motel 3"', "payload.text"),
                            ('"confidence":0.7', '"confidence":0.9', "confidence"),
                            ('"braid_id":"b"', '"braid_id":"c"', "braid_id")):
        assert old in text
        (tmp / "y.jsonl").write_text(text.replace(old, new, 1))
        code, _, err = run(capsys, *argv, str(tmp / "y.jsonl"))
        assert code == 1 and f"the readable delta's {field} is" in err and \
            "the export was edited" in err, err


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_tiles_are_the_c2sp_layout_and_a_later_run_adds_only_what_is_new(logdir, capsys):
    tmp, store, key, vkey = logdir
    out_dir = tmp / "tiles"
    code, out, err = run(capsys, "--store", store, "tiles", str(out_dir), "--key", str(key))
    assert code == 0, err
    files = _files(out_dir)
    assert sorted(files) == ["checkpoint", "tile/0/000", "tile/0/001", "tile/0/002.p/88",
                             "tile/1/000.p/2", "tile/entries/000", "tile/entries/001",
                             "tile/entries/002.p/88"]
    with LmdbLog(store) as log:
        entries = [r.entry for r in log.scan_rows()]
        leaves = [hashlib.sha256(b"\x00" + e).digest() for e in entries]
        assert files["tile/0/001"] == b"".join(leaves[256:512])
        assert files["tile/entries/002.p/88"] == b"".join(
            len(e).to_bytes(2, "big") + e for e in entries[512:])
        assert files["tile/1/000.p/2"] == b"".join(log.tree_hashes([(8, 0), (8, 1)]))
        log.append_batch([braidlog.delta("b", "message", {"text": f"more {i}"}) for i in range(200)])
    cp = v.open_checkpoint(files["checkpoint"], vkey.read_text())
    assert cp.size == 600
    before = {p: os.stat(out_dir / p).st_mtime_ns for p in files if p != "checkpoint"}
    code, out, _ = run(capsys, "--store", store, "tiles", str(out_dir), "--key", str(key), "--json")
    report = json.loads(out)
    assert (report["size"], report["since"], report["tiles"], report["bundles"]) == (800, 600, 3, 2)
    after = _files(out_dir)
    assert sorted(after) == ["checkpoint", "tile/0/000", "tile/0/001", "tile/0/002",
                             "tile/0/003.p/32", "tile/1/000.p/2", "tile/1/000.p/3",
                             "tile/entries/000", "tile/entries/001", "tile/entries/002",
                             "tile/entries/003.p/32"]  # a partial goes once its full one exists
    for p in ("tile/0/000", "tile/0/001", "tile/entries/000"):  # full ones are never rewritten
        assert os.stat(out_dir / p).st_mtime_ns == before[p]
    assert tile_path(0, 1234067) == "tile/0/x001/x234/067"
    assert tile_path("entries", 5, 7) == "tile/entries/005.p/7"
    other = tmp / "o.key"
    run(capsys, "keygen", "other.example/log", "--out", str(other))
    code, _, err = run(capsys, "--store", store, "tiles", str(out_dir), "--key", str(other))
    assert code == 1 and "is not a checkpoint of this log signed by other.example/log" in err


def _serve(store: str, directory: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "braidlog", "--store", store, "tiles",
                             str(directory), "--serve"], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith(f"serving {directory} at http://127.0.0.1:"), line
    return proc, line.split(" at ")[1].split(" ")[0]


def test_tiles_are_served_over_http_on_loopback(logdir, capsys):
    tmp, store, key, _ = logdir
    run(capsys, "--store", store, "tiles", str(tmp / "t"), "--key", str(key))
    proc, url = _serve(store, tmp / "t")
    try:
        with urllib.request.urlopen(url + "checkpoint") as r:
            assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
            assert r.read() == (tmp / "t" / "checkpoint").read_bytes()
        with urllib.request.urlopen(url + "tile/0/001") as r:
            assert r.headers["Content-Type"] == "application/octet-stream"
            assert "immutable" in r.headers["Cache-Control"]
            assert r.read() == (tmp / "t" / "tile" / "0" / "001").read_bytes()
        for bad in ("tile/0/", "tile/9/000", "../s/data.mdb"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(url + bad)
            assert e.value.code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# -- Go's own verifier ------------------------------------------------------------------------

@pytest.fixture(scope="session")
def tlogcheck(tmp_path_factory) -> Path:
    """tests/proofs/go/tlogcheck.go built with Debian's Go and golang.org/x/mod (installed with apt-get
    when missing, this process is root and apt works); the test is skipped otherwise."""
    if not have_go() and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-q", "golang-go", "golang-golang-x-mod-dev"]
        if subprocess.run(install, capture_output=True, timeout=900, env=env).returncode:
            # a fresh machine may have no package lists yet
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=600, env=env)
            subprocess.run(install, capture_output=True, timeout=900, env=env)
    if not have_go():
        pytest.skip(GO_HOW)
    return build_tlogcheck(tmp_path_factory.mktemp("go"))


def _go(checker: Path, *args) -> tuple[int, str]:
    done = subprocess.run([str(checker), *map(str, args)], capture_output=True, text=True,
                          timeout=120)
    return done.returncode, done.stdout + done.stderr


def test_go_sumdb_tlog_accepts_braidlogs_checkpoints_proofs_and_tiles(logdir, capsys, tlogcheck):
    tmp, store, key, vkey = logdir
    run(capsys, "--store", store, "tiles", str(tmp / "t"), "--key", str(key))
    (tmp / "old.note").write_bytes((tmp / "t" / "checkpoint").read_bytes())
    assert _go(tlogcheck, "checkpoint", vkey, tmp / "old.note")[1].startswith("ok checkpoint 600 ")
    for seq in (1, 256, 257, 600):
        (tmp / "p").write_text(_tlog_proof(capsys, store, key, str(seq)))
        run(capsys, "--store", store, "show", str(seq), "--entry", "--out", str(tmp / "e"))
        assert _go(tlogcheck, "tlogproof", vkey, tmp / "p", tmp / "e") == \
            (0, f"ok entry {seq - 1} in tree 600\n")
    run(capsys, "--store", store, "show", "2", "--entry", "--out", str(tmp / "e"))
    code, out = _go(tlogcheck, "tlogproof", vkey, tmp / "p", tmp / "e")  # another entry
    assert code == 1 and "invalid transparency proof" in out
    assert _go(tlogcheck, "tiles", vkey, tmp / "t") == (0, "ok tiles of tree 600\n")
    with LmdbLog(store) as log:
        log.append_batch([braidlog.delta("b", "message", {"text": f"more {i}"}) for i in range(300)])
    run(capsys, "--store", store, "tiles", str(tmp / "t"), "--key", str(key))
    assert _go(tlogcheck, "tiles", vkey, tmp / "t", tmp / "old.note") == (0, "ok tiles of tree 900\n")
    (tmp / "new.note").write_bytes((tmp / "t" / "checkpoint").read_bytes())
    code, out, _ = run(capsys, "--store", store, "prove", "consistency", "600", "900", "--json")
    (tmp / "c.json").write_text(out)
    assert _go(tlogcheck, "consistency", vkey, tmp / "old.note", tmp / "new.note",
               tmp / "c.json") == (0, "ok tree 900 extends tree 600\n")
    proc, url = _serve(store, tmp / "t")
    try:
        assert _go(tlogcheck, "tiles", vkey, url, tmp / "old.note") == (0, "ok tiles of tree 900\n")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    # an altered byte of a tile or a bundle, or another log's checkpoint: Go refuses it
    for path in ("tile/0/001", "tile/entries/002", "tile/1/000.p/3", "checkpoint"):
        f = tmp / "t" / path
        good = f.read_bytes()
        f.write_bytes(good[:-5] + bytes([good[-5] ^ 1]) + good[-4:])
        code, out = _go(tlogcheck, "tiles", vkey, tmp / "t")
        f.write_bytes(good)
        assert code == 1 and out.startswith("FAIL "), (path, out)
