"""Replication commands: ship, sync-append, replica, promote (docs/replication.md).

They need the optional extra ``braidlog[replication]``; without it they say how to install it.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Any

from ..errors import ValidationError
from ..lmdb.log import LmdbLog
from .util import json_flag, open_store, store_path, write_json


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ship", help="ship the log to a NATS JetStream stream",
        description="Publish every committed record of --store to the JetStream stream NAME "
        "(created if needed), in seq order, one atomic batch in flight, then keep following the "
        "log until interrupted. Resumes from the stream's watermark after a crash. Refused "
        "when the stream holds another writer's records.")
    _common(p)
    _replicas(p)
    p.add_argument("--batch", type=int, default=1000, help="records per atomic batch (max 1000)")
    p.add_argument("--once", action="store_true", help="ship what is committed now, then exit")
    p.add_argument("--for", dest="duration", type=float, default=None, metavar="SECONDS",
                   help="follow for this long, then exit (default: until interrupted)")
    p.add_argument("--poll", type=float, default=0.05, help="seconds between looks at the log")
    json_flag(p, "the result as JSON")
    p.set_defaults(handler=cmd_ship)

    p = sub.add_parser(
        "sync-append", help="append deltas and wait until the stream holds them",
        description="Append deltas (one JSON object, a JSON array or JSON Lines, from FILE or "
        "standard input) to --store in one atomic batch, published to the JetStream stream "
        "while the local transaction is open and committed only once the stream acknowledged "
        "them with its replicas (synchronous mode). A refused or unacknowledged append leaves "
        "the store unchanged.")
    p.add_argument("file", nargs="?", default="-", help="a file, or - for standard input")
    _common(p)
    _replicas(p)
    json_flag(p, "print the seqs as JSON")
    p.set_defaults(handler=cmd_sync_append)

    p = sub.add_parser(
        "replica", help="rebuild --store from a stream and keep following it",
        description="Follow the JetStream stream NAME from this store's head: every record's "
        "seq and chain hash are checked against the head before it is appended, and a "
        "transaction is applied whole. A record that does not chain stops the replica with an "
        "error naming its seq; nothing after it is applied.")
    _common(p)
    p.add_argument("--once", action="store_true", help="catch up with the stream, then exit")
    p.add_argument("--for", dest="duration", type=float, default=None, metavar="SECONDS",
                   help="follow for this long, then exit (default: until interrupted)")
    p.add_argument("--checkpoint-key", default=None, metavar="KEY|FILE",
                   help="the writer's checkpoint verifier key (NAME+KEYID+KEY, or a file holding "
                   "it): refuse a record its signed checkpoints contradict")
    p.add_argument("--witness-key", default=None, metavar="FILE",
                   help="this replica's own signing key (`braidlog keygen`): cosign each verified "
                   "checkpoint once the records it covers are applied (needs --checkpoint-key)")
    p.add_argument("--cosign-dir", default=None, metavar="DIR",
                   help="with --witness-key: where the cosigned notes go (<size>.cosig, and "
                   "`last`, the last checkpoint cosigned)")
    json_flag(p, "the result as JSON")
    p.set_defaults(handler=cmd_replica)

    p = sub.add_parser(
        "promote", help="make a caught-up replica the writer of a new epoch, fencing the old",
        description="Catch --store up with the stream, check it holds everything the stream "
        "acknowledged (same head, no half-shipped transaction), check the stream stopped "
        "moving (no new record for --quiet seconds), then publish a writer-epoch record with "
        "the expected-last-sequence check and commit it locally once acknowledged. From then "
        "on the old writer is refused. Exit 0 means: write to this store and ship it.")
    _common(p)
    p.add_argument("--writer", default=None,
                   help="a name for the new writer, recorded in the epoch record "
                   "(default: this host's name)")
    p.add_argument("--quiet", type=float, default=2.0, metavar="SECONDS",
                   help="refuse if the stream grew within this many seconds (default 2)")
    p.add_argument("--force", action="store_true",
                   help="promote even while the old writer still ships: it is fenced as it runs")
    json_flag(p, "the result as JSON")
    p.set_defaults(handler=cmd_promote)


def _common(p: Any) -> None:
    p.add_argument("--nats", required=True, metavar="URL[,URL...]",
                   help="NATS server URLs, comma-separated (give every node of a cluster)")
    p.add_argument("--stream", required=True, metavar="NAME", help="the JetStream stream name")
    p.add_argument("--prefix", default=None,
                   help="subject prefix (default braidlog.NAME; subjects are PREFIX.<braid>)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds to wait for NATS before giving up (default 60)")


def _replicas(p: Any) -> None:
    p.add_argument("--replicas", type=int, default=None,
                   help="the stream's replication factor (3 on a 3-node cluster): a new stream "
                   "is created with it (default 1), an existing one with another factor is "
                   "scaled to it or refused")


def _replication() -> Any:
    from .. import replication  # raises ReplicationError with the install hint without nats-py
    from ..replication.stream import _nats

    _nats()
    return replication


def _kinds() -> None:
    """Declare every shipped kind, so deltas validate exactly as they did on the writer."""
    try:
        from braidlog.projections import default_projections
    except ImportError:
        return
    default_projections()


def _stream(args: Any, *, create: bool, replicas: int | None = None) -> Any:
    rep = _replication()
    return rep.Stream(args.nats, args.stream, replicas=replicas, create=create,
                      prefix=args.prefix, timeout=min(args.timeout, 10.0))


def _until(duration: float | None) -> threading.Event:
    stop = threading.Event()
    if duration is not None:
        timer = threading.Timer(duration, stop.set)
        timer.daemon = True
        timer.start()
    return stop


def cmd_ship(args: Any, out: IO[str]) -> int:
    rep = _replication()
    _kinds()
    with open_store(args) as store, _stream(args, create=True, replicas=args.replicas) as stream:
        shipper = rep.Shipper(store, stream, batch=args.batch)
        if args.once:
            wm = shipper.ship(timeout=args.timeout)
        else:
            tell = sys.stderr if args.json else out
            tell.write(f"shipping {store.path} to stream {stream.name}; Ctrl-C stops\n")
            tell.flush()
            try:
                wm = shipper.follow(_until(args.duration), poll=args.poll,
                                    ship_timeout=args.timeout)
            except KeyboardInterrupt:
                wm = shipper.ship(timeout=args.timeout)
        if args.json:
            write_json(out, {"shipped": shipper.shipped, "stream": stream.name, "at": str(wm)})
        else:
            out.write(f"shipped {shipper.shipped} record(s); stream {stream.name} at {wm}\n")
    return 0


def cmd_sync_append(args: Any, out: IO[str]) -> int:
    from .core import parse_deltas

    rep = _replication()
    _kinds()
    text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    deltas, _ = parse_deltas(text)
    if not deltas:
        raise ValidationError("input", "no deltas given")
    with LmdbLog(store_path(args)) as store, \
            _stream(args, create=True, replicas=args.replicas) as stream:
        seqs = rep.SyncLog(store, stream, timeout=args.timeout).append_batch(deltas)
        head = store.head()
    if args.json:
        write_json(out, {"seqs": seqs, "head": str(head)})
    else:
        out.write(f"appended {len(seqs)} delta(s) at seq {seqs[0]}..{seqs[-1]}, acknowledged by "
                  f"stream {args.stream}; head {head}\n")
    return 0


def cmd_replica(args: Any, out: IO[str]) -> int:
    rep = _replication()
    _kinds()
    start = time.monotonic()
    checkpoints = _checkpoint_opener(args.checkpoint_key)
    witness = None
    if args.witness_key is not None:
        from ..proofs import read_key
        witness = read_key(args.witness_key)
    with LmdbLog(store_path(args)) as store, _stream(args, create=False) as stream:
        replica = rep.Replica(store, stream, checkpoints=checkpoints, witness_key=witness,
                              cosign_dir=args.cosign_dir)
        if args.once:
            head = replica.catch_up(timeout=args.timeout)
        else:
            tell = sys.stderr if args.json else out
            tell.write(f"following stream {stream.name} into {store.path}; Ctrl-C stops\n")
            tell.flush()
            try:
                head = replica.follow(_until(args.duration))
            except KeyboardInterrupt:
                head = replica.head
        took = time.monotonic() - start
    checked = (f"; held to {replica.checked_checkpoints} signed checkpoint(s)"
               if checkpoints is not None else "")
    if replica.witness is not None:
        checked += f"; cosigned {replica.witness.cosigned} into {args.cosign_dir}"
    if args.json:
        write_json(out, {"applied": replica.applied, "seconds": round(took, 3), "head": str(head),
                         "checkpoints": replica.checked_checkpoints if checkpoints is not None
                         else None,
                         "cosigned": replica.witness.cosigned if replica.witness else None})
        return 0
    out.write(f"applied {replica.applied} record(s) in {took:.1f} s; replica at {head}{checked}\n")
    return 0


def _checkpoint_opener(key: str | None) -> Any:
    """``open(note)`` for the writer's verifier key, or None."""
    if key is None:
        return None
    from pathlib import Path

    from ..proofs.verify import VerificationError, open_checkpoint, parse_verifier_key

    text = key
    if "+" not in key and Path(key).is_file():
        text = Path(key).read_text(encoding="utf-8")
    try:
        verifier = parse_verifier_key(text)
    except VerificationError as e:
        raise ValidationError("--checkpoint-key", str(e)) from None
    return lambda note: open_checkpoint(note, verifier)


def cmd_promote(args: Any, out: IO[str]) -> int:
    rep = _replication()
    _kinds()
    with LmdbLog(store_path(args)) as store, _stream(args, create=False) as stream:
        done = rep.promote(store, stream, writer=args.writer, quiet=args.quiet,
                           force=args.force, timeout=args.timeout)
    if args.json:
        write_json(out, {"epoch": done.epoch, "head": str(done.head), "seq": done.head.seq,
                         "caught_up": str(done.caught_up), "stream": args.stream})
        return 0
    out.write(f"promoted: writer epoch {done.epoch} begins at seq {done.head.seq}, after "
              f"everything stream {args.stream} acknowledged (up to {done.caught_up}); the old "
              f"writer is refused from now on. Head {done.head}: write to this store and run "
              "`braidlog ship` or `braidlog sync-append` from here\n")
    return 0
