"""``verify`` and ``repair_indexes`` of an LmdbLog: everything it writes, checked against the log.

``LmdbLog.verify()`` runs, in this order, stopping at the first damage (steps 1 and 2 whatever
the range, since a damaged page can crash the reader; step 4 over the whole log only):

1. **meta pages**: both of LMDB's meta pages, read from the file (file.py).
2. **pages**: py-lmdb's structural check of every page of the file, read with ``pread``, not
   through the map (env.py), *before anything is read through LMDB*: LMDB trusts the offsets
   and sizes it finds in a page, and one that runs past the end of the file kills the reader with
   SIGBUS. Damage in the log, its meta table or the main tree stops verify here: nothing is read
   through them. Damage in a derived table (an index, the Merkle tree) or in the free-page
   accounting is reported after the records are checked, without reading that table.
3. **records** (records.py): every seq from 1 to the head is looked up through the log's
   B-tree, exactly as ``read``/``get`` reach it (a cursor walk over the leaves would miss a
   damaged branch page), and the hash chain and the Merkle tree are recomputed over them, each
   record read and decoded once. An LMDB error on the way (MDB_CORRUPTED, a page LMDB cannot
   find) names the last seq read intact.
4. **indexes**, against the log both ways, from the entries step 3 collected of each record
   (``records.Keys``, ``records.index_rows``): every record has its entry in the id index, the
   id-digest index, the braid, kind and refers-to indexes (and its vector space its dimension in
   ``spaces``), each looked up through its table's B-tree, and each table holds no other entry
   (its entry count equals the expected one). When anything disagrees, the check runs again
   record by record, reading each anew, to name the first entry missing or the first extra
   one (its entries walked to find the first whose record lacks the key). A record past the
   ``indexed-to`` mark (tail.py) has only its id entry and its payload subjects' refers-to
   entries; the rest are read from its row, so an entry of it elsewhere is damage.

``repair_indexes`` rebuilds every derived table from the log in one write transaction, after
checking the pages and the log's chain: the log is the truth, and an index is only rebuilt from
an intact one. It refuses a derived table whose pages are damaged, since emptying it would hand
the pages its damaged branches name (possibly the log's own) to the free list.
Nothing here imports ``lmdb`` or the log's module: what the checks use of the log (its store
port, its file, its tables and transactions on them) is named in ``LogAccess`` (access.py),
which ``LmdbLog`` hands them.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from ..delta import decode_entry, referenced_ids
from ..erasure import ERASURES_BRAID, envelope_refs
from ..errors import BraidlogError, IntegrityError, StorageError
from ..store import Head, Progress
from . import split
from .access import LogAccess
from .file import last_intact_key, meta_findings, table_entries
from .format import DUPS, INDEXED, fill_nodes, from_u64, id_digest, row_data, row_entry, u64
from .records import CHUNK, RESTORE, Keys, check_records, lookups
from .tail import ALL, indexed_to

__all__ = ["verify", "repair_indexes", "INDEXES"]

T = TypeVar("T")


#: The derived tables ``verify`` checks and ``repair_indexes`` rebuilds, with their names in messages.
INDEXES = {"ids": "id", "idh": "id-digest", "braid": "braid", "kind": "kind", "refs": "refers-to",
           "spaces": "vector-space"}
_REMEDY = "run `braidlog repair --indexes` to rebuild the indexes from the log"
_RESTORE = RESTORE


def verify(log: LogAccess, start: int, stop: int | None, progress: Progress | None) -> Head:
    # the whole log: a forked child checks most records meanwhile (split.py), when it can. How
    # many there are is read from the file (nothing is read through LMDB before the page check)
    child = None
    if start <= 1 and stop is None:
        with log.env.pinned():
            records = table_entries(log.path / "data.mdb", b"log")
        child = split.fork(log, records or 0)
    try:
        return _verify(log, start, stop, progress, child)
    finally:
        if child is not None:
            child.stop_now()


def _verify(log: LogAccess, start: int, stop: int | None, progress: Progress | None,
            child: split.Child | None) -> Head:
    _check_metas(log)
    damaged = _damaged_pages(log)  # before anything is read through LMDB, whatever the range
    if damaged and child is not None:  # the one-process path reports them: the child's work is moot
        child.stop_now()
        child = None
    if "log" in damaged:  # read only the records reached through checked pages, then report
        intact = _intact_seqs(log, damaged["log"])
        if start <= intact:
            check_records(log, start, intact + 1 if stop is None else min(stop, intact + 1),
                          progress)
        raise IntegrityError(
            f"{log.path / 'data.mdb'}: the log table is damaged: {damaged['log'][0]}; the "
            f"records up to seq {intact} are reached through undamaged pages, and seqs "
            f"{start}..{intact} were read intact (nothing past them was read: a damaged page can "
            f"crash the reader). {_RESTORE}", seq=intact + 1)
    keys: Keys | None = None  # the index check's entries, read from the records once
    done: tuple[int, dict[str, int] | None] | None = None  # index entries the child looked up
    if child is not None:
        checked, keys, done = _split_records(log, child, progress)
    else:
        if start <= 1 and stop is None and not damaged:
            keys = Keys(log.registry)
        checked = check_records(log, start, stop, progress, keys=keys)
    if damaged:
        raise _page_damage(log, damaged)
    if keys is not None:
        _check_indexes(log, keys, done)
    return checked


def _split_records(log: LogAccess, child: split.Child, progress: Progress | None
                   ) -> tuple[Head, Keys, tuple[int, dict[str, int] | None] | None]:
    """Records [child.stop, head] here while the child checks [1, child.stop); the first damage
    in seq order, or the head and every record's index entries. A child that failed is stood in
    for by this process, which checks its records itself. ``progress`` is told the records both
    have checked. Also the index check's ``done``: (child.stop, how many entries each index
    must hold for the child's records, as it looked them up; None if it could not), or None
    when this process checked the child's records itself."""
    keys = Keys(log.registry, child.stop)
    mine, told = [0], [0]

    def report(n: int) -> None:
        mine[0] = n
        if progress is not None and child.done() + n > told[0]:
            told[0] = child.done() + n
            progress(told[0])
    try:
        checked = check_records(log, child.stop, None, report, keys=keys, read_from=1)
        error: IntegrityError | None = None
    except IntegrityError as e:
        error = e
    kind, theirs = child.result(lambda: report(mine[0]))
    if kind == "damage":
        raise theirs
    done: tuple[int, dict[str, int] | None] | None = None
    if kind == "keys":
        theirs, wants = theirs
        done = (child.stop, wants)
    else:  # this process checks the child's records, and the index check looks up their entries
        first = Keys(log.registry)
        check_records(log, 1, child.stop, None, keys=first)
        theirs = first.columns()
    if error is not None:
        raise error
    keys.fill(theirs)
    if progress is not None:
        progress(checked.seq)
    return checked, keys, done


# -- indexes ------------------------------------------------------------------------------------

def _expected(log: LogAccess, seq: int, value: Any, unsure: set[str], mark: int = ALL
              ) -> tuple[Any, list[tuple[str, bytes]]]:
    """Record ``seq``'s delta and the (table, key) entries it must have, each valued u64(seq)
    (past the ``mark``, only its id and payload subjects' ones). A kind whose payload subjects
    this process cannot name goes into ``unsure``: its record may have more refers-to entries
    than the ones returned."""
    d = log.decoded(seq, value).delta
    if not log.registry.knows_subjects(d.kind):
        unsure.add(d.kind)
    if seq > mark:
        try:
            late = envelope_refs(d) if d.erased is not None else referenced_ids(d, log.registry)
        except (msgspec.MsgspecError, BraidlogError):
            late = frozenset()
        return d, [("ids", d.id.encode())] + [("refs", r.encode())
                                              for r in late - envelope_refs(d)]
    out = [("ids", d.id.encode()), ("braid", d.braid_id.encode()), ("kind", d.kind.encode())]
    if "idh" in log.tables:
        out.append(("idh", id_digest(d.id)))
    try:
        # an erased delta keeps the refs of its envelope; those of its payload left with it
        refs = envelope_refs(d) if d.erased is not None else referenced_ids(d, log.registry)
    except (msgspec.MsgspecError, BraidlogError):
        refs = frozenset()  # an old payload whose upcast fails now: its other refs still count
    out.extend(("refs", r.encode()) for r in refs)
    return d, out


def _indexes_agree(log: LogAccess, keys: Keys, done: tuple[int, dict[str, int] | None] | None = None
                   ) -> bool:
    """The index check in one read transaction, from the entries the records pass collected
    (``keys``; those of records appended since are read here): every entry a record needs is
    found through its table's B-tree, and each table holds no other. ``done``: (lo, how many
    entries each table must hold for records [1, lo)), when another process (split.py) has
    looked those up already, below the indexed-to mark (None: it could not, or found one
    missing). False at the first thing that does not agree: ``_check_indexes`` then finds it
    and names it."""
    db = log.tables

    def fn(txn: Any) -> dict[bytes, bytes] | None:
        end = log.head_in(txn)[0].seq
        mark = indexed_to(txn, db["meta"])
        if (mark != ALL and mark > end) or end < keys.end:
            return None
        mark = min(mark, end)
        for seq in range(keys.end + 1, end + 1):  # appended since the records pass
            value = txn.get(u64(seq), db=db["log"])
            if value is None:
                return None
            try:
                keys.add(seq, decode_entry(row_entry(value)),
                         log.decoded(seq, value).delta if row_data(value) else None)
            except (msgspec.MsgspecError, BraidlogError):
                return None
        if not keys.whole:
            return None
        lo, before = done if done is not None else (1, {})
        if before is None or mark < lo - 1:  # the other process's entries were not all below it
            return None
        mine = lookups(txn, db, keys, lo, end + 1, mark)
        if mine is None:
            return None
        want = {t: n + before.get(t, 0) for t, n in mine.items()}
        counts = {t: txn.stat(db[t])["entries"] for t in ("ids", "idh", "braid", "kind", "refs") if t in db}
        if any(counts[t] != want[t] for t in counts if t != "refs"):
            return None
        unsure = set(keys.unsure)
        if counts["refs"] != want["refs"] and not (counts["refs"] > want["refs"] and unsure):
            return None
        if unsure:  # payload subjects this process cannot name: each entry taken as written
            for k, v in txn.cursor(db["refs"]):
                s = from_u64(v) if len(v) == 8 else 0
                if not 1 <= s <= end or (k.decode(errors="replace") not in keys.refs_at(s, mark)
                                         and s not in unsure):
                    return None
        return keys.spaces

    spaces = log.read(fn, buffers=False)
    if spaces is None:
        return False
    stored = log.read(lambda txn: {bytes(k): bytes(v) for k, v in txn.cursor(db["spaces"])})
    if log.store.braid_head(ERASURES_BRAID).version:  # a space whose vectors were all erased stays
        spaces = {**{k: v for k, v in stored.items() if k not in spaces}, **spaces}
    return stored == spaces


def _check_indexes(log: LogAccess, keys: Keys,
                   done: tuple[int, dict[str, int] | None] | None = None) -> None:
    """Every record's entries are in their tables, and each table holds nothing else. The head
    and the tables' entry counts are read in one transaction, so a writer appending meanwhile
    changes neither side of the comparison. ``_indexes_agree`` first, from the entries the
    records pass collected (``keys``); the lookups below, record by record, only when it finds
    something to name."""
    if _indexes_agree(log, keys, done):
        return
    db = log.tables
    tables = [t for t in INDEXES if t in db]
    end, mark, counts = log.read(lambda txn: (log.head_in(txn)[0].seq, indexed_to(txn, db["meta"]),
                                               {t: txn.stat(db[t])["entries"] for t in tables}))
    if mark != ALL and mark > end:
        raise IntegrityError(f"the indexed-to mark (meta {INDEXED.decode()!r}) is seq {mark}, past "
                             f"the head {end}; {_REMEDY}", seq=end)
    mark = min(mark, end)
    want = dict.fromkeys(tables, 0)
    want["ids"], want["braid"] = end, mark
    want["kind"] = mark
    if "idh" in want:
        want["idh"] = mark
    spaces: dict[bytes, bytes] = {}
    unsure: set[str] = set()  # kinds whose payload subjects this process cannot name
    for lo in range(1, end + 1, CHUNK):
        def chunk(txn: Any, lo: int = lo) -> Any:
            curs = {t: txn.cursor(db[t]) for t in ("braid", "kind", "refs")}
            refs = 0
            for seq in range(lo, min(end + 1, lo + CHUNK)):
                key = u64(seq)
                d, entries = _expected(log, seq, txn.get(key, db=db["log"]), unsure, mark)
                for table, k in entries:
                    if table in DUPS:
                        ok = curs[table].set_key_dup(k, key)
                    else:
                        found = txn.get(k, db=db[table])
                        ok = found is not None and bytes(found) == key
                    if not ok:
                        raise IntegrityError(
                            f"the {INDEXES[table]} index lacks the entry {_show(table, k)} -> seq "
                            f"{seq} that record {seq} needs; {_REMEDY}", seq=seq)
                    refs += table == "refs"
                if d.vector is not None:
                    spaces.setdefault(d.vector.space.encode(), u64(d.vector.dim))
            return refs
        want["refs"] += log.read(chunk)
    stored_spaces = log.read(lambda txn: {bytes(k): bytes(v) for k, v in txn.cursor(db["spaces"])})
    if log.store.braid_head(ERASURES_BRAID).version:  # a space whose vectors were all erased stays
        spaces.update((k, v) for k, v in stored_spaces.items() if k not in spaces)
    want["spaces"] = len(spaces)
    if stored_spaces != spaces:
        bad = sorted(set(stored_spaces.items()) ^ set(spaces.items()))[0]
        raise IntegrityError(f"the vector-space index holds {len(stored_spaces)} space(s) where "
                             f"the log has {len(spaces)}: first difference at space "
                             f"{bad[0].decode(errors='replace')!r}; {_REMEDY}")
    for table in tables:
        if table == "refs" and unsure:  # the count is a lower bound: check every entry instead
            if counts[table] < want[table]:
                _name_extra(log, table, counts[table], want[table])
            _walk_entries(log, table)
        elif table != "spaces" and counts[table] != want[table]:
            _name_extra(log, table, counts[table], want[table])


def _walk_entries(log: LogAccess, table: str) -> None:
    """Every entry of ``table`` lands on a record that holds its key (IntegrityError if not)."""
    bad = log.read(lambda txn: _first_bad(log, table, txn))
    if bad is not None:
        key, seq, why = bad
        raise IntegrityError(f"the {INDEXES[table]} index has an entry {_show(table, key)} -> "
                             f"seq {seq}, {why}; {_REMEDY}", seq=seq)


def _first_bad(log: LogAccess, table: str, txn: Any) -> tuple[bytes, int, str] | None:
    """(key, seq, why) of the first entry of ``table`` whose record does not hold its key."""
    db = log.tables
    end = log.head_in(txn)[0].seq  # entries a writer added since the counts are right
    mark = indexed_to(txn, db["meta"])
    for k, v in txn.cursor(db[table]):
        seq = from_u64(v)
        if not 1 <= seq <= end:
            return bytes(k), seq, f"which is past the head {end}"
        value = txn.get(bytes(v), db=db["log"])
        if seq > mark and (table in ("braid", "kind", "idh") or (
                table == "refs" and bytes(k).decode(errors="replace")
                in envelope_refs(log.decoded(seq, value).delta))):
            return bytes(k), seq, (f"past the indexed-to mark {mark}, where that entry is read "
                                   "from the log's row and never written")
        if table == "idh":
            held = id_digest(log.decoded(seq, value).delta.id) == bytes(k)
        else:
            try:
                log.landed(txn, INDEXES[table], bytes(k).decode(), seq)
                held = True
            except IntegrityError:
                held = False
        if not held:
            return bytes(k), seq, "whose record does not hold that key"
    return None


def _name_extra(log: LogAccess, table: str, count: int, want: int) -> None:
    """A table holds more (or fewer) entries than the log gives it: walk it and name the first
    entry whose record does not hold its key."""
    bad = log.read(lambda txn: _first_bad(log, table, txn))
    if bad is None:
        raise IntegrityError(f"the {INDEXES[table]} index counts {count} entries where the log "
                             f"gives it {want}, yet every entry it holds is right: its table "
                             f"record in the file is damaged; {_REMEDY}")
    key, seq, why = bad
    raise IntegrityError(f"the {INDEXES[table]} index has an entry {_show(table, key)} -> seq "
                         f"{seq}, {why}; {_REMEDY}", seq=seq)


def _show(table: str, key: bytes) -> str:
    return key.hex() if table == "idh" else repr(key.decode(errors="replace"))


# -- the file -----------------------------------------------------------------------------------

#: Tables rebuilt from the log: damaged pages there leave the records readable (as does damage
#: in LMDB's accounting of free pages, ``free`` below, which reads never touch).
_DERIVED = tuple(INDEXES)


def _damaged_pages(log: LogAccess) -> dict[str, list[str]]:
    """{table: its findings} of the structural check of every page (read with pread, not
    through the map). Raises IntegrityError, before anything is read through LMDB, when the
    main tree, braidlog's meta table or a meta page is damaged: LMDB would trust the damaged
    page, and could crash the process reading it."""
    found: dict[str, list[str]] = {}
    for finding in log.env.tree_findings():
        table = re.search(r"\bmain/(\S+?) DB\b", finding)
        where = (table.group(1) if table else "free" if "freeDB" in finding
                 else "main" if "main DB" in finding else "file")
        found.setdefault(where, []).append(finding)
    unsafe = [t for t in found if t not in (*_DERIVED, "free", "log")]
    if unsafe:
        what = {"main": "the main tree", "file": "the file"}.get(unsafe[0], f"the {unsafe[0]} table")
        raise IntegrityError(
            f"{log.path / 'data.mdb'}: {what} is damaged: {found[unsafe[0]][0]}; the records were "
            "not read through it, since a damaged page can crash the reader. Restore the store "
            "from a backup")
    return found


def _intact_seqs(log: LogAccess, findings: list[str]) -> int:
    """The last seq the log's tree reaches through pages that neither the structural check
    (``findings`` name them) nor file.py's own checks find damaged."""
    bad = {int(n) for f in findings for n in re.findall(r"\bpage (\d+)", f)}
    with log.env.pinned():
        last = last_intact_key(log.path / "data.mdb", b"log", bad)
    return from_u64(last) if last is not None and len(last) == 8 else 0


def _page_damage(log: LogAccess, damaged: dict[str, list[str]]) -> IntegrityError:
    """The error for damaged pages that leave every record readable (checked by then)."""
    rebuilt = [t for t in damaged if t != "free"]
    if rebuilt:
        table = rebuilt[0]
        name = f"the {INDEXES[table]} index"
        return IntegrityError(
            f"{log.path / 'data.mdb'}: {name} is damaged: {damaged[table][0]}; every record read "
            "intact. Rebuild the store from its log: `braidlog export FILE`, then `braidlog "
            "--store NEW import FILE` into a new directory (the same records, hashes and head, "
            "every index written afresh), or restore from a backup")
    return IntegrityError(
        f"{log.path / 'data.mdb'}: the file's free-page accounting is damaged: {damaged['free'][0]}; "
        "every record and index read intact, but a later write may overwrite a page in use. "
        "Copy the store with `braidlog backup` (which rewrites every page) and use the copy")


def _check_metas(log: LogAccess) -> None:
    env = log.env
    with env.pinned():
        found = meta_findings(log.path / "data.mdb", b"log")
    if found:
        raise IntegrityError(f"{log.path / 'data.mdb'}: {found[0]}. The log may read as intact "
                             "and still be an earlier commit than the last one; compare its head "
                             "with one written down (`braidlog verify --against SEQ:HASH`), and "
                             "restore from a backup")


# -- repair -------------------------------------------------------------------------------------

def repair_indexes(log: LogAccess, progress: Progress | None = None) -> dict[str, int]:
    """Rebuild every index from the log and rewrite the Merkle tree's nodes its rows keep where
    they differ from the records', in one write transaction; return the entries written per
    index, and under ``tree`` the rows whose nodes were rewritten. The log's chain is verified
    first (not the stored nodes: they are what may need rewriting)."""
    if log.readonly:
        raise StorageError("repairing needs the store open for writing",
                           hint="open it without readonly=True")
    damaged = _damaged_pages(log)  # first: nothing is read through a damaged page
    if "log" in damaged:
        raise IntegrityError(f"the log itself is damaged ({damaged['log'][0]}), so its indexes "
                             f"cannot be rebuilt from it; nothing was changed. {_RESTORE}")
    if damaged:  # emptying a damaged table would free the pages its damaged branches name
        e = _page_damage(log, damaged)
        raise IntegrityError(f"{e} (repair cannot empty a damaged table safely; nothing was "
                             "changed)")
    head = log.store.head()
    unknown = sorted(k for k in log.store.counts("kind") if not log.registry.knows_subjects(k))
    if unknown:
        raise StorageError(
            f"this process cannot name the entity ids that deltas of kind(s) {', '.join(unknown)} "
            "refer to, so a rebuilt refers-to index would lose their entries; nothing was changed",
            hint="load the projections or application that declare them first (the command line "
                 "loads every installed one; name others with --app MODULE)")
    try:
        check_records(log, 1, None, progress, nodes=False)
    except IntegrityError as e:
        raise IntegrityError(f"the log itself is damaged, so its indexes cannot be rebuilt from it: "
                             f"{e}", seq=e.seq, expected=e.expected, found=e.found) from e
    db = log.tables
    tables = [t for t in INDEXES if t in db]

    def fn(txn: Any) -> Any:
        if log.head_in(txn)[0] != head:
            raise StorageError("the log grew while it was checked", hint="run the repair again")
        for t in tables:
            txn.drop(db[t], delete=False)
        rows: dict[str, list[tuple[bytes, bytes]]] = {t: [] for t in tables}
        written = dict.fromkeys(tables, 0)
        spaces: dict[bytes, bytes] = {}

        def flush() -> None:
            for t, batch in rows.items():
                if batch and t != "spaces":
                    batch.sort()
                    txn.cursor(db[t]).putmulti(batch, dupdata=t in DUPS, overwrite=t in DUPS)
                    written[t] += len(batch)
                    batch.clear()
        for key, value in txn.cursor(db["log"]):
            seq = bytes(key)
            d = log.decoded(int.from_bytes(seq, "big"), value).delta
            rows["ids"].append((d.id.encode(), seq))
            if "idh" in rows:
                rows["idh"].append((id_digest(d.id), seq))
            rows["braid"].append((d.braid_id.encode(), seq))
            rows["kind"].append((d.kind.encode(), seq))
            try:
                refs = envelope_refs(d) if d.erased is not None else referenced_ids(d, log.registry)
            except (msgspec.MsgspecError, BraidlogError):
                refs = frozenset()
            rows["refs"].extend((r.encode(), seq) for r in refs)
            if d.vector is not None:
                spaces.setdefault(d.vector.space.encode(), u64(d.vector.dim))
            if len(rows["ids"]) >= 65536:
                flush()
        flush()
        for space, dim in spaces.items():
            txn.put(space, dim, db=db["spaces"])
        written["spaces"] = len(spaces)
        written["tree"] = fill_nodes(txn, db)
        txn.put(INDEXED, u64(head.seq), db=db["meta"])  # every record indexed: no tail
        return written
    return log.write(fn)
