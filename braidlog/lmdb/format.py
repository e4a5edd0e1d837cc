"""The store's format on disk: its tables and their keys, the format version, the check that
opens an environment as a braidlog store, the upgrades of older formats, and the Merkle tree's
nodes, kept in the rows of the records that complete them.

Tables (all in one LMDB environment): ``log`` (seq -> the record's row, ``pack_row``), the indexes
``ids`` (id -> seq), ``idh`` (the id's time and a digest of it -> seq: the id index kept a
second time, in a tree of its own), ``braid``, ``kind`` and ``refs`` (key -> seqs, DUPSORT), ``spaces``
(vector space -> dimension), ``notes`` (issued checkpoint notes), ``ckpt`` (projection
checkpoints) and ``meta`` (format, engine, projections used). Seqs are big-endian u64 keys, so
LMDB's order is the log's.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
from blake3 import blake3

from .. import tree as merkle
from ..chain import GENESIS, HASH_SIZE, link
from ..delta import SALT_SIZE, GenericDelta, _decoder, committed_form
from ..erasure import erased_bytes, erased_delta
from ..errors import DecodeError, IntegrityError, StorageError
from ..store import Record, Row
from ..store.files import fsync_dir
from .env import Env

__all__ = ["FORMAT_VERSION", "INDEXED", "TABLES", "DUPS", "id_digest", "id_digests", "u64", "from_u64", "open_tables",
           "Peaks", "tree_node", "tree_nodes", "fill_nodes", "completes", "pack_row", "split_row",
           "create", "BEFORE", "erased_row", "row_erased_by", "row_node", "delta_of", "bytes_of",
           "records", "put_keys", "ENTRY_AT"]

FORMAT_VERSION = 5  # 2: the Merkle tree ("tree") and issued checkpoint notes ("notes");
#                    3: the id-digest index ("idh"); 4: the committed form (rows hold it and a
#                    salt and the tree nodes its leaf completes, so the tree has no table of
#                    its own), the chain over it and the tree in SHA-256 (RFC 6962); 5: the
#                    ``indexed-to`` mark (``INDEXED``): the braid, kind and id-digest entries
#                    and the envelope's refers-to entries of the records past it are written
#                    by a later commit (tail.py). An older store is upgraded on its first
#                    writable open, in one transaction; read-only, a format-4 store is read
#                    as it is (every record indexed) and an older one is refused.
#: meta: how the id-digest index is keyed. Present in every store this braidlog writes or
#: upgrades; a format-4 store without it was written before the index's keys began with the id's
#: time, and its index is rebuilt on the first writable open (``rekey_idh``).
IDH_KEYS, IDH_BY_TIME = b"idh-keys", b"time+blake2b-128"
ID_TIME = 10  # characters of a ULID that hold its millisecond time
#: meta: the seq up to which every record has all its index entries (format 5, tail.py).
INDEXED = b"indexed-to"
#: The oldest format read as it is, read-only, without its upgrade (its indexes are complete).
READS_AS_IS = 4
BEFORE = b"before-4"  # meta: the chain's head and tree root as they stood before the upgrade to 4
MAX_KEY = 511  # LMDB's longest key
U64 = 8
TABLES = ("meta", "log", "ids", "braid", "kind", "refs", "ckpt", "spaces", "notes", "idh")
DUPS = {"braid", "kind", "refs"}  # DUPSORT, not DUPFIXED: LMDB 0.9's compacting copy crashes on that
SINCE = {"notes": 2, "idh": 3}  # tables an older store lacks until it is upgraded
#: Tables an older store has that its upgrade removes: formats 2 and 3 kept the Merkle tree's
#: inner nodes in a table of their own; format 4 keeps each in the row of the record completing it.
RETIRED = ("tree",)


_ROW = HASH_SIZE + U64 + 3  # where the committed form starts in a row
ENTRY_AT = _ROW
NODE = HASH_SIZE  # a tree node's hash


def pack_row(chain_hash: bytes, hw: int, entry: bytes, nodes: bytes, salt: bytes, data: bytes
             ) -> bytes:
    """A record's row in the ``log`` table: chain hash (32) || hw (u64 BE) || len(entry) (u16 BE)
    || k (u8) || entry || the k tree nodes its leaf completes (32 each, lowest level first)
    || salt (16) || canonical delta bytes. An erased record's row (``erased_row``) has the seq of
    the delta that erased it (u64 BE) in place of the salt and delta bytes."""
    return b"".join((chain_hash, hw.to_bytes(U64, "big"), len(entry).to_bytes(2, "big"),
                     (len(nodes) // NODE).to_bytes(1, "big"), entry, nodes, salt, data))


def _end(value: Any) -> int:
    """Where the committed form and the tree nodes of a row end."""
    return _ROW + int.from_bytes(value[HASH_SIZE + U64:_ROW - 1], "big") + NODE * value[_ROW - 1]


def completes(seq: int) -> int:
    """How many tree nodes of level 1 or more the leaf of record ``seq`` completes: one per
    trailing zero bit of ``seq`` (its row keeps their hashes)."""
    return (seq & -seq).bit_length() - 1


def erased_row(value: Any, by: int) -> bytes:
    """The row of an erased record: ``value``'s up to its committed form and tree nodes, then
    ``by`` (the seq of the ``erased`` delta), and nothing of the salt and delta bytes."""
    return bytes(value[:_end(value)]) + by.to_bytes(U64, "big")


def row_erased_by(value: Any) -> int:
    """The seq of the delta that erased the record of this row, or 0 if it is not erased."""
    end = _end(value)
    return int.from_bytes(value[end:], "big") if len(value) - end == U64 else 0


def split_row(seq: int, value: Any) -> Row:
    """A row of the ``log`` table as a Row; IntegrityError if it cannot be one."""
    value = bytes(value)
    end = _end(value) if len(value) >= _ROW else len(value) + 1
    rest = len(value) - end
    if rest < 0 or (0 < rest <= SALT_SIZE and rest != U64) or value[_ROW - 1] != completes(seq):
        raise IntegrityError(f"the row of seq {seq} is {len(value)} bytes, which no record of "
                             "that seq is (its lengths were cut or changed after it was "
                             "written); run `braidlog verify`", seq=seq, expected=b"",
                             found=value[HASH_SIZE + U64:_ROW])
    n = end - NODE * value[_ROW - 1]
    if rest == U64:  # erased: the salt and the delta bytes are gone
        return Row(seq, value[:HASH_SIZE], int.from_bytes(value[HASH_SIZE:HASH_SIZE + U64], "big"),
                   value[_ROW:n], b"", b"", int.from_bytes(value[end:], "big"))
    return Row(seq, value[:HASH_SIZE], int.from_bytes(value[HASH_SIZE:HASH_SIZE + U64], "big"),
               value[_ROW:n], value[end:end + SALT_SIZE] if rest else b"",
               value[end + SALT_SIZE:])


def row_entry(value: Any) -> Any:
    """The committed form in a row (a slice of ``value``, copied or not as ``value`` is)."""
    return value[_ROW:_ROW + int.from_bytes(value[HASH_SIZE + U64:_ROW - 1], "big")]


def row_data(value: Any) -> Any:
    """The canonical delta bytes in a row (empty once erased)."""
    return value[_end(value) + SALT_SIZE:]


def delta_of(seq: int, value: Any) -> GenericDelta:
    """The delta a row holds: its canonical bytes decoded, or, once erased, the envelope its
    committed form keeps, marked erased (braidlog.erasure)."""
    if len(value) < _ROW:
        raise DecodeError(f"the record at seq {seq} is not a delta (its row is {len(value)} "
                          f"bytes, shorter than a row's {_ROW}-byte head)")
    data = row_data(value)
    if not data:
        by = row_erased_by(value)
        if by:
            return erased_delta(bytes(row_entry(value)), by)
    try:
        return _decoder.decode(data)
    except msgspec.MsgspecError as e:
        raise DecodeError(f"the record at seq {seq} is not a delta ({e})") from None


def bytes_of(value: Any) -> bytes:
    """The delta bytes of a row, those of its erased form once erased."""
    data = row_data(value)
    if not data:
        by = row_erased_by(value)
        if by:
            return erased_bytes(bytes(row_entry(value)), by)
    return data


def log_rows(txn: Any, db: Any, lo: int, hi: int, n: int, reverse: bool
             ) -> tuple[Sequence[int], list[bytes]]:
    """At most ``n`` rows of the ``log`` table ``db`` with seq in [lo, hi), from ``lo`` up (from
    ``hi`` down when ``reverse``), copied (a transaction without buffers): their seqs and values.

    Forward, the rows are read without their keys: a run whose first and last keys are u64
    seqs ``a`` and ``b`` and that holds ``b - a + 1`` rows holds those of ``a..b`` (LMDB's keys
    are unique and sorted, and u64 big-endian sorts as the numbers do). A run that is not so
    (only in a damaged log: a gap, a key that is no seq) is read again with its keys."""
    cur = txn.cursor(db)
    if reverse:
        if not cur.set_range(u64(hi)):
            if not cur.last():
                return (), []
        elif not cur.prev():
            return (), []
        lo_key = u64(lo)
        rows = [r for r in islice(cur.iterprev(), n) if r[0] >= lo_key]
    else:
        if not cur.set_range(u64(lo)):
            return (), []
        first = cur.key()
        values = list(islice(cur.iternext(keys=False), max(0, min(n, hi - from_u64(first)))))
        last = cur.key() or (cur.last() and cur.key())
        if len(first) == len(last) == U64 and from_u64(last) - from_u64(first) + 1 == len(values):
            return range(from_u64(first), from_u64(last) + 1), values
        cur.set_range(u64(lo))
        hi_key = u64(hi) if hi < 2**63 else None
        rows = [r for r in islice(cur.iternext(), n) if hi_key is None or r[0] < hi_key]
    return [from_u64(k) for k, _ in rows], [v for _, v in rows]


def records(chunks: Iterable[tuple[Iterable[int], list[bytes]]]) -> Iterator[Record]:
    """The records of log rows read a chunk at a time (each chunk: the rows' seqs and their
    values, copied out of their transaction), decoded as the caller pulls them.

    Each is ``Record(seq, chain hash, delta_of(seq, row))``, with ``row_data``'s arithmetic
    written out in the loop: a scan's time a record beyond msgspec's decode is Python's calls.
    A row that is erased, or is not what its lengths say, goes through ``delta_of`` itself."""
    decode, slow, record = _decoder.decode, delta_of, Record
    # pack_row's layout: the hash, hw, the entry's length (u16) at `lengths`, the node count
    # (u8) at `k`, then the entry, the nodes and the salt; the delta bytes from there on
    h, lengths, k, node, data_at = HASH_SIZE, HASH_SIZE + U64, _ROW - 1, NODE, _ROW + SALT_SIZE
    for seqs, values in chunks:
        for seq, value in zip(seqs, values, strict=False):
            try:
                data = value[data_at + (value[lengths] << 8 | value[lengths + 1]) + node * value[k]:]
                delta = decode(data) if data else slow(seq, value)
            except (IndexError, msgspec.MsgspecError):
                delta = slow(seq, value)  # raises what the row deserves
            yield record(seq, value[:h], delta)


def row_node(value: Any, level: int) -> bytes | None:
    """The hash of the node of ``level`` (1 or more) that this row's leaf completes, or None if
    it completes none of that level."""
    if not 1 <= level <= value[_ROW - 1]:
        return None
    at = _end(value) - NODE * (value[_ROW - 1] - level + 1)
    return bytes(value[at:at + NODE])


class Keys(msgspec.Struct):
    """The envelope fields an index is keyed by, decoded without the rest of the record."""

    id: str
    braid_id: str
    kind: str


decode_keys = msgspec.msgpack.Decoder(Keys).decode


def id_digest(delta_id: str) -> bytes:
    """The key of a delta id in the id-digest index: the id index kept a second time, in a tree
    of its own, so that no single damaged page can hide an id from both. The id's first ten
    characters (a ULID's millisecond time) lead, then BLAKE2b-128 of the id: deltas appended in
    time order add keys at the tree's right edge, as they do to ``ids``, instead of at a random
    leaf each (which made the index half of what a batched commit wrote at 100,000 records)."""
    return delta_id[:ID_TIME].encode() + hashlib.blake2b(delta_id.encode(), digest_size=16).digest()


def id_digests(ids: list[bytes]) -> list[bytes]:
    """``id_digest`` of each of ``ids`` (delta ids as UTF-8 bytes), for many at once."""
    b2 = hashlib.blake2b
    return [i[:ID_TIME] + b2(i, digest_size=16).digest() if i.isascii() else id_digest(i.decode())
            for i in ids]


def put_keys(cur: Any, rows: list[tuple[bytes, bytes]]) -> None:
    """Put new keys (none of them in the table: the append checked both id indexes) through
    ``cur``, sorted; appended (MDB_APPEND) when they all sort after the table's last key, as a
    batch of new ULIDs does, so that the pages they fill are filled whole (an ordinary put
    splits a full page in the middle, leaving both halves half empty for good)."""
    rows.sort()
    if cur.last() and bytes(cur.key()) >= rows[0][0]:
        cur.putmulti(rows, overwrite=False)
    elif cur.putmulti(rows, append=True)[1] != len(rows):
        raise StorageError("an id index refused keys in order: it is damaged",
                           hint="run `braidlog verify`, then `braidlog repair --indexes`")


def u64(n: int) -> bytes:
    return n.to_bytes(U64, "big")


def from_u64(b: bytes | memoryview) -> int:
    return int.from_bytes(b, "big")


def open_tables(env: Env) -> None:
    """Check an environment is a braidlog store of a format this code reads, then open its
    tables (creating them in a new store, with its format, in one transaction). Runs once per
    environment, before any other use."""
    path = env.path
    names = env.read(lambda txn: {bytes(k) for k, _ in txn.cursor()}, buffers=False)
    if not names and env.readonly:
        raise StorageError(f"{path} is an empty store", hint="run `braidlog init` first")
    if names and b"meta" not in names:
        raise StorageError(f"{path} is an LMDB environment but not a braidlog store",
                           hint="open it with lmdb directly, or give another path")
    if names:  # an existing store: its format is checked before anything is opened or written
        meta = env.open_tables(["meta"], set(), create=False)["meta"]
        raw = env.read(lambda txn: copied(txn.get(b"format", db=meta)))
        version = int(raw) if raw is not None and raw.isdigit() else 0
        if version > FORMAT_VERSION:
            raise StorageError(
                f"{path} has format version {version}; this braidlog reads up to {FORMAT_VERSION}",
                hint="upgrade braidlog to open it")
        if version < 1:
            raise _interrupted(env, names)
        known = {t.encode() for t in (*TABLES, *(RETIRED if version < FORMAT_VERSION else ()))}
        foreign = sorted(n.decode(errors="replace") for n in names - known)
        if foreign:
            raise StorageError(f"{path} is not a braidlog store: it holds {', '.join(foreign)}, "
                               "which braidlog never writes", hint="give another path")
        missing = [t for t in TABLES if t.encode() not in names and SINCE.get(t, 1) <= version]
        if missing:  # never recreated empty: an empty id index would let a retry write twice
            raise StorageError(f"{path} lacks the table(s) {', '.join(missing)}: the store is "
                               "damaged, or was not written by braidlog",
                               hint="restore it from a backup")
        if version < READS_AS_IS and env.readonly:
            raise StorageError(
                f"{path} has format version {version}, which this braidlog reads only once it is "
                f"upgraded to format {FORMAT_VERSION} (its records are re-encoded and re-chained "
                "once; docs/operations.md#upgrading-a-store)",
                hint=f"open it writable once: `braidlog --store {path} init` upgrades it in "
                "place (so does braidlog.open(path) or LmdbLog(path)); stop every older braidlog "
                "using it first")
        env.db = env.open_tables([t for t in (*TABLES, *RETIRED) if t.encode() in names], DUPS,
                                 create=False)
        if version < FORMAT_VERSION and not env.readonly:
            version = upgrade(env, version)
        elif version < FORMAT_VERSION:
            pass  # a format-4 store read as it is: no mark, every record indexed
        elif not idh_current(env):
            if env.readonly:
                raise StorageError(
                    f"{path} was written by a development build of format {version} whose "
                    "id-digest index is keyed the old way; it is rebuilt from the log once",
                    hint=f"open it writable once: `braidlog --store {path} init` rebuilds "
                    "the index in place (so does braidlog.open(path) or LmdbLog(path))")
            env.write(lambda txn: rekey_idh(txn, env.db))
    else:
        env.db = env.write(lambda txn: _stamp(env, txn))
        version = FORMAT_VERSION
    env.format_version = version


def _stamp(env: Env, txn: Any) -> dict[str, Any]:
    """Every table and the format version, written in ``txn``: a store is complete or absent."""
    db = {t: env.env.open_db(t.encode(), txn=txn, dupsort=t in DUPS) for t in TABLES}
    txn.put(b"format", str(FORMAT_VERSION).encode(), db=db["meta"])
    txn.put(b"engine", b"braidlog", db=db["meta"])
    txn.put(IDH_KEYS, IDH_BY_TIME, db=db["meta"])
    txn.put(INDEXED, u64(0), db=db["meta"])
    return db


def _interrupted(env: Env, names: set[bytes]) -> StorageError:
    """The error for a store with no format version: the leftover of a creation an earlier
    braidlog had not finished (its tables were made, its version not yet written), or not a
    braidlog store at all."""
    empty = True
    if b"log" in names:
        log = env.open_tables(["log"], set(), create=False)["log"]
        empty = env.read(lambda txn: txn.stat(log)["entries"] == 0)
    if empty:
        return StorageError(
            f"{env.path} has no braidlog format version and holds no records: it is what is left "
            "of a store whose creation was interrupted (a braidlog before format 4 created a "
            "store in two steps)", hint=f"remove the directory (`rm -r {env.path}`) and open or "
            "`braidlog init` it again; nothing is lost, it holds no records")
    return StorageError(f"{env.path} has no braidlog format version but holds records",
                        hint="not a braidlog store, or a damaged one: restore it from a backup")


def create(path: Path, map_size: int) -> None:
    """Create a store at ``path`` (absent, or an empty directory) atomically: it is built in a
    directory beside it, every table and the format version in one synced transaction, then its
    file is linked into place. A crash at any point leaves no store at ``path`` (at most an
    empty directory, which a later open creates the store in) or a complete one; a build left
    beside it by a crash is removed by the next creation."""
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    sweep(parent, path.name)
    aside = parent / f".{path.name}.creating.{os.getpid()}.{secrets.token_hex(4)}"
    aside.mkdir()
    try:
        env = Env(aside, readonly=False, create=True, durable=True, map_size=map_size,
                  tables=TABLES)
        try:
            env.write(lambda txn: _stamp(env, txn))
            env.sync()
        finally:
            env.close()
        path.mkdir(exist_ok=True)
        fsync_dir(parent)
        try:
            os.link(aside / "data.mdb", path / "data.mdb")  # atomic, and never replaces a file
        except FileExistsError:
            pass  # another process created it meanwhile: its store is complete
        except OSError as e:
            raise StorageError(f"cannot create the store at {path}: {e}",
                               hint="check the directory's permissions and filesystem") from e
        fsync_dir(path)
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def sweep(parent: Path, name: str) -> None:
    """Remove the builds a crashed creation of ``name`` left in ``parent`` (their process is gone)."""
    prefix = f".{name}.creating."
    try:
        found = [p for p in parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return
    for p in found:
        try:
            pid = int(p.name[len(prefix):].split(".")[0])
            os.kill(pid, 0)
            if pid == os.getpid():
                raise ProcessLookupError
        except ProcessLookupError:
            shutil.rmtree(p, ignore_errors=True)
        except (ValueError, PermissionError, OSError):
            continue




def upgrade(env: Env, version: int) -> int:
    """Bring a store of an older format up to this one, in one transaction. From format 4: the
    ``indexed-to`` mark at its head (its indexes are complete). From formats 1 to 3 also: the
    tables it lacks, built from the log; every record given a salt and its committed form,
    re-chained, and the Merkle tree rebuilt in SHA-256 over the committed forms. The chain's
    head and the tree's root as they stood before are kept in meta (``BEFORE``) so heads and
    checkpoints written down earlier can still be answered for
    (docs/operations.md#upgrading-a-store)."""
    added = [t for t, since in SINCE.items() if since > version]
    total = env.read(lambda txn: txn.stat(env.db["log"])["entries"])
    progress = _Progress(env.path, total if version < 4 else 0)

    def fn(txn: Any) -> Any:
        tables = {t: env.env.open_db(t.encode(), txn=txn, dupsort=t in DUPS) for t in added}
        db = {**env.db, **tables}
        txn.delete(INDEXED, db=db["meta"])  # none before format 5: every record is indexed
        if version < 4:
            rechain(txn, db, progress)
        if "idh" in tables:
            fill_idh(txn, db)
        elif version < 4 or txn.get(IDH_KEYS, db=db["meta"]) != IDH_BY_TIME:
            rekey_idh(txn, db)  # format 3's idh, keyed by the digest alone (or a dev build's 4)
        for t in RETIRED:
            if t in db:
                txn.drop(db[t], delete=True)
        cur = txn.cursor(db["log"])
        txn.put(INDEXED, bytes(cur.key()) if cur.last() else u64(0), db=db["meta"])
        txn.put(b"format", str(FORMAT_VERSION).encode(), db=env.db["meta"])
        return tables
    env.db.update(env.write(fn))
    for t in RETIRED:
        env.db.pop(t, None)
    progress.done()
    return FORMAT_VERSION


class _Progress:
    """A line on stderr while a store is upgraded, on a terminal only."""

    def __init__(self, path: Path, total: int) -> None:
        self.path, self.total = path, total
        self.on = total >= 10_000 and sys.stderr.isatty()

    def __call__(self, n: int) -> None:
        if self.on:
            print(f"\rupgrading {self.path} to format {FORMAT_VERSION}: {n:,} of {self.total:,} "
                  "records", end="", file=sys.stderr, flush=True)

    def done(self) -> None:
        if self.on:
            print(file=sys.stderr)


def _old_leaf(body: bytes) -> bytes:
    return blake3(b"\x00" + body).digest()


def _old_root(leaves: list[bytes]) -> bytes:
    """The root of the format-2/3 tree (RFC 9162 with BLAKE3) over ``leaves``' hashes: its peaks,
    folded right to left."""
    if not leaves:
        return blake3(b"").digest()
    stack: list[tuple[int, bytes]] = []  # (size, hash) of complete subtrees, left to right
    for h in leaves:
        size = 1
        while stack and stack[-1][0] == size:
            left = stack.pop()[1]
            h, size = blake3(b"\x01" + left + h).digest(), size * 2
        stack.append((size, h))
    h = stack[-1][1]
    for _, left in reversed(stack[:-1]):
        h = blake3(b"\x01" + left + h).digest()
    return h


def before_hashes(rows: Any, sizes: Any) -> dict[int, tuple[bytes, bytes]]:
    """For each of ``sizes``, the chain hash and tree root that format 3 gave records 1..size,
    recomputed from their rows (``store.Row``, from seq 1): ``BLAKE3(prev || seq || hw || delta
    bytes)`` and the BLAKE3 tree over ``hw || delta bytes``. StorageError when a record's delta
    bytes were erased."""
    want, out = set(sizes), {}
    prev, leaves = GENESIS, []
    if 0 in want:
        out[0] = (GENESIS, _old_root([]))
    for row in rows:
        if row.seq > max(want, default=0):
            break
        if not row.data:
            raise StorageError(f"record seq {row.seq} was erased, so the chain as it stood "
                               "before the upgrade to format 4 cannot be recomputed past it",
                               hint="compare with a head or checkpoint written down after the "
                               "upgrade")
        body = row.hw.to_bytes(U64, "big") + row.data
        prev = blake3(prev + row.seq.to_bytes(8, "big") + body).digest()
        leaves.append(_old_leaf(body))
        if row.seq in want:
            out[row.seq] = (prev, _old_root(leaves))
    return out


def rechain(txn: Any, db: dict[str, Any], progress: Any) -> None:
    """Rewrite every row of a format-1..3 store (chain hash || hw || delta bytes, chained over
    hw || delta bytes) as a format-4 row, after checking the old chain, with the tree nodes its
    leaf completes; keep the old head and root in meta."""
    log, prev_old, prev_new = db["log"], GENESIS, GENESIS
    seq = 0
    old_leaves: list[bytes] = []
    rows: list[tuple[bytes, bytes]] = []
    frontier = merkle.Frontier()
    cur = txn.cursor(log)
    for key, value in cur:
        seq += 1
        if from_u64(key) != seq:
            raise IntegrityError(f"cannot upgrade: seq {seq} is missing from the log; nothing was "
                                 "changed (restore the store from a backup)", seq=seq)
        value = bytes(value)
        found, body = value[:HASH_SIZE], value[HASH_SIZE:]
        if blake3(prev_old + key + body).digest() != found:
            raise IntegrityError(f"cannot upgrade: the chain is broken at seq {seq}; nothing was "
                                 "changed (run `braidlog verify` with the braidlog that wrote it, "
                                 "or restore it from a backup)", seq=seq)
        prev_old = found
        old_leaves.append(_old_leaf(body))
        data = body[U64:]
        try:
            d = _decoder.decode(data)
        except msgspec.MsgspecError as e:
            raise IntegrityError(f"cannot upgrade: the record at seq {seq} is not a delta ({e}); "
                                 "nothing was changed", seq=seq) from None
        salt = os.urandom(SALT_SIZE)
        entry = committed_form(seq, d, salt, data)
        prev_new = link(prev_new, seq, entry)
        nodes = frontier.completed([entry])[0]
        rows.append((bytes(key), pack_row(prev_new, from_u64(body[:U64]), entry, nodes, salt, data)))
        if len(rows) >= 4096:
            _put_rows(txn, log, rows)
            progress(seq)
    _put_rows(txn, log, rows)
    progress(seq)
    old_root = _old_root(old_leaves)
    txn.put(BEFORE, u64(seq) + prev_old + old_root, db=db["meta"])
    notes = db.get("notes")
    if notes is not None:  # notes sign the BLAKE3 roots: kept aside in meta, no longer issued
        kept = [(bytes(k), bytes(v)) for k, v in txn.cursor(notes)]
        for k, v in kept:
            txn.put(BEFORE + b"-note:" + k, v, db=db["meta"])
        txn.drop(notes, delete=False)


def _put_rows(txn: Any, log: Any, rows: list[tuple[bytes, bytes]]) -> None:
    txn.cursor(log).putmulti(rows, overwrite=True)
    rows.clear()


class Before(NamedTuple):
    """The chain's head and the tree's root when the store was upgraded to format 4."""

    seq: int
    hash: bytes
    root: bytes


def before(txn: Any, db: dict[str, Any]) -> Before | None:
    raw = txn.get(BEFORE, db=db["meta"])
    if raw is None:
        return None
    raw = bytes(raw)
    return Before(from_u64(raw[:U64]), raw[U64:U64 + HASH_SIZE], raw[U64 + HASH_SIZE:])


def fill_idh(txn: Any, db: dict[str, Any]) -> None:
    """The id-digest index, from the log (the truth), not from the id index: up to the
    ``indexed-to`` mark where the store keeps one (the records past it have no entry yet)."""
    mark = txn.get(INDEXED, db=db["meta"])
    upto = u64(2**63 - 1) if mark is None else bytes(mark)
    rows = ((id_digest(decode_keys(row_entry(value)).id), bytes(key))
            for key, value in txn.cursor(db["log"]) if bytes(key) <= upto)
    txn.cursor(db["idh"]).putmulti(rows, overwrite=False)
    txn.put(IDH_KEYS, IDH_BY_TIME, db=db["meta"])


def rekey_idh(txn: Any, db: dict[str, Any]) -> None:
    """The id-digest index emptied and built again from the log with today's keys."""
    txn.drop(db["idh"], delete=False)
    fill_idh(txn, db)


def idh_current(env: Env) -> bool:
    """Whether the store's id-digest index is keyed as ``id_digest`` keys it."""
    return env.read(lambda txn: copied(txn.get(IDH_KEYS, db=env.db["meta"]))) == IDH_BY_TIME


def copied(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


class Peaks:
    """The hashes of the tree's peaks after an append this process made, with the log's size
    and chain hash they go with: the next append starts from them instead of reading them,
    once the log's record at that size still holds that chain hash (which covers every record
    up to it, so the same hash means the same tree; a failed write leaves a key no log has)."""

    __slots__ = ("size", "chain", "stack")

    def __init__(self) -> None:
        self.size, self.chain = -1, b""
        self.stack: list[bytes] = []


def tree_node(txn: Any, log: Any, node: merkle.Node) -> bytes | None:
    """The hash of the complete subtree ``node`` (level, index) as the ``log`` table holds it: a
    leaf's from its record's committed form, an inner node's from the row of the record whose
    leaf completes it (seq ``(index + 1) << level``); None when that record is not in the log."""
    level, index = node
    seq = (index + 1) << level
    if level < 0 or index < 0 or seq >= 2**63:
        return None
    value = txn.get(u64(seq), db=log)
    if value is None:
        return None
    if level == 0:
        return merkle.leaf_hash(bytes(row_entry(value)))
    found = row_node(value, level)
    if found is None:
        raise IntegrityError(f"the row of seq {seq} lacks the Merkle tree node ({level}, {index}) "
                             "its leaf completes; run `braidlog verify`", seq=seq)
    return found


def tree_nodes(txn: Any, db: dict[str, Any], size: int, entries: list[bytes],
               peaks: Peaks | None = None, chain: bytes | None = None) -> list[bytes]:
    """For each of ``entries`` (the committed forms of the records appended after ``size``), the
    tree nodes its leaf completes (``pack_row``'s ``nodes``), in the append's txn.

    Starts from the peaks of ``size`` (popcount(size) nodes, read from the log unless ``peaks``
    holds them for this very log); ``peaks`` is left holding the new peaks, keyed by ``chain``,
    the chain hash of the last entry's record."""
    if peaks is not None and peaks.size == size and _chain_at(txn, db, size) == peaks.chain:
        hashes = peaks.stack
    else:
        found = [tree_node(txn, db["log"], node) for node in merkle.peaks(size)]
        if None in found:
            raise IntegrityError(f"the log lacks a record below its head (seq {size}) that the "
                                 "Merkle tree's peaks need; run `braidlog verify`", seq=size)
        hashes = [h for h in found if h is not None]
    frontier = merkle.Frontier(size, hashes)
    nodes = frontier.completed(entries)
    if peaks is not None and chain is not None:
        peaks.size, peaks.chain, peaks.stack = frontier.size, chain, frontier.stack
    return nodes


def _chain_at(txn: Any, db: dict[str, Any], seq: int) -> bytes | None:
    """The chain hash of record ``seq`` as the log holds it (None for seq 0 or a missing one)."""
    value = txn.get(u64(seq), db=db["log"]) if seq > 0 else None
    return None if value is None else bytes(value[:HASH_SIZE])


def fill_nodes(txn: Any, db: Mapping[str, Any]) -> int:
    """Write into every row the tree nodes its leaf completes, recomputed from the committed
    forms, where they differ from those it holds (a repair); the number of rows rewritten."""
    frontier = merkle.Frontier()
    log = db["log"]
    fixed: list[tuple[bytes, bytes]] = []
    for key, value in txn.cursor(log):
        seq = from_u64(key)
        if seq != frontier.size + 1:
            raise IntegrityError(f"seq {frontier.size + 1} is missing from the log",
                                 seq=frontier.size + 1)
        nodes = frontier.completed([bytes(row_entry(value))])[0]
        if value[_ROW - 1] != completes(seq):
            raise IntegrityError(f"the row of seq {seq} names {value[_ROW - 1]} tree nodes where "
                                 f"its leaf completes {completes(seq)}: it cannot be read "
                                 "safely; restore the store from a backup", seq=seq)
        end = _end(value)
        if bytes(value[end - len(nodes):end]) != nodes:
            fixed.append((bytes(key), bytes(value[:end - len(nodes)]) + nodes + bytes(value[end:])))
    if fixed:
        txn.cursor(log).putmulti(fixed, overwrite=True)
    return len(fixed)
