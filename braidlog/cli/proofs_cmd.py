"""Verifiable-log commands: prove inclusion / consistency / state, keygen, checkpoint, proof verify."""

from __future__ import annotations

from typing import IO, Any

from .. import proofs
from .util import open_store, write_json


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


def cmd_prove_inclusion(args: Any, out: IO[str]) -> int:
    with open_store(args) as store:
        proof = proofs.inclusion_proof(store, args.seq, args.size)
    if args.json:
        write_json(out, proof.to_json())
    else:
        out.write(f"record {proof.seq} is leaf {proof.seq - 1} of the tree of size {proof.tree_size}\n"
                  f"leaf hash  {proof.leaf_hash.hex()}\nroot       {proof.root.hex()}\n")
        for n, h in enumerate(proof.path):
            out.write(f"path[{n}]{' ' * (3 - len(str(n)))}{h.hex()}\n")
    return 0


def cmd_prove_consistency(args: Any, out: IO[str]) -> int:
    with open_store(args) as store:
        proof = proofs.consistency_proof(store, args.old, args.new)
    if args.json:
        write_json(out, proof.to_json())
    else:
        out.write(f"the tree of size {proof.new_size} extends the tree of size {proof.old_size}\n"
                  f"old root   {proof.old_root.hex()}\nnew root   {proof.new_root.hex()}\n")
        for n, h in enumerate(proof.path):
            out.write(f"path[{n}]{' ' * (3 - len(str(n)))}{h.hex()}\n")
    return 0
