"""Exports of context receipts (``braidlog context export``) checked offline (``braidlog proof
verify --context``): signature, every inclusion proof (also by Go's own sumdb/tlog), disclosed
contents against their commitments, the context bytes against the digest; any changed byte
refused; erasure keeps receipts and exports verifiable."""

from __future__ import annotations

import base64
import json
import random
import re
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import braidlog
from braidlog import ValidationError, proofs
from braidlog.cli import main
from braidlog.proofs.context import check_context_export
from braidlog.proofs.context_export import export_context, write_context_export
from braidlog.proofs.verify import VerificationError
from braidlog.recall import Recall
from braidlog.receipts import read_receipt

CONTEXT = b"system: you are a helpful assistant\nmemory: she drinks her coffee black, no sugar\n"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def receipt(braid):
    """A recorded recall (3 hits) and a receipt of items the host chose (2 injected)."""
    index = Recall(braid)
    hits = index.recall("what coffee does she like", 3, record=True, run="run-7", turn="3",
                        model="a-model", context_bytes=CONTEXT)
    index.close()
    return hits


def test_an_export_verifies_offline_and_says_what_it_proves(braid, receipt, keys):
    key = proofs.read_key(keys[0])
    export = export_context(braid, receipt.context_id, key, disclose=True)
    text = json.dumps(export)
    got = check_context_export(text, keys[1], context_bytes=CONTEXT)
    assert (got["receipt_id"], got["receipt_seq"], got["run"], got["turn"], got["model"]) == \
        (receipt.context_id, 7, "run-7", "3", "a-model")
    assert got["tree_size"] == 7 and got["origin"] == "example.com/agent-memory"
    assert [i["seq"] for i in got["items"]] == [h.seq for h in receipt]
    assert [i["leaf_index"] for i in got["items"]] == [h.seq - 1 for h in receipt]
    assert all(i["disclosed"] for i in got["items"]) and got["context_checked"]
    assert got["items"][0]["payload"] == receipt[0].delta.payload
    private = export_context(braid, receipt.context_id, key)
    assert all("body" not in i for i in private["items"])
    got = check_context_export(json.dumps(private), keys[1])
    assert not any(i.get("disclosed") for i in got["items"]) and not got["context_checked"]


def test_export_and_verify_from_the_shell(store_path, keys, tmp_path, capsys):
    with braidlog.open(store_path, projections=[]) as b:
        hits = Recall(b).recall("peanuts", 2, record=True, run="r", turn="1", context_bytes=CONTEXT)
    (tmp_path / "vkey").write_text(keys[1] + "\n")
    (tmp_path / "ctx").write_bytes(CONTEXT)
    out_file = tmp_path / "receipt.json"
    code, out, err = run(capsys, "--store", store_path, "context", "export", hits.context_id,
                         "--key", keys[0], "--out", out_file, "--disclose")
    assert code == 0 and "2 item(s), contents disclosed" in out, err
    code, out, err = run(capsys, "proof", "verify", "--context", out_file, "--key", tmp_path / "vkey",
                         "--context-bytes", tmp_path / "ctx")
    assert code == 0 and out.startswith(f"ok: receipt {hits.context_id} (seq 7, run r, turn 1)"), err
    assert "the context bytes match its digest" in out and "2 disclosed" in out
    (tmp_path / "other").write_bytes(CONTEXT + b" ")
    code, out, err = run(capsys, "proof", "verify", "--context", out_file, "--key", tmp_path / "vkey",
                         "--context-bytes", tmp_path / "other")
    assert code == 1 and "are not those the receipt records" in err
    code, out, err = run(capsys, "--store", store_path, "context", "show", hits.context_id)
    assert code == 0 and "allergic to peanuts" in out and "run r, turn 1" in out
    code, out, err = run(capsys, "--store", store_path, "context", "show", hits.context_id, "--json")
    shown = json.loads(out)
    assert [i["seq"] for i in shown["items"]] == [h.seq for h in hits]
    code, out, err = run(capsys, "--store", store_path, "context", "replay", hits.context_id)
    assert code == 0 and out.startswith("same:")


def test_wrong_keys_and_other_logs_are_refused(braid, receipt, keys):
    export = json.dumps(export_context(braid, receipt.context_id, proofs.read_key(keys[0])))
    other = proofs.generate("example.com/agent-memory")  # same name, another key
    with pytest.raises(VerificationError, match="no signature of key"):
        check_context_export(export, str(other.verifier()))
    stranger = proofs.generate("example.org/other")
    with pytest.raises(VerificationError, match="no signature of key"):
        check_context_export(export, str(stranger.verifier()))
    with pytest.raises(VerificationError):
        check_context_export(export, "not a key")


def test_any_changed_byte_is_refused(braid, receipt, keys):
    """Each byte of the file, changed, makes the export fail (unless the JSON it holds stays the
    same value: whitespace for whitespace). A sample of positions across the whole file, and
    every byte of the receipt's payload digest and the first item's proof."""
    text = json.dumps(export_context(braid, receipt.context_id, proofs.read_key(keys[0]),
                                     disclose=True), indent=1).encode()
    original = json.loads(text)
    check_context_export(text, keys[1], context_bytes=CONTEXT)
    rng = random.Random(38)
    proof_at = text.index(b"tlog_proof", text.index(b'"items"'))
    positions = set(rng.sample(range(len(text)), 300)) | set(range(proof_at, proof_at + 400))
    refused = 0
    for at in sorted(positions):
        for new in {rng.randrange(256), text[at] ^ 1}:
            if new == text[at]:
                continue
            changed = text[:at] + bytes([new]) + text[at + 1:]
            try:
                same = json.loads(changed) == original
            except ValueError:
                same = False
            if same:
                continue
            with pytest.raises((VerificationError, ValueError)):
                check_context_export(changed, keys[1], context_bytes=CONTEXT)
            refused += 1
    assert refused > 500


@pytest.mark.parametrize("edit, message", [
    (lambda e: e["items"].pop(), "lists 2 item"),
    (lambda e: e["items"].reverse(), "not the receipt's items[0]"),
    (lambda e: e["items"][0].update(score=0.99), "not the receipt's items[0]"),
    (lambda e: e["items"][0].update(tlog_proof=e["receipt"]["tlog_proof"]), "items[0]"),
    (lambda e: e["items"][0].update(entry=e["items"][1]["entry"]), "items[0]"),
    (lambda e: e["items"][0]["delta"]["payload"].update(text="tea"), "the export was edited"),
    (lambda e: e["receipt"].pop("salt"), "lacks"),
    (lambda e: e.update(disclosed=False), "carries bytes"),
    (lambda e: e.update(extra=1), "no export writes"),
    (lambda e: e.update(checkpoint=e["checkpoint"].replace("\n\n", "\n\nx")), "checkpoint"),
    (lambda e: e["receipt"].update(delta_id=e["items"][0]["delta_id"]), "committed form"),
])
def test_edits_are_refused_naming_what_failed(braid, receipt, keys, edit, message):
    export = export_context(braid, receipt.context_id, proofs.read_key(keys[0]), disclose=True)
    edit(export)
    with pytest.raises(VerificationError, match=re.escape(message)):
        check_context_export(json.dumps(export), keys[1])


def test_bad_requests_get_a_typed_error_and_write_nothing(braid, receipt, keys, tmp_path):
    key = proofs.read_key(keys[0])
    head = braid.head().seq
    for ref, rule in [(braidlog.new_id(), "no delta"), (1, "not a context receipt"),
                      (99, "no record at seq 99")]:
        with pytest.raises(ValidationError, match=rule):
            write_context_export(braid, ref, key, tmp_path / "x.json")
    with pytest.raises(ValidationError, match="size"):
        export_context(braid, receipt.context_id, key, size=3)
    with pytest.raises(ValidationError, match="key"):
        export_context(braid, receipt.context_id, "k")
    assert not (tmp_path / "x.json").exists() and braid.head().seq == head
    with pytest.raises(VerificationError, match="records no digest"):
        rid = braid.record_context([1], run="r", turn="t")
        check_context_export(json.dumps(export_context(braid, rid, key)), keys[1], context_bytes=b"x")


def test_erasure_keeps_receipts_and_exports_verifiable(store_path, keys, capsys, tmp_path):
    key = proofs.read_key(keys[0])
    with braidlog.open(store_path, projections=[]) as b:
        hits = Recall(b, directory=False).recall("coffee", 2, record=True, run="r", turn="1")
        before = json.dumps(export_context(b, hits.context_id, key, disclose=True))
        cited = hits[0].seq
        b.erase(seqs=[cited], reason="the user asked (ticket 42)")
        assert read_receipt(b, hits.context_id).receipt.items[0].seq == cited  # the receipt stays
        after = export_context(b, hits.context_id, key, disclose=True)
    # the copy made before still verifies, with the content it disclosed
    old = check_context_export(before, keys[1])
    assert old["items"][0]["payload"] == {"text": "she drinks her coffee black, no sugar"}
    # one made after shows the item erased, with the erasure's own record proved
    new = check_context_export(json.dumps(after), keys[1])
    assert new["items"][0]["erased"] == 8 and "payload" not in new["items"][0]
    assert new["items"][1]["disclosed"]
    assert "black, no sugar" not in json.dumps(after)  # the erased content is gone
    code, out, _ = run(capsys, "--store", store_path, "context", "show", hits.context_id)
    assert code == 0 and "(erased by seq 8)" in out
    with braidlog.open(store_path, projections=[]) as b, pytest.raises(ValidationError, match="erased at seq 8"):
        export_context(b, hits.context_id, key, size=7)  # a tree before the erasure cannot prove it
    forged = json.loads(json.dumps(after))
    forged["items"][0]["erased"] = forged["items"][1].get("erased") or {"seq": 1}
    with pytest.raises(VerificationError, match="erased"):
        check_context_export(json.dumps(forged), keys[1])


def test_go_sumdb_tlog_accepts_every_proof_inside(braid, receipt, keys, tmp_path, tlogcheck):
    export = export_context(braid, receipt.context_id, proofs.read_key(keys[0]))
    (tmp_path / "vkey").write_text(keys[1] + "\n")
    for n, rec in enumerate([export["receipt"], *export["items"]]):
        (tmp_path / f"p{n}").write_text(rec["tlog_proof"])
        (tmp_path / f"e{n}").write_bytes(base64.b64decode(rec["entry"]))
        done = subprocess.run([str(tlogcheck), "tlogproof", str(tmp_path / "vkey"), str(tmp_path / f"p{n}"),
                               str(tmp_path / f"e{n}")], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.startswith("ok"), done.stdout + done.stderr


def _paths(value, path=()):
    """Every path into a JSON value, with the value there."""
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                    | st.text(max_size=20), lambda c: st.lists(c, max_size=3)
                    | st.dictionaries(st.text(max_size=8), c, max_size=3), max_leaves=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_value_anywhere_gets_a_verification_error(braid, receipt, keys, data):
    """Whatever value replaces whatever part of an export, the check raises VerificationError
    (never another exception) or, when the value is the same, passes."""
    export = export_context(braid, receipt.context_id, proofs.read_key(keys[0]), disclose=True)
    paths = [p for p, _ in _paths(export) if p]
    path = data.draw(st.sampled_from(paths))
    new = data.draw(JSON)
    target = export
    for part in path[:-1]:
        target = target[part]
    old = target[path[-1]]
    target[path[-1]] = new
    try:
        check_context_export(json.dumps(export), keys[1])
    except VerificationError:
        return
    assert new == old
