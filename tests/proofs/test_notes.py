"""Keys, signed checkpoint notes, offline verification, checkpoints kept beside the log."""

from __future__ import annotations

import base64
import hashlib
import os
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braidlog import BeadRef, BraidlogError, IntegrityError, LmdbLog, MemoryLog, Projection, Refs, ValidationError
from braidlog.proofs import (
    check_checkpoint,
    check_notes,
    generate,
    inclusion_proof,
    issue,
    open_note,
    read_key,
    refold,
    root,
    sign_note,
    state_proof,
    write_key,
)
from braidlog.proofs import verify as v
from tests.support import make_delta

# golang.org/x/mod/sumdb/note's own test vector (note_test.go): Ed25519 is deterministic, so the
# same key must give the same note, byte for byte.
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_TEXT = ("If you think cryptography is the answer to your problem,\n"
           "then you don't know what your problem is.\n")
GO_NOTE = GO_TEXT + ("\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FF"
                     "YC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n")


def key_file(tmp_path, text, mode=0o600):
    path = tmp_path / "k.key"
    path.write_text(text + "\n")
    os.chmod(path, mode)
    return path


def test_the_go_reference_key_and_note_byte_for_byte(tmp_path):
    key = read_key(key_file(tmp_path, GO_SKEY))
    assert str(key.verifier()) == GO_VKEY
    assert key.encode() == GO_SKEY
    assert sign_note(GO_TEXT, key) == GO_NOTE
    assert v._open_note(GO_NOTE, v.parse_verifier_key(GO_VKEY)) == GO_TEXT


def test_a_new_key_is_a_signed_note_key(tmp_path):
    key = generate("example.com/agent-log")
    vk = key.verifier()
    name, hexid, data = str(vk).split("+", 2)
    raw = base64.b64decode(data)
    assert name == "example.com/agent-log" and raw[0] == 1 and len(raw) == 33
    assert hexid == hashlib.sha256(name.encode() + b"\n\x01" + raw[1:]).digest()[:4].hex()
    assert v.parse_verifier_key(str(vk)) == vk
    path = tmp_path / "new.key"
    write_key(key, path)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert read_key(path) == key and "seed" not in repr(key)
    with pytest.raises(ValidationError, match="exists; a key file is never overwritten"):
        write_key(generate("other"), path)
    for bad in ("", "a b", "a+b", "tab\there"):
        with pytest.raises(ValidationError, match="no spaces and no '\\+'"):
            generate(bad)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o601])
def test_a_key_file_others_can_read_is_refused(tmp_path, mode):
    with pytest.raises(ValidationError, match=re.escape(
            f"has mode {mode:04o}: others can reach it (only its owner may); run `chmod 600")):
        read_key(key_file(tmp_path, GO_SKEY, mode))


def test_a_damaged_key_file_is_refused(tmp_path):
    for text in ("PRIVATE+KEY+PeterNeumann+c74f20a3", GO_VKEY, GO_SKEY.replace("c74f", "c75f"),
                 GO_SKEY[:-4]):
        with pytest.raises(ValidationError, match="--key"):
            read_key(key_file(tmp_path, text))


@pytest.fixture
def signed(tmp_path):
    store = MemoryLog()
    store.append_batch([make_delta(i) for i in range(37)])
    key = generate("example.com/log")
    return store, key, issue(store, key)


def test_a_checkpoint_note_is_the_c2sp_format(signed):
    store, key, note = signed
    lines = note.split("\n")
    assert lines[:4] == ["example.com/log", "37", base64.b64encode(root(store)).decode(), ""]
    assert lines[4].startswith("\u2014 example.com/log ") and lines[5] == "" and len(lines) == 6
    sig = base64.b64decode(lines[4].split(" ")[2])
    assert sig[:4] == key.verifier().id and len(sig) == 68
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    Ed25519PublicKey.from_public_bytes(key.verifier().public).verify(
        sig[4:], "\n".join(lines[:3]).encode() + b"\n")
    cp = v.open_checkpoint(note, str(key.verifier()))
    assert (cp.origin, cp.size, cp.root) == ("example.com/log", 37, root(store))
    assert store.notes() == [(37, note.encode())]


def test_a_note_altered_in_any_byte_is_refused(signed):
    _, key, note = signed
    raw = note.encode()
    vk = key.verifier()
    for i in range(len(raw)):
        for flip in (0x01, 0x20):
            altered = raw[:i] + bytes([raw[i] ^ flip]) + raw[i + 1:]
            with pytest.raises(v.VerificationError):
                v.open_checkpoint(altered, vk)


def test_a_truncated_note_or_signature_is_refused_with_a_clear_error(signed):
    _, key, note = signed
    vk = key.verifier()
    for cut in range(1, len(note)):
        with pytest.raises(v.VerificationError):
            v.open_checkpoint(note[:cut], vk)
    sig_line = note.split("\n")[4]
    short = note.replace(sig_line, sig_line[:-8])
    with pytest.raises(v.VerificationError, match="cut short|not base64|not canonical"):
        v.open_checkpoint(short, vk)
    shorter = note.replace(sig_line, sig_line[:-12] + "==")  # valid base64, 4 bytes fewer... roughly
    with pytest.raises(v.VerificationError, match="cut short or altered|not canonical"):
        v.open_checkpoint(shorter, vk)
    with pytest.raises(v.VerificationError, match="does not end with a newline: it was cut short"):
        v.open_checkpoint(note[:-1], vk)


def test_a_wrong_key_is_refused(signed):
    _, key, note = signed
    other = generate("example.com/log").verifier()
    with pytest.raises(v.VerificationError, match=f"no signature of key example.com/log\\+{other.id.hex()}"):
        v.open_checkpoint(note, other)
    impostor = v.VerifierKey(key.name, key.verifier().id, other.public)  # same name and id
    with pytest.raises(v.VerificationError, match="does not verify: the note was altered"):
        v.open_checkpoint(note, impostor)
    renamed = generate("example.com/other")
    with pytest.raises(v.VerificationError):
        v.open_checkpoint(note, renamed.verifier())
    with pytest.raises(IntegrityError, match="checkpoint refused: the note has no signature"):
        open_note(note, other)


def test_unknown_signatures_are_ignored_and_cosigned_notes_open(signed):
    store, key, note = signed
    witness = generate("witness.example/w1")
    text = note[:note.rfind("\n\n") + 1]
    cosigned = note + sign_note(text, witness)[len(text) + 1:]
    assert v.open_checkpoint(cosigned, key.verifier()).size == 37
    assert v.open_checkpoint(cosigned, witness.verifier(), origin="example.com/log").size == 37


def test_checkpoints_issued_must_stay_extended(signed):
    store, key, note = signed
    store.append_batch([make_delta(i) for i in range(37, 50)])
    second = issue(store, key)
    assert [cp.size for cp in check_notes(store)] == [37, 50]
    assert v.open_checkpoint(second, key.verifier()).size == 50
    # a note for a tree this log does not have: verify and the next issue refuse
    forged = sign_note(v.Checkpoint(key.name, 40, bytes(32)).text(), key)
    store.put_note(40, forged.encode())
    with pytest.raises(IntegrityError, match="the checkpoint example.com/log at size 40: the log's "
                       "first 40 records have root .*, not 0000.*: the log was rewritten"):
        check_notes(store)
    issue(store, key)  # issuing checks the last checkpoint only (it implies the ones before)
    # the last checkpoint covers records the log no longer holds: nothing more is signed
    store.put_note(60, sign_note(v.Checkpoint(key.name, 60, bytes(32)).text(), key).encode())
    with pytest.raises(IntegrityError, match="covers 60 records but the log holds 50: records "
                       "were lost"):
        issue(store, key)
    assert [size for size, _ in store.notes(last=True)] == [60]


def test_a_replica_checks_a_checkpoint_against_records_before_writing_them(signed):
    writer, key, _ = signed
    writer.append_batch([make_delta(i) for i in range(37, 60)])
    cp = open_note(issue(writer, key), str(key.verifier()))
    replica = MemoryLog()
    bodies = [writer.entry(s) for s in range(1, 61)]
    deltas = [r.delta for r in writer.scan()]
    salts = {r.delta.id: row.salt for r, row in zip(writer.scan(), writer.scan_rows(), strict=False)}
    replica.append_batch(deltas[:20], salts=salts)
    assert check_checkpoint(replica, cp, bodies[20:40]) is False  # not reached yet
    assert check_checkpoint(replica, cp, bodies[20:]) is True
    tampered = bodies[20:]
    tampered[30] = tampered[30][:-1] + b"x"
    with pytest.raises(IntegrityError, match="records 21..60 contradict the checkpoint example.com/log"):
        check_checkpoint(replica, cp, tampered)
    replica.append_batch(deltas[20:], salts=salts)
    assert check_checkpoint(replica, cp) is True
    other = MemoryLog()
    other.append_batch([make_delta(i) for i in range(60)])
    with pytest.raises(IntegrityError, match="the log was rewritten"):
        check_checkpoint(other, cp)


def test_verify_json_proofs_against_checkpoints(signed):
    store, key, note = signed
    cp = v.open_checkpoint(note, key.verifier())
    p = inclusion_proof(store, 9).to_json()
    bodies = {s: store.entry(s) for s in range(1, 38)}
    assert v.check_proof(p, [cp], bodies)["kind"] == "inclusion"
    bodies[9] = bodies[9] + b" "
    with pytest.raises(v.VerificationError, match="the record was altered"):
        v.check_proof(p, [cp], bodies)
    for field, value in (("root", "00" * 32), ("tree_size", 36), ("seq", 8), ("leaf_hash", "11" * 32)):
        with pytest.raises(v.VerificationError):
            v.check_proof({**p, field: value}, [cp])
    with pytest.raises(v.VerificationError, match="lowercase hex"):
        v.check_proof({**p, "root": p["root"].upper()}, [cp])


def test_a_state_proof_lists_the_entity_deltas_each_proved(tmp_path):
    store = LmdbLog(tmp_path / "s")
    rnd = random.Random(1)
    bead = Refs(beads=(BeadRef("bead-7", "used"),))
    marks = []
    for i in range(60):
        about = rnd.random() < 0.3
        store.append(make_delta(i, refs=bead if about else None))
        if about:
            marks.append(i + 1)
    counting = Projection("count", 1, 0, lambda n, d: n + 1)
    at = marks[len(marks) // 2]
    key = generate("example.com/log")
    cp = open_note(issue(store, key), key.verifier())
    proof = state_proof(store, counting, "bead-7", at)
    assert [r.seq for r in proof.records] == [m for m in marks if m <= at]
    assert refold(proof, counting) == len(proof.records) == refold(proof.to_json(), counting)
    j = proof.to_json()
    assert v.check_state_proof(j, [cp]) == len(proof.records)
    assert v.check_proof(j, [cp])["kind"] == "state"
    j["records"][0]["body"] = base64.b64encode(base64.b64decode(j["records"][0]["body"]) + b"!").decode()
    with pytest.raises(v.VerificationError, match=r"records\[0\] \(seq \d+\)"):
        v.check_state_proof(j, [cp])
    j = proof.to_json()
    j["consistency"]["path"] = j["consistency"]["path"][1:]
    with pytest.raises(v.VerificationError):
        v.check_state_proof(j, [cp])
    j = proof.to_json()
    j["records"] = j["records"][::-1]
    if len(j["records"]) > 1:
        with pytest.raises(v.VerificationError, match="seqs must increase"):
            v.check_state_proof(j, [cp])
    store.close()


def test_signing_without_cryptography_says_how_to_install(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_crypto(name, *a, **kw):
        if name.startswith("cryptography"):
            raise ImportError(name)
        return real(name, *a, **kw)
    monkeypatch.setattr(builtins, "__import__", no_crypto)
    with pytest.raises(BraidlogError, match=r"pip install '\.\[proofs\]'"):
        generate("x")
    with pytest.raises(v.VerificationError, match=r"pip install '\.\[proofs\]'"):
        v.open_checkpoint(GO_NOTE, GO_VKEY)


def test_the_verifier_module_imports_only_stdlib_and_cryptography():
    import ast
    import sys

    tree = ast.parse(open(v.__file__, encoding="utf-8").read())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module}
    relative = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    assert not relative
    assert imported - set(sys.stdlib_module_names) == {"cryptography"}


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=70),
                     lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=12), inner, max_size=5), max_leaves=12)
_KEY = generate("example.com/log")


@settings(max_examples=300, deadline=None)
@given(note=st.one_of(st.binary(max_size=300), st.text(max_size=300)),
       vkey=st.one_of(st.text(max_size=90), st.just(GO_VKEY)))
def test_arbitrary_notes_and_keys_raise_only_verification_errors(note, vkey):
    for key in (vkey, str(_KEY.verifier())):
        try:
            v.open_checkpoint(note, key)
        except v.VerificationError:
            pass


@settings(max_examples=300, deadline=None)
@given(proof=_json, body=st.none() | st.binary(max_size=20))
def test_arbitrary_proofs_raise_only_verification_errors(proof, body):
    cp = v.Checkpoint("example.com/log", 5, bytes(32))
    for p in (proof, {"leaf_hash": proof, "tree_size": 5, "seq": proof, "path": proof, "root": "00" * 32},
              {"old_size": proof, "new_size": 5, "old_root": proof, "new_root": "00" * 32, "path": []},
              {"records": proof, "at": 3, "tree_size": 5, "root": "00" * 32}):
        try:
            v.check_proof(p, [cp], None if body is None else {1: body})
        except v.VerificationError:
            pass


@settings(max_examples=100, deadline=None)
@given(seq=st.one_of(st.integers(), st.booleans(), st.text(max_size=5), st.none(), st.floats()),
       size=st.one_of(st.integers(), st.none(), st.text(max_size=3)))
def test_arbitrary_proof_arguments_raise_only_validation_errors(seq, size):
    store = _SMALL
    for call in (lambda: inclusion_proof(store, seq, size), lambda: root(store, size),
                 lambda: __import__("braidlog.proofs").proofs.consistency_proof(store, seq, size)):
        try:
            call()
        except ValidationError:
            pass


_SMALL = MemoryLog()
_SMALL.append_batch([make_delta(i) for i in range(9)])
