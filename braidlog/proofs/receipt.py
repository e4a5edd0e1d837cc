"""Erasure receipts: a signed checkpoint of the log after an erasure that also states what was
erased, so that anyone holding the log's verifier key can check that nothing else changed.

A receipt is a C2SP signed note in the checkpoints' key and format: a tlog-checkpoint of the
tree after the erasure (origin, size, base64 root) whose extension lines say ::

    braidlog-erasure <seq of the erased delta> <SHA-256 of the reason, hex>
    before <tree size> <base64 root>
    consistency <base64 hash>            (the RFC 9162 consistency path, before -> after)
    erased <seq> <commitment, hex>       (one line per erased record, seqs ascending)

A standard checkpoint verifier reads it as the checkpoint after the erasure. ``check_receipt``
also checks the consistency path: the tree after extends the tree before, so every record
before is as it was (an erasure keeps every leaf), and the erased delta is the last record.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from . import verify as v

__all__ = ["Receipt", "receipt_text", "check_receipt", "issue_receipt", "check_receipt_store", "TAG"]

TAG = "braidlog-erasure"


@dataclass(frozen=True)
class Receipt:
    """What a receipt states, once its signature and consistency path verified."""

    origin: str
    before_size: int
    before_root: bytes
    after_size: int
    after_root: bytes
    erasure_seq: int
    reason_sha256: str
    erased: tuple[tuple[int, bytes], ...]  # (seq, commitment)
    path: tuple[bytes, ...]


def receipt_text(r: Receipt) -> str:
    """The note text a receipt signs (a checkpoint of the tree after, with its extensions)."""
    ext = [f"{TAG} {r.erasure_seq} {r.reason_sha256}",
           f"before {r.before_size} {base64.b64encode(r.before_root).decode()}"]
    ext += [f"consistency {base64.b64encode(h).decode()}" for h in r.path]
    ext += [f"erased {seq} {c.hex()}" for seq, c in r.erased]
    return v.Checkpoint(r.origin, r.after_size, r.after_root, tuple(ext)).text()


def _b64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error:
        raw = b""
    if len(raw) != v.HASH_SIZE or base64.b64encode(raw).decode() != text:
        raise v.VerificationError(f"{what} {text!r} is not the base64 of {v.HASH_SIZE} bytes")
    return raw


def _int(text: str, what: str) -> int:
    if not text.isascii() or not text.isdigit() or (text != "0" and text[0] == "0"):
        raise v.VerificationError(f"{what} {text!r} is not a decimal without leading zeros")
    return int(text)


def check_receipt(note: bytes | str, key: v.VerifierKey | str) -> Receipt:
    """The receipt in a signed note, once ``key``'s signature verifies and its consistency path
    proves the tree after extends the tree before; VerificationError says what failed."""
    cp = v.open_checkpoint(note, key)
    lines = list(cp.extensions)
    if not lines or not lines[0].startswith(TAG + " "):
        raise v.VerificationError("the note is a checkpoint, not an erasure receipt (no "
                                  f"{TAG!r} line)")
    head = lines[0].split(" ")
    if len(head) != 3:
        raise v.VerificationError(f"the {TAG} line must be '{TAG} SEQ REASON-SHA256'")
    erasure_seq = _int(head[1], "the erasure seq")
    reason = head[2]
    if len(reason) != 64 or any(c not in "0123456789abcdef" for c in reason):
        raise v.VerificationError(f"the reason hash {reason!r} is not 64 lowercase hex digits")
    before = lines[1].split(" ") if len(lines) > 1 else []
    if len(before) != 3 or before[0] != "before":
        raise v.VerificationError("the second extension line must be 'before SIZE ROOT'")
    before_size, before_root = _int(before[1], "the size before"), _b64(before[2], "the root before")
    path: list[bytes] = []
    erased: list[tuple[int, bytes]] = []
    for line in lines[2:]:
        word, _, rest = line.partition(" ")
        if word == "consistency" and not erased:
            path.append(_b64(rest, "a consistency hash"))
        elif word == "erased":
            seq_text, _, commitment = rest.partition(" ")
            seq = _int(seq_text, "an erased seq")
            try:
                c = bytes.fromhex(commitment)
            except ValueError:
                c = b""
            if len(c) != 32 or c.hex() != commitment:
                raise v.VerificationError(f"the commitment of erased seq {seq} is not 64 "
                                          "lowercase hex digits")
            if erased and seq <= erased[-1][0]:
                raise v.VerificationError(f"erased seq {seq} is out of order")
            erased.append((seq, c))
        else:
            raise v.VerificationError(f"unexpected line in the receipt: {line!r}")
    if not erased:
        raise v.VerificationError("the receipt names no erased record")
    if erasure_seq != cp.size or before_size != cp.size - 1:
        raise v.VerificationError(
            f"the erased delta (seq {erasure_seq}) must be the one record the tree after (size "
            f"{cp.size}) adds to the tree before (size {before_size})")
    if erased[-1][0] > before_size:
        raise v.VerificationError(f"erased seq {erased[-1][0]} is past the tree before "
                                  f"(size {before_size})")
    v.verify_consistency(before_size, cp.size, before_root, cp.root, path)
    return Receipt(cp.origin, before_size, before_root, cp.size, cp.root, erasure_seq, reason,
                   tuple(erased), tuple(path))


def issue_receipt(store: Any, report: Any, key: Any, *, keep: bool = True) -> str:
    """The signed receipt of an erasure (``Braid.erase``'s report) with ``key``, the
    checkpoints' key; kept among the store's checkpoint notes (the log must extend it, as any
    checkpoint) unless ``keep=False``."""
    from .checkpoint import check_notes, sign_note
    from .prove import consistency_proof, root

    before, after = report.seq - 1, report.seq
    check_notes(store, last=True)
    r = Receipt(key.name, before, root(store, before), after, root(store, after), report.seq,
                report.reason_sha256, tuple(report.erased),
                tuple(consistency_proof(store, before, after).path))
    note = sign_note(receipt_text(r), key)
    if keep:
        store.put_note(after, note.encode())
    return note


def check_receipt_store(store: Any, receipt: Receipt) -> None:
    """IntegrityError unless ``store`` is the log the receipt speaks of and holds its erasure:
    its tree at the sizes before and after has the receipt's roots, the erased delta is at the
    receipt's seq and names those seqs, and each erased record has the commitment stated."""
    from ..errors import IntegrityError
    from .prove import check_tree_extends

    check_tree_extends(store, receipt.before_size, receipt.before_root,
                       "the receipt's tree before (a receipt for another store?)")
    check_tree_extends(store, receipt.after_size, receipt.after_root,
                       "the receipt's tree after (a receipt for another store?)")
    d = store.read(receipt.erasure_seq).delta
    if d.kind != "erased" or sorted(d.payload.get("seqs", ())) != [s for s, _ in receipt.erased]:
        raise IntegrityError(f"seq {receipt.erasure_seq} of the store is not the erasure the "
                             "receipt states", seq=receipt.erasure_seq)
    if d.payload.get("reason_sha256") != receipt.reason_sha256:
        raise IntegrityError("the reason of the erasure in the store is not the one the receipt "
                             "hashes", seq=receipt.erasure_seq)
    for seq, commitment in receipt.erased:
        e = store.read(seq).delta.erased
        if e is None or e.by != receipt.erasure_seq or e.commitment != commitment:
            raise IntegrityError(f"seq {seq} of the store is not erased by seq "
                                 f"{receipt.erasure_seq} with the commitment the receipt states",
                                 seq=seq)
