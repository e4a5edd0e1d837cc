"""Witness cosignatures (C2SP tlog-cosignature) and policies (C2SP tlog-policy): real keys, real
stores, real notes; a replica that cosigns against the real nats-server."""

from __future__ import annotations

import base64
import json
import os

import pytest

pytest.importorskip("cryptography")

from braidlog import LmdbLog
from braidlog.cli import main
from braidlog.errors import IntegrityError, ValidationError
from braidlog.proofs import consistency_proof, generate, issue, write_key
from braidlog.proofs import cosign as c
from braidlog.proofs import verify as v
from tests.support import make_delta

LOG = "example.com/agent-log"


@pytest.fixture
def log_key():
    return generate(LOG)


@pytest.fixture
def witnesses():
    return [generate(f"w{i}.example") for i in range(3)]


def open_store(path, n):
    store = LmdbLog(path, durable=False)
    store.append_batch([make_delta(i) for i in range(n)])
    return store


def policy_text(log_key, witnesses, k="2"):
    lines = ["# two of three replicas", f"log {log_key.verifier()}"]
    lines += [f"witness r{i} {c.witness_key(w)} https://w{i}.example" for i, w in enumerate(witnesses)]
    lines += [f"group replicas {k} r0 r1 r2", "quorum replicas"]
    return "\n".join(lines) + "\n"


def cosigned(note, *lines):
    return c.add_signatures(note, [line.rstrip("\n") for line in lines])


def flip(text: str, at: int) -> str:
    raw = bytearray(text.encode())
    raw[at] ^= 0x01
    return raw.decode("utf-8", errors="replace")


def test_a_cosignature_is_the_c2sp_line_and_verifies(tmp_path, log_key, witnesses):
    with open_store(tmp_path / "s", 5) as store:
        note = issue(store, log_key)
    w = witnesses[0]
    line = c.cosign(note, w, log_key=log_key.verifier(), when=1_700_000_000)
    dash, name, data = line.rstrip("\n").split(" ")
    assert dash == "\u2014" and name == w.name and line.endswith("\n")
    sig = base64.b64decode(data)
    wk = c.witness_key(w)
    assert len(sig) == 76 and sig[:4] == wk.id
    assert int.from_bytes(sig[4:12], "big") == 1_700_000_000
    import hashlib
    assert wk.id == hashlib.sha256(w.name.encode() + b"\n\x04" + wk.public).digest()[:4]
    # the signed message, byte for byte
    body = note[:note.rfind("\n\n") + 1]
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    Ed25519PublicKey.from_public_bytes(wk.public).verify(
        sig[12:], b"cosignature/v1\ntime 1700000000\n" + body.encode())
    full = cosigned(note, line)
    assert c.verify_cosignature(full, str(wk)) == 1_700_000_000
    assert v.open_checkpoint(full, log_key.verifier()).size == 5  # still a valid log note
    assert c.parse_witness_key(str(wk)) == wk


def test_an_altered_byte_of_a_cosignature_or_note_is_refused(tmp_path, log_key, witnesses):
    with open_store(tmp_path / "s", 5) as store:
        note = issue(store, log_key)
    wk = c.witness_key(witnesses[0])
    full = cosigned(note, c.cosign(note, witnesses[0], log_key=log_key.verifier()))
    line_at = full.rindex(witnesses[0].name) + len(witnesses[0].name) + 1
    refused = 0
    for at in range(line_at + 8, len(full.encode()) - 1):  # past the key id's base64
        bad = flip(full, at)
        if bad == full:
            continue
        with pytest.raises(IntegrityError, match="cosignature of w0.example"):
            c.verify_cosignature(bad, wk)
        refused += 1
    assert refused > 90
    bad_note = full.replace("\n5\n", "\n6\n", 1)
    with pytest.raises(IntegrityError, match="does not verify"):
        c.verify_cosignature(bad_note, wk)
    with pytest.raises(IntegrityError, match="no cosignature of w1.example"):
        c.verify_cosignature(full, c.witness_key(witnesses[1]))


def test_an_inconsistent_checkpoint_is_not_cosigned(tmp_path, log_key, witnesses):
    w = witnesses[0]
    with open_store(tmp_path / "a", 5) as a:
        first = issue(a, log_key)
        a.append_batch([make_delta(i) for i in range(5, 9)])
        second = issue(a, log_key)
        proof = consistency_proof(a, 5, 9).path
    last = v.open_checkpoint(first, log_key.verifier())
    assert c.cosign(second, w, log_key=log_key.verifier(), last=last, proof=proof)
    # the log's key signs a fork: same first size, other records
    with open_store(tmp_path / "b", 9) as b:
        b.append_batch([make_delta(100 + i) for i in range(3)])
        fork = issue(b, log_key)
        fork_proof = consistency_proof(b, 5, 12).path
    with pytest.raises(IntegrityError, match="not consistent with the one cosigned at size 5"):
        c.cosign(fork, w, log_key=log_key.verifier(), last=last, proof=fork_proof)
    with pytest.raises(IntegrityError, match="not consistent"):
        c.cosign(fork, w, log_key=log_key.verifier(), last=last, proof=proof)
    other = generate("other.example/log")
    with pytest.raises(IntegrityError, match="not cosigned: the note has no signature of key"):
        c.cosign(second, w, log_key=other.verifier())


def test_a_policy_counts_cosignatures_per_group(tmp_path, log_key, witnesses):
    with open_store(tmp_path / "s", 5) as store:
        note = issue(store, log_key)
    policy = c.parse_policy(policy_text(log_key, witnesses))
    assert policy.groups == {"replicas": (2, ("r0", "r1", "r2"))} and policy.quorum == "replicas"
    one = cosigned(note, c.cosign(note, witnesses[0], log_key=log_key.verifier()))
    with pytest.raises(IntegrityError, match=r"lacks its quorum: group 'replicas' needs 2 of "
                       r"r0, r1, r2; cosigned by r0 \(r1: the note has no cosignature"):
        c.check_policy(one, policy)
    two = cosigned(one, c.cosign(note, witnesses[2], log_key=log_key.verifier()))
    got = c.check_policy(two, policy)
    assert got.cosigned == ("r0", "r2") and got.checkpoint.size == 5
    # an altered cosignature no longer counts: the quorum fails, naming it
    sig = two.rstrip("\n").rsplit(" ", 1)[1]
    bad = two.replace(sig, sig[:20] + ("A" if sig[20] != "A" else "B") + sig[21:])
    with pytest.raises(IntegrityError, match="r2: the cosignature of w2.example.* does not verify"):
        c.check_policy(bad, policy)
    assert c.check_policy(note, policy_text(log_key, witnesses).replace(
        "quorum replicas", "quorum none")).cosigned == ()
    other = generate(LOG)  # same name, another key
    with pytest.raises(IntegrityError, match="not signed by a log of the policy"):
        c.check_policy(two, policy_text(other, witnesses))


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("group replicas 2", "group replicas 4"), "line 6: group 'replicas': the "
     "threshold must be all, any or 1 to 3"),
    (lambda t: t.replace("quorum replicas", "quorum nobody"), "quorum 'nobody' names no"),
    (lambda t: t.replace("quorum replicas\n", ""), "has no quorum line"),
    (lambda t: t.replace(" r2\n", " r9\n", 1), "members must be distinct witnesses"),
    (lambda t: t.replace("witness r1", "witnes r1"), "line 4: 'witnes"),
    (lambda t: t.split("\n", 2)[2], "names no log"),
])
def test_a_bad_policy_is_refused_naming_the_line(log_key, witnesses, edit, message):
    with pytest.raises(ValidationError, match=message):
        c.parse_policy(edit(policy_text(log_key, witnesses)))


def test_an_altered_byte_of_a_policy_key_is_refused(log_key, witnesses):
    text = policy_text(log_key, witnesses)
    for word in (str(log_key.verifier()), str(c.witness_key(witnesses[1]))):
        at = text.index(word) + len(word) - 10
        for pos in (text.index(word) + 2, text.index(word) + len(word.split("+")[0]) + 3, at):
            bad = text[:pos] + ("x" if text[pos] != "x" else "y") + text[pos + 1:]
            with pytest.raises(ValidationError, match="line [24]: .*(key|id|base64|Ed25519)"):
                c.parse_policy(bad)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_checkpoint_collect_and_proof_verify_policy(tmp_path, capsys, log_key, witnesses):
    keyfile, store_path, cosigs = tmp_path / "log.key", tmp_path / "s", tmp_path / "cosigs"
    write_key(log_key, keyfile)
    with open_store(store_path, 7) as store:
        note = issue(store, log_key)
    cosigs.mkdir()
    for w in witnesses[:2]:
        line = c.cosign(note, w, log_key=log_key.verifier())
        (cosigs / f"{w.name}.cosig").write_text(cosigned(note, line))
    (tmp_path / "policy").write_text(policy_text(log_key, witnesses))
    code, out, err = run(capsys, "--store", store_path, "checkpoint", "--key", keyfile,
                         "--collect", "--from", cosigs)
    assert code == 0, err
    assert out.count("\u2014 ") == 3 and out.startswith(note[:note.rfind("\n\n") + 2])
    (tmp_path / "note").write_text(out)
    code, got, err = run(capsys, "proof", "verify", tmp_path / "note", "--policy",
                         tmp_path / "policy")
    assert code == 0, err
    assert got == (f"ok: the checkpoint of {LOG} at size 7 is cosigned by its quorum (r0, r1)\n")
    # without the quorum, a byte altered in the note or in the policy: refused, exit 1
    (tmp_path / "plain").write_text(note)
    code, _, err = run(capsys, "proof", "verify", tmp_path / "plain", "--policy",
                       tmp_path / "policy")
    assert code == 1 and "lacks its quorum" in err
    (tmp_path / "altered").write_text(out.replace("\n7\n", "\n8\n", 1))
    code, _, err = run(capsys, "proof", "verify", tmp_path / "altered", "--policy",
                       tmp_path / "policy")
    assert code == 1 and "not signed by a log of the policy" in err
    (tmp_path / "policy").write_text(policy_text(log_key, witnesses, k="3"))
    code, _, err = run(capsys, "proof", "verify", tmp_path / "note", "--policy",
                       tmp_path / "policy")
    assert code == 1 and "needs 3 of r0, r1, r2; cosigned by r0, r1 (r2:" in err
    # collecting from a directory with nothing for this log
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(capsys, "--store", store_path, "checkpoint", "--key", keyfile,
                       "--collect", "--from", empty)
    assert code == 1 and "holds no note cosigned for log" in err


# -- a replica that cosigns, against the real nats-server ------------------------------------

nats = pytest.importorskip("nats")

from braidlog.replication import Replica, Shipper, SyncLog  # noqa: E402  (after the importorskip above)
from tests.support import ROOT  # noqa: E402  (after the importorskip above)


def test_a_replica_cosigns_each_checkpoint_it_applied(stores, open_stream, tmp_path, capsys,
                                                      log_key, witnesses):
    writer, stream = stores("w"), open_stream()
    log = SyncLog(writer, stream)
    for i in range(1, 9):
        log.append(make_delta(i))
    issue(writer, log_key)
    Shipper(writer, stream).ship(timeout=10)
    opener = lambda note: v.open_checkpoint(note, log_key.verifier())  # noqa: E731  (a one-line callback)
    with pytest.raises(ValidationError, match="checkpoints="):
        Replica(stores("x"), stream, witness_key=witnesses[0], cosign_dir=str(tmp_path / "x"))
    dirs = [tmp_path / f"cosig{i}" for i in range(2)]
    replicas = [Replica(stores(f"r{i}"), stream, checkpoints=opener, witness_key=witnesses[i],
                        cosign_dir=str(dirs[i])) for i in range(2)]
    for r in replicas:
        assert r.catch_up(timeout=10) == writer.head() and r.witness.cosigned == 1
    assert sorted(os.listdir(dirs[0])) == ["8.cosig", "last"]
    for i in range(4):
        log.append(make_delta(100 + i))
    issue(writer, log_key)
    Shipper(writer, stream).ship(timeout=10)
    for r in replicas:
        r.catch_up(timeout=10)
        assert r.witness.cosigned == 2 and r.witness.last.size == 12
    # a restarted witness remembers the last checkpoint it cosigned
    again = Replica(replicas[0].store, stream, checkpoints=opener, witness_key=witnesses[0],
                    cosign_dir=str(dirs[0]))
    assert again.witness.last.size == 12
    again.catch_up(timeout=10)
    assert again.witness.cosigned == 0
    # gather both replicas' cosignatures and check them against a 2-of-3 policy
    gathered = tmp_path / "gathered"
    gathered.mkdir()
    for i, d in enumerate(dirs):
        (gathered / f"r{i}.cosig").write_bytes((d / "12.cosig").read_bytes())
    writer.close()
    keyfile = tmp_path / "log.key"
    write_key(log_key, keyfile)
    code, note, err = run(capsys, "--store", tmp_path / "w", "checkpoint", "--key", keyfile,
                          "--collect", "--from", gathered)
    assert code == 0, err
    (tmp_path / "note").write_text(note)
    (tmp_path / "policy").write_text(policy_text(log_key, witnesses))
    code, out, err = run(capsys, "proof", "verify", tmp_path / "note", "--policy",
                         tmp_path / "policy", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["cosigned"] == ["r0", "r1"] and got["tree_size"] == 12 and got["ok"] is True


def test_the_policy_in_the_docs_parses():

    doc = (ROOT / "docs" / "proofs.md").read_text(encoding="utf-8")
    block = doc[doc.index("\nlog example.com/agent-log") + 1:]
    block = block[:block.index("```")]
    policy = c.parse_policy(block)
    assert policy.quorum == "replicas" and policy.groups["replicas"][0] == 2
    assert sorted(policy.witnesses) == ["r0", "r1", "r2"]
