"""The recall command: ``braidlog recall TEXT [--mode vector|keyword|hybrid] [--at POINT] [filters] [--k] [--json]``,
and the embedding behind ``braidlog append --embed``."""

from __future__ import annotations

import argparse
import sys
from typing import IO, TYPE_CHECKING, Any

from ..errors import ValidationError
from ..store import store_of
from .util import console, json_flag, open_for_state, open_store, parse_point, progress_bar, summary, write_json

if TYPE_CHECKING:
    from ..delta import GenericDelta
    from ..recall import Hit


def _floor(text: str) -> float | None:
    """``--min-score``: a number, or ``none`` for no floor."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (or none)") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number (or none)")
    return value


def register(sub: Any) -> None:
    p = sub.add_parser(
        "recall", help="find the deltas closest to a text, by meaning, keyword or both",
        description="Find the deltas that best match TEXT, best first, optionally as of an earlier "
        "point: by meaning (--mode vector, the default: vectors closest to TEXT embedded with the "
        "space's recorded embedder, or --embedder), by keyword (--mode keyword: BM25 over the deltas' text) or both "
        "(--mode hybrid: reciprocal-rank fusion). Filters apply before the top K is cut. The "
        "indexes are kept in STORE/recall/ and caught up from the log. Vectors come with the "
        "deltas: `braidlog append --embed` attaches them.")
    p.add_argument("text", help="what to recall, e.g. \"database choice\" or ERR-4012")
    p.add_argument("--mode", default="vector", choices=("vector", "keyword", "hybrid"),  # braidlog.recall.MODES
                   help="vector (by meaning, default), keyword (BM25) or hybrid (both, fused by rank)")
    p.add_argument("--at", default=None, metavar="POINT",
                   help="recall as of SEQ, delta ID or ISO time (default: the head)")
    p.add_argument("--reproducible", action="store_true",
                   help="with --at: answer by meaning with graphs of the deltas up to it alone, "
                   "the same answer however the log grows (slower; builds them on first use)")
    p.add_argument("--braid", action="append", help="only this braid (repeat for several)")
    p.add_argument("--kind", action="append", help="only this kind (repeat for several)")
    p.add_argument("--tag", action="append", help="only deltas with this tag (repeat: all of them)")
    p.add_argument("--namespace", action="append", help="only this payload namespace")
    p.add_argument("--workspace", action="append", help="only this payload workspace")
    p.add_argument("--k", type=int, default=10, help="how many to return (default 10)")
    p.add_argument("--min-score", type=_floor, default=0.0, metavar="SCORE",
                   help="by meaning, leave out hits scoring below SCORE rather than pad to k "
                   "(default 0, the relevance floor: a vector pointing away from the query's is no "
                   "match); 'none' for the k closest whatever their score")
    p.add_argument("--space", default="default", help="the vector space (default: default)")
    p.add_argument("--embedder", default=None, metavar="SPEC",
                   help="embed TEXT with this embedder: hashing, model2vec:DIR, sentence-transformers:DIR, "
                   "fastembed:NAME, wordllama or module:attribute (default: the one the space's vectors "
                   "recorded in the log, else $BRAIDLOG_EMBEDDER, else hashing); another one than the "
                   "recorded one is refused")
    p.add_argument("--metric", default="cosine", choices=("cosine", "ip"),  # braidlog.recall.METRICS
                   help="similarity (default cosine)")
    p.add_argument("--rebuild", action="store_true", help="rebuild the index from the log first")
    p.add_argument("--record", action="store_true",
                   help="record a context receipt (a context_used delta) naming the hits, the "
                   "request and the seq it saw; prints its id (docs/receipts.md)")
    p.add_argument("--run", default=None, help="with --record: the run (session) the recall served")
    p.add_argument("--turn", default=None, help="with --record: the turn of that run")
    p.add_argument("--model", default=None, help="with --record: the model the context is for")
    p.add_argument("--context-file", default=None, metavar="FILE",
                   help="with --record: the exact context given to the model (its SHA-256 and "
                   "length are recorded)")
    p.add_argument("--hash-query", action="store_true",
                   help="with --record: record only the query's SHA-256, not its text")
    json_flag(p)
    p.set_defaults(handler=cmd_recall)


def _receipt_options(args: Any) -> dict[str, Any]:
    """The receipt options of ``--record``, checked (with ``--context-file`` read)."""
    given = [f for f in ("run", "turn", "model", "context_file") if getattr(args, f) is not None]
    if not args.record:
        if given or args.hash_query:
            flag = "--" + (given[0] if given else "hash_query").replace("_", "-")
            raise ValidationError(flag, "describes a recorded recall: add --record")
        return {}
    for flag in ("run", "turn"):
        if getattr(args, flag) is None:
            raise ValidationError(f"--{flag}", "a recorded recall names the run and the turn it "
                                  "served: give --run and --turn")
    context = None
    if args.context_file is not None:
        try:
            with open(args.context_file, "rb") as f:
                context = f.read()
        except OSError as e:
            raise ValidationError("--context-file", f"cannot read {args.context_file}: {e}") from None
    return {"record": True, "run": args.run, "turn": args.turn, "model": args.model,
            "context_bytes": context, "hash_query": args.hash_query}


def cmd_recall(args: Any, out: IO[str]) -> int:
    from ..recall import Recall  # numpy, hnswlib and tantivy load only when recall runs

    receipt = _receipt_options(args)
    source: Any = open_for_state(args, lazy=True) if receipt else open_store(args)
    with source:
        store = store_of(source)
        head = store.head()
        with progress_bar("indexing vectors", head.seq, enabled=head.seq >= 50_000 and not args.json) as update:
            index = Recall(source, args.space, args.metric, embedder=args.embedder, progress=update)
            if args.rebuild:
                index.rebuild(progress=update)
            if args.mode != "vector":
                with progress_bar("indexing text", head.seq, enabled=head.seq >= 50_000 and not args.json) as words:
                    keyword = index.keyword()
                    if args.rebuild:
                        keyword.rebuild(progress=words)
        if index.count == 0 and args.mode != "keyword":
            sys.stderr.write(f"braidlog: note: the store holds no vector in space {args.space!r}; "
                             "`braidlog append --embed` attaches them\n")
        as_of = index.resolve(parse_point(args.at)) if args.at else None
        filters = {"braid": args.braid, "kinds": args.kind, "tags": args.tag,
                   "namespace": args.namespace, "workspace": args.workspace}
        hits = index.recall(args.text, args.k, mode=args.mode, as_of=as_of,
                            reproducible=args.reproducible, min_score=args.min_score, **filters,
                            **receipt)
        if not hits and any(v for v in filters.values()):
            sys.stderr.write(f"braidlog: note: {_empty_because(index, args, as_of, filters)}\n")
        index.close()
    if args.json:
        write_json(out, {
            "query": args.text, "mode": args.mode, "as_of": as_of, "head": str(head),
            "reproducible": args.reproducible, **({"context_id": hits.context_id} if receipt else {}),
            "hits": [{"seq": h.seq, "delta_id": h.delta_id, "score": round(h.score, 6),
                      "braid_id": d.braid_id, "kind": d.kind, "ts": d.ts.isoformat(),
                      "tags": list(d.tags), "text": summary(d, 200)} for h, d in _with_deltas(hits)]})
        return 0
    from .tables import MIN_BRAID, Column, print_table

    where = f"as of seq {as_of}" if as_of is not None else f"at the head (seq {head.seq})"
    if receipt:
        console(out).print(f"recorded receipt {hits.context_id} (seq {hits.context_seq}): `braidlog context "
                           f"show {hits.context_id}`")
    if not hits:
        console(out).print(f"nothing to recall for {args.text!r} {where}")
        return 0
    columns = [Column("#", "right"), Column("seq", "right"), Column("score", "right", drop=2),
               Column("braid", give="middle", least=MIN_BRAID, drop=1), Column("kind"), Column("text", give="text")]
    print_table(out, columns, ([str(rank), str(h.seq), f"{h.score:.3f}", d.braid_id, d.kind, summary(d)]
                               for rank, (h, d) in enumerate(_with_deltas(hits), 1)),
                title=f"recall {args.text!r} by {args.mode} {where}")
    return 0


#: The command-line flag of each recall filter, for the note that names the one that left nothing.
_FLAGS = {"braid": "--braid", "kinds": "--kind", "tags": "--tag", "namespace": "--namespace",
          "workspace": "--workspace"}


def _with_deltas(hits: list[Hit]) -> list[tuple[Hit, GenericDelta]]:
    """Each hit with its delta (a recall returns them unless told not to)."""
    out = []
    for h in hits:
        assert h.delta is not None  # recall(deltas=True), the default
        out.append((h, h.delta))
    return out


def _empty_because(index: Any, args: Any, as_of: int | None, filters: dict[str, Any]) -> str:
    """Which filter left nothing to recall: the first that does so on its own, else all of them."""
    given = {k: v for k, v in filters.items() if v}
    if not index.recall(args.text, 1, mode=args.mode, as_of=as_of):
        return "nothing to recall even without filters"
    for name, value in given.items():
        if not index.recall(args.text, 1, mode=args.mode, as_of=as_of, **{name: value}):
            shown = " ".join(value) if isinstance(value, list) else value
            return f"{_FLAGS[name]} {shown} leaves nothing to recall"
    flags = ", ".join(_FLAGS[k] for k in given)
    return f"each filter leaves something, but {flags} together leave nothing"


def append_embedded(store: Any, deltas: list[Any], space: str, spec: str | None,
                    expected_version: int | None) -> tuple[list[int], int]:
    """``braidlog append --embed``: each delta that has text and no vector, with a vector of
    ``space`` from the embedder ``spec`` names (default: the space's recorded one, else
    $BRAIDLOG_EMBEDDER, else hashing), appended with the space's declaration if it has none;
    the seqs and how many were embedded. Deltas without text are appended as they are."""
    from ..recall import embed_deltas, embedder_for  # the recall extra
    from ..recall.recorded import append_vectors

    chosen = embedder_for(store, space, spec)
    deltas, n = embed_deltas(deltas, chosen, space)
    return append_vectors(store, deltas, chosen, space, expected_version), n
