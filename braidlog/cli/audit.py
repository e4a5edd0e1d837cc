"""Audit and operations commands: history, diff, explain, export, import, backup, restore, stats."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import IO, Any

from .. import audit, transfer
from ..apps import discover, for_store
from ..errors import StorageError, ValidationError
from ..lmdb.log import LmdbLog
from .util import (
    console,
    json_flag,
    load_kinds,
    open_braid,
    open_for_state,
    open_store,
    parse_point,
    progress_bar,
    record_json,
    refuse_on_replica,
    store_path,
    write_json,
)


def register(sub: Any) -> None:
    p = sub.add_parser("history", help="every delta that created or changed an entity",
                       description="Every delta that created or changed an entity (decision, bead, "
                       "knot, episode, topic, field, memory …), oldest first, with seq, time, "
                       "provenance, confidence, the reason given and the entity's state after "
                       "each step. Found through the refers-to index, never a full scan.")
    p.add_argument("entity", help="the entity id")
    p.add_argument("--at", default=None, help="as of SEQ, delta ID or ISO time (default: the head)")
    p.add_argument("--no-state", action="store_true", help="skip the projection states (faster)")
    json_flag(p)
    p.set_defaults(handler=cmd_history)

    p = sub.add_parser("diff", help="what changed between two points",
                       description="Per projection, the entities added, changed (field by field, "
                       "old -> new), superseded and removed between points A and B (seqs, delta "
                       "ids or ISO times, A before B), and the deltas responsible.")
    p.add_argument("a", help="the earlier point: SEQ, delta ID or ISO time")
    p.add_argument("b", nargs="?", default=None, help="the later point (default: the head)")
    p.add_argument("--projection", action="append", default=None,
                   help="only this projection (repeat for more)")
    json_flag(p)
    p.set_defaults(handler=cmd_diff)

    p = sub.add_parser("explain", help="why an entity is what it is, as of a point",
                       description="An entity's value as of a point and the chain of deltas, "
                       "provenance and reasons that led to it, for a person to read.")
    p.add_argument("entity", help="the entity id")
    p.add_argument("--at", default=None, help="as of SEQ, delta ID or ISO time (default: the head)")
    json_flag(p, "as JSON (the history with its current value)")
    p.set_defaults(handler=cmd_explain)

    p = sub.add_parser("export", help="write records as JSON Lines with their chain hashes",
                       description="Write records [--start, --stop) as JSON Lines: a header, one "
                       "line per record (seq, chain hash, exact stored bytes in base64, the delta "
                       "as JSON) and an end line. --braid writes only one braid's records (not a "
                       "piece of the chain: import it with --as-new).")
    p.add_argument("file", nargs="?", default="-", help="the output file, or - for standard output")
    p.add_argument("--start", type=int, default=1, help="first seq (default 1)")
    p.add_argument("--stop", type=int, default=None, help="stop before this seq (default: the head + 1)")
    p.add_argument("--braid", default=None, help="only this braid's records")
    json_flag(p, "print the summary as JSON (on stderr when the export goes to standard output)")
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser("import", help="import an export, all of it or nothing",
                       description="Import an export into --store (created if missing). A log "
                       "export is reproduced byte for byte with the same hashes and head: the store "
                       "must be empty, or stand exactly where the export starts. Every line is "
                       "checked; the first bad one is refused, naming it, and the store is left as "
                       "it was.")
    p.add_argument("file", help="the export file, or - for standard input")
    p.add_argument("--as-new", action="store_true",
                   help="append the deltas as new records after the head (needed for a --braid "
                   "export); deltas already present are skipped")
    p.add_argument("--against", metavar="SEQ:HASH", default=None,
                   help="refuse unless the export's chain passes through this head")
    json_flag(p)
    p.set_defaults(handler=cmd_import)

    p = sub.add_parser("backup", help="online, consistent copy of the store",
                       description="Copy --store into the new or empty directory DEST while "
                       "writers keep appending (LMDB's copy of one read transaction's snapshot), "
                       "verify the copy's chain against the live log and write a manifest.")
    p.add_argument("dest", help="a new or empty directory")
    json_flag(p)
    p.set_defaults(handler=cmd_backup)

    p = sub.add_parser("restore", help="restore a backup, verified, into a new store",
                       description="Restore the backup BACKUP into --store (a new or empty "
                       "directory): copy it beside the target, verify the hash chain, the head "
                       "recorded at backup time and every checkpoint, then move it into place.")
    p.add_argument("backup", help="a directory written by `braidlog backup`")
    json_flag(p)
    p.set_defaults(handler=cmd_restore)

    p = sub.add_parser("stats", help="what the store holds",
                       description="Deltas per kind and per braid, store size, head, checkpoints, "
                       "recall index coverage and the time span of the log.")
    json_flag(p)
    p.set_defaults(handler=cmd_stats)


# ------------------------------------------------------------------------------- auditing

def _missing(entity: str, seq: int, log: Any = None) -> ValidationError:
    """The error for an entity no delta refers to, saying so when an erasure of it explains why."""
    erased = _erased_by(log, entity, seq) if log is not None else []
    if erased:
        rec = erased[-1]
        seqs = rec.delta.payload.get("seqs") if rec.delta.erased is None else None
        what = f"its {len(seqs)} delta(s) (seqs {', '.join(map(str, seqs[:10]))}{' …' if len(seqs) > 10 else ''})" \
            if isinstance(seqs, list) else "its deltas"
        return ValidationError("entity", f"{entity!r} was erased: {what} were erased by seq {rec.seq} "
                               f"(reason: {rec.delta.payload.get('reason', '?')!s}); their envelopes and "
                               "commitments stay, what named it is gone (`braidlog show "
                               f"{rec.seq}`, docs/forgetting.md)")
    return ValidationError("entity", f"no delta refers to {entity!r} up to seq {seq}; check the id "
                           "(`braidlog log --json` shows ids and payloads)")


def _erased_by(log: Any, entity: str, seq: int) -> list[Any]:
    """The ``erased`` deltas up to ``seq`` whose erasure named ``entity`` (by its tag)."""
    from ..erasure import ERASED, subject_tag

    tag = subject_tag(entity)
    return [r for r in log.scan_kind(ERASED, 1, seq + 1) if tag in r.delta.tags]


def cmd_history(args: Any, out: IO[str]) -> int:
    braid = open_for_state(args, readonly=True, lazy=True)  # history folds only what it needs
    try:
        source = braid.at(parse_point(args.at)) if args.at else braid
        h = audit.history(source, args.entity, states=not args.no_state)
        if not h.steps:
            if args.entity in braid.log.braids():
                return _braid_history(braid.log, args.entity, h.seq, args.json, out)
            raise _missing(args.entity, h.seq, braid.log)
        if args.json:
            write_json(out, h)
        else:
            out.write(audit.format_history(h) + "\n")
    finally:
        braid.close()
    return 0


def _braid_history(log: Any, braid_id: str, seq: int, as_json: bool, out: IO[str]) -> int:
    """``history`` of a braid id: the braid's deltas up to seq, as ``log --braid`` lists them."""
    from .core import print_records

    records = list(log.scan_braid(braid_id, 1, seq + 1))
    if as_json:
        write_json(out, {"braid": braid_id, "seq": seq,
                         "deltas": [record_json(r) for r in records]})
        return 0
    print_records(out, records, title=f"braid {braid_id!r}: its {len(records)} delta(s) up to seq "
                  f"{seq} (an entity's history takes an entity id)")
    return 0


def _note_before_log(braid: Any, text: str, seq: int, name: str) -> None:
    """Say on stderr when a point given as a time or id names seq 0: it precedes the log."""
    if seq == 0 and text.strip() != "0" and braid.head().seq:
        first = braid.log.read(1).delta.ts.isoformat()
        sys.stderr.write(f"braidlog: note: point {name} ({text}) precedes the log, whose first "
                         f"delta is at {first}: it names seq 0, before any delta\n")


def cmd_diff(args: Any, out: IO[str]) -> int:
    braid = open_for_state(args, readonly=True)
    try:
        b = parse_point(args.b) if args.b is not None else braid.head().seq
        _note_before_log(braid, args.a, braid.resolve(parse_point(args.a)), "A")
        if args.b is not None:
            _note_before_log(braid, args.b, braid.resolve(b), "B")
        d = audit.diff(braid, parse_point(args.a), b, projections=args.projection)
        if args.json:
            write_json(out, d)
        else:
            out.write(audit.format_diff(d) + "\n")
    finally:
        braid.close()
    return 0


def cmd_explain(args: Any, out: IO[str]) -> int:
    braid = open_for_state(args, readonly=True, lazy=True)
    try:
        source = braid.at(parse_point(args.at)) if args.at else braid
        h = audit.history(source, args.entity)
        if not h.steps:
            raise _missing(args.entity, h.seq, braid.log)
        if args.json:
            write_json(out, h)
        else:
            out.write(audit.format_explain(h) + "\n")
    finally:
        braid.close()
    return 0


# ------------------------------------------------------------------------------ operating

def cmd_export(args: Any, out: IO[str]) -> int:
    with open_store(args) as store:
        total = store.head().seq
        to_stdout = args.file == "-"
        with progress_bar("exporting", total, enabled=total >= 100_000 and not to_stdout) as update:
            report = transfer.export(store, out if to_stdout else args.file, start=args.start,
                                     stop=args.stop, braid=args.braid, progress=update)
    note = sys.stderr if to_stdout else out
    if args.json:
        write_json(note, report)
    else:
        note.write(f"exported {report.count} record(s) of {report.scope} "
                   f"{report.braid or ''}{' ' if report.braid else ''}seq {report.start}.."
                   f"{report.stop - 1}; last {report.head}\n")
    return 0


def cmd_import(args: Any, out: IO[str]) -> int:
    path = Path(store_path(args))
    created = not path.exists()
    source = sys.stdin if args.file == "-" else args.file
    if args.file != "-" and not os.path.exists(args.file):
        raise ValidationError("file", f"no file {args.file}")
    load_kinds(args)
    refuse_on_replica(args, "import")
    ok = False
    try:
        with LmdbLog(path) as store:
            used = store.projections_used()
        projections, _ = for_store(discover(getattr(args, "app", None)), used)
        with open_braid(path, projections=projections, lazy=True) as braid:  # their checks hold
            report = transfer.import_(braid, source, as_new=args.as_new, against=args.against)
        ok = True
    finally:
        if created and not ok:
            shutil.rmtree(path, ignore_errors=True)
    if args.json:
        write_json(out, report)
    else:
        out.write(f"imported {report.written} record(s)"
                  + (f" ({report.skipped} already present)" if report.skipped else "")
                  + f"; head {report.head}\n")
    return 0


def cmd_backup(args: Any, out: IO[str]) -> int:
    with open_store(args) as store:
        report = transfer.backup(store, args.dest)
    if args.json:
        write_json(out, report)
    else:
        out.write(f"backup of {store_path(args)} at {report.path}: head {report.head}, "
                  f"{report.size} bytes, {report.checkpoints} checkpoint(s); verified\n")
    return 0


def cmd_restore(args: Any, out: IO[str]) -> int:
    if not os.path.isdir(args.backup):
        raise StorageError(f"no backup at {args.backup}",
                           hint="give the directory `braidlog backup` wrote")
    with LmdbLog(args.backup, create=False, readonly=True) as source:
        total = source.head().seq
    with progress_bar("verifying", total, enabled=total >= 100_000) as update:
        report = transfer.restore(args.backup, store_path(args), progress=update)
    if args.json:
        write_json(out, report)
    else:
        out.write(f"restored {args.backup} into {report.path}: {report.verified} deltas and "
                  f"{len(report.checkpoints)} checkpoint(s) verified; head {report.head}\n")
    return 0


def cmd_stats(args: Any, out: IO[str]) -> int:
    with open_store(args) as store:
        s = transfer.stats(store)
    if args.json:
        write_json(out, s)
        return 0
    con = console(out)
    con.print(f"store   {store_path(args)}")
    con.print(f"head    {s.head}")
    con.print(f"deltas  {s.deltas}")
    if s.size:
        con.print(f"size    {s.size['file_size']} bytes on disk, map {s.size['map_size']} bytes, "
                  f"{s.size['last_pgno'] + 1} pages of {s.size['page_size']}")
    if s.first_ts is not None and s.last_ts is not None and s.hw is not None:  # all or none
        con.print(f"span    {s.first_ts.isoformat()} .. {s.last_ts.isoformat()} "
                  f"(high-water {s.hw.isoformat()})")
    _table(con, "deltas per kind", "kind", s.kinds)
    _table(con, "deltas per braid", "braid", s.braids)
    if s.checkpoints:
        from rich.table import Table

        t = Table(title="checkpoints")
        for col in ("projection", "version", "count", "newest seq"):
            t.add_column(col, justify="left" if col == "projection" else "right")
        for c in s.checkpoints:
            t.add_row(c["projection"], str(c["version"]), str(c["count"]), str(c["newest"]))
        con.print(t)
    else:
        con.print("checkpoints  none")
    if not s.recall:
        con.print("recall index  none")
    for name, r in (s.recall or {}).items():
        facts = "" if "covered_seq" not in r else (
            f"{r['vectors']} vector(s), covers seq {r['covered_seq']}; ")
        con.print(f"recall index  {name}: {facts}{r['status']}")
    return 0


def _table(con: Any, title: str, key: str, counts: dict[str, int]) -> None:
    from rich.table import Table

    t = Table(title=title)
    t.add_column(key)
    t.add_column("deltas", justify="right")
    for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        t.add_row(k, str(n))
    con.print(t)
