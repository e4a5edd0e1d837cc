"""Core commands: init, append, log, show, head, verify, repair, state, rebuild, demo."""

from __future__ import annotations

import argparse
import heapq
import re
import sys
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from itertools import chain, islice
from typing import IO, Any

import msgspec

from ..delta import PROVENANCE_KINDS, from_json, repeated_key, repeated_key_rule
from ..errors import DecodeError, IntegrityError, ValidationError
from ..kinds import default_confidence
from ..lmdb.log import LmdbLog
from ..store import Head, Record
from .util import (
    console,
    holds_nothing,
    json_flag,
    load_kinds,
    open_for_state,
    open_store,
    parse_point,
    progress_bar,
    record_json,
    refuse_on_replica,
    store_path,
    summary,
    to_builtins,
    write_json,
)

TABLE_ROWS = 1000


def register(sub: Any) -> None:
    p = sub.add_parser("init", help="create an empty store",
                       description="Create an empty store (a directory) at --store.")
    json_flag(p)
    p.set_defaults(handler=cmd_init)

    p = sub.add_parser("append", help="append deltas from JSON or JSON Lines",
                       description="Append deltas given as one JSON object, a JSON array, or JSON "
                       "Lines, from FILE or standard input, in one atomic batch. Each delta needs "
                       "braid_id, kind and payload; what it leaves out is filled in: ts with the "
                       "time now (UTC), provenance with {\"kind\": \"user\"} (--provenance KIND "
                       "to change it) and confidence with its kind's default for that provenance "
                       "(a message from a user: 0.7; see docs/cli.md).")
    p.add_argument("file", nargs="?", default="-", help="a file, or - for standard input (default)")
    p.add_argument("--provenance", default="user", choices=PROVENANCE_KINDS, metavar="KIND",
                   help="the provenance kind of deltas that state none (default: user; one of "
                   + ", ".join(PROVENANCE_KINDS) + ")")
    p.add_argument("--expected-version", type=natural, default=None,
                   help="the number of deltas the braid must hold, else nothing is written")
    json_flag(p, "print the seqs as JSON")
    p.add_argument("--embed", nargs="?", const="default", default=None, metavar="SPACE",
                   help="attach a vector (space SPACE, default: default) to each delta that has text and "
                   "no vector, so `braidlog recall` finds it (needs the recall extra); the space's first "
                   "vectors record their embedder in the log, and another one is refused")
    p.add_argument("--embedder", default=None, metavar="SPEC",
                   help="with --embed: hashing, model2vec:DIR, sentence-transformers:DIR, fastembed:NAME, "
                   "wordllama or module:attribute (default: the space's recorded embedder, else "
                   "$BRAIDLOG_EMBEDDER, else hashing; see docs/recall.md)")
    p.set_defaults(handler=cmd_append)

    p = sub.add_parser("log", help="list deltas", description="List deltas, oldest first.")
    p.add_argument("--braid", action="append", help="only this braid (repeat for several)")
    p.add_argument("--kind", action="append", help="only this kind (repeat for several)")
    p.add_argument("--entity", action="append", metavar="ID",
                   help="only deltas that refer to this entity id, as `history` finds them (an "
                   "eventsourcing aggregate's originator id, a bead, a decision …; repeat for several)")
    p.add_argument("--start", type=natural, default=1, help="first seq (default 1)")
    p.add_argument("--stop", type=natural, default=None, help="stop before this seq")
    p.add_argument("--limit", type=natural, default=None, help="at most this many")
    p.add_argument("--reverse", action="store_true", help="newest first")
    json_flag(p, "one JSON record a line")
    p.add_argument("--vectors", action="store_true",
                   help="print embedded vectors whole (default: their space and dimension only)")
    p.set_defaults(handler=cmd_log)

    p = sub.add_parser("show", help="show one delta by seq or id",
                       description="Show one delta, by seq or by delta id.")
    p.add_argument("ref", help="a seq or a delta id")
    json_flag(p)
    p.add_argument("--vectors", action="store_true",
                   help="print an embedded vector whole (default: its space and dimension only)")
    p.add_argument("--entry", action="store_true",
                   help="write the record's committed form, the exact bytes its Merkle leaf and "
                   "its proofs are about (binary: redirect it, or give --out)")
    p.add_argument("--out", default=None, metavar="FILE", help="with --entry: write it to FILE")
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("head", help="print the head (seq and chain hash) to write down",
                       description="Print the head SEQ:HASH. Keep it: `braidlog verify --against "
                       "SEQ:HASH` later proves the first SEQ deltas are unchanged.")
    json_flag(p)
    p.set_defaults(handler=cmd_head)

    p = sub.add_parser("verify", help="check the chain, every index and the file",
                       description="Read every record through the B-tree as reads do and "
                       "recompute the hash chain and the Merkle tree, check every index against "
                       "the log both ways, both LMDB meta pages and the file's B-tree; report "
                       "the first damage (seq, index entry or page) and what to do.")
    p.add_argument("--against", metavar="SEQ:HASH",
                   help="also prove the first SEQ deltas are those of a head taken earlier")
    json_flag(p)
    p.set_defaults(handler=cmd_verify)

    p = sub.add_parser("repair", help="rebuild the indexes from the log",
                       description="Rebuild every index (id, id-digest, braid, kind, refers-to, "
                       "vector spaces) and the Merkle tree from the log, in one transaction, "
                       "after checking the log's chain; then verify the store.")
    p.add_argument("--indexes", action="store_true", required=True,
                   help="rebuild the indexes (the only repair there is: the log is the truth)")
    json_flag(p)
    p.set_defaults(handler=cmd_repair)

    p = sub.add_parser("state", help="projection state as of a point",
                       description="Print projection states as of a seq, delta id or time.")
    p.add_argument("--at", default=None, help="SEQ, delta ID or ISO time (default: the head); a time "
                   "means the log as recorded by then: the longest prefix whose deltas are all "
                   "stamped at or before it")
    p.add_argument("--valid-at", default=None, metavar="TIME",
                   help="ISO time: fold every delta stamped (ts) at or before it, wherever it is in "
                   "the log: what is known now about then (backfilled deltas included)")
    p.add_argument("--projection", default=None, help="only this projection")
    p.add_argument("--entity", default=None, metavar="ID",
                   help="only this entity (decision, bead, topic … id) of --projection; folds "
                   "only its deltas where the projection allows")
    json_flag(p)
    p.set_defaults(handler=cmd_state)

    p = sub.add_parser("rebuild", help="rebuild every projection from the log",
                       description="Fold the whole log into every projection again and "
                       "rewrite their checkpoints.")
    json_flag(p)
    p.set_defaults(handler=cmd_rebuild)

    p = sub.add_parser("demo", help="write a realistic agent session and show it",
                       description="Write a realistic agent session into the store (created if "
                       "needed) and show what is in it.")
    p.add_argument("--quiet", action="store_true", help="only the one-line summary")
    json_flag(p, "the summary as JSON")
    p.set_defaults(handler=cmd_demo)


def natural(text: str) -> int:
    """An argument that counts or names a seq: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def cmd_init(args: Any, out: IO[str]) -> int:
    with LmdbLog(store_path(args)) as store:
        head = store.head()
    if args.json:
        write_json(out, {"store": store_path(args), "head": str(head), "seq": head.seq})
    else:
        out.write(f"store ready at {store_path(args)} (head {head})\n")
    return 0


def cmd_append(args: Any, out: IO[str]) -> int:
    fill = Defaults(datetime.now(UTC), getattr(args, "provenance", "user"))
    deltas, places = parse_deltas(_read_input(args.file), fill)
    if not deltas:
        raise ValidationError("input", "no deltas given")
    load_kinds(args)
    embedded = None
    space = getattr(args, "embed", None)
    if space is None and getattr(args, "embedder", None):
        raise ValidationError("--embedder", "applies with --embed only")
    refuse_on_replica(args, "append")
    with open_for_state(args, lazy=True) as store:  # the store's projections' checks hold
        try:
            if space is None:
                seqs = store.append_batch(deltas, expected_version=args.expected_version)
            else:
                from .recall_cmd import append_embedded

                seqs, embedded = append_embedded(store, deltas, space, args.embedder, args.expected_version)
        except ValidationError as e:
            if e.index is None:
                raise
            raise ValidationError(e.field, e.rule, index=e.index, where=places[e.index]) from None
        head = store.head()
    if args.json:
        write_json(out, {"seqs": seqs, "head": str(head)} | ({} if embedded is None else {"embedded": embedded}))
    else:
        note = "" if embedded is None else f"; {embedded} embedded"
        out.write(f"appended {len(seqs)} delta(s) at seq {seqs[0]}..{seqs[-1]}{note}; head {head}\n")
    return 0


def _read_input(file: str) -> str:
    """The text of ``file`` (``-``: standard input), which must be UTF-8, as JSON is."""
    if file == "-":
        stream = getattr(sys.stdin, "buffer", sys.stdin)  # a text stream when one replaced stdin
        raw = stream.read()
    else:
        with open(file, "rb") as f:
            raw = f.read()
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DecodeError(f"line {line}: not UTF-8: byte {raw[e.start]:#04x} at offset {e.start} "
                          "(deltas are JSON, which is UTF-8: convert the input)") from None


class Defaults:
    """What a shell user may leave out of a delta: ``ts`` (now, UTC), ``provenance`` (``kind``)
    and ``confidence`` (its kind's default for that provenance, ``braidlog.default_confidence``)."""

    def __init__(self, now: datetime, kind: str) -> None:
        self.ts, self.kind = now.isoformat(), kind

    def fill(self, text: str | bytes) -> str | bytes:
        """``text`` with the missing fields filled in, when it is one JSON object without a
        repeated key (anything else is left for the decoder to name what is wrong)."""
        try:
            obj = msgspec.json.decode(text)
        except (msgspec.DecodeError, UnicodeEncodeError, RecursionError):
            return text  # nested past Python's limit: the decoder names the depth rule
        if not isinstance(obj, dict) or repeated_key(text) is not None:
            return text
        if all(k in obj for k in ("ts", "provenance", "confidence")):
            return text
        obj.setdefault("ts", self.ts)
        obj.setdefault("provenance", {"kind": self.kind})
        prov, kind = obj["provenance"], obj.get("kind")
        if "confidence" not in obj and isinstance(prov, dict) and isinstance(prov.get("kind"), str) \
                and isinstance(kind, str):
            obj["confidence"] = default_confidence(kind, prov["kind"], obj.get("payload"))
        return msgspec.json.encode(obj)


def parse_deltas(text: str, defaults: Defaults | None = None) -> tuple[list[Any], list[str]]:
    """Deltas from one JSON object, a JSON array of them, or JSON Lines, and where each came
    from ("line N" of the input, counting from 1, or "item N" of an array) for error messages.

    The input is JSON Lines when it has several lines and the first of them is a JSON value on
    its own; otherwise it is one JSON document (an object or an array, laid out as it likes)."""
    stripped = text.strip()
    if not stripped:
        return [], []
    numbered = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    if len(numbered) > 1 and _complete(numbered[0][1]):
        places = [f"line {n}" for n, _ in numbered]
        return [_parse(ln, i, places[i], defaults=defaults) for i, (_, ln) in enumerate(numbered)], places
    first = numbered[0][0]
    if stripped.startswith("["):
        try:
            items = msgspec.json.decode(stripped)
        except (msgspec.DecodeError, UnicodeEncodeError) as e:
            raise DecodeError(f"not a JSON array: {_why(e)}") from None
        repeated = repeated_key(stripped)
        if repeated is not None:
            raise DecodeError(f"line {repeated[1] + first - 1}: {repeated_key_rule(repeated[0])}")
        places = [f"item {i + 1}" for i in range(len(items))]
        return [_parse(msgspec.json.encode(item), i, places[i], defaults=defaults)
                for i, item in enumerate(items)], places
    return [_parse(stripped, 0, f"line {first}", first=first, defaults=defaults)], [f"line {first}"]


def _complete(line: str) -> bool:
    try:
        msgspec.json.decode(line)
    except (msgspec.DecodeError, UnicodeEncodeError):
        return False
    return True


def _why(e: Exception) -> str:
    if isinstance(e, UnicodeEncodeError):
        return f"{e.object[e.start]!r} is half of a UTF-16 surrogate pair, not a character"
    return str(e)


_JSON_TYPES = {"array": "an array", "str": "a string", "int": "a number", "float": "a number",
               "bool": "a boolean", "null": "null"}


def _parse(text: str | bytes, index: int, place: str, *, first: int = 1,
           defaults: Defaults | None = None) -> Any:
    """One delta from JSON ``text`` that came from ``place`` (``first``: the input line the text
    starts on, for a repeated key found further down a multi-line object), with what it leaves
    out filled in by ``defaults`` when given."""
    try:
        return from_json(text if defaults is None else defaults.fill(text), index=index)
    except ValidationError as e:
        got = re.fullmatch(r"Expected `object`, got `(\w+)`", e.rule)
        if e.field == "delta" and got:
            raise ValidationError("delta", f"must be a JSON object, one delta a line (got "
                                  f"{_JSON_TYPES.get(got.group(1), got.group(1))})",
                                  index=index, where=place) from None
        raise ValidationError(e.field, e.rule, index=index, where=place) from None
    except DecodeError as e:
        message = re.sub(r"^line \d+: ", "", str(e))
        repeated = repeated_key(text) if "appears twice" in message else None
        if repeated is not None and repeated[1] > 1:
            place = f"line {repeated[1] + first - 1}"
        raise DecodeError(f"{place}: {message}") from None


def cmd_log(args: Any, out: IO[str]) -> int:
    with open_store(args) as store:
        records = _filtered(store, args.braid or [], args.kind or [], args.start, args.stop,
                            args.reverse, args.limit, args.entity or [])
        if args.json:
            for rec in records:
                write_json(out, record_json(rec, vectors=args.vectors))
            return 0
        if args.limit is None:  # a table is built whole before it prints: keep it readable
            shown = list(islice(records, TABLE_ROWS + 1))
            print_records(out, shown[:TABLE_ROWS])
            if len(shown) > TABLE_ROWS:
                out.write(f"… showing the first {TABLE_ROWS}; pass --limit N for more, or --json "
                          "to stream every record\n")
            return 0
        print_records(out, records)
    return 0


def _entity_records(store: LmdbLog, entity: str, start: int, stop: int | None, reverse: bool
                    ) -> Iterator[Record]:
    """The deltas that refer to ``entity``, or when none does, those of the braids it names
    (``<namespace>:<entity>``: an eventsourcing aggregate), as `history` finds them."""
    found = iter(store.scan_refs(entity, start, stop, reverse=reverse))
    first = next(found, None)
    if first is not None:
        return chain((first,), found)
    from ..audit import braid_records  # loaded by the commands that read an entity, not at start-up

    return iter(braid_records(store, entity, start, stop, reverse=reverse))


def _distinct(records: Iterator[Record]) -> Iterator[Record]:
    """Records merged from several indexes, each once (a delta may refer to two of the ids)."""
    last = None
    for r in records:
        if r.seq != last:
            yield r
        last = r.seq


def _filtered(store: LmdbLog, braids: list[str], kinds: list[str], start: int, stop: int | None,
              reverse: bool, limit: int | None, entities: Iterable[str] = ()) -> Iterator[Record]:
    """Records of any of ``braids`` and any of ``kinds`` (no filter when empty), each read
    through its index and merged in seq order; with ``entities``, only those that refer to one
    of them (the refers-to index). A braid or kind the store has never seen is named on
    standard error, so that a typo is not mistaken for an empty result."""
    if entities:
        sources = [_entity_records(store, e, start, stop, reverse) for e in dict.fromkeys(entities)]
        found = sources[0] if len(sources) == 1 else _distinct(heapq.merge(
            *sources, key=lambda r: r.seq, reverse=reverse))
        if braids or kinds:
            wanted_braids, wanted_kinds = set(braids), set(kinds)
            found = (r for r in found if (not braids or r.delta.braid_id in wanted_braids)
                     and (not kinds or r.delta.kind in wanted_kinds))
        return islice(found, limit)
    for name, index, wanted in (("braid", "braid", braids), ("kind", "kind", kinds)):
        known = store.counts(index) if wanted else {}
        names = sorted(known)
        listed = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        for w in wanted:
            if w not in known:
                sys.stderr.write(f"braidlog: note: no delta of {name} {w!r} in this store "
                                 f"(its {name}s: {listed or 'none'})\n")
    if braids:
        sources = [store.scan_braid(b, start, stop, reverse=reverse) for b in dict.fromkeys(braids)]
    elif kinds:
        sources = [store.scan_kind(k, start, stop, reverse=reverse) for k in dict.fromkeys(kinds)]
    else:
        sources = [store.scan(start, stop, reverse=reverse)]
    records = sources[0] if len(sources) == 1 else heapq.merge(
        *sources, key=lambda r: r.seq, reverse=reverse)
    if braids and kinds:
        wanted_kinds = set(kinds)
        records = (r for r in records if r.delta.kind in wanted_kinds)
    return islice(records, limit)


def print_records(out: IO[str], records: Any, title: str | None = None) -> None:
    """A table of records laid out for the width it is printed at (cli/tables.py): the seq, the
    kind and the start of the payload stay readable at 80 columns and through a pipe."""
    from .tables import print_table, record_columns, record_row

    print_table(out, record_columns(), (record_row(rec.seq, rec.delta, summary(rec.delta)) for rec in records),
                title=title, empty="no deltas")


def cmd_show(args: Any, out: IO[str]) -> int:
    ref = args.ref.strip()
    if not ref:
        raise ValidationError("ref", "is empty: give a seq (1 to the head) or a delta id")
    with open_store(args) as store:
        if ref.isdigit():
            seq = int(ref)
            rec = store.read(seq) if 1 <= seq <= store.head().seq else None
        else:
            rec = store.get(ref)
        if rec is None:
            head = store.head()
            held = f"seqs 1..{head.seq}" if head.seq else "no delta yet"
            raise ValidationError("ref", f"no delta with seq or id {ref!r}; the log holds {held} "
                                  f"(head {head})")
        if args.entry:
            return _write_bytes(store.entry(rec.seq), args.out, out)
        shown = record_json(rec, vectors=args.vectors)
        if args.json:
            write_json(out, shown)
        else:
            out.write(f"seq    {rec.seq}\nhash   {rec.hash.hex()}\n")
            out.write(msgspec.json.format(msgspec.json.encode(shown["delta"]), indent=2).decode() + "\n")
    return 0


def _write_bytes(data: bytes, path: str | None, out: IO[str]) -> int:
    """``data`` into the file ``path``, or as bytes to ``out`` (a terminal is refused)."""
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
        return 0
    binary = getattr(out, "buffer", None)
    if binary is None or out.isatty():
        raise ValidationError("--entry", "writes bytes, not text: redirect standard output to a "
                              "file (`> entry.bin`) or give --out FILE")
    out.flush()
    binary.write(data)
    binary.flush()
    return 0


def cmd_head(args: Any, out: IO[str]) -> int:
    with open_store(args) as store:
        head = store.head()
    if args.json:
        write_json(out, {"seq": head.seq, "hash": head.hash.hex(), "head": str(head)})
    else:
        out.write(f"{head}\n")
    return 0


def _head_or_none(store: LmdbLog) -> Head | None:
    """The head, read only after the pages on the way to it are checked from the file; None
    when one is damaged (verify and repair check every page first and name the damage)."""
    try:
        return store.check_head()
    except IntegrityError:
        return None


def cmd_verify(args: Any, out: IO[str]) -> int:
    against = None
    if args.against:
        try:
            against = Head.parse(args.against)
        except ValidationError as e:
            raise ValidationError("--against", e.rule) from None
    load_kinds(args)  # the refers-to index is checked against what the kinds name as subjects
    with open_store(args, check_head=False) as store:
        head = _head_or_none(store)  # verify exactly this head, even while a writer appends
        stop = None if head is None else head.seq + 1
        if against is not None:
            if head is not None and against.seq > head.seq:
                raise IntegrityError(f"--against: the log holds {head.seq} deltas, fewer than the "
                                     f"{against.seq} of the head given: deltas were lost",
                                     seq=head.seq + 1)
            stop = against.seq + 1
        total = 0 if stop is None else stop - 1
        try:
            with progress_bar("verifying", total, enabled=total >= 100_000) as update:
                # --against proves a prefix of the chain; otherwise the whole store is checked:
                # every record, every index both ways, the meta pages and the B-tree
                checked = (store.verify(1, stop, progress=update) if against is not None
                           else store.verify(progress=update))
            upgraded = None
            if against is not None and checked.hash != against.hash:
                from ..proofs.prove import before_upgrade
                upgraded = before_upgrade(store, against.seq, hash=against.hash)
            if against is not None and checked.hash != against.hash and upgraded is None:
                raise IntegrityError(
                    f"--against: the first {against.seq} deltas differ from the head given: "
                    f"expected hash "
                    f"{against.hash.hex()}, found {checked.hash.hex()} at seq {against.seq}",
                    seq=against.seq, expected=against.hash, found=checked.hash)
            from ..proofs.checkpoint import check_notes
            issued = check_notes(store)  # the log still extends every checkpoint it signed
        except IntegrityError as e:
            if args.json:
                write_json(out, {"ok": False, "seq": e.seq, "error": str(e),
                                 "expected": e.expected.hex() if e.expected else None,
                                 "found": e.found.hex() if e.found else None})
            raise
    if args.json:
        write_json(out, {"ok": True, "verified": checked.seq, "head": str(head or checked),
                         "against": str(against) if against else None,
                         **({"before_upgrade": True} if upgraded else {}),
                         **({"checkpoints": len(issued)} if issued else {})})
    elif against is not None and upgraded is not None:
        out.write(f"ok: the first {against.seq} deltas are unchanged since head {against}, "
                  f"a head {upgraded.replace('issued ', '', 1)}; their hashes now are those of "
                  "the chain over their committed forms\n")
    elif against is not None:
        out.write(f"ok: the first {against.seq} deltas are unchanged since head {against}\n")
    else:
        out.write(f"ok: {checked.seq} deltas verified; head {head or checked}\n")
    if issued and not args.json:
        out.write(f"ok: the log extends all {len(issued)} checkpoint(s) it signed (last at size "
                  f"{issued[-1].size})\n")
    return 0


def cmd_repair(args: Any, out: IO[str]) -> int:
    load_kinds(args)  # the refers-to index is rebuilt from what the kinds name as subjects
    with open_store(args, readonly=False, check_head=False) as store:
        head = _head_or_none(store)
        with progress_bar("checking the log", 0 if head is None else head.seq) as update:
            written = store.repair_indexes(progress=update)
        checked = store.verify()
    if args.json:
        write_json(out, {"ok": True, "written": written, "verified": checked.seq,
                         "head": str(checked)})
    else:
        rows = written.pop("tree")
        out.write("rebuilt from the log: " + ", ".join(f"{t} {n}" for t, n in written.items())
                  + f" entries; Merkle tree nodes rewritten in {rows} rows\n"
                  f"ok: {checked.seq} deltas verified; head {checked}\n")
    return 0


def cmd_state(args: Any, out: IO[str]) -> int:
    if args.valid_at is not None:
        return _state_valid_at(args, out)
    braid = open_for_state(args, readonly=True)
    try:
        point = parse_point(args.at) if args.at else None
        seq = braid.resolve(point) if point is not None else braid.head().seq
        view = braid.at(seq)
        notes = _at_notes(braid.log, point, seq) if isinstance(point, datetime) else []
        if args.entity is not None:
            if not args.projection:
                raise ValidationError("--entity", "needs --projection: an entity is one "
                                      "projection's (e.g. --projection decisions)")
            from ..audit import entity_at

            value = entity_at(view, args.projection, args.entity)
            if args.json:
                write_json(out, {"seq": seq, "head": str(view.head()), "projection": args.projection,
                                 "entity": args.entity, "value": value} | _notes_json(notes))
            else:
                con = console(out)
                con.print(f"as of seq {seq} ({view.head()}): {args.projection} {args.entity}")
                _print_notes(con, notes)
                con.print_json(msgspec.json.encode(value).decode())
            return 0
        if args.projection:
            braid.projection(args.projection)
            states = {args.projection: view.state(args.projection)}
        else:  # only the projections that hold something as of seq
            states = {name: view.state(name) for name in braid.projections}
            states = {name: state for name, state in states.items()
                      if not holds_nothing(braid.projection(name), state, braid.log, seq)}
            if not states:
                notes.append(f"no projection holds anything as of seq {seq}"
                             + ("" if seq else ": the log is empty up to there"))
        if args.json:
            write_json(out, {"seq": seq, "head": str(view.head()), "states": to_builtins(states)}
                       | _notes_json(notes))
        else:
            con = console(out)
            con.print(f"as of seq {seq} ({view.head()})")
            _print_notes(con, notes)
            for name, state in states.items():
                con.rule(name)
                con.print_json(msgspec.json.encode(to_builtins(state)).decode())
    finally:
        braid.close()
    return 0


def _at_notes(log: Any, when: datetime, seq: int) -> list[str]:
    """What ``--at TIME`` means, and what it leaves out: deltas stamped at or before TIME that
    were recorded after a later-stamped one (backfilled), which ``--valid-at`` includes."""
    stamp = when.isoformat()
    notes = [f"--at {stamp} is the log as recorded by then: the longest prefix whose deltas are all "
             f"stamped at or before it (seq {seq})"]
    head = log.head().seq
    if seq == 0 and head:
        first = log.read(1).delta.ts.isoformat()
        notes.append(f"nothing was recorded by {stamp}: the log's first delta is stamped {first}")
    later = sum(1 for r in log.scan(seq + 1) if r.delta.ts <= when) if seq < head else 0
    if later:
        notes.append(f"{later} delta(s) recorded later are stamped at or before {stamp} (backfilled); "
                     f"--valid-at {stamp} folds them too")
    return notes


def _notes_json(notes: list[str]) -> dict[str, Any]:
    return {"notes": notes} if notes else {}


def _print_notes(con: Any, notes: list[str]) -> None:
    for note in notes:
        con.print(f"note: {note}", soft_wrap=True)


def _state_valid_at(args: Any, out: IO[str]) -> int:
    """``state --valid-at TIME``: every projection folded over the deltas stamped at or before
    TIME, in log order (a bitemporal read: what the log knows now about then)."""
    if args.at is not None:
        raise ValidationError("--valid-at", "cannot be combined with --at: --at cuts the log as "
                              "recorded, --valid-at picks deltas by their own time; give one")
    if args.entity is not None:
        raise ValidationError("--valid-at", "cannot be combined with --entity; use --at for an entity")
    when = parse_point(args.valid_at, "--valid-at")
    if not isinstance(when, datetime):
        raise ValidationError("--valid-at", f"{args.valid_at!r} is not an ISO-8601 time with a timezone")
    braid = open_for_state(args, readonly=True)
    try:
        if args.projection:
            chosen = [braid.projection(args.projection)]
        else:
            chosen = [braid.projection(name) for name in braid.projections]
        states = {p.name: p.start() for p in chosen}
        head, taken = braid.head(), 0
        for rec in braid.log.scan():
            d = rec.delta
            if d.ts > when:
                continue
            taken += 1
            for p in chosen:
                if p.reads(d):
                    states[p.name] = p.apply(states[p.name], d, rec.seq)
        stamp = when.isoformat()
        notes = [f"--valid-at {stamp}: the {taken} of {head.seq} deltas stamped at or before it, "
                 "in log order (what the log knows now about then)"]
        if taken == 0:
            notes.append(f"no delta is stamped at or before {stamp}"
                         + (f": the earliest is stamped {min(r.delta.ts for r in braid.log.scan()).isoformat()}"
                            if head.seq else ": the log is empty"))
        if not args.projection:
            states = {n: s for n, s in states.items() if not holds_nothing(braid.projection(n), s)}
            if taken and not states:
                notes.append("no projection holds anything from those deltas")
        if args.json:
            write_json(out, {"valid_at": stamp, "deltas": taken, "head": str(head),
                             "states": to_builtins(states), "notes": notes})
        else:
            con = console(out)
            con.print(f"valid at {stamp} ({taken} of {head.seq} deltas; head {head})")
            _print_notes(con, notes)
            for name, state in states.items():
                con.rule(name)
                con.print_json(msgspec.json.encode(to_builtins(state)).decode())
    finally:
        braid.close()
    return 0


def cmd_rebuild(args: Any, out: IO[str]) -> int:
    braid = open_for_state(args, lazy=True)  # catching up first would fold the log twice
    try:
        total = braid.head().seq
        with progress_bar("rebuilding", total) as update:
            head = braid.rebuild(progress=update)
        braid.checkpoint()
        if args.json:
            write_json(out, {"projections": list(braid.projections), "deltas": head,
                             "head": str(braid.head())})
        else:
            out.write(f"rebuilt {len(braid.projections)} projection(s) over {head} deltas\n")
    finally:
        braid.close()
    return 0


def cmd_demo(args: Any, out: IO[str]) -> int:
    from .demo import run_demo

    braid_id, first, lines = run_demo(store_path(args))
    with open_store(args) as store:
        head = store.head()
    written = f"{head.seq - first + 1} deltas at seq {first}..{head.seq}"
    if args.json:
        write_json(out, {"braid": braid_id, "store": store_path(args), "first": first,
                         "head": str(head), "written": head.seq - first + 1, "pieces": lines})
        return 0
    if args.quiet:
        out.write(f"braidlog demo: wrote braid {braid_id} into {store_path(args)}: {written}; "
                  f"head {head}\n")
        return 0
    from rich.text import Text

    con = console(out)
    con.print(Text.assemble(("braidlog demo", "bold"),
                            f": wrote braid {braid_id} into {store_path(args)} ({written})"))
    for line in lines:
        con.print(f"  • {line}")
    with open_store(args) as store:
        print_records(out, store.scan(first), title=f"what the demo wrote (seq {first}..)")
        store.verify()
    con.print(f"chain verified; head {head}")
    con.print("next: braidlog log --kind message · braidlog state --at 5 · braidlog verify")
    con.print("forget who owned the project (docs/forgetting.md): braidlog erase --refers "
              "project-atlas/owner --reason \"the owners asked\"", markup=False)
    return 0
