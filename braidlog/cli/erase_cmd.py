"""``braidlog erase``: drop a subject's payloads from every file of the store, keep envelopes and
commitments, and sign a receipt; ``braidlog proof verify --receipt`` checks one."""

from __future__ import annotations

import os
from typing import IO, Any

from ..errors import IntegrityError, ValidationError
from .util import json_flag, open_for_state, open_store, refuse_on_replica, write_json


def register(sub: Any) -> None:
    p = sub.add_parser(
        "erase", help="erase deltas' payloads (a braid, an entity or seqs) from the store",
        description="Drop the payload, salt, vector and derived text of the deltas selected "
        "(--braid, --refers, --seq; they add up) from every file of the store's directory; "
        "their envelopes and commitments stay, so the chain, the Merkle tree and every proof "
        "issued before still verify. One `erased` delta records it, naming the seqs and the "
        "reason. Needs the store alone: refused while another process has it open. "
        "docs/forgetting.md says what is promised and what is not.")
    p.add_argument("--braid", default=None, help="erase every delta of this braid")
    p.add_argument("--refers", default=None, metavar="ID",
                   help="erase every delta that refers to this entity id")
    p.add_argument("--seq", action="append", default=None, metavar="SEQ",
                   help="erase the delta at SEQ (repeat, or SEQ,SEQ,...)")
    p.add_argument("--reason", required=True,
                   help="why (kept in the log in clear: write it without personal data)")
    p.add_argument("--key", default=None, metavar="FILE",
                   help="a signing key (`braidlog keygen`) to sign a receipt with")
    p.add_argument("--receipt", default=None, metavar="FILE",
                   help="where to write the signed receipt (needs --key; never overwritten)")
    json_flag(p)
    p.set_defaults(handler=cmd_erase)


def _seqs(values: list[str] | None) -> list[int] | None:
    if values is None:
        return None
    out = []
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if not part.isdigit():
                raise ValidationError("--seq", f"must be whole numbers (SEQ or SEQ,SEQ), not {part!r}")
            out.append(int(part))
    return out


def cmd_erase(args: Any, out: IO[str]) -> int:
    if (args.key is None) != (args.receipt is None):
        raise ValidationError("--receipt" if args.receipt is None else "--key",
                              "--key and --receipt go together: the receipt is signed with the key")
    key = None
    if args.key is not None:
        from ..proofs import read_key

        key = read_key(args.key)
        if os.path.exists(args.receipt):
            raise ValidationError("--receipt", f"{args.receipt} exists; a receipt is never "
                                  "overwritten (give a new path)")
    seqs = _seqs(args.seq)
    refuse_on_replica(args, "erase")
    braid = open_for_state(args, lazy=True)
    try:
        report = braid.erase(braid=args.braid, refers=args.refers, seqs=seqs, reason=args.reason)
        note = None
        if key is not None:
            from ..proofs.receipt import issue_receipt

            note = issue_receipt(braid.log, report, key)
    finally:
        braid.close()
    if note is not None:
        fd = os.open(args.receipt, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(note)
    if args.json:
        write_json(out, {"erased": list(report.seqs), "by": report.seq,
                         "skipped": list(report.skipped), "receipt": args.receipt})
    else:
        out.write(f"erased {len(report.seqs)} delta(s) of {report.what} by seq {report.seq}"
                  + (f" ({len(report.skipped)} erased already)" if report.skipped else "") + "\n")
        if note is not None:
            out.write(f"receipt: {args.receipt}\n")
    return 0


def cmd_verify_receipt(args: Any, out: IO[str]) -> int:
    """``braidlog proof verify --receipt FILE --key VKEY [--store]``: the signature, the
    consistency of the trees before and after, and (with a store) that the store is the one
    it speaks of and holds the erasure it states."""
    from ..proofs import verify
    from ..proofs.receipt import check_receipt, check_receipt_store

    key_text = args.key
    if "+" not in key_text and os.path.exists(key_text):
        with open(key_text, encoding="utf-8", errors="replace") as f:
            key_text = f.read()
    key = verify.parse_verifier_key(key_text)
    with open(args.receipt, "rb") as f:
        note = f.read()
    try:
        receipt = check_receipt(note, key)
    except verify.VerificationError as e:
        raise IntegrityError(f"receipt refused: {e}") from None
    checked_store = False
    if getattr(args, "against_store", False):
        with open_store(args) as store:
            check_receipt_store(store, receipt)
        checked_store = True
    if args.json:
        write_json(out, {"ok": True, "erased": [s for s, _ in receipt.erased],
                         "by": receipt.erasure_seq, "before": receipt.before_size,
                         "after": receipt.after_size, "reason_sha256": receipt.reason_sha256,
                         "store": checked_store})
    else:
        out.write(f"ok: {len(receipt.erased)} record(s) erased by seq {receipt.erasure_seq}; the "
                  f"tree of size {receipt.after_size} extends the tree of size "
                  f"{receipt.before_size}" + ("; the store holds both" if checked_store else "")
                  + "\n")
    return 0
