"""Verifiable-log commands: prove inclusion / consistency / state, keygen, checkpoint, proof verify."""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

from .. import proofs
from ..errors import BraidlogError, ValidationError
from ..proofs import verify
from .util import json_flag, open_for_state, open_store, parse_point, write_json


def register(sub: Any) -> None:
    p = sub.add_parser("prove", help="print a Merkle proof (inclusion, consistency, state)",
                       description="Print an RFC 6962 proof over the log's Merkle tree "
                       "(SHA-256, over the records' committed forms; docs/proofs.md).")
    kinds = p.add_subparsers(dest="proof", metavar="PROOF", required=True)

    q = kinds.add_parser("inclusion", help="record SEQ is in the tree of size N",
                         description="Print the inclusion proof of record SEQ (leaf SEQ-1) in the "
                         "tree of the first N records (default: the head).")
    q.add_argument("seq", type=int, help="the record's seq")
    q.add_argument("--size", type=int, default=None, help="the tree size (default: the head)")
    json_flag(q)
    q.add_argument("--tlog-proof", action="store_true",
                   help="as a C2SP tlog-proof (c2sp.org/tlog-proof@v1, index SEQ-1) with a "
                   "checkpoint signed with --key for the tree")
    q.add_argument("--key", default=None, metavar="FILE",
                   help="with --tlog-proof: the signing key file from `braidlog keygen`")
    q.set_defaults(handler=cmd_prove_inclusion)

    q = kinds.add_parser("consistency", help="the tree of size NEW extends the one of size OLD",
                         description="Print the consistency proof from the tree of the first OLD "
                         "records to the tree of the first NEW (default: the head).")
    q.add_argument("old", type=int, help="the older tree size")
    q.add_argument("new", type=int, nargs="?", default=None, help="the newer tree size (default: "
                   "the head)")
    json_flag(q)
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
    json_flag(q)
    q.set_defaults(handler=cmd_prove_state)

    register_signing(sub)
    register_tiles(sub)


def cmd_prove_inclusion(args: Any, out: IO[str]) -> int:
    if args.tlog_proof:
        if args.key is None:
            raise ValidationError("--key", "a tlog-proof carries a signed checkpoint: give the "
                                  "signing key file (`braidlog keygen`)")
        key = proofs.read_key(args.key)
        with open_store(args, readonly=args.size is not None) as store:
            out.write(proofs.tlog_proof(store, args.seq, key, args.size))
        return 0
    if args.key is not None:
        raise ValidationError("--key", "signs the checkpoint of a --tlog-proof; give --tlog-proof")
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
    p.add_argument("--collect", action="store_true",
                   help="add the witnesses' cosignatures found in --from DIR to the note")
    p.add_argument("--from", dest="cosigs", default=None, metavar="DIR",
                   help="with --collect: a directory of cosigned notes (a replica's --cosign-dir)")
    p.add_argument("--size", type=int, default=None,
                   help="the tree size (default: the head; with --collect, the largest size "
                   "cosigned in DIR)")
    p.set_defaults(handler=cmd_checkpoint)

    p = sub.add_parser("proof", help="check a proof offline (no store)",
                       description="Check a proof printed by `braidlog prove ... --json` against "
                       "signed checkpoint notes and the log's verifier key, with no store.")
    kinds = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    q = kinds.add_parser("verify", help="check an inclusion, consistency or state proof",
                         description="Check an inclusion, consistency or state proof (JSON) "
                         "against checkpoint notes signed by the verifier key.")
    q.add_argument("proof", nargs="?", help="the proof's JSON file or .tlog-proof file, or - for "
                   "standard input")
    q.add_argument("--checkpoint", action="append", default=[], metavar="NOTE",
                   help="a signed checkpoint note file (twice for a consistency proof: old and "
                   "new); a tlog-proof carries its own")
    q.add_argument("--entry", default=None, metavar="FILE",
                   help="for a tlog-proof: the record's committed form (`braidlog show SEQ "
                   "--entry`), the bytes it proves")
    q.add_argument("--receipt", default=None, metavar="FILE",
                   help="an erasure receipt (`braidlog erase --receipt`) to check instead")
    q.add_argument("--against-store", action="store_true",
                   help="with --receipt: also check that the store (--store) is the one it "
                   "speaks of and holds the erasure it states")
    q.add_argument("--key", default=None,
                   help="the verifier key NAME+KEYID+BASE64, or a file that holds it")
    q.add_argument("--policy", default=None, metavar="FILE",
                   help="check a checkpoint note (PROOF) against a C2SP tlog-policy: signed by "
                   "its log, cosigned by its quorum of witnesses")
    q.add_argument("--export", default=None, help="an export (`braidlog export`): every record's "
                   "readable delta is checked against its bytes, and the proved record's "
                   "committed form against the leaf hash")
    q.add_argument("--context", default=None, metavar="FILE",
                   help="a context export (`braidlog context export`) to check instead: the "
                   "checkpoint's signature, every inclusion proof, the receipt's and each "
                   "disclosed item's bytes against their commitments")
    q.add_argument("--context-bytes", default=None, metavar="FILE",
                   help="with --context: the exact context given to the model, checked against "
                   "the receipt's SHA-256 of it")
    json_flag(q)
    q.set_defaults(handler=cmd_proof_verify)


def register_tiles(sub: Any) -> None:
    p = sub.add_parser("tiles", help="write the log as C2SP tlog-tiles (a static directory), or "
                       "serve one", description="Write DIR as C2SP tlog-tiles define it: a signed "
                       "`checkpoint`, the Merkle tree's tiles `tile/<L>/<N>[.p/<W>]` and the entry "
                       "bundles `tile/entries/<N>[.p/<W>]` (the records' committed forms); a later "
                       "run adds only what is new. With --serve, serve DIR over HTTP on "
                       "127.0.0.1 for any tlog-tiles client.")
    p.add_argument("directory", metavar="DIR", help="the tiles directory")
    p.add_argument("--key", default=None, metavar="FILE",
                   help="the signing key file (`braidlog keygen`) for the checkpoint")
    p.add_argument("--serve", action="store_true", help="serve DIR on 127.0.0.1 until stopped")
    p.add_argument("--port", type=int, default=0, help="with --serve: the port (default: any free)")
    json_flag(p)
    p.set_defaults(handler=cmd_tiles)


def cmd_tiles(args: Any, out: IO[str]) -> int:
    from ..proofs import tiles

    if args.serve:
        if args.key is not None:
            raise ValidationError("--key", "signs a new checkpoint when tiles are written; "
                                  "--serve serves DIR as it is")

        def ready(url: str) -> None:
            out.write(f"serving {args.directory} at {url} (Ctrl-C to stop)\n")
            out.flush()
        try:
            tiles.serve(args.directory, args.port, ready=ready)
        except KeyboardInterrupt:
            pass
        return 0
    if args.key is None:
        raise ValidationError("--key", "the tiles' checkpoint is signed: give the signing key "
                              "file (`braidlog keygen`)")
    key = proofs.read_key(args.key)
    with open_store(args, readonly=False) as store:
        report = tiles.write_tiles(store, args.directory, key)
    if args.json:
        write_json(out, report._asdict())
    else:
        out.write(f"{args.directory}: tree size {report.size} (was {report.since}); wrote "
                  f"{report.tiles} tile(s), {report.bundles} entry bundle(s), "
                  f"{report.bytes:,} bytes, and the checkpoint\n")
    return 0


def cmd_keygen(args: Any, out: IO[str]) -> int:
    key = proofs.generate(args.name)
    proofs.write_key(key, args.out)
    out.write(f"{key.verifier()}\n")
    return 0


def cmd_checkpoint(args: Any, out: IO[str]) -> int:
    key = proofs.read_key(args.key)
    if args.collect != (args.cosigs is not None):
        raise ValidationError("--from", "--collect reads cosigned notes from --from DIR; give both")
    found: list[tuple[str, list[str]]] = []
    size = args.size
    if args.collect:
        found = _cosigned_notes(args.cosigs, key.name)
        if not found:
            raise ValidationError("--from", f"{args.cosigs} holds no note cosigned for log "
                                  f"{key.name}")
        if size is None:
            size = max(verify.parse_checkpoint_text(body).size for body, _ in found)
    with open_store(args, readonly=False) as store:
        note = proofs.issue(store, key, size=size)
    if args.collect:
        from ..proofs.cosign import add_signatures, note_parts
        body, own = note_parts(note)
        lines = [line for b, sigs in found if b == body for line in sigs if line not in own]
        if not lines:
            raise ValidationError("--from", f"no note in {args.cosigs} is cosigned for this "
                                  f"checkpoint (size {size})")
        note = add_signatures(note, lines)
    out.write(note)
    return 0


def _cosigned_notes(directory: str, origin: str) -> list[tuple[str, list[str]]]:
    """(text, signature lines) of each cosigned note file in ``directory`` for log ``origin``."""
    from ..proofs.cosign import note_parts

    if not os.path.isdir(directory):
        raise ValidationError("--from", f"{directory} is not a directory")
    out = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not name.endswith(".cosig") or not os.path.isfile(path):
            continue
        try:
            body, lines = note_parts(_read(path))
            cp = verify.parse_checkpoint_text(body)
        except (BraidlogError, ValueError) as e:
            raise ValidationError("--from", f"{path} is not a cosigned note: {e}") from None
        if cp.origin == origin:
            out.append((body, lines))
    return out


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as f:
        return f.read()


def cmd_proof_verify(args: Any, out: IO[str]) -> int:
    if args.receipt is None and args.policy is not None:
        return _verify_policy(args, out)
    if args.key is None:
        raise ValidationError("--key", "give the log's verifier key (or --policy FILE)")
    if args.receipt is not None:
        from .erase_cmd import cmd_verify_receipt

        return cmd_verify_receipt(args, out)
    if args.context is not None or args.context_bytes is not None:
        return _verify_context(args, out)
    if args.proof is None:
        raise ValidationError("proof", "give a proof file (or --receipt FILE)")
    key_text = args.key
    if "+" not in key_text and os.path.exists(key_text):
        key_text = _read(key_text).decode("utf-8", errors="replace")
    key = verify.parse_verifier_key(key_text)
    raw = _read(args.proof)
    if raw.startswith(verify.TLOG_PROOF.encode()):
        return _verify_tlog_proof(args, out, raw, key)
    if not args.checkpoint:
        raise ValidationError("--checkpoint", "give the signed checkpoint note(s) the proof is "
                              "checked against")
    checkpoints = [verify.open_checkpoint(_read(path), key) for path in args.checkpoint]
    try:
        proof = json.loads(raw)
    except ValueError as e:
        raise ValidationError("proof", f"not JSON: {e}") from None
    if not isinstance(proof, dict):
        raise ValidationError("proof", "must be a JSON object")
    exported = None
    if args.export is not None:
        from ..proofs.exported import check_export
        with open(args.export, encoding="utf-8") as f:
            exported = check_export(f)
    result = verify.check_proof(proof, checkpoints, exported)
    if args.json:
        write_json(out, {"ok": True, **result})
    else:
        out.write(f"ok: {result['proved']}\n")
    return 0


def _verify_context(args: Any, out: IO[str]) -> int:
    from ..proofs.context import check_context_export

    if args.context is None:
        raise ValidationError("--context-bytes", "checks a context export's digest: give --context FILE")
    if args.proof or args.checkpoint or args.entry or args.export:
        raise ValidationError("--context", "a context export carries its checkpoint and proofs; "
                              "give --context FILE and --key alone (and --context-bytes)")
    key_text = args.key
    if "+" not in key_text and os.path.exists(key_text):
        key_text = _read(key_text).decode("utf-8", errors="replace")
    context = _read(args.context_bytes) if args.context_bytes is not None else None
    result = check_context_export(_read(args.context), key_text, context_bytes=context)
    n, erased = len(result["items"]), sum(1 for i in result["items"] if "erased" in i)
    disclosed = sum(1 for i in result["items"] if i.get("disclosed"))
    proved = (f"receipt {result['receipt_id']} (seq {result['receipt_seq']}, run {result['run']}, "
              f"turn {result['turn']}) and its {n} item(s) are records of the log "
              f"{result['origin']} at size {result['tree_size']}, signed by {result['origin']}; "
              f"{disclosed} disclosed and matching their commitments, {erased} erased"
              + ("; the context bytes match its digest" if result["context_checked"] else ""))
    if args.json:
        write_json(out, {"ok": True, "kind": "context", **result, "proved": proved})
        return 0
    out.write(f"ok: {proved}\n")
    for item in result["items"]:
        state = ("erased" if "erased" in item else "disclosed" if item.get("disclosed")
                 else "commitment only")
        score = "" if item["score"] is None else f" score {item['score']:.3f}"
        out.write(f"  {item['role']} #{item['rank']}  seq {item['seq']} (leaf {item['leaf_index']})"
                  f"{score}  {state}\n")
    return 0


def _verify_tlog_proof(args: Any, out: IO[str], raw: bytes, key: Any) -> int:
    if args.entry is None:
        raise ValidationError("--entry", "a tlog-proof proves an entry: give the record's "
                              "committed form (`braidlog show SEQ --entry > FILE`)")
    if args.checkpoint or args.export:
        raise ValidationError("--checkpoint", "a tlog-proof carries its own signed checkpoint; "
                              "give --entry alone")
    proof, cp = verify.check_tlog_proof(raw, key, _read(args.entry))
    what = (f"the entry is entry {proof.index} (record {proof.index + 1}) of the log "
            f"{cp.origin} at size {cp.size}, signed by {key.name}")
    if args.json:
        write_json(out, {"ok": True, "kind": "tlog-proof", "index": proof.index,
                         "seq": proof.index + 1, "tree_size": cp.size, "origin": cp.origin,
                         "proved": what})
    else:
        out.write(f"ok: {what}\n")
    return 0


def _verify_policy(args: Any, out: IO[str]) -> int:
    from ..proofs.cosign import check_policy, parse_policy

    if args.key or args.checkpoint or args.entry or args.export:
        raise ValidationError("--policy", "checks a checkpoint note against the policy's keys; "
                              "give the note and --policy alone")
    if args.proof is None:
        raise ValidationError("proof", "give the checkpoint note file to check against --policy")
    policy = parse_policy(_read(args.policy).decode("utf-8", errors="replace"))
    result = check_policy(_read(args.proof), policy)
    cp = result.checkpoint
    what = (f"the checkpoint of {cp.origin} at size {cp.size} is cosigned by its quorum "
            f"({', '.join(result.cosigned) or 'none needed'})")
    if args.json:
        write_json(out, {"ok": True, "kind": "policy", "origin": cp.origin, "tree_size": cp.size,
                         "root": cp.root.hex(), "cosigned": list(result.cosigned),
                         "proved": what})
    else:
        out.write(f"ok: {what}\n")
    return 0
