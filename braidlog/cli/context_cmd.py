"""Context receipts from the shell: ``braidlog context show | export | replay``. Recording one
is ``braidlog recall ... --record``; checking an export offline is ``braidlog proof verify
--context FILE``."""

from __future__ import annotations

from typing import IO, Any

from ..errors import BraidlogError
from .util import json_flag, open_store, refuse_on_replica, summary, write_json


def register(sub: Any) -> None:
    p = sub.add_parser("context", help="context receipts: which memory versions an agent saw",
                       description="Read, export and replay context receipts (context_used "
                       "deltas, recorded by `braidlog recall --record`, Braid.record_context or "
                       "the MCP recall tool). docs/receipts.md says what a receipt proves.")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    q = actions.add_parser("show", help="a receipt with its items' current text",
                           description="Print receipt ID (a delta id or seq): its run, turn, "
                           "model, request and context digest, and each item with its current "
                           "text (or that it was erased).")
    q.add_argument("id", help="the receipt's delta id or seq")
    json_flag(q)
    q.set_defaults(handler=cmd_show)

    q = actions.add_parser("export", help="write a receipt and its proofs to one file",
                           description="Write receipt ID to FILE as one self-contained JSON "
                           "file: a C2SP checkpoint signed with --key, the receipt's committed "
                           "form and bytes with its c2sp.org/tlog-proof@v1, and each item's "
                           "committed form with its tlog-proof against the same checkpoint. "
                           "Anyone checks it offline with `braidlog proof verify --context FILE "
                           "--key VKEY`. Needs braidlog[proofs].")
    q.add_argument("id", help="the receipt's delta id or seq")
    q.add_argument("--key", required=True, metavar="FILE",
                   help="the signing key file (`braidlog keygen`)")
    q.add_argument("--out", required=True, metavar="FILE", help="the export file to write")
    q.add_argument("--disclose", action="store_true",
                   help="also carry each item's delta bytes and salt, so the reader sees the "
                   "content and checks it against its commitment (default: commitments only)")
    q.add_argument("--size", type=int, default=None,
                   help="prove in the tree of the first N records (default: the head)")
    json_flag(q, "print a summary as JSON")
    q.set_defaults(handler=cmd_export)

    q = actions.add_parser("replay", help="run a receipt's recall again and compare",
                           description="Run the recall receipt ID records again, as of the seq it "
                           "saw, in reproducible mode, and say whether the same items come back in "
                           "the same order (exit 0), or that they differ (exit 1); when the request "
                           "cannot run again (its embedder cannot be loaded here, its query was "
                           "recorded only by its SHA-256) it says why, as an error.")
    q.add_argument("id", help="the receipt's delta id or seq")
    q.add_argument("--embedder", default=None, metavar="SPEC",
                   help="the embedder to use (default: the space's recorded one, loaded from its "
                   "spec); it must be the one the receipt names")
    json_flag(q)
    q.set_defaults(handler=cmd_replay)


def cmd_show(args: Any, out: IO[str]) -> int:
    from ..receipts.record import read_receipt

    with open_store(args) as store:
        got = read_receipt(store, args.id)
        r = got.receipt
        rows = []
        for item in r.items:
            d = store.read(item.seq).delta
            rows.append({"seq": item.seq, "delta_id": item.delta_id, "role": item.role,
                         "rank": item.rank, "score": item.score,
                         "erased_by": d.erased.by if d.erased is not None else None,
                         "text": summary(d, 200)})
    if args.json:
        write_json(out, {"seq": got.seq, "id": got.delta.id, "ts": got.delta.ts.isoformat(),
                         "braid_id": got.delta.braid_id, "run": r.run, "turn": r.turn,
                         "model": r.model, "request": r.request, "context_sha256": r.context_sha256,
                         "context_size": r.context_size, "items": rows})
        return 0
    out.write(f"receipt {got.delta.id} (seq {got.seq}, {got.delta.ts.isoformat()}): run {r.run}, "
              f"turn {r.turn}" + (f", model {r.model}" if r.model else "") + "\n")
    if r.request is not None:
        q = r.request
        query = repr(q.query) if q.query is not None else f"(a {q.query_kind}, SHA-256 {q.query_sha256[:16]}…)"
        out.write(f"request: {q.mode} recall of {query}, k {q.k}, space {q.space}, as of seq "
                  f"{q.as_of}{', reproducible' if q.reproducible else ''}"
                  + (f", embedder {q.embedder.name} ({q.embedder.dim})" if q.embedder else "")
                  + ("".join(f", {k} {' '.join(v)}" for k, v in q.filters.items())) + "\n")
    if r.context_sha256 is not None:
        out.write(f"context: {r.context_size} bytes, SHA-256 {r.context_sha256}\n")
    for row in rows:
        score = "" if row["score"] is None else f" score {row['score']:.3f}"
        out.write(f"  {row['role']} #{row['rank']}  seq {row['seq']}{score}  {row['text']}\n")
    if not rows:
        out.write("  (no items)\n")
    return 0


def cmd_export(args: Any, out: IO[str]) -> int:
    from .. import proofs
    from ..proofs.context_export import write_context_export

    key = proofs.read_key(args.key)
    refuse_on_replica(args, "record a context receipt")
    with open_store(args, readonly=False) as store:
        export = write_context_export(store, args.id, key, args.out, disclose=args.disclose,
                                      size=args.size)
    erased = sum(1 for i in export["items"] if "erased" in i)
    what = {"out": args.out, "receipt": export["receipt"]["delta_id"],
            "seq": export["receipt"]["seq"], "items": len(export["items"]), "erased": erased,
            "disclosed": export["disclosed"], "origin": export["origin"]}
    if args.json:
        write_json(out, what)
    else:
        out.write(f"{args.out}: receipt {what['receipt']} (seq {what['seq']}) and its "
                  f"{what['items']} item(s){', contents disclosed' if args.disclose else ''}"
                  f"{f', {erased} erased' if erased else ''}, proved under a checkpoint of "
                  f"{what['origin']}\n")
    return 0


def cmd_replay(args: Any, out: IO[str]) -> int:
    from ..recall.replay import replay

    with open_store(args) as store:
        result = replay(store, args.id, embedder=args.embedder, directory=False)
    if result.same is None and not args.json:
        raise BraidlogError(result.summary())
    if args.json:
        write_json(out, result._asdict())
    else:
        out.write(result.summary() + "\n")
    return 0 if result.same else 1
