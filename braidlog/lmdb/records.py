"""The records pass of ``verify`` (check.py): every seq of a range read once, through the log's
B-tree as reads reach it, a chunk per read transaction, and each record checked once: its row's
lengths, the hash chain, the record against its committed form (``chain.check_row_parts``), the
Merkle tree's nodes its row keeps. What the checks decoded of a record (its committed form, its
delta) also gives the index entries it needs (``Keys``), so the index check (check.py) reads
no record a second time and decodes nothing again.

``index_rows`` gives the entries a table must hold for a range of seqs: the index check looks
each up through its table's B-tree, and a table's count must equal theirs. Past the
``indexed-to`` mark (tail.py) a record has its id entry and its payload subjects' refers-to
entries alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from hashlib import sha256
from typing import Any

import msgspec
from blake3 import blake3

from .. import tree as merkle
from ..chain import HASH_SIZE, Row, check_row_parts, tree_break
from ..delta import SALT_SIZE, Entry, GenericDelta, _decoder, form_of, referenced_ids, ts_micros
from ..erasure import envelope_refs
from ..errors import BraidlogError, IntegrityError
from ..kinds import Registry
from ..store import Head, Progress
from ..store.rules import hw_of
from .access import LogAccess
from .format import DUPS, ENTRY_AT, NODE, completes, id_digests, split_row, u64
from .tail import ALL, indexed_to

__all__ = ["CHUNK", "Keys", "check_records", "index_rows", "lookups", "lookups_below_mark",
           "RESTORE"]

CHUNK = 1024
RESTORE = ("Restore the store from a backup, or salvage the seqs before it with "
           "`braidlog export --stop SEQ`")
_LENGTH_AT = HASH_SIZE + 8  # a row: chain hash, hw (u64), the committed form's length (u16) …
_NODES_AT = _LENGTH_AT + 2  # … and the number of tree nodes it keeps (u8), then the form
_PROGRESS = 65536  # records between two progress calls, as every store's verify reports them
_NONE: frozenset[str] = frozenset()


class Keys:
    """The index entries of the records 1..``end``, by seq (index 0 unused), collected as the
    records pass checks them: each record's id, braid and kind keys, the ids it refers to, and
    whether its kind's payload subjects are unknown to this process (``unsure``: the record may
    have more refers-to entries than ``refs`` names). ``whole`` is False once a record's keys
    could not be read (a committed form that does not decode): the index check then walks."""

    __slots__ = ("registry", "end", "seqs", "ids", "braids", "kinds", "refs", "payload", "unsure",
                 "spaces", "whole", "_names", "_kinds_seen")

    def __init__(self, registry: Registry, start: int = 1) -> None:
        """Keys of no record yet, the first to come being ``start``'s (those before it are
        filled in later by ``fill``, from another process's records pass: split.py)."""
        self.registry = registry
        self.end = start - 1
        self.seqs: list[bytes] = [s.to_bytes(8, "big") for s in range(start)]  # as entries hold them
        self.ids: list[bytes] = [b""] * start
        self.braids: list[bytes] = [b""] * start
        self.kinds: list[bytes] = [b""] * start
        self.refs: list[frozenset[str]] = [frozenset()] * start
        self.payload: dict[int, frozenset[str]] = {}  # seq: those of its refs its payload names
        self.unsure: list[int] = []  # seqs whose kind's payload subjects are not known here
        self.spaces: dict[bytes, bytes] = {}  # vector space -> its dimension (u64)
        self.whole = True
        self._names: dict[str, bytes] = {}
        self._kinds_seen: dict[str, tuple[bool, bool]] = {}  # kind: (payload names subjects, known)

    def columns(self, looked_up: bool = False) -> tuple[Any, ...]:
        """What ``fill`` takes: the keys of records 1..end, to send to another process; with
        ``looked_up`` (their id, braid and kind entries were looked up where they were read), not
        those keys, which the other process then needs for no check."""
        keys = (None, None, None) if looked_up else (self.ids[1:], self.braids[1:], self.kinds[1:])
        return (self.end, *keys, self.refs[1:], self.payload, self.unsure, self.spaces, self.whole)

    def fill(self, columns: tuple[Any, ...]) -> None:
        """Take the keys of the records before this one's first from ``columns`` (another
        Keys' ``columns()``, of records 1..the one before it)."""
        end, ids, braids, kinds, refs, payload, unsure, spaces, whole = columns
        if len(refs) != end or end >= len(self.ids):
            raise ValueError(f"keys of records 1..{end} do not end where these begin")
        if ids is not None:
            self.ids[1:end + 1], self.braids[1:end + 1], self.kinds[1:end + 1] = ids, braids, kinds
        self.refs[1:end + 1] = refs
        self.payload.update(payload)
        self.unsure[:0] = unsure
        self.spaces = {**spaces, **{k: v for k, v in self.spaces.items() if k not in spaces}}
        self.whole = self.whole and whole

    def add(self, seq: int, env: Entry | GenericDelta | None, d: GenericDelta | None) -> None:
        """Record ``seq``'s entries, from its envelope ``env`` (its committed form, or its delta
        when that was checked to give it byte for byte; None when the committed form does not
        decode) and its delta ``d`` (None once erased: the envelope's references alone stay)."""
        if seq != self.end + 1:
            raise ValueError(f"keys of seq {seq} after those of {self.end}")
        self.end = seq
        self.seqs.append(seq.to_bytes(8, "big"))
        if env is None:  # left to the chain, which passed: the index check walks instead
            self.whole = False
            self.ids.append(b"")
            self.braids.append(b"")
            self.kinds.append(b"")
            self.refs.append(frozenset())
            return
        names, kind = self._names, env.kind
        known = self._kinds_seen.get(kind)
        if known is None:  # the registry reads the kinds declared in the log: once a kind
            spec = self.registry.get(kind)
            known = self._kinds_seen[kind] = (spec is not None and spec.refers is not None,
                                              self.registry.knows_subjects(kind))
        if d is not None and known[0]:
            try:
                r = referenced_ids(d, self.registry)
            except (msgspec.MsgspecError, BraidlogError):
                r = envelope_refs(d)  # an old payload whose upcast fails now
            subjects = r - envelope_refs(d)
            if subjects:
                self.payload[seq] = subjects
        elif env.refs is None and env.provenance.episode_id is None and env.provenance.knot_id is None:
            r = _NONE  # envelope_refs' answer, without its call: most records refer to nothing
        else:  # the envelope's refs are the committed form's; erased: only those
            r = envelope_refs(env)  # type: ignore[arg-type]  # an Entry has the envelope fields it reads
        self.ids.append(env.id.encode())
        braid = env.braid_id
        self.braids.append(names.get(braid) or names.setdefault(braid, braid.encode()))
        self.kinds.append(names.get(kind) or names.setdefault(kind, kind.encode()))
        self.refs.append(r)
        if not known[1]:
            self.unsure.append(seq)
        vector = d.vector if d is not None else None
        if vector is not None:
            self.spaces.setdefault(vector.space.encode(), u64(vector.dim))

    def refs_at(self, seq: int, mark: int = ALL) -> frozenset[str]:
        """The refers-to keys record ``seq`` has entries for: all its refs up to the ``mark``,
        past it those of its payload's subjects alone (tail.py)."""
        return self.refs[seq] if seq <= mark else self.payload.get(seq, frozenset())


def index_rows(keys: Keys, table: str, start: int, stop: int, mark: int = ALL
               ) -> tuple[list[bytes], list[bytes]]:
    """The entries ``table`` must hold for records [start, stop), as two lists: their keys and
    their values (u64 seqs), in seq order. Past the indexed-to ``mark`` (tail.py) a record has
    its id entry and its payload subjects' refers-to entries alone. (``refs``: those the records
    name; a record in ``keys.unsure`` may have more.)"""
    seqs = keys.seqs
    if table == "refs":
        names: list[bytes] = []
        values: list[bytes] = []
        for seq in range(start, stop):
            refs = keys.refs_at(seq, mark)
            if refs:
                names.extend(r.encode() for r in refs)
                values.extend([seqs[seq]] * len(refs))
        return names, values
    if table != "ids":  # braid, kind, idh: up to the mark
        stop = max(start, min(stop, mark + 1))
    if table == "idh":
        return id_digests(keys.ids[start:stop]), seqs[start:stop]
    column = {"ids": keys.ids, "braid": keys.braids, "kind": keys.kinds}[table]
    return column[start:stop], seqs[start:stop]


def lookups(txn: Any, db: Any, keys: Keys, start: int, stop: int, mark: int = ALL
            ) -> dict[str, int] | None:
    """Look up in ``txn`` every index entry records [start, stop) need (``index_rows``), each
    through its table's B-tree as reads look it up (a walk over the leaves would miss a damaged
    branch page): how many each table must hold for them, or None at the first one missing."""
    get = txn.get
    want: dict[str, int] = {}
    for table in ("ids", "idh", "braid", "kind", "refs"):
        if table not in db:
            continue
        names, seqs = index_rows(keys, table, start, stop, mark)
        want[table] = len(names)
        if table in DUPS:  # each (key, seq) pair found as it is stored
            if not all(map(txn.cursor(db[table]).set_key_dup, names, seqs)):
                return None
        elif [get(k, db=db[table]) for k in names] != seqs:
            return None
    return want


def lookups_below_mark(txn: Any, db: Any, keys: Keys, stop: int) -> dict[str, int] | None:
    """``lookups`` of records [1, stop) when they are all at or below the indexed-to mark (so
    every entry of theirs is written), else None."""
    mark = indexed_to(txn, db["meta"])
    return lookups(txn, db, keys, 1, stop, mark) if mark >= stop - 1 else None


def check_records(log: LogAccess, start: int, stop: int | None, progress: Progress | None, *,
                  nodes: bool = True, keys: Keys | None = None, read_from: int | None = None,
                  every: int = _PROGRESS) -> Head:
    """Check records [start, stop) (to the head when ``stop`` is None) as ``verify_bodies``
    does, each looked up through the B-tree; with ``nodes``, the Merkle tree's nodes each row
    keeps against those its leaf completes (after that row's chain); with ``keys``, collect
    their index entries (``keys`` then ends before ``start``). ``read_from``: the first seq
    read intact, as messages name it (``start``, unless an earlier range was checked by another
    process). ``progress(n)`` is told the records checked every ``every`` records and at the
    end. The head reached, or IntegrityError naming the first bad seq."""
    store = log.store
    start = max(start, 1)
    end = store.head().seq if stop is None else min(stop - 1, store.head().seq)
    prev = store.hash_at(start - 1)
    prev_hw = hw_of(store.body(start - 1)) if start > 1 else 0
    if keys is not None and keys.end != start - 1:
        raise ValueError(f"index keys of seq {start} on, after those of 1..{keys.end}")
    size = start - 1
    frontier = merkle.Frontier(size, store.tree_hashes(merkle.peaks(size))) if nodes else None
    expect = start
    hasher = blake3()  # one hasher, reset after each record (as chain.links)
    update, digest, reset = hasher.update, hasher.digest, hasher.reset
    for chunk, entries in _chunks(log, start, end + 1, start if read_from is None else read_from):
        made = frontier.completed(entries) if frontier else None
        for i, (seq, value, at, end_at, row) in enumerate(chunk):
            if seq != expect:
                raise IntegrityError(f"seq {expect} is missing from the log (next found: {seq})",
                                     seq=expect)
            entry = entries[i]
            update(prev + seq.to_bytes(8, "big") + entry)
            expected = digest()
            reset()
            found = value[:HASH_SIZE]
            if expected != found:
                raise IntegrityError(
                    f"chain broken at seq {seq}: expected hash {expected.hex()}, found "
                    f"{found.hex()}; the record or its hash was changed after it was written",
                    seq=seq, expected=expected, found=found)
            hw = int.from_bytes(value[HASH_SIZE:_LENGTH_AT], "big")
            d = None if row is not None else _intact(seq, value, entry, end_at, hw, prev_hw)
            env: Entry | GenericDelta | None = d
            if d is None:  # erased, or something is wrong: check_row's own steps name it
                env, d = check_row_parts(row or split_row(seq, value), prev_hw)
            prev, prev_hw = found, hw
            if made is not None and made[i] != value[at:end_at]:
                _node_break(seq, made[i], value[at:end_at])
            if keys is not None:
                keys.add(seq, env, d)
            expect += 1
            if progress is not None and (expect - start) % every == 0:
                progress(expect - start)
    if expect - 1 != end:
        raise IntegrityError(f"seq {expect} is missing from the log", seq=expect)
    if progress is not None:
        progress(end - start + 1 if end >= start else 0)
    return Head(end, store.hash_at(end)) if end >= start else Head(end, prev)


def _intact(seq: int, value: bytes, entry: bytes, at: int, hw: int, prev_hw: int
            ) -> GenericDelta | None:
    """The delta of the row ``value`` of ``seq`` (committed form ``entry``, salt and delta
    bytes from ``at``, high-water time ``hw``) when it holds together the common way
    (``check_row``'s checks, in one pass): its delta bytes decode, and with the commitment of its
    salt and bytes give its committed form byte for byte (so that form decodes, and holds that
    commitment and the delta's envelope), and its hw follows ``prev_hw``. None otherwise:
    ``check_row_parts`` then runs its steps one by one, to name what is wrong."""
    made = sha256(value[at:]).digest()  # of the salt and the delta bytes, as stored
    try:  # bytes not yet known to be the committed ones: whatever they raise, the steps name
        d = _decoder.decode(memoryview(value)[at + SALT_SIZE:])
        if form_of(seq, d, made) != entry:
            return None
    except Exception:  # msgspec's errors, and the UnicodeDecodeError it lets through
        return None
    ts = ts_micros(d.ts)
    return d if hw == (ts if ts > prev_hw else prev_hw) else None


def _node_break(seq: int, made: bytes, stored: bytes) -> None:
    """IntegrityError naming the first of the nodes record ``seq``'s leaf completes (``made``,
    level 1 first) whose hash differs from the one its row keeps (``stored``)."""
    level = next((i // NODE for i in range(0, len(made), NODE)
                  if made[i:i + NODE] != stored[i:i + NODE]), 0) + 1
    at = slice((level - 1) * NODE, level * NODE)
    raise tree_break(level, (seq >> level) - 1, made[at], stored[at])


#: A row as read: (seq, its stored bytes, where its tree nodes start, where they end, and its Row
#: when it is not of the common shape (then cut by ``split_row``), else None).
_Read = tuple[int, bytes, int, int, "Row | None"]


def _read(txn: Any, db: Any, start: int, stop: int, lo: int, hi: int
          ) -> tuple[list[_Read], list[bytes]]:
    """Rows [lo, hi), each looked up through the log's B-tree, and their committed forms. A
    row of the common shape (salt and delta bytes, as many nodes as its seq completes) is cut
    here; any other goes through ``split_row``, which refuses a malformed one."""
    out: list[_Read] = []
    entries: list[bytes] = []
    get = txn.get
    for seq in range(lo, hi):
        value = get(seq.to_bytes(8, "big"), db=db)
        if value is None:
            raise IntegrityError(
                f"seq {seq} is missing from the log: a read of it through the "
                f"log's B-tree finds nothing, below the head {stop - 1} (a record or "
                f"a page of the log is damaged); seqs {start}..{seq - 1} were read "
                f"intact. {RESTORE}", seq=seq)
        if len(value) > ENTRY_AT:
            k = value[_NODES_AT]
            at = ENTRY_AT + ((value[_LENGTH_AT] << 8) | value[_LENGTH_AT + 1])
            end = at + NODE * k
            if len(value) - end > SALT_SIZE and k == (seq & -seq).bit_length() - 1:
                out.append((seq, value, at, end, None))
                entries.append(value[ENTRY_AT:at])
                continue
        row = split_row(seq, value)
        at = ENTRY_AT + len(row.entry)  # the nodes follow the committed form
        out.append((seq, value, at, at + NODE * completes(seq), row))
        entries.append(row.entry)
    return out, entries


def _chunks(log: LogAccess, start: int, stop: int, read_from: int
            ) -> Iterator[tuple[list[_Read], list[bytes]]]:
    """The rows of [start, stop), a chunk per read transaction. An LMDB error (a damaged page
    LMDB met) is narrowed down to the first seq it cannot read, after every row before it
    (messages say the seqs from ``read_from`` were read intact)."""
    db = log.tables["log"]
    reader: Callable[..., Any] = log.read
    lo = start
    while lo < stop:
        hi = min(stop, lo + CHUNK)
        try:
            got = reader(lambda txn, lo=lo, hi=hi: _read(txn, db, read_from, stop, lo, hi),
                         buffers=False)
        except IntegrityError as e:
            if e.seq is not None:
                raise
            # LMDB met a damaged page somewhere in this chunk: read it a seq at a time to
            # hand on every record before the damage, then name the first it cannot read
            for seq in range(lo, hi):
                try:
                    one = reader(lambda txn, seq=seq: _read(txn, db, read_from, stop, seq, seq + 1),
                                 buffers=False)
                except IntegrityError as e2:
                    if e2.seq is not None:
                        raise
                    cause = e2.__cause__ or e2
                    raise IntegrityError(
                        f"the store's file is damaged where seq {seq} is stored ({cause}); "
                        f"seqs {read_from}..{seq - 1} were read intact. {RESTORE}",
                        seq=seq) from cause
                yield one
            raise  # the whole chunk failed, no seq alone does: report it as it came
        yield got
        lo = hi
