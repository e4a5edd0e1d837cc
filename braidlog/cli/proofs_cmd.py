"""Verifiable-log commands: prove inclusion / consistency / state, keygen, checkpoint, proof verify."""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

from .. import proofs
from ..errors import ValidationError
from ..proofs import verify
from .util import open_for_state, open_store, parse_point, write_json


def register(sub: Any) -> None:
    p = sub.add_parser("prove", help="print a Merkle proof (inclusion, consistency, state)",
                       description="Print an RFC 9162 proof over the log's Merkle tree "
                       "(BLAKE3; docs/proofs.md).")
    kinds = p.add_subparsers(dest="proof", metavar="PROOF", required=True)

    q = kinds.add_parser("inclusion", help="record SEQ is in the tree of size N",
                         description="Print the inclusion proof of record SEQ (leaf SEQ-1) in the "
                         "tree of the first N records (default: the head).")
    q.add_argument("seq", type=int, help="the record's seq")
    q.add_argument("--size", type=int, default=None, help="the tree size (default: the head)")
    q.add_argument("--json", action="store_true", help="as JSON")
    q.set_defaults(handler=cmd_prove_inclusion)

    q = kinds.add_parser("consistency", help="the tree of size NEW extends the one of size OLD",
                         description="Print the consistency proof from the tree of the first OLD "
                         "records to the tree of the first NEW (default: the head).")
    q.add_argument("old", type=int, help="the older tree size")
    q.add_argument("new", type=int, nargs="?", default=None, help="the newer tree size (default: "
                   "the head)")
    q.add_argument("--json", action="store_true", help="as JSON")
    q.set_defaults(handler=cmd_prove_consistency)

    q = kinds.add_parser("state", help="one entity's deltas up to a seq, each proved",
                         description="Print what a third party needs to re-fold ENTITY's state in "
                         "PROJECTION as of --at SEQ: the deltas of the entity the projection reads, "
                         "up to SEQ, each with its bytes and an inclusion proof in the tree of "
                         "--size N (default: the head), and a consistency proof from SEQ to N. "
                         "It does not prove that no delta was left out (docs/proofs.md).")
    q.add_argument("projection", help="the projection's name, e.g. decisions")
    q.add_argument("entity", help="the entity's id")
    q.add_argument("--at", required=True, help="SEQ, delta ID or ISO time")
    q.add_argument("--size", type=int, default=None, help="the tree size (default: the head)")
    q.add_argument("--json", action="store_true", help="as JSON")
    q.set_defaults(handler=cmd_prove_state)

    register_signing(sub)


def cmd_prove_inclusion(args: Any, out: IO[str]) -> int:
    with open_store(args) as store:
        proof = proofs.inclusion_proof(store, args.seq, args.size)
    return _print_proof(args, out, proof, f"record {proof.seq} is leaf {proof.seq - 1} of the tree "
                        f"of size {proof.tree_size}\nleaf hash  {proof.leaf_hash.hex()}\nroot       "
                        f"{proof.root.hex()}\n")


def cmd_prove_consistency(args: Any, out: IO[str]) -> int:
    with open_store(args) as store:
        proof = proofs.consistency_proof(store, args.old, args.new)
    return _print_proof(args, out, proof, f"the tree of size {proof.new_size} extends the tree of "
                        f"size {proof.old_size}\nold root   {proof.old_root.hex()}\nnew root   "
                        f"{proof.new_root.hex()}\n")


def _print_proof(args: Any, out: IO[str], proof: Any, head: str) -> int:
    """A proof as JSON, or ``head`` and its audit path a hash a line."""
    if args.json:
        write_json(out, proof.to_json())
        return 0
    out.write(head)
    for n, h in enumerate(proof.path):
        out.write(f"path[{n}]{' ' * (3 - len(str(n)))}{h.hex()}\n")
    return 0


def cmd_prove_state(args: Any, out: IO[str]) -> int:
    braid = open_for_state(args, readonly=True, lazy=True)
    try:
        projection = braid.projection(args.projection)
        at = braid.resolve(parse_point(args.at))
        proof = proofs.state_proof(braid.log, projection, args.entity, at, args.size)
    finally:
        braid.close()
    if not proof.records:  # an empty proof proves nothing about an entity: say why instead
        raise ValidationError("entity", f"no delta up to seq {proof.at} refers to {args.entity!r} "
                              f"among those {proof.projection} reads; check the id (`braidlog history "
                              "ID`), and for a kind declared with `braidlog kind add`, name its id "
                              "field with --refers FIELD")
    if args.json:
        write_json(out, proof.to_json())
    else:
        out.write(f"{len(proof.records)} delta(s) of {proof.entity!r} read by {proof.projection} up to "
                  f"seq {proof.at}, proved in the tree of size {proof.tree_size} "
                  f"(root {proof.root.hex()}); use --json for the proof\n")
        for r in proof.records:
            out.write(f"  seq {r.seq}: {len(r.path)}-hash path\n")
    return 0


def register_signing(sub: Any) -> None:
    p = sub.add_parser("keygen", help="make an Ed25519 key to sign checkpoints",
                       description="Write a new Ed25519 signing key named NAME to FILE (mode "
                       "0600, never overwritten) and print its verifier key "
                       "NAME+KEYID+BASE64, the line to publish. Needs braidlog[proofs].")
    p.add_argument("name", help="the key's and the log's name, e.g. example.com/agent-log")
    p.add_argument("--out", required=True, help="the new key file")
    p.set_defaults(handler=cmd_keygen)

    p = sub.add_parser("checkpoint", help="sign a checkpoint of the head",
                       description="Print a signed C2SP tlog-checkpoint note of the head (origin, "
                       "tree size, base64 root) and keep it in the store, whose log must extend it "
                       "from then on (`braidlog verify` checks). Needs braidlog[proofs].")
    p.add_argument("--key", required=True, help="the signing key file from `braidlog keygen`")
    p.set_defaults(handler=cmd_checkpoint)

    p = sub.add_parser("proof", help="check a proof offline (no store)",
                       description="Check a proof printed by `braidlog prove ... --json` against "
                       "signed checkpoint notes and the log's verifier key, with no store.")
    kinds = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    q = kinds.add_parser("verify", help="check an inclusion, consistency or state proof",
                         description="Check an inclusion, consistency or state proof (JSON) "
                         "against checkpoint notes signed by the verifier key.")
    q.add_argument("proof", help="the proof's JSON file, or - for standard input")
    q.add_argument("--checkpoint", action="append", required=True, metavar="NOTE",
                   help="a signed checkpoint note file (twice for a consistency proof: old and new)")
    q.add_argument("--key", required=True,
                   help="the verifier key NAME+KEYID+BASE64, or a file that holds it")
    q.add_argument("--export", default=None, help="an export (`braidlog export`) to check the "
                   "record's bytes against the leaf hash")
    q.add_argument("--json", action="store_true", help="as JSON")
    q.set_defaults(handler=cmd_proof_verify)


def cmd_keygen(args: Any, out: IO[str]) -> int:
    key = proofs.generate(args.name)
    proofs.write_key(key, args.out)
    out.write(f"{key.verifier()}\n")
    return 0


def cmd_checkpoint(args: Any, out: IO[str]) -> int:
    key = proofs.read_key(args.key)
    with open_store(args, readonly=False) as store:
        note = proofs.issue(store, key)
    out.write(note)
    return 0


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as f:
        return f.read()


def cmd_proof_verify(args: Any, out: IO[str]) -> int:
    key_text = args.key
    if "+" not in key_text and os.path.exists(key_text):
        key_text = _read(key_text).decode("utf-8", errors="replace")
    key = verify.parse_verifier_key(key_text)
    checkpoints = [verify.open_checkpoint(_read(path), key) for path in args.checkpoint]
    try:
        proof = json.loads(_read(args.proof))
    except ValueError as e:
        raise ValidationError("proof", f"not JSON: {e}") from None
    if not isinstance(proof, dict):
        raise ValidationError("proof", "must be a JSON object")
    exported = None
    if args.export is not None:
        with open(args.export, encoding="utf-8") as f:
            exported = verify.bodies_from_export(f)
    result = verify.check_proof(proof, checkpoints, exported)
    if args.json:
        write_json(out, {"ok": True, **result})
    else:
        out.write(f"ok: {result['proved']}\n")
    return 0
