"""Moving a store: JSON Lines export and import, backup and restore, and stats.

**Export** writes one JSON object a line: a header, one line per record, and an end line::

    {"braidlog":"export","format":2,"scope":"log","start":1,"stop":4,"braid":null,"prev":"00…"}
    {"seq":1,"hash":"<hex>","body":"<base64>","delta":{…the delta as JSON…},"salt":"<base64>","entry":"<base64>"}
    …
    {"end":true,"count":3,"head":"3:<hex>"}

``body`` is the record's body (``hw || canonical delta``), ``salt`` its salt, ``entry`` its
committed form (what the chain hash ``hash`` links and the Merkle tree's leaf: the envelope and
``SHA-256(salt || canonical delta)``), ``delta`` the same delta as JSON for people (it must match
``body``). Format 1 (before the committed form) had no salt and entry; it imports only as new
records. A log export covers
the seq range [start, stop) and continues the chain from ``prev``, the chain hash at seq
start - 1. A braid export (``braid=``) holds only that braid's records: it is not a piece of the
chain (the records between them are missing), so its hashes cannot be checked on their own.

**Import** of a log export reproduces the records byte for byte: the target store must stand
exactly where the export starts (empty for an export from seq 1, or at head ``start - 1`` with
hash ``prev``, so consecutive range exports can be imported one after another). Every line is
checked as it is read (JSON shape, seq order, the delta JSON against the body, the hw, the chain
hash, the payload schema) and the first bad line is refused, naming it; nothing is written until
the whole file passed, and then all of it is appended in one transaction (``expected_head``), so
a refused import leaves the target exactly as it was. A braid export (or any export with
``as_new=True``) is imported as new deltas: same ids and delta bytes, appended after the target's
head with new seqs and hashes; deltas already present with identical bytes are skipped.

**Backup and restore**, which only an LMDB store can do, live in braidlog.lmdb.backup (their
names are re-exported here); ``check_checkpoints`` in braidlog.replay.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import msgspec
from msgspec import Struct

from .chain import GENESIS, HASH_SIZE
from .delta import SALT_SIZE, GenericDelta, decode, repeated_key, repeated_key_rule, validate_typed
from .erasure import ERASED, Erasures, erased_bytes, erased_line, erasure_line
from .errors import ConflictError, DecodeError, IntegrityError, ValidationError
from .kind_schema import KIND_DECLARED, admit_declaration
from .kind_schema import sync as sync_kinds
from .kinds import REGISTRY, Registry
from .lmdb.backup import MANIFEST, BackupReport, RestoreReport, backup, restore
from .replay import CheckpointCheck, check_checkpoints
from .store import (
    HW_SIZE,
    FullStore,
    Head,
    OnDisk,
    Progress,
    Row,
    chain_fault,
    hw_fault,
    hw_of,
    record_entry,
    store_of,
    ts_micros,
)

if TYPE_CHECKING:
    from .braid import Braid

__all__ = [
    "FORMAT", "MANIFEST", "ExportHeader", "ExportLine", "ExportEnd", "ExportReport",
    "ImportReport", "ParsedExport", "BackupReport", "CheckpointCheck", "RestoreReport", "Stats",
    "export", "import_", "read_export", "backup", "restore", "check_checkpoints", "stats",
]

FORMAT = 2
READS = (1, 2)  # format 1: written before the committed form, imported only as new records


# ------------------------------------------------------------------------------- the format

class ExportHeader(Struct, frozen=True, forbid_unknown_fields=True):
    """The first line of an export."""

    braidlog: Literal["export"]
    format: int
    scope: Literal["log", "braid"]
    start: int
    stop: int
    braid: str | None = None
    prev: str | None = None


class ExportLine(Struct, frozen=True, forbid_unknown_fields=True):
    """One record: its seq, chain hash (hex), body (base64 in JSON), the delta, its salt and
    committed form (base64; absent in format 1)."""

    seq: int
    hash: str
    body: bytes
    delta: GenericDelta
    salt: bytes = b""
    entry: bytes = b""


class ExportEnd(Struct, frozen=True, forbid_unknown_fields=True):
    """The last line: how many records the file holds and the last one's seq and hash."""

    end: bool
    count: int
    head: str


class ExportReport(Struct, frozen=True):
    """What an export wrote."""

    scope: str
    start: int
    stop: int
    count: int
    head: str
    braid: str | None = None


class ImportReport(Struct, frozen=True):
    """What an import appended: ``written`` new records, ``skipped`` already present."""

    scope: str
    lines: int
    written: int
    skipped: int
    first: int
    last: int
    head: str
    as_new: bool


_json = msgspec.json.Encoder(order="deterministic")
_line_decoder = msgspec.json.Decoder(ExportLine)
_header_decoder = msgspec.json.Decoder(ExportHeader)
_end_decoder = msgspec.json.Decoder(ExportEnd)


# ---------------------------------------------------------------------------------- export

@contextlib.contextmanager
def _writer(out: IO[str] | str | os.PathLike[str]) -> Iterator[IO[str]]:
    if isinstance(out, (str, os.PathLike)):
        with open(out, "w", encoding="utf-8", newline="\n") as f:
            yield f
    else:
        yield out


def export(store: FullStore, out: IO[str] | str | os.PathLike[str], *, start: int = 1,
           stop: int | None = None, braid: str | None = None,
           progress: Progress | None = None) -> ExportReport:
    """Write records [start, stop) of ``store`` (a LogStore or a Braid; default: up to the head
    now) as JSON Lines to a text stream or a path; only ``braid``'s records when given. The head
    is read once, so a writer appending meanwhile is not exported."""
    store = store_of(store)
    head = store.head()
    stop = head.seq + 1 if stop is None else stop
    if start < 1:
        raise ValidationError("start", f"must be at least 1, got {start}")
    if stop < start or stop > head.seq + 1:
        raise ValidationError("stop", f"must be in {start}..{head.seq + 1} (the log holds "
                              f"1..{head.seq}), got {stop}")
    scope: Literal["log", "braid"] = "log" if braid is None else "braid"
    prev = store.hash_at(start - 1).hex() if braid is None else None
    header = ExportHeader("export", FORMAT, scope, start, stop, braid, prev)
    count, last = 0, Head(start - 1, bytes.fromhex(prev) if prev else GENESIS)
    with _writer(out) as f:
        f.write(_json.encode(header).decode() + "\n")
        for row in _rows(store, start, stop, braid):
            seq, h, body = row.seq, row.hash, row.body
            if row.erased_by:  # erased: its erased form, its committed form, no salt
                body = row.hw.to_bytes(HW_SIZE, "big") + erased_bytes(row.entry, row.erased_by)
            line = ExportLine(seq, h.hex(), body, decode(body[HW_SIZE:]), row.salt, row.entry)
            f.write(_json.encode(line).decode() + "\n")
            count += 1
            last = Head(seq, h)
            if progress is not None and not count % 16384:
                progress(count)
        f.write(_json.encode(ExportEnd(True, count, str(last))).decode() + "\n")
    if progress is not None:
        progress(count)
    return ExportReport(scope, start, stop, count, str(last), braid)


def _rows(store: FullStore, start: int, stop: int, braid: str | None) -> Iterator[Row]:
    if braid is None:
        yield from store.scan_rows(start, stop)
        return
    for rec in store.scan_braid(braid, start, stop):
        yield next(store.scan_rows(rec.seq, rec.seq + 1))


# ---------------------------------------------------------------------------------- import

def _lines(source: IO[str] | str | os.PathLike[str] | Iterable[str]) -> Iterator[str]:
    """The lines of an export, decoded as UTF-8; a line that is not is refused, by number."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            for n, raw in enumerate(f, 1):
                yield _text(n, raw)
        return
    lines = iter(source)
    n = 0
    while True:
        try:
            line = next(lines)
        except StopIteration:
            return
        except UnicodeDecodeError as e:  # a text stream opened on bytes that are not UTF-8
            raise _refuse(n + 1, f"not UTF-8 text ({e.reason}, byte {e.object[e.start]:#04x}): "
                          "an export is UTF-8; open the file with encoding='utf-8' and check it "
                          "was not converted", integrity=False) from None
        n += 1
        yield _text(n, line) if isinstance(line, (bytes, bytearray)) else line


def _text(n: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _refuse(n, f"not UTF-8 text: byte {raw[e.start]:#04x} at column {e.start + 1} "
                      f"({e.reason}); an export is UTF-8: it was converted or damaged",
                      integrity=False) from None


def _refuse(n: int, message: str, *, seq: int | None = None, integrity: bool = True,
            expected: bytes | None = None, found: bytes | None = None) -> Exception:
    text = f"line {n}: {message}; nothing was imported"
    if integrity:
        e: Exception = IntegrityError(text, seq=seq, expected=expected, found=found)
    else:
        e = ValidationError(f"line {n}", f"{message}; nothing was imported")
    e.line = n  # type: ignore[attr-defined]  # the line, for the CLI's message
    return e


class ParsedExport(Struct, frozen=True):
    """An export read and checked: its header, deltas (as they will be stored), bodies, seqs,
    hashes and end line, and how many lines it had."""

    header: ExportHeader
    deltas: list[GenericDelta]
    bodies: list[bytes]
    seqs: list[int]
    hashes: list[bytes]
    end: ExportEnd
    lines: int
    salts: dict[str, bytes] = {}
    erase: dict[int, int] = {}  # seq before the export -> the seq of the erased delta naming it


def read_export(source: IO[str] | str | os.PathLike[str] | Iterable[str], *,
                registry: Registry = REGISTRY, hw: int | None = None, chain: bool = True,
                on_header: Callable[[ExportHeader], None] | None = None) -> ParsedExport:
    """Read and check an export line by line; the first bad line raises, naming it.

    ``hw`` is the high-water time of the record before the export (the target's), used to check
    the first record's hw; ``chain=False`` skips the chain checks (a braid export has none);
    ``on_header`` may refuse the file as soon as its header is read.
    """
    header: ExportHeader | None = None
    end: ExportEnd | None = None
    deltas: list[GenericDelta] = []
    bodies: list[bytes] = []
    seqs: list[int] = []
    hashes: list[bytes] = []
    salts: dict[str, bytes] = {}
    erasures = Erasures()
    prev = GENESIS
    sync_kinds(registry)
    kinds = registry
    n = 0
    for n, raw in enumerate(_lines(source), 1):
        text = raw.rstrip("\r\n")
        cut = not raw.endswith("\n")  # only the last line can be; fine if it is complete JSON
        repeated = repeated_key(text)
        if repeated is not None:
            raise _refuse(n, repeated_key_rule(repeated[0]), integrity=False)
        if header is None:
            header = _header(n, text, cut)
            if on_header is not None:
                on_header(header)
            if header.scope == "log":
                prev = _hex(n, header.prev, "prev")
            chain = chain and header.scope == "log"
            if chain and header.format < 2:
                raise _refuse(n, f"an export of format {header.format} was written before records "
                              "had a committed form (braidlog format 4): its hashes are of the "
                              "earlier chain, which this braidlog does not write; import it as "
                              "new records (--as-new, as_new=True), or export the log again",
                              integrity=False)
            continue
        if end is not None:
            raise _refuse(n, "text after the end line")
        try:
            line = _line_decoder.decode(text)
        except msgspec.ValidationError as e:
            if _is_end(text):
                end = _end(n, text)
                continue
            raise _refuse(n, f"not an export record: {e}", integrity=False) from None
        except msgspec.DecodeError as e:
            raise _cut(n) if cut else _refuse(n, f"not JSON: {e}", integrity=False) from None
        seq, body = line.seq, line.body
        want = (seqs[-1] + 1) if seqs else header.start
        if header.scope == "log" and seq != want:
            raise _refuse(n, f"expected seq {want}, found seq {seq}: lines were reordered, "
                          "dropped or duplicated", seq=want)
        misplaced = bool(seqs) and seq <= seqs[-1] or not header.start <= seq < header.stop
        if header.scope == "braid" and misplaced:
            raise _refuse(n, f"seq {seq} is out of order or outside {header.start}..{header.stop - 1}: "
                          "lines were reordered or duplicated", seq=seq)
        found = _hex(n, line.hash, "hash")
        if len(body) <= HW_SIZE:
            raise _refuse(n, "the body is too short to be a record", seq=seq)
        try:
            stored = decode(body[HW_SIZE:])
        except DecodeError as e:
            raise _refuse(n, f"the body is not a delta ({e})", seq=seq) from None
        if stored != line.delta:
            raise _refuse(n, f"the delta JSON differs from the record bytes (delta {stored.id}): "
                          "one of them was edited", seq=seq)
        if header.scope == "braid" and stored.braid_id != header.braid:
            raise _refuse(n, f"the delta belongs to braid {stored.braid_id!r}, not {header.braid!r}",
                          seq=seq)
        if chain:
            before = hw if not seqs else hw_of(bodies[-1])
            if hw_fault(before, body, ts_micros(stored.ts)) is not None:
                raise _refuse(n, f"the record's high-water time {hw_of(body)} does not follow from "
                              "the deltas before it: the body was edited", seq=seq)
            if len(line.salt) != (0 if stored.erased else SALT_SIZE):
                raise _refuse(n, f"the record's salt is {len(line.salt)} bytes, not "
                              f"{0 if stored.erased else SALT_SIZE}: it was edited", seq=seq)
            entry = record_entry(seq, stored, line.salt, body[HW_SIZE:])
            if line.entry != entry:
                raise _refuse(n, "the record's entry (committed form) is not what its delta "
                              "bytes and salt give: one of them was edited", seq=seq)
            expected = chain_fault(prev, seq, entry, found)
            if expected is not None:
                raise _refuse(n, f"chain broken at seq {seq}: expected hash {expected.hex()}, "
                              f"found {found.hex()}: the record or its hash was edited",
                              seq=seq, expected=expected, found=found)
            prev = found
        if stored.erased is not None:  # an erased record: its envelope and commitment alone
            fault = erased_line(stored, seq, erasures)
            if fault:
                raise _refuse(n, fault, seq=seq, integrity=False)
            deltas.append(stored)
            bodies.append(body)
            seqs.append(seq)
            hashes.append(found)
            continue
        if stored.kind not in kinds:
            raise _refuse(n, f"kind {stored.kind!r} is not declared, neither in the export nor in "
                          "this process; import the Python module that declares it first",
                          integrity=False)
        try:
            checked, data, typed = validate_typed(stored, kinds)
            if checked.kind == KIND_DECLARED:  # the kinds it declares hold for the lines after it
                kinds = admit_declaration(kinds, registry, typed, len(deltas))
        except ValidationError as e:
            raise _refuse(n, f"delta {stored.id} is refused by this braidlog's rules ({e})",
                          integrity=False) from None
        if data != body[HW_SIZE:]:
            raise _refuse(n, f"delta {stored.id} re-encodes to other bytes than stored: it was "
                          "written by another version of its schema or encoder", seq=seq)
        if checked.kind == ERASED:
            fault = erasure_line(checked, seq, erasures, header.start)
            if fault:
                raise _refuse(n, fault, seq=seq, integrity=False)
        deltas.append(checked)
        if line.salt:
            salts[checked.id] = line.salt
        bodies.append(body)
        seqs.append(seq)
        hashes.append(found)
    if header is None:
        raise _refuse(1, "the file is empty: an export starts with its header line", integrity=False)
    if end is None:
        after = f"after seq {seqs[-1]}" if seqs else "before any record"
        raise _refuse(n + 1, f"the file ends {after}, without its end line: it was truncated")
    if end.count != len(seqs):
        raise _refuse(n, f"the end line counts {end.count} record(s), the file holds {len(seqs)}: "
                      "records were dropped or added")
    last = f"{seqs[-1]}:{hashes[-1].hex()}" if seqs else str(Head(header.start - 1, prev))
    if end.head != last:
        raise _refuse(n, f"the end line names head {end.head}, the records end at {last}")
    if header.scope == "log" and seqs and seqs[-1] != header.stop - 1:
        raise _refuse(n, f"the header promises seqs {header.start}..{header.stop - 1}, the records "
                      f"end at {seqs[-1]}: it was truncated")
    fault = erasures.unnamed(seqs[-1] if seqs else 0)
    if fault:
        raise _refuse(n, fault, integrity=False)
    return ParsedExport(header, deltas, bodies, seqs, hashes, end, n, salts, erasures.before)


def _cut(n: int) -> Exception:
    return _refuse(n, "the line is cut off (it ends without a newline and is not complete "
                   "JSON): the file was truncated")


def _header(n: int, text: str, cut: bool = False) -> ExportHeader:
    try:
        header = _header_decoder.decode(text)
    except msgspec.DecodeError as e:
        raise _cut(n) if cut else _refuse(n, f"not a braidlog export header ({e})",
                                          integrity=False) from None
    except msgspec.MsgspecError as e:
        raise _refuse(n, f"not a braidlog export header ({e})", integrity=False) from None
    if header.format not in READS:
        raise _refuse(n, f"export format {header.format} is not supported (this braidlog reads "
                      f"formats {', '.join(map(str, READS))})", integrity=False)
    if header.start < 1 or header.stop < header.start:
        raise _refuse(n, f"the range {header.start}..{header.stop} is empty or invalid", integrity=False)
    if header.scope == "braid" and not header.braid:
        raise _refuse(n, "a braid export must name its braid", integrity=False)
    if header.scope == "log" and header.prev is None:
        raise _refuse(n, "a log export must carry prev, the chain hash before its first record",
                      integrity=False)
    if header.scope == "log" and header.start == 1 and header.prev != GENESIS.hex():
        raise _refuse(n, f"an export from seq 1 continues the genesis hash ({GENESIS.hex()}), "
                      f"not {header.prev}: the header was edited")
    return header


def _is_end(text: str) -> bool:
    try:
        obj = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return False
    return isinstance(obj, dict) and "end" in obj


def _end(n: int, text: str) -> ExportEnd:
    try:
        end = _end_decoder.decode(text)
    except msgspec.MsgspecError as e:
        raise _refuse(n, f"not an end line ({e})", integrity=False) from None
    if end.end is not True:
        raise _refuse(n, "the end line must say \"end\": true", integrity=False)
    return end


def _hex(n: int, text: str | None, name: str) -> bytes:
    try:
        value = bytes.fromhex(text or "")
    except ValueError:
        value = b""
    if len(value) != HASH_SIZE:
        raise _refuse(n, f"{name} must be a {HASH_SIZE * 2}-digit hex hash, got {text!r}")
    return value


def import_(store: FullStore | Braid, source: IO[str] | str | os.PathLike[str] | Iterable[str], *,
            as_new: bool = False, against: Head | str | None = None) -> ImportReport:
    """Import an export (a path, a text stream or lines) into ``store`` (a LogStore or a Braid):
    all of it in one transaction, or nothing.

    A log export must start where the store stands (an empty store for an export from seq 1):
    records are reproduced byte for byte with the same hashes. ``as_new`` (required for a braid
    export) appends the deltas after the store's head as new records instead. ``against``
    (``SEQ:HASH``, or a Head) must be a head the export reaches, e.g. one written down at the
    source: the import is refused unless the export's chain passes through it. Given a Braid,
    the deltas are written through it, so its projections' checks hold (the boundary); a bare
    store checks shape, schema and chain only.
    """
    writer, store = store, store_of(store)
    if isinstance(against, str):
        against = Head.parse(against)
    head = store.head()
    hw = hw_of(store.body(head.seq)) if head.seq else 0

    def placed(h: ExportHeader) -> None:
        if h.scope == "braid" and not as_new:
            raise _refuse(1, f"a braid export (braid {h.braid!r}) is not a prefix of the chain, so "
                          "its records cannot be reproduced with their seqs and hashes; import it "
                          "with as_new=True (--as-new) to append its deltas as new records",
                          integrity=False)
        start = Head(h.start - 1, bytes.fromhex(h.prev or ""))
        if not as_new and head != start:
            where = "an empty store" if h.start == 1 else f"a store at head {start}"
            raise ConflictError(
                f"the target store is at head {head}; this export continues the chain from seq "
                f"{h.start - 1}, so it imports only into {where}; nothing was imported",
                expected=start, actual=head)

    parsed = read_export(source, registry=store.registry, hw=None if as_new else hw,
                         on_header=placed)
    h = parsed.header
    if against is not None:
        _check_against(parsed, against)
    if as_new:
        records = writer.commit(parsed.deltas)
        after = store.head()
        return ImportReport(h.scope, parsed.lines, len(records), len(parsed.deltas) - len(records),
                            records[0].seq if records else 0, records[-1].seq if records else 0,
                            str(after), True)
    if not parsed.deltas:
        return ImportReport(h.scope, parsed.lines, 0, 0, 0, 0, str(head), False)
    if parsed.erase:  # its erased deltas name records the store holds: erased with the import
        seqs = _import_erasing(writer, store, parsed, head)
    else:
        seqs = writer.append_batch(parsed.deltas, expected_head=head.seq, salts=parsed.salts)
    after = store.head()
    if seqs != parsed.seqs or after != Head(parsed.seqs[-1], parsed.hashes[-1]):
        raise IntegrityError(f"the store wrote the export at seqs {seqs[0]}..{seqs[-1]} with head "
                             f"{after}, not {parsed.end.head}: the records were written; run "
                             "`braidlog verify` and report this as a bug", seq=seqs[0])
    return ImportReport(h.scope, parsed.lines, len(seqs), 0, seqs[0], seqs[-1], str(after), False)


def _import_erasing(writer: Any, store: FullStore, parsed: ParsedExport, head: Head) -> list[int]:
    """An import whose ``erased`` deltas name records before it, which the target holds: those
    records erased and the export's records appended in one step (the erasure's: the store must
    be open here alone), so the target is never left with the erased deltas and the text."""
    seqs, _ = store.apply_erasures(parsed.erase, lambda fresh: fresh.append_batch(
        parsed.deltas, expected_head=head.seq, salts=parsed.salts))
    if writer is not store:  # a Braid: what it holds of the erased records goes
        writer.after_erasure()
    return seqs


def _check_against(parsed: ParsedExport, against: Head) -> None:
    h = parsed.header
    if h.scope != "log":
        raise ValidationError("against", "a braid export carries no chain to check a head against")
    if against.seq == h.start - 1:
        found = bytes.fromhex(h.prev or "")
    elif h.start <= against.seq <= (parsed.seqs[-1] if parsed.seqs else 0):
        found = parsed.hashes[against.seq - h.start]
    else:
        raise ValidationError("against", f"seq {against.seq} is outside the export "
                              f"({h.start - 1}..{parsed.seqs[-1] if parsed.seqs else h.start - 1})")
    if found != against.hash:
        raise IntegrityError(f"the export's chain at seq {against.seq} is {found.hex()}, not the "
                             f"{against.hash.hex()} given: it is not the log that head was taken "
                             "from; nothing was imported", seq=against.seq, expected=against.hash,
                             found=found)


# ------------------------------------------------------------------------------------ stats

class Stats(Struct, frozen=True):
    """What a store holds and how big it is."""

    head: str
    deltas: int
    kinds: dict[str, int]
    braids: dict[str, int]
    size: dict[str, int] | None
    checkpoints: list[dict[str, Any]]
    recall: dict[str, Any] | None
    first_ts: datetime | None
    last_ts: datetime | None
    hw: datetime | None


def stats(store: FullStore) -> Stats:
    """Deltas per kind and per braid, store size, head, checkpoints, recall index coverage and
    the time span of the log (first and last delta time, and the high-water time) of a
    LogStore or a Braid."""
    store = store_of(store)
    head = store.head()
    groups: dict[tuple[str, int], list[int]] = {}
    for name, version, seq in store.checkpoint_keys():
        groups.setdefault((name, version), []).append(seq)
    ckpts = [{"projection": name, "version": version, "count": len(seqs), "newest": max(seqs)}
             for (name, version), seqs in sorted(groups.items())]
    first = last = hw = None
    if head.seq:
        first = store.read(1).delta.ts
        last = store.read(head.seq).delta.ts
        micros = hw_of(store.body(head.seq))
        hw = datetime.fromtimestamp(micros // 1_000_000, UTC).replace(
            microsecond=micros % 1_000_000)
    size = store.stat() if isinstance(store, OnDisk) else None
    return Stats(head=str(head), deltas=head.seq, kinds=store.counts("kind"),
                 braids=store.counts("braid"), size=size, checkpoints=ckpts,
                 recall=_recall_coverage(store, head.seq), first_ts=first, last_ts=last, hw=hw)


def _recall_coverage(store: FullStore, head: int) -> dict[str, Any] | None:
    """The persisted recall indexes beside an LMDB store (``<store>/recall/*/meta.msgpack``):
    per index, its vectors, the seq it covers, how far behind the head it is and whether it
    matches the log. Read from the files only: stats never builds or catches up an index."""
    root = store.path if isinstance(store, OnDisk) else None
    if root is None or not (Path(root) / "recall").is_dir():
        return None
    out: dict[str, Any] = {}
    for meta_path in sorted((Path(root) / "recall").glob("*/meta.msgpack")):
        name = meta_path.parent.name
        try:
            meta = msgspec.msgpack.decode(meta_path.read_bytes())
            covered, chain = int(meta["covered_seq"]), bytes(meta["covered_hash"])
        except (OSError, msgspec.MsgspecError, KeyError, TypeError, ValueError) as e:
            out[name] = {"status": f"damaged ({e}); rebuilt from the log when next opened"}
            continue
        if covered > head or store.hash_at(covered) != chain:
            status = "stale (not this log's chain); rebuilt from the log when next opened"
        elif covered < head:
            status = f"behind by {head - covered} delta(s); caught up when next opened"
        else:
            status = "current"
        out[name] = {"space": meta.get("space"), "metric": meta.get("metric"),
                     "vectors": meta.get("count"), "covered_seq": covered, "status": status}
    return out or None
