"""The recall command: ``braidlog recall TEXT [--at POINT] [--braid] [--kind] [--k] [--json]``."""

from __future__ import annotations

import sys
from typing import IO, Any

from .util import console, open_store, parse_point, progress_bar, summary, write_json


def register(sub: Any) -> None:
    p = sub.add_parser(
        "recall", help="find the deltas closest in meaning to a text",
        description="Find the deltas whose vectors are closest to TEXT (embedded with the default "
        "offline embedder), best first, optionally as of an earlier point. Filters apply before "
        "the top K is cut. The index is kept in STORE/recall/ and caught up from the log.")
    p.add_argument("text", help="what to recall, e.g. \"database choice\"")
    p.add_argument("--at", default=None, metavar="POINT",
                   help="recall as of SEQ, delta ID or ISO time (default: the head)")
    p.add_argument("--braid", action="append", help="only this braid (repeat for several)")
    p.add_argument("--kind", action="append", help="only this kind (repeat for several)")
    p.add_argument("--tag", action="append", help="only deltas with this tag (repeat: all of them)")
    p.add_argument("--namespace", action="append", help="only this payload namespace")
    p.add_argument("--workspace", action="append", help="only this payload workspace")
    p.add_argument("--k", type=int, default=10, help="how many to return (default 10)")
    p.add_argument("--space", default="default", help="the vector space (default: default)")
    p.add_argument("--metric", default="cosine", choices=("cosine", "ip"),  # braidlog.recall.METRICS
                   help="similarity (default cosine)")
    p.add_argument("--rebuild", action="store_true", help="rebuild the index from the log first")
    p.add_argument("--json", action="store_true", help="as JSON")
    p.set_defaults(handler=cmd_recall)


def cmd_recall(args: Any, out: IO[str]) -> int:
    from ..recall import Recall  # numpy and hnswlib load only when recall runs

    with open_store(args) as store:
        head = store.head()
        with progress_bar("indexing vectors", head.seq, enabled=head.seq >= 50_000 and not args.json) as update:
            index = Recall(store, args.space, args.metric, progress=update)
            if args.rebuild:
                index.rebuild(progress=update, blocks=False)
        if index.count == 0:
            sys.stderr.write(f"braidlog: note: the store holds no vector in space {args.space!r}\n")
        as_of = index.resolve(parse_point(args.at)) if args.at else None
        hits = index.recall(args.text, args.k, as_of=as_of, braid=args.braid, kinds=args.kind,
                            tags=args.tag, namespace=args.namespace, workspace=args.workspace)
        index.close()
    if args.json:
        write_json(out, {
            "query": args.text, "as_of": as_of, "head": str(head),
            "hits": [{"seq": h.seq, "delta_id": h.delta_id, "score": round(h.score, 6),
                      "braid_id": h.delta.braid_id, "kind": h.delta.kind, "ts": h.delta.ts.isoformat(),
                      "tags": list(h.delta.tags), "text": summary(h.delta, 200)} for h in hits]})
        return 0
    from rich.table import Table

    where = f"as of seq {as_of}" if as_of is not None else f"at the head (seq {head.seq})"
    con = console(out)
    if not hits:
        con.print(f"nothing to recall for {args.text!r} {where}")
        return 0
    table = Table(title=f"recall {args.text!r} {where}")
    for col in ("#", "seq", "score", "braid", "kind", "text"):
        table.add_column(col, no_wrap=col != "text", justify="right" if col in ("#", "seq", "score") else "left")
    for rank, h in enumerate(hits, 1):
        table.add_row(str(rank), str(h.seq), f"{h.score:.3f}", h.delta.braid_id, h.delta.kind, summary(h.delta))
    con.print(table)
    return 0
